//! The Prometheus text exposition format (version 0.0.4), written once for every report that
//! exports to it (`check --format prometheus`, `fabric --prometheus`): gauge families with HELP
//! and TYPE, label values escaped, NaN and infinities spelled as the format wants; then each
//! report kind's metrics.

use crate::report::check::{Check, CheckName, CheckReport};
use crate::report::fabric::config::ConfigFinding;
use crate::report::fabric::{FabricReport, PairResult};
use std::fmt::Write as _;

/// A label value with `\`, `"` and newlines escaped.
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value as the format writes it (`NaN`, `+Inf`, `-Inf` for the non-finite).
pub fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

/// One exposition: gauge families in the order written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// A gauge family, its HELP and TYPE even when it has no sample (the family exists, with
    /// nothing to report now: no suspect link, say). Each sample: its labels (`a="x",b="y"`,
    /// empty for none) and its value.
    pub fn gauge(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (String, f64)>,
    ) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, v) in samples {
            if labels.is_empty() {
                let _ = writeln!(self.out, "{name} {}", number(v));
            } else {
                let _ = writeln!(self.out, "{name}{{{labels}}} {}", number(v));
            }
        }
    }

    /// A gauge family only when it has samples (a measurement no check of this run made).
    pub fn gauge_if_any(&mut self, name: &str, help: &str, samples: Vec<(String, f64)>) {
        if !samples.is_empty() {
            self.gauge(name, help, samples);
        }
    }

    pub fn finish(self) -> String {
        self.out
    }
}

// ---- rdmadiag check ----

/// The metric family a check's measured value goes to: (name, help), None for checks that
/// measure nothing numeric.
fn check_family(name: CheckName) -> Option<(&'static str, &'static str)> {
    Some(match name {
        CheckName::State => (
            "rdmadiag_port_state",
            "Logical port state as sysfs numbers it (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE).",
        ),
        CheckName::PhysState => (
            "rdmadiag_port_physical_state",
            "Physical port state as sysfs numbers it (2 POLLING, 3 DISABLED, 5 LINK_UP).",
        ),
        CheckName::Rate => (
            "rdmadiag_port_rate_bytes_per_second",
            "Port rate, lanes times per-lane signalling rate, in bytes per second.",
        ),
        CheckName::Width => ("rdmadiag_port_width_lanes", "Port width in lanes."),
        CheckName::Mtu => (
            "rdmadiag_port_mtu_bytes",
            "MTU checked: the netdev MTU on RoCE, the active IB MTU on InfiniBand.",
        ),
        CheckName::ErrorCounters => (
            "rdmadiag_port_error_counters_increase",
            "Sum of the rises of the port's error counters over the check's interval.",
        ),
        CheckName::LoopbackBw => (
            "rdmadiag_loopback_bandwidth_bytes_per_second",
            "RDMA WRITE bandwidth of a short loopback test on the port, bytes per second.",
        ),
        CheckName::LoopbackLat => (
            "rdmadiag_loopback_latency_seconds",
            "Median RDMA WRITE latency (half round trip) of a short loopback test, seconds.",
        ),
        CheckName::PeerBw => (
            "rdmadiag_peer_bandwidth_bytes_per_second",
            "RDMA WRITE bandwidth of a short test against the peer server, bytes per second.",
        ),
        CheckName::PeerLat => (
            "rdmadiag_peer_latency_seconds",
            "Median RDMA WRITE latency (half round trip) to the peer server, seconds.",
        ),
        CheckName::Pcie => (
            "rdmadiag_pcie_link_bytes_per_second",
            "Data bandwidth per direction of the slowest PCIe link from the device to the root \
             port (lanes times transfer rate times line encoding), bytes per second.",
        ),
        CheckName::Numa => (
            "rdmadiag_device_numa_node",
            "NUMA node of the device's PCI function.",
        ),
        CheckName::Present | CheckName::LinkLayer | CheckName::Gid => return None,
    })
}

fn port_labels(c: &Check) -> String {
    let mut l = format!(
        "device=\"{}\",port=\"{}\"",
        label(c.device.as_deref().unwrap_or("")),
        c.port.map(|p| p.to_string()).unwrap_or_default()
    );
    if let Some(p) = &c.peer {
        write!(l, ",peer=\"{}\"", label(p)).unwrap();
    }
    l
}

/// The Prometheus text exposition format (version 0.0.4), base units, every family with HELP
/// and TYPE: one `rdmadiag_check_ok` per check, the measured values, and the run's verdict,
/// duration and time (`unix_time_s`, for alerts on a stale file). A check that did not apply
/// has no `rdmadiag_check_ok` (it neither passed nor failed): the run counts it.
pub fn check(r: &CheckReport, unix_time_s: f64) -> String {
    let mut out = Exposition::default();
    let ok: Vec<(String, f64)> = r
        .checks
        .iter()
        .filter(|c| !c.skipped)
        .map(|c| {
            (
                format!("check=\"{}\",{}", c.name, port_labels(c)),
                if c.ok { 1.0 } else { 0.0 },
            )
        })
        .collect();
    out.gauge_if_any(
        "rdmadiag_check_ok",
        "1 when the check passed, 0 when it failed.",
        ok,
    );
    // Families in a fixed order, each once, with every check that measured into it.
    let mut names: Vec<CheckName> = Vec::new();
    for c in &r.checks {
        if !names.contains(&c.name) {
            names.push(c.name);
        }
    }
    for n in names {
        let Some((metric, help)) = check_family(n) else {
            continue;
        };
        let samples: Vec<(String, f64)> = r
            .checks
            .iter()
            .filter(|c| c.name == n)
            .filter_map(|c| c.value.map(|v| (port_labels(c), v)))
            .collect();
        out.gauge_if_any(metric, help, samples);
    }
    let whole = |v: f64| [(String::new(), v)];
    out.gauge(
        "rdmadiag_check_passed",
        "1 when every check of the run passed.",
        whole(if r.passed { 1.0 } else { 0.0 }),
    );
    out.gauge(
        "rdmadiag_check_failed_checks",
        "How many checks of the run failed.",
        whole(r.failed as f64),
    );
    out.gauge(
        "rdmadiag_check_skipped_checks",
        "How many checks of the run did not apply (a PCIe rule on a device with no PCI parent).",
        whole(r.skipped as f64),
    );
    out.gauge(
        "rdmadiag_check_duration_seconds",
        "Wall time of the whole check run.",
        whole(r.elapsed_s),
    );
    out.gauge(
        "rdmadiag_check_timestamp_seconds",
        "When the check ran, seconds since the Unix epoch.",
        whole(unix_time_s.floor()),
    );
    out.finish()
}

// ---- rdmadiag fabric ----

/// Prometheus text exposition format: per-pair gauges in base units (bytes per second,
/// seconds, as the check's metrics and promtool's lint want) and the suspects.
pub fn fabric(r: &FabricReport) -> String {
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
        "rdmadiag_fabric_config_findings",
        "Configuration audit findings by field: the hosts each names (severity failure fails \
         the run).",
        r.config
            .iter()
            .map(|f| {
                let hosts = f.groups.iter().map(|g| g.hosts.len()).sum::<usize>();
                (config_labels(f), hosts as f64)
            })
            .collect(),
    );
    gauge(
        "rdmadiag_fabric_config_host_differs",
        "1 for each host a configuration finding names, with its value.",
        r.config
            .iter()
            .flat_map(|f| {
                f.groups.iter().flat_map(move |g| {
                    g.hosts.iter().map(move |h| {
                        let l = format!(
                            "host=\"{}\",{},value=\"{}\"",
                            label(h),
                            config_labels(f),
                            label(&g.value)
                        );
                        (l, 1.0)
                    })
                })
            })
            .collect(),
    );
    gauge(
        "rdmadiag_fabric_missing_ranks",
        "Ranks that did not join or left mid-run.",
        vec![(String::new(), r.missing.len() as f64)],
    );
    out.finish()
}

/// A configuration finding's labels: `field="mtu",kind="differs",severity="failure"`.
fn config_labels(f: &ConfigFinding) -> String {
    format!(
        "field=\"{}\",kind=\"{}\",severity=\"{}\"",
        f.field,
        f.kind.name(),
        f.severity.name()
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `promtool check metrics` on `text`: its complaints, empty when it has none (promtool
    /// comes with Debian's prometheus package, which scripts/setup installs).
    pub(crate) fn promtool_complaints(text: &str) -> String {
        use std::io::Write as _;
        let mut p = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool (Debian package prometheus; scripts/setup installs it)");
        p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let o = p.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if o.status.success() {
            said
        } else {
            format!("exit {:?}: {said}", o.status.code())
        }
    }

    #[test]
    fn families_labels_and_special_values() {
        let mut e = Exposition::default();
        e.gauge(
            "x_seconds",
            "A figure.",
            [
                (format!("host=\"{}\"", label("a\"b\\c\nd")), f64::NAN),
                (String::new(), f64::INFINITY),
                ("k=\"v\"".into(), -f64::INFINITY),
                ("k=\"w\"".into(), 1.5),
            ],
        );
        e.gauge_if_any("y", "Nothing.", vec![]);
        e.gauge("z", "Empty.", []);
        assert_eq!(
            e.finish(),
            "# HELP x_seconds A figure.\n# TYPE x_seconds gauge\n\
             x_seconds{host=\"a\\\"b\\\\c\\nd\"} NaN\nx_seconds +Inf\n\
             x_seconds{k=\"v\"} -Inf\nx_seconds{k=\"w\"} 1.5\n\
             # HELP z Empty.\n# TYPE z gauge\n"
        );
    }
}
