//! What a fabric run found (hosts, pairs, suspects, missing ranks) and how it reads: the host x
//! host matrices, the per-host summary, CSV rows and Prometheus metrics.

use super::{Style, finish};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One rank as it reported at the rendezvous.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub rank: u32,
    /// The name the report uses: the hostname, or `hostname/rank` when ranks share a hostname
    /// (several ranks on one machine) so each row stays its own.
    pub host: String,
    /// The kernel's hostname.
    pub hostname: String,
    pub device: String,
    pub port: u8,
    pub gid: String,
    /// The address peers reach its test port on.
    pub address: String,
    pub test_port: u16,
}

/// One pair's results (a is the lower rank). `bw_gbps` is a to b, `bw_gbps_reverse` b to a,
/// `lat_us` the median half round trip; None when that test was not run or failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    pub a: String,
    pub b: String,
    pub a_rank: u32,
    pub b_rank: u32,
    /// The round it ran in (1-based; retests follow the schedule's rounds).
    pub round: u32,
    pub bw_gbps: Option<f64>,
    pub bw_gbps_reverse: Option<f64>,
    pub lat_us: Option<f64>,
    /// Each host's error counter deltas over the pair's tests (counters that moved only).
    pub counters: BTreeMap<String, BTreeMap<String, u64>>,
    /// Why a test of the pair failed, if one did.
    pub error: Option<String>,
    pub flagged: bool,
    /// Why it is flagged: a sentence.
    pub reason: Option<String>,
    /// This entry is a retest of a suspect (run after the schedule, against a host that passed).
    pub retested: bool,
}

impl PairResult {
    /// The slower direction's bandwidth, when both (or one) were measured.
    pub fn bw_min(&self) -> Option<f64> {
        match (self.bw_gbps, self.bw_gbps_reverse) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Whether `host` is one of the pair.
    pub fn has(&self, host: &str) -> bool {
        self.a == host || self.b == host
    }
}

/// What the verdict singled out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Suspects {
    pub hosts: Vec<String>,
    pub links: Vec<[String; 2]>,
}

impl Suspects {
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.links.is_empty()
    }
}

/// Why a suspect is one, and what its retest said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuspectNote {
    /// "host" or "link".
    pub kind: String,
    /// The host, or the link as "a - b".
    pub name: String,
    pub reason: String,
    /// What the retest found: None when none could be run.
    pub retest: Option<String>,
    /// Still a suspect after the retest (the retest was flagged too, or could not run).
    pub confirmed: bool,
}

/// One host's pairs at a glance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    pub host: String,
    pub pairs: u32,
    pub flagged: u32,
    pub median_bw_gbps: Option<f64>,
    pub median_lat_us: Option<f64>,
}

/// What the pairs were run with, and what they were judged against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricSettings {
    pub pattern: String,
    pub tests: Vec<String>,
    pub bw_size: u32,
    pub bw_iterations: u64,
    pub lat_size: u32,
    pub lat_iterations: u64,
    pub min_bw_ratio: f64,
    pub max_lat_ratio: f64,
    pub expect_bw_gbps: Option<f64>,
    pub expect_lat_us: Option<f64>,
    pub timeout_s: f64,
    /// Pairs whose error counters rose are flagged (off with --no-counter-check).
    pub counter_check: bool,
    /// `--tclass`, `--sl`: the pair tests' RoCE traffic class and InfiniBand service level.
    #[serde(default)]
    pub tclass: u8,
    #[serde(default)]
    pub sl: u8,
}

/// A whole fabric run, as rank 0 reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricReport {
    pub settings: FabricSettings,
    pub rounds: u32,
    pub duration_s: f64,
    pub hosts: Vec<HostInfo>,
    pub pairs: Vec<PairResult>,
    /// The medians the ratios are taken against (first-pass pairs only).
    pub median_bw_gbps: Option<f64>,
    pub median_lat_us: Option<f64>,
    pub suspects: Suspects,
    pub suspect_notes: Vec<SuspectNote>,
    pub host_summary: Vec<HostSummary>,
    /// Ranks that did not join, or left mid-run, by host name (or "rank N" when never seen).
    pub missing: Vec<String>,
    /// What happened to each missing rank, a sentence each.
    pub missing_reasons: Vec<String>,
}

impl FabricReport {
    /// Whether anything is flagged: a suspect, a flagged pair, or a missing rank.
    pub fn anything_flagged(&self) -> bool {
        !self.suspects.is_empty()
            || !self.missing.is_empty()
            || self.pairs.iter().any(|p| p.flagged && !p.retested)
    }
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// A host x host matrix: the row host's figure towards the column host.
fn matrix(
    r: &FabricReport,
    style: Style,
    title: &str,
    value: impl Fn(&PairResult, bool) -> Option<f64>,
    digits: usize,
) -> String {
    let names: Vec<&str> = r.hosts.iter().map(|h| h.host.as_str()).collect();
    let mut header = vec![title];
    header.extend(names.iter().copied());
    let mut t = style.table(&header);
    for row in &names {
        let mut cells = vec![style.bold(row)];
        for col in &names {
            let pair = r
                .pairs
                .iter()
                .filter(|p| !p.retested)
                .find(|p| (p.a == *row && p.b == *col) || (p.b == *row && p.a == *col));
            let cell = match pair {
                None if row == col => comfy_table::Cell::new("."),
                None => comfy_table::Cell::new(""),
                Some(p) => {
                    let forward = p.a == *row;
                    let text = match value(p, forward) {
                        Some(v) => format!("{v:.digits$}"),
                        None if p.error.is_some() => "failed".to_string(),
                        None => "-".to_string(),
                    };
                    if p.flagged {
                        style.alert(format!("{text}*"))
                    } else {
                        comfy_table::Cell::new(text)
                    }
                }
            };
            cells.push(cell);
        }
        t.add_row(cells);
    }
    finish(&t)
}

/// The text report: the plan's outcome, matrices, per-host summary, suspects.
pub fn fabric_text(r: &FabricReport, style: Style) -> String {
    let s = &r.settings;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "fabric: {} hosts, {} pairs in {} rounds ({}), {:.1} s",
        r.hosts.len(),
        r.pairs.iter().filter(|p| !p.retested).count(),
        r.rounds,
        s.pattern,
        r.duration_s
    );
    if (s.tclass, s.sl) != (0, 0) {
        let _ = writeln!(
            out,
            "settings: {}",
            super::qos_text(Some(s.tclass), Some(s.sl))
        );
    }
    let tested = |t: &str| s.tests.iter().any(|x| x == t);
    if tested("bw") {
        let _ = writeln!(
            out,
            "\nbandwidth, Gb/s (row host sending to column host; {} B x {}; median {}; * flagged)",
            s.bw_size,
            s.bw_iterations,
            fmt_opt(r.median_bw_gbps, 3)
        );
        out.push_str(&matrix(
            r,
            style,
            "from \\ to",
            |p, fwd| if fwd { p.bw_gbps } else { p.bw_gbps_reverse },
            3,
        ));
    }
    if tested("lat") {
        let _ = writeln!(
            out,
            "\nlatency, us (median half round trip; {} B x {}; median {}; * flagged)",
            s.lat_size,
            s.lat_iterations,
            fmt_opt(r.median_lat_us, 1)
        );
        out.push_str(&matrix(r, style, "host", |p, _| p.lat_us, 1));
    }
    let mut t = style.table(&["host", "pairs", "flagged", "median Gb/s", "median us"]);
    for h in &r.host_summary {
        t.add_row(vec![
            h.host.clone(),
            h.pairs.to_string(),
            h.flagged.to_string(),
            fmt_opt(h.median_bw_gbps, 3),
            fmt_opt(h.median_lat_us, 1),
        ]);
    }
    out.push_str("\nper host\n");
    out.push_str(&finish(&t));
    let flagged: Vec<&PairResult> = r.pairs.iter().filter(|p| p.flagged).collect();
    if !flagged.is_empty() {
        out.push_str("\nflagged pairs\n");
        for p in flagged {
            let _ = writeln!(
                out,
                "  {} - {}{} (round {}): {}",
                p.a,
                p.b,
                if p.retested { " [retest]" } else { "" },
                p.round,
                p.reason.as_deref().unwrap_or("flagged")
            );
        }
    }
    if !r.suspect_notes.is_empty() {
        out.push_str("\nsuspects (each retested once against hosts that passed)\n");
        for n in &r.suspect_notes {
            let _ = writeln!(
                out,
                "  {} {}: {}{}; {}",
                n.kind,
                n.name,
                n.reason,
                match &n.retest {
                    Some(t) => format!("; retest: {t}"),
                    None => "; not retested".into(),
                },
                if n.confirmed { "suspect" } else { "cleared" }
            );
        }
    }
    for m in &r.missing_reasons {
        let _ = writeln!(out, "\nmissing: {m}");
    }
    let verdict = if r.suspects.is_empty() && r.missing.is_empty() {
        if r.pairs.iter().any(|p| p.flagged && !p.retested) {
            "verdict: flagged pairs cleared on retest, no suspects".to_string()
        } else {
            "verdict: no suspects".to_string()
        }
    } else {
        let mut parts = Vec::new();
        if !r.suspects.hosts.is_empty() {
            parts.push(format!("suspect host(s) {}", r.suspects.hosts.join(", ")));
        }
        if !r.suspects.links.is_empty() {
            let links: Vec<String> = r
                .suspects
                .links
                .iter()
                .map(|[a, b]| format!("{a} - {b}"))
                .collect();
            parts.push(format!("suspect link(s) {}", links.join(", ")));
        }
        if !r.missing.is_empty() {
            parts.push(format!("missing {}", r.missing.join(", ")));
        }
        format!("verdict: {}", parts.join("; "))
    };
    let _ = writeln!(out, "\n{verdict}");
    out
}

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

/// Prometheus text exposition format: per-pair gauges and the suspects.
pub fn fabric_prometheus(r: &FabricReport) -> String {
    let label = |s: &str| {
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, rows: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, v) in rows {
            if labels.is_empty() {
                let _ = writeln!(out, "{name} {v}");
            } else {
                let _ = writeln!(out, "{name}{{{labels}}} {v}");
            }
        }
    };
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
            bw.push((pl(p, &p.a, &p.b), v));
        }
        if let Some(v) = p.bw_gbps_reverse {
            bw.push((pl(p, &p.b, &p.a), v));
        }
    }
    gauge(
        "rdmadiag_fabric_bw_gbps",
        "Bandwidth of a pair, one direction, Gb/s.",
        bw,
    );
    gauge(
        "rdmadiag_fabric_lat_us",
        "Median half round trip latency of a pair, microseconds.",
        pairs
            .iter()
            .filter_map(|p| Some((pl(p, &p.a, &p.b), p.lat_us?)))
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
        "rdmadiag_fabric_missing_ranks",
        "Ranks that did not join or left mid-run.",
        vec![(String::new(), r.missing.len() as f64)],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> FabricReport {
        let host = |rank: u32, host: &str| HostInfo {
            rank,
            host: host.into(),
            hostname: host.into(),
            device: "rxe0".into(),
            port: 1,
            gid: "::ffff:10.0.0.1".into(),
            address: "10.0.0.1".into(),
            test_port: 40000,
        };
        let pair = |a: (u32, &str), b: (u32, &str), bw: f64, flagged: bool| PairResult {
            a: a.1.into(),
            b: b.1.into(),
            a_rank: a.0,
            b_rank: b.0,
            round: 1,
            bw_gbps: Some(bw),
            bw_gbps_reverse: Some(bw),
            lat_us: Some(10.0),
            counters: BTreeMap::new(),
            error: None,
            flagged,
            reason: flagged.then(|| "bandwidth 0.1 Gb/s, below 0.8 x the median".to_string()),
            retested: false,
        };
        FabricReport {
            settings: FabricSettings {
                pattern: "all-pairs".into(),
                tests: vec!["bw".into(), "lat".into()],
                bw_size: 65536,
                bw_iterations: 100,
                lat_size: 2,
                lat_iterations: 100,
                min_bw_ratio: 0.8,
                max_lat_ratio: 1.5,
                expect_bw_gbps: None,
                expect_lat_us: None,
                timeout_s: 30.0,
                counter_check: true,
                tclass: 0,
                sl: 0,
            },
            rounds: 3,
            duration_s: 1.0,
            hosts: vec![host(0, "a"), host(1, "b"), host(2, "c,\"x\"")],
            pairs: vec![
                pair((0, "a"), (1, "b"), 1.0, false),
                pair((0, "a"), (2, "c,\"x\""), 0.1, true),
            ],
            median_bw_gbps: Some(1.0),
            median_lat_us: Some(10.0),
            suspects: Suspects {
                hosts: vec!["c,\"x\"".into()],
                links: vec![],
            },
            suspect_notes: vec![],
            host_summary: vec![],
            missing: vec![],
            missing_reasons: vec![],
        }
    }

    #[test]
    fn text_marks_flagged_cells_and_names_suspects() {
        let t = fabric_text(&sample(), Style::plain());
        assert!(t.contains("0.100*"), "{t}");
        assert!(t.contains("1.000") && !t.contains("1.000*"), "{t}");
        assert!(t.contains("verdict: suspect host(s) c,\"x\""), "{t}");
    }

    #[test]
    fn csv_has_one_row_per_pair_and_quotes_fields() {
        let c = fabric_csv(&sample());
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 3, "{c}");
        assert!(lines[2].starts_with("a,\"c,\"\"x\"\"\",1,0.1,"), "{c}");
    }

    #[test]
    fn prometheus_lines_are_well_formed() {
        let p = fabric_prometheus(&sample());
        assert!(
            p.contains("rdmadiag_fabric_bw_gbps{src=\"a\",dst=\"b\",round=\"1\"} 1"),
            "{p}"
        );
        assert!(
            p.contains("rdmadiag_fabric_suspect_host{host=\"c,\\\"x\\\"\"} 1"),
            "{p}"
        );
        assert!(p.contains("rdmadiag_fabric_missing_ranks 0"), "{p}");
        for line in p.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
