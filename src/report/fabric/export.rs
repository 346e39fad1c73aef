//! A fabric run as CSV rows (one per pair) and Prometheus metrics (node_exporter's textfile).

use super::*;
use crate::report::prometheus::{Exposition, label};

/// CSV, one row per pair (header first).
pub fn fabric_csv(r: &FabricReport) -> String {
    let field = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let mut out = String::from(
        "a,b,round,bw_gbps,bw_gbps_reverse,lat_us,error_counter_delta,flagged,retested,reason\n",
    );
    for p in &r.pairs {
        let errors: u64 = p.counters.values().flat_map(|m| m.values()).sum();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            field(&p.a),
            field(&p.b),
            p.round,
            num(p.bw_gbps),
            num(p.bw_gbps_reverse),
            num(p.lat_us),
            errors,
            p.flagged,
            p.retested,
            field(p.reason.as_deref().unwrap_or(""))
        );
    }
    out
}

/// Prometheus text exposition format: per-pair gauges in base units (bytes per second,
/// seconds, as the check's metrics and promtool's lint want) and the suspects.
pub fn fabric_prometheus(r: &FabricReport) -> String {
    let mut out = Exposition::default();
    let mut gauge = |name: &str, help: &str, rows: Vec<(String, f64)>| out.gauge(name, help, rows);
    let pairs: Vec<&PairResult> = r.pairs.iter().filter(|p| !p.retested).collect();
    let pl = |p: &PairResult, src: &str, dst: &str| {
        format!(
            "src=\"{}\",dst=\"{}\",round=\"{}\"",
            label(src),
            label(dst),
            p.round
        )
    };
    let mut bw = Vec::new();
    for p in &pairs {
        if let Some(v) = p.bw_gbps {
            bw.push((pl(p, &p.a, &p.b), v * 1e9 / 8.0));
        }
        if let Some(v) = p.bw_gbps_reverse {
            bw.push((pl(p, &p.b, &p.a), v * 1e9 / 8.0));
        }
    }
    gauge(
        "rdmadiag_fabric_bandwidth_bytes_per_second",
        "Bandwidth of a pair, one direction, bytes per second.",
        bw,
    );
    gauge(
        "rdmadiag_fabric_latency_seconds",
        "Median half round trip latency of a pair, seconds.",
        pairs
            .iter()
            .filter_map(|p| Some((pl(p, &p.a, &p.b), p.lat_us? / 1e6)))
            .collect(),
    );
    gauge(
        "rdmadiag_fabric_pair_flagged",
        "1 when the pair was flagged.",
        pairs
            .iter()
            .map(|p| (pl(p, &p.a, &p.b), f64::from(u8::from(p.flagged))))
            .collect(),
    );
    gauge(
        "rdmadiag_fabric_suspect_host",
        "1 for each host the verdict suspects, 0 for the others.",
        r.hosts
            .iter()
            .map(|h| {
                let s = r.suspects.hosts.contains(&h.host);
                (
                    format!("host=\"{}\"", label(&h.host)),
                    f64::from(u8::from(s)),
                )
            })
            .collect(),
    );
    gauge(
        "rdmadiag_fabric_suspect_link",
        "1 for each link the verdict suspects.",
        r.suspects
            .links
            .iter()
            .map(|[a, b]| (format!("a=\"{}\",b=\"{}\"", label(a), label(b)), 1.0))
            .collect(),
    );
    gauge(
        "rdmadiag_fabric_suspect_group_host",
        "1 for each host of a suspect group (fast among themselves, slow to the rest).",
        r.suspects
            .groups
            .iter()
            .enumerate()
            .flat_map(|(i, g)| {
                g.iter()
                    .map(move |h| (format!("group=\"{i}\",host=\"{}\"", label(h)), 1.0))
            })
            .collect(),
    );
    gauge(
        "rdmadiag_fabric_findings",
        "Fabric-wide findings that fail the run.",
        vec![(
            String::new(),
            r.findings.iter().filter(|f| f.fails).count() as f64,
        )],
    );
    gauge(
        "rdmadiag_fabric_missing_ranks",
        "Ranks that did not join or left mid-run.",
        vec![(String::new(), r.missing.len() as f64)],
    );
    out.finish()
}
