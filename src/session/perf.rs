//! Both halves of bw, lat, write and read tests: set up the QPs, then one round per size.

use super::{STOP, SessionOptions, dial, status};
use crate::connect::control::{ControlChannel, Message, PerfSpec, TestSpec, Transport};
use crate::connect::endpoint::{
    Endpoint, LocalPort, RemoteMemory, choose_port, cm_address, local_port_on,
};
use crate::connect::test_qp::{QpShape, TestQp};
use crate::exit::UsageError;
use crate::perf::bw::{self, BwOutcome, BwParams};
use crate::perf::lat::{self, LatParams, LatRole};
use crate::perf::verify::{self, Mismatch};
use crate::perf::{Op, Progress, tcp};
use crate::pingpong::{self, PingpongParams, Side};
use crate::stats::LatencyStats;
use crate::verbs::{Access, CmConnParams, CmId, CmListener};
use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Largest message a test may use (perftest's sweep tops out at 8 MiB; this leaves room).
pub const MAX_SIZE: u32 = 1 << 30;
/// Most QPs one test may ask for.
pub const MAX_QPS: u32 = 1024;
/// Receives kept posted per QP in SEND tests.
const RX_DEPTH: u32 = 512;

/// Which measurement a test makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Bw,
    Lat,
    /// The WRITE/READ data diagnostics (`rdmadiag write`, `rdmadiag read`).
    Verify,
}

impl Kind {
    pub fn test_name(self, op: Op) -> String {
        match self {
            Kind::Bw => "bw".into(),
            Kind::Lat => "lat".into(),
            Kind::Verify => op.to_string(),
        }
    }
    fn from_test(name: &str) -> Option<Kind> {
        match name {
            "bw" => Some(Kind::Bw),
            "lat" => Some(Kind::Lat),
            "write" | "read" => Some(Kind::Verify),
            _ => None,
        }
    }
}

/// One size's bandwidth result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BwResult {
    pub size: u32,
    /// Operations completed (all QPs).
    pub iterations: u64,
    pub bw_peak_gbps: f64,
    pub bw_avg_gbps: f64,
    pub msg_rate_mpps: f64,
    pub elapsed_s: f64,
    /// CPU time this side's thread spent in the round, and the other side's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_cpu_s: Option<f64>,
    /// What the other end measured (the receiver in a SEND test; the reverse direction with -b).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<Box<BwResult>>,
}

/// One size's latency result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatResult {
    pub size: u32,
    pub iterations: u64,
    #[serde(flatten)]
    pub latency: LatencyStats,
    /// WRITE/READ diagnostics: the data moved, in Gb/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_avg_gbps: Option<f64>,
    /// WRITE/READ diagnostics: whether every byte arrived as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<Mismatch>,
    /// The distribution (`lat --histogram`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<crate::stats::Bucket>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_cpu_s: Option<f64>,
}

/// One size over plain TCP (`--vs-tcp`), beside the RDMA result of the same size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TcpResult {
    pub size: u32,
    pub iterations: u64,
    pub elapsed_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_avg_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
    pub cpu_s: Option<f64>,
    pub peer_cpu_s: Option<f64>,
}

/// The report of a bw/lat/write/read run (docs/json.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PerfReport {
    pub test: String,
    pub op: Op,
    pub transport: Transport,
    pub qps: u32,
    pub tx_depth: u32,
    pub cq_mod: u32,
    pub inline: u32,
    pub bidirectional: bool,
    pub duration_s: Option<f64>,
    /// For latency: what one sample is ("half round trip" or "round trip").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_measure: Option<String>,
    pub path_mtu: u32,
    pub local: Endpoint,
    pub remote: Endpoint,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bw: Vec<BwResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lat: Vec<LatResult>,
    /// `--vs-tcp`: the same sizes over TCP between the same hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tcp: Vec<TcpResult>,
    pub rdmadiag_version: String,
}

/// Check a spec against this side's limits.
pub fn validate(spec: &TestSpec) -> Result<(Kind, PerfSpec), String> {
    let kind =
        Kind::from_test(&spec.test).ok_or_else(|| format!("unknown test '{}'", spec.test))?;
    let p = spec
        .perf
        .clone()
        .ok_or_else(|| "the request carries no test parameters".to_string())?;
    if p.sizes.is_empty() {
        return Err("no message size given".into());
    }
    if let Some(&bad) = p.sizes.iter().find(|&&s| s == 0 || s > MAX_SIZE) {
        return Err(format!(
            "message size {bad} (-s/--sizes) is outside 1..={MAX_SIZE}"
        ));
    }
    if p.iterations == Some(0) {
        return Err("iterations must be at least 1".into());
    }
    if p.iterations.is_none() && p.duration_ms.is_none_or(|d| d == 0) {
        return Err("neither iterations nor a duration given".into());
    }
    if p.qps == 0 || p.qps > MAX_QPS {
        return Err(format!("{} QPs is outside 1..={MAX_QPS}", p.qps));
    }
    if p.tx_depth == 0 || p.tx_depth > 1 << 15 {
        return Err(format!("tx depth {} is outside 1..=32768", p.tx_depth));
    }
    if p.cq_mod == 0 {
        return Err("CQ moderation must be at least 1".into());
    }
    if p.op != Op::Send && spec.transport == Transport::Ud {
        return Err(format!(
            "RDMA {} needs a connected transport (RC or UC), not UD",
            p.op
        ));
    }
    if p.op == Op::Read && spec.transport == Transport::Uc {
        return Err("RDMA READ needs RC (UC has no READ)".into());
    }
    if kind == Kind::Verify && p.op == Op::Send {
        return Err("the data diagnostics run WRITE or READ".into());
    }
    Ok((kind, p))
}

fn max_size(p: &PerfSpec) -> usize {
    p.sizes.iter().copied().max().unwrap_or(1) as usize
}

/// Bytes, access and depths of one side's QPs.
fn shape(spec: &TestSpec, kind: Kind, p: &PerfSpec, server: bool, max_inline: u32) -> QpShape {
    let max = max_size(p);
    let (len, access) = match (kind, p.op) {
        // Send area + one shared receive area; lat uses the ping-pong layout.
        (Kind::Lat, Op::Send) => (
            pingpong::buffer_len(spec.transport, max, RX_DEPTH),
            Access::LOCAL_WRITE,
        ),
        // Send area + one shared receive area (with room for the GRH of UD).
        (_, Op::Send) => (
            2 * max + crate::connect::test_qp::GRH_BYTES,
            Access::LOCAL_WRITE,
        ),
        // Each side writes the other's landing zone.
        (Kind::Lat, Op::Write) => (
            lat::write_buffer_len(max),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        ),
        // Least privilege: the target of WRITEs may be written, the source of READs read.
        (_, Op::Write) if server || p.bidirectional => {
            (max, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        }
        (_, Op::Read) if server || p.bidirectional => {
            (max, Access::LOCAL_WRITE | Access::REMOTE_READ)
        }
        _ => (max, Access::LOCAL_WRITE),
    };
    let reads = if p.op == Op::Read { 16 } else { 1 };
    QpShape {
        transport: spec.transport,
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

fn make_qps(local: &LocalPort, shape: QpShape, n: u32) -> Result<Vec<TestQp>> {
    let caps = local.ctx.query_device()?.limits;
    let rd = shape
        .rd_atomic
        .min(caps.max_qp_rd_atom.clamp(1, 255) as u8)
        .min(caps.max_qp_init_rd_atom.clamp(1, 255) as u8);
    (0..n)
        .map(|_| {
            TestQp::new(
                local.clone(),
                QpShape {
                    rd_atomic: rd,
                    ..shape
                },
            )
        })
        .collect()
}

/// Post what must be posted before the peer may send (SEND tests).
fn prepare_receives(qps: &[TestQp], kind: Kind, p: &PerfSpec, spec: &TestSpec) -> Result<()> {
    if p.op != Op::Send {
        return Ok(());
    }
    let max = max_size(p);
    for tq in qps {
        match kind {
            Kind::Lat => {
                pingpong::post_receives(tq, &pp_params(spec, max, max, None, "", Duration::ZERO))?
            }
            _ => bw::post_receives(tq, recv_len(spec, max), RX_DEPTH, max)?,
        }
    }
    Ok(())
}

/// Length of the shared receive area of a SEND bandwidth test (UD prepends a 40-byte GRH).
fn recv_len(spec: &TestSpec, max: usize) -> usize {
    max + if spec.transport == Transport::Ud {
        crate::connect::test_qp::GRH_BYTES
    } else {
        0
    }
}

fn pp_params(
    spec: &TestSpec,
    size: usize,
    max: usize,
    iterations: Option<u64>,
    peer: &str,
    timeout: Duration,
) -> PingpongParams {
    let p = spec.perf.as_ref();
    PingpongParams {
        size,
        recv_size: max,
        iterations: iterations.unwrap_or(1),
        rx_depth: RX_DEPTH,
        events: false,
        duration: p.and_then(|p| p.duration_ms).map(Duration::from_millis),
        mark_last: true,
        inline_max: p.map_or(0, |p| p.inline as usize),
        timeout,
        peer: peer.to_string(),
    }
}

fn gbps(bytes_per_sec: f64) -> f64 {
    bytes_per_sec * 8.0 / 1e9
}

fn bw_result(size: u32, o: &BwOutcome) -> BwResult {
    BwResult {
        size,
        iterations: o.messages,
        bw_peak_gbps: gbps(o.peak_bytes_per_sec),
        bw_avg_gbps: gbps(o.avg_bytes_per_sec()),
        msg_rate_mpps: o.msg_rate() / 1e6,
        elapsed_s: o.elapsed.as_secs_f64(),
        cpu_s: None,
        peer_cpu_s: None,
        peer: None,
    }
}

fn cpu_of(v: &serde_json::Value) -> Option<f64> {
    v.get("cpu_s").and_then(|c| c.as_f64())
}

/// Keep the server's control channel alive while this side is busy in a one-sided round.
struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(ch: &ControlChannel) -> Result<Heartbeat> {
        let mut stream = ch.heartbeat_handle()?;
        let frame = crate::connect::control::encode(&Message::Progress)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let period = (ch.timeout() / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
        let thread = std::thread::spawn(move || {
            let mut waited = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                waited += Duration::from_millis(20);
                if waited >= period {
                    waited = Duration::ZERO;
                    if stream.write_all(&frame).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Heartbeat {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the client's engines produced for one round.
enum RoundOutcome {
    Bw(BwResult),
    Lat(LatResult),
}

/// This side's part of one round. `initiator` is the client.
#[allow(clippy::too_many_arguments)]
fn run_round(
    qps: &mut [TestQp],
    remotes: &[Endpoint],
    kind: Kind,
    spec: &TestSpec,
    p: &PerfSpec,
    size: u32,
    initiator: bool,
    timeout: Duration,
    peer: &str,
    progress: &Progress,
) -> Result<Option<RoundOutcome>> {
    let max = max_size(p);
    let duration = p.duration_ms.map(Duration::from_millis);
    let mems: Vec<Option<RemoteMemory>> = remotes.iter().map(|e| e.memory).collect();
    match kind {
        Kind::Bw => {
            let send = initiator || p.bidirectional;
            let receive = p.op == Op::Send && (!initiator || p.bidirectional);
            if !send && !receive {
                return Ok(None); // one-sided: the server's CPU takes no part
            }
            let bp = BwParams {
                op: p.op,
                size: size as usize,
                iterations: p.iterations,
                duration,
                tx_depth: p.tx_depth,
                cq_mod: p.cq_mod,
                post_list: p.post_list,
                inline: size <= p.inline && qps.iter().all(|q| size <= q.qp.caps().max_inline_data),
                rx_depth: RX_DEPTH,
                send,
                receive,
                timeout,
                peer: peer.to_string(),
            };
            let dests: Vec<(u32, u32)> = remotes.iter().map(|e| (e.qpn, e.qkey)).collect();
            let o = bw::run(
                qps,
                &mems,
                &dests,
                max,
                recv_len(spec, max),
                &bp,
                progress,
                &STOP,
            )?;
            Ok(Some(RoundOutcome::Bw(bw_result(size, &o))))
        }
        Kind::Lat => {
            let tq = &mut qps[0];
            let lp = LatParams {
                op: p.op,
                size: size as usize,
                iterations: p.iterations,
                duration,
                inline_max: p.inline as usize,
                timeout,
                peer: peer.to_string(),
            };
            let (recorder, iterations, scale) = match p.op {
                Op::Send => {
                    let pp = pp_params(spec, size as usize, max, p.iterations, peer, timeout);
                    let side = if initiator {
                        Side::Initiator
                    } else {
                        Side::Responder
                    };
                    let o = pingpong::run(tq, side, remotes[0].qpn, remotes[0].qkey, &pp, &STOP)?;
                    (o.latency, o.round_trips, 2.0)
                }
                Op::Write => {
                    let role = if initiator {
                        LatRole::Initiator
                    } else {
                        LatRole::Responder
                    };
                    let mem = mems[0].ok_or_else(|| anyhow!("the peer exposed no buffer"))?;
                    let o = lat::run_write(tq, role, mem, max, &lp, &STOP)?;
                    (o.latency, o.iterations, 2.0)
                }
                Op::Read if initiator => {
                    let mem = mems[0].ok_or_else(|| anyhow!("the peer exposed no buffer"))?;
                    let o = lat::run_serial(tq, mem, &lp, &STOP)?;
                    (o.latency, o.iterations, 1.0)
                }
                Op::Read => return Ok(None),
            };
            if !initiator {
                return Ok(None);
            }
            Ok(Some(RoundOutcome::Lat(LatResult {
                size,
                iterations,
                latency: recorder.stats(scale),
                bw_avg_gbps: None,
                verified: None,
                mismatch: None,
                histogram: recorder.buckets(20, scale),
                cpu_s: None,
                peer_cpu_s: None,
            })))
        }
        Kind::Verify => {
            if !initiator {
                return Ok(None);
            }
            let tq = &mut qps[0];
            let mem = mems[0].ok_or_else(|| anyhow!("the peer exposed no buffer"))?;
            if p.op == Op::Write {
                verify::fill(&mut tq.mr.as_mut_slice()[..size as usize], size as u64);
            } else {
                tq.mr.as_mut_slice()[..size as usize].fill(0);
            }
            let lp = LatParams {
                op: p.op,
                size: size as usize,
                iterations: p.iterations,
                duration,
                inline_max: 0,
                timeout,
                peer: peer.to_string(),
            };
            let o = lat::run_serial(tq, mem, &lp, &STOP)?;
            let bytes = o.iterations as f64 * size as f64;
            let mut r = LatResult {
                size,
                iterations: o.iterations,
                latency: o.latency.stats(1.0),
                bw_avg_gbps: Some(gbps(bytes / o.elapsed.as_secs_f64().max(1e-9))),
                verified: None,
                mismatch: None,
                histogram: Vec::new(),
                cpu_s: None,
                peer_cpu_s: None,
            };
            if p.op == Op::Read {
                let buf = &mut tq.mr.as_mut_slice()[..size as usize];
                verify::corrupt_for_test(buf);
                r.mismatch = verify::verify(buf, size as u64);
                r.verified = Some(r.mismatch.is_none());
            }
            Ok(Some(RoundOutcome::Lat(r)))
        }
    }
}

/// Before a round: clear what the peer's writes will land on (latency WRITE spins on it) and
/// lay out the data a diagnostic moves. Runs before the peer is told to start.
fn prepare_round(qps: &mut [TestQp], kind: Kind, p: &PerfSpec, size: u32, server: bool) {
    let max = max_size(p);
    let size = size as usize;
    match (kind, p.op) {
        (Kind::Lat, Op::Write) => qps[0].mr.as_mut_slice()[max..2 * max].fill(0),
        (Kind::Verify, Op::Read) if server => {
            verify::fill(&mut qps[0].mr.as_mut_slice()[..size], size as u64)
        }
        (Kind::Verify, Op::Write) if server => qps[0].mr.as_mut_slice()[..size].fill(0),
        _ => {}
    }
}

/// `-I N` asks for N bytes of inline data: refuse (exit 2) if the device granted less.
fn check_inline(p: &PerfSpec, qps: &[TestQp]) -> Result<()> {
    let granted = qps
        .iter()
        .map(|q| q.qp.caps().max_inline_data)
        .min()
        .unwrap_or(0);
    if p.inline_explicit && granted < p.inline {
        let dev = qps.first().map_or("the device", |q| q.local.ctx.name());
        return Err(UsageError(format!(
            "-I {}: {dev} allows at most {granted} bytes of inline data",
            p.inline
        ))
        .into());
    }
    Ok(())
}

/// The client: set up, run every round, collect the report.
pub fn client(
    opts: &SessionOptions,
    spec: &TestSpec,
    progress: &Progress,
    on_round: &dyn Fn(u32),
) -> Result<PerfReport> {
    let (kind, p) = validate(spec).map_err(UsageError)?;
    let stream = dial(opts)?;
    let local_ip = stream.local_addr()?.ip();
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    ch.greet()?;
    let local = choose_port(&opts.choice, Some(local_ip))?;
    if spec.transport == Transport::Ud {
        let mtu = local.active_mtu().bytes();
        if max_size(&p) > mtu as usize {
            return Err(UsageError(format!(
                "UD messages must fit in one MTU: {} is larger than {mtu}",
                max_size(&p)
            ))
            .into());
        }
    }
    let n = if kind == Kind::Bw { p.qps } else { 1 };
    let client_shape = shape(spec, kind, &p, false, 256);
    // Drop order: the QPs (declared after) go before the rdma_cm ids they were connected with.
    let (_ids, mut qps, remotes) = if spec.cm {
        let peer_ip = ch.stream().peer_addr()?.ip();
        cm_client_connect(
            &mut ch,
            opts,
            spec,
            kind,
            &p,
            client_shape,
            local_ip,
            peer_ip,
            n,
        )?
    } else {
        let mut qps = make_qps(&local, client_shape, n)?;
        check_inline(&p, &qps)?;
        prepare_receives(&qps, kind, &p, spec)?;
        ch.send(&Message::PerfRequest {
            spec: spec.clone(),
            endpoints: qps.iter().map(|q| q.endpoint()).collect(),
        })?;
        let remotes = accepted(&mut ch, n)?;
        for (tq, r) in qps.iter_mut().zip(&remotes) {
            tq.connect(r, spec.mtu)?;
        }
        (Vec::new(), qps, remotes)
    };
    status(opts, &format!("connected {} QP(s) to {peer}", qps.len()));
    let mut report = PerfReport {
        test: kind.test_name(p.op),
        op: p.op,
        transport: spec.transport,
        qps: qps.len() as u32,
        tx_depth: p.tx_depth,
        cq_mod: p.cq_mod,
        // What is really sent inline: the request, capped by what the device granted.
        inline: p.inline.min(
            qps.iter()
                .map(|q| q.qp.caps().max_inline_data)
                .min()
                .unwrap_or(0),
        ),
        bidirectional: p.bidirectional,
        duration_s: p.duration_ms.map(|d| d as f64 / 1000.0),
        latency_measure: match (kind, p.op) {
            (Kind::Lat, Op::Read) | (Kind::Verify, _) => Some("round trip".into()),
            (Kind::Lat, _) => Some("half round trip".into()),
            _ => None,
        },
        path_mtu: qps[0].path_mtu.map_or(0, |m| m.bytes()),
        local: qps[0].endpoint(),
        remote: remotes[0].clone(),
        bw: Vec::new(),
        lat: Vec::new(),
        tcp: Vec::new(),
        rdmadiag_version: crate::VERSION.into(),
    };
    for &size in &p.sizes {
        on_round(size);
        prepare_round(&mut qps, kind, &p, size, false);
        ch.send(&Message::Round { size })?;
        match ch.recv("the server's readiness for the round")? {
            Message::RoundReady => {}
            _ => bail!("{peer} sent an unexpected message before the round"),
        }
        let (outcome, cpu) = {
            let _beat = Heartbeat::start(&ch)?;
            crate::cpu::measure(|| {
                run_round(
                    &mut qps,
                    &remotes,
                    kind,
                    spec,
                    &p,
                    size,
                    true,
                    opts.timeout,
                    &peer,
                    progress,
                )
            })
        };
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => return Err(ch.fail(e)),
        };
        let mine = match &outcome {
            Some(RoundOutcome::Bw(b)) => serde_json::to_value(b)?,
            Some(RoundOutcome::Lat(l)) => serde_json::to_value(l)?,
            None => serde_json::Value::Null,
        };
        ch.send(&Message::RoundDone { summary: mine })?;
        let theirs = match ch.recv_patient("the server's round result")? {
            Message::RoundDone { summary } => summary,
            _ => bail!("{peer} ended the round with an unexpected message"),
        };
        match outcome {
            Some(RoundOutcome::Bw(mut b)) => {
                b.cpu_s = cpu;
                b.peer_cpu_s = cpu_of(&theirs);
                if theirs.get("size").is_some() {
                    b.peer = serde_json::from_value(theirs).ok().map(Box::new);
                }
                report.bw.push(b);
            }
            Some(RoundOutcome::Lat(mut l)) => {
                l.cpu_s = cpu;
                l.peer_cpu_s =
                    cpu_of(&theirs).or_else(|| theirs.get("cpu").and_then(|c| c.as_f64()));
                if p.op == Op::Write && kind == Kind::Verify {
                    let m: Option<Mismatch> = theirs
                        .get("mismatch")
                        .and_then(|m| serde_json::from_value(m.clone()).ok())
                        .flatten();
                    l.verified = Some(m.is_none());
                    l.mismatch = m;
                }
                report.lat.push(l);
            }
            None => {}
        }
    }
    if p.vs_tcp {
        let peer_ip = ch.stream().peer_addr()?.ip();
        for &size in &p.sizes {
            on_round(size);
            report
                .tcp
                .push(tcp_client_round(&mut ch, kind, &p, size, peer_ip, opts)?);
        }
    }
    ch.send(&Message::Finished { summary: None })?;
    match ch.recv("the server's final message")? {
        Message::Finished { .. } => Ok(report),
        _ => bail!("{peer} ended the run with an unexpected message"),
    }
}

/// Client half of one `--vs-tcp` round: connect to the port the server opened, move the same
/// size the same way, compare CPU time.
fn tcp_client_round(
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
        summary: serde_json::json!({ "cpu_s": cpu }),
    })?;
    let theirs = match ch.recv_patient("the server's TCP round result")? {
        Message::RoundDone { summary } => summary,
        _ => bail!(
            "{} ended the TCP round with an unexpected message",
            ch.peer()
        ),
    };
    let scale = if p.op == Op::Read { 1.0 } else { 2.0 };
    Ok(TcpResult {
        size,
        iterations: o.messages,
        elapsed_s: o.elapsed.as_secs_f64(),
        bw_avg_gbps: (kind == Kind::Bw)
            .then(|| gbps(o.bytes as f64 / o.elapsed.as_secs_f64().max(1e-9))),
        latency: (kind != Kind::Bw).then(|| o.latency.stats(scale)),
        cpu_s: cpu,
        peer_cpu_s: cpu_of(&theirs),
    })
}

/// Server half of one `--vs-tcp` round.
fn tcp_server_round(
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
    let l = std::net::TcpListener::bind((ip, 0))?;
    l.set_nonblocking(true)?;
    ch.send(&Message::TcpReady {
        port: l.local_addr()?.port(),
    })?;
    let s = super::accept(&l, Some(opts.timeout))?;
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
        summary: serde_json::json!({ "cpu_s": cpu }),
    })
}

/// The server's answer to a request: its endpoints, one per client QP.
fn accepted(ch: &mut ControlChannel, n: u32) -> Result<Vec<Endpoint>> {
    let peer = ch.peer().to_string();
    let remotes = match ch.recv("the server's answer to our request")? {
        Message::PerfAccept { endpoints } => endpoints,
        Message::Refuse { reason } => bail!("{peer} refused the test: {reason}"),
        _ => bail!("{peer} answered the request with an unexpected message"),
    };
    if remotes.len() != n as usize {
        bail!("{peer} answered with {} QPs for our {n}", remotes.len());
    }
    Ok(remotes)
}

fn cm_params(tq: &TestQp) -> CmConnParams {
    CmConnParams {
        responder_resources: tq.rd_atomic,
        initiator_depth: tq.rd_atomic,
        ..CmConnParams::default()
    }
}

/// Client side of `--cm`: request, accept (server listening), one rdma_cm connection per QP,
/// then the server's real endpoints (with its buffers for one-sided tests).
#[allow(clippy::too_many_arguments)]
fn cm_client_connect(
    ch: &mut ControlChannel,
    opts: &SessionOptions,
    spec: &TestSpec,
    kind: Kind,
    p: &PerfSpec,
    shape: QpShape,
    local_ip: IpAddr,
    peer_ip: IpAddr,
    n: u32,
) -> Result<(Vec<CmId>, Vec<TestQp>, Vec<Endpoint>)> {
    let placeholder = choose_port(&opts.choice, Some(local_ip))?.endpoint(0, 0, 0);
    ch.send(&Message::PerfRequest {
        spec: spec.clone(),
        endpoints: vec![placeholder; n as usize],
    })?;
    let listening = accepted(ch, n)?;
    let dst = SocketAddr::new(cm_address(&listening[0], peer_ip), opts.port);
    let (mut ids, mut qps) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let id = CmId::resolve(dst, None, opts.timeout)?;
        let local = local_port_on(
            id.context()?,
            id.port(),
            opts.choice.gid_index,
            Some(local_ip),
        )?;
        let mut tq = make_qps(&local, shape, 1)?.remove(0);
        check_inline(p, std::slice::from_ref(&tq))?;
        prepare_receives(std::slice::from_ref(&tq), kind, p, spec)?;
        id.connect_with(&tq.qp, &[], cm_params(&tq), opts.timeout)?;
        tq.path_mtu = Some(tq.local.active_mtu());
        ids.push(id);
        qps.push(tq);
    }
    // Now both sides know their real QPs (and buffers): exchange them, client first.
    ch.send(&Message::PerfAccept {
        endpoints: qps.iter().map(|q| q.endpoint()).collect(),
    })?;
    let remotes = accepted(ch, n)?;
    Ok((ids, qps, remotes))
}

/// Server side of `--cm`: listen on the RDMA address, accept one connection per client QP.
#[allow(clippy::too_many_arguments)]
fn cm_serve_connect(
    ch: &mut ControlChannel,
    opts: &SessionOptions,
    spec: &TestSpec,
    kind: Kind,
    p: &PerfSpec,
    shape: QpShape,
    local_ip: IpAddr,
    n: u32,
) -> Result<(Vec<CmId>, Vec<TestQp>)> {
    if spec.transport != Transport::Rc {
        bail!(
            "rdma_cm connects RC queue pairs only (asked for {})",
            spec.transport
        );
    }
    let here = choose_port(&opts.choice, Some(local_ip))?.endpoint(0, 0, 0);
    let addr = SocketAddr::new(cm_address(&here, local_ip), opts.port);
    let listener = CmListener::bind(addr, n as i32)?;
    ch.send(&Message::PerfAccept {
        endpoints: vec![here; n as usize],
    })?;
    let (mut ids, mut qps) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let req = listener.get_request(opts.timeout)?;
        let local = local_port_on(
            req.context()?,
            req.port(),
            opts.choice.gid_index,
            Some(local_ip),
        )?;
        let mut tq = make_qps(&local, shape, 1)?.remove(0);
        prepare_receives(std::slice::from_ref(&tq), kind, p, spec)?;
        let params = cm_params(&tq);
        ids.push(req.accept_with(&tq.qp, &[], params, opts.timeout)?);
        tq.path_mtu = Some(tq.local.active_mtu());
        qps.push(tq);
    }
    Ok((ids, qps))
}

/// The server: answer one client's bw/lat/write/read request.
pub fn serve(
    ch: &mut ControlChannel,
    opts: &SessionOptions,
    spec: &TestSpec,
    client_eps: &[Endpoint],
) -> Result<serde_json::Value> {
    let peer = ch.peer().to_string();
    let refuse = |ch: &mut ControlChannel, reason: String| {
        let _ = ch.send(&Message::Refuse {
            reason: reason.clone(),
        });
        anyhow!("refused {peer}: {reason}")
    };
    let (kind, p) = match validate(spec) {
        Ok(v) => v,
        Err(reason) => return Err(refuse(ch, reason)),
    };
    let want = if kind == Kind::Bw { p.qps } else { 1 };
    if client_eps.len() != want as usize {
        return Err(refuse(
            ch,
            format!("{} endpoints for {want} QPs", client_eps.len()),
        ));
    }
    let local_ip = ch.stream().local_addr()?.ip();
    let server_shape = shape(spec, kind, &p, true, 256);
    let setup = (|| -> Result<(Vec<CmId>, Vec<TestQp>)> {
        if spec.cm {
            return cm_serve_connect(ch, opts, spec, kind, &p, server_shape, local_ip, want);
        }
        let local = choose_port(&opts.choice, Some(local_ip))?;
        let mut qps = make_qps(&local, server_shape, want)?;
        prepare_receives(&qps, kind, &p, spec)?;
        for (tq, r) in qps.iter_mut().zip(client_eps) {
            tq.connect(r, spec.mtu)?;
        }
        Ok((Vec::new(), qps))
    })();
    let (_ids, mut qps) = match setup {
        Ok(q) => q,
        Err(e) => return Err(refuse(ch, format!("{e:#}"))),
    };
    // With rdma_cm the request carried placeholders: the client now sends its real endpoints.
    let client_eps: Vec<Endpoint> = if spec.cm {
        match ch.recv("the client's endpoints after the rdma_cm connections")? {
            Message::PerfAccept { endpoints } if endpoints.len() == qps.len() => endpoints,
            _ => bail!("{peer} did not send its endpoints after the rdma_cm connections"),
        }
    } else {
        client_eps.to_vec()
    };
    let client_eps = &client_eps;
    ch.send(&Message::PerfAccept {
        endpoints: qps.iter().map(|q| q.endpoint()).collect(),
    })?;
    let progress = Progress::default();
    let mut last = serde_json::Value::Null;
    // A failed verification ends this side non-zero too, after the protocol is finished.
    let mut failed: Option<String> = None;
    loop {
        match ch.recv_patient("the next round")? {
            Message::Round { size } => {
                if !p.sizes.contains(&size) {
                    bail!("{peer} asked for a round of {size} bytes it did not announce");
                }
                prepare_round(&mut qps, kind, &p, size, true);
                ch.send(&Message::RoundReady)?;
                let (mine, cpu) = crate::cpu::measure(|| {
                    run_round(
                        &mut qps,
                        client_eps,
                        kind,
                        spec,
                        &p,
                        size,
                        false,
                        opts.timeout,
                        &peer,
                        &progress,
                    )
                });
                let mine = match mine {
                    Ok(m) => m,
                    Err(e) => return Err(ch.fail(e)),
                };
                let theirs = match ch.recv_patient("the client's round result")? {
                    Message::RoundDone { summary } => summary,
                    _ => bail!("{peer} ended the round with an unexpected message"),
                };
                let reply = match mine {
                    Some(RoundOutcome::Bw(mut b)) => {
                        b.cpu_s = cpu;
                        serde_json::to_value(b)?
                    }
                    Some(RoundOutcome::Lat(mut l)) => {
                        l.cpu_s = cpu;
                        serde_json::to_value(l)?
                    }
                    None if kind == Kind::Verify && p.op == Op::Write => {
                        let buf = &mut qps[0].mr.as_mut_slice()[..size as usize];
                        verify::corrupt_for_test(buf);
                        let m = verify::verify(buf, size as u64);
                        if let Some(m) = m {
                            status(opts, &format!("round of {size} bytes: {m}"));
                            failed.get_or_insert(format!(
                                "RDMA WRITE verification of {size} bytes from {peer} failed: {m}"
                            ));
                        }
                        serde_json::json!({ "mismatch": m, "cpu_s": cpu })
                    }
                    None => serde_json::json!({ "cpu_s": cpu }),
                };
                ch.send(&Message::RoundDone {
                    summary: reply.clone(),
                })?;
                last = serde_json::json!({ "size": size, "client": theirs, "server": reply });
            }
            Message::TcpRound { size } => {
                tcp_server_round(ch, kind, &p, size, opts)?;
            }
            Message::Finished { .. } => {
                ch.send(&Message::Finished { summary: None })?;
                if let Some(f) = failed {
                    bail!(f);
                }
                return Ok(last);
            }
            _ => bail!("{peer} sent an unexpected message between rounds"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(test: &str, op: Op, transport: Transport) -> TestSpec {
        TestSpec {
            test: test.into(),
            transport,
            size: 0,
            iterations: 0,
            rx_depth: 0,
            events: false,
            mtu: None,
            cm: false,
            perf: Some(PerfSpec {
                op,
                sizes: vec![65536],
                iterations: Some(1000),
                duration_ms: None,
                qps: 1,
                tx_depth: 128,
                cq_mod: 100,
                post_list: 16,
                inline: 0,
                inline_explicit: false,
                bidirectional: false,
                vs_tcp: false,
            }),
        }
    }

    #[test]
    fn invalid_combinations_are_refused() {
        assert!(validate(&spec("bw", Op::Write, Transport::Rc)).is_ok());
        assert!(validate(&spec("bw", Op::Send, Transport::Ud)).is_ok());
        let e = validate(&spec("bw", Op::Read, Transport::Ud)).unwrap_err();
        assert!(e.contains("UD"), "{e}");
        assert!(validate(&spec("lat", Op::Read, Transport::Uc)).is_err());
        assert!(validate(&spec("write", Op::Send, Transport::Rc)).is_err());
        assert!(validate(&spec("nope", Op::Send, Transport::Rc)).is_err());
        let mut s = spec("bw", Op::Write, Transport::Rc);
        s.perf.as_mut().unwrap().sizes = vec![0];
        assert!(validate(&s).is_err());
        s.perf.as_mut().unwrap().sizes = vec![MAX_SIZE + 1];
        assert!(validate(&s).is_err());
        let mut s = spec("bw", Op::Write, Transport::Rc);
        s.perf.as_mut().unwrap().qps = 1_000_000;
        assert!(validate(&s).unwrap_err().contains("QPs"));
        let mut s = spec("bw", Op::Write, Transport::Rc);
        s.perf.as_mut().unwrap().iterations = None;
        assert!(validate(&s).is_err(), "neither iterations nor duration");
    }

    #[test]
    fn least_privilege_access() {
        let s = spec("bw", Op::Write, Transport::Rc);
        let p = s.perf.clone().unwrap();
        let server = shape(&s, Kind::Bw, &p, true, 256).access;
        let client = shape(&s, Kind::Bw, &p, false, 256).access;
        assert!(server.contains(Access::REMOTE_WRITE) && !server.contains(Access::REMOTE_READ));
        assert!(!client.contains(Access::REMOTE_WRITE) && !client.contains(Access::REMOTE_READ));
        let s = spec("bw", Op::Read, Transport::Rc);
        let p = s.perf.clone().unwrap();
        let server = shape(&s, Kind::Bw, &p, true, 256).access;
        assert!(server.contains(Access::REMOTE_READ) && !server.contains(Access::REMOTE_WRITE));
        let s = spec("bw", Op::Send, Transport::Rc);
        let p = s.perf.clone().unwrap();
        let server = shape(&s, Kind::Bw, &p, true, 256).access;
        assert_eq!(server, Access::LOCAL_WRITE);
    }
}
