//! Telling a perftest client from an rdmadiag client by the first bytes it sends, and serving
//! either (a one-shot bw server).

use super::{STOP, Served, SessionOptions, greeting_timeout, perf, serve_client};
use crate::connect::key::Unauthenticated;
use anyhow::{Result, bail};
use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Serve one client of a bw server: a perftest client (told by its first message, its
/// version) gets the test `spec` of this server's own flags, an rdmadiag client the test it
/// asks for. A server with a key serves no perftest client: perftest cannot prove a key.
pub fn serve_client_or_perftest(
    stream: TcpStream,
    opts: &SessionOptions,
    spec: &crate::connect::control::TestSpec,
) -> Result<Served> {
    let arrived = Instant::now();
    let first = first_bytes(&stream, 8, arrived + greeting_timeout(opts))?;
    let peer = || {
        stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default()
    };
    if first.len() < 8 && opts.key.is_some() {
        // Its greeting's time is spent: waiting again would give a stalling client twice it.
        return Err(Unauthenticated(format!("{} did not greet", peer())).into());
    }
    if first.len() < 8 || !crate::connect::perftest_wire::looks_like_version(&first) {
        return serve_client(stream, opts);
    }
    if opts.key.is_some() {
        return Err(Unauthenticated(format!(
            "{}: a perftest client, which cannot prove this server's key",
            peer()
        ))
        .into());
    }
    perf::perftest_serve(stream, opts, spec)
}

/// Up to `n` bytes the peer has sent, left unread, waiting for them until `by` (fewer if the
/// peer sends fewer by then or closes).
fn first_bytes(stream: &TcpStream, n: usize, by: Instant) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    loop {
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let got = stream.peek(&mut buf).unwrap_or(0);
            buf.truncate(got);
            return Ok(buf);
        }
        stream.set_read_timeout(Some(left.min(Duration::from_millis(200))))?;
        match stream.peek(&mut buf) {
            Ok(got) if got >= n || got == 0 => {
                buf.truncate(got);
                return Ok(buf);
            }
            // Part of it: the rest is on its way.
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if STOP.load(Ordering::Relaxed) {
                    return Err(anyhow::Error::new(crate::exit::Interrupted)
                        .context("waiting for a client's first message"));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => bail!("reading a client's first message: {e}"),
        }
    }
}
