//! What `rdmadiag check` found, and its table; its NHC lines and Prometheus metrics are in
//! report/export/ with every other report's.

use super::{Style, finish};
use comfy_table::Cell;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// What one check looks at (its `name` in JSON and its `check` label in Prometheus).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckName {
    /// The device (or port) named with `-d` exists; also "this host has an RDMA device".
    Present,
    /// The port's logical state (ACTIVE unless `--expect-state`).
    State,
    /// The port's physical state (LINK_UP whenever ACTIVE is expected).
    PhysState,
    /// The port's rate, lanes × per-lane speed (`--expect-rate`).
    Rate,
    /// The port's width in lanes (`--expect-width`).
    Width,
    /// The netdev MTU on RoCE, the active IB MTU on InfiniBand (`--expect-mtu`).
    Mtu,
    /// `--expect-link-layer`.
    LinkLayer,
    /// A usable RoCE v2 GID (`--expect-gid`).
    Gid,
    /// The device's PCIe link and the links on its path to the root port (`--pcie`,
    /// `--expect-pcie`).
    Pcie,
    /// The device's NUMA node (`--expect-numa`, `--cpus`).
    Numa,
    /// The error counters' rise over `--interval` (`--max-error-delta`).
    ErrorCounters,
    /// Loopback RDMA WRITE bandwidth on the port (`--loopback-bw`).
    LoopbackBw,
    /// Loopback RDMA WRITE latency on the port (`--loopback-lat`).
    LoopbackLat,
    /// RDMA WRITE bandwidth to `--peer` (`--peer-bw`).
    PeerBw,
    /// RDMA WRITE latency to `--peer` (`--peer-lat`).
    PeerLat,
}

impl CheckName {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::Present => "present",
            CheckName::State => "state",
            CheckName::PhysState => "phys_state",
            CheckName::Rate => "rate",
            CheckName::Width => "width",
            CheckName::Mtu => "mtu",
            CheckName::LinkLayer => "link_layer",
            CheckName::Gid => "gid",
            CheckName::Pcie => "pcie",
            CheckName::Numa => "numa",
            CheckName::ErrorCounters => "error_counters",
            CheckName::LoopbackBw => "loopback_bw",
            CheckName::LoopbackLat => "loopback_lat",
            CheckName::PeerBw => "peer_bw",
            CheckName::PeerLat => "peer_lat",
        }
    }
}

impl std::fmt::Display for CheckName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One verdict: what was expected of a target, what it had, and whether that will do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: CheckName,
    /// `DEV:PORT`, or `DEV` for a device that is missing, `*` for "any RDMA device".
    pub target: String,
    pub device: Option<String>,
    pub port: Option<u8>,
    /// What would pass, in words with units (`ACTIVE`, `100 Gb/s`, `at least 90 Gb/s`).
    pub expected: String,
    /// What was found, in the same words.
    pub actual: String,
    pub ok: bool,
    /// The rule does not apply to this target (`pcie` on a device with no PCI parent): `ok`,
    /// but not a pass; `actual` says why.
    #[serde(default)]
    pub skipped: bool,
    /// The figure measured, in base units: bytes per second (rates, bandwidths), seconds
    /// (latencies), a count (error counters), lanes (width), bytes (MTU), the sysfs number of
    /// a state (4 ACTIVE, 5 LINK_UP); None when nothing was measured.
    pub value: Option<f64>,
    /// Active tests: how the test was run (operation, size, QPs, how long).
    pub settings: Option<String>,
    /// Peer tests: the server tested against (`HOST:PORT`).
    pub peer: Option<String>,
}

impl Check {
    /// A passive rule's verdict on `device` (`port`: None for a rule on the whole device):
    /// nothing measured, no settings, no peer.
    pub fn judged(
        name: CheckName,
        (device, port): (&str, Option<u8>),
        expected: String,
        actual: String,
        ok: bool,
    ) -> Check {
        Check {
            name,
            target: port.map_or_else(|| device.to_string(), |p| format!("{device}:{p}")),
            device: Some(device.to_string()),
            port,
            expected,
            actual,
            ok,
            skipped: false,
            value: None,
            settings: None,
            peer: None,
        }
    }
}

/// What `--slurm-drain` did to this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlurmAction {
    /// A check failed: the node was drained with an `rdmadiag:` reason.
    Drain,
    /// Every check passed and rdmadiag had drained the node: it was resumed.
    Resume,
    /// Nothing to do: passing and not drained by rdmadiag, or drained by someone else (whose
    /// reason is never replaced).
    None,
}

/// `--slurm-drain`: the node, what was done and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlurmOutcome {
    /// `$SLURMD_NODENAME`.
    pub node: String,
    pub action: SlurmAction,
    /// The node's reason before the check (None: it had none).
    pub previous_reason: Option<String>,
    /// The reason rdmadiag set (with `drain`).
    pub reason: Option<String>,
    /// In words: what was done or why nothing was.
    pub detail: String,
}

/// The report of `rdmadiag check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub checks: Vec<Check>,
    /// Every check passed.
    pub passed: bool,
    /// How many checks failed.
    pub failed: usize,
    /// How many checks did not apply (not failed, not passed).
    #[serde(default)]
    pub skipped: usize,
    /// Wall time of the whole run.
    pub elapsed_s: f64,
    /// The `--timeout` that bounded it.
    pub timeout_s: f64,
    /// With `--slurm-drain`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmOutcome>,
}

impl CheckReport {
    /// A report of `checks`, with the verdict counted.
    pub fn new(checks: Vec<Check>, elapsed_s: f64, timeout_s: f64) -> CheckReport {
        let failed = checks.iter().filter(|c| !c.ok).count();
        let skipped = checks.iter().filter(|c| c.skipped).count();
        CheckReport {
            checks,
            passed: failed == 0,
            failed,
            skipped,
            elapsed_s,
            timeout_s,
            slurm: None,
        }
    }

    /// The failed checks, in the order run.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.ok)
    }
}

/// A failed check in one phrase: "rate 2.5 Gb/s, expected 100 Gb/s", "no such device".
pub fn what_failed(c: &Check) -> String {
    match c.name {
        // "no such device (devices: mlx5_1)" says it all, as do the sentences of the
        // device's place ("PCIe link x8 at 16.0 GT/s (Gen4) is narrower than its maximum x16").
        CheckName::Present | CheckName::Pcie | CheckName::Numa => c.actual.clone(),
        _ => format!("{} {}, expected {}", c.name, c.actual, c.expected),
    }
}

/// The first failure as `TARGET: WHAT` (the Slurm reason and the line on stderr start so), with
/// how many more failed.
pub fn first_failure(r: &CheckReport) -> Option<String> {
    let first = r.failures().next()?;
    let mut line = format!("{}: {}", first.target, what_failed(first));
    if r.failed > 1 {
        write!(line, " (and {} more)", r.failed - 1).unwrap();
    }
    Some(line)
}

/// The table: check, target, expected, actual, verdict; then the active tests' settings and a
/// summary line.
pub fn text(r: &CheckReport, style: Style) -> String {
    let mut t = style.table(&["CHECK", "TARGET", "EXPECTED", "ACTUAL", "VERDICT"]);
    for c in &r.checks {
        t.add_row(vec![
            Cell::new(c.name),
            Cell::new(&c.target),
            Cell::new(&c.expected),
            Cell::new(&c.actual),
            if c.skipped {
                Cell::new("skip")
            } else if c.ok {
                Cell::new("ok")
            } else {
                style.alert("FAIL".into())
            },
        ]);
    }
    let mut out = finish(&t);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for c in &r.checks {
        if let Some(s) = &c.settings
            && !seen.contains(&(c.name.as_str(), s.as_str()))
        {
            seen.push((c.name.as_str(), s.as_str()));
            writeln!(out, "  {}: {s}", c.name).unwrap();
        }
    }
    let mut verdict = if r.passed {
        "all passed".to_string()
    } else {
        format!("{} FAILED", r.failed)
    };
    if r.skipped > 0 {
        write!(verdict, ", {} skipped (did not apply)", r.skipped).unwrap();
    }
    writeln!(
        out,
        "  {} checks in {:.2} s (--timeout {}): {verdict}",
        r.checks.len(),
        r.elapsed_s,
        seconds_text(r.timeout_s)
    )
    .unwrap();
    if let Some(s) = &r.slurm {
        writeln!(out, "  slurm: node {}: {}", s.node, s.detail).unwrap();
    }
    out
}

fn seconds_text(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::export;

    fn check(name: CheckName, target: &str, ok: bool, value: Option<f64>) -> Check {
        let (device, port) = match target.split_once(':') {
            Some((d, p)) => (Some(d.to_string()), p.parse().ok()),
            None => (Some(target.to_string()), None),
        };
        Check {
            name,
            target: target.into(),
            device,
            port,
            expected: "100 Gb/s".into(),
            actual: "2.5 Gb/s".into(),
            ok,
            skipped: false,
            value,
            settings: None,
            peer: None,
        }
    }

    pub(crate) fn sample() -> CheckReport {
        CheckReport::new(
            vec![
                check(CheckName::State, "rxe0:1", true, Some(4.0)),
                check(CheckName::Rate, "rxe0:1", false, Some(2.5e9 / 8.0)),
                check(CheckName::Gid, "rxe0:1", true, None),
                Check {
                    settings: Some("RDMA WRITE 64 KiB, 1 QP, for 1 s".into()),
                    expected: "at least 90 Gb/s".into(),
                    actual: "0.21 Gb/s".into(),
                    ..check(CheckName::LoopbackBw, "rxe0:1", false, Some(2.6e7))
                },
            ],
            1.5,
            30.0,
        )
    }

    #[test]
    fn nhc_prints_nothing_on_success_and_a_line_per_failure() {
        let r = sample();
        assert_eq!(
            export::nhc::check(&r),
            "ERROR: rdmadiag: rxe0:1: rate 2.5 Gb/s, expected 100 Gb/s\n\
             ERROR: rdmadiag: rxe0:1: loopback_bw 0.21 Gb/s, expected at least 90 Gb/s\n"
        );
        assert_eq!(
            first_failure(&r).unwrap(),
            "rxe0:1: rate 2.5 Gb/s, expected 100 Gb/s (and 1 more)"
        );
        let good = CheckReport::new(
            vec![check(CheckName::State, "rxe0:1", true, None)],
            0.1,
            30.0,
        );
        assert!(
            good.passed && export::nhc::check(&good).is_empty() && first_failure(&good).is_none()
        );
    }

    #[test]
    fn text_has_a_row_per_check_the_settings_and_the_verdict() {
        let t = text(&sample(), Style::plain());
        let header = t.lines().next().unwrap();
        for h in ["CHECK", "TARGET", "EXPECTED", "ACTUAL", "VERDICT"] {
            assert!(header.contains(h), "{t}");
        }
        let rate = t.lines().find(|l| l.contains("rate")).unwrap();
        assert!(rate.contains("2.5 Gb/s") && rate.ends_with("FAIL"), "{t}");
        assert!(
            t.contains("loopback_bw: RDMA WRITE 64 KiB, 1 QP, for 1 s"),
            "{t}"
        );
        assert!(
            t.contains("4 checks in 1.50 s (--timeout 30s): 2 FAILED"),
            "{t}"
        );
    }

    #[test]
    fn prometheus_has_help_type_and_one_ok_per_check() {
        let p = export::prometheus::check(&sample(), 1_800_000_000.5);
        assert!(p.contains("# TYPE rdmadiag_check_ok gauge"), "{p}");
        assert!(
            p.contains("rdmadiag_check_ok{check=\"rate\",device=\"rxe0\",port=\"1\"} 0\n"),
            "{p}"
        );
        assert!(
            p.contains("rdmadiag_check_ok{check=\"gid\",device=\"rxe0\",port=\"1\"} 1\n"),
            "{p}"
        );
        assert!(
            p.contains(
                "rdmadiag_port_rate_bytes_per_second{device=\"rxe0\",port=\"1\"} 312500000\n"
            ),
            "{p}"
        );
        assert!(p.contains("rdmadiag_check_passed 0\n"), "{p}");
        assert!(
            p.contains("rdmadiag_check_timestamp_seconds 1800000000\n"),
            "{p}"
        );
        // Every sample's family has HELP and TYPE before it, once.
        let mut declared = Vec::new();
        for l in p.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(!declared.contains(&name.to_string()), "{name} twice");
                declared.push(name.to_string());
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().unwrap();
                assert_eq!(declared.last().map(String::as_str), Some(name), "{l}");
            }
        }
        assert_eq!(export::prometheus::label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let complaints = crate::report::export::prometheus::tests::promtool_complaints(&p);
        assert!(complaints.trim().is_empty(), "{complaints}\n{p}");
    }
}
