//! The control protocol's vocabulary: the messages both ends exchange and the typed summaries
//! they carry; what a client asks for (TestSpec) is in request.rs. Framing and deadlines are in
//! control.rs.

use super::endpoint::Endpoint;
use serde::{Deserialize, Serialize};

pub use super::request::*;
pub use crate::verbs::QpType;

/// One direction's bandwidth figures, as one side's engine measured them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BwFigures {
    pub iterations: u64,
    pub bw_peak_gbps: f64,
    pub bw_avg_gbps: f64,
    pub msg_rate_mpps: f64,
    pub elapsed_s: f64,
}

/// The first transfer of a WRITE/READ diagnostic that did not arrive as sent: its first wrong
/// byte, and how many bytes of that transfer are wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Which transfer (1-based) did not arrive as sent.
    #[serde(default)]
    pub transfer: u64,
    pub offset: u64,
    pub expected: u8,
    pub actual: u8,
    pub bad_bytes: u64,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "transfer {} did not arrive as sent: at offset {} expected 0x{:02x}, found 0x{:02x} \
             ({} bad byte{})",
            self.transfer,
            self.offset,
            self.expected,
            self.actual,
            self.bad_bytes,
            if self.bad_bytes == 1 { "" } else { "s" }
        )
    }
}

/// What the verifying side found in one diagnostic round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// Every byte of every transfer of the round arrived as sent.
    pub verified: bool,
    /// Transfers checked byte by byte.
    pub checked: u64,
    pub mismatch: Option<Mismatch>,
}

/// One side's account of a round, exchanged after it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundSummary {
    /// CPU time this side's test thread spent in the round.
    #[serde(default)]
    pub cpu_s: Option<f64>,
    /// Bandwidth rounds: what this side's engine measured (what it sent, or what it received).
    #[serde(default)]
    pub bw: Option<BwFigures>,
    /// WRITE diagnostics: the server's check of the round's slots.
    #[serde(default)]
    pub verification: Option<Verification>,
}

/// The client's ping-pong measurement, told to the server at the end so both print it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingpongSummary {
    pub round_trips: u64,
    pub elapsed_s: f64,
    pub latency: crate::stats::LatencyStats,
    /// The client's sample clock (absent from an older client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::clock::ClockSource>,
}

/// A WRITE/READ diagnostic round: transfers `first..first + count` of the run, transfer
/// `first + j` in slot j of both buffers, each with its own pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    pub first: u64,
    pub count: u64,
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// The sender's software version, e.g. "rdmadiag 0.1.0 (abc123)", and whether it holds a
    /// test-port key (see [`crate::connect::key`]).
    Hello {
        software: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        keyed: bool,
    },
    /// Server → client, when the server holds a key: prove you hold it too.
    Challenge { nonce: String },
    /// Either side: its nonce (the client's) and its MAC over both nonces.
    Proof {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        nonce: String,
        mac: String,
    },
    /// Client → server: run this test against my endpoint.
    Request { spec: TestSpec, endpoint: Endpoint },
    /// Server → client: here is my endpoint, ready for traffic.
    Accept { endpoint: Endpoint },
    /// Server → client: I will not run this test, and why.
    Refuse { reason: String },
    /// Either side: the run is over; its summary, if any.
    Finished { summary: Option<PingpongSummary> },
    /// Either side: something failed; the peer should stop.
    Error { message: String },
    /// Client → server: a bw/lat/write/read test over these QPs.
    PerfRequest {
        spec: TestSpec,
        endpoints: Vec<Endpoint>,
    },
    /// Server → client: my QPs (one per client QP), connected and ready.
    PerfAccept { endpoints: Vec<Endpoint> },
    /// Client → server: run the next round, with messages of `size` bytes.
    Round {
        size: u32,
        /// WRITE/READ diagnostics: which transfers this round moves (each to its own slot).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch: Option<Batch>,
    },
    /// Server → client: ready for the round.
    RoundReady,
    /// Either side: the round is over; what this side measured.
    RoundDone { summary: RoundSummary },
    /// Client → server during a round: still alive (one-sided tests leave the server idle).
    Progress,
    /// Client → server: the same size over TCP now (`--vs-tcp`).
    TcpRound { size: u32 },
    /// Server → client: connect to this TCP port for the round.
    TcpReady { port: u16 },
}

impl Message {
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Challenge { .. } => "challenge",
            Message::Proof { .. } => "proof",
            Message::Request { .. } => "request",
            Message::Accept { .. } => "accept",
            Message::Refuse { .. } => "refuse",
            Message::Finished { .. } => "finished",
            Message::Error { .. } => "error",
            Message::PerfRequest { .. } => "perf request",
            Message::PerfAccept { .. } => "perf accept",
            Message::Round { .. } => "round",
            Message::RoundReady => "round ready",
            Message::RoundDone { .. } => "round done",
            Message::Progress => "progress",
            Message::TcpRound { .. } => "tcp round",
            Message::TcpReady { .. } => "tcp ready",
        }
    }
}
