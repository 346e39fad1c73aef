//! `--vs-tcp`: after the RDMA rounds, the same sizes moved the same way over plain TCP between
//! the same hosts, with the CPU time each side spent.

use super::{Kind, gbps};
use crate::connect::control::{ControlChannel, Message, Op, PerfSpec, RoundSummary};
use crate::perf::tcp;
use crate::report::perf::TcpResult;
use crate::session::{STOP, SessionOptions};
use anyhow::{Context as _, Result, anyhow, bail};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Client half of one `--vs-tcp` round: connect to the port the server opened, move the same
/// size the same way, compare CPU time.
pub(super) fn tcp_client_round(
    ch: &mut ControlChannel,
    kind: Kind,
    p: &PerfSpec,
    size: u32,
    peer_ip: IpAddr,
    opts: &SessionOptions,
) -> Result<TcpResult> {
    ch.send(&Message::TcpRound { size })?;
    let port = match ch.recv("the server's TCP port for the comparison")? {
        Message::TcpReady { port } => port,
        _ => bail!("{} did not open a TCP port for the comparison", ch.peer()),
    };
    let addr = SocketAddr::new(peer_ip, port);
    let s = std::net::TcpStream::connect_timeout(&addr, opts.timeout)
        .map_err(|e| anyhow!("TCP comparison: cannot connect to {addr}: {e}"))?;
    let round = tcp::SendingRound {
        size: size as usize,
        iterations: p.iterations,
        duration: p.duration_ms.map(Duration::from_millis),
        timeout: opts.timeout,
    };
    let (o, cpu) = crate::cpu::measure(|| match kind {
        Kind::Bw => tcp::bw_send(s, &round, &STOP),
        _ => tcp::lat_ping(s, &round, &STOP),
    });
    let o = o?;
    ch.send(&Message::RoundDone {
        summary: RoundSummary {
            cpu_s: cpu,
            ..RoundSummary::default()
        },
    })?;
    let theirs = match ch.recv_patient("the server's TCP round result")? {
        Message::RoundDone { summary } => summary,
        _ => bail!(
            "{} ended the TCP round with an unexpected message",
            ch.peer()
        ),
    };
    let scale = if p.op == Op::Read || p.op.is_atomic() {
        1.0
    } else {
        2.0
    };
    Ok(TcpResult {
        size,
        iterations: o.messages,
        elapsed_s: o.elapsed.as_secs_f64(),
        bw_avg_gbps: (kind == Kind::Bw)
            .then(|| gbps(o.bytes as f64 / o.elapsed.as_secs_f64().max(1e-9))),
        latency: (kind != Kind::Bw).then(|| o.latency.stats(scale)),
        cpu_s: cpu,
        peer_cpu_s: theirs.cpu_s,
    })
}

/// Server half of one `--vs-tcp` round.
pub(super) fn tcp_server_round(
    ch: &mut ControlChannel,
    kind: Kind,
    p: &PerfSpec,
    size: u32,
    opts: &SessionOptions,
) -> Result<()> {
    if !p.vs_tcp || !p.sizes.contains(&size) {
        bail!("{} asked for a TCP round it did not announce", ch.peer());
    }
    let ip = ch.stream().local_addr()?.ip();
    let l = std::net::TcpListener::bind((ip, 0))
        .with_context(|| format!("TCP comparison: listening on {ip}"))?;
    l.set_nonblocking(true)?;
    ch.send(&Message::TcpReady {
        port: l.local_addr()?.port(),
    })?;
    let s = crate::session::accept(&l, Some(opts.timeout))?;
    let (o, cpu) = crate::cpu::measure(|| match kind {
        Kind::Bw => tcp::bw_recv(s, size as usize, opts.timeout),
        _ => tcp::lat_pong(s, size as usize, opts.timeout),
    });
    o?;
    match ch.recv_patient("the client's TCP round result")? {
        Message::RoundDone { .. } => {}
        _ => bail!(
            "{} ended the TCP round with an unexpected message",
            ch.peer()
        ),
    }
    ch.send(&Message::RoundDone {
        summary: RoundSummary {
            cpu_s: cpu,
            ..RoundSummary::default()
        },
    })
}
