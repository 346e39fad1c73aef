//! The verdict on a fabric run: which pairs are flagged (against the fabric's medians and any
//! absolute thresholds), which hosts and links are suspects, and what their retests decided.
//!
//! A host most of whose pairs (more than half, of at least two) are flagged is a suspect host;
//! a flagged pair whose two hosts are otherwise fine is a suspect link. Pairs with a missing
//! rank are explained by it and judge no one else.
//!
//! What 3 hosts can tell: each host has 2 pairs. A slow link (1 pair of 3) is found: the median
//! is a good pair, the slow one falls below it, and its hosts pass their other pair. A slow
//! host slows 2 of the 3 pairs, so the median is itself slow: the ratio tests cannot see it
//! (only `--expect-bw`/`--expect-lat` can), while a host whose tests fail or whose error
//! counters rise is still found (2 of 2 flagged). 2 hosts tell nothing apart: a flagged pair
//! is reported as a suspect link.

use super::schedule::Pair;
use crate::report::fabric::{HostSummary, PairResult, SuspectNote, Suspects};
use std::collections::{BTreeMap, BTreeSet};

/// What a pair is judged against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub min_bw_ratio: f64,
    pub max_lat_ratio: f64,
    pub expect_bw_gbps: Option<f64>,
    pub expect_lat_us: Option<f64>,
    /// Flag a pair whose error counters rose (off: still reported, not judged).
    pub counters: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_bw_ratio: 0.8,
            max_lat_ratio: 1.5,
            expect_bw_gbps: None,
            expect_lat_us: None,
            counters: true,
        }
    }
}

/// The fabric's medians over the scheduled pairs (retests left out).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Medians {
    /// Over every measured direction.
    pub bw_gbps: Option<f64>,
    pub lat_us: Option<f64>,
}

pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

pub fn medians(pairs: &[PairResult]) -> Medians {
    let first = pairs.iter().filter(|p| !p.retested);
    Medians {
        bw_gbps: median(
            first
                .clone()
                .flat_map(|p| [p.bw_gbps, p.bw_gbps_reverse])
                .flatten()
                .collect(),
        ),
        lat_us: median(first.filter_map(|p| p.lat_us).collect()),
    }
}

/// Flag each pair (and say why) against the medians and the thresholds.
pub fn flag(pairs: &mut [PairResult], m: &Medians, t: &Thresholds) {
    for p in pairs {
        let mut why = Vec::new();
        if let Some(e) = &p.error {
            why.push(format!("a test failed: {e}"));
        }
        for (v, dir) in [(p.bw_gbps, (&p.a, &p.b)), (p.bw_gbps_reverse, (&p.b, &p.a))] {
            let Some(v) = v else { continue };
            if let Some(med) = m.bw_gbps.filter(|med| v < t.min_bw_ratio * med) {
                why.push(format!(
                    "bandwidth {} to {} {v:.3} Gb/s is below {} x the fabric median {med:.3}",
                    dir.0, dir.1, t.min_bw_ratio
                ));
            }
            if let Some(e) = t.expect_bw_gbps.filter(|e| v < *e) {
                why.push(format!(
                    "bandwidth {} to {} {v:.3} Gb/s is below --expect-bw {e:.3}",
                    dir.0, dir.1
                ));
            }
        }
        if let Some(v) = p.lat_us {
            if let Some(med) = m.lat_us.filter(|med| v > t.max_lat_ratio * med) {
                why.push(format!(
                    "latency {v:.1} us is above {} x the fabric median {med:.1}",
                    t.max_lat_ratio
                ));
            }
            if let Some(e) = t.expect_lat_us.filter(|e| v > *e) {
                why.push(format!("latency {v:.1} us is above --expect-lat {e:.1}"));
            }
        }
        let rose: Vec<String> = p
            .counters
            .iter()
            .flat_map(|(host, m)| m.iter().map(move |(c, d)| format!("{host} {c} +{d}")))
            .collect();
        if t.counters && !rose.is_empty() {
            why.push(format!("error counters rose: {}", rose.join(", ")));
        }
        p.flagged = !why.is_empty();
        p.reason = p.flagged.then(|| why.join("; "));
    }
}

/// A suspect before its retest.
#[derive(Debug, Clone, PartialEq)]
pub enum Suspect {
    Host {
        rank: u32,
        host: String,
        reason: String,
    },
    Link {
        a: (u32, String),
        b: (u32, String),
        reason: String,
    },
}

/// Find the suspect hosts and links among the scheduled pairs. `missing`: host names of ranks
/// that did not finish.
pub fn classify(pairs: &[PairResult], missing: &BTreeSet<String>) -> Vec<Suspect> {
    let judged: Vec<&PairResult> = pairs
        .iter()
        .filter(|p| !p.retested && !missing.contains(&p.a) && !missing.contains(&p.b))
        .collect();
    // host -> (rank, pairs, flagged partners)
    let mut per_host: BTreeMap<&str, (u32, u32, Vec<&str>)> = BTreeMap::new();
    for p in &judged {
        for (me, rank, other) in [(&p.a, p.a_rank, &p.b), (&p.b, p.b_rank, &p.a)] {
            let e = per_host.entry(me).or_insert((rank, 0, Vec::new()));
            e.1 += 1;
            if p.flagged {
                e.2.push(other);
            }
        }
    }
    let suspect_host = |h: &str| {
        per_host
            .get(h)
            .is_some_and(|(_, n, f)| *n >= 2 && 2 * f.len() as u32 > *n)
    };
    let mut out = Vec::new();
    for (host, (rank, n, flagged)) in &per_host {
        if suspect_host(host) {
            out.push(Suspect::Host {
                rank: *rank,
                host: host.to_string(),
                reason: format!(
                    "{} of its {n} pairs are flagged (with {})",
                    flagged.len(),
                    flagged.join(", ")
                ),
            });
        }
    }
    for p in judged.iter().filter(|p| p.flagged) {
        if !suspect_host(&p.a) && !suspect_host(&p.b) {
            out.push(Suspect::Link {
                a: (p.a_rank, p.a.clone()),
                b: (p.b_rank, p.b.clone()),
                reason: format!(
                    "{}, while {} and {} pass most of their other pairs",
                    p.reason.as_deref().unwrap_or("flagged"),
                    p.a,
                    p.b
                ),
            });
        }
    }
    out
}

/// The retests: each suspect host against a host that passed (neither a suspect nor a suspect
/// link's end; several
/// suspects get different ones where there are enough), each suspect link run again. Returns
/// the pair of ranks per suspect (None: no host passed to test against).
pub fn retest_pairs(
    suspects: &[Suspect],
    ranks: &[(u32, String)],
    missing: &BTreeSet<String>,
) -> Vec<Option<Pair>> {
    // Hosts that passed: no suspect and not a link's end (they only failed with a suspect);
    // failing those, any host that is not itself a suspect host.
    let mut involved: BTreeSet<u32> = BTreeSet::new();
    let mut suspect_hosts: BTreeSet<u32> = BTreeSet::new();
    for s in suspects {
        match s {
            Suspect::Host { rank, .. } => {
                involved.insert(*rank);
                suspect_hosts.insert(*rank);
            }
            Suspect::Link { a, b, .. } => {
                involved.insert(a.0);
                involved.insert(b.0);
            }
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
            Suspect::Host { rank, .. } => {
                if passed.is_empty() {
                    return None;
                }
                let partner = passed[next % passed.len()];
                next += 1;
                Some((partner.min(*rank), partner.max(*rank)))
            }
            Suspect::Link { a, b, .. } => Some((a.0.min(b.0), a.0.max(b.0))),
        })
        .collect()
}

/// The final word: a suspect stays one when its retest was flagged too (or could not run);
/// `retests[i]` is suspect i's retest, judged already.
pub fn conclude(
    suspects: &[Suspect],
    retests: &[Option<&PairResult>],
) -> (Suspects, Vec<SuspectNote>) {
    let mut out = Suspects::default();
    let mut notes = Vec::new();
    for (i, s) in suspects.iter().enumerate() {
        let retest = retests.get(i).copied().flatten();
        let confirmed = retest.is_none_or(|r| r.flagged);
        let said = retest.map(|r| {
            let with = format!("{} - {}", r.a, r.b);
            match (&r.reason, r.flagged) {
                (Some(why), true) => format!("{with} flagged again ({why})"),
                _ => format!(
                    "{with} passed ({} Gb/s, {} us)",
                    r.bw_min().map_or("-".into(), |v| format!("{v:.3}")),
                    r.lat_us.map_or("-".into(), |v| format!("{v:.1}"))
                ),
            }
        });
        let (kind, name, reason) = match s {
            Suspect::Host { host, reason, .. } => {
                if confirmed {
                    out.hosts.push(host.clone());
                }
                ("host", host.clone(), reason.clone())
            }
            Suspect::Link { a, b, reason } => {
                if confirmed {
                    out.links.push([a.1.clone(), b.1.clone()]);
                }
                ("link", format!("{} - {}", a.1, b.1), reason.clone())
            }
        };
        notes.push(SuspectNote {
            kind: kind.into(),
            name,
            reason,
            retest: said,
            confirmed,
        });
    }
    (out, notes)
}

/// Each host's pairs, flagged count and medians (scheduled pairs only).
pub fn host_summary(hosts: &[String], pairs: &[PairResult]) -> Vec<HostSummary> {
    hosts
        .iter()
        .map(|h| {
            let mine: Vec<&PairResult> = pairs.iter().filter(|p| !p.retested && p.has(h)).collect();
            HostSummary {
                host: h.clone(),
                pairs: mine.len() as u32,
                flagged: mine.iter().filter(|p| p.flagged).count() as u32,
                median_bw_gbps: median(mine.iter().filter_map(|p| p.bw_min()).collect()),
                median_lat_us: median(mine.iter().filter_map(|p| p.lat_us).collect()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(r: u32) -> String {
        format!("h{r}")
    }

    fn pair(a: u32, b: u32, bw: f64, lat: f64) -> PairResult {
        PairResult {
            a: name(a),
            b: name(b),
            a_rank: a,
            b_rank: b,
            round: 1,
            bw_gbps: Some(bw),
            bw_gbps_reverse: Some(bw),
            lat_us: Some(lat),
            counters: BTreeMap::new(),
            error: None,
            flagged: false,
            reason: None,
            retested: false,
        }
    }

    /// All pairs of n hosts, each at 10 Gb/s and 5 us unless `slow` says otherwise.
    fn fabric(n: u32, slow: impl Fn(u32, u32) -> bool) -> Vec<PairResult> {
        let mut v = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                v.push(if slow(a, b) {
                    pair(a, b, 2.0, 5.0)
                } else {
                    pair(a, b, 10.0, 5.0)
                });
            }
        }
        v
    }

    fn judge(pairs: &mut [PairResult]) -> Vec<Suspect> {
        let m = medians(pairs);
        flag(pairs, &m, &Thresholds::default());
        classify(pairs, &BTreeSet::new())
    }

    fn hosts(s: &[Suspect]) -> Vec<String> {
        s.iter()
            .filter_map(|s| match s {
                Suspect::Host { host, .. } => Some(host.clone()),
                _ => None,
            })
            .collect()
    }

    fn links(s: &[Suspect]) -> Vec<(String, String)> {
        s.iter()
            .filter_map(|s| match s {
                Suspect::Link { a, b, .. } => Some((a.1.clone(), b.1.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_healthy_fabric_flags_nothing() {
        let mut p = fabric(4, |_, _| false);
        assert!(judge(&mut p).is_empty());
        assert!(p.iter().all(|p| !p.flagged && p.reason.is_none()));
    }

    #[test]
    fn four_hosts_one_slow_host() {
        let mut p = fabric(4, |a, b| a == 2 || b == 2);
        let s = judge(&mut p);
        assert_eq!(hosts(&s), ["h2"]);
        assert!(
            links(&s).is_empty(),
            "its pairs are explained by the host: {s:?}"
        );
        assert_eq!(p.iter().filter(|p| p.flagged).count(), 3);
        let ranks: Vec<(u32, String)> = (0..4).map(|r| (r, name(r))).collect();
        let retest = retest_pairs(&s, &ranks, &BTreeSet::new());
        let (x, y) = retest[0].unwrap();
        assert!(x == 2 || y == 2, "the suspect is retested");
        assert!(x.max(y) != x.min(y) && [x, y].iter().any(|&r| r != 2 && r < 4));
        // The retest is slow again: the suspect stands; fast: it is cleared.
        let mut again = vec![pair(x, y, 2.0, 5.0)];
        again[0].retested = true;
        flag(&mut again, &medians(&p), &Thresholds::default());
        let (final_, notes) = conclude(&s, &[Some(&again[0])]);
        assert_eq!(final_.hosts, ["h2"]);
        assert!(
            notes[0].confirmed
                && notes[0]
                    .retest
                    .as_deref()
                    .unwrap()
                    .contains("flagged again")
        );
        let mut fine = vec![pair(x, y, 10.0, 5.0)];
        fine[0].retested = true;
        flag(&mut fine, &medians(&p), &Thresholds::default());
        let (final_, notes) = conclude(&s, &[Some(&fine[0])]);
        assert!(final_.is_empty() && !notes[0].confirmed);
    }

    #[test]
    fn four_hosts_one_slow_link() {
        let mut p = fabric(4, |a, b| (a, b) == (0, 3));
        let s = judge(&mut p);
        assert!(hosts(&s).is_empty(), "{s:?}");
        assert_eq!(links(&s), [("h0".to_string(), "h3".to_string())]);
        let ranks: Vec<(u32, String)> = (0..4).map(|r| (r, name(r))).collect();
        assert_eq!(retest_pairs(&s, &ranks, &BTreeSet::new()), [Some((0, 3))]);
    }

    #[test]
    fn three_hosts_find_a_slow_link_and_a_failing_host_not_a_slow_one() {
        let mut p = fabric(3, |a, b| (a, b) == (0, 1));
        let s = judge(&mut p);
        assert_eq!(links(&s), [("h0".to_string(), "h1".to_string())]);
        assert!(hosts(&s).is_empty());

        // A slow host slows 2 of 3 pairs: the median is slow, the ratios see nothing...
        let mut p = fabric(3, |a, b| a == 2 || b == 2);
        assert!(
            judge(&mut p).is_empty(),
            "documented: the median is the slow value"
        );
        // ...but an absolute threshold does.
        let t = Thresholds {
            expect_bw_gbps: Some(5.0),
            ..Thresholds::default()
        };
        let m = medians(&p);
        flag(&mut p, &m, &t);
        assert_eq!(hosts(&classify(&p, &BTreeSet::new())), ["h2"]);

        // A host whose tests fail is found by the failures.
        let mut p = fabric(3, |_, _| false);
        for q in p.iter_mut().filter(|q| q.has("h1")) {
            q.error = Some("no completion within 10s".into());
            q.bw_gbps = None;
        }
        let s = judge(&mut p);
        assert_eq!(hosts(&s), ["h1"]);
        assert!(links(&s).is_empty());
    }

    #[test]
    fn latency_counters_and_absolute_thresholds_flag() {
        let mut p = fabric(4, |_, _| false);
        p[1].lat_us = Some(50.0);
        p[4].counters.insert(
            "h1".into(),
            BTreeMap::from([("rcvd_seq_err".to_string(), 3)]),
        );
        judge(&mut p);
        assert!(
            p[1].reason
                .as_deref()
                .unwrap()
                .contains("latency 50.0 us is above 1.5")
        );
        assert!(
            p[4].reason
                .as_deref()
                .unwrap()
                .contains("h1 rcvd_seq_err +3")
        );
        assert_eq!(p.iter().filter(|p| p.flagged).count(), 2);
        let t = Thresholds {
            expect_lat_us: Some(1.0),
            ..Thresholds::default()
        };
        let m = medians(&p);
        flag(&mut p, &m, &t);
        assert!(p.iter().all(|p| p.flagged), "every latency is above 1 us");
        let t = Thresholds {
            counters: false,
            ..Thresholds::default()
        };
        let m = medians(&p);
        flag(&mut p, &m, &t);
        assert!(!p[4].flagged, "counters reported, not judged");
    }

    #[test]
    fn a_missing_rank_explains_its_pairs() {
        let mut p = fabric(4, |_, _| false);
        for q in p.iter_mut().filter(|q| q.has("h3")) {
            q.error = Some("rank 3 (h3) is missing".into());
            q.bw_gbps = None;
        }
        let m = medians(&p);
        flag(&mut p, &m, &Thresholds::default());
        let missing = BTreeSet::from(["h3".to_string()]);
        assert!(classify(&p, &missing).is_empty());
    }

    #[test]
    fn two_hosts_cannot_tell_host_from_link() {
        let mut p = vec![pair(0, 1, 1.0, 5.0)];
        p[0].error = Some("refused".into());
        let s = judge(&mut p);
        assert!(hosts(&s).is_empty());
        assert_eq!(links(&s).len(), 1);
        let ranks: Vec<(u32, String)> = (0..2).map(|r| (r, name(r))).collect();
        assert_eq!(retest_pairs(&s, &ranks, &BTreeSet::new()), [Some((0, 1))]);
    }

    #[test]
    fn medians_and_summary() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        let mut p = fabric(4, |a, _| a == 0);
        judge(&mut p);
        let names: Vec<String> = (0..4).map(name).collect();
        let s = host_summary(&names, &p);
        assert_eq!((s[0].pairs, s[0].flagged), (3, 3));
        assert_eq!(s[0].median_bw_gbps, Some(2.0));
    }
}
