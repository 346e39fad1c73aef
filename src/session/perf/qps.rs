//! The QPs a perf test needs on each side: buffer size and access, depths, READ depth, inline,
//! and what must be posted before the peer may send.

use super::{Kind, RX_DEPTH, max_size, verify_slots};
use crate::connect::control::{Op, PerfSpec, QpType, TestSpec};
use crate::connect::endpoint::LocalPort;
use crate::connect::establish::{Plan, QpRecipe, Wire};
use crate::connect::test_qp::{GRH_BYTES, QpShape, TestQp};
use crate::exit::UsageError;
use crate::perf::{Side, bw, lat};
use crate::pingpong::{self, PingpongParams};
use crate::session::SessionOptions;
use crate::verbs::{Access, AtomicCap};
use anyhow::Result;
use std::time::Duration;

/// Bytes, access and depths of one side's QPs.
pub(super) fn shape(
    spec: &TestSpec,
    kind: Kind,
    p: &PerfSpec,
    side: Side,
    max_inline: u32,
) -> QpShape {
    let max = max_size(p);
    let server = side == Side::Responder;
    let remote_if_server = |remote: Access| {
        if server {
            Access::LOCAL_WRITE | remote
        } else {
            Access::LOCAL_WRITE
        }
    };
    let (len, access) = match (kind, p.op) {
        // Send area + one shared receive area; lat uses the ping-pong layout.
        (Kind::Lat, Op::Send) => (
            pingpong::buffer_len(spec.link.transport, max, RX_DEPTH),
            Access::LOCAL_WRITE,
        ),
        // Send area + one shared receive area (with room for the GRH of UD).
        (_, Op::Send) => (2 * max + GRH_BYTES, Access::LOCAL_WRITE),
        // The atomics' 8-byte target is the responder's; the initiator's holds the results.
        (_, Op::AtomicFadd | Op::AtomicCswap) => (max, remote_if_server(Access::REMOTE_ATOMIC)),
        // Each side writes the other's landing zone.
        (Kind::Lat, Op::Write) => (
            lat::write_buffer_len(max),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        ),
        // One slot per transfer of a diagnostic round.
        (Kind::Verify, Op::Write) => (slots_len(p, max), remote_if_server(Access::REMOTE_WRITE)),
        (Kind::Verify, _) => (slots_len(p, max), remote_if_server(Access::REMOTE_READ)),
        // Least privilege: the target of WRITEs may be written, the source of READs read.
        (_, Op::Write) if server || p.bidirectional => {
            (max, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        }
        (_, Op::Read) if server || p.bidirectional => {
            (max, Access::LOCAL_WRITE | Access::REMOTE_READ)
        }
        _ => (max, Access::LOCAL_WRITE),
    };
    // READs or atomics in flight: -o, else as many as the device allows (make_qp caps it).
    let reads = if p.op == Op::Read || p.op.is_atomic() {
        p.outstanding.map_or(u8::MAX, |o| o.min(255) as u8)
    } else {
        1
    };
    QpShape {
        transport: spec.link.transport,
        send_depth: (p.tx_depth + 1).max(64),
        recv_depth: if p.op == Op::Send { RX_DEPTH } else { 1 },
        buffer_len: len,
        max_inline: p
            .inline
            .min(max_inline)
            .max(if p.inline_explicit { p.inline } else { 0 }),
        access,
        events: false,
        rd_atomic: reads,
    }
}

/// Bytes of a diagnostic's buffers: one slot per transfer of a round.
fn slots_len(p: &PerfSpec, max: usize) -> usize {
    verify_slots(max as u32, p.iterations.unwrap_or(1)) as usize * max
}

/// Length of the shared receive area of a SEND bandwidth test (UD prepends a 40-byte GRH).
pub(super) fn recv_len(spec: &TestSpec, max: usize) -> usize {
    max + if spec.link.transport == QpType::Ud {
        GRH_BYTES
    } else {
        0
    }
}

/// The ping-pong engine's parameters for a SEND latency round.
pub(super) fn pp_params(
    spec: &TestSpec,
    size: usize,
    max: usize,
    iterations: Option<u64>,
    peer: &str,
    timeout: Duration,
) -> PingpongParams {
    let p = spec.test.perf().map(|(_, p)| p);
    PingpongParams {
        size,
        recv_size: max,
        iterations: iterations.unwrap_or(1),
        rx_depth: RX_DEPTH,
        events: false,
        duration: p.and_then(|p| p.duration_ms).map(Duration::from_millis),
        mark_last: true,
        inline_max: p.map_or(0, |p| p.inline as usize),
        signal_every: p.map_or(1, |p| p.timing.signal_every()),
        timeout,
        peer: peer.to_string(),
    }
}

/// How each side makes its QPs for a perf test.
pub(super) struct PerfQps<'a> {
    pub spec: &'a TestSpec,
    pub kind: Kind,
    pub p: &'a PerfSpec,
    /// The client (the initiator) checks what only it can refuse as a usage error (-I, -o,
    /// UD sizes).
    pub side: Side,
    /// Bytes each QP's buffer has at least (a perftest peer steps its remote address through
    /// a cycle buffer); 0 for rdmadiag peers.
    pub min_buffer: usize,
}

impl PerfQps<'_> {
    /// QPs per side: bw spreads over `-q`, the others use one.
    pub fn count(&self) -> usize {
        if self.kind == Kind::Bw {
            self.p.qps as usize
        } else {
            1
        }
    }

    /// How to establish these QPs with the options' port choice and deadlines.
    pub fn plan<'a>(&'a self, opts: &'a SessionOptions) -> Plan<'a> {
        Plan {
            spec: self.spec,
            wire: Wire::Perf,
            n: self.count(),
            recipe: self,
            choice: &opts.choice,
            cm_port: opts.port,
            timeout: opts.timeout,
        }
    }
}

impl QpRecipe for PerfQps<'_> {
    fn make(&self, local: &LocalPort) -> Result<TestQp> {
        let (spec, p) = (self.spec, self.p);
        if self.side == Side::Initiator && spec.link.transport == QpType::Ud {
            let mtu = local.active_mtu().bytes();
            if max_size(p) > mtu as usize {
                return Err(UsageError(format!(
                    "UD messages must fit in one MTU: {} is larger than {mtu}",
                    max_size(p)
                ))
                .into());
            }
        }
        // Latency samples read a calibrated clock: calibrate it now, in the set-up, not in
        // the first sample.
        if self.kind != Kind::Bw {
            crate::clock::Clock::get();
        }
        let shape = shape(spec, self.kind, p, self.side, 256);
        let caps = local
            .ctx
            .query_device()
            .map_err(|e| anyhow::anyhow!("querying {}'s limits: {e}", local.ctx.name()))?
            .limits;
        let device_max = (caps.max_qp_rd_atom.clamp(1, 255) as u8)
            .min(caps.max_qp_init_rd_atom.clamp(1, 255) as u8);
        atomics_supported(p.op, local.ctx.name(), caps.atomic_cap)?;
        if (p.op == Op::Read || p.op.is_atomic())
            && let Some(o) = p.outstanding.filter(|&o| o > device_max as u32)
        {
            return Err(UsageError(format!(
                "-o {o}: {} allows at most {device_max} {}s in flight per QP",
                local.ctx.name(),
                p.op.verbs_name()
            ))
            .into());
        }
        let mut tq = TestQp::new(
            local.clone(),
            QpShape {
                rd_atomic: shape.rd_atomic.min(device_max),
                buffer_len: shape.buffer_len.max(self.min_buffer),
                ..shape
            },
        )?;
        if self.kind == Kind::Lat && p.op == Op::Write {
            tq.landing = Some(lat::landing_offset(max_size(p)));
        }
        if self.side == Side::Initiator {
            check_inline(p, &tq)?;
        }
        // Post what must be posted before the peer may send (SEND tests).
        if p.op == Op::Send {
            let max = max_size(p);
            match self.kind {
                Kind::Lat => pingpong::post_receives(
                    &tq,
                    &pp_params(spec, max, max, None, "", Duration::ZERO),
                )?,
                _ => bw::post_receives(&tq, recv_len(spec, max), RX_DEPTH, max)?,
            }
        }
        Ok(tq)
    }
}

/// An atomic test on a device without atomics (`atomic_cap` ATOMIC_NONE) fails before any QP
/// is made, naming the device (a runtime failure: another device may have them).
pub(super) fn atomics_supported(op: Op, device: &str, cap: AtomicCap) -> Result<()> {
    if op.is_atomic() && cap == AtomicCap::None {
        anyhow::bail!(
            "{device} has no atomic operations (atomic_cap {cap}): --op {op} cannot run on it"
        );
    }
    Ok(())
}

/// `-I N` asks for N bytes of inline data: refuse (exit 2) if the device granted less.
fn check_inline(p: &PerfSpec, tq: &TestQp) -> Result<()> {
    let granted = tq.qp.caps().max_inline_data;
    if p.inline_explicit && granted < p.inline {
        return Err(UsageError(format!(
            "-I {}: {} allows at most {granted} bytes of inline data",
            p.inline,
            tq.local.ctx.name()
        ))
        .into());
    }
    Ok(())
}
