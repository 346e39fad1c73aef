//! Several clients at once against --persist: each runs or hears that the server is busy.

use super::{HOST, LIMIT};
use crate::common::*;
use crate::require_rxe0;
use std::process::Child;
use std::time::Instant;

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn concurrent_clients_run_or_hear_busy() {
    require_rxe0();
    // Generous deadlines: under TCG on a busy host a handshake thread can wait seconds for CPU.
    let mut server = spawn_rdmadiag(&["bw", "--persist", "-p", "19219", "--timeout", "10s"]);
    wait_listening(19219, LIMIT);
    let t = Instant::now();
    let clients: Vec<Child> = (0..3)
        .map(|_| spawn_rdmadiag(&["bw", HOST, "-p", "19219", "-D", "2s", "--timeout", "10s"]))
        .collect();
    let mut ran = 0;
    for (i, c) in clients.into_iter().enumerate() {
        let o = wait_limit(c, LIMIT, "concurrent bw client");
        match o.status.code() {
            Some(0) => ran += 1,
            Some(1) => {
                let line = one_error_line(&o);
                assert!(line.contains("busy"), "client {i}: {line}");
                eprintln!("faults: concurrent client {i}: {line}");
            }
            other => panic!("client {i} exited {other:?}: {}", stderr(&o)),
        }
    }
    eprintln!(
        "faults: 3 concurrent clients: {ran} ran, {} heard busy; all done after {:.2}s",
        3 - ran,
        t.elapsed().as_secs_f64()
    );
    assert!(ran >= 1, "no client ran");
    let o = wait_limit(
        spawn_rdmadiag(&["bw", HOST, "-p", "19219", "-n", "100", "-s", "4K"]),
        LIMIT,
        "later client",
    );
    assert!(o.status.success(), "later client: {}", stderr(&o));
    assert!(
        server.try_wait().unwrap().is_none(),
        "the server still runs"
    );
    server.kill().unwrap();
    let log = stderr(&server.wait_with_output().unwrap());
    assert!(log.matches("served").count() > ran, "{log}");
}
