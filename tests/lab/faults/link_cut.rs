//! The link cut mid-run and restored.

use super::{LIMIT, check_failed, timed_wait};
use crate::common::*;
use crate::link::{LinkUp, endless_loopback_traffic, ip_link};
use crate::require_rxe0;
use crate::watch::last_error_line;
use std::time::{Duration, Instant};

#[test]
#[ignore = "lab: needs rxe0 and its dummy0 link; run by scripts/test inside the Soft-RoCE lab"]
fn link_cut_mid_run_and_restored() {
    require_rxe0();
    let _restore = LinkUp;
    // Cut only once both QPs are connected and round trips are under way: a fixed sleep cut the
    // link during QP set-up on a loaded host (a different, also correct, error).
    let (run, rx) = endless_loopback_traffic();
    ip_link("down");
    let t = Instant::now();
    let (o, took) = timed_wait(
        run,
        Duration::from_secs(40),
        t,
        "pingpong after the link cut",
    );
    ip_link("up");
    let line = last_error_line(&rx);
    let t = Instant::now();
    loop {
        let o = wait_limit(
            spawn_rdmadiag(&["pingpong", "--loopback", "-n", "20", "--timeout", "3s"]),
            LIMIT,
            "pingpong after the link came back",
        );
        if o.status.success() {
            break;
        }
        // rxe re-adds the port's GIDs after the link returns; under a loaded TCG guest that
        // has taken seconds.
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no pingpong 30 s after the link came back: {}",
            stderr(&o)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "faults: link restored: pingpong works again after {:.2}s",
        t.elapsed().as_secs_f64()
    );
    check_failed("link cut mid-run", &o, took, &line);
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert!(line.contains("round trip"), "names the phase: {line}");
    // The run ended because the link went down: the message should say so (or name the wait it
    // gave up on), not blame the work request.
    assert!(
        line.contains("waiting for")
            || line.contains("link")
            || line.contains("down")
            || line.contains("RETRY_EXC"),
        "{line}"
    );
}
