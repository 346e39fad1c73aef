//! Both halves of a ping-pong run over the control channel (or rdma-core's exchange with --compat).

use super::phase::{self, QP_SETUP, RESULT_EXCHANGE, TRANSFER};
use super::{Compat, Observer, STOP, SessionOptions, dial, status};
use crate::connect::compat_ibv::{self, IbvDest};
use crate::connect::control::{
    ControlChannel, LinkSpec, Message, PingpongSpec, PingpongSummary, QpType, Test, TestSpec,
};
use crate::connect::endpoint::{Endpoint, LocalPort, choose_port};
use crate::connect::establish::{self, Plan, QpRecipe, Wire};
use crate::connect::test_qp::{QpShape, TestQp};
use crate::exit::UsageError;
use crate::perf::Progress;
use crate::perf::Side;
use crate::pingpong::{self, PingpongParams};
use crate::report::pingpong::PingpongReport;
use crate::verbs::Access;
use anyhow::{Result, anyhow, bail};
use std::net::TcpStream;

/// Largest message a server accepts unless told otherwise.
pub const MAX_SIZE: u32 = 1 << 30;
/// Most receives a run may keep posted.
pub const MAX_RX_DEPTH: u32 = 1 << 16;

/// Check a spec against this side's limits and return its ping-pong parameters; the reason is
/// told to the client.
pub fn validate(spec: &TestSpec) -> Result<PingpongSpec, String> {
    let Test::Pingpong(p) = spec.test else {
        return Err(format!("a {} test is not a ping-pong", spec.test.name()));
    };
    if p.size == 0 || p.size > MAX_SIZE {
        return Err(format!("size {} is outside 1..={MAX_SIZE}", p.size));
    }
    if p.iterations == 0 {
        return Err("iterations must be at least 1".into());
    }
    if p.rx_depth == 0 || p.rx_depth > MAX_RX_DEPTH {
        return Err(format!(
            "rx depth {} is outside 1..={MAX_RX_DEPTH}",
            p.rx_depth
        ));
    }
    Ok(p)
}

/// A checked ping-pong request: the whole spec (sent as it is) and its ping-pong parameters.
#[derive(Clone, Copy)]
struct Run<'a> {
    spec: &'a TestSpec,
    pp: PingpongSpec,
}

impl<'a> Run<'a> {
    fn of(spec: &'a TestSpec) -> Result<Run<'a>, String> {
        Ok(Run {
            spec,
            pp: validate(spec)?,
        })
    }

    fn link(&self) -> &LinkSpec {
        &self.spec.link
    }
}

fn shape(r: Run) -> QpShape {
    let (transport, p) = (r.link().transport, r.pp);
    QpShape {
        transport,
        send_depth: 64,
        recv_depth: p.rx_depth,
        buffer_len: pingpong::buffer_len(transport, p.size as usize, p.rx_depth),
        max_inline: if p.size <= 64 { 64 } else { 0 },
        access: Access::LOCAL_WRITE,
        events: p.events,
        rd_atomic: 1,
    }
}

fn params(r: Run, opts: &SessionOptions, peer: &str) -> PingpongParams {
    // The samples' clock is calibrated here, in the set-up, not in the first round trip.
    crate::clock::Clock::get();
    let p = r.pp;
    PingpongParams {
        size: p.size as usize,
        recv_size: p.size as usize,
        iterations: p.iterations,
        rx_depth: p.rx_depth,
        events: p.events,
        duration: None,
        mark_last: opts.compat != Some(Compat::Ibv),
        inline_max: 64,
        // As ibv_rc_pingpong: every send signalled, each side waits for it every round trip.
        signal_every: 1,
        timeout: opts.timeout,
        peer: peer.to_string(),
    }
}

/// UD messages must fit one MTU: `limit` is the path MTU (`what` says so) or, before the QP
/// connects, what the local port and `--mtu` allow.
fn ud_size_fits(r: Run, limit: u32, what: &str) -> Result<()> {
    if r.link().transport == QpType::Ud && r.pp.size > limit {
        return Err(UsageError(format!(
            "UD messages must fit in one MTU: -s {} is larger than {what}{limit}",
            r.pp.size
        ))
        .into());
    }
    Ok(())
}

fn check_ud_size(tq: &TestQp, r: Run) -> Result<()> {
    ud_size_fits(r, tq.path_mtu.map_or(0, |m| m.bytes()), "the path MTU ")
}

/// Refuse early what the local port alone rules out.
fn precheck_ud_size(local: &LocalPort, r: Run) -> Result<()> {
    let port = local.active_mtu().bytes();
    ud_size_fits(r, r.link().mtu.unwrap_or(u32::MAX).min(port), "")
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
    r: Run,
    tq: &TestQp,
    local: Endpoint,
    remote: Endpoint,
    outcome: &pingpong::PingpongOutcome,
    compat: Option<&'static str>,
) -> PingpongReport {
    PingpongReport::new(
        r.link(),
        &r.pp,
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
        clock: Some(crate::clock::Clock::get().source()),
    }
}

/// How each side makes its ping-pong QP: shape, receives posted, UD size checked.
struct PingpongQp<'a> {
    run: Run<'a>,
    params: &'a PingpongParams,
}

impl QpRecipe for PingpongQp<'_> {
    fn make(&self, local: &LocalPort) -> Result<TestQp> {
        precheck_ud_size(local, self.run)?;
        let tq = TestQp::new(local.clone(), shape(self.run))?;
        pingpong::post_receives(&tq, self.params)?;
        Ok(tq)
    }

    fn connected(&self, tq: &TestQp) -> Result<()> {
        check_ud_size(tq, self.run)
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
    let run = Run::of(spec).map_err(UsageError)?;
    if opts.compat == Some(Compat::Ibv) {
        return compat_client(opts, run, progress);
    }
    let stream = dial(opts)?;
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    phase::enter(phase::HANDSHAKE, Some(&peer));
    ch.greet_as_client(opts.key.as_ref())?;
    let p = params(run, opts, &peer);
    let recipe = PingpongQp { run, params: &p };
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
            run.pp.iterations, run.pp.size
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
    let r = report(run, tq, tq.endpoint(), remote, &outcome, None);
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
    let run = match spec.check_combination().and_then(|_| Run::of(spec)) {
        Ok(run) => run,
        Err(reason) => return Err(ch.refuse(reason)),
    };
    let p = params(run, opts, &peer);
    let recipe = PingpongQp { run, params: &p };
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
        &spec.link,
        &run.pp,
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

/// How a report names a run against rdma-core's ibv_*_pingpong.
const IBV: Option<&str> = Some("ibv");

/// rdma-core's MTU when neither side says (ibv_rc_pingpong's -m default).
const IBV_DEFAULT_MTU: u32 = 1024;

/// Connect to an rdma-core peer from what its exchange told (at `--mtu`, else its default).
fn compat_connect(tq: &mut TestQp, theirs: &IbvDest, run: Run) -> Result<Endpoint> {
    let remote = ibv_remote(theirs, &tq.local);
    let mtu = run.link().mtu.unwrap_or(IBV_DEFAULT_MTU);
    tq.connect(&remote, Some(mtu), run.link().qos())?;
    check_ud_size(tq, run)?;
    Ok(remote)
}

fn compat_client(opts: &SessionOptions, run: Run, progress: &Progress) -> Result<PingpongReport> {
    let stream = dial(opts)?;
    let local_ip = stream.local_addr()?.ip();
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    phase::enter(QP_SETUP, Some(&peer));
    let local = choose_port(&opts.choice, Some(local_ip))?;
    precheck_ud_size(&local, run)?;
    let mut tq = TestQp::new(local, shape(run))?;
    let p = params(run, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    let theirs = compat_ibv::client_exchange(&mut ch, &ibv_dest(&tq))?;
    describe(opts, "local", &tq.endpoint());
    let remote = compat_connect(&mut tq, &theirs, run)?;
    phase::enter(TRANSFER, None);
    let outcome = pingpong::run(
        &tq,
        Side::Initiator,
        (remote.qpn, remote.qkey),
        &p,
        progress,
        &STOP,
    )?;
    Ok(report(run, &tq, tq.endpoint(), remote, &outcome, IBV))
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
    let run = Run::of(spec).map_err(UsageError)?;
    let mut tq = TestQp::new(local, shape(run))?;
    let p = params(run, opts, &peer);
    pingpong::post_receives(&tq, &p)?;
    let theirs = compat_ibv::server_read(&mut ch)?;
    let remote = compat_connect(&mut tq, &theirs, run)?;
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
    Ok(report(run, &tq, tq.endpoint(), remote, &outcome, IBV))
}
