//! The control channel: versioned, length-prefixed JSON messages over TCP, every read bounded.

use crate::exit::{Interrupted, STOP};
use anyhow::{Result, anyhow, bail};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a read on the control connection waits before looking at [`STOP`] again.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// The first bytes each side sends: they tell an rdmadiag peer from anything else.
pub const MAGIC: &[u8; 8] = b"RDMADIAG";
/// The control protocol's version; peers must speak the same one. 2: typed round and run
/// summaries, diagnostic batches, endpoints exchanged after rdma_cm for ping-pong too. 3: the
/// test request is typed (the link every test shares, then the test with its own parameters).
pub const PROTOCOL_VERSION: u32 = 3;
/// No control message is ever larger than this; a bigger length prefix is hostile or garbage.
pub const MAX_FRAME: usize = 64 * 1024;
/// Default TCP port, the same as perftest and ibv_rc_pingpong.
pub const DEFAULT_PORT: u16 = 18515;

use super::key::{NONCE_LEN, TestKey, Unauthenticated, from_hex, random, to_hex};
pub use super::protocol::*;

/// How a persistent server's refusal starts when it cannot serve a client now (another test
/// runs, or it holds as many connections as it takes): the client may try again.
pub const BUSY: &str = "busy:";

/// A server that refused because it is busy (see [`BUSY`]): worth another try in a moment.
#[derive(Debug)]
pub struct ServerBusy(pub String);

impl std::fmt::Display for ServerBusy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServerBusy {}

/// The error for a server's refusal of `what`: [`ServerBusy`] when it says it is busy.
pub fn refusal(peer: &str, what: &str, reason: &str) -> anyhow::Error {
    let text = format!("{peer} refused {what}: {reason}");
    if reason.starts_with(BUSY) {
        ServerBusy(text).into()
    } else {
        anyhow!(text)
    }
}

/// The greeting and refusal a server too busy to take a connection writes to it and closes:
/// the client reads it as a [`ServerBusy`] answer instead of a connection closed unread.
pub fn busy_greeting(reason: &str) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    if let Ok(frame) = encode(&Message::Refuse {
        reason: format!("{BUSY} {reason}"),
    }) {
        out.extend_from_slice(&frame);
    }
    out
}

/// A nonce as sent: lowercase hex of exactly [`NONCE_LEN`] bytes.
fn nonce_bytes(hex: &str) -> Option<Vec<u8>> {
    from_hex(hex).filter(|n| n.len() == NONCE_LEN)
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

/// Whether an undecodable frame body is a test request (its `type` says so).
fn is_request(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| {
        matches!(
            v.get("type").and_then(|t| t.as_str()),
            Some("request" | "perf_request")
        )
    })
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
    let looks_perftest = crate::connect::perftest_wire::looks_like_version(bytes);
    if looks_ibv {
        format!(
            "the peer is not rdmadiag: it sent {text:?}, which looks like ibv_rc_pingpong's \
             exchange (use --compat ibv)"
        )
    } else if looks_perftest {
        format!(
            "the peer is not rdmadiag: it sent {text:?}, which looks like perftest's version \
             message (a perftest client: a one-shot rdmadiag bw server serves ib_write_bw and \
             ib_read_bw clients)"
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
    /// A bound on every read and write over and above `timeout` (a handshake's in all).
    deadline: Option<Instant>,
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
            deadline: None,
        })
    }

    /// Bound every later read and write by `deadline` too (None: each by the timeout only).
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// When the current read or write must be done by.
    fn by(&self) -> Instant {
        let own = Instant::now() + self.timeout;
        self.deadline.map_or(own, |d| d.min(own))
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
        let deadline = self.by();
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
            // In slices, so a stop (SIGINT, SIGTERM) is seen within a moment, not a timeout.
            self.stream.set_read_timeout(Some(left.min(STOP_CHECK)))?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => bail!(
                    "{} closed the control connection while we waited for {what}",
                    self.peer
                ),
                Ok(n) => got += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if STOP.load(Ordering::Relaxed) {
                        return Err(anyhow::Error::new(Interrupted)
                            .context(format!("waiting for {what} from {}", self.peer)));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => bail!("reading {what} from {}: {e}", self.peer),
            }
        }
        Ok(())
    }

    /// Write all of `bytes` before the deadline.
    pub fn write_all_by(&mut self, bytes: &[u8], what: &str) -> Result<()> {
        let left = self.by().saturating_duration_since(Instant::now());
        self.stream
            .set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
        self.stream
            .write_all(bytes)
            .map_err(|e| anyhow!("sending {what} to {}: {e}", self.peer))
    }

    /// Exchange the greeting: magic and protocol version, then Hello messages. Returns the
    /// peer's software string and whether it holds a key.
    fn exchange_hellos(&mut self, keyed: bool) -> Result<(String, bool)> {
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
                 {PROTOCOL_VERSION}, {} speaks version {version}, so neither could read the \
                 other's test request or results; run the same rdmadiag release on both hosts",
                self.peer
            );
        }
        self.send(&Message::Hello {
            software: format!("rdmadiag {}", crate::VERSION),
            keyed,
        })?;
        match self.recv("the hello message")? {
            Message::Hello { software, keyed } => Ok((software, keyed)),
            Message::Refuse { reason } => Err(refusal(&self.peer, "this client", &reason)),
            other => bail!(
                "{} sent a '{}' message where a hello was expected",
                self.peer,
                other.name()
            ),
        }
    }

    /// The client's greeting: hellos, then, when the server holds a key, the proof that this
    /// client holds it too (and the server's, that it does). Returns the server's software.
    pub fn greet_as_client(&mut self, key: Option<&TestKey>) -> Result<String> {
        let (software, server_keyed) = self.exchange_hellos(key.is_some())?;
        if !server_keyed {
            return Ok(software);
        }
        let Some(key) = key else {
            bail!(
                "the server at {} serves only clients that hold its key: set RDMADIAG_KEY or \
                 --key-file FILE to the same key",
                self.peer
            );
        };
        let server_nonce = match self.recv("the server's challenge")? {
            Message::Challenge { nonce } => nonce_bytes(&nonce)
                .ok_or_else(|| anyhow!("{} sent a malformed challenge", self.peer))?,
            Message::Refuse { reason } => return Err(refusal(&self.peer, "this client", &reason)),
            other => bail!(
                "{} sent a '{}' message, not a challenge",
                self.peer,
                other.name()
            ),
        };
        let nonce = random::<NONCE_LEN>()?;
        self.send(&Message::Proof {
            nonce: to_hex(&nonce),
            mac: to_hex(&key.client_mac(&server_nonce, &nonce)),
        })?;
        match self.recv("the server's proof")? {
            Message::Proof { mac, .. }
                if from_hex(&mac).is_some_and(|m| key.verify_server(&server_nonce, &nonce, &m)) =>
            {
                Ok(software)
            }
            Message::Refuse { reason } => Err(refusal(&self.peer, "this client", &reason)),
            _ => bail!(
                "{} does not prove it holds the key: not the server meant, or another key",
                self.peer
            ),
        }
    }

    /// The server's greeting: hellos, then, with a key, the client's proof (refused with an
    /// [`Unauthenticated`] error when missing or wrong). Returns the client's software.
    pub fn greet_as_server(&mut self, key: Option<&TestKey>) -> Result<String> {
        let (software, client_keyed) = self.exchange_hellos(key.is_some())?;
        let Some(key) = key else {
            return Ok(software);
        };
        if !client_keyed {
            let why = "this server serves only clients that hold its key (RDMADIAG_KEY or \
                       --key-file)";
            let _ = self.send(&Message::Refuse { reason: why.into() });
            return Err(Unauthenticated(format!("{}: holds no key", self.peer)).into());
        }
        let nonce = random::<NONCE_LEN>()?;
        self.send(&Message::Challenge {
            nonce: to_hex(&nonce),
        })?;
        let (client_nonce, mac) = match self.recv("the client's proof") {
            Ok(Message::Proof { nonce, mac }) => (nonce, mac),
            Ok(other) => {
                return Err(Unauthenticated(format!(
                    "{} sent a '{}' message, not its proof",
                    self.peer,
                    other.name()
                ))
                .into());
            }
            Err(e) => return Err(e.context(Unauthenticated(format!("{}: no proof", self.peer)))),
        };
        let proven = nonce_bytes(&client_nonce).zip(from_hex(&mac));
        match proven {
            Some((c, m)) if key.verify_client(&nonce, &c, &m) => {
                self.send(&Message::Proof {
                    nonce: String::new(),
                    mac: to_hex(&key.server_mac(&nonce, &c)),
                })?;
                Ok(software)
            }
            _ => {
                let _ = self.send(&Message::Refuse {
                    reason: "wrong key".into(),
                });
                Err(Unauthenticated(format!("{}: wrong key", self.peer)).into())
            }
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
        let msg = match decode(&body) {
            Ok(msg) => msg,
            Err(e) => {
                // A request this side cannot read (another release's, or garbage) is refused,
                // so the client says why instead of seeing the connection close.
                if is_request(&body) {
                    let _ = self.send(&Message::Refuse {
                        reason: format!(
                            "{e}: this rdmadiag (control protocol {PROTOCOL_VERSION}) cannot \
                             read that test request"
                        ),
                    });
                }
                bail!("{e} (from {})", self.peer)
            }
        };
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
            link: LinkSpec::plain(QpType::Rc),
            test: Test::Pingpong(PingpongSpec::polled(4096, 1000, 500)),
        }
    }

    #[test]
    fn frames_round_trip() {
        for m in [
            Message::Hello {
                software: "rdmadiag 0.1.0".into(),
                keyed: false,
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
        let perftest = describe_foreign(b"6.06\0\0\0\0");
        assert!(perftest.contains("perftest's version"), "{perftest}");
        for not_perftest in [&b"6.06abcd"[..], b"6.\0\0\0\0\0\0", b"\0\0\0\0\0\0\0\0"] {
            let s = describe_foreign(not_perftest);
            assert!(!s.contains("perftest"), "{s}");
        }
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
        let e = c.greet_as_client(None).unwrap_err().to_string();
        let ours = format!("version {PROTOCOL_VERSION}");
        assert!(e.contains(&ours) && e.contains("version 99"), "{e}");
        let mut c = ControlChannel::new(TcpStream::connect(addr).unwrap(), t1).unwrap();
        let e = c.greet_as_client(None).unwrap_err().to_string();
        assert!(e.contains("not rdmadiag") && e.contains("HTTP/1."), "{e}");
        let short = Duration::from_millis(200);
        let mut c = ControlChannel::new(TcpStream::connect(addr).unwrap(), short).unwrap();
        let e = c.greet_as_client(None).unwrap_err().to_string();
        assert!(
            e.contains("timed out after 200ms waiting for the rdmadiag greeting"),
            "{e}"
        );
        t.join().unwrap();
    }

    /// A request this side cannot read (another release's test, a field out of range) is
    /// answered with a refusal that says why; other unreadable messages are not answered.
    #[test]
    fn an_unreadable_request_is_refused_saying_why() {
        use std::net::TcpListener;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut answers = Vec::new();
            for _ in 0..2 {
                let (s, _) = l.accept().unwrap();
                let mut ch = ControlChannel::new(s, Duration::from_secs(5)).unwrap();
                answers.push(ch.recv("the test request").unwrap_err().to_string());
            }
            answers
        });
        let body = |b: &[u8]| {
            let mut f = (b.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(b);
            f
        };
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(&body(br#"{"type":"request","spec":{"link":{"transport":"RC","mtu":null,"cm":false},"test":{"kind":"atomic"}},"endpoint":{}}"#)).unwrap();
        let mut ch = ControlChannel::new(c, Duration::from_secs(5)).unwrap();
        match ch.recv("the answer").unwrap() {
            Message::Refuse { reason } => assert!(
                reason.contains("atomic") && reason.contains("cannot read that test request"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(&body(br#"{"type":"launch_missiles"}"#))
            .unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut c, &mut rest);
        assert!(
            rest.is_empty(),
            "answered a message that is no request: {rest:?}"
        );
        let server = t.join().unwrap();
        assert!(
            server[0].contains("malformed control message"),
            "{server:?}"
        );
    }
}
