//! The error counters over an interval: which rose on each port, and by how much in all.

use super::targets::label;
use super::{Deadline, ErrorWatch};
use crate::counters::{self, CounterDeltas, Snapshot};
use crate::exit::STOP;
use crate::report::check::{Check, CheckName};
use crate::report::inventory::PortInfo;
use crate::sysfs;
use anyhow::Result;

/// Read every port's counters, wait the interval (cut to what the deadline leaves), read them
/// again: one `error_counters` verdict per port.
pub fn watch(ports: &[PortInfo], w: ErrorWatch, deadline: &Deadline) -> Result<Vec<Check>> {
    let root = sysfs::class_root();
    let before: Vec<Snapshot> = ports
        .iter()
        .map(|p| Snapshot::read(&root, &p.device, p.port))
        .collect();
    let wait = w.interval.min(deadline.left());
    // A stop that no signal asked for is the watchdog at the deadline: the interval was cut.
    let stopped = counters::wait_interval(wait, &STOP);
    if stopped {
        super::stopped_by_signal()?;
    }
    let cut = stopped || wait < w.interval;
    Ok(ports
        .iter()
        .zip(&before)
        .map(|(p, then)| {
            let d = CounterDeltas::between(then, &Snapshot::read(&root, &p.device, p.port));
            verdict(p, &d, w, cut)
        })
        .collect())
}

/// The verdict on one port's deltas: its error counters may have risen by `max_delta` in all.
fn verdict(p: &PortInfo, d: &CounterDeltas, w: ErrorWatch, cut: bool) -> Check {
    let over = format!(
        "over {:.1} s{}",
        d.elapsed_s,
        if cut { ", cut short by --timeout" } else { "" }
    );
    let rose: Vec<String> = d
        .errors()
        .map(|c| {
            let mut s = format!("{} +{}", c.name, c.delta);
            if c.reset {
                s.push_str(" (reset)");
            }
            s
        })
        .collect();
    let read_any = d.deltas.iter().any(|c| c.error);
    let actual = if rose.is_empty() && !read_any {
        format!("no error counters to read {over}")
    } else if rose.is_empty() {
        format!("none rose {over}")
    } else {
        format!("{} in all: {} {over}", d.error_delta, rose.join(", "))
    };
    Check {
        name: CheckName::ErrorCounters,
        target: label(&p.device, p.port),
        device: Some(p.device.clone()),
        port: Some(p.port),
        expected: format!(
            "a rise of at most {} over {}",
            w.max_delta,
            humantime::format_duration(w.interval)
        ),
        actual,
        ok: d.error_delta <= w.max_delta,
        skipped: false,
        value: Some(d.error_delta as f64),
        settings: None,
        peer: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{CounterDelta, Group};
    use std::time::Duration;

    fn deltas(rises: &[(&str, u64)]) -> CounterDeltas {
        let deltas: Vec<CounterDelta> = rises
            .iter()
            .map(|&(name, delta)| CounterDelta {
                group: Group::HwCounters,
                name: name.into(),
                before: 10,
                after: 10 + delta,
                delta,
                reset: false,
                error: crate::counters::is_error_counter(name),
                rate_per_s: delta as f64 / 3.0,
            })
            .collect();
        CounterDeltas {
            device: "rxe0".into(),
            port: 1,
            elapsed_s: 3.0,
            error_delta: deltas.iter().filter(|d| d.error).map(|d| d.delta).sum(),
            deltas,
        }
    }

    fn port() -> PortInfo {
        crate::report::inventory::tests::port()
    }

    #[test]
    fn the_counters_that_rose_are_named() {
        let w = ErrorWatch {
            interval: Duration::from_secs(3),
            max_delta: 0,
        };
        let c = verdict(
            &port(),
            &deltas(&[
                ("sent_pkts", 900),
                ("retry_exceeded_err", 2),
                ("send_err", 0),
            ]),
            w,
            false,
        );
        assert!(!c.ok);
        assert_eq!(c.value, Some(2.0));
        assert_eq!(c.actual, "2 in all: retry_exceeded_err +2 over 3.0 s");
        assert_eq!(c.expected, "a rise of at most 0 over 3s");
        let quiet = verdict(
            &port(),
            &deltas(&[("sent_pkts", 9), ("send_err", 0)]),
            w,
            false,
        );
        assert!(
            quiet.ok && quiet.actual == "none rose over 3.0 s",
            "{quiet:?}"
        );
        let allowed = verdict(
            &port(),
            &deltas(&[("retry_exceeded_err", 2)]),
            ErrorWatch { max_delta: 2, ..w },
            true,
        );
        assert!(
            allowed.ok && allowed.actual.contains("cut short"),
            "{allowed:?}"
        );
        let none = verdict(&port(), &deltas(&[("sent_pkts", 1)]), w, false);
        assert!(
            none.ok && none.actual.starts_with("no error counters"),
            "{none:?}"
        );
    }
}
