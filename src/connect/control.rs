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

pub use crate::verbs::QpType;

/// Everything the server needs to run a test: the client sends it, the server needs no flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSpec {
    /// Which test: "pingpong" for now.
    pub test: String,
    pub transport: QpType,
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

impl TestSpec {
    /// The one rule for which operation, transport and connection method go together, used by
    /// the command line (a usage error) and by a server (a refusal). The reason names the flag.
    pub fn check_combination(&self) -> Result<(), String> {
        if self.cm && self.transport != QpType::Rc {
            return Err(format!(
                "rdma_cm (--cm) connects RC queue pairs only, not {}: use -c RC",
                self.transport
            ));
        }
        let Some(p) = &self.perf else {
            return Ok(());
        };
        if p.op != Op::Send && self.transport == QpType::Ud {
            return Err(format!(
                "RDMA {} (--op {}) needs a connected transport: use -c RC or -c UC (UD \
                 carries SEND only)",
                p.op.to_string().to_uppercase(),
                p.op
            ));
        }
        if p.op == Op::Read && self.transport == QpType::Uc {
            return Err("RDMA READ (--op read) needs -c RC (UC has no RDMA READ)".into());
        }
        if matches!(self.test.as_str(), "write" | "read") && p.op == Op::Send {
            return Err("the data diagnostics run RDMA WRITE or READ, not SEND".into());
        }
        Ok(())
    }
}

/// What a bw/lat/write/read test runs (sent by the client; the server needs no flags).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfSpec {
    pub op: Op,
    /// One round per size, in order.
    pub sizes: Vec<u32>,
    /// Operations per QP and size; None in duration mode.
    pub iterations: Option<u64>,
    pub duration_ms: Option<u64>,
    pub qps: u32,
    pub tx_depth: u32,
    pub cq_mod: u32,
    /// The user asked for `cq_mod` (-Q): it then applies to large messages too.
    #[serde(default)]
    pub cq_mod_explicit: bool,
    pub post_list: u32,
    /// RDMA READs in flight per QP (-o); None: the device's maximum.
    #[serde(default)]
    pub outstanding: Option<u32>,
    /// How latency samples are taken (`lat --timing`).
    #[serde(default)]
    pub timing: LatTiming,
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
        op: Op,
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
            cq_mod_explicit: false,
            post_list: 1,
            outstanding: None,
            timing: LatTiming::default(),
            inline: 0,
            inline_explicit: false,
            bidirectional: false,
            vs_tcp: false,
        }
    }
}

/// The RDMA operation a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
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
    /// The sender's software version, e.g. "rdmadiag 0.1.0 (abc123)".
    Hello { software: String },
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

    /// Refuse the peer's request: tell it why (best effort) and return the error for this side.
    pub fn refuse(&mut self, reason: String) -> anyhow::Error {
        let _ = self.send(&Message::Refuse {
            reason: reason.clone(),
        });
        anyhow!("refused {}: {reason}", self.peer)
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
            transport: QpType::Rc,
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
