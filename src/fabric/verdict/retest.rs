//! The retests of the suspects, the final word on each, and the per-host summary.

use super::*;

/// The retests: each suspect host against a host that passed (neither a suspect nor a suspect
/// link's end; several suspects get different ones where there are enough), each suspect link
/// run again, a group's first member against a host outside it. Returns the pair of ranks per
/// suspect (None: no host passed to test against).
pub fn retest_pairs(
    suspects: &[Suspect],
    ranks: &[(u32, String)],
    missing: &BTreeSet<String>,
) -> Vec<Option<Pair>> {
    let mut involved: BTreeSet<u32> = BTreeSet::new();
    let mut suspect_hosts: BTreeSet<u32> = BTreeSet::new();
    for s in suspects {
        involved.extend(s.ranks());
        if !matches!(s, Suspect::Link { .. }) {
            suspect_hosts.extend(s.ranks());
        }
    }
    let usable = |skip: &BTreeSet<u32>| -> Vec<u32> {
        ranks
            .iter()
            .filter(|(r, h)| !skip.contains(r) && !missing.contains(h))
            .map(|(r, _)| *r)
            .collect()
    };
    let mut passed = usable(&involved);
    if passed.is_empty() {
        passed = usable(&suspect_hosts);
    }
    let mut next = 0usize;
    suspects
        .iter()
        .map(|s| match s {
            Suspect::Host { rank, .. } => pick(&passed, &mut next, *rank),
            Suspect::Group { members, .. } => pick(&passed, &mut next, members[0].0),
            Suspect::Link { a, b, .. } => Some((a.0.min(b.0), a.0.max(b.0))),
        })
        .collect()
}

pub(super) fn pick(passed: &[u32], next: &mut usize, rank: u32) -> Option<Pair> {
    if passed.is_empty() {
        return None;
    }
    let partner = passed[*next % passed.len()];
    *next += 1;
    Some((partner.min(rank), partner.max(rank)))
}

/// Whether a retest pair shows the suspect's rule again (with the retest's noise gate).
pub(super) fn confirms(s: &Suspect, p: &PairResult, r: &Reference, t: &Thresholds) -> bool {
    if p.error.is_some() {
        return true;
    }
    let reasons = pair_reasons(p, r, t);
    let by = |rule: Rule| reasons.iter().any(|(x, _)| *x == rule);
    let reference = r.bw_gbps.unwrap_or(0.0);
    let low = |v: Vec<f64>| {
        let m = v.len();
        // Below the ratio, with no noise gate: the suspect stood out beyond the noise already,
        // and one pair's retest is too few figures to clear it by noise alone; a suspect whose
        // slowness was passing (a busy host, a rerouted link) retests at full rate.
        m > 0
            && reference > 0.0
            && (v.iter().map(|x| x.ln()).sum::<f64>() / m as f64).exp() / reference < t.min_bw_ratio
    };
    // The direction from the suspect host (its sends) and towards it.
    let host = match s {
        Suspect::Host { rank, .. } => Some(*rank),
        Suspect::Group { members, .. } => Some(members[0].0),
        Suspect::Link { .. } => None,
    };
    let (sends, recvs) = match host {
        Some(h) if h == p.a_rank => (p.bw_gbps, p.bw_gbps_reverse),
        Some(_) => (p.bw_gbps_reverse, p.bw_gbps),
        None => (p.bw_gbps, p.bw_gbps_reverse),
    };
    match s.rule() {
        Rule::Failure => false,
        Rule::Counters => by(Rule::Counters),
        Rule::ExpectBw => by(Rule::ExpectBw),
        Rule::ExpectLat => by(Rule::ExpectLat),
        Rule::BwHost | Rule::BwGroup => low(bw_figures(p)),
        Rule::BwSend => low(sends.into_iter().collect()),
        Rule::BwRecv => low(recvs.into_iter().collect()),
        Rule::BwLink => {
            low(bw_figures(p))
                || low(sends.into_iter().collect())
                || low(recvs.into_iter().collect())
        }
        Rule::LatHost | Rule::LatLink => p
            .lat_us
            .is_some_and(|v| r.lat_us.is_some_and(|l| v / l > t.max_lat_ratio)),
    }
}

/// The final word: a suspect stays one when its retest shows its rule again (or could not
/// run); `retests[i]` is suspect i's retest, flagged already.
pub fn conclude(
    suspects: &[Suspect],
    retests: &[Option<&PairResult>],
    r: &Reference,
    t: &Thresholds,
) -> (Suspects, Vec<SuspectNote>) {
    let mut out = Suspects::default();
    let mut notes = Vec::new();
    for (i, s) in suspects.iter().enumerate() {
        let retest = retests.get(i).copied().flatten();
        let confirmed = retest.is_none_or(|p| confirms(s, p, r, t));
        let said = retest.map(|p| {
            let with = format!("{} - {}", p.a, p.b);
            let figures = format!(
                "{} / {} Gb/s, {} us",
                p.bw_gbps.map_or("-".into(), |v| format!("{v:.3}")),
                p.bw_gbps_reverse.map_or("-".into(), |v| format!("{v:.3}")),
                p.lat_us.map_or("-".into(), |v| format!("{v:.1}"))
            );
            match (&p.error, confirmed) {
                (Some(e), _) => format!("{with} failed again ({e})"),
                (None, true) => format!("{with} slow again ({figures})"),
                (None, false) => format!("{with} passed ({figures})"),
            }
        });
        let (kind, name, reason) = match s {
            Suspect::Host { host, reason, .. } => {
                if confirmed {
                    out.hosts.push(host.clone());
                }
                ("host", host.clone(), reason.clone())
            }
            Suspect::Link { a, b, reason, .. } => {
                if confirmed {
                    out.links.push([a.1.clone(), b.1.clone()]);
                }
                ("link", format!("{} - {}", a.1, b.1), reason.clone())
            }
            Suspect::Group {
                members, reason, ..
            } => {
                let names: Vec<String> = members.iter().map(|m| m.1.clone()).collect();
                let name = shorten(&names.iter().map(String::as_str).collect::<Vec<_>>(), 16);
                if confirmed {
                    out.groups.push(names);
                }
                ("group", name, reason.clone())
            }
        };
        notes.push(SuspectNote {
            kind: kind.into(),
            name,
            rule: s.rule().name().into(),
            reason,
            retest: said,
            confirmed,
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
            let bw = median(mine.iter().flat_map(|p| bw_figures(p)).collect());
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
