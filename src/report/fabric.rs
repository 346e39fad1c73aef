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
    /// Hosts fast among themselves and slow to the rest (a switch, an uplink), one list each.
    #[serde(default)]
    pub groups: Vec<Vec<String>>,
}

impl Suspects {
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.links.is_empty() && self.groups.is_empty()
    }
}

/// A finding about the fabric as a whole: a rule that flagged most pairs, or error counters
/// that rose on most of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule: "failure", "counters", "expect-bw", "expect-lat".
    pub rule: String,
    /// It fails the run (exit 3); false: information only.
    pub fails: bool,
    /// Pairs it covers.
    pub pairs: u32,
    pub text: String,
}

/// Why a suspect is one, and what its retest said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuspectNote {
    /// "host", "link" or "group".
    pub kind: String,
    /// The host, the link as "a - b", or the group's hosts.
    pub name: String,
    /// The rule that fired: "bw-host", "bw-send", "bw-recv", "bw-group", "bw-link",
    /// "lat-host", "lat-link", "failure", "counters", "expect-bw", "expect-lat".
    #[serde(default)]
    pub rule: String,
    /// The rule's figures, a sentence.
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
    /// Its median bandwidth over the reference.
    #[serde(default)]
    pub bw_ratio: Option<f64>,
    /// Its median latency over the reference.
    #[serde(default)]
    pub lat_ratio: Option<f64>,
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
    /// Error counters are judged (off with --no-counter-check).
    pub counter_check: bool,
    /// --max-error-delta: the counter rise a pair may show (None: judged against the run's pairs).
    #[serde(default)]
    pub max_error_delta: Option<u64>,
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
    /// The references the ratios are taken against: the median of the hosts' median figures
    /// (scheduled pairs only).
    pub median_bw_gbps: Option<f64>,
    pub median_lat_us: Option<f64>,
    /// The run's noise: the figures' spread around their hosts' medians (0.05 is 5 %).
    #[serde(default)]
    pub bw_spread: Option<f64>,
    #[serde(default)]
    pub lat_spread: Option<f64>,
    /// Each error counter's fence: a pair is flagged when its rise is above it.
    #[serde(default)]
    pub counter_fence: BTreeMap<String, u64>,
    /// Fabric-wide findings.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// What the verdict could not judge (too few hosts), a sentence each.
    #[serde(default)]
    pub limits: Vec<String>,
    pub suspects: Suspects,
    pub suspect_notes: Vec<SuspectNote>,
    pub host_summary: Vec<HostSummary>,
    /// Ranks that did not join, or left mid-run, by host name (or "rank N" when never seen).
    pub missing: Vec<String>,
    /// What happened to each missing rank, a sentence each.
    pub missing_reasons: Vec<String>,
}

impl FabricReport {
    /// Whether anything fails the run: a suspect, a failing fabric-wide finding, a failed test
    /// or a missing rank.
    pub fn anything_flagged(&self) -> bool {
        !self.suspects.is_empty()
            || !self.missing.is_empty()
            || self.findings.iter().any(|f| f.fails)
            || self.pairs.iter().any(|p| p.error.is_some() && !p.retested)
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

/// Above this many hosts the text report shows histograms instead of host x host matrices.
pub const MATRIX_MAX_HOSTS: usize = 16;
/// Rows of the per-host table and of the flagged pairs the text shows at most.
pub const TEXT_MAX_ROWS: usize = 20;

/// The pairs' figures over the reference, counted into buckets, one line each.
fn histogram(out: &mut String, title: &str, ratios: &[f64], edges: &[f64]) {
    if ratios.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    let mut counts = vec![0usize; edges.len() + 1];
    for r in ratios {
        counts[edges.iter().take_while(|e| *r >= **e).count()] += 1;
    }
    let most = counts.iter().copied().max().unwrap_or(1).max(1);
    for (i, n) in counts.iter().enumerate() {
        let label = match i {
            0 => format!("      < {:.2}", edges[0]),
            i if i == edges.len() => format!("     >= {:.2}", edges[i - 1]),
            i => format!("{:.2} - {:.2}", edges[i - 1], edges[i]),
        };
        let bar = "#".repeat((n * 40).div_ceil(most));
        let _ = writeln!(out, "  {label}  {n:>8}  {bar}");
    }
}

/// The text report: the plan's outcome, matrices (or histograms for many hosts), the per-host
/// summary, fabric-wide findings, suspects and the verdict.
pub fn fabric_text(r: &FabricReport, style: Style) -> String {
    let s = &r.settings;
    let mut out = String::new();
    let scheduled: Vec<&PairResult> = r.pairs.iter().filter(|p| !p.retested).collect();
    let _ = writeln!(
        out,
        "fabric: {} hosts, {} pairs in {} rounds ({}), {:.1} s",
        r.hosts.len(),
        scheduled.len(),
        r.rounds,
        s.pattern,
        r.duration_s
    );
    let spread =
        |v: Option<f64>| v.map_or(String::new(), |v| format!(", noise {:.1} %", 100.0 * v));
    let _ = writeln!(
        out,
        "judged against: the median of the hosts' medians (bandwidth {} Gb/s{}, latency {} us{}); \
         slow below {} x, high above {} x, and beyond the noise; error counters {}",
        fmt_opt(r.median_bw_gbps, 3),
        spread(r.bw_spread),
        fmt_opt(r.median_lat_us, 1),
        spread(r.lat_spread),
        s.min_bw_ratio,
        s.max_lat_ratio,
        match (s.counter_check, s.max_error_delta) {
            (false, _) => "not judged (--no-counter-check)".to_string(),
            (true, Some(n)) => format!("above +{n} (--max-error-delta)"),
            (true, None) => "above the run's own fence".to_string(),
        }
    );
    if (s.tclass, s.sl) != (0, 0) {
        let _ = writeln!(
            out,
            "settings: {}",
            super::qos_text(Some(s.tclass), Some(s.sl))
        );
    }
    let tested = |t: &str| s.tests.iter().any(|x| x == t);
    let matrices = r.hosts.len() <= MATRIX_MAX_HOSTS;
    if tested("bw") {
        if matrices {
            let _ = writeln!(
                out,
                "\nbandwidth, Gb/s (row host sending to column host; {} B x {}; * flagged)",
                s.bw_size, s.bw_iterations,
            );
            out.push_str(&matrix(
                r,
                style,
                "from \\ to",
                |p, fwd| if fwd { p.bw_gbps } else { p.bw_gbps_reverse },
                3,
            ));
        } else if let Some(reference) = r.median_bw_gbps {
            let ratios: Vec<f64> = scheduled
                .iter()
                .flat_map(|p| [p.bw_gbps, p.bw_gbps_reverse])
                .flatten()
                .map(|v| v / reference)
                .collect();
            histogram(
                &mut out,
                &format!(
                    "bandwidth of {} directions over the reference ({} B x {}; matrices in --json, --csv)",
                    ratios.len(),
                    s.bw_size,
                    s.bw_iterations
                ),
                &ratios,
                &[0.5, 0.7, 0.8, 0.9, 0.95, 1.05, 1.1, 1.3],
            );
        }
    }
    if tested("lat") {
        if matrices {
            let _ = writeln!(
                out,
                "\nlatency, us (median half round trip; {} B x {}; * flagged)",
                s.lat_size, s.lat_iterations,
            );
            out.push_str(&matrix(r, style, "host", |p, _| p.lat_us, 1));
        } else if let Some(reference) = r.median_lat_us {
            let ratios: Vec<f64> = scheduled
                .iter()
                .filter_map(|p| p.lat_us)
                .map(|v| v / reference)
                .collect();
            histogram(
                &mut out,
                &format!("latency of {} pairs over the reference", ratios.len()),
                &ratios,
                &[0.8, 0.95, 1.05, 1.2, 1.5, 2.0, 5.0],
            );
        }
    }
    let mut t = style.table(&[
        "host",
        "pairs",
        "flagged",
        "median Gb/s",
        "x ref",
        "median us",
        "x ref",
    ]);
    for h in r.host_summary.iter().take(TEXT_MAX_ROWS) {
        t.add_row(vec![
            h.host.clone(),
            h.pairs.to_string(),
            h.flagged.to_string(),
            fmt_opt(h.median_bw_gbps, 3),
            fmt_opt(h.bw_ratio, 2),
            fmt_opt(h.median_lat_us, 1),
            fmt_opt(h.lat_ratio, 2),
        ]);
    }
    out.push_str("\nper host (lowest bandwidth first)\n");
    out.push_str(&finish(&t));
    if r.host_summary.len() > TEXT_MAX_ROWS {
        let _ = writeln!(
            out,
            "  ... and {} more hosts (all in --json, --csv)",
            r.host_summary.len() - TEXT_MAX_ROWS
        );
    }
    let flagged: Vec<&PairResult> = r.pairs.iter().filter(|p| p.flagged).collect();
    if !flagged.is_empty() {
        out.push_str("\nflagged pairs\n");
        for p in flagged.iter().take(TEXT_MAX_ROWS) {
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
        if flagged.len() > TEXT_MAX_ROWS {
            let _ = writeln!(
                out,
                "  ... and {} more (all in --json, --csv)",
                flagged.len() - TEXT_MAX_ROWS
            );
        }
    }
    if !r.findings.is_empty() {
        out.push_str("\nfabric-wide\n");
        for f in &r.findings {
            let _ = writeln!(
                out,
                "  [{}] {}{}",
                f.rule,
                f.text,
                if f.fails { "" } else { " (information)" }
            );
        }
    }
    for l in &r.limits {
        let _ = writeln!(out, "\nlimit: {l}");
    }
    if !r.suspect_notes.is_empty() {
        out.push_str("\nsuspects (each retested once against hosts that passed)\n");
        for n in &r.suspect_notes {
            let _ = writeln!(
                out,
                "  {} {} [{}]: {}{}; {}",
                n.kind,
                n.name,
                n.rule,
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
    let failing: Vec<&Finding> = r.findings.iter().filter(|f| f.fails).collect();
    let failed_pairs = scheduled.iter().filter(|p| p.error.is_some()).count();
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
    for g in &r.suspects.groups {
        parts.push(format!(
            "suspect group of {} hosts {} (a shared switch or uplink)",
            g.len(),
            g.join(", ")
        ));
    }
    for f in &failing {
        parts.push(format!("fabric-wide: {} on {} pairs", f.rule, f.pairs));
    }
    if failed_pairs > 0 && r.suspects.is_empty() && failing.is_empty() {
        parts.push(format!("{failed_pairs} pair(s) failed"));
    }
    if !r.missing.is_empty() {
        parts.push(format!("missing {}", r.missing.join(", ")));
    }
    let verdict = if parts.is_empty() {
        if r.pairs.iter().any(|p| p.flagged && !p.retested) || !r.suspect_notes.is_empty() {
            "verdict: no suspects (flagged pairs did not make a suspect, or cleared on retest)"
                .to_string()
        } else {
            "verdict: no suspects".to_string()
        }
    } else {
        format!("verdict: {}", parts.join("; "))
    };
    let _ = writeln!(out, "\n{verdict}");
    out
}

mod export;
pub use export::{fabric_csv, fabric_prometheus};

#[cfg(test)]
mod tests;
