//! Both ends of a test against unmodified perftest (`--compat perftest` as client; a one-shot
//! bw or lat server serves perftest clients), over perftest's own out-of-band exchange.
//!
//! The order is perftest's (`write_bw.c`, `read_bw.c`, `atomic_bw.c`, `send_bw.c`,
//! `write_lat.c`, `read_lat.c`, `atomic_lat.c`, `send_lat.c`; atomics go as READ does):
//! versions, system data, MTU; for lat (but ib_send_lat) one handshake more; per QP a key
//! handshake; connect; a second per-QP round and one more handshake (the SEND tests make that
//! one before the second round, and another once their receives are posted); the run; for bw
//! one handshake to say it ended and the bw reports; the close (none after ib_write_lat).

use super::client::empty_report;
use super::perftest_lat::lat_round;
use super::qps::PerfQps;
use super::rounds::{RoundContext, RoundOutcome, RoundPlan, run_round};
use super::{Kind, PerfServed, max_size, validate};
use crate::connect::control::{ControlChannel, Op, PerfSpec, QpType, TestSpec};
use crate::connect::endpoint::{Endpoint, LocalPort, RemoteMemory, choose_port};
use crate::connect::establish::QpRecipe;
use crate::connect::perftest_wire::{BwReport, Lead, PerftestKey, PerftestPeer, SysData};
use crate::connect::protocol::BwFigures;
use crate::connect::test_qp::{TestQp, UD_QKEY};
use crate::exit::UsageError;
use crate::perf::atomic::{self, Targets};
use crate::perf::bw::StreamEnd;
use crate::perf::{Progress, Pulse, Side};
use crate::report::perf::{BwResult, BwUnit, PerfReport};
use crate::session::phase::{self, HANDSHAKE, QP_SETUP, RESULT_EXCHANGE, TRANSFER};
use crate::session::{Observer, Served, SessionOptions, dial, status};
use crate::verbs::{LinkLayer, Mtu};
use anyhow::{Result, anyhow, bail};
use std::net::TcpStream;
use std::time::Duration;

/// What this side speaks of perftest's wire: bw and lat with RC (or UC) WRITE, RC READ and RC
/// atomics, one way; lat one size, counted in iterations.
fn check_spoken(kind: Kind, p: &PerfSpec, spec: &TestSpec) -> Result<(), String> {
    if kind == Kind::Verify {
        return Err(format!(
            "perftest's wire is spoken for bw and lat ({} has no perftest counterpart)",
            kind.test_name(p.op)
        ));
    }
    if spec.link.transport == QpType::Ud || (p.op == Op::Send && spec.link.transport != QpType::Rc)
    {
        return Err(
            "perftest's wire is spoken for RDMA WRITE (RC, UC), READ, atomics and SEND (RC); \
             UC SEND and UD are not built yet"
                .into(),
        );
    }
    if spec.link.cm {
        return Err(
            "perftest's wire is spoken over TCP, as perftest without -R, not with --cm".into(),
        );
    }
    if p.bidirectional || p.vs_tcp {
        return Err("perftest's wire is spoken one way: -b and --vs-tcp are not built yet".into());
    }
    if p.op == Op::Send && p.duration_ms.is_some() {
        return Err("perftest's ib_send_bw is spoken with -n iterations, not -D".into());
    }
    if kind == Kind::Lat && (p.duration_ms.is_some() || p.sizes.len() != 1) {
        return Err(
            "perftest's latency tests are spoken for one size and -n iterations \
                    (not -D, -a or --sizes), the same on both sides"
                .into(),
        );
    }
    Ok(())
}

/// The CPU's cache line, as perftest finds it (sysfs, else 64).
fn cache_line_size() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &u32| n > 0)
        .unwrap_or(64)
}

/// Our QP as perftest's key message carries it: with the GID on RoCE (perftest always sends
/// it there), without on InfiniBand (perftest sends it there only with -x).
fn key_of(tq: &TestQp, landing: usize) -> PerftestKey {
    let roce = tq.local.attr.link_layer == LinkLayer::Ethernet;
    PerftestKey {
        lid: tq.local.attr.lid,
        out_reads: u16::from(tq.rd_atomic),
        qpn: tq.qp.qp_num(),
        psn: tq.psn,
        rkey: tq.mr.rkey(),
        vaddr: tq.mr.addr() + landing as u64,
        gid: roce.then(|| tq.local.gid.as_ref().map(|g| g.gid).unwrap_or_default()),
        srqn: 0,
    }
}

/// The peer's QP as an endpoint: what its key says, with `len` bytes of buffer at its address.
fn endpoint_of(k: &PerftestKey, local: &LocalPort, mtu: Mtu, len: u64) -> Endpoint {
    Endpoint {
        device: "perftest".into(),
        port: 0,
        link_layer: local.attr.link_layer.to_string(),
        lid: k.lid,
        qpn: k.qpn,
        psn: k.psn,
        gid: k.gid.unwrap_or_default(),
        gid_index: 0,
        gid_type: None,
        netdev: None,
        active_mtu: mtu.bytes(),
        qkey: UD_QKEY,
        memory: Some(RemoteMemory {
            addr: k.vaddr,
            rkey: k.rkey,
            len,
            landing: None,
        }),
    }
}

/// Both ends' set-up, perftest's order: versions, system data, MTU, one key round per QP,
/// connect, a second key round and one more handshake. Returns the connected QPs.
struct SetUp {
    qps: Vec<TestQp>,
    remotes: Vec<Endpoint>,
    /// Our key per QP, re-sent at every later handshake.
    mine: Vec<PerftestKey>,
    /// The cycle buffer and cache line both sides use.
    sys: SysData,
}

fn set_up(
    pt: &mut PerftestPeer,
    opts: &SessionOptions,
    spec: &TestSpec,
    (kind, p, side): (Kind, &PerfSpec, Side),
    local: &LocalPort,
) -> Result<SetUp> {
    let sys = pt.sys_data(SysData {
        cycle_buffer: crate::verbs::page_size() as u32,
        cache_line_size: cache_line_size(),
    })?;
    let ours = spec.link.mtu.map_or(local.active_mtu(), Mtu);
    let mtu = pt.mtu(ours)?;
    phase::enter(QP_SETUP, None);
    // A perftest client steps its local and remote addresses through the cycle buffer, as
    // ours does against a perftest server: each side's buffer spans at least that.
    let max = max_size(p) as u64;
    let span = max.max(u64::from(sys.cycle_buffer));
    let recipe = PerfQps {
        spec,
        kind,
        p,
        side,
        min_buffer: span as usize,
    };
    let mut qps = (0..recipe.count())
        .map(|_| recipe.make(local))
        .collect::<Result<Vec<_>>>()?;
    if side == Side::Responder && p.op.is_atomic() {
        // Our targets start zeroed (or as the `test-hooks` build is told), before the peer
        // can reach them.
        let start = atomic::target_start();
        for tq in &mut qps {
            tq.mr.as_mut_slice()[atomic::RESULT].copy_from_slice(&start.to_ne_bytes());
        }
    }
    // The address the peer's operations go to: for WRITE latency the landing zone (a page
    // past the source), else the buffer's start.
    let mine: Vec<PerftestKey> = qps
        .iter()
        .map(|tq| key_of(tq, tq.landing.unwrap_or(0)))
        .collect();
    // perftest's latency tests but ib_send_lat shake hands once more before the per-QP round.
    let send = recipe.p.op == Op::Send;
    if recipe.kind == Kind::Lat && !send {
        pt.hand_shake(&mine[0])?;
    }
    let theirs = mine
        .iter()
        .map(|k| pt.hand_shake(k))
        .collect::<Result<Vec<_>>>()?;
    let mut remotes = Vec::with_capacity(qps.len());
    for (tq, k) in qps.iter_mut().zip(&theirs) {
        // The initiator's READs in flight: no more than the responder said it answers (the
        // responder answers as many as it said, which the initiator may use).
        if recipe.side == Side::Initiator {
            tq.rd_atomic = tq.rd_atomic.min(k.out_reads.clamp(1, 255) as u8);
        }
        // The server's buffer per QP is at least the larger of its -s and the cycle buffer;
        // a transfer past its -s fails on the wire and is explained then.
        let remote = endpoint_of(k, local, mtu, span);
        tq.connect(&remote, Some(mtu.bytes()), spec.link.qos())?;
        remotes.push(remote);
    }
    // ib_send_bw and ib_send_lat shake hands once before their second per-QP round, the
    // others once after.
    if send {
        again(pt, &mine[0], &theirs[0], qps.len())?;
    }
    for (k, first) in mine.iter().zip(&theirs) {
        again(pt, k, first, qps.len())?;
    }
    if !send {
        again(pt, &mine[0], &theirs[0], qps.len())?;
    }
    status(
        opts,
        &format!(
            "connected {} QP(s) to perftest {} ({})",
            qps.len(),
            pt.theirs,
            pt.who()
        ),
    );
    Ok(SetUp {
        qps,
        remotes,
        mine,
        sys,
    })
}

/// A later handshake: perftest re-sends the same key each time, so one that differs is the first
/// key of a QP this side does not have (the peer was given a larger -q).
fn again(pt: &mut PerftestPeer, mine: &PerftestKey, first: &PerftestKey, qps: usize) -> Result<()> {
    if pt.hand_shake(mine)?.qpn != first.qpn {
        bail!(
            "{} connects more QPs than this side's -q {qps}: give both sides the same -q",
            pt.who()
        );
    }
    Ok(())
}

/// Both ends, met and set up: the conversation, the connected QPs, and the report so far.
struct Met {
    pt: PerftestPeer,
    qps: Vec<TestQp>,
    remotes: Vec<Endpoint>,
    mine: Vec<PerftestKey>,
    sys: SysData,
    report: PerfReport,
}

/// Start the conversation on `stream` (the client leads) and set up the QPs of `p`.
fn meet(
    stream: TcpStream,
    opts: &SessionOptions,
    spec: &TestSpec,
    p: &PerfSpec,
    kind: Kind,
    side: Side,
) -> Result<Met> {
    let local_ip = stream.local_addr()?.ip();
    let ch = ControlChannel::new(stream, opts.timeout)?;
    phase::enter(HANDSHAKE, Some(ch.peer()));
    let lead = match side {
        Side::Initiator => Lead::Client,
        Side::Responder => Lead::Server,
    };
    let mut pt = PerftestPeer::start(ch, lead)?;
    let local = choose_port(&opts.choice, Some(local_ip))?;
    let SetUp {
        qps,
        remotes,
        mine,
        sys,
    } = set_up(&mut pt, opts, spec, (kind, p, side), &local)?;
    let mut report = empty_report(kind, p, spec, &qps, &remotes[0]);
    report.compat = Some(format!("perftest {}", pt.theirs));
    Ok(Met {
        pt,
        qps,
        remotes,
        mine,
        sys,
        report,
    })
}

/// Connect to a perftest server and run the bw or lat test it serves.
pub fn perftest_client(
    opts: &SessionOptions,
    spec: &TestSpec,
    observer: &dyn Observer,
) -> Result<PerfReport> {
    let (kind, p) = validate(spec).map_err(UsageError)?;
    check_spoken(kind, &p, spec).map_err(|why| UsageError(format!("--compat perftest: {why}")))?;
    let Met {
        mut pt,
        mut qps,
        remotes,
        mine,
        sys,
        mut report,
    } = meet(dial(opts)?, opts, spec, &p, kind, Side::Initiator)?;
    let peer = pt.peer().to_string();
    let fallback = Progress::default();
    let progress = observer.progress().unwrap_or(&fallback);
    phase::enter(TRANSFER, None);
    if kind == Kind::Lat {
        observer.round_started(p.sizes[0]);
        // ib_send_lat's server posts its receives, then shakes hands.
        if p.op == Op::Send {
            pt.hand_shake(&mine[0])?;
        }
        let (outcome, cpu) = crate::cpu::measure(|| {
            lat_round(
                &mut qps,
                &remotes,
                (spec, &p),
                Side::Initiator,
                opts.timeout,
                &peer,
            )
        });
        let mut l = outcome?.ok_or_else(|| anyhow!("a latency run produced no samples"))?;
        l.cpu_s = cpu;
        report.lat.push(l);
        // The others' servers wait in the close; ib_write_lat's has none.
        if p.op != Op::Write {
            phase::enter(RESULT_EXCHANGE, None);
            pt.close(&mine[0])?;
        }
        return Ok(report);
    }
    // perftest's atomic targets hold random bytes: read them before the run. Operations step
    // through the server's cycle buffer, as perftest's clients' do.
    let cx = RoundContext {
        targets: Targets::AsFound,
        cycle: Some(sys),
        ..RoundContext::new((kind, spec, &p), Side::Initiator, opts.timeout, &peer)
    };
    let max = max_size(&p) as u64;
    // ib_send_bw's server posts its receives, then shakes hands, for every size; in a sweep
    // (perftest's -a: more than one size) it shakes hands again after each. Each side prints
    // what it measured: no reports are swapped.
    let send = p.op == Op::Send;
    let sweep = p.sizes.len() > 1;
    for &size in &p.sizes {
        observer.round_started(size);
        if send {
            pt.hand_shake(&mine[0])?;
        }
        let plan = RoundPlan { size, batch: None };
        let (outcome, cpu) = crate::cpu::measure(|| {
            run_round(&mut qps, &remotes, &cx, plan, progress, &mut Pulse::none())
        });
        match outcome.map_err(|e| explain(e, max, pt.who()))? {
            Some(RoundOutcome::Bw(mut b)) => {
                b.cpu_s = cpu;
                report.bw.push(b);
            }
            _ => return Err(anyhow!("a bw round produced no bandwidth figures")),
        }
        if send && sweep {
            pt.hand_shake(&mine[0]).map_err(|e| {
                e.context(format!(
                    "{} did not end its run: give it the same -n as this side ({})",
                    pt.who(),
                    p.iterations.unwrap_or(0)
                ))
            })?;
        }
    }
    phase::enter(RESULT_EXCHANGE, None);
    if send {
        pt.close(&mine[0])?;
        return Ok(report);
    }
    // The run has ended: the server, waiting in a handshake, now swaps reports.
    pt.hand_shake(&mine[0])?;
    let last = report.bw.last().ok_or_else(|| anyhow!("no size was run"))?;
    pt.bw_reports(&perftest_report(last))?;
    pt.close(&mine[0])?;
    Ok(report)
}

/// How long a server waits, in one handshake, for a perftest client's run to end (perftest
/// says nothing while it runs).
pub const RUN_LIMIT: Duration = Duration::from_secs(3600);

/// Serve one perftest client (ib_{write,read,send,atomic}_{bw,lat}) with this server's own
/// test flags: the client never says which test it runs. A WRITE, READ or atomic bw server
/// returns the client's figures, which it sends at the end, as perftest's server prints them;
/// a SEND bw server what it received; a WRITE or SEND latency server its own samples, as
/// perftest's; a READ or atomic latency server nothing. Atomics are checked on our buffers.
pub fn perftest_serve(stream: TcpStream, opts: &SessionOptions, spec: &TestSpec) -> Result<Served> {
    let (kind, p) = validate(spec).map_err(UsageError)?;
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    // The server was not asked for a test perftest's wire carries: the client is the surprise.
    check_spoken(kind, &p, spec)
        .map_err(|why| anyhow!("a perftest client ({peer}) reached this server: {why}"))?;
    let Met {
        mut pt,
        mut qps,
        remotes,
        mine,
        mut report,
        ..
    } = meet(stream, opts, spec, &p, kind, Side::Responder)?;
    let version = pt.theirs;
    phase::enter(TRANSFER, None);
    if kind == Kind::Lat && matches!(p.op, Op::Write | Op::Send) {
        // ib_send_lat: our receives are posted (the QPs were made so): a handshake, the
        // ping-pong, the close. ib_write_lat: the ping-pong, no close.
        if p.op == Op::Send {
            pt.hand_shake(&mine[0])?;
        }
        let l = lat_round(
            &mut qps,
            &remotes,
            (spec, &p),
            Side::Responder,
            opts.timeout,
            &peer,
        )?
        .ok_or_else(|| anyhow!("a latency run produced no samples"))?;
        report.lat.push(l);
        if p.op == Op::Send {
            phase::enter(RESULT_EXCHANGE, None);
            pt.close(&mine[0])?;
        }
        return Ok(Served::Perftest(Box::new(report)));
    }
    if p.op == Op::Send {
        // ib_send_bw: our receives are posted (the QPs were made so); per size a handshake,
        // the run (the client's -n messages per QP, counted: it marks no last one), another.
        let cx = RoundContext {
            end: StreamEnd::Count(p.iterations.unwrap_or(0)),
            ..RoundContext::new((kind, spec, &p), Side::Responder, opts.timeout, &peer)
        };
        for &size in &p.sizes {
            pt.hand_shake(&mine[0])?;
            let plan = RoundPlan { size, batch: None };
            let (outcome, cpu) = crate::cpu::measure(|| {
                run_round(
                    &mut qps,
                    &remotes,
                    &cx,
                    plan,
                    &Progress::default(),
                    &mut Pulse::none(),
                )
            });
            match outcome.map_err(|e| {
                e.context(format!(
                    "the perftest client sends -n messages per QP and this side counts its own \
                     -n ({}) and -s ({size}): give both sides the same",
                    p.iterations.unwrap_or(0)
                ))
            })? {
                Some(RoundOutcome::Bw(mut b)) => {
                    b.cpu_s = cpu;
                    report.bw.push(b);
                }
                _ => return Err(anyhow!("a SEND round received nothing")),
            }
            if p.sizes.len() > 1 {
                pt.hand_shake(&mine[0])?;
            }
        }
        phase::enter(RESULT_EXCHANGE, None);
        pt.close(&mine[0])?;
        return Ok(Served::Perftest(Box::new(report)));
    }
    status(
        opts,
        &format!(
            "perftest {version} client {peer} runs its test (up to {})",
            humantime::format_duration(RUN_LIMIT)
        ),
    );
    pt.set_timeout(RUN_LIMIT);
    if kind == Kind::Lat {
        // ib_read_lat, ib_atomic_lat: its operations need nothing of this side; it ends with
        // the close. ib_atomic_lat makes exactly -n on one target.
        pt.close(&mine[0]).map_err(|e| early(e, p.op, kind))?;
        if p.op.is_atomic() {
            let n = p.iterations.unwrap_or(0);
            atomic::check_served(&qps, p.op, n, &format!("{n} (this side's -n)"), &peer)?;
        }
        return Ok(Served::Perf(PerfServed {
            test: kind.test_name(p.op),
            rounds: 1,
        }));
    }
    pt.hand_shake(&mine[0]).map_err(|e| early(e, p.op, kind))?;
    pt.set_timeout(opts.timeout);
    phase::enter(RESULT_EXCHANGE, None);
    let theirs = pt.bw_reports(&BwReport {
        size: 0,
        iters: 0,
        bw_peak: 0.0,
        bw_avg: 0.0,
        msg_rate: 0.0,
    })?;
    pt.close(&mine[0])?;
    // ib_atomic_bw counted with -n makes exactly what it reports (over all its QPs); with -D
    // it adds a warm-up and the ops past its window, which it does not count.
    if p.op.is_atomic() && p.duration_ms.is_none() {
        let n = theirs.iters;
        let what = format!(
            "{n} (its report; a client run with -D or --perform_warm_up adds more than it \
             reports: give this server the same -D)"
        );
        atomic::check_served(&qps, p.op, n, &what, &peer)?;
    }
    report.bw.push(from_perftest(&theirs));
    Ok(Served::Perftest(Box::new(report)))
}

/// A perftest client that ended while this server waited for its run: most likely another
/// test than the server's.
fn early(e: anyhow::Error, op: Op, kind: Kind) -> anyhow::Error {
    e.context(format!(
        "the perftest client ended early: if it ran another test than this server's --op {op} \
         ({}), start the server with that --op",
        perftest_tool(op, kind)
    ))
}

/// The perftest tool that runs `op`'s `kind` (bw or lat) of test.
fn perftest_tool(op: Op, kind: Kind) -> String {
    let verb = if op.is_atomic() {
        "atomic".to_string()
    } else {
        op.to_string()
    };
    format!("ib_{verb}_{}", kind.test_name(op))
}

/// What perftest's server prints for us: the last size's figures in MB/s.
fn perftest_report(b: &BwResult) -> BwReport {
    BwReport {
        size: u64::from(b.size),
        iters: b.iterations,
        bw_peak: BwUnit::Mib.convert(b.bw_peak_gbps),
        bw_avg: BwUnit::Mib.convert(b.bw_avg_gbps),
        msg_rate: b.msg_rate_mpps,
    }
}

/// A perftest client's report as a result: its figures in MB/s, taken as sent.
fn from_perftest(r: &BwReport) -> BwResult {
    // perftest's MB/s is 2^20 bytes a second (its default unit).
    let gbps = |mib: f64| BwUnit::Mib.to_gbps(mib);
    let avg_bytes = gbps(r.bw_avg) * 1e9 / 8.0;
    BwResult::from_figures(
        u32::try_from(r.size).unwrap_or(u32::MAX),
        0,
        BwFigures {
            iterations: r.iters,
            bw_peak_gbps: gbps(r.bw_peak),
            bw_avg_gbps: gbps(r.bw_avg),
            msg_rate_mpps: r.msg_rate,
            elapsed_s: if avg_bytes > 0.0 {
                r.size as f64 * r.iters as f64 / avg_bytes
            } else {
                0.0
            },
        },
    )
}

/// A remote access or invalid-request error against perftest is almost always its buffer:
/// registered for its own -s, not ours.
fn explain(e: anyhow::Error, max: u64, who: &str) -> anyhow::Error {
    let text = format!("{e:#}");
    if text.contains("IBV_WC_REM_ACCESS_ERR") || text.contains("IBV_WC_REM_INV_REQ_ERR") {
        e.context(format!(
            "{who}'s buffer is registered for its own -s, which is smaller than our \
             -s {max}: start it with -s {max} (or -a)"
        ))
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mib_is_perftests_unit() {
        // 8.388608 Gb/s is 2^20 * 1000 bytes a second: 1000 MB/s in perftest's unit.
        assert!((BwUnit::Mib.convert(8.388_608) - 1000.0).abs() < 1e-9);
        assert!((BwUnit::Mib.to_gbps(1000.0) - 8.388_608).abs() < 1e-9);
    }
}
