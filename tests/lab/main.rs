//! Lab tests: run only inside the Soft-RoCE lab (scripts/lab, via scripts/test) on rxe0.
//! Each is `#[ignore = "lab: ..."]` on the host and fails loudly when rxe0 is missing.

#[path = "../common/mod.rs"]
mod common;

mod api;
mod atomics;
mod check;
mod cm;
mod conventions;
mod counters;
mod fabric;
mod faults;
mod inventory;
mod link;
mod perf;
mod perftest;
mod perftest_atomics;
mod perftest_send;
mod pingpong;
mod schema;
mod settings;
mod watch;

/// The lab's Soft-RoCE device.
pub const DEV: &str = "rxe0";

/// Fail loudly (never skip) when run outside the lab.
pub fn require_rxe0() {
    assert!(
        std::path::Path::new("/sys/class/infiniband/rxe0").exists(),
        "no rxe0 here: this lab test must run inside scripts/lab (scripts/test does that)"
    );
}
