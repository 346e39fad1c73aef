//! Resource hygiene: fault cases leak no RDMA objects, a persistent server does not grow.

use super::mid_run::{client_killed_mid_run, server_killed_mid_run};
use super::wire::{endpoint, frame_json, greet_as_peer, pingpong_spec, read_frame};
use super::{HOST, LIMIT};
use crate::common::*;
use crate::require_rxe0;
use serde_json::json;
use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

/// rxe0's object counts from `rdma resource show`: (pd, cq, qp, mr).
pub(crate) fn rxe0_resources() -> [u64; 4] {
    let o = Command::new("rdma")
        .args(["resource", "show"])
        .output()
        .expect("run rdma resource show");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("rxe0:"))
        .unwrap_or_else(|| panic!("no rxe0 in rdma resource show: {text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let count = |k: &str| -> u64 {
        let i = words
            .iter()
            .position(|w| *w == k)
            .unwrap_or_else(|| panic!("no {k} in {line:?}"));
        words[i + 1].parse().unwrap()
    };
    [count("pd"), count("cq"), count("qp"), count("mr")]
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn fault_cases_leak_no_rdma_resources() {
    require_rxe0();
    let base = rxe0_resources();
    eprintln!("faults: baseline pd/cq/qp/mr {base:?}");
    // A client killed mid-run, a server killed mid-run, a fake client that vanished after its
    // request was accepted.
    client_killed_mid_run(
        "hygiene: client killed",
        19220,
        &["pingpong", "-p", "19220", "--timeout", "3s"],
        &["pingpong", HOST, "-p", "19220", "-n", "100000000", "-v"],
    );
    server_killed_mid_run(
        "hygiene: server killed",
        19221,
        &["bw", "-p", "19221"],
        &[
            "bw",
            HOST,
            "-p",
            "19221",
            "-D",
            "20s",
            "-q",
            "2",
            "--timeout",
            "3s",
            "-v",
        ],
    );
    let server = spawn_rdmadiag(&["pingpong", "-p", "19222", "--timeout", "3s"]);
    wait_listening(19222, LIMIT);
    let mut peer = TcpStream::connect((HOST, 19222)).unwrap();
    greet_as_peer(&mut peer);
    peer.write_all(&frame_json(&json!({"type": "request",
        "spec": pingpong_spec(json!(64), json!(20)), "endpoint": endpoint()})))
        .unwrap();
    let _ = read_frame(&mut peer);
    drop(peer);
    let o = wait_limit(server, LIMIT, "server of a vanished fake client");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let t = Instant::now();
    loop {
        let now = rxe0_resources();
        if now == base {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "rxe0 objects (pd/cq/qp/mr) {now:?}, baseline {base:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "faults: resources back to baseline {:.2}s after the last process",
        t.elapsed().as_secs_f64()
    );
}

/// VmRSS of a process, KiB.
fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn persistent_server_memory_does_not_grow() {
    require_rxe0();
    let mut server = spawn_rdmadiag(&["pingpong", "--persist", "-p", "19223"]);
    wait_listening(19223, LIMIT);
    let pid = server.id();
    let budget = Duration::from_secs(150);
    let t = Instant::now();
    let mut at20 = None;
    let mut runs = 0;
    while runs < 200 && t.elapsed() < budget {
        let o = wait_limit(
            spawn_rdmadiag(&["pingpong", HOST, "-p", "19223", "-n", "2", "-s", "64"]),
            LIMIT,
            "quick client",
        );
        assert!(o.status.success(), "run {}: {}", runs + 1, stderr(&o));
        runs += 1;
        if runs == 20 {
            std::thread::sleep(Duration::from_millis(100));
            at20 = Some(rss_kib(pid));
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let end = rss_kib(pid);
    let at20 = at20.expect("at least 20 runs fit");
    assert!(
        server.try_wait().unwrap().is_none(),
        "the server still runs"
    );
    server.kill().unwrap();
    let _ = server.wait();
    eprintln!(
        "faults: persist server RSS {at20} KiB after run 20, {end} KiB after run {runs} \
         ({:.1}s)",
        t.elapsed().as_secs_f64()
    );
    assert!(runs >= 60, "only {runs} runs fit in {budget:?}");
    assert!(
        end < at20 + 2048,
        "RSS grew from {at20} KiB to {end} KiB over {} runs",
        runs - 20
    );
}
