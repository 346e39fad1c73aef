//! The results of bw, lat, write and read runs, and how they read.

use super::{Style, endpoint_text, finish};
use crate::clock::ClockSource;
pub use crate::connect::control::{BwFigures, Mismatch};
use crate::connect::control::{QpType, TestName};
use crate::connect::endpoint::Endpoint;
use crate::counters::CounterDeltas;
use crate::perf::{LatTiming, Op};
use crate::stats::{Bucket, LatencyStats};
use comfy_table::Cell;
use serde::{Deserialize, Serialize};

/// The unit of bandwidth columns in text (JSON is always Gb/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BwUnit {
    /// Gb/s (10^9 bits per second), as perftest's --report_gbits.
    #[default]
    Gbit,
    /// MiB/s (2^20 bytes per second), perftest's MB/sec.
    Mib,
}

impl BwUnit {
    pub fn label(self) -> &'static str {
        match self {
            BwUnit::Gbit => "Gb/s",
            BwUnit::Mib => "MiB/s",
        }
    }

    /// `gbps` (Gb/s) in this unit.
    pub fn convert(self, gbps: f64) -> f64 {
        match self {
            BwUnit::Gbit => gbps,
            BwUnit::Mib => gbps * 1e9 / 8.0 / 1_048_576.0,
        }
    }

    /// A figure in this unit, in Gb/s (the inverse of [`BwUnit::convert`]).
    pub fn to_gbps(self, figure: f64) -> f64 {
        match self {
            BwUnit::Gbit => figure,
            BwUnit::Mib => figure * 1_048_576.0 * 8.0 / 1e9,
        }
    }
}

/// One size's bandwidth result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BwResult {
    pub size: u32,
    /// Operations completed (all QPs; both directions with -b).
    pub iterations: u64,
    /// The CQ moderation this size ran with (1 above 8 KiB unless -Q was given).
    #[serde(default)]
    pub cq_mod: u32,
    pub bw_peak_gbps: f64,
    pub bw_avg_gbps: f64,
    pub msg_rate_mpps: f64,
    pub elapsed_s: f64,
    /// CPU time this side's thread spent in the round, and the other side's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_cpu_s: Option<f64>,
    /// What the other end measured (the receiver in a SEND test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<Box<BwResult>>,
    /// With -b: client to server, as the client measured it (the figures above are the sum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<BwFigures>,
    /// With -b: server to client, as the server measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<BwFigures>,
    /// Against a perftest server: how each operation's addresses stepped through its cycle
    /// buffer, as perftest's clients step them (absent: every operation used one address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_steps: Option<AddressSteps>,
}

/// perftest's address stepping in one bandwidth round: operation k (with a post list, request k
/// of each list) goes `(k % positions) * stride_bytes` past the first local and remote addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressSteps {
    pub stride_bytes: u64,
    pub positions: u64,
}

impl BwResult {
    /// A result holding one direction's figures.
    pub fn from_figures(size: u32, cq_mod: u32, f: BwFigures) -> BwResult {
        BwResult {
            size,
            iterations: f.iterations,
            cq_mod,
            bw_peak_gbps: f.bw_peak_gbps,
            bw_avg_gbps: f.bw_avg_gbps,
            msg_rate_mpps: f.msg_rate_mpps,
            elapsed_s: f.elapsed_s,
            cpu_s: None,
            peer_cpu_s: None,
            peer: None,
            forward: None,
            reverse: None,
            address_steps: None,
        }
    }

    /// This result's own figures (one direction).
    pub fn figures(&self) -> BwFigures {
        BwFigures {
            iterations: self.iterations,
            bw_peak_gbps: self.bw_peak_gbps,
            bw_avg_gbps: self.bw_avg_gbps,
            msg_rate_mpps: self.msg_rate_mpps,
            elapsed_s: self.elapsed_s,
        }
    }

    /// Both directions of a -b round: the sum on top (perftest's figure), each one below.
    pub fn bidirectional(mut self, reverse: BwFigures) -> BwResult {
        let forward = self.figures();
        self.iterations += reverse.iterations;
        self.bw_peak_gbps += reverse.bw_peak_gbps;
        self.bw_avg_gbps += reverse.bw_avg_gbps;
        self.msg_rate_mpps += reverse.msg_rate_mpps;
        self.elapsed_s = self.elapsed_s.max(reverse.elapsed_s);
        self.forward = Some(forward);
        self.reverse = Some(reverse);
        self
    }
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
    /// WRITE/READ diagnostics: whether every byte of every transfer arrived as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// WRITE/READ diagnostics: how many transfers were checked byte by byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfers_checked: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<Mismatch>,
    /// The distribution (`lat --histogram`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<Bucket>,
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
    pub test: TestName,
    pub op: Op,
    pub transport: QpType,
    pub qps: u32,
    pub tx_depth: u32,
    /// Requested CQ moderation (bw: each size's own is in its result).
    pub cq_mod: u32,
    /// Operations per ibv_post_send call (bw).
    #[serde(default)]
    pub post_list: u32,
    /// RDMA READs or atomics in flight per QP (READ and atomic tests: the QP's max_rd_atomic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outstanding_reads: Option<u32>,
    /// The device's bound on them (the lower of its max_qp_rd_atom and max_qp_init_rd_atom).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outstanding_max: Option<u32>,
    /// Latency tests: how samples are taken (perftest or lean) and the signalling in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<LatTiming>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signaling: Option<String>,
    pub inline: u32,
    /// RoCE GRH traffic class (the IP TOS byte) and InfiniBand service level the QPs were
    /// given; null with `--cm` when rdma_cm chose.
    #[serde(default)]
    pub tclass: Option<u8>,
    #[serde(default)]
    pub sl: Option<u8>,
    pub bidirectional: bool,
    /// The peer tool whose wire was spoken and its version ("perftest 6.06"); absent against
    /// rdmadiag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<String>,
    pub duration_s: Option<f64>,
    /// For latency: what one sample is ("half round trip" or "round trip").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_measure: Option<String>,
    /// For latency: where the samples' clock readings came from (`tsc`, `cntvct` or
    /// `monotonic`), one per sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockSource>,
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
    /// `--counters`: how this host's port counters changed across the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_deltas: Option<CounterDeltas>,
    /// The verdict on each `--expect-*` threshold at each size it applies to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<super::thresholds::ThresholdCheck>,
}

fn perf_header(r: &PerfReport) -> String {
    let what = if r.test.is_diagnostic() {
        format!("RDMA {} diagnostic", r.test.to_string().to_uppercase())
    } else {
        format!("{} {}", r.test, r.op)
    };
    let mut out = format!(
        "{} {}{}, {} QP(s), path MTU {}{}{}\n",
        what,
        r.transport,
        if r.bidirectional {
            " bidirectional"
        } else {
            ""
        },
        r.qps,
        r.path_mtu,
        r.duration_s
            .map(|d| format!(", {d} s per size"))
            .unwrap_or_default(),
        r.compat
            .as_ref()
            .map(|c| format!(", against {c}"))
            .unwrap_or_default()
    );
    out.push_str(&format!("  local   {}\n", endpoint_text(&r.local)));
    out.push_str(&format!("  remote  {}\n", endpoint_text(&r.remote)));
    out.push_str(&format!("  settings  {}\n", settings_text(r)));
    out
}

/// Every setting that shapes the figures, in one line (perftest prints them in its header).
fn settings_text(r: &PerfReport) -> String {
    let mut parts = Vec::new();
    if !r.bw.is_empty() {
        parts.push(format!("tx depth {}", r.tx_depth));
        parts.push(format!("post list {}", r.post_list));
        let mods: std::collections::BTreeSet<u32> = r.bw.iter().map(|b| b.cq_mod).collect();
        let mods: Vec<String> = mods.iter().map(u32::to_string).collect();
        parts.push(format!(
            "CQ moderation {} (requested {}; 1 above 8 KiB unless -Q)",
            mods.join("/"),
            r.cq_mod
        ));
        let steps: Vec<String> =
            r.bw.iter()
                .filter_map(|b| b.address_steps)
                .map(|a| format!("{} B x {}", a.stride_bytes, a.positions))
                .collect();
        if !steps.is_empty() {
            parts.push(format!(
                "addresses stepped as perftest's client steps them ({})",
                steps.join(", ")
            ));
        }
    }
    if let Some(o) = r.outstanding_reads {
        let what = if r.op.is_atomic() { "atomics" } else { "reads" };
        let bound = r
            .outstanding_max
            .map(|m| format!(" (device max {m})"))
            .unwrap_or_default();
        parts.push(format!("outstanding {what} {o}{bound}"));
    }
    parts.push(format!("inline {} B", r.inline));
    if let Some(t) = r.timing {
        parts.push(format!("timing {t}"));
    }
    if let Some(s) = &r.signaling {
        parts.push(s.clone());
    }
    parts.push(super::qos_text(r.tclass, r.sl));
    parts.join(", ")
}

fn cpu_text(cpu: Option<f64>, elapsed: f64) -> String {
    match cpu {
        Some(c) if elapsed > 0.0 => format!("{c:.3} s ({:.0}%)", c / elapsed * 100.0),
        Some(c) => format!("{c:.3} s"),
        None => "-".into(),
    }
}

/// `--vs-tcp`: RDMA and TCP side by side per size, with the CPU each side spent.
fn vs_tcp_text(r: &PerfReport, style: Style) -> String {
    if r.tcp.is_empty() {
        return String::new();
    }
    let bw = !r.bw.is_empty();
    let (what, rdma_h, tcp_h) = if bw {
        ("higher is better", "RDMA Gb/s", "TCP Gb/s")
    } else {
        ("lower is better", "RDMA median us", "TCP median us")
    };
    let mut t = style.table(&[
        "#bytes",
        rdma_h,
        tcp_h,
        "RDMA/TCP",
        "CPU here RDMA",
        "CPU here TCP",
        "CPU peer RDMA",
        "CPU peer TCP",
    ]);
    for tr in &r.tcp {
        let (rdma, rdma_elapsed, cpu, peer_cpu) = if bw {
            let Some(b) = r.bw.iter().find(|b| b.size == tr.size) else {
                continue;
            };
            (b.bw_avg_gbps, b.elapsed_s, b.cpu_s, b.peer_cpu_s)
        } else {
            let Some(l) = r.lat.iter().find(|l| l.size == tr.size) else {
                continue;
            };
            let per_sample = if r.latency_measure.as_deref() == Some("half round trip") {
                2.0
            } else {
                1.0
            };
            let elapsed = l.latency.avg_us * per_sample * l.iterations as f64 / 1e6;
            (l.latency.median_us, elapsed, l.cpu_s, l.peer_cpu_s)
        };
        let tcp = if bw {
            tr.bw_avg_gbps.unwrap_or(0.0)
        } else {
            tr.latency.map_or(0.0, |l| l.median_us)
        };
        t.add_row(vec![
            Cell::new(tr.size),
            Cell::new(format!("{rdma:.2}")),
            Cell::new(format!("{tcp:.2}")),
            Cell::new(if tcp > 0.0 {
                format!("{:.2}", rdma / tcp)
            } else {
                "-".into()
            }),
            Cell::new(cpu_text(cpu, rdma_elapsed)),
            Cell::new(cpu_text(tr.cpu_s, tr.elapsed_s)),
            Cell::new(cpu_text(peer_cpu, rdma_elapsed)),
            Cell::new(cpu_text(tr.peer_cpu_s, tr.elapsed_s)),
        ]);
    }
    format!(
        "  RDMA against TCP on the same path ({what}):\n{}",
        finish(&t)
    )
}

/// A rate of messages per second in the unit its size calls for (Mpps, kpps or pps), with about
/// three significant figures (JSON keeps `msg_rate_mpps`).
pub fn msg_rate_text(per_sec: f64) -> String {
    let (v, unit) = if per_sec >= 1e6 {
        (per_sec / 1e6, "Mpps")
    } else if per_sec >= 1e3 {
        (per_sec / 1e3, "kpps")
    } else {
        (per_sec, "pps")
    };
    let decimals = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$} {unit}")
}

/// `rdmadiag bw`: one row per size.
pub fn bw_text(r: &PerfReport, units: BwUnit, style: Style) -> String {
    let label = units.label();
    let conv = |gbps: f64| units.convert(gbps);
    let peer_col = r.bw.iter().any(|b| b.peer.is_some());
    let both = r.bw.iter().any(|b| b.forward.is_some());
    let peak = format!("BW peak [{label}]");
    let avg = format!("BW average [{label}]");
    let peer_avg = format!("peer avg [{label}]");
    let fwd = format!("client->server avg [{label}]");
    let rev = format!("server->client avg [{label}]");
    let mut head = vec!["#bytes", "#iterations", &peak, &avg, "MsgRate"];
    if peer_col {
        head.push(&peer_avg);
    }
    if both {
        head.push(&fwd);
        head.push(&rev);
    }
    let mut t = style.table(&head);
    for b in &r.bw {
        let mut row = vec![
            Cell::new(b.size),
            Cell::new(b.iterations),
            Cell::new(format!("{:.2}", conv(b.bw_peak_gbps))),
            Cell::new(format!("{:.2}", conv(b.bw_avg_gbps))),
            Cell::new(msg_rate_text(b.msg_rate_mpps * 1e6)),
        ];
        if peer_col {
            row.push(Cell::new(b.peer.as_ref().map_or("-".to_string(), |p| {
                format!("{:.2}", conv(p.bw_avg_gbps))
            })));
        }
        if both {
            for d in [&b.forward, &b.reverse] {
                row.push(Cell::new(d.as_ref().map_or("-".to_string(), |d| {
                    format!("{:.2}", conv(d.bw_avg_gbps))
                })));
            }
        }
        t.add_row(row);
    }
    let mut out = perf_header(r);
    if both {
        out.push_str("  bidirectional: figures are the sum of both directions (as perftest)\n");
    }
    out.push_str(&finish(&t));
    out.push_str(&vs_tcp_text(r, style));
    out.push_str(&super::thresholds::text(r));
    out
}

fn histogram_text(l: &LatResult) -> String {
    let max = l
        .histogram
        .iter()
        .map(|b| b.count)
        .max()
        .unwrap_or(0)
        .max(1);
    let mut out = format!("  distribution of {} B (us):\n", l.size);
    for b in &l.histogram {
        let bar = "#".repeat(((b.count * 50).div_ceil(max)) as usize);
        out.push_str(&format!("  <= {:>10.2} {:>9} {bar}\n", b.le_us, b.count));
    }
    out
}

/// `rdmadiag lat`: one row per size, every statistic from every sample.
pub fn lat_text(r: &PerfReport, histogram: bool, style: Style) -> String {
    let mut t = style.table(&[
        "#bytes",
        "#iterations",
        "min",
        "median",
        "avg",
        "stdev",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "max",
    ]);
    let f = |v: f64| Cell::new(format!("{v:.2}"));
    for l in &r.lat {
        let s = &l.latency;
        t.add_row(vec![
            Cell::new(l.size),
            Cell::new(l.iterations),
            f(s.min_us),
            f(s.median_us),
            f(s.avg_us),
            f(s.stdev_us),
            f(s.p90_us),
            f(s.p99_us),
            f(s.p999_us),
            f(s.p9999_us),
            f(s.max_us),
        ]);
    }
    let mut out = perf_header(r);
    out.push_str(&format!(
        "  latency in us, each sample a {}{}\n",
        r.latency_measure.as_deref().unwrap_or("round trip"),
        r.clock
            .map(|c| format!(" (clock: {c}, one read per sample)"))
            .unwrap_or_default()
    ));
    out.push_str(&finish(&t));
    out.push_str(&vs_tcp_text(r, style));
    out.push_str(&super::thresholds::text(r));
    if histogram {
        for l in &r.lat {
            out.push_str(&histogram_text(l));
        }
    }
    out
}

/// `rdmadiag write` / `read`: what moved, how fast, and whether every byte arrived.
pub fn xfer_text(r: &PerfReport, style: Style) -> String {
    let mut t = style.table(&[
        "#bytes",
        "#iterations",
        "verified",
        "min us",
        "median us",
        "max us",
        "Gb/s",
    ]);
    for l in &r.lat {
        let ok = match (l.verified, &l.mismatch, l.transfers_checked) {
            (_, Some(m), _) => style.alert(m.to_string()),
            (Some(true), None, Some(n)) => Cell::new(format!(
                "every byte of {n} transfer{}",
                if n == 1 { "" } else { "s" }
            )),
            _ => style.alert("NOT VERIFIED".to_string()),
        };
        t.add_row(vec![
            Cell::new(l.size),
            Cell::new(l.iterations),
            ok,
            Cell::new(format!("{:.2}", l.latency.min_us)),
            Cell::new(format!("{:.2}", l.latency.median_us)),
            Cell::new(format!("{:.2}", l.latency.max_us)),
            Cell::new(format!("{:.3}", l.bw_avg_gbps.unwrap_or(0.0))),
        ]);
    }
    let mut out = perf_header(r);
    out.push_str(&finish(&t));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_rates_take_the_unit_their_size_calls_for() {
        assert_eq!(msg_rate_text(610.0), "610 pps");
        assert_eq!(msg_rate_text(6.1), "6.10 pps");
        assert_eq!(msg_rate_text(61_000.0), "61.0 kpps");
        assert_eq!(msg_rate_text(1_234.0), "1.23 kpps");
        assert_eq!(msg_rate_text(12_500_000.0), "12.5 Mpps");
        assert_eq!(msg_rate_text(0.0), "0.00 pps");
    }

    #[test]
    fn atomics_name_their_op_and_their_outstanding_bound() {
        let ep = serde_json::json!({"device": "rxe0", "port": 1, "link_layer": "Ethernet",
            "lid": 0, "qpn": 17, "psn": 1, "gid": "::ffff:10.0.0.1", "gid_index": 1,
            "gid_type": null, "netdev": null, "active_mtu": 1024, "qkey": 0});
        let mut r: PerfReport = serde_json::from_value(serde_json::json!({"test": "lat",
            "op": "atomic-cswap", "transport": "RC", "qps": 1, "tx_depth": 1, "cq_mod": 1,
            "inline": 0, "outstanding_reads": 16, "outstanding_max": 128, "bidirectional": false, "duration_s": null,
            "path_mtu": 1024, "local": ep, "remote": ep}))
        .unwrap();
        assert_eq!(r.op, Op::AtomicCswap);
        let head = perf_header(&r);
        assert!(head.starts_with("lat atomic-cswap RC"), "{head}");
        assert!(
            head.contains("outstanding atomics 16 (device max 128)"),
            "{head}"
        );
        r.op = Op::Read;
        assert!(perf_header(&r).contains("outstanding reads 16"));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["op"], "read");
    }
}
