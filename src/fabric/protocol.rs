//! The fabric run's wire between the ranks and rank 0's coordinator: one JSON object per line
//! each way. A rank sends `hello`, then one `done` per `round` it is sent (a round with no peer
//! is its bye); the coordinator ends with `finish` (the run's exit code) or `abort` (a reason).
//! Before the hello, the handshake of [`super::auth`]; from the hello on every line carries its
//! MAC. No line may exceed [`MAX_LINE`] bytes.

use crate::report::fabric::config::PortConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Read as _, Write};

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
    /// What it says of the port it tests with, for rank 0's configuration audit (a few hundred
    /// bytes); None when it could not tell, or from an rdmadiag older than the audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Box<PortConfig>>,
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
        /// The pair's test-port key (hex), fresh for each pair of each round and sent only to
        /// its two ranks: the server end serves only a client that proves it holds it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pair_key: Option<String>,
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
    /// Clients this rank's test port refused during the pair (no pair key, a wrong one): at
    /// most [`MAX_REFUSED_PER_PAIR`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedClient>,
}

/// The most refused clients one rank reports for one pair (a line stays well under
/// [`MAX_LINE`]).
pub const MAX_REFUSED_PER_PAIR: usize = 4;

/// A client a rank's test port refused: its address and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedClient {
    pub address: String,
    pub reason: String,
}

/// The peer closed the connection before a whole line came: a typed error, so that a caller
/// deciding whether to dial again never reads a message's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionClosed;

impl std::fmt::Display for ConnectionClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the connection closed")
    }
}

impl std::error::Error for ConnectionClosed {}

/// Write one message as a line.
pub fn send<T: Serialize>(stream: &mut impl Write, msg: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

/// The longest line either side accepts, newline included (as the control channel's
/// `MAX_FRAME`): a hello, a round or a pair's results are a few hundred bytes.
pub const MAX_LINE: usize = 64 * 1024;

/// Read one line into `buf` (cleared first), reading at most [`MAX_LINE`] bytes: a longer line
/// is an error, not an allocation. Returns the bytes read, 0 at the end of the stream.
pub fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    buf.clear();
    let n = r.by_ref().take(MAX_LINE as u64).read_until(b'\n', buf)?;
    if n > 0 && buf.last() != Some(&b'\n') && n >= MAX_LINE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a line longer than {MAX_LINE} bytes"),
        ));
    }
    Ok(n)
}

/// As [`read_line`] on a socket whose read timeout is a short poll: waits through the timeouts
/// until `deadline` (then the timeout's error), and gives up at once with an `Interrupted` error
/// when `stop()` says so. A line cut by a poll is kept, not lost.
pub fn read_line_polled(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    deadline: std::time::Instant,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<usize> {
    use std::io::ErrorKind;
    buf.clear();
    loop {
        let room = (MAX_LINE - buf.len()) as u64;
        match r.by_ref().take(room).read_until(b'\n', buf) {
            Ok(_) => {
                let n = buf.len();
                if n >= MAX_LINE && buf.last() != Some(&b'\n') {
                    return Err(std::io::Error::new(
                        ErrorKind::InvalidData,
                        format!("a line longer than {MAX_LINE} bytes"),
                    ));
                }
                return Ok(n);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                if stop() {
                    return Err(std::io::Error::new(ErrorKind::Interrupted, "stopped"));
                }
                if std::time::Instant::now() >= deadline {
                    return Err(std::io::Error::new(ErrorKind::TimedOut, e));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A reader that times out between its chunks, as a socket with a short read timeout does.
    struct Chunks(Vec<Vec<u8>>);
    impl Read for Chunks {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            match self.0.first_mut() {
                None => Ok(0),
                Some(c) if c.is_empty() => {
                    self.0.remove(0);
                    Err(std::io::ErrorKind::WouldBlock.into())
                }
                Some(c) => {
                    let n = c.len().min(out.len());
                    out[..n].copy_from_slice(&c[..n]);
                    c.drain(..n);
                    Ok(n)
                }
            }
        }
    }

    #[test]
    fn a_polled_line_survives_its_timeouts_and_stops_when_asked() {
        let far = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let chunks = || Chunks(vec![b"ab".to_vec(), vec![], b"c\nnext".to_vec()]);
        let mut r = std::io::BufReader::with_capacity(1, chunks());
        let mut buf = Vec::new();
        assert_eq!(
            read_line_polled(&mut r, &mut buf, far, &|| false).unwrap(),
            4
        );
        assert_eq!(buf, b"abc\n");
        let mut r = std::io::BufReader::with_capacity(1, chunks());
        let e = read_line_polled(&mut r, &mut buf, far, &|| true).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        let mut r = std::io::BufReader::with_capacity(1, chunks());
        let past = std::time::Instant::now();
        let e = read_line_polled(&mut r, &mut buf, past, &|| false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        let mut r = std::io::BufReader::new(std::io::Cursor::new(vec![b'x'; MAX_LINE * 2]));
        let e = read_line_polled(&mut r, &mut buf, far, &|| false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    }

    fn hello(config: Option<PortConfig>) -> ToCoordinator {
        let config = config.map(Box::new);
        ToCoordinator::Hello(Hello {
            rank: 1,
            size: 4,
            hostname: "fab2".into(),
            device: "rxe0".into(),
            port: 1,
            gid: "::ffff:10.0.0.2".into(),
            address: None,
            test_port: 40001,
            config,
        })
    }

    fn a_config() -> PortConfig {
        use crate::ib::{GidType, LinkLayer, Mtu};
        PortConfig {
            firmware: None,
            driver: Some("rdma_rxe".into()),
            kernel: Some("6.1.0-18-amd64".into()),
            rdma_core: Some("44.0".into()),
            rdmadiag: Some(crate::VERSION.into()),
            link_layer: Some(LinkLayer::Ethernet),
            rate_gbps: Some(10.0),
            width: Some("1X".into()),
            active_mtu: Some(Mtu(1024)),
            gid_type: Some(GidType::RoceV2),
            pcie: None,
            numa_node: None,
        }
    }

    #[test]
    fn a_hello_round_trips_with_its_config_and_an_old_one_without_still_parses() {
        for msg in [hello(Some(a_config())), hello(None)] {
            let mut line = Vec::new();
            send(&mut line, &msg).unwrap();
            assert!(line.len() < 1024, "compact: {} bytes", line.len());
            let back: ToCoordinator = serde_json::from_slice(&line).unwrap();
            assert_eq!(back, msg);
        }
        let mut line = Vec::new();
        send(&mut line, &hello(None)).unwrap();
        assert!(!String::from_utf8_lossy(&line).contains("config"));
        // As an rdmadiag from before the audit sent it.
        let old = r#"{"msg":"hello","rank":1,"size":4,"hostname":"fab2","device":"rxe0","port":1,"gid":"::ffff:10.0.0.2","address":null,"test_port":40001}"#;
        let back: ToCoordinator = serde_json::from_str(old).unwrap();
        assert_eq!(back, hello(None));
    }

    #[test]
    fn a_huge_config_is_refused_by_the_line_limit_and_a_long_one_is_cut() {
        let mut c = a_config();
        c.firmware = Some("x".repeat(MAX_LINE));
        let mut line = Vec::new();
        send(&mut line, &hello(Some(c.clone()))).unwrap();
        let mut buf = Vec::new();
        let e = read_line(&mut std::io::Cursor::new(line), &mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(buf.len() <= MAX_LINE);
        c.firmware = Some("é".repeat(1000));
        let cut = c.bounded();
        let max = crate::report::fabric::config::MAX_VALUE_CHARS;
        assert_eq!(cut.firmware.unwrap().chars().count(), max);
        assert_eq!(cut.kernel.as_deref(), Some("6.1.0-18-amd64"));
        c = a_config();
        c.driver = Some("mlx5\u{1b}[2J\ncore".into());
        assert_eq!(c.bounded().driver.as_deref(), Some("mlx5?[2J?core"));
    }

    #[test]
    fn lines_are_bounded() {
        let mut buf = Vec::new();
        let ok = vec![b'x'; MAX_LINE - 1];
        let mut r = std::io::Cursor::new([ok.clone(), b"\n".to_vec()].concat());
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), MAX_LINE);
        let mut r = std::io::Cursor::new(vec![b'x'; MAX_LINE * 3]);
        let e = read_line(&mut r, &mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(buf.len() <= MAX_LINE);
        let mut r = std::io::Cursor::new(b"ab".to_vec());
        assert_eq!(
            read_line(&mut r, &mut buf).unwrap(),
            2,
            "a last line without newline"
        );
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), 0);
    }
}
