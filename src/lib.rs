//! rdmadiag: RDMA diagnostics and benchmarks on one verbs core.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod api;
pub mod check;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod connect;
pub mod counters;
pub mod cpu;
pub mod device_access;
pub mod exit;
pub mod fabric;
pub mod ib;
pub mod inventory;
pub mod manual;
pub mod perf;
pub mod pingpong;
pub mod report;
pub mod session;
pub mod stats;
pub mod sysfs;
pub mod units;
#[allow(unsafe_code)]
pub mod verbs;

pub use api::{Role, TestReport, run, serve_on};

/// Version string: the crate version plus the git revision it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("RDMADIAG_GIT_REV"),
    ")"
);
