//! The fabric run's wire between the ranks and rank 0's coordinator: one JSON object per line
//! each way. A rank sends `hello`, then one `done` per `round` it is sent (a round with no peer
//! is its bye); the coordinator ends with `finish` (the run's exit code) or `abort` (a reason).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;

/// A rank's message to the coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToCoordinator {
    Hello(Hello),
    Done { round: u32, side: PairSide },
}

/// What a rank tells at the rendezvous.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub rank: u32,
    pub size: u32,
    pub hostname: String,
    pub device: String,
    pub port: u8,
    pub gid: String,
    /// The address peers should use; None: the one its connection came from.
    pub address: Option<String>,
    /// The TCP port its test server listens on (bound with port 0).
    pub test_port: u16,
}

/// The coordinator's message to a rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToRank {
    /// Run this round's test with `peer` (None: a bye); `first`: this rank is the pair's a.
    Round {
        round: u32,
        peer: Option<Peer>,
        first: bool,
    },
    Finish {
        exit_code: u8,
    },
    Abort {
        reason: String,
    },
}

/// The other end of a rank's pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peer {
    pub rank: u32,
    pub host: String,
    pub address: String,
    pub test_port: u16,
}

/// What one rank measured of its pair: as the client of the first bw test (a) or of the
/// reverse one (b); the latency is a's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairSide {
    pub bw_gbps: Option<f64>,
    pub lat_us: Option<f64>,
    pub error: Option<String>,
    /// Error counters that rose on this rank's port over the pair's tests.
    pub counters: BTreeMap<String, u64>,
}

/// Write one message as a line.
pub fn send<T: Serialize>(stream: &mut TcpStream, msg: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}
