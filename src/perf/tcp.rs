//! The same sizes over a plain TCP socket, for `--vs-tcp` (qperf's tcp_bw / tcp_lat).

use crate::stats::LatencyRecorder;
use anyhow::{Result, bail};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a TCP round moved and how long it took (the CPU time is measured by the caller).
pub struct TcpOutcome {
    pub messages: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub latency: LatencyRecorder,
}

/// What the sending side of a TCP round does: `size`-byte messages, `iterations` of them or for
/// `duration`, each wait bounded by `timeout`.
pub struct SendingRound {
    pub size: usize,
    pub iterations: Option<u64>,
    pub duration: Option<Duration>,
    pub timeout: Duration,
}

fn prepare(s: &TcpStream, timeout: Duration) -> Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    Ok(())
}

/// One read: 0 at end of file; a timeout or error names what was waited for.
fn read_some(s: &mut TcpStream, buf: &mut [u8], what: &str) -> Result<usize> {
    loop {
        match s.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                bail!("timed out on the TCP connection waiting for {what}")
            }
            Err(e) => bail!("TCP {what}: {e}"),
        }
    }
}

/// Fill `buf`; false when the peer closed before its first byte.
fn read_full(s: &mut TcpStream, buf: &mut [u8], what: &str) -> Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match read_some(s, &mut buf[got..], what)? {
            0 if got == 0 => return Ok(false),
            0 => bail!("the TCP peer closed in the middle of {what}"),
            n => got += n,
        }
    }
    Ok(true)
}

/// Run `one` for `iterations` or until `duration` has passed (Ctrl-C stops it); returns how
/// many ran and when the first began.
fn repeat(
    iterations: Option<u64>,
    duration: Option<Duration>,
    stop: &AtomicBool,
    mut one: impl FnMut() -> Result<()>,
) -> Result<(u64, Instant)> {
    let start = Instant::now();
    let until = duration.map(|d| start + d);
    let total = iterations.unwrap_or(u64::MAX);
    let mut n = 0u64;
    while n < total && until.is_none_or(|u| Instant::now() < u) {
        one()?;
        n += 1;
        if stop.load(Ordering::Relaxed) {
            return Err(crate::exit::Interrupted.into());
        }
    }
    Ok((n, start))
}

/// Sender of a bandwidth round: `size`-byte writes, then close the write side.
pub fn bw_send(mut s: TcpStream, r: &SendingRound, stop: &AtomicBool) -> Result<TcpOutcome> {
    prepare(&s, r.timeout)?;
    let size = r.size;
    let buf = vec![0x5au8; size];
    let (n, start) = repeat(r.iterations, r.duration, stop, || Ok(s.write_all(&buf)?))?;
    s.shutdown(std::net::Shutdown::Write)?;
    // Wait for the receiver's one-byte acknowledgement that it has read everything.
    let mut ack = [0u8; 1];
    read_full(&mut s, &mut ack, "the receiver's acknowledgement")?;
    Ok(TcpOutcome {
        messages: n,
        bytes: n * size as u64,
        elapsed: start.elapsed(),
        latency: LatencyRecorder::new(),
    })
}

/// Receiver of a bandwidth round: read until the sender closes, then acknowledge.
pub fn bw_recv(mut s: TcpStream, size: usize, timeout: Duration) -> Result<TcpOutcome> {
    prepare(&s, timeout)?;
    let mut buf = vec![0u8; size.max(64 * 1024)];
    let mut bytes = 0u64;
    let mut start = None;
    loop {
        match read_some(&mut s, &mut buf, "the bandwidth round's data")? {
            0 => break,
            n => {
                start.get_or_insert_with(Instant::now);
                bytes += n as u64;
            }
        }
    }
    s.write_all(&[1])?;
    Ok(TcpOutcome {
        messages: bytes / size.max(1) as u64,
        bytes,
        elapsed: start.map_or(Duration::ZERO, |t| t.elapsed()),
        latency: LatencyRecorder::new(),
    })
}

/// Initiator of a latency round: send `size` bytes, wait for them back; half round trips.
pub fn lat_ping(mut s: TcpStream, r: &SendingRound, stop: &AtomicBool) -> Result<TcpOutcome> {
    prepare(&s, r.timeout)?;
    let size = r.size;
    let out = vec![0x5au8; size];
    let mut back = vec![0u8; size];
    let mut latency = LatencyRecorder::new();
    let (n, start) = repeat(r.iterations, r.duration, stop, || {
        let t0 = Instant::now();
        s.write_all(&out)?;
        if !read_full(&mut s, &mut back, "the echo")? {
            bail!("the TCP peer closed the latency round early");
        }
        latency.record(t0.elapsed());
        Ok(())
    })?;
    s.shutdown(std::net::Shutdown::Write)?;
    Ok(TcpOutcome {
        messages: n,
        bytes: n * size as u64 * 2,
        elapsed: start.elapsed(),
        latency,
    })
}

/// Responder of a latency round: echo each message until the initiator closes.
pub fn lat_pong(mut s: TcpStream, size: usize, timeout: Duration) -> Result<TcpOutcome> {
    prepare(&s, timeout)?;
    let mut buf = vec![0u8; size];
    let start = Instant::now();
    let mut n = 0u64;
    while read_full(&mut s, &mut buf, "a message")? {
        s.write_all(&buf)?;
        n += 1;
    }
    Ok(TcpOutcome {
        messages: n,
        bytes: n * size as u64 * 2,
        elapsed: start.elapsed(),
        latency: LatencyRecorder::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn bandwidth_and_latency_rounds_over_loopback() {
        let stop = AtomicBool::new(false);
        let t = Duration::from_secs(5);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let bw = bw_recv(s, 4096, t).unwrap();
            let (s, _) = l.accept().unwrap();
            let lat = lat_pong(s, 64, t).unwrap();
            (bw.bytes, lat.messages)
        });
        let round = |size, iterations| SendingRound {
            size,
            iterations: Some(iterations),
            duration: None,
            timeout: t,
        };
        let bw = bw_send(TcpStream::connect(addr).unwrap(), &round(4096, 100), &stop);
        assert_eq!(bw.unwrap().bytes, 409_600);
        let lat = lat_ping(TcpStream::connect(addr).unwrap(), &round(64, 50), &stop).unwrap();
        assert_eq!(lat.latency.count(), 50);
        assert_eq!(server.join().unwrap(), (409_600, 50));
    }
}
