//! rdmadiag: RDMA diagnostics and benchmarks on one verbs core.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod cli;
pub mod commands;
pub mod exit;
pub mod inventory;
pub mod output;
pub mod render;
pub mod sysfs;
#[allow(unsafe_code)]
pub mod verbs;
