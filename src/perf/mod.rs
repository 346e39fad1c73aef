//! perftest-grade measurements: one bandwidth engine and one latency engine, parameterised by the
//! operation (SEND, RDMA WRITE, RDMA READ). Engines never print; they return plain results.

pub mod bw;
pub mod lat;
pub mod tcp;
pub mod verify;

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// The RDMA operation a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Send,
    Write,
    Read,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Send => "send",
            Op::Write => "write",
            Op::Read => "read",
        })
    }
}

/// Live counters an engine updates (relaxed stores, no locks) for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    pub messages: AtomicU64,
    pub bytes: AtomicU64,
}

impl Progress {
    pub fn set(&self, messages: u64, bytes: u64) {
        self.messages.store(messages, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }
}
