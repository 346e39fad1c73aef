//! Port counter changes as text: across a test (`--counters`) and over `ports --interval`.

use super::{Style, finish};
use crate::counters::{CounterDelta, CounterDeltas, Group};
use comfy_table::Cell;
use std::collections::BTreeMap;

/// The mark of an error counter that rose.
const ROSE: &str = "! error count rose";

fn rate(d: &CounterDelta) -> String {
    format!("{:.1}", d.rate_per_s)
}

fn delta(d: &CounterDelta) -> String {
    if d.reset {
        format!("{} (reset)", d.delta)
    } else {
        d.delta.to_string()
    }
}

/// Cells of a row, alerted when `alert`.
fn row(style: Style, alert: bool, cells: Vec<String>) -> Vec<Cell> {
    cells
        .into_iter()
        .map(|c| if alert { style.alert(c) } else { Cell::new(c) })
        .collect()
}

/// The line that says whether any error counter moved.
fn errors_line(d: &CounterDeltas) -> String {
    let watched = d.deltas.iter().filter(|x| x.error).count();
    let rose: Vec<String> = d
        .errors()
        .map(|e| format!("{} +{}", e.name, e.delta))
        .collect();
    if rose.is_empty() {
        format!("  error counters: none of the {watched} moved\n")
    } else {
        format!(
            "  ! error counters moved: {} ({} in total, of {watched} error counters)\n",
            rose.join(", "),
            d.error_delta
        )
    }
}

/// What changed on the test's port between the readings before and after the test: every
/// counter that moved, error counters marked, and whether any error counter moved.
pub fn test_counters_text(d: &CounterDeltas, style: Style) -> String {
    let mut out = format!(
        "  counters of {} port {} (this host), read before and after the test, {:.2} s apart:\n",
        d.device, d.port, d.elapsed_s
    );
    if d.deltas.is_empty() {
        out.push_str("  (no counters exposed by this port)\n");
        return out;
    }
    let moved: Vec<&CounterDelta> = d.moved().collect();
    if moved.is_empty() {
        out.push_str(&format!("  no counter moved ({} read)\n", d.deltas.len()));
    } else {
        let mut t = style.table(&[
            "COUNTER",
            "GROUP",
            "BEFORE",
            "AFTER",
            "DELTA",
            "PER SECOND",
            "",
        ]);
        for c in &moved {
            let mark = if c.error { ROSE } else { "" };
            t.add_row(row(
                style,
                c.error,
                vec![
                    c.name.clone(),
                    c.group.to_string(),
                    c.before.to_string(),
                    c.after.to_string(),
                    delta(c),
                    rate(c),
                    mark.to_string(),
                ],
            ));
        }
        out.push_str(&finish(&t));
        let still = d.deltas.len() - moved.len();
        if still > 0 {
            out.push_str(&format!(
                "  {still} other counters did not move (--json lists every counter)\n"
            ));
        }
    }
    out.push_str(&errors_line(d));
    out
}

/// `ports --counters --interval`: one group's counters with their value after the interval,
/// the change and the rate; error counters that rose are marked.
pub fn interval_table(
    title: &str,
    group: Group,
    values: &BTreeMap<String, u64>,
    d: &CounterDeltas,
    style: Style,
) -> String {
    if values.is_empty() {
        return format!("  ({title}: none exposed by this device)\n");
    }
    let mut t = style.table(&[&title.to_uppercase(), "VALUE", "DELTA", "PER SECOND", ""]);
    for (name, v) in values {
        let Some(c) = d.get(group, name) else {
            t.add_row(vec![
                Cell::new(name),
                Cell::new(v),
                Cell::new("-"),
                Cell::new("-"),
            ]);
            continue;
        };
        let rose = c.error && c.moved();
        let mark = match (rose, c.error && *v != 0) {
            (true, _) => ROSE,
            (false, true) => "error count, unchanged",
            _ => "",
        };
        t.add_row(row(
            style,
            rose,
            vec![
                name.clone(),
                v.to_string(),
                delta(c),
                rate(c),
                mark.to_string(),
            ],
        ));
    }
    finish(&t)
}

/// The line under a port's interval tables: how long the interval was, and its errors.
pub fn interval_summary(d: &CounterDeltas) -> String {
    format!(
        "  over {:.2} s between the two readings\n{}",
        d.elapsed_s,
        errors_line(d)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Snapshot;
    use std::time::{Duration, Instant};

    fn deltas() -> CounterDeltas {
        let t0 = Instant::now();
        let snap = |at, hw: &[(&str, u64)]| Snapshot {
            device: "rxe0".into(),
            port: 1,
            taken: at,
            counters: BTreeMap::new(),
            hw_counters: hw.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        };
        let before = snap(
            t0,
            &[
                ("sent_pkts", 10),
                ("rcvd_pkts", 900),
                ("retry_exceeded_err", 1),
                ("send_err", 4),
                ("ack_deferred", 0),
            ],
        );
        let after = snap(
            t0 + Duration::from_secs(2),
            &[
                ("sent_pkts", 410),
                ("rcvd_pkts", 30),
                ("retry_exceeded_err", 3),
                ("send_err", 4),
                ("ack_deferred", 0),
            ],
        );
        CounterDeltas::between(&before, &after)
    }

    fn line<'a>(out: &'a str, name: &str) -> &'a str {
        out.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{out}"))
    }

    #[test]
    fn a_test_shows_what_moved_and_marks_errors() {
        let out = test_counters_text(&deltas(), Style::plain());
        assert!(
            out.contains("rxe0 port 1") && out.contains("2.00 s apart"),
            "{out}"
        );
        let sent = line(&out, "sent_pkts");
        assert!(sent.contains("400") && sent.contains("200.0"), "{sent}");
        assert!(!sent.contains('!'), "{sent}");
        assert!(line(&out, "rcvd_pkts").contains("30 (reset)"), "{out}");
        assert!(line(&out, "retry_exceeded_err").contains(ROSE), "{out}");
        assert!(
            !out.contains("send_err ") && !out.contains("ack_deferred"),
            "{out}"
        );
        assert!(out.contains("2 other counters did not move"), "{out}");
        assert!(
            out.contains("! error counters moved: retry_exceeded_err +2 (2 in total, of 2 error"),
            "{out}"
        );
    }

    #[test]
    fn a_quiet_test_says_no_error_counter_moved() {
        let mut d = deltas();
        d.deltas.retain(|c| !c.error);
        d.error_delta = 0;
        let out = test_counters_text(&d, Style::plain());
        assert!(out.contains("error counters: none of the 0 moved"), "{out}");
        let mut d = deltas();
        for c in &mut d.deltas {
            (c.delta, c.reset) = (0, false);
        }
        let out = test_counters_text(&d, Style::plain());
        assert!(out.contains("no counter moved (5 read)"), "{out}");
        assert!(out.contains("none of the 2 moved"), "{out}");
    }

    #[test]
    fn an_interval_lists_every_counter_with_its_change() {
        let d = deltas();
        let after: BTreeMap<String, u64> =
            d.deltas.iter().map(|c| (c.name.clone(), c.after)).collect();
        let out = interval_table("hw_counters", Group::HwCounters, &after, &d, Style::plain());
        assert!(out.lines().next().unwrap().contains("HW_COUNTERS"), "{out}");
        assert_eq!(out.lines().count(), 1 + 5, "{out}");
        assert!(line(&out, "retry_exceeded_err").contains(ROSE), "{out}");
        assert!(
            line(&out, "send_err").contains("error count, unchanged"),
            "{out}"
        );
        assert!(!line(&out, "ack_deferred").contains("error"), "{out}");
        assert!(line(&out, "sent_pkts").contains("410"), "{out}");
        let s = interval_summary(&d);
        assert!(
            s.contains("over 2.00 s") && s.contains("retry_exceeded_err +2"),
            "{s}"
        );
        let none = interval_table(
            "counters",
            Group::Counters,
            &BTreeMap::new(),
            &d,
            Style::plain(),
        );
        assert!(none.contains("none exposed"), "{none}");
    }
}
