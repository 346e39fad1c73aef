//! The control channel: versioned, length-prefixed JSON messages over TCP, every read bounded.

use super::endpoint::Endpoint;
use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The first bytes each side sends: they tell an rdmadiag peer from anything else.
pub const MAGIC: &[u8; 8] = b"RDMADIAG";
/// The control protocol's version; peers must speak the same one.
pub const PROTOCOL_VERSION: u32 = 1;
/// No control message is ever larger than this; a bigger length prefix is hostile or garbage.
pub const MAX_FRAME: usize = 64 * 1024;
/// Default TCP port, the same as perftest and ibv_rc_pingpong.
pub const DEFAULT_PORT: u16 = 18515;

/// Transport service of the test's QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "UPPERCASE")]
#[value(rename_all = "UPPER")]
pub enum Transport {
    Rc,
    Uc,
    Ud,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Rc => "RC",
            Transport::Uc => "UC",
            Transport::Ud => "UD",
        })
    }
}

/// Everything the server needs to run a test: the client sends it, the server needs no flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSpec {
    /// Which test: "pingpong" for now.
    pub test: String,
    pub transport: Transport,
    pub size: u32,
    pub iterations: u64,
    pub rx_depth: u32,
    /// Sleep on completion events instead of busy polling.
    pub events: bool,
    /// Path MTU forced by the client, bytes.
    pub mtu: Option<u32>,
    /// Connect the QPs through rdma_cm.
    pub cm: bool,
    /// The parameters of bw, lat, write and read tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf: Option<PerfSpec>,
}

/// What a bw/lat/write/read test runs (sent by the client; the server needs no flags).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfSpec {
    pub op: crate::perf::Op,
    /// One round per size, in order.
    pub sizes: Vec<u32>,
    /// Operations per QP and size; None in duration mode.
    pub iterations: Option<u64>,
    pub duration_ms: Option<u64>,
    pub qps: u32,
    pub tx_depth: u32,
    pub cq_mod: u32,
    pub post_list: u32,
    /// Send messages up to this size inline.
    pub inline: u32,
    /// The user asked for `inline` (-I): more than the device allows is then an error, not a cap.
    #[serde(default)]
    pub inline_explicit: bool,
    pub bidirectional: bool,
    /// After the RDMA rounds, run the same sizes over a plain TCP connection.
    #[serde(default)]
    pub vs_tcp: bool,
}

impl PerfSpec {
    /// One QP, one request in flight, nothing inline: the shape of the latency tests and of the
    /// WRITE/READ diagnostics, which bandwidth tests widen. `duration` replaces `iterations`.
    pub fn one_at_a_time(
        op: crate::perf::Op,
        sizes: Vec<u32>,
        iterations: u64,
        duration: Option<Duration>,
    ) -> PerfSpec {
        PerfSpec {
            op,
            sizes,
            iterations: duration.is_none().then_some(iterations),
            duration_ms: duration.map(|d| d.as_millis().max(1) as u64),
            qps: 1,
            tx_depth: 1,
            cq_mod: 1,
            post_list: 1,
            inline: 0,
            inline_explicit: false,
            bidirectional: false,
            vs_tcp: false,
        }
    }
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// The sender's software version, e.g. "rdmadiag 0.1.0 (abc123)".
    Hello { software: String },
    /// Client → server: run this test against my endpoint.
    Request { spec: TestSpec, endpoint: Endpoint },
    /// Server → client: here is my endpoint, ready for traffic.
    Accept { endpoint: Endpoint },
    /// Server → client: I will not run this test, and why.
    Refuse { reason: String },
    /// Either side: the run is over; its summary, if any.
    Finished { summary: Option<serde_json::Value> },
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
    Round { size: u32 },
    /// Server → client: ready for the round.
    RoundReady,
    /// Either side: the round is over; what this side measured.
    RoundDone { summary: serde_json::Value },
    /// Client → server during a round: still alive (one-sided tests leave the server idle).
    Progress,
    /// Client → server: the same size over TCP now (`--vs-tcp`).
    TcpRound { size: u32 },
    /// Server → client: connect to this TCP port for the round.
    TcpReady { port: u16 },
}

impl Message {
    fn name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
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

/// Encode a message as a frame: u32 big-endian length, then JSON.
pub fn encode(msg: &Message) -> Result<Vec<u8>> {
    let body = serde_json::to_vec(msg)?;
    if body.len() > MAX_FRAME {
        bail!("control message too large ({} bytes)", body.len());
    }
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

/// Decode a frame body (the bytes after the length prefix).
pub fn decode(body: &[u8]) -> Result<Message> {
    serde_json::from_slice(body).map_err(|e| anyhow!("malformed control message: {e}"))
}

/// Check a frame's length prefix before allocating for it.
pub fn check_length(len: u32) -> Result<usize> {
    let len = len as usize;
    if len == 0 || len > MAX_FRAME {
        bail!("invalid control message length {len} (limit {MAX_FRAME})");
    }
    Ok(len)
}

/// Describe bytes that should have been our magic, to name what the peer probably is.
pub fn describe_foreign(bytes: &[u8]) -> String {
    let text: String = bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect();
    let looks_ibv =
        bytes.len() >= 5 && bytes[4] == b':' && bytes[..4].iter().all(|b| b.is_ascii_hexdigit());
    if looks_ibv {
        format!(
            "the peer is not rdmadiag: it sent {text:?}, which looks like ibv_rc_pingpong's \
             exchange (use --compat ibv)"
        )
    } else {
        format!("the peer is not rdmadiag: it sent {text:?} instead of the rdmadiag greeting")
    }
}

/// A connected control channel with a deadline on every read and write.
pub struct ControlChannel {
    stream: TcpStream,
    peer: String,
    timeout: Duration,
}

impl ControlChannel {
    pub fn new(stream: TcpStream, timeout: Duration) -> Result<Self> {
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "the peer".into());
        stream.set_nodelay(true)?;
        Ok(ControlChannel {
            stream,
            peer,
            timeout,
        })
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Read exactly `buf.len()` bytes before the deadline, naming `what` on failure.
    pub fn read_exact_by(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        let mut got = 0;
        while got < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "timed out after {} waiting for {what} from {}",
                    humantime::format_duration(self.timeout),
                    self.peer
                );
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => bail!(
                    "{} closed the control connection while we waited for {what}",
                    self.peer
                ),
                Ok(n) => got += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => bail!("reading {what} from {}: {e}", self.peer),
            }
        }
        Ok(())
    }

    /// Write all of `bytes` before the deadline.
    pub fn write_all_by(&mut self, bytes: &[u8], what: &str) -> Result<()> {
        self.stream.set_write_timeout(Some(self.timeout))?;
        self.stream
            .write_all(bytes)
            .map_err(|e| anyhow!("sending {what} to {}: {e}", self.peer))
    }

    /// Exchange the greeting: magic and protocol version, then Hello messages.
    /// Returns the peer's software string.
    pub fn greet(&mut self) -> Result<String> {
        let mut hello = MAGIC.to_vec();
        hello.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        self.write_all_by(&hello, "the greeting")?;
        let mut theirs = [0u8; 12];
        self.read_exact_by(&mut theirs[..8], "the rdmadiag greeting")?;
        if &theirs[..8] != MAGIC {
            bail!("{} ({})", describe_foreign(&theirs[..8]), self.peer);
        }
        self.read_exact_by(&mut theirs[8..], "the protocol version")?;
        let version = u32::from_be_bytes(theirs[8..].try_into().expect("4 bytes"));
        if version != PROTOCOL_VERSION {
            bail!(
                "control protocol version mismatch: this rdmadiag speaks version \
                 {PROTOCOL_VERSION}, {} speaks version {version}; run the same rdmadiag \
                 release on both hosts",
                self.peer
            );
        }
        self.send(&Message::Hello {
            software: format!("rdmadiag {}", crate::VERSION),
        })?;
        match self.recv("the hello message")? {
            Message::Hello { software } => Ok(software),
            other => bail!(
                "{} sent a '{}' message where a hello was expected",
                self.peer,
                other.name()
            ),
        }
    }

    /// Receive the next message that is not a heartbeat, allowing `timeout` of silence between
    /// messages (a busy peer keeps the channel alive with Progress).
    pub fn recv_patient(&mut self, what: &str) -> Result<Message> {
        loop {
            match self.recv(what)? {
                Message::Progress => continue,
                m => return Ok(m),
            }
        }
    }

    /// A second handle on the socket for a heartbeat thread; frames from the two handles must
    /// not overlap in time.
    pub fn heartbeat_handle(&self) -> Result<TcpStream> {
        Ok(self.stream.try_clone()?)
    }

    /// Tell the peer (best effort) that this side failed with `e`, and hand `e` back.
    pub fn fail(&mut self, e: anyhow::Error) -> anyhow::Error {
        let _ = self.send(&Message::Error {
            message: format!("{e:#}"),
        });
        e
    }

    pub fn send(&mut self, msg: &Message) -> Result<()> {
        let frame = encode(msg)?;
        self.write_all_by(&frame, msg.name())
    }

    /// Receive one message; a peer's Error message becomes our error.
    pub fn recv(&mut self, what: &str) -> Result<Message> {
        let mut len = [0u8; 4];
        self.read_exact_by(&mut len, what)?;
        let len = check_length(u32::from_be_bytes(len))
            .map_err(|e| anyhow!("{e} from {} while waiting for {what}", self.peer))?;
        let mut body = vec![0u8; len];
        self.read_exact_by(&mut body, what)?;
        let msg = decode(&body).map_err(|e| anyhow!("{e} (from {})", self.peer))?;
        if let Message::Error { message } = &msg {
            bail!("{} reported an error: {message}", self.peer);
        }
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TestSpec {
        TestSpec {
            test: "pingpong".into(),
            transport: Transport::Rc,
            size: 4096,
            iterations: 1000,
            rx_depth: 500,
            events: false,
            mtu: None,
            cm: false,
            perf: None,
        }
    }

    #[test]
    fn frames_round_trip() {
        for m in [
            Message::Hello {
                software: "rdmadiag 0.1.0".into(),
            },
            Message::Refuse {
                reason: "too big".into(),
            },
            Message::Finished { summary: None },
        ] {
            let f = encode(&m).unwrap();
            let len = u32::from_be_bytes(f[..4].try_into().unwrap()) as usize;
            assert_eq!(len, f.len() - 4);
            assert_eq!(decode(&f[4..]).unwrap(), m);
        }
        let s = serde_json::to_string(&spec()).unwrap();
        assert!(s.contains("\"transport\":\"RC\""), "{s}");
    }

    #[test]
    fn hostile_lengths_and_bodies_are_rejected() {
        assert!(check_length(0).is_err());
        assert!(check_length(u32::MAX).is_err());
        assert!(check_length(MAX_FRAME as u32 + 1).is_err());
        assert_eq!(check_length(10).unwrap(), 10);
        assert!(decode(b"{not json").is_err());
        assert!(decode(br#"{"type":"launch_missiles"}"#).is_err());
        assert!(decode(br#"{"type":"request","spec":{"size":-1}}"#).is_err());
    }

    #[test]
    fn foreign_peers_are_named() {
        let ibv = describe_foreign(b"0000:000");
        assert!(ibv.contains("ibv_rc_pingpong"), "{ibv}");
        let junk = describe_foreign(b"GET / HT");
        assert!(
            junk.contains("not rdmadiag") && junk.contains("GET / HT"),
            "{junk}"
        );
        assert!(describe_foreign(&[0, 1, 2, 255]).contains("...."));
    }

    #[test]
    fn greeting_detects_version_mismatch_and_strangers() {
        use std::net::TcpListener;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut g = MAGIC.to_vec();
            g.extend_from_slice(&99u32.to_be_bytes());
            s.write_all(&g).unwrap();
            let (mut s2, _) = l.accept().unwrap();
            s2.write_all(b"HTTP/1.1 400\r\n").unwrap();
            let (_s3, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(600));
        });
        let t1 = Duration::from_secs(5);
        let mut c = ControlChannel::new(TcpStream::connect(addr).unwrap(), t1).unwrap();
        let e = c.greet().unwrap_err().to_string();
        assert!(e.contains("version 1") && e.contains("version 99"), "{e}");
        let mut c = ControlChannel::new(TcpStream::connect(addr).unwrap(), t1).unwrap();
        let e = c.greet().unwrap_err().to_string();
        assert!(e.contains("not rdmadiag") && e.contains("HTTP/1."), "{e}");
        let short = Duration::from_millis(200);
        let mut c = ControlChannel::new(TcpStream::connect(addr).unwrap(), short).unwrap();
        let e = c.greet().unwrap_err().to_string();
        assert!(
            e.contains("timed out after 200ms waiting for the rdmadiag greeting"),
            "{e}"
        );
        t.join().unwrap();
    }
}
