//! Silent peers: every wait times out naming what it waited for.

use super::wire::{fake_server, greeting, hello};
use super::{HOST, LIMIT, failed_cleanly};
use crate::common::*;
use crate::require_rxe0;
use rdmadiag::connect::control::PROTOCOL_VERSION;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long a side with `--timeout 2s` may take to give up on a silent peer and exit: the 2 s,
/// plus process exit and device teardown, which took up to 3 s under TCG on a loaded CI host
/// (5.02 s seen); a hang would take until LIMIT.
const SILENT_BOUND: Duration = Duration::from_secs(8);

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn silent_peers_time_out_naming_the_wait() {
    require_rxe0();
    // Connects and says nothing.
    let server = spawn_rdmadiag(&["pingpong", "-p", "19212", "--timeout", "2s"]);
    wait_listening(19212, LIMIT);
    let t = Instant::now();
    let peer = TcpStream::connect((HOST, 19212)).unwrap();
    let me = peer.local_addr().unwrap().to_string();
    let (line, took) = failed_cleanly("silent peer", server, LIMIT, t, "server with a silent peer");
    drop(peer);
    assert!(
        line.contains("timed out") && line.contains("greeting") && line.contains(&me),
        "{line}"
    );
    assert!(took < SILENT_BOUND, "took {took:?}");

    // Greets, then stops halfway through its hello frame.
    let server = spawn_rdmadiag(&["pingpong", "-p", "19213", "--timeout", "2s"]);
    wait_listening(19213, LIMIT);
    let mut peer = TcpStream::connect((HOST, 19213)).unwrap();
    let me = peer.local_addr().unwrap().to_string();
    peer.write_all(&greeting(PROTOCOL_VERSION)).unwrap();
    let h = hello();
    peer.write_all(&h[..h.len() / 2]).unwrap();
    let t = Instant::now();
    let (line, took) = failed_cleanly(
        "peer silent mid-frame",
        server,
        LIMIT,
        t,
        "server with a peer stuck mid-frame",
    );
    drop(peer);
    assert!(
        line.contains("timed out") && line.contains("hello") && line.contains(&me),
        "{line}"
    );
    assert!(took < SILENT_BOUND, "took {took:?}");

    // A server that accepts and says nothing, for the client role.
    let fake = fake_server(19214, |s| {
        std::thread::sleep(Duration::from_secs(6));
        drop(s);
    });
    let client = spawn_rdmadiag(&["pingpong", HOST, "-p", "19214", "--timeout", "2s"]);
    let t = fake.accepted_at();
    let (line, took) = failed_cleanly(
        "silent server, client role",
        client,
        LIMIT,
        t,
        "client of a silent server",
    );
    assert!(
        line.contains("timed out") && line.contains("greeting") && line.contains("10.77.0.1:19214"),
        "{line}"
    );
    assert!(took < SILENT_BOUND, "took {took:?}");
    fake.join();
}
