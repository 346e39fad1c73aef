//! The RoCE traffic class on the wire: `--tclass` becomes the IP TOS byte of the RoCE v2 packets
//! between two guests, seen by tcpdump on fab1's eth0.
//!
//! It needs two guests: measured in the single-guest lab, a client and server both on rxe0 at
//! 10.77.0.1 never put a packet on dummy0 (tcpdump on dummy0 and on `any` captured 0 packets of
//! UDP 4791 during a 50 x 4 KiB bw run): rxe hands a packet whose destination MAC is its own
//! netdev's straight to its receive path. Between fab1 and fab2 the packets cross the bridge.

use super::BIN;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test port of the server on fab2 (away from the fabric tests' ports).
const PORT: &str = "18790";

/// Fail loudly unless this is fab1 of a fabric lab with fab2 in it.
fn require_fab1_and_fab2() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_eq!(
        host.trim(),
        "fab1",
        "not fab1 of a fabric lab: this test must run inside `scripts/lab --hosts N` (N >= 2)"
    );
    let o = Command::new("tcpdump")
        .arg("--version")
        .output()
        .expect("tcpdump must be installed (scripts/setup installs it)");
    assert!(o.status.success(), "tcpdump --version failed");
}

/// A persistent rdmadiag server on fab2, started through srun; stopped when dropped.
struct Fab2Server(Child);

impl Fab2Server {
    fn start() -> Fab2Server {
        let child = Command::new("srun")
            .args([
                "-w",
                "fab2",
                "-N1",
                "-n1",
                BIN,
                "bw",
                "--persist",
                "-p",
                PORT,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start srun");
        let server = Fab2Server(child);
        // A bare TCP connection is one failed client to a persistent server: it keeps serving.
        let addr = format!("fab2:{PORT}")
            .to_socket_addrs()
            .expect("fab2 resolves")
            .next()
            .unwrap();
        let t = Instant::now();
        while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the server on fab2 did not listen on {addr} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        server
    }
}

impl Drop for Fab2Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The TOS bytes tcpdump -v shows for the first packets of UDP port 4791 on eth0 while a bw client
/// runs with `extra`.
fn tos_bytes_on_the_wire(extra: &[&str]) -> BTreeSet<String> {
    let mut dump = Command::new("timeout")
        .args(["60", "tcpdump", "-i", "eth0", "-c", "8", "-nn", "-v", "-l"])
        .args(["udp", "port", "4791"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tcpdump");
    // tcpdump says "listening on eth0" on stderr once it captures.
    let mut err = BufReader::new(dump.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).expect("tcpdump stderr");
    assert!(line.contains("listening on"), "tcpdump: {line}");
    let mut args = vec![
        "bw",
        "fab2",
        "-p",
        PORT,
        "-n",
        "20",
        "-s",
        "4K",
        "--timeout",
        "20s",
    ];
    args.extend_from_slice(extra);
    let client = Command::new(BIN)
        .args(&args)
        .output()
        .expect("run the bw client");
    assert!(
        client.status.success(),
        "bw {args:?} failed: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    let out = dump.wait_with_output().expect("tcpdump output");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let tos: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_once("IP (tos ").map(|(_, r)| r))
        .filter_map(|r| r.split([',', ')']).next())
        .map(str::to_string)
        .collect();
    assert!(
        !tos.is_empty(),
        "no RoCE v2 packet captured on eth0 ({args:?}): {text}"
    );
    eprintln!("bw {extra:?}: IP TOS on the wire {tos:?}");
    tos
}

#[test]
#[ignore = "lab-fabric: needs fab1 and fab2 of scripts/lab --hosts N"]
fn f_the_traffic_class_is_the_ip_tos_byte_of_the_roce_v2_packets() {
    require_fab1_and_fab2();
    let _server = Fab2Server::start();
    let want = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        tos_bytes_on_the_wire(&[]),
        want(&["0x0"]),
        "without --tclass"
    );
    assert_eq!(
        tos_bytes_on_the_wire(&["--tclass", "104"]),
        want(&["0x68"]),
        "--tclass 104 is DSCP 26"
    );
    assert_eq!(
        tos_bytes_on_the_wire(&["--cm", "--tclass", "0x68"]),
        want(&["0x68"]),
        "--cm: rdma_cm's ToS"
    );
}
