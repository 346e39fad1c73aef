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
/// summaries, diagnostic batches, endpoints exchanged after rdma_cm for ping-pong too.
pub const PROTOCOL_VERSION: u32 = 2;
/// No control message is ever larger than this; a bigger length prefix is hostile or garbage.
pub const MAX_FRAME: usize = 64 * 1024;
/// Default TCP port, the same as perftest and ibv_rc_pingpong.
pub const DEFAULT_PORT: u16 = 18515;

pub use super::protocol::*;

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
            tclass: None,
            sl: None,
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
        let ours = format!("version {PROTOCOL_VERSION}");
        assert!(e.contains(&ours) && e.contains("version 99"), "{e}");
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
