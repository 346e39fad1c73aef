//! The text report of a fabric run: matrices (or histograms for many hosts), the per-host
//! summary, findings, suspects and the verdict line.

use super::*;

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
            crate::report::qos_text(Some(s.tclass), Some(s.sl))
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
                match (p.control, p.retested) {
                    (true, _) => " [control]",
                    (_, true) => " [retest]",
                    _ => "",
                },
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
    config_section(&mut out, r, style);
    for l in &r.limits {
        let _ = writeln!(out, "\nlimit: {l}");
    }
    if !r.suspect_notes.is_empty() {
        let rt = &r.retests;
        let _ = writeln!(
            out,
            "\nsuspects (retested until decided: {} retest(s) in {} of at most {} rounds{}{})",
            rt.pairs,
            rt.rounds,
            rt.budget_rounds,
            if rt.controls > 0 || rt.rounds_without_controls > 0 {
                format!(
                    "; beside {} control pair test(s), {} retest round(s) without one",
                    rt.controls, rt.rounds_without_controls
                )
            } else {
                String::new()
            },
            if rt.stalled > 0 {
                format!("; {} stalled, their bandwidth not counted", rt.stalled)
            } else {
                String::new()
            }
        );
        for n in &r.suspect_notes {
            let way = match (n.kind, n.direction) {
                (_, None) | (_, Some(Direction::Both)) => String::new(),
                (SuspectKind::Link, Some(d)) => {
                    let (a, b) = n.name.split_once(" - ").unwrap_or((&n.name, ""));
                    if d == Direction::Send {
                        format!(", {a} to {b} only")
                    } else {
                        format!(", {b} to {a} only")
                    }
                }
                (_, Some(Direction::Send)) => ", sending only".into(),
                (_, Some(Direction::Receive)) => ", receiving only".into(),
            };
            let cause = n
                .config
                .as_deref()
                .map_or(String::new(), |c| format!("; {c}"));
            let _ = writeln!(
                out,
                "  {} {} [{}{way}]: {}{}{cause}; {}",
                n.kind,
                n.name,
                n.rules
                    .iter()
                    .map(|r| r.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                n.reason,
                match &n.retest {
                    Some(t) => format!("; retests: {t}"),
                    None => "; not retested".into(),
                },
                if n.confirmed {
                    "suspect"
                } else if n.undecided {
                    "undecided (not a suspect: raise --retest-rounds or run again)"
                } else {
                    "cleared"
                }
            );
        }
    }
    let refused: u64 = r.refused.iter().map(|x| x.count).sum();
    if refused > 0 {
        let _ = writeln!(
            out,
            "\nrefused: {refused} connection(s), not this run's ranks or pairs"
        );
        for x in r.refused.iter().take(10) {
            let _ = writeln!(out, "  {} x{}: {}", x.address, x.count, x.reason);
        }
        if r.refused.len() > 10 {
            let _ = writeln!(
                out,
                "  ... {} more kinds (see --json)",
                r.refused.len() - 10
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
        let hosts: Vec<String> = r
            .suspects
            .hosts
            .iter()
            .map(|h| {
                let cause = r
                    .suspect_notes
                    .iter()
                    .find(|n| n.kind == SuspectKind::Host && n.name == *h)
                    .and_then(|n| n.config.as_deref());
                match cause {
                    Some(c) => format!("{h} ({c})"),
                    None => h.clone(),
                }
            })
            .collect();
        parts.push(format!("suspect host(s) {}", hosts.join(", ")));
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
    // A failing finding whose hosts are all suspects is said with them (their cause) already.
    let config: Vec<String> = r
        .config
        .iter()
        .filter(|f| f.severity == config::Severity::Failure)
        .filter(|f| !f.hosts().all(|h| r.suspects.hosts.iter().any(|s| s == h)))
        .map(|f| f.short())
        .collect();
    if !config.is_empty() {
        parts.push(format!("config: {}", config.join("; ")));
    }
    if failed_pairs > 0 && r.suspects.is_empty() && failing.is_empty() {
        parts.push(format!("{failed_pairs} pair(s) failed"));
    }
    if !r.missing.is_empty() {
        parts.push(format!("missing {}", r.missing.join(", ")));
    }
    if !parts.is_empty() && r.retests.undecided > 0 {
        parts.push(format!(
            "{} undecided after {} retest rounds",
            r.retests.undecided, r.retests.rounds
        ));
    }
    let verdict = if parts.is_empty() {
        if r.retests.undecided > 0 {
            format!(
                "verdict: no suspects, {} undecided after {} retest rounds (see suspects above)",
                r.retests.undecided, r.retests.rounds
            )
        } else if r.pairs.iter().any(|p| p.flagged && !p.retested) || !r.suspect_notes.is_empty() {
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

/// The configuration audit: a sentence per finding (failures first); past [`MATRIX_MAX_HOSTS`]
/// hosts, also a table of the hosts it names (host, field, its value, the majority's).
fn config_section(out: &mut String, r: &FabricReport, style: Style) {
    let told = r.hosts.iter().filter(|h| h.config.is_some()).count();
    if r.config.is_empty() {
        if told > 1 {
            let _ = writeln!(
                out,
                "\nconfiguration: the same on all {told} hosts that told it"
            );
        }
        return;
    }
    let _ = writeln!(out, "\nconfiguration ({told} hosts told theirs)");
    for f in &r.config {
        let _ = writeln!(
            out,
            "  [{}] {}{}",
            f.field,
            f.text(),
            if f.severity == config::Severity::Failure {
                ""
            } else {
                " (information)"
            }
        );
    }
    if r.hosts.len() <= MATRIX_MAX_HOSTS {
        return;
    }
    let mut t = style.table(&["host", "field", "value", "most hosts"]);
    let mut rows = 0usize;
    for f in &r.config {
        let most = f.majority.as_ref().map_or("-".to_string(), |m| {
            format!("{} ({} of {})", m.value, m.hosts, f.reporting)
        });
        for g in &f.groups {
            for h in &g.hosts {
                rows += 1;
                if rows <= TEXT_MAX_ROWS {
                    t.add_row(vec![
                        h.clone(),
                        f.field.label().to_string(),
                        g.value.clone(),
                        most.clone(),
                    ]);
                }
            }
        }
    }
    out.push_str(&finish(&t));
    if rows > TEXT_MAX_ROWS {
        let _ = writeln!(
            out,
            "  ... and {} more (all in --json)",
            rows - TEXT_MAX_ROWS
        );
    }
}
