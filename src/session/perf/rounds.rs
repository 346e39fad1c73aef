//! One round of a perf test on this side: lay out the buffers, run the engine for the round's
//! size (or the diagnostics' batch of transfers), and turn what it measured into a result.

use super::qps::{pp_params, recv_len};
use super::{Kind, RX_DEPTH, gbps, max_size};
use crate::connect::control::{Batch, Op, PerfSpec, TestSpec};
use crate::connect::endpoint::{Endpoint, RemoteMemory};
use crate::connect::perftest_wire::SysData;
use crate::connect::test_qp::TestQp;
use crate::perf::atomic::{self, Targets};
use crate::perf::bw::{self, BwOutcome, BwParams, StreamEnd};
use crate::perf::lat::{self, LatParams};
use crate::perf::{Progress, Pulse, Side, verify};
use crate::pingpong;
use crate::report::perf::{AddressSteps, BwResult, LatResult};
use crate::session::STOP;
use crate::stats::LatencyRecorder;
use crate::verbs::AddressCycle;
use anyhow::{Result, anyhow};
use std::time::Duration;

pub(super) fn bw_result(size: u32, cq_mod: u32, o: &BwOutcome) -> BwResult {
    BwResult {
        size,
        iterations: o.messages,
        cq_mod,
        bw_peak_gbps: gbps(o.peak_bytes_per_sec),
        bw_avg_gbps: gbps(o.avg_bytes_per_sec()),
        msg_rate_mpps: o.msg_rate() / 1e6,
        elapsed_s: o.elapsed.as_secs_f64(),
        cpu_s: None,
        peer_cpu_s: None,
        peer: None,
        forward: None,
        reverse: None,
        address_steps: None,
    }
}

/// What the client's engines produced for one round.
pub(super) enum RoundOutcome {
    Bw(BwResult),
    Lat(LatResult, LatencyRecorder),
}

/// One round: its message size, and for the diagnostics the transfers it moves.
#[derive(Debug, Clone, Copy)]
pub(super) struct RoundPlan {
    pub size: u32,
    pub batch: Option<Batch>,
}

/// What one side needs to play its part in rounds.
pub(super) struct RoundContext<'a> {
    pub kind: Kind,
    pub spec: &'a TestSpec,
    pub p: &'a PerfSpec,
    /// The client initiates; the server responds.
    pub side: Side,
    pub timeout: Duration,
    pub peer: &'a str,
    /// How a SEND receiver knows the sender is done.
    pub end: StreamEnd,
    /// Atomics: what the initiator knows of the peer's targets before a round.
    pub targets: Targets,
    /// A perftest peer's cycle buffer and cache line: the initiator's bandwidth operations
    /// step through it as perftest's clients do (None: one address each).
    pub cycle: Option<SysData>,
}

impl<'a> RoundContext<'a> {
    /// rdmadiag's rounds: SEND streams end with a stop mark, atomic targets start zeroed.
    pub fn new(
        (kind, spec, p): (Kind, &'a TestSpec, &'a PerfSpec),
        side: Side,
        timeout: Duration,
        peer: &'a str,
    ) -> Self {
        RoundContext {
            kind,
            spec,
            p,
            side,
            timeout,
            peer,
            end: StreamEnd::StopMark,
            targets: Targets::Zeroed,
            cycle: None,
        }
    }
}

/// How the client keeps the server's control channel alive through a round
/// (`connect::heartbeat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Beating {
    /// lat WRITE and SEND: both sides run the timed loop, operation for operation, and end it
    /// together; the server does not wait on its channel.
    None,
    /// lat READ and atomics, the data diagnostics: the server waits for the round's end while
    /// the client's serial loop gives the beats itself (`perf::Pulse`), so the client stays
    /// one thread.
    FromTheLoop,
    /// Bandwidth: the server waits (or receives) while a thread beside the engine beats.
    FromAThread,
}

pub(super) fn beating(kind: Kind, op: Op) -> Beating {
    match (kind, op) {
        (Kind::Lat, Op::Write | Op::Send) => Beating::None,
        (Kind::Lat | Kind::Verify, _) => Beating::FromTheLoop,
        (Kind::Bw, _) => Beating::FromAThread,
    }
}

/// This side's part of one round.
pub(super) fn run_round(
    qps: &mut [TestQp],
    remotes: &[Endpoint],
    cx: &RoundContext,
    round: RoundPlan,
    progress: &Progress,
    pulse: &mut Pulse,
) -> Result<Option<RoundOutcome>> {
    let (kind, spec, p, side, timeout, peer) =
        (cx.kind, cx.spec, cx.p, cx.side, cx.timeout, cx.peer);
    let initiator = side == Side::Initiator;
    let size = round.size;
    let max = max_size(p);
    let duration = p.duration_ms.map(Duration::from_millis);
    let mems: Vec<Option<RemoteMemory>> = remotes.iter().map(|e| e.memory).collect();
    let lat_params = |iterations: Option<u64>, slots: u64, drop: Option<u64>| LatParams {
        op: p.op,
        size: size as usize,
        iterations,
        duration,
        inline_max: if kind == Kind::Verify {
            0
        } else {
            p.inline as usize
        },
        signal_every: p.timing.signal_every(),
        slots,
        drop_for_test: drop,
        marks: lat::Marks::Rdmadiag,
        atomic_base: 0,
        timeout,
        peer: peer.to_string(),
    };
    match kind {
        Kind::Bw => {
            let send = initiator || p.bidirectional;
            let receive = p.op == Op::Send && (!initiator || p.bidirectional);
            if !send && !receive {
                return Ok(None); // one-sided: the server's CPU takes no part
            }
            let cq_mod = bw::effective_cq_mod(
                p.cq_mod,
                p.cq_mod_explicit,
                size as usize,
                spec.link.transport,
                p.tx_depth,
            );
            let bp = BwParams {
                op: p.op,
                size: size as usize,
                iterations: p.iterations,
                duration,
                tx_depth: p.tx_depth,
                cq_mod,
                post_list: p.post_list,
                inline: size <= p.inline
                    && !p.op.is_atomic()
                    && qps.iter().all(|q| size <= q.qp.caps().max_inline_data),
                rx_depth: RX_DEPTH,
                recv: max..max + recv_len(spec, max),
                send,
                receive,
                end: cx.end,
                timeout,
                peer: peer.to_string(),
                cycle: cx.address_cycle(size as usize),
            };
            let atomics = p.op.is_atomic() && initiator;
            let bases = if atomics {
                targets_before(qps, &mems, cx, bp.cycle)?
            } else {
                Vec::new()
            };
            let o = bw::run(qps, remotes, &bp, progress, &STOP)?;
            if atomics {
                let targets = (&bases[..], o.messages, bp.cycle);
                check_targets(qps, &mems, (p.op, false), targets, cx)?;
            }
            let mut r = bw_result(size, cq_mod, &o);
            r.address_steps = bp.cycle.map(|c| AddressSteps {
                stride_bytes: c.stride,
                positions: c.positions,
            });
            Ok(Some(RoundOutcome::Bw(r)))
        }
        Kind::Lat => {
            let tq = &mut qps[0];
            let lp = lat_params(p.iterations, 1, None);
            let (recorder, iterations, scale) = match p.op {
                Op::Send => {
                    let pp = pp_params(spec, size as usize, max, p.iterations, peer, timeout);
                    let remote = (remotes[0].qpn, remotes[0].qkey);
                    let o = pingpong::run(tq, side, remote, &pp, progress, &STOP)?;
                    (o.latency, o.round_trips, 2.0)
                }
                Op::Write => {
                    let mem = mems[0].ok_or_else(|| anyhow!("the peer exposed no buffer"))?;
                    let o = lat::run_write(tq, side, mem, max, &lp, &STOP)?;
                    (o.latency, o.iterations, 2.0)
                }
                Op::Read | Op::AtomicFadd | Op::AtomicCswap if initiator => {
                    let mem = mems[0].ok_or_else(|| anyhow!("the peer exposed no buffer"))?;
                    let o = lat::run_serial(tq, mem, &lp, &STOP, pulse)?;
                    if p.op.is_atomic() {
                        let targets = (&[0][..], o.iterations, None);
                        check_targets(qps, &mems, (p.op, true), targets, cx)?;
                    }
                    (o.latency, o.iterations, 1.0)
                }
                Op::Read | Op::AtomicFadd | Op::AtomicCswap => return Ok(None),
            };
            if !initiator {
                return Ok(None);
            }
            Ok(Some(RoundOutcome::Lat(
                LatResult {
                    size,
                    iterations,
                    latency: recorder.stats(scale),
                    bw_avg_gbps: None,
                    verified: None,
                    transfers_checked: None,
                    mismatch: None,
                    histogram: recorder.buckets(20, scale),
                    cpu_s: None,
                    peer_cpu_s: None,
                },
                recorder,
            )))
        }
        Kind::Verify => {
            if !initiator {
                return Ok(None);
            }
            let batch = round
                .batch
                .ok_or_else(|| anyhow!("a diagnostic round without its transfers"))?;
            let tq = &mut qps[0];
            let mem = mems[0].ok_or_else(|| anyhow!("the peer exposed no buffer"))?;
            let drop = verify::drop_for_test()
                .filter(|d| (batch.first..batch.first + batch.count).contains(d))
                .map(|d| d - batch.first);
            let lp = lat_params(Some(batch.count), batch.count, drop);
            let o = lat::run_serial(tq, mem, &lp, &STOP, pulse)?;
            let bytes = o.iterations as f64 * size as f64;
            let mut r = LatResult {
                size,
                iterations: o.iterations,
                latency: o.latency.stats(1.0),
                bw_avg_gbps: Some(gbps(bytes / o.elapsed.as_secs_f64().max(1e-9))),
                verified: None,
                transfers_checked: None,
                mismatch: None,
                histogram: Vec::new(),
                cpu_s: None,
                peer_cpu_s: None,
            };
            if p.op == Op::Read {
                let span = batch.count as usize * size as usize;
                let buf = &tq.mr.as_slice()[..span];
                r.mismatch = verify::verify_slots(buf, size, batch.first, batch.count);
                r.verified = Some(r.mismatch.is_none());
                r.transfers_checked = Some(batch.count);
            }
            Ok(Some(RoundOutcome::Lat(r, o.latency)))
        }
    }
}

/// Before an atomic round, off the clock: what each QP's target holds (crate::perf::atomic):
/// 0 for rdmadiag's responder, which zeroed them; read from perftest's (with `cycle`, the sum
/// of the words its operations step through).
pub(super) fn targets_before(
    qps: &[TestQp],
    mems: &[Option<RemoteMemory>],
    cx: &RoundContext,
    cycle: Option<AddressCycle>,
) -> Result<Vec<u64>> {
    match cx.targets {
        Targets::Zeroed => Ok(vec![0; qps.len()]),
        Targets::AsFound => read_targets(qps, mems, cx, cycle),
    }
}

/// Read each of `qps`' targets on the peer: with `cycle`, every position its operations step
/// through, summed (wrapping) per QP.
fn read_targets(
    qps: &[TestQp],
    mems: &[Option<RemoteMemory>],
    cx: &RoundContext,
    cycle: Option<AddressCycle>,
) -> Result<Vec<u64>> {
    let positions = cycle.map_or(1, |c| c.positions);
    qps.iter()
        .zip(mems)
        .map(|(tq, mem)| {
            let mem = mem.ok_or_else(|| anyhow!("the peer exposed no buffer for atomics"))?;
            (0..positions).try_fold(0u64, |sum, k| {
                let offset = cycle.map_or(0, |c| c.offset(k));
                let at = RemoteMemory {
                    addr: mem.addr + offset,
                    len: mem.len.saturating_sub(offset),
                    ..mem
                };
                let v = atomic::read_back(tq, at, cx.timeout, cx.peer, &STOP)?;
                Ok::<u64, anyhow::Error>(sum.wrapping_add(v))
            })
        })
        .collect()
}

/// After an atomic round, off the clock: read back the targets (`serial`: the latency run's
/// one QP; else every QP's; with `cycle`, every position, summed) and check they hold what the
/// `completed` operations left on what they held before (`bases`; crate::perf::atomic).
pub(super) fn check_targets(
    qps: &[TestQp],
    mems: &[Option<RemoteMemory>],
    (op, serial): (Op, bool),
    (bases, completed, cycle): (&[u64], u64, Option<AddressCycle>),
    cx: &RoundContext,
) -> Result<()> {
    let targets = if serial { &qps[..1] } else { qps };
    let found = read_targets(targets, mems, cx, cycle)?;
    let base = bases.iter().fold(0u64, |a, &v| a.wrapping_add(v));
    let stepped = cycle.map(|c| format!(" ({} words each, summed)", c.positions));
    if op == Op::AtomicFadd && found.len() > 1 {
        // The adds of each QP are not counted apart: their targets' sum is checked.
        let expected = atomic::expected_final(op, serial, base, completed);
        let sum = found.iter().fold(0u64, |a, &v| a.wrapping_add(v));
        let which = format!(
            "the targets of {} QPs{}, summed",
            found.len(),
            stepped.as_deref().unwrap_or("")
        );
        return Ok(atomic::check_final(op, &which, expected, sum, cx.peer)?);
    }
    for (i, &v) in found.iter().enumerate() {
        let before = bases.get(i).copied().unwrap_or(0);
        let expected = atomic::expected_final(op, serial, before, completed);
        let which = format!("the target of QP {i}{}", stepped.as_deref().unwrap_or(""));
        atomic::check_final(op, &which, expected, v, cx.peer)?;
    }
    Ok(())
}

impl RoundContext<'_> {
    /// How a bandwidth round of `size`-byte operations steps its addresses: through a perftest
    /// peer's cycle buffer, as perftest's clients do.
    fn address_cycle(&self, size: usize) -> Option<AddressCycle> {
        let sys = self.cycle?;
        AddressCycle::perftest(size, sys.cycle_buffer, sys.cache_line_size)
    }
}

/// Before a round: clear what the peer's writes will land on (latency WRITE spins on it) and
/// lay out the data a diagnostic moves: the writer's slots hold each transfer's own pattern,
/// the reader's are zeroed, so a transfer that never arrives leaves nothing that could pass.
/// Runs before the peer is told to start.
pub(super) fn prepare_round(
    qps: &mut [TestQp],
    kind: Kind,
    p: &PerfSpec,
    round: RoundPlan,
    server: bool,
) {
    if p.op.is_atomic() {
        // The responder's targets start at 0 (module crate::perf::atomic); ours are results.
        let start = if server { atomic::target_start() } else { 0 };
        for tq in qps.iter_mut() {
            tq.mr.as_mut_slice()[atomic::RESULT].copy_from_slice(&start.to_ne_bytes());
        }
        return;
    }
    let max = max_size(p);
    let size = round.size;
    let buf = qps[0].mr.as_mut_slice();
    match (kind, p.op, round.batch) {
        // The landing zones, wherever this round's layout puts them (on their own page, or at
        // `max` with an older peer): everything past the source.
        (Kind::Lat, Op::Write, _) => buf[max..].fill(0),
        (Kind::Verify, op, Some(b)) => {
            let span = (b.count as usize * size as usize).min(buf.len());
            // The source: the server's buffer for READ, the client's for WRITE.
            if (op == Op::Read) == server {
                verify::fill_slots(&mut buf[..span], size, b.first, b.count);
            } else {
                buf[..span].fill(0);
            }
        }
        _ => {}
    }
}
