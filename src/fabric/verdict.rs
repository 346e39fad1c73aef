//! The verdict on a fabric run: a robust reference and noise level from the run itself, which
//! pairs stand out, which hosts, links and groups are suspects (and by which rule), what the
//! fabric as a whole shows, and what the retests decided.
//!
//! The rules (all on the scheduled pairs; pairs with a missing rank judge no one):
//!
//! - **Reference and noise.** Each host's score is the median of its own figures (bandwidth both
//!   ways, in log scale; latency); the reference is the median of the hosts' scores, so fewer
//!   than half the hosts cannot move it. The noise is the spread of each host's figures around its
//!   own median, pooled over the hosts (1.4826 x the median absolute deviation, as a fraction).
//!   Both are taken twice: the second time without the pairs of hosts already beyond the ratio
//!   (fewer than half of them), so a slow host neither lowers the reference nor widens the noise.
//! - **Slow host** (`bw-host`, `bw-send`, `bw-recv`): its score (or the score of one direction)
//!   is below `--min-bw-ratio` x the reference *and* further below it than the noise can explain
//!   (more than [`noise_sigmas`] standard errors of a median of that many figures). Needs 4 hosts.
//! - **Slow link** (`bw-link`): a pair whose hosts are not suspects is below the ratio and the
//!   noise gate, its two directions averaged (geometric mean).
//! - **Group** (`bw-group`): suspect hosts that are fast among themselves: a shared switch,
//!   uplink or partition, reported once.
//! - **Latency** (`lat-host`, `lat-link`): the same, above `--max-lat-ratio` x the reference.
//! - **Failures, counters, absolute floors** (`failure`, `counters`, `expect-bw`, `expect-lat`):
//!   a host with more than half of its pairs (of at least two) flagged by the rule is a suspect;
//!   a flagged pair whose hosts are otherwise fine is a suspect link; when more than half of all
//!   pairs are flagged by the rule (4 hosts or more) it is one fabric-wide finding instead.
//! - **Error counters** are judged against the run's own pairs: a pair is flagged when a
//!   counter's rise is above the fence Q3 + 3 x max(IQR, Q3, 1) over the pairs (or above
//!   `--max-error-delta N` when given). A counter that rose on half the pairs or more is reported
//!   once as fabric-wide information.
//! - With 2 or 3 hosts the ratio rules cannot tell which end is slow; they are off and the
//!   verdict says so (failures, counters and `--expect-bw`/`--expect-lat` still judge).

use super::schedule::Pair;
use crate::report::fabric::{Finding, HostSummary, PairResult, SuspectNote, Suspects};
use std::collections::{BTreeMap, BTreeSet};

/// What a pair is judged against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub min_bw_ratio: f64,
    pub max_lat_ratio: f64,
    pub expect_bw_gbps: Option<f64>,
    pub expect_lat_us: Option<f64>,
    /// Judge the error counters (off: still reported, not judged).
    pub counters: bool,
    /// Flag a pair whose counter rose by more than this (None: against the run's own pairs).
    pub max_error_delta: Option<u64>,
}

/// The default `--min-bw-ratio`: a host or link below 0.9 x the reference (and beyond the noise).
pub const MIN_BW_RATIO: f64 = 0.9;
/// The default `--max-lat-ratio`.
pub const MAX_LAT_RATIO: f64 = 1.5;
/// Hosts needed for the ratio rules.
pub const MIN_HOSTS_FOR_RATIOS: usize = 4;
/// Figures a host needs for the rules on one direction and on latency (a median of fewer is
/// too easily moved by one figure); the bandwidth host rule needs [`MIN_FIGURES_HOST`].
pub const MIN_FIGURES_DIRECTION: usize = 5;
pub const MIN_FIGURES_HOST: usize = 4;
/// The noise gate's floor, in standard errors.
pub const MIN_SIGMAS: f64 = 4.0;
/// The noise gate of a retest (one pair, a suspect already).
pub const RETEST_SIGMAS: f64 = 3.0;

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_bw_ratio: MIN_BW_RATIO,
            max_lat_ratio: MAX_LAT_RATIO,
            expect_bw_gbps: None,
            expect_lat_us: None,
            counters: true,
            max_error_delta: None,
        }
    }
}

/// How many standard errors a figure must stand out by among `tests` tests: at least
/// [`MIN_SIGMAS`], more for many tests (a Gaussian tail of 1 % over all of them).
pub fn noise_sigmas(tests: usize) -> f64 {
    let t = tests.max(1) as f64;
    MIN_SIGMAS.max((2.0 * (t / 0.01).ln()).sqrt())
}

/// The standard error of a host's median (or of a pair's mean, for 1 or 2 figures) of `m`
/// figures of spread `sigma`.
fn se(sigma: f64, m: usize) -> f64 {
    let root = (m.max(1) as f64).sqrt();
    if m <= 2 { sigma / root } else { 1.2533 * sigma / root }
}

/// The run's own yardsticks (from the scheduled pairs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reference {
    /// The reference bandwidth (the median of the hosts' median bandwidths), Gb/s.
    pub bw_gbps: Option<f64>,
    /// The bandwidth figures' spread around their hosts' medians (a fraction: 0.05 is 5 %).
    pub bw_spread: Option<f64>,
    /// The reference latency (median of the hosts' medians), us.
    pub lat_us: Option<f64>,
    pub lat_spread: Option<f64>,
    /// Each counter's fence: a pair is flagged when its rise is above it.
    pub counter_fence: BTreeMap<String, u64>,
    /// Hosts judged (not missing, with a pair).
    pub hosts: usize,
    /// Bandwidth figures and latency figures judged (the number of tests the noise gate counts).
    pub bw_figures: usize,
    pub lat_figures: usize,
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

/// The value at quantile `q` of sorted `v` (linear between neighbours).
fn quantile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// The pairs that judge: scheduled (not retests), neither end missing.
fn judged<'a>(pairs: &'a [PairResult], missing: &BTreeSet<String>) -> Vec<&'a PairResult> {
    pairs
        .iter()
        .filter(|p| !p.retested && !missing.contains(&p.a) && !missing.contains(&p.b))
        .collect()
}

/// Each host's log figures (bandwidth: both directions; latency: one per pair).
fn per_host_logs<'a>(
    judged: &[&'a PairResult],
    figures: impl Fn(&PairResult) -> Vec<f64>,
) -> BTreeMap<&'a str, Vec<f64>> {
    let mut m: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for p in judged {
        let v: Vec<f64> = figures(p)
            .into_iter()
            .filter(|v| *v > 0.0 && v.is_finite())
            .map(f64::ln)
            .collect();
        for h in [p.a.as_str(), p.b.as_str()] {
            m.entry(h).or_default().extend(&v);
        }
    }
    m
}

/// The reference (median of host medians) and the pooled spread around each host's own median.
/// The median's own zero deviation (odd counts) is left out and each host's deviations are
/// scaled by sqrt(m / (m - 1)): a host's figures lie closer to their own median than to the truth.
fn scale(per_host: &BTreeMap<&str, Vec<f64>>) -> (Option<f64>, Option<f64>) {
    let scores: Vec<f64> = per_host.values().filter_map(|v| median(v.clone())).collect();
    let reference = median(scores);
    let mut dev = Vec::new();
    for v in per_host.values().filter(|v| v.len() >= 3) {
        let m = median(v.clone()).unwrap_or(0.0);
        let k = (v.len() as f64 / (v.len() - 1) as f64).sqrt();
        let mut d: Vec<f64> = v.iter().map(|x| k * (x - m).abs()).collect();
        if v.len() % 2 == 1 {
            d.sort_by(f64::total_cmp);
            d.remove(0);
        }
        dev.extend(d);
    }
    let spread = median(dev).map(|mad| 1.4826 * mad);
    (reference, spread)
}

/// [`scale`] twice: the hosts whose score is beyond the ratio alone (`beyond`, on the log ratio
/// to the first reference) are left out of the second, when they are fewer than half and enough
/// figures remain, so that a slow host's pairs neither lower the reference nor widen the noise
/// that is to judge it (with 4 hosts, half of all figures involve a slow one).
fn refined_scale(
    ok: &[&PairResult],
    figures: impl Fn(&PairResult) -> Vec<f64> + Copy,
    beyond: impl Fn(f64) -> bool,
) -> (Option<f64>, Option<f64>) {
    let per_host = per_host_logs(ok, figures);
    let (reference, spread) = scale(&per_host);
    let Some(first) = reference else {
        return (reference, spread);
    };
    let out: BTreeSet<&str> = per_host
        .iter()
        .filter(|(_, v)| median(v.to_vec()).is_some_and(|m| beyond(m - first)))
        .map(|(h, _)| *h)
        .collect();
    if out.is_empty() || 2 * out.len() >= per_host.len() {
        return (reference, spread);
    }
    let rest: Vec<&PairResult> = ok
        .iter()
        .copied()
        .filter(|p| !out.contains(p.a.as_str()) && !out.contains(p.b.as_str()))
        .collect();
    let again = per_host_logs(&rest, figures);
    if again.values().filter(|v| v.len() >= 3).count() < 3 {
        return (reference, spread);
    }
    match scale(&again) {
        (Some(r), Some(s)) => (Some(r), Some(s)),
        _ => (reference, spread),
    }
}

fn bw_figures(p: &PairResult) -> Vec<f64> {
    [p.bw_gbps, p.bw_gbps_reverse].into_iter().flatten().collect()
}

fn lat_figures(p: &PairResult) -> Vec<f64> {
    p.lat_us.into_iter().collect()
}

/// A pair's total rise of each counter (both hosts).
fn counter_totals(p: &PairResult) -> BTreeMap<&str, u64> {
    let mut t: BTreeMap<&str, u64> = BTreeMap::new();
    for m in p.counters.values() {
        for (c, d) in m {
            *t.entry(c.as_str()).or_default() += d;
        }
    }
    t
}

/// The run's reference, noise and counter fences.
pub fn reference(pairs: &[PairResult], missing: &BTreeSet<String>, t: &Thresholds) -> Reference {
    let judged = judged(pairs, missing);
    let ok: Vec<&PairResult> = judged
        .iter()
        .copied()
        .filter(|p| p.error.is_none())
        .collect();
    let (bw_ref, bw_spread) = refined_scale(&ok, bw_figures, |x| x < t.min_bw_ratio.ln());
    let (lat_ref, lat_spread) = refined_scale(&ok, lat_figures, |x| x > t.max_lat_ratio.ln());
    let names: BTreeSet<String> = counter_names(&judged);
    let counter_fence = names
        .into_iter()
        .map(|c| {
            let fence = t.max_error_delta.unwrap_or_else(|| {
                let mut v: Vec<f64> = judged
                    .iter()
                    .map(|p| *counter_totals(p).get(c.as_str()).unwrap_or(&0) as f64)
                    .collect();
                v.sort_by(f64::total_cmp);
                let (q1, q3) = (quantile(&v, 0.25), quantile(&v, 0.75));
                (q3 + 3.0 * (q3 - q1).max(q3).max(1.0)).floor() as u64
            });
            (c, fence)
        })
        .collect();
    Reference {
        bw_gbps: bw_ref.map(f64::exp),
        bw_spread,
        lat_us: lat_ref.map(f64::exp),
        lat_spread,
        counter_fence,
        hosts: judged
            .iter()
            .flat_map(|p| [p.a.as_str(), p.b.as_str()])
            .collect::<BTreeSet<_>>()
            .len(),
        bw_figures: ok.iter().map(|p| bw_figures(p).len()).sum(),
        lat_figures: ok.iter().map(|p| lat_figures(p).len()).sum(),
    }
}

fn counter_names(pairs: &[&PairResult]) -> BTreeSet<String> {
    pairs
        .iter()
        .flat_map(|p| p.counters.values().flat_map(|m| m.keys().cloned()))
        .collect()
}

impl Reference {
    fn ratios_on(&self) -> bool {
        self.hosts >= MIN_HOSTS_FOR_RATIOS
    }

    /// Whether a bandwidth `ratio` (to the reference) over `m` figures is low beyond the ratio
    /// and `sigmas` standard errors of the noise.
    fn bw_low(&self, ratio: f64, m: usize, sigmas: f64, t: &Thresholds) -> bool {
        let Some(s) = self.bw_spread else {
            return false;
        };
        ratio < t.min_bw_ratio && ratio.ln() < -sigmas * se(s, m)
    }

    fn lat_high(&self, ratio: f64, m: usize, sigmas: f64, t: &Thresholds) -> bool {
        let Some(s) = self.lat_spread else {
            return false;
        };
        ratio > t.max_lat_ratio && ratio.ln() > sigmas * se(s, m)
    }

    fn bw_ratio(&self, v: f64) -> Option<f64> {
        self.bw_gbps.map(|r| v / r)
    }

    fn lat_ratio(&self, v: f64) -> Option<f64> {
        self.lat_us.map(|r| v / r)
    }
}

/// Each pair's rule-by-rule reasons (empty: not flagged).
fn pair_reasons(p: &PairResult, r: &Reference, t: &Thresholds) -> Vec<(Rule, String)> {
    let mut why = Vec::new();
    if let Some(e) = &p.error {
        why.push((Rule::Failure, format!("a test failed: {e}")));
    }
    let bw_sigmas = noise_sigmas(r.bw_figures);
    for (v, (from, to)) in [(p.bw_gbps, (&p.a, &p.b)), (p.bw_gbps_reverse, (&p.b, &p.a))] {
        let Some(v) = v else { continue };
        if let (true, Some(ratio)) = (r.ratios_on(), r.bw_ratio(v)) {
            if r.bw_low(ratio, 1, bw_sigmas, t) {
                why.push((
                    Rule::BwLink,
                    format!(
                        "bandwidth {from} to {to} {v:.3} Gb/s is {ratio:.2} x the reference {:.3}",
                        r.bw_gbps.unwrap_or(0.0)
                    ),
                ));
            }
        }
        if let Some(e) = t.expect_bw_gbps.filter(|e| v < *e) {
            why.push((
                Rule::ExpectBw,
                format!("bandwidth {from} to {to} {v:.3} Gb/s is below --expect-bw {e:.3}"),
            ));
        }
    }
    if let Some(v) = p.lat_us {
        if let (true, Some(ratio)) = (r.ratios_on(), r.lat_ratio(v)) {
            if r.lat_high(ratio, 1, noise_sigmas(r.lat_figures), t) {
                why.push((
                    Rule::LatLink,
                    format!(
                        "latency {v:.1} us is {ratio:.2} x the reference {:.1}",
                        r.lat_us.unwrap_or(0.0)
                    ),
                ));
            }
        }
        if let Some(e) = t.expect_lat_us.filter(|e| v > *e) {
            why.push((
                Rule::ExpectLat,
                format!("latency {v:.1} us is above --expect-lat {e:.1}"),
            ));
        }
    }
    if t.counters {
        let totals = counter_totals(p);
        let over: Vec<String> = totals
            .iter()
            .filter(|(c, d)| r.counter_fence.get(**c).is_some_and(|f| **d > *f))
            .map(|(c, _)| {
                let each: Vec<String> = p
                    .counters
                    .iter()
                    .filter_map(|(h, m)| m.get(*c).map(|d| format!("{h} +{d}")))
                    .collect();
                format!(
                    "{c} {} (above {} {})",
                    each.join(", "),
                    if t.max_error_delta.is_some() {
                        "--max-error-delta"
                    } else {
                        "the run's fence"
                    },
                    r.counter_fence[*c]
                )
            })
            .collect();
        if !over.is_empty() {
            why.push((
                Rule::Counters,
                format!("error counters rose: {}", over.join("; ")),
            ));
        }
    }
    why
}

/// Flag each pair (and say why) against the run's reference and the thresholds.
pub fn flag(pairs: &mut [PairResult], r: &Reference, t: &Thresholds) {
    for p in pairs {
        let why: Vec<String> = pair_reasons(p, r, t).into_iter().map(|w| w.1).collect();
        p.flagged = !why.is_empty();
        p.reason = p.flagged.then(|| why.join("; "));
    }
}

/// The rule that made a suspect or a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    Failure,
    Counters,
    ExpectBw,
    ExpectLat,
    BwHost,
    BwSend,
    BwRecv,
    BwGroup,
    BwLink,
    LatHost,
    LatLink,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Failure => "failure",
            Rule::Counters => "counters",
            Rule::ExpectBw => "expect-bw",
            Rule::ExpectLat => "expect-lat",
            Rule::BwHost => "bw-host",
            Rule::BwSend => "bw-send",
            Rule::BwRecv => "bw-recv",
            Rule::BwGroup => "bw-group",
            Rule::BwLink => "bw-link",
            Rule::LatHost => "lat-host",
            Rule::LatLink => "lat-link",
        }
    }
}

/// A suspect before its retest.
#[derive(Debug, Clone, PartialEq)]
pub enum Suspect {
    Host {
        rank: u32,
        host: String,
        rule: Rule,
        reason: String,
    },
    Link {
        a: (u32, String),
        b: (u32, String),
        rule: Rule,
        reason: String,
    },
    /// Hosts fast among themselves, slow to the rest.
    Group {
        members: Vec<(u32, String)>,
        rule: Rule,
        reason: String,
    },
}

impl Suspect {
    pub fn rule(&self) -> Rule {
        match self {
            Suspect::Host { rule, .. } | Suspect::Link { rule, .. } | Suspect::Group { rule, .. } => {
                *rule
            }
        }
    }

    /// The ranks it names.
    fn ranks(&self) -> Vec<u32> {
        match self {
            Suspect::Host { rank, .. } => vec![*rank],
            Suspect::Link { a, b, .. } => vec![a.0, b.0],
            Suspect::Group { members, .. } => members.iter().map(|m| m.0).collect(),
        }
    }
}

/// What the scheduled pairs say, before the retests.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Judgement {
    pub suspects: Vec<Suspect>,
    /// Fabric-wide findings (a rule that flags most pairs; counters that rise everywhere).
    pub findings: Vec<Finding>,
    /// What the verdict could not judge, a sentence each (few hosts, no noise estimate).
    pub limits: Vec<String>,
}

/// One host's scores (log ratios to the reference) and the number of figures behind each.
struct HostScore {
    all: Option<(f64, usize)>,
    send: Option<(f64, usize)>,
    recv: Option<(f64, usize)>,
}

/// Every host's scores on its pairs with hosts not in `exclude` (on all its pairs where that
/// leaves fewer than [`MIN_FIGURES_HOST`] figures).
fn host_scores<'a>(
    ok: &[&'a PairResult],
    exclude: &BTreeSet<&str>,
    reference: f64,
    ranks: &BTreeMap<&str, u32>,
) -> BTreeMap<&'a str, HostScore> {
    type Figures = (Vec<f64>, Vec<f64>);
    let mut scores: BTreeMap<&str, [Figures; 2]> = BTreeMap::new();
    for p in ok {
        for (v, from, to) in [(p.bw_gbps, &p.a, &p.b), (p.bw_gbps_reverse, &p.b, &p.a)] {
            let Some(v) = v.filter(|v| *v > 0.0) else {
                continue;
            };
            let x = v.ln();
            let e = scores.entry(from).or_default();
            e[0].0.push(x);
            if !exclude.contains(to.as_str()) {
                e[1].0.push(x);
            }
            let e = scores.entry(to).or_default();
            e[0].1.push(x);
            if !exclude.contains(from.as_str()) {
                e[1].1.push(x);
            }
        }
    }
    scores
        .into_iter()
        .map(|(h, [everyone, fine])| {
            let (send, recv) = if fine.0.len() + fine.1.len() >= MIN_FIGURES_HOST {
                fine
            } else {
                everyone
            };
            let all: Vec<f64> = send.iter().chain(&recv).copied().collect();
            (
                h,
                HostScore {
                    all: score(all, reference),
                    send: score(send, reference),
                    recv: score(recv, reference),
                },
            )
        })
        .collect()
}

fn score(v: Vec<f64>, reference: f64) -> Option<(f64, usize)> {
    let m = v.len();
    median(v).map(|x| ((x - reference).exp(), m))
}

/// Find the suspects and fabric-wide findings among the scheduled pairs (flagged already).
/// `missing`: host names of ranks that did not finish.
pub fn classify(
    pairs: &[PairResult],
    missing: &BTreeSet<String>,
    r: &Reference,
    t: &Thresholds,
) -> Judgement {
    let judged = judged(pairs, missing);
    let mut out = Judgement::default();
    let ranks: BTreeMap<&str, u32> = judged
        .iter()
        .flat_map(|p| [(p.a.as_str(), p.a_rank), (p.b.as_str(), p.b_rank)])
        .collect();
    let mut named: BTreeSet<&str> = BTreeSet::new();
    let reasons: Vec<Vec<(Rule, String)>> = judged.iter().map(|p| pair_reasons(p, r, t)).collect();

    // Pair-level rules: a host with most pairs flagged, else links, else fabric-wide.
    for rule in [Rule::Failure, Rule::Counters, Rule::ExpectBw, Rule::ExpectLat] {
        let hit: Vec<usize> = (0..judged.len())
            .filter(|i| reasons[*i].iter().any(|(x, _)| *x == rule))
            .collect();
        let hit_set: BTreeSet<usize> = hit.iter().copied().collect();
        if hit.is_empty() {
            continue;
        }
        if r.hosts >= MIN_HOSTS_FOR_RATIOS && 2 * hit.len() > judged.len() {
            out.findings.push(fabric_wide(rule, &hit, &judged, &reasons));
            continue;
        }
        let mut per_host: BTreeMap<&str, (usize, Vec<&str>)> = BTreeMap::new();
        for (i, p) in judged.iter().enumerate() {
            for (me, other) in [(p.a.as_str(), p.b.as_str()), (p.b.as_str(), p.a.as_str())] {
                let e = per_host.entry(me).or_default();
                e.0 += 1;
                if hit_set.contains(&i) {
                    e.1.push(other);
                }
            }
        }
        let is_host = |h: &str| {
            per_host
                .get(h)
                .is_some_and(|(n, f)| *n >= 2 && 2 * f.len() > *n)
        };
        for (host, (n, with)) in &per_host {
            if is_host(host) && named.insert(host) {
                out.suspects.push(Suspect::Host {
                    rank: ranks[host],
                    host: host.to_string(),
                    rule,
                    reason: format!(
                        "{} of its {n} pairs flagged by {} (with {})",
                        with.len(),
                        rule.name(),
                        shorten(with, 8)
                    ),
                });
            }
        }
        for &i in &hit {
            let p = judged[i];
            if !is_host(&p.a) && !is_host(&p.b) && !named.contains(p.a.as_str()) && !named.contains(p.b.as_str())
            {
                let why: Vec<&str> = reasons[i]
                    .iter()
                    .filter(|(x, _)| *x == rule)
                    .map(|(_, w)| w.as_str())
                    .collect();
                out.suspects.push(Suspect::Link {
                    a: (p.a_rank, p.a.clone()),
                    b: (p.b_rank, p.b.clone()),
                    rule,
                    reason: format!(
                        "{}, while {} and {} pass most of their other pairs",
                        why.join("; "),
                        p.a,
                        p.b
                    ),
                });
            }
        }
    }
    for f in counter_information(&judged, r, t) {
        out.findings.push(f);
    }

    if !r.ratios_on() {
        if r.hosts >= 2 {
            out.limits.push(format!(
                "{} hosts: the ratio rules need {MIN_HOSTS_FOR_RATIOS} (with fewer, a slow pair \
                 cannot be told from a slow host); judged by failures, counters and \
                 --expect-bw/--expect-lat only",
                r.hosts
            ));
        }
        return out;
    }
    let ok: Vec<&PairResult> = judged
        .iter()
        .copied()
        .filter(|p| p.error.is_none())
        .collect();

    // Bandwidth: hosts, directions, groups, then links.
    if let (Some(reference), Some(spread)) = (r.bw_gbps.map(f64::ln), r.bw_spread) {
        // Slow hosts, peeled worst first: each pass scores every host on its pairs with hosts
        // not yet found slow (where that leaves enough figures), so a slow host does not make
        // its partners look slow, and takes the hosts at least half as far below as the worst.
        let sig = noise_sigmas(r.hosts);
        let low_with = |s: Option<(f64, usize)>, min: usize| {
            s.is_some_and(|(x, m)| m >= min && r.bw_low(x, m, sig, t))
        };
        let mut found: BTreeSet<&str> = BTreeSet::new();
        let mut slow: Vec<(&str, Rule, String)> = Vec::new();
        for _pass in 0..16 {
            let hs = host_scores(&ok, &found, reference, &ranks);
            let mut lows: Vec<(&str, Rule, f64, &HostScore)> = Vec::new();
            for (h, s) in &hs {
                if named.contains(h) || found.contains(h) {
                    continue;
                }
                let rule = match (
                    low_with(s.send, MIN_FIGURES_DIRECTION),
                    low_with(s.recv, MIN_FIGURES_DIRECTION),
                    low_with(s.all, MIN_FIGURES_HOST),
                ) {
                    (true, false, _) => Rule::BwSend,
                    (false, true, _) => Rule::BwRecv,
                    (true, true, _) | (_, _, true) => Rule::BwHost,
                    _ => continue,
                };
                let depth = [s.all, s.send, s.recv]
                    .iter()
                    .flatten()
                    .map(|(x, _)| x.ln())
                    .fold(0.0, f64::min);
                lows.push((h, rule, depth, s));
            }
            let Some(worst) = lows.iter().map(|l| l.2).reduce(f64::min) else {
                break;
            };
            for (h, rule, depth, s) in lows {
                if depth > worst / 2.0 {
                    continue;
                }
                found.insert(h);
                let fmt = |s: Option<(f64, usize)>| {
                    s.map_or("-".into(), |(x, m)| format!("{x:.2} x over {m} figures"))
                };
                let what = match rule {
                    Rule::BwSend => "sends slowly",
                    Rule::BwRecv => "receives slowly",
                    _ => "is slow both ways",
                };
                slow.push((
                    h,
                    rule,
                    format!(
                        "{what}: its median bandwidth is {} (sending {}, receiving {}) of the \
                         reference {:.3} Gb/s; below {} x and beyond the noise ({:.1} %, {sig:.1} \
                         standard errors)",
                        fmt(s.all),
                        fmt(s.send),
                        fmt(s.recv),
                        reference.exp(),
                        t.min_bw_ratio,
                        100.0 * spread
                    ),
                ));
            }
        }
        // Groups: slow hosts connected by fast pairs among themselves.
        let slow_set: BTreeSet<&str> = slow
            .iter()
            .filter(|s| s.1 == Rule::BwHost)
            .map(|s| s.0)
            .collect();
        let fast = |p: &PairResult| {
            let v = bw_figures(p);
            let m = v.len();
            median(v).is_some_and(|x| !r.bw_low(x / reference.exp(), m, sig, t))
        };
        let mut parent: BTreeMap<&str, &str> = slow_set.iter().map(|h| (*h, *h)).collect();
        fn root<'a>(parent: &BTreeMap<&'a str, &'a str>, mut h: &'a str) -> &'a str {
            while parent[h] != h {
                h = parent[h];
            }
            h
        }
        for p in ok
            .iter()
            .filter(|p| slow_set.contains(p.a.as_str()) && slow_set.contains(p.b.as_str()))
        {
            if fast(p) {
                let (ra, rb) = (root(&parent, &p.a), root(&parent, &p.b));
                if ra != rb {
                    parent.insert(ra, rb);
                }
            }
        }
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for h in &slow_set {
            groups.entry(root(&parent, h)).or_default().push(h);
        }
        let grouped: BTreeSet<&str> = groups
            .values()
            .filter(|g| g.len() >= 2)
            .flatten()
            .copied()
            .collect();
        for g in groups.values().filter(|g| g.len() >= 2) {
            let inside: Vec<f64> = ok
                .iter()
                .filter(|p| g.contains(&p.a.as_str()) && g.contains(&p.b.as_str()))
                .flat_map(|p| bw_figures(p))
                .collect();
            let outside: Vec<f64> = ok
                .iter()
                .filter(|p| g.contains(&p.a.as_str()) != g.contains(&p.b.as_str()))
                .flat_map(|p| bw_figures(p))
                .collect();
            let (ni, no) = (inside.len(), outside.len());
            let ratio = |v: Vec<f64>| median(v).map_or(0.0, |x| x / reference.exp());
            for h in g {
                named.insert(h);
            }
            out.suspects.push(Suspect::Group {
                members: g.iter().map(|h| (ranks[h], h.to_string())).collect(),
                rule: Rule::BwGroup,
                reason: format!(
                    "{} hosts are fast among themselves ({:.2} x the reference over {ni} \
                     figures) but slow to the rest ({:.2} x over {no}): a shared switch, uplink \
                     or partition, not {} separate hosts",
                    g.len(),
                    ratio(inside),
                    ratio(outside),
                    g.len()
                ),
            });
        }
        for (h, rule, reason) in slow {
            if grouped.contains(h) || !named.insert(h) {
                continue;
            }
            out.suspects.push(Suspect::Host {
                rank: ranks[h],
                host: h.to_string(),
                rule,
                reason,
            });
        }
        // Links: a slow pair between hosts that are fine.
        let lsig = noise_sigmas(ok.len());
        for p in &ok {
            if named.contains(p.a.as_str()) || named.contains(p.b.as_str()) {
                continue;
            }
            let v = bw_figures(p);
            let Some(mean) = (!v.is_empty())
                .then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
            else {
                continue;
            };
            let reason = r.bw_low(mean / reference.exp(), v.len(), lsig, t).then(|| {
                format!(
                    "the pair's bandwidth is {:.2} x the reference {:.3} Gb/s ({} Gb/s), while \
                     {} and {} are fine with their other pairs",
                    mean / reference.exp(),
                    reference.exp(),
                    v.iter()
                        .map(|x| format!("{x:.3}"))
                        .collect::<Vec<_>>()
                        .join(" and "),
                    p.a,
                    p.b
                )
            });
            if let Some(reason) = reason {
                out.suspects.push(Suspect::Link {
                    a: (p.a_rank, p.a.clone()),
                    b: (p.b_rank, p.b.clone()),
                    rule: Rule::BwLink,
                    reason,
                });
            }
        }
    } else if r.bw_figures > 0 {
        out.limits
            .push("bandwidth: too few figures for a noise estimate; not judged by ratio".into());
    }

    // Latency: hosts, then links.
    if let (Some(reference), Some(spread)) = (r.lat_us.map(f64::ln), r.lat_spread) {
        let per = per_host_logs(&ok, lat_figures);
        let sig = noise_sigmas(per.len());
        for (h, v) in &per {
            if named.contains(h) {
                continue;
            }
            if let Some((x, m)) = score(v.clone(), reference) {
                if m >= MIN_FIGURES_DIRECTION && r.lat_high(x, m, sig, t) {
                    named.insert(h);
                    out.suspects.push(Suspect::Host {
                        rank: ranks[h],
                        host: h.to_string(),
                        rule: Rule::LatHost,
                        reason: format!(
                            "its median latency is {x:.2} x the reference {:.1} us over {m} \
                             pairs; above {} x and beyond the noise ({:.0} %, {sig:.1} standard \
                             errors)",
                            reference.exp(),
                            t.max_lat_ratio,
                            100.0 * spread
                        ),
                    });
                }
            }
        }
        let lsig = noise_sigmas(ok.len());
        for p in &ok {
            if named.contains(p.a.as_str()) || named.contains(p.b.as_str()) {
                continue;
            }
            let Some(x) = p.lat_us.map(|v| v / reference.exp()) else {
                continue;
            };
            if r.lat_high(x, 1, lsig, t) {
                out.suspects.push(Suspect::Link {
                    a: (p.a_rank, p.a.clone()),
                    b: (p.b_rank, p.b.clone()),
                    rule: Rule::LatLink,
                    reason: format!(
                        "the pair's latency is {x:.2} x the reference {:.1} us, while {} and {} \
                         are fine with their other pairs",
                        reference.exp(),
                        p.a,
                        p.b
                    ),
                });
            }
        }
    }
    out
}

/// At most `n` names, then "and K more".
fn shorten(names: &[&str], n: usize) -> String {
    if names.len() <= n {
        names.join(", ")
    } else {
        format!("{} and {} more", names[..n].join(", "), names.len() - n)
    }
}

/// One finding for a rule that flags most pairs.
fn fabric_wide(
    rule: Rule,
    hit: &[usize],
    judged: &[&PairResult],
    reasons: &[Vec<(Rule, String)>],
) -> Finding {
    let first = reasons[hit[0]]
        .iter()
        .find(|(x, _)| *x == rule)
        .map_or("", |w| w.1.as_str());
    Finding {
        rule: rule.name().into(),
        fails: true,
        pairs: hit.len() as u32,
        text: format!(
            "{} of {} pairs flagged by {} (e.g. {} - {}: {first}): a fabric-wide condition, no \
             single host stands out",
            hit.len(),
            judged.len(),
            rule.name(),
            judged[hit[0]].a,
            judged[hit[0]].b
        ),
    }
}

/// Counters that rose on half the pairs or more: one line of information each group.
fn counter_information(judged: &[&PairResult], r: &Reference, t: &Thresholds) -> Vec<Finding> {
    if judged.is_empty() {
        return Vec::new();
    }
    let mut rose: BTreeMap<String, (u32, u64, u64)> = BTreeMap::new();
    for p in judged {
        for (c, d) in counter_totals(p) {
            let e = rose.entry(c.to_string()).or_insert((0, u64::MAX, 0));
            e.0 += 1;
            e.1 = e.1.min(d);
            e.2 = e.2.max(d);
        }
    }
    let wide: Vec<(String, (u32, u64, u64))> = rose
        .into_iter()
        .filter(|(_, (n, ..))| 2 * *n as usize >= judged.len())
        .collect();
    if wide.is_empty() {
        return Vec::new();
    }
    let most = wide.iter().map(|w| w.1.0).max().unwrap_or(0);
    let list: Vec<String> = wide
        .iter()
        .map(|(c, (_, lo, hi))| {
            format!(
                "{c} +{lo}..+{hi} (fence {})",
                r.counter_fence.get(c).copied().unwrap_or(0)
            )
        })
        .collect();
    vec![Finding {
        rule: "counters".into(),
        fails: false,
        pairs: most,
        text: format!(
            "error counters rose on {most} of {} pairs: {}; a fabric-wide condition (judged \
             against the run's own pairs{}), no single host stands out",
            judged.len(),
            list.join(", "),
            if t.counters { "" } else { "; not judged: --no-counter-check" }
        ),
    }]
}

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

fn pick(passed: &[u32], next: &mut usize, rank: u32) -> Option<Pair> {
    if passed.is_empty() {
        return None;
    }
    let partner = passed[*next % passed.len()];
    *next += 1;
    Some((partner.min(rank), partner.max(rank)))
}

/// Whether a retest pair shows the suspect's rule again (with the retest's noise gate).
fn confirms(s: &Suspect, p: &PairResult, r: &Reference, t: &Thresholds) -> bool {
    if p.error.is_some() {
        return true;
    }
    let reasons = pair_reasons(p, r, t);
    let by = |rule: Rule| reasons.iter().any(|(x, _)| *x == rule);
    let reference = r.bw_gbps.unwrap_or(0.0);
    let low = |v: Vec<f64>| {
        let m = v.len();
        !v.is_empty()
            && reference > 0.0
            && r.bw_low(
                (v.iter().map(|x| x.ln()).sum::<f64>() / m as f64).exp() / reference,
                m,
                RETEST_SIGMAS,
                t,
            )
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
        Rule::LatHost | Rule::LatLink => p.lat_us.is_some_and(|v| {
            r.lat_us
                .is_some_and(|l| r.lat_high(v / l, 1, RETEST_SIGMAS, t))
        }),
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
                let name = shorten(
                    &names.iter().map(String::as_str).collect::<Vec<_>>(),
                    16,
                );
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

#[cfg(test)]
mod tests;
