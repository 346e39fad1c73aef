//! The client of a bw test against an unmodified perftest server (`ib_write_bw`, `ib_read_bw`),
//! over perftest's own out-of-band exchange (`--compat perftest`).
//!
//! The order is perftest's (`write_bw.c`, `read_bw.c`): versions, system data, MTU; per QP a
//! key handshake; connect; a second per-QP round and one more handshake (the server is then
//! ready); the run; one handshake to say it ended; the bw reports; the close.

use super::client::empty_report;
use super::qps::PerfQps;
use super::rounds::{RoundContext, RoundOutcome, RoundPlan, run_round};
use super::{Kind, max_size, validate};
use crate::connect::control::{ControlChannel, Op, PerfSpec, QpType, TestSpec};
use crate::connect::endpoint::{Endpoint, LocalPort, RemoteMemory, choose_port};
use crate::connect::establish::QpRecipe;
use crate::connect::perftest_wire::{BwReport, Lead, PerftestKey, PerftestPeer, SysData};
use crate::connect::test_qp::{TestQp, UD_QKEY};
use crate::exit::UsageError;
use crate::perf::{Progress, Side};
use crate::report::perf::{BwResult, PerfReport};
use crate::session::phase::{self, HANDSHAKE, QP_SETUP, RESULT_EXCHANGE, TRANSFER};
use crate::session::{Observer, SessionOptions, dial, status};
use crate::verbs::{LinkLayer, Mtu};
use anyhow::{Result, anyhow};

/// What this first slice of perftest's wire runs: RC WRITE and READ, UC WRITE, bw, one way.
fn check_spoken(kind: Kind, p: &PerfSpec, spec: &TestSpec) -> Result<(), String> {
    if kind != Kind::Bw {
        return Err(format!(
            "--compat perftest runs bw only; {} against perftest is not built yet",
            kind.test_name(p.op)
        ));
    }
    if p.op == Op::Send || spec.link.transport == QpType::Ud {
        return Err(
            "--compat perftest speaks to ib_write_bw and ib_read_bw servers; \
                    SEND (ib_send_bw) and UD are not spoken yet"
                .into(),
        );
    }
    if spec.link.cm {
        return Err("--compat perftest exchanges QPs over TCP, as perftest without -R".into());
    }
    if p.bidirectional || p.vs_tcp {
        return Err(
            "--compat perftest runs one direction (perftest's -b and --vs-tcp are \
                    not spoken yet)"
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
fn key_of(tq: &TestQp) -> PerftestKey {
    let roce = tq.local.attr.link_layer == LinkLayer::Ethernet;
    PerftestKey {
        lid: tq.local.attr.lid,
        out_reads: u16::from(tq.rd_atomic),
        qpn: tq.qp.qp_num(),
        psn: tq.psn,
        rkey: tq.mr.rkey(),
        vaddr: tq.mr.addr(),
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
        }),
    }
}

/// perftest's MB/s: 2^20 bytes a second (its default unit, which the server prints).
fn mib_per_sec(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0 / f64::from(1u32 << 20)
}

/// Connect to a perftest server and run the bw test it serves.
pub fn perftest_client(
    opts: &SessionOptions,
    spec: &TestSpec,
    observer: &dyn Observer,
) -> Result<PerfReport> {
    let (kind, p) = validate(spec).map_err(UsageError)?;
    check_spoken(kind, &p, spec).map_err(UsageError)?;
    let stream = dial(opts)?;
    let local_ip = stream.local_addr()?.ip();
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    phase::enter(HANDSHAKE, Some(&peer));
    let mut pt = PerftestPeer::start(&mut ch, Lead::Client)?;
    let version = pt.theirs;
    let local = choose_port(&opts.choice, Some(local_ip))?;
    let sys = pt.sys_data(SysData {
        cycle_buffer: crate::verbs::page_size() as u32,
        cache_line_size: cache_line_size(),
    })?;
    let ours = spec.link.mtu.map_or(local.active_mtu(), Mtu);
    let mtu = pt.mtu(ours)?;
    phase::enter(QP_SETUP, None);
    let recipe = PerfQps {
        spec,
        kind,
        p: &p,
        side: Side::Initiator,
    };
    let mut qps = (0..recipe.count())
        .map(|_| recipe.make(&local))
        .collect::<Result<Vec<_>>>()?;
    let mine: Vec<PerftestKey> = qps.iter().map(key_of).collect();
    let theirs = mine
        .iter()
        .map(|k| pt.hand_shake(k))
        .collect::<Result<Vec<_>>>()?;
    // The server's buffer per QP is at least the larger of its -s and the cycle buffer; a
    // transfer past its -s fails on the wire and is explained then.
    let max = max_size(&p) as u64;
    let span = max.max(u64::from(sys.cycle_buffer));
    let mut remotes = Vec::with_capacity(qps.len());
    for (tq, k) in qps.iter_mut().zip(&theirs) {
        // READs in flight: no more than the server said it answers.
        tq.rd_atomic = tq.rd_atomic.min(k.out_reads.clamp(1, 255) as u8);
        let remote = endpoint_of(k, &local, mtu, span);
        tq.connect(&remote, Some(mtu.bytes()), spec.link.qos())?;
        remotes.push(remote);
    }
    for k in &mine {
        pt.hand_shake(k)?;
    }
    pt.hand_shake(&mine[0])?;
    status(
        opts,
        &format!(
            "connected {} QP(s) to perftest {version} at {peer}",
            qps.len()
        ),
    );
    let mut report = empty_report(kind, &p, spec, &qps, &remotes[0]);
    report.compat = Some(format!("perftest {version}"));
    let fallback = Progress::default();
    let progress = observer.progress().unwrap_or(&fallback);
    let cx = RoundContext {
        kind,
        spec,
        p: &p,
        side: Side::Initiator,
        timeout: opts.timeout,
        peer: &peer,
    };
    phase::enter(TRANSFER, None);
    for &size in &p.sizes {
        observer.round_started(size);
        let plan = RoundPlan { size, batch: None };
        let (outcome, cpu) =
            crate::cpu::measure(|| run_round(&mut qps, &remotes, &cx, plan, progress));
        match outcome.map_err(|e| explain(e, max, pt.who()))? {
            Some(RoundOutcome::Bw(mut b)) => {
                b.cpu_s = cpu;
                report.bw.push(b);
            }
            _ => return Err(anyhow!("a bw round produced no bandwidth figures")),
        }
    }
    phase::enter(RESULT_EXCHANGE, None);
    // The run has ended: the server, waiting in a handshake, now swaps reports.
    pt.hand_shake(&mine[0])?;
    let last = report.bw.last().ok_or_else(|| anyhow!("no size was run"))?;
    pt.bw_reports(&perftest_report(last))?;
    pt.close(&mine[0])?;
    Ok(report)
}

/// What perftest's server prints for us: the last size's figures in MB/s.
fn perftest_report(b: &BwResult) -> BwReport {
    BwReport {
        size: u64::from(b.size),
        iters: b.iterations,
        bw_peak: mib_per_sec(b.bw_peak_gbps),
        bw_avg: mib_per_sec(b.bw_avg_gbps),
        msg_rate: b.msg_rate_mpps,
    }
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
        assert!((mib_per_sec(8.388_608) - 1000.0).abs() < 1e-9);
    }
}
