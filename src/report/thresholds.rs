//! Health thresholds (`--expect-*`): which figure, at which sizes, and the verdict on each.

use super::perf::PerfReport;
use serde::{Deserialize, Serialize};

/// The figure a threshold bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// bw: the average bandwidth (`bw_avg_gbps`), at least the limit (Gb/s).
    BwAvg,
    /// bw: the message rate (`msg_rate_mpps`), at least the limit (Mpps).
    MsgRate,
    /// lat: the latency at this percentile (50, 90, 99, 99.9, 99.99), at most the limit (us).
    Latency(f64),
}

impl Metric {
    /// The report field the threshold reads (what `metric` says in JSON).
    pub fn field(self) -> &'static str {
        match self {
            Metric::BwAvg => "bw_avg_gbps",
            Metric::MsgRate => "msg_rate_mpps",
            Metric::Latency(p) if p >= 99.99 => "p9999_us",
            Metric::Latency(p) if p >= 99.9 => "p999_us",
            Metric::Latency(p) if p >= 99.0 => "p99_us",
            Metric::Latency(p) if p >= 90.0 => "p90_us",
            Metric::Latency(_) => "median_us",
        }
    }

    /// Whether a figure must be at least the limit (rates) or at most (latency).
    fn at_least(self) -> bool {
        !matches!(self, Metric::Latency(_))
    }
}

/// One threshold from the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub metric: Metric,
    /// In the unit of the metric's field (Gb/s, Mpps, us).
    pub limit: f64,
    /// The one size it applies to; None: every size run.
    pub size: Option<u32>,
}

/// The verdict on one threshold at one size (docs/json.md, `thresholds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdCheck {
    /// The report field compared (`bw_avg_gbps`, `msg_rate_mpps`, `median_us`, `p99_us`...).
    pub metric: String,
    pub size: u32,
    /// The limit, in the field's unit: a minimum for rates, a maximum for latencies.
    pub expected: f64,
    pub actual: f64,
    pub ok: bool,
}

/// Check every threshold at every size it applies to, in the order the sizes ran.
pub fn evaluate(r: &PerfReport, thresholds: &[Threshold]) -> Vec<ThresholdCheck> {
    let mut checks = Vec::new();
    for t in thresholds {
        let figures: Vec<(u32, f64)> = match t.metric {
            Metric::BwAvg => r.bw.iter().map(|b| (b.size, b.bw_avg_gbps)).collect(),
            Metric::MsgRate => r.bw.iter().map(|b| (b.size, b.msg_rate_mpps)).collect(),
            Metric::Latency(p) => r
                .lat
                .iter()
                .map(|l| {
                    let s = &l.latency;
                    let v = match Metric::Latency(p).field() {
                        "p9999_us" => s.p9999_us,
                        "p999_us" => s.p999_us,
                        "p99_us" => s.p99_us,
                        "p90_us" => s.p90_us,
                        _ => s.median_us,
                    };
                    (l.size, v)
                })
                .collect(),
        };
        for (size, actual) in figures {
            if t.size.is_some_and(|s| s != size) {
                continue;
            }
            let ok = if t.metric.at_least() {
                actual >= t.limit
            } else {
                actual <= t.limit
            };
            checks.push(ThresholdCheck {
                metric: t.metric.field().into(),
                size,
                expected: t.limit,
                actual,
                ok,
            });
        }
    }
    checks
}

fn unit(metric: &str) -> &'static str {
    match metric {
        "bw_avg_gbps" => "Gb/s",
        "msg_rate_mpps" => "Mpps",
        _ => "us",
    }
}

fn rates(metric: &str) -> bool {
    matches!(metric, "bw_avg_gbps" | "msg_rate_mpps")
}

/// The first failed check as one line for stderr (with how many failed in all), or None.
pub fn shortfall(checks: &[ThresholdCheck]) -> Option<String> {
    let failed: Vec<&ThresholdCheck> = checks.iter().filter(|c| !c.ok).collect();
    let c = failed.first()?;
    let u = unit(&c.metric);
    let gap = (c.actual - c.expected).abs();
    let pct = gap / c.expected * 100.0;
    let mut line = match c.metric.as_str() {
        "bw_avg_gbps" => format!(
            "bandwidth threshold not met: {} B averaged {:.2} {u}, expected at least {:.2} {u} \
             ({gap:.2} {u} or {pct:.0}% short)",
            c.size, c.actual, c.expected
        ),
        "msg_rate_mpps" => format!(
            "message rate threshold not met: {} B ran at {:.6} {u}, expected at least {:.6} {u} \
             ({pct:.0}% short)",
            c.size, c.actual, c.expected
        ),
        field => {
            let name = match field {
                "p90_us" => "p90",
                "p99_us" => "p99",
                "p999_us" => "p99.9",
                "p9999_us" => "p99.99",
                _ => "median",
            };
            format!(
                "latency threshold not met: {} B {name} {:.2} {u}, expected at most {:.2} {u} \
                 ({gap:.2} {u} or {pct:.0}% over)",
                c.size, c.actual, c.expected
            )
        }
    };
    if failed.len() > 1 {
        line.push_str(&format!(
            "; {} of {} checks not met",
            failed.len(),
            checks.len()
        ));
    }
    Some(line)
}

/// The verdicts in text, one line per threshold: what was checked, at which sizes, the result.
pub fn text(r: &PerfReport) -> String {
    let checks = &r.thresholds;
    let sizes_run = r.bw.len().max(r.lat.len());
    let mut out = String::new();
    let mut metrics: Vec<(&str, f64)> = Vec::new();
    for c in checks {
        if !metrics
            .iter()
            .any(|(m, e)| *m == c.metric && *e == c.expected)
        {
            metrics.push((&c.metric, c.expected));
        }
    }
    for (metric, expected) in &metrics {
        let mine: Vec<&ThresholdCheck> = checks
            .iter()
            .filter(|c| c.metric == *metric && c.expected == *expected)
            .collect();
        let u = unit(metric);
        let op = if rates(metric) { ">=" } else { "<=" };
        let scope = if mine.len() == sizes_run {
            format!(
                "at every size run ({})",
                if mine.len() == 1 {
                    "1 size".to_string()
                } else {
                    format!("{} sizes", mine.len())
                }
            )
        } else {
            format!("at {} B only", mine.first().map_or(0, |c| c.size))
        };
        let bad: Vec<String> = mine
            .iter()
            .filter(|c| !c.ok)
            .map(|c| format!("{} B ({:.2})", c.size, c.actual))
            .collect();
        let verdict = if bad.is_empty() {
            "met".to_string()
        } else {
            format!("NOT MET at {}", bad.join(", "))
        };
        out.push_str(&format!(
            "  threshold  {metric} {op} {expected:.2} {u} {scope}: {verdict}\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(metric: &str, size: u32, expected: f64, actual: f64, ok: bool) -> ThresholdCheck {
        ThresholdCheck {
            metric: metric.into(),
            size,
            expected,
            actual,
            ok,
        }
    }

    /// A bw report of these sizes, each averaging `size / 1000` Gb/s at 1 Mpps, and a lat
    /// report's entries with a median of `size` us.
    fn sample(sizes: &[u32]) -> PerfReport {
        let ep = serde_json::json!({"device": "rxe0", "port": 1, "link_layer": "Ethernet",
            "lid": 0, "qpn": 17, "psn": 1, "gid": "::ffff:10.0.0.1", "gid_index": 1,
            "gid_type": null, "netdev": null, "active_mtu": 1024, "qkey": 0});
        let bw: Vec<_> = sizes
            .iter()
            .map(|&s| {
                serde_json::json!({"size": s, "iterations": 10,
            "bw_peak_gbps": 1.0, "bw_avg_gbps": s as f64 / 1000.0, "msg_rate_mpps": 1.0,
            "elapsed_s": 1.0})
            })
            .collect();
        let lat: Vec<_> = sizes
            .iter()
            .map(|&s| {
                serde_json::json!({"size": s, "iterations": 10,
            "samples": 10, "min_us": 1.0, "median_us": s as f64, "avg_us": 1.0, "stdev_us": 0.0,
            "p90_us": 1.0, "p99_us": 1.0, "p999_us": 1.0, "p9999_us": 1.0, "max_us": 1.0})
            })
            .collect();
        serde_json::from_value(serde_json::json!({"test": "bw", "op": "write",
            "transport": "RC", "qps": 1, "tx_depth": 1, "cq_mod": 1, "inline": 0,
            "bidirectional": false, "duration_s": null, "path_mtu": 1024, "local": ep,
            "remote": ep, "bw": bw, "lat": lat}))
        .unwrap()
    }

    #[test]
    fn every_size_or_the_one_named() {
        let r = sample(&[2000, 4000]);
        let all = Threshold {
            metric: Metric::BwAvg,
            limit: 3.0,
            size: None,
        };
        let checks = evaluate(&r, &[all]);
        assert_eq!(checks.len(), 2);
        assert_eq!((checks[0].size, checks[0].ok), (2000, false));
        assert_eq!(
            (checks[1].size, checks[1].ok, checks[1].actual),
            (4000, true, 4.0)
        );
        let one = Threshold {
            size: Some(4000),
            ..all
        };
        assert_eq!(evaluate(&r, &[one]).len(), 1);
        let lat = Threshold {
            metric: Metric::Latency(50.0),
            limit: 3000.0,
            size: None,
        };
        let checks = evaluate(&r, &[lat]);
        assert_eq!(checks[0].metric, "median_us");
        assert!(
            checks[0].ok && !checks[1].ok,
            "latency is a maximum: {checks:?}"
        );
    }

    #[test]
    fn field_names_follow_the_percentile() {
        assert_eq!(Metric::Latency(50.0).field(), "median_us");
        assert_eq!(Metric::Latency(99.0).field(), "p99_us");
        assert_eq!(Metric::Latency(99.9).field(), "p999_us");
        assert_eq!(Metric::Latency(99.99).field(), "p9999_us");
        assert_eq!(Metric::BwAvg.field(), "bw_avg_gbps");
    }

    #[test]
    fn shortfall_names_the_first_failure_and_counts_the_rest() {
        let checks = [
            check("bw_avg_gbps", 4096, 90.0, 95.0, true),
            check("bw_avg_gbps", 65536, 90.0, 45.0, false),
            check("bw_avg_gbps", 1 << 20, 90.0, 30.0, false),
        ];
        let line = shortfall(&checks).unwrap();
        assert!(
            line.starts_with("bandwidth threshold not met: 65536 B"),
            "{line}"
        );
        assert!(
            line.contains("50% short") && line.contains("2 of 3"),
            "{line}"
        );
        assert_eq!(shortfall(&checks[..1]), None);
        let lat = [check("p999_us", 2, 5.0, 7.5, false)];
        let line = shortfall(&lat).unwrap();
        assert!(
            line.contains("p99.9 7.50 us") && line.contains("50% over"),
            "{line}"
        );
    }

    #[test]
    fn text_says_which_sizes() {
        let mut r = sample(&[4096, 65536]);
        r.thresholds = vec![
            check("bw_avg_gbps", 4096, 1.0, 2.0, true),
            check("bw_avg_gbps", 65536, 1.0, 0.5, false),
            check("msg_rate_mpps", 4096, 0.5, 3.0, true),
        ];
        let t = text(&r);
        assert!(
            t.contains("bw_avg_gbps >= 1.00 Gb/s at every size run (2 sizes)"),
            "{t}"
        );
        assert!(t.contains("NOT MET at 65536 B (0.50)"), "{t}");
        assert!(
            t.contains("msg_rate_mpps >= 0.50 Mpps at 4096 B only: met"),
            "{t}"
        );
    }
}
