//! perftest's latency tests (ib_write_lat, ib_read_lat, ib_atomic_lat, ib_send_lat) on QPs set
//! up by `perftest.rs`: the same engines as rdmadiag's, with perftest's marks and layout for
//! WRITE, for atomics a target read before and after the run (perftest's holds random bytes),
//! and for SEND the ping-pong with no last-message mark (both sides count -n).

use super::qps::pp_params;
use super::rounds::{RoundContext, check_targets, targets_before};
use super::{Kind, max_size};
use crate::connect::control::{Op, PerfSpec, TestSpec};
use crate::connect::endpoint::Endpoint;
use crate::connect::test_qp::TestQp;
use crate::perf::atomic::Targets;
use crate::perf::lat::{self, LatParams, Marks};
use crate::perf::{Progress, Pulse, Side};
use crate::pingpong::{self, PingpongParams};
use crate::report::perf::LatResult;
use crate::session::STOP;
use anyhow::{Result, anyhow};
use std::time::Duration;

/// One latency run of `p`'s single size on the first QP. The initiator's samples are its round
/// trips; against perftest the WRITE responder's too (the gap between its writes, as perftest's
/// server measures). None where this side measures nothing (the READ responder).
pub(super) fn lat_round(
    qps: &mut [TestQp],
    remotes: &[Endpoint],
    (spec, p): (&TestSpec, &PerfSpec),
    side: Side,
    timeout: Duration,
    peer: &str,
) -> Result<Option<LatResult>> {
    let tq = &mut qps[0];
    let mem = remotes[0]
        .memory
        .ok_or_else(|| anyhow!("perftest's key carried no buffer"))?;
    let max = max_size(p);
    let size = p.sizes[0] as usize;
    let mut lp = LatParams {
        op: p.op,
        size,
        iterations: p.iterations,
        duration: None,
        inline_max: p.inline as usize,
        signal_every: p.timing.signal_every(),
        slots: 1,
        drop_for_test: None,
        marks: Marks::Perftest,
        atomic_base: 0,
        timeout,
        peer: peer.to_string(),
    };
    let (o, scale) = match p.op {
        Op::Write => {
            // ib_write_lat's server writes first and its client waits first (the reverse of
            // rdmadiag's): the engine's initiator is the one that writes first. The landing
            // zone was cleared when the QP was made (its buffer starts zeroed), before the
            // handshake after which the server's first write may come at once.
            let first = match side {
                Side::Initiator => Side::Responder,
                Side::Responder => Side::Initiator,
            };
            (lat::run_write(tq, first, mem, max, &lp, &STOP), 2.0)
        }
        Op::Send => {
            let pp = PingpongParams {
                mark_last: false,
                ..pp_params(spec, size, max, p.iterations, peer, timeout)
            };
            let remote = (remotes[0].qpn, remotes[0].qkey);
            let o = pingpong::run(tq, side, remote, &pp, &Progress::default(), &STOP).map(|o| {
                lat::LatOutcome {
                    latency: o.latency,
                    iterations: o.round_trips,
                    elapsed: o.elapsed,
                }
            });
            (o, 2.0)
        }
        Op::Read if side == Side::Initiator => (
            lat::run_serial(tq, mem, &lp, &STOP, &mut Pulse::none()),
            1.0,
        ),
        Op::AtomicFadd | Op::AtomicCswap if side == Side::Initiator => {
            // perftest's target holds random bytes: the chain starts from what it holds, and
            // the target is checked after the run as rdmadiag's rounds check theirs.
            let cx = RoundContext {
                targets: Targets::AsFound,
                ..RoundContext::new((Kind::Lat, spec, p), side, timeout, peer)
            };
            let mems = [Some(mem)];
            let bases = targets_before(&qps[..1], &mems, &cx, None)?;
            lp.atomic_base = bases[0];
            let o = lat::run_serial(&qps[0], mem, &lp, &STOP, &mut Pulse::none())?;
            check_targets(qps, &mems, (p.op, true), (&bases, o.iterations, None), &cx)?;
            (Ok(o), 1.0)
        }
        _ => return Ok(None),
    };
    let o = o.map_err(|e| {
        e.context(
            "perftest's latency tests count on the same -s and -n on both sides (and the \
             same --op: ib_write_lat, ib_read_lat, ib_atomic_lat or ib_send_lat)",
        )
    })?;
    Ok(Some(LatResult {
        size: size as u32,
        iterations: o.iterations,
        latency: o.latency.stats(scale),
        bw_avg_gbps: None,
        verified: None,
        transfers_checked: None,
        mismatch: None,
        histogram: o.latency.buckets(20, scale),
        cpu_s: None,
        peer_cpu_s: None,
    }))
}
