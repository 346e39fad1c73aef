//! The final word on each suspect after its retests, and the per-host summary.

use super::*;
use retest::{State, Trial};

/// The final word on each suspect: one entry per host, link or group in `Suspects`, one note
/// each with every rule that charged it and what its retests said (each trial dropped once its
/// note is made: a fleet's trials and notes are not held at once).
pub fn conclude(trials: Vec<Trial>, r: &Reference, t: &Thresholds) -> (Suspects, Vec<SuspectNote>) {
    let mut out = Suspects::default();
    let mut notes = Vec::with_capacity(trials.len());
    for x in trials {
        let s = &x.suspect;
        let confirmed = x.state == State::Confirmed;
        let states: Vec<State> = s.charges.iter().map(|c| x.charge_state(c, r, t)).collect();
        let said = (!x.retests.is_empty()).then(|| {
            let runs: Vec<String> = x
                .retests
                .iter()
                .map(|p| match &p.error {
                    Some(e) => format!("{} - {} failed ({e})", p.a, p.b),
                    None => format!(
                        "{} - {} {} / {} Gb/s{}, {} us{}",
                        p.a,
                        p.b,
                        p.bw_gbps.map_or("-".into(), |v| format!("{v:.3}")),
                        p.bw_gbps_reverse.map_or("-".into(), |v| format!("{v:.3}")),
                        match p.control_bw_gbps {
                            Some(c) => format!(" (against its round's controls, {c:.3} Gb/s)"),
                            None => String::new(),
                        },
                        p.lat_us.map_or("-".into(), |v| format!("{v:.1}")),
                        match p.lat_us.and_then(|v| r.lat_ratio(v)) {
                            Some(x) if p.stalled => format!(
                                " (stalled: {x:.2} x the reference latency, its bandwidth not \
                                 counted)"
                            ),
                            _ => String::new(),
                        }
                    ),
                })
                .collect();
            let each: Vec<String> = s
                .charges
                .iter()
                .zip(&states)
                .map(|(c, st)| {
                    let stalls = *st == State::Pending && x.counted(c).next().is_none();
                    let word = match (st, x.state) {
                        (State::Confirmed, _) => "slow again",
                        (State::Cleared, _) => "passed",
                        (_, State::Confirmed) if stalls => {
                            "not measured (every retest stalled): it stands"
                        }
                        (_, State::Undecided) if stalls => {
                            "not measured (every retest stalled), undecided when the budget ran out"
                        }
                        (_, State::Undecided) => "undecided when the budget ran out",
                        _ => "not decided",
                    };
                    let word = if c.rule == Rule::Failure && *st == State::Confirmed {
                        "failed again"
                    } else {
                        word
                    };
                    format!("{} {word}", c.rule)
                })
                .collect();
            format!("{}: {}", runs.join("; "), each.join(", "))
        });
        let name = match &s.target {
            Target::Host { host, .. } => {
                if confirmed {
                    out.hosts.push(host.clone());
                }
                host.clone()
            }
            Target::Link { a, b } => {
                if confirmed {
                    out.links.push([a.1.clone(), b.1.clone()]);
                }
                format!("{} - {}", a.1, b.1)
            }
            Target::Group { members } => {
                let names: Vec<String> = members.iter().map(|m| m.1.clone()).collect();
                let name = shorten(&names.iter().map(String::as_str).collect::<Vec<_>>(), 16);
                if confirmed {
                    out.groups.push(names);
                }
                name
            }
        };
        let rule = s
            .charges
            .iter()
            .zip(&states)
            .find(|(_, st)| confirmed && **st == State::Confirmed)
            .map_or(s.rule(), |(c, _)| c.rule);
        notes.push(SuspectNote {
            kind: s.target.kind(),
            name,
            rule,
            rules: s.rules(),
            direction: s.direction(),
            reason: s
                .charges
                .iter()
                .map(|c| format!("{}: {}", c.rule, c.reason))
                .collect::<Vec<_>>()
                .join("; "),
            retest: said,
            retests: x.retests.len() as u32,
            confirmed,
            undecided: x.state == State::Undecided,
            // The configuration audit's cause, joined by the coordinator.
            config: None,
        });
    }
    (out, notes)
}

/// Each host's pairs, flagged count, medians and ratios to the reference (scheduled pairs
/// only), worst bandwidth ratio first.
pub fn host_summary(hosts: &[String], pairs: &[PairResult], r: &Reference) -> Vec<HostSummary> {
    let mut mine: BTreeMap<&str, Vec<&PairResult>> = BTreeMap::new();
    for p in pairs.iter().filter(|p| !p.retested) {
        mine.entry(&p.a).or_default().push(p);
        mine.entry(&p.b).or_default().push(p);
    }
    let mut out: Vec<HostSummary> = hosts
        .iter()
        .map(|h| {
            let mine = mine.get(h.as_str()).map_or(&[][..], Vec::as_slice);
            let bw = median(
                mine.iter()
                    .flat_map(|p| [p.bw_gbps, p.bw_gbps_reverse].into_iter().flatten())
                    .collect(),
            );
            let lat = median(mine.iter().filter_map(|p| p.lat_us).collect());
            HostSummary {
                host: h.clone(),
                pairs: mine.len() as u32,
                flagged: mine.iter().filter(|p| p.flagged).count() as u32,
                median_bw_gbps: bw,
                median_lat_us: lat,
                bw_ratio: bw.and_then(|v| r.bw_ratio(v)),
                lat_ratio: lat.and_then(|v| r.lat_ratio(v)),
            }
        })
        .collect();
    out.sort_by(|x, y| {
        let k = |h: &HostSummary| h.bw_ratio.unwrap_or(f64::INFINITY);
        k(x).total_cmp(&k(y))
            .then_with(|| y.flagged.cmp(&x.flagged))
    });
    out
}
