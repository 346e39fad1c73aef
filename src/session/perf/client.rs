//! The client of a perf test: connect the QPs, run every round with the server, collect the
//! report.

use super::qps::PerfQps;
use super::rounds::{
    Beating, RoundContext, RoundOutcome, RoundPlan, beating, prepare_round, run_round,
};
use super::vs_tcp::tcp_client_round;
use super::{Kind, validate, verify_slots};
use crate::connect::control::{
    Batch, ControlChannel, Message, Op, PerfSpec, RoundSummary, TestSpec,
};
use crate::connect::endpoint::Endpoint;
use crate::connect::establish::{self, Connected};
use crate::connect::heartbeat::{Beats, Heartbeat};
use crate::connect::test_qp::TestQp;
use crate::exit::UsageError;
use crate::perf::{Progress, Pulse, Side};
use crate::report::perf::{BwResult, LatResult, PerfReport};
use crate::session::phase::{self, QP_SETUP, RESULT_EXCHANGE, TRANSFER};
use crate::session::{Observer, SessionOptions, dial, status};
use crate::stats::LatencyRecorder;
use anyhow::{Result, anyhow, bail};

/// The client: set up, run every round, collect the report.
pub fn client(
    opts: &SessionOptions,
    spec: &TestSpec,
    observer: &dyn Observer,
) -> Result<PerfReport> {
    let (kind, p) = validate(spec).map_err(UsageError)?;
    let stream = dial(opts)?;
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    phase::enter(phase::HANDSHAKE, Some(&peer));
    ch.greet_as_client(opts.key.as_ref())?;
    let recipe = PerfQps {
        spec,
        kind,
        p: &p,
        side: Side::Initiator,
        min_buffer: 0,
    };
    let plan = recipe.plan(opts);
    // Owns the QPs and the rdma_cm ids, and drops them in that order.
    phase::enter(QP_SETUP, None);
    let mut conn = establish::client(&mut ch, &plan)?;
    let Connected { qps, remotes, .. } = &mut conn;
    let fallback = Progress::default();
    let progress = observer.progress().unwrap_or(&fallback);
    status(opts, &format!("connected {} QP(s) to {peer}", qps.len()));
    let mut report = empty_report(kind, &p, spec, qps, &remotes[0]);
    let cx = RoundContext::new((kind, spec, &p), Side::Initiator, opts.timeout, &peer);
    for &size in &p.sizes {
        observer.round_started(size);
        // The diagnostics move their transfers in rounds of as many as have a slot each.
        let plans: Vec<RoundPlan> = if kind == Kind::Verify {
            let total = p.iterations.unwrap_or(1);
            let slots = verify_slots(size, total);
            (0..total.div_ceil(slots))
                .map(|k| RoundPlan {
                    size,
                    batch: Some(Batch {
                        first: k * slots,
                        count: slots.min(total - k * slots),
                    }),
                })
                .collect()
        } else {
            vec![RoundPlan { size, batch: None }]
        };
        let mut merged: Option<(LatResult, LatencyRecorder)> = None;
        for plan in plans {
            let outcome = client_round(&mut ch, qps, remotes, &cx, plan, progress)?;
            match outcome {
                Some(RoundOutcome::Bw(b)) => report.bw.push(b),
                Some(RoundOutcome::Lat(l, rec)) => {
                    merged = Some(match merged.take() {
                        None => (l, rec),
                        Some((mut all, mut all_rec)) => {
                            all_rec.absorb(&rec);
                            merge_lat(&mut all, &l);
                            (all, all_rec)
                        }
                    })
                }
                None => {}
            }
        }
        if let Some((mut l, rec)) = merged {
            if kind == Kind::Verify {
                l.latency = rec.stats(1.0);
            }
            report.lat.push(l);
        }
    }
    if p.vs_tcp {
        let peer_ip = ch.stream().peer_addr()?.ip();
        for &size in &p.sizes {
            observer.round_started(size);
            phase::enter(TRANSFER, None);
            report
                .tcp
                .push(tcp_client_round(&mut ch, kind, &p, size, peer_ip, opts)?);
        }
    }
    phase::enter(RESULT_EXCHANGE, None);
    ch.send(&Message::Finished { summary: None })?;
    match ch.recv("the server's final message")? {
        Message::Finished { .. } => Ok(report),
        _ => bail!("{peer} ended the run with an unexpected message"),
    }
}

/// The report before any round: the settings the QPs were made with and the endpoints.
pub(super) fn empty_report(
    kind: Kind,
    p: &PerfSpec,
    spec: &TestSpec,
    qps: &[TestQp],
    remote: &Endpoint,
) -> PerfReport {
    // READs and atomics: the initiator waits for each answer (bounded by max_rd_atomic).
    let round_trips = p.op == Op::Read || p.op.is_atomic();
    PerfReport {
        test: kind.test_name(p.op),
        op: p.op,
        transport: spec.link.transport,
        qps: qps.len() as u32,
        tx_depth: p.tx_depth,
        cq_mod: p.cq_mod,
        post_list: p.post_list,
        outstanding_reads: round_trips.then(|| qps[0].rd_atomic as u32),
        outstanding_max: round_trips
            .then(|| qps[0].local.ctx.query_device().ok())
            .flatten()
            .map(|a| {
                a.limits
                    .max_qp_rd_atom
                    .min(a.limits.max_qp_init_rd_atom)
                    .max(0) as u32
            }),
        timing: (kind == Kind::Lat && !round_trips).then_some(p.timing),
        signaling: match (kind, p.op) {
            (Kind::Lat, _) if round_trips => {
                Some("every operation signalled, its completion ends the sample".into())
            }
            (Kind::Verify, _) => {
                Some("every operation signalled, its completion ends the sample".into())
            }
            (Kind::Lat, _) => Some(p.timing.describe().into()),
            _ => None,
        },
        // What is really sent inline: the request, capped by what the device granted.
        inline: if kind == Kind::Verify || round_trips {
            0
        } else {
            p.inline.min(
                qps.iter()
                    .map(|q| q.qp.caps().max_inline_data)
                    .min()
                    .unwrap_or(0),
            )
        },
        tclass: spec.link.reported_tclass(),
        sl: spec.link.reported_sl(),
        bidirectional: p.bidirectional,
        compat: None,
        duration_s: p.duration_ms.map(|d| d as f64 / 1000.0),
        latency_measure: match (kind, p.op) {
            (Kind::Lat, _) if round_trips => Some("round trip".into()),
            (Kind::Verify, _) => Some("round trip".into()),
            (Kind::Lat, _) => Some("half round trip".into()),
            _ => None,
        },
        clock: matches!(kind, Kind::Lat | Kind::Verify)
            .then(|| crate::clock::Clock::get().source()),
        path_mtu: qps[0].path_mtu.map_or(0, |m| m.bytes()),
        local: qps[0].endpoint(),
        remote: remote.clone(),
        bw: Vec::new(),
        lat: Vec::new(),
        tcp: Vec::new(),
        counter_deltas: None,
        thresholds: Vec::new(),
    }
}

/// Fold one diagnostic round into the size's result (latency is re-summarised by the caller).
fn merge_lat(all: &mut LatResult, l: &LatResult) {
    let (t_all, t_l) = (
        all.bw_avg_gbps
            .map(|g| all.iterations as f64 * all.size as f64 * 8.0 / (g * 1e9)),
        l.bw_avg_gbps
            .map(|g| l.iterations as f64 * l.size as f64 * 8.0 / (g * 1e9)),
    );
    all.iterations += l.iterations;
    if let (Some(a), Some(b)) = (t_all, t_l) {
        let bits = all.iterations as f64 * all.size as f64 * 8.0;
        all.bw_avg_gbps = Some(bits / (a + b).max(1e-9) / 1e9);
    }
    all.verified = match (all.verified, l.verified) {
        (Some(a), Some(b)) => Some(a && b),
        (a, b) => a.or(b),
    };
    all.transfers_checked = match (all.transfers_checked, l.transfers_checked) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    if all.mismatch.is_none() {
        all.mismatch = l.mismatch;
    }
    all.cpu_s = match (all.cpu_s, l.cpu_s) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    all.peer_cpu_s = match (all.peer_cpu_s, l.peer_cpu_s) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
}

/// A latency loop's beat (`perf::Pulse`) is the heartbeat's message on the control channel.
impl crate::perf::Beat for Beats {
    fn beat(&mut self) {
        self.send();
    }
}

/// The client's half of one round: tell the server, run, exchange results.
fn client_round(
    ch: &mut ControlChannel,
    qps: &mut [TestQp],
    remotes: &[Endpoint],
    cx: &RoundContext,
    plan: RoundPlan,
    progress: &Progress,
) -> Result<Option<RoundOutcome>> {
    let (kind, p, peer) = (cx.kind, cx.p, cx.peer);
    phase::enter(TRANSFER, None);
    prepare_round(qps, kind, p, plan, false);
    ch.send(&Message::Round {
        size: plan.size,
        batch: plan.batch,
    })?;
    // Beats where the server waits on its channel through the round, from the latency loop
    // itself where it can (the client stays one thread: see exit::stop_on_signals for what a
    // second costs). A heartbeat's thread starts while the server gets ready, not between its
    // readiness and the first timed operation: the server would spin through the thread's
    // start-up (the first latency sample's milliseconds under the lab's emulation).
    let (thread, mut beats) = match beating(kind, p.op) {
        Beating::None => (None, None),
        Beating::FromTheLoop => (None, Some(Beats::new(ch)?)),
        Beating::FromAThread => (Some(Heartbeat::start(ch)?), None),
    };
    match ch.recv("the server's readiness for the round")? {
        Message::RoundReady => {}
        _ => bail!("{peer} sent an unexpected message before the round"),
    }
    let (outcome, cpu) = {
        let _thread = thread;
        let mut pulse = match beats.as_mut() {
            Some(b) => Pulse::every(b.period, b),
            None => Pulse::none(),
        };
        crate::cpu::measure(|| run_round(qps, remotes, cx, plan, progress, &mut pulse))
    };
    let outcome = match outcome {
        Ok(o) => o,
        // A stop says which round it ended (the line would otherwise be just the signal).
        Err(e) if e.is::<crate::exit::Interrupted>() => {
            return Err(ch.fail(e.context(format!("the round of {} bytes with {peer}", plan.size))));
        }
        Err(e) => return Err(ch.fail(e)),
    };
    let mine = RoundSummary {
        cpu_s: cpu,
        bw: match &outcome {
            Some(RoundOutcome::Bw(b)) => Some(b.figures()),
            _ => None,
        },
        verification: None,
    };
    phase::enter(RESULT_EXCHANGE, None);
    ch.send(&Message::RoundDone { summary: mine })?;
    let theirs = match ch.recv_patient("the server's round result")? {
        Message::RoundDone { summary } => summary,
        _ => bail!("{peer} ended the round with an unexpected message"),
    };
    Ok(match outcome {
        Some(RoundOutcome::Bw(mut b)) => {
            b.cpu_s = cpu;
            b.peer_cpu_s = theirs.cpu_s;
            match theirs.bw {
                Some(reverse) if p.bidirectional => b = b.bidirectional(reverse),
                Some(received) => {
                    b.peer = Some(Box::new(BwResult {
                        cpu_s: theirs.cpu_s,
                        peer_cpu_s: cpu,
                        ..BwResult::from_figures(b.size, b.cq_mod, received)
                    }))
                }
                None if p.bidirectional => {
                    bail!("{peer} did not report its direction of the bidirectional round")
                }
                None => {}
            }
            Some(RoundOutcome::Bw(b))
        }
        Some(RoundOutcome::Lat(mut l, rec)) => {
            l.cpu_s = cpu;
            l.peer_cpu_s = theirs.cpu_s;
            if p.op == Op::Write && kind == Kind::Verify {
                // Fail closed: no verdict from the server is no verification.
                let v = theirs.verification.ok_or_else(|| {
                    anyhow!(
                        "{peer} did not say whether our RDMA WRITEs arrived as sent: the data \
                         is unverified"
                    )
                })?;
                if !v.verified && v.mismatch.is_none() {
                    bail!("{peer} reported a verification failure without its details");
                }
                l.verified = Some(v.verified);
                l.mismatch = v.mismatch;
                l.transfers_checked = Some(v.checked);
            }
            Some(RoundOutcome::Lat(l, rec))
        }
        None => None,
    })
}
