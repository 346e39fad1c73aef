//! Both halves of a ping-pong run over the control channel (or rdma-core's exchange with --compat).

use super::{STOP, SessionOptions, dial, status};
use crate::connect::compat_ibv::{self, IbvDest};
use crate::connect::control::{ControlChannel, Message, TestSpec, Transport};
use crate::connect::endpoint::{Endpoint, LocalPort, choose_port, cm_address, local_port_on};
use crate::connect::test_qp::{QpShape, TestQp};
use crate::exit::UsageError;
use crate::pingpong::{self, PingpongParams, Side};
use crate::stats::LatencyStats;
use crate::verbs::{Access, CmId, CmListener};
use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::net::TcpStream;

/// Largest message a server accepts unless told otherwise.
pub const MAX_SIZE: u32 = 1 << 30;
/// Most receives a run may keep posted.
pub const MAX_RX_DEPTH: u32 = 1 << 16;

/// The result of a ping-pong run (see docs/json.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PingpongReport {
    pub test: String,
    pub transport: Transport,
    pub size: u32,
    pub iterations: u64,
    pub rx_depth: u32,
    pub events: bool,
    pub compat: Option<String>,
    pub path_mtu: u32,
    pub local: Endpoint,
    pub remote: Endpoint,
    pub elapsed_s: f64,
    pub round_trips_per_sec: f64,
    /// Payload bits moved both ways per second, in Mb/s (as ibv_rc_pingpong counts).
    pub bandwidth_mbps: f64,
    /// Round-trip latency.
    #[serde(flatten)]
    pub latency: LatencyStats,
    pub rdmadiag_version: String,
}

/// Check a spec against this side's limits; the reason is told to the client.
pub fn validate(spec: &TestSpec) -> Result<(), String> {
    if spec.size == 0 || spec.size > MAX_SIZE {
        return Err(format!("size {} is outside 1..={MAX_SIZE}", spec.size));
    }
    if spec.iterations == 0 {
        return Err("iterations must be at least 1".into());
    }
    if spec.rx_depth == 0 || spec.rx_depth > MAX_RX_DEPTH {
        return Err(format!(
            "rx depth {} is outside 1..={MAX_RX_DEPTH}",
            spec.rx_depth
        ));
    }
    Ok(())
}

fn shape(spec: &TestSpec) -> QpShape {
    QpShape {
        transport: spec.transport,
        send_depth: 64,
        recv_depth: spec.rx_depth,
        buffer_len: pingpong::buffer_len(spec.transport, spec.size as usize, spec.rx_depth),
        max_inline: if spec.size <= 64 { 64 } else { 0 },
        access: Access::LOCAL_WRITE,
        events: spec.events,
        rd_atomic: 1,
    }
}

fn params(spec: &TestSpec, opts: &SessionOptions, peer: &str) -> PingpongParams {
    PingpongParams {
        size: spec.size as usize,
        recv_size: spec.size as usize,
        iterations: spec.iterations,
        rx_depth: spec.rx_depth,
        events: spec.events,
        duration: None,
        mark_last: !opts.compat_ibv,
        inline_max: 64,
        timeout: opts.timeout,
        peer: peer.to_string(),
    }
}

fn check_ud_size(tq: &TestQp, spec: &TestSpec) -> Result<()> {
    let mtu = tq.path_mtu.map_or(0, |m| m.bytes());
    if spec.transport == Transport::Ud && spec.size > mtu {
        return Err(UsageError(format!(
            "UD messages must fit in one MTU: -s {} is larger than the path MTU {mtu}",
            spec.size
        ))
        .into());
    }
    Ok(())
}

/// UD messages must fit one MTU: refuse early what the local port alone rules out.
fn precheck_ud_size(local: &LocalPort, spec: &TestSpec) -> Result<()> {
    let limit = spec.mtu.unwrap_or(u32::MAX).min(local.active_mtu().bytes());
    if spec.transport == Transport::Ud && spec.size > limit {
        return Err(UsageError(format!(
            "UD messages must fit in one MTU: -s {} is larger than {limit}",
            spec.size
        ))
        .into());
    }
    Ok(())
}

fn describe(opts: &SessionOptions, who: &str, e: &Endpoint) {
    status(
        opts,
        &format!(
            "{who}: {} port {} QPN 0x{:06x} PSN 0x{:06x} LID 0x{:04x} GID[{}] {} {} netdev {} MTU {}",
            e.device,
            e.port,
            e.qpn,
            e.psn,
            e.lid,
            e.gid_index,
            e.gid,
            e.gid_type.map(|t| t.to_string()).unwrap_or_default(),
            e.netdev.as_deref().unwrap_or("-"),
            e.active_mtu
        ),
    );
}

fn report(
    spec: &TestSpec,
    tq: &TestQp,
    local: Endpoint,
    remote: Endpoint,
    outcome: &pingpong::PingpongOutcome,
    compat: Option<&'static str>,
) -> PingpongReport {
    let secs = outcome.elapsed.as_secs_f64().max(1e-9);
    PingpongReport {
        test: "pingpong".into(),
        transport: spec.transport,
        size: spec.size,
        iterations: spec.iterations,
        rx_depth: spec.rx_depth,
        events: spec.events,
        compat: compat.map(String::from),
        path_mtu: tq.path_mtu.map_or(0, |m| m.bytes()),
        local,
        remote,
        elapsed_s: secs,
        round_trips_per_sec: outcome.round_trips as f64 / secs,
        bandwidth_mbps: (spec.size as f64 * 2.0 * outcome.round_trips as f64 * 8.0) / secs / 1e6,
        latency: outcome.latency.stats(1.0),
        rdmadiag_version: crate::VERSION.into(),
    }
}

/// Client side over rdmadiag's control protocol.
pub fn client(opts: &SessionOptions, spec: &TestSpec) -> Result<PingpongReport> {
    if opts.compat_ibv {
        return compat_client(opts, spec);
    }
    let stream = dial(opts)?;
    let local_ip = stream.local_addr()?.ip();
    let peer_ip = stream.peer_addr()?.ip();
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    ch.greet()?;
    if spec.cm {
        return cm_client(opts, spec, ch, local_ip, peer_ip);
    }
    let local = choose_port(&opts.choice, Some(local_ip))?;
    precheck_ud_size(&local, spec)?;
    let mut tq = TestQp::new(local, shape(spec))?;
    let p = params(spec, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    let mine = tq.endpoint();
    ch.send(&Message::Request {
        spec: spec.clone(),
        endpoint: mine.clone(),
    })?;
    let remote = match ch.recv("the server's answer to our request")? {
        Message::Accept { endpoint } => endpoint,
        Message::Refuse { reason } => bail!("{peer} refused the test: {reason}"),
        _ => bail!("{peer} answered the request with an unexpected message"),
    };
    describe(opts, "local", &mine);
    describe(opts, "remote", &remote);
    if let Err(e) = tq
        .connect(&remote, spec.mtu)
        .and_then(|_| check_ud_size(&tq, spec))
    {
        return Err(ch.fail(e));
    }
    finish_client(&mut ch, opts, spec, &tq, remote, &p)
}

/// Server side of one client's ping-pong request.
pub fn serve(
    ch: &mut ControlChannel,
    opts: &SessionOptions,
    spec: &TestSpec,
    client_ep: &Endpoint,
) -> Result<serde_json::Value> {
    let peer = ch.peer().to_string();
    if let Err(reason) = validate(spec) {
        let _ = ch.send(&Message::Refuse {
            reason: reason.clone(),
        });
        bail!("refused {peer}: {reason}");
    }
    let local_ip = ch.stream().local_addr()?.ip();
    if spec.cm {
        return cm_serve(ch, opts, spec, local_ip);
    }
    let setup = (|| -> Result<TestQp> {
        let local = choose_port(&opts.choice, Some(local_ip))?;
        let mut tq = TestQp::new(local, shape(spec))?;
        pingpong::post_receives(&tq, &params(spec, opts, &peer))?;
        tq.connect(client_ep, spec.mtu)?;
        check_ud_size(&tq, spec)?;
        Ok(tq)
    })();
    let tq = match setup {
        Ok(tq) => tq,
        Err(e) => {
            let _ = ch.send(&Message::Refuse {
                reason: format!("{e:#}"),
            });
            return Err(e);
        }
    };
    describe(opts, "local", &tq.endpoint());
    describe(opts, "remote", client_ep);
    ch.send(&Message::Accept {
        endpoint: tq.endpoint(),
    })?;
    let p = params(spec, opts, &peer);
    if let Err(e) = pingpong::run(
        &tq,
        Side::Responder,
        client_ep.qpn,
        client_ep.qkey,
        &p,
        &STOP,
    ) {
        return Err(ch.fail(e));
    }
    let summary = match ch.recv("the client's results")? {
        Message::Finished { summary } => summary.unwrap_or_default(),
        _ => bail!("{peer} ended the run with an unexpected message"),
    };
    ch.send(&Message::Finished { summary: None })?;
    Ok(summary)
}

/// Run the initiator and exchange the final messages; shared by both connection methods.
fn finish_client(
    ch: &mut ControlChannel,
    opts: &SessionOptions,
    spec: &TestSpec,
    tq: &TestQp,
    remote: Endpoint,
    p: &PingpongParams,
) -> Result<PingpongReport> {
    let peer = ch.peer().to_string();
    status(
        opts,
        &format!(
            "running {} round trips of {} bytes with {peer}",
            spec.iterations, spec.size
        ),
    );
    let outcome = match pingpong::run(tq, Side::Initiator, remote.qpn, remote.qkey, p, &STOP) {
        Ok(o) => o,
        Err(e) => return Err(ch.fail(e)),
    };
    let r = report(spec, tq, tq.endpoint(), remote, &outcome, None);
    ch.send(&Message::Finished {
        summary: Some(serde_json::to_value(&r)?),
    })?;
    match ch.recv("the server's final message")? {
        Message::Finished { .. } => Ok(r),
        _ => bail!("{peer} ended the run with an unexpected message"),
    }
}

/// Client over rdma_cm: the control channel carries the test; librdmacm connects the QPs.
/// Order: request, accept (server listening), rdma_cm connect, accept (server's real QP), run.
fn cm_client(
    opts: &SessionOptions,
    spec: &TestSpec,
    mut ch: ControlChannel,
    local_ip: std::net::IpAddr,
    peer_ip: std::net::IpAddr,
) -> Result<PingpongReport> {
    let peer = ch.peer().to_string();
    let placeholder = choose_port(&opts.choice, Some(local_ip))?;
    ch.send(&Message::Request {
        spec: spec.clone(),
        endpoint: placeholder.endpoint(0, 0, 0),
    })?;
    drop(placeholder);
    let listening = match ch.recv("the server's answer to our request")? {
        Message::Accept { endpoint } => endpoint,
        Message::Refuse { reason } => bail!("{peer} refused the test: {reason}"),
        _ => bail!("{peer} answered the request with an unexpected message"),
    };
    let dst = SocketAddr::new(cm_address(&listening, peer_ip), opts.port);
    let id = CmId::resolve(dst, None, opts.timeout)?;
    let ctx = id.context()?;
    let local = local_port_on(ctx, id.port(), opts.choice.gid_index, Some(local_ip))?;
    precheck_ud_size(&local, spec)?;
    let mut tq = TestQp::new(local, shape(spec))?;
    let p = params(spec, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    id.connect(&tq.qp, &[], opts.timeout)?;
    tq.path_mtu = Some(tq.local.active_mtu());
    let remote = match ch.recv("the server's endpoint after the rdma_cm connection")? {
        Message::Accept { endpoint } => endpoint,
        _ => bail!("{peer} sent an unexpected message after the rdma_cm connection"),
    };
    describe(opts, "local", &tq.endpoint());
    describe(opts, "remote", &remote);
    let r = finish_client(&mut ch, opts, spec, &tq, remote, &p);
    drop(tq); // the QP goes before its cm_id
    r
}

/// Server over rdma_cm: listen on the RDMA address, accept the client's connection request.
fn cm_serve(
    ch: &mut ControlChannel,
    opts: &SessionOptions,
    spec: &TestSpec,
    local_ip: std::net::IpAddr,
) -> Result<serde_json::Value> {
    let peer = ch.peer().to_string();
    let refuse = |ch: &mut ControlChannel, e: anyhow::Error| {
        let _ = ch.send(&Message::Refuse {
            reason: format!("{e:#}"),
        });
        e
    };
    if spec.transport != Transport::Rc {
        let e = anyhow!(
            "rdma_cm connects RC queue pairs only (asked for {})",
            spec.transport
        );
        return Err(refuse(ch, e));
    }
    let here = match choose_port(&opts.choice, Some(local_ip)) {
        Ok(l) => l.endpoint(0, 0, 0),
        Err(e) => return Err(refuse(ch, e)),
    };
    let addr = SocketAddr::new(cm_address(&here, local_ip), opts.port);
    let listener = match CmListener::bind(addr, 1) {
        Ok(l) => l,
        Err(e) => return Err(refuse(ch, e.into())),
    };
    ch.send(&Message::Accept { endpoint: here })?;
    let req = listener.get_request(opts.timeout)?;
    let local = local_port_on(
        req.context()?,
        req.port(),
        opts.choice.gid_index,
        Some(local_ip),
    )?;
    let mut tq = TestQp::new(local, shape(spec))?;
    let p = params(spec, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    let id = req.accept(&tq.qp, &[], opts.timeout)?;
    tq.path_mtu = Some(tq.local.active_mtu());
    ch.send(&Message::Accept {
        endpoint: tq.endpoint(),
    })?;
    describe(opts, "local", &tq.endpoint());
    let result = (|| {
        pingpong::run(&tq, Side::Responder, 0, 0, &p, &STOP)?;
        match ch.recv("the client's results")? {
            Message::Finished { summary } => {
                ch.send(&Message::Finished { summary: None })?;
                Ok(summary.unwrap_or_default())
            }
            _ => bail!("{peer} ended the run with an unexpected message"),
        }
    })();
    let result = result.map_err(|e| ch.fail(e));
    drop(tq);
    drop(id);
    result
}

fn ibv_dest(tq: &TestQp) -> IbvDest {
    let e = tq.endpoint();
    IbvDest {
        lid: e.lid,
        qpn: e.qpn,
        psn: e.psn,
        gid: e.gid,
    }
}

/// The remote endpoint as far as rdma-core's exchange tells it (no device, type or MTU).
fn ibv_remote(d: &IbvDest, local: &LocalPort) -> Endpoint {
    Endpoint {
        device: "ibv_*_pingpong peer".into(),
        port: 0,
        link_layer: local.attr.link_layer.to_string(),
        lid: d.lid,
        qpn: d.qpn,
        psn: d.psn,
        gid: d.gid,
        gid_index: 0,
        gid_type: None,
        netdev: None,
        active_mtu: 4096,
        qkey: crate::connect::test_qp::UD_QKEY,
        memory: None,
    }
}

/// rdma-core's MTU when neither side says (ibv_rc_pingpong's -m default).
const IBV_DEFAULT_MTU: u32 = 1024;

fn compat_client(opts: &SessionOptions, spec: &TestSpec) -> Result<PingpongReport> {
    let stream = dial(opts)?;
    let local_ip = stream.local_addr()?.ip();
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    let local = choose_port(&opts.choice, Some(local_ip))?;
    precheck_ud_size(&local, spec)?;
    let mut tq = TestQp::new(local, shape(spec))?;
    let p = params(spec, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    let theirs = compat_ibv::client_exchange(&mut ch, &ibv_dest(&tq))?;
    let remote = ibv_remote(&theirs, &tq.local);
    describe(opts, "local", &tq.endpoint());
    tq.connect(&remote, Some(spec.mtu.unwrap_or(IBV_DEFAULT_MTU)))?;
    check_ud_size(&tq, spec)?;
    let outcome = pingpong::run(&tq, Side::Initiator, remote.qpn, remote.qkey, &p, &STOP)?;
    Ok(report(
        spec,
        &tq,
        tq.endpoint(),
        remote,
        &outcome,
        Some("ibv"),
    ))
}

/// Serve one ibv_rc_pingpong (or ibv_ud_pingpong) client, with our own flags.
pub fn compat_serve(
    stream: TcpStream,
    opts: &SessionOptions,
    spec: &TestSpec,
) -> Result<PingpongReport> {
    let local_ip = stream.local_addr()?.ip();
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    let local = choose_port(&opts.choice, Some(local_ip))?;
    let mut tq = TestQp::new(local, shape(spec))?;
    let p = params(spec, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    let theirs = compat_ibv::server_read(&mut ch)?;
    let remote = ibv_remote(&theirs, &tq.local);
    tq.connect(&remote, Some(spec.mtu.unwrap_or(IBV_DEFAULT_MTU)))?;
    check_ud_size(&tq, spec)?;
    describe(opts, "local", &tq.endpoint());
    compat_ibv::server_finish(&mut ch, &ibv_dest(&tq))?;
    let outcome = pingpong::run(&tq, Side::Responder, remote.qpn, remote.qkey, &p, &STOP)
        .map_err(|e| anyhow!("{e:#} (ibv_rc_pingpong client {peer})"))?;
    Ok(report(
        spec,
        &tq,
        tq.endpoint(),
        remote,
        &outcome,
        Some("ibv"),
    ))
}
