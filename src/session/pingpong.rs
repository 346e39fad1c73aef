//! Both halves of a ping-pong run over the control channel (or rdma-core's exchange with --compat).

use super::phase::{self, QP_SETUP, RESULT_EXCHANGE, TRANSFER};
use super::{Observer, STOP, SessionOptions, dial, status};
use crate::connect::compat_ibv::{self, IbvDest};
use crate::connect::control::{ControlChannel, Message, PingpongSummary, QpType, TestSpec};
use crate::connect::endpoint::{Endpoint, LocalPort, choose_port};
use crate::connect::establish::{self, Plan, QpRecipe, Wire};
use crate::connect::test_qp::{QpShape, TestQp};
use crate::exit::UsageError;
use crate::perf::Progress;
use crate::pingpong::{self, PingpongParams, Side};
use crate::report::pingpong::PingpongReport;
use crate::verbs::Access;
use anyhow::{Result, anyhow, bail};
use std::net::TcpStream;

/// Largest message a server accepts unless told otherwise.
pub const MAX_SIZE: u32 = 1 << 30;
/// Most receives a run may keep posted.
pub const MAX_RX_DEPTH: u32 = 1 << 16;

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
        // As ibv_rc_pingpong: every send signalled, each side waits for it every round trip.
        signal_every: 1,
        timeout: opts.timeout,
        peer: peer.to_string(),
    }
}

fn check_ud_size(tq: &TestQp, spec: &TestSpec) -> Result<()> {
    let mtu = tq.path_mtu.map_or(0, |m| m.bytes());
    if spec.transport == QpType::Ud && spec.size > mtu {
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
    if spec.transport == QpType::Ud && spec.size > limit {
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

/// The report from this side's outcome (`local` is the client).
fn report(
    spec: &TestSpec,
    tq: &TestQp,
    local: Endpoint,
    remote: Endpoint,
    outcome: &pingpong::PingpongOutcome,
    compat: Option<&'static str>,
) -> PingpongReport {
    PingpongReport::new(
        spec,
        tq.path_mtu.map_or(0, |m| m.bytes()),
        local,
        remote,
        &summary(outcome),
        compat,
    )
}

fn summary(outcome: &pingpong::PingpongOutcome) -> PingpongSummary {
    PingpongSummary {
        round_trips: outcome.round_trips,
        elapsed_s: outcome.elapsed.as_secs_f64(),
        latency: outcome.latency.stats(1.0),
    }
}

/// How each side makes its ping-pong QP: shape, receives posted, UD size checked.
struct PingpongQp<'a> {
    spec: &'a TestSpec,
    params: &'a PingpongParams,
}

impl QpRecipe for PingpongQp<'_> {
    fn make(&self, local: &LocalPort) -> Result<TestQp> {
        precheck_ud_size(local, self.spec)?;
        let tq = TestQp::new(local.clone(), shape(self.spec))?;
        pingpong::post_receives(&tq, self.params)?;
        Ok(tq)
    }

    fn connected(&self, tq: &TestQp) -> Result<()> {
        check_ud_size(tq, self.spec)
    }
}

fn plan<'a>(spec: &'a TestSpec, opts: &'a SessionOptions, recipe: &'a PingpongQp) -> Plan<'a> {
    Plan {
        spec,
        wire: Wire::Pingpong,
        n: 1,
        recipe,
        choice: &opts.choice,
        cm_port: opts.port,
        timeout: opts.timeout,
    }
}

/// Client side over rdmadiag's control protocol (QPs connected directly or through rdma_cm);
/// `observer` gets the round trips done.
pub fn client(
    opts: &SessionOptions,
    spec: &TestSpec,
    observer: &dyn Observer,
) -> Result<PingpongReport> {
    let fallback = Progress::default();
    let progress = observer.progress().unwrap_or(&fallback);
    if opts.compat_ibv {
        return compat_client(opts, spec, progress);
    }
    let stream = dial(opts)?;
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    phase::enter(phase::HANDSHAKE, Some(&peer));
    ch.greet_as_client(opts.key.as_ref())?;
    let p = params(spec, opts, &peer);
    let recipe = PingpongQp { spec, params: &p };
    // Owns the QP and its rdma_cm id, and drops them in that order.
    phase::enter(QP_SETUP, None);
    let conn = establish::client(&mut ch, &plan(spec, opts, &recipe))?;
    let (tq, remote) = (&conn.qps[0], conn.remotes[0].clone());
    describe(opts, "local", &tq.endpoint());
    describe(opts, "remote", &remote);
    status(
        opts,
        &format!(
            "running {} round trips of {} bytes with {peer}",
            spec.iterations, spec.size
        ),
    );
    phase::enter(TRANSFER, None);
    let outcome = match pingpong::run(
        tq,
        Side::Initiator,
        (remote.qpn, remote.qkey),
        &p,
        progress,
        &STOP,
    ) {
        Ok(o) => o,
        Err(e) => return Err(ch.fail(e)),
    };
    phase::enter(RESULT_EXCHANGE, None);
    let r = report(spec, tq, tq.endpoint(), remote, &outcome, None);
    ch.send(&Message::Finished {
        summary: Some(summary(&outcome)),
    })?;
    match ch.recv("the server's final message")? {
        Message::Finished { .. } => Ok(r),
        _ => bail!("{peer} ended the run with an unexpected message"),
    }
}

/// Server side: answer one client's ping-pong request. Returns the client's measurement as the
/// same report the client prints.
pub fn serve(
    ch: &mut ControlChannel,
    opts: &SessionOptions,
    spec: &TestSpec,
    client_ep: &Endpoint,
) -> Result<PingpongReport> {
    let peer = ch.peer().to_string();
    if let Err(reason) = validate(spec).and_then(|_| spec.check_combination()) {
        return Err(ch.refuse(reason));
    }
    let p = params(spec, opts, &peer);
    let recipe = PingpongQp { spec, params: &p };
    phase::enter(QP_SETUP, None);
    let conn = establish::server(
        ch,
        &plan(spec, opts, &recipe),
        std::slice::from_ref(client_ep),
    )?;
    let (tq, client) = (&conn.qps[0], conn.remotes[0].clone());
    describe(opts, "local", &tq.endpoint());
    describe(opts, "remote", &client);
    // UD replies need the client's QPN and Q_Key; RC/UC ignore them.
    phase::enter(TRANSFER, None);
    if let Err(e) = pingpong::run(
        tq,
        Side::Responder,
        (client.qpn, client.qkey),
        &p,
        &Progress::default(),
        &STOP,
    ) {
        return Err(ch.fail(e));
    }
    phase::enter(RESULT_EXCHANGE, None);
    let summary = match ch.recv("the client's results")? {
        Message::Finished {
            summary: Some(summary),
        } => summary,
        Message::Finished { summary: None } => bail!("{peer} ended the run without its results"),
        _ => bail!("{peer} ended the run with an unexpected message"),
    };
    ch.send(&Message::Finished { summary: None })?;
    let path_mtu = tq.path_mtu.map_or(0, |m| m.bytes());
    Ok(PingpongReport::new(
        spec,
        path_mtu,
        client,
        tq.endpoint(),
        &summary,
        None,
    ))
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

fn compat_client(
    opts: &SessionOptions,
    spec: &TestSpec,
    progress: &Progress,
) -> Result<PingpongReport> {
    let stream = dial(opts)?;
    let local_ip = stream.local_addr()?.ip();
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    phase::enter(QP_SETUP, Some(&peer));
    let local = choose_port(&opts.choice, Some(local_ip))?;
    precheck_ud_size(&local, spec)?;
    let mut tq = TestQp::new(local, shape(spec))?;
    let p = params(spec, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    let theirs = compat_ibv::client_exchange(&mut ch, &ibv_dest(&tq))?;
    let remote = ibv_remote(&theirs, &tq.local);
    describe(opts, "local", &tq.endpoint());
    tq.connect(
        &remote,
        Some(spec.mtu.unwrap_or(IBV_DEFAULT_MTU)),
        spec.qos(),
    )?;
    check_ud_size(&tq, spec)?;
    phase::enter(TRANSFER, None);
    let outcome = pingpong::run(
        &tq,
        Side::Initiator,
        (remote.qpn, remote.qkey),
        &p,
        progress,
        &STOP,
    )?;
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
    phase::enter(QP_SETUP, Some(&peer));
    let local = choose_port(&opts.choice, Some(local_ip))?;
    let mut tq = TestQp::new(local, shape(spec))?;
    let p = params(spec, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    let theirs = compat_ibv::server_read(&mut ch)?;
    let remote = ibv_remote(&theirs, &tq.local);
    tq.connect(
        &remote,
        Some(spec.mtu.unwrap_or(IBV_DEFAULT_MTU)),
        spec.qos(),
    )?;
    check_ud_size(&tq, spec)?;
    describe(opts, "local", &tq.endpoint());
    compat_ibv::server_finish(&mut ch, &ibv_dest(&tq))?;
    phase::enter(TRANSFER, None);
    let outcome = pingpong::run(
        &tq,
        Side::Responder,
        (remote.qpn, remote.qkey),
        &p,
        &Progress::default(),
        &STOP,
    )
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
