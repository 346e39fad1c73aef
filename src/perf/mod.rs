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

/// How a latency test takes its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LatTiming {
    /// As perftest's ib_*_lat: every operation is signalled and its completion is polled
    /// inside the sample.
    #[default]
    Perftest,
    /// A completion every 16th operation, reaped outside the samples: the wire and the peer,
    /// less this side's completion handling.
    Lean,
}

impl LatTiming {
    /// Signal (and wait for) every this many operations.
    pub fn signal_every(self) -> u64 {
        match self {
            LatTiming::Perftest => 1,
            LatTiming::Lean => 16,
        }
    }

    /// The policy in words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            LatTiming::Perftest => "every operation signalled, its completion polled in the sample",
            LatTiming::Lean => "a completion every 16th operation, reaped outside the samples",
        }
    }
}

impl std::fmt::Display for LatTiming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LatTiming::Perftest => "perftest",
            LatTiming::Lean => "lean",
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
