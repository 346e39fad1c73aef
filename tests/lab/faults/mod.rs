//! Lab fault-injection suite: peers killed in every phase, a cut link, silent and foreign peers,
//! hostile control messages, concurrent clients, and resource hygiene. Every case is bounded in
//! time, asserts the exit code and the one error line, and prints its time to a clean exit.

mod concurrent;
mod handshake;
mod hostile;
mod link_cut;
mod mid_run;
pub(crate) mod resources;
mod silent;
mod versions;
mod wire;

use crate::common::*;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// The bound on every wait of a case.
const LIMIT: Duration = Duration::from_secs(60);
/// The lab guest's address, on dummy0 (the netdev under rxe0).
const HOST: &str = "10.77.0.1";

/// Wait for `child` (bounded by `limit`) and return its output and the time since `since`.
fn timed_wait(child: Child, limit: Duration, since: Instant, what: &str) -> (Output, Duration) {
    let o = wait_limit(child, limit, what);
    (o, since.elapsed())
}

/// Report a case (its exit, its time to a clean exit, its error line) and check it exited 1.
fn check_failed(case: &str, o: &Output, t: Duration, line: &str) {
    eprintln!(
        "faults: {case}: exit {:?} after {:.2}s: {line}",
        o.status.code(),
        t.as_secs_f64()
    );
    assert_eq!(o.status.code(), Some(1), "{line}");
}

/// Wait for a fault case's process (bounded by `limit`) and check it failed cleanly: exit 1 and
/// one error line. Returns that line and the time from `since` to the exit.
fn failed_cleanly(
    case: &str,
    child: Child,
    limit: Duration,
    since: Instant,
    what: &str,
) -> (String, Duration) {
    let (o, took) = timed_wait(child, limit, since, what);
    let line = one_error_line(&o);
    check_failed(case, &o, took, &line);
    (line, took)
}
