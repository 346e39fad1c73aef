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
    if m <= 2 {
        sigma / root
    } else {
        1.2533 * sigma / root
    }
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
            Suspect::Host { rule, .. }
            | Suspect::Link { rule, .. }
            | Suspect::Group { rule, .. } => *rule,
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

/// The whole verdict on a run: what [`judge`] returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    pub reference: Reference,
    pub findings: Vec<Finding>,
    pub limits: Vec<String>,
    /// The suspects the retests confirmed (or that could not be retested).
    pub suspects: Suspects,
    /// Every suspect before its retest: rule, figures and what the retest said.
    pub notes: Vec<SuspectNote>,
}

/// Judge the scheduled `pairs` (flagging them): reference, suspects, then each suspect's retest
/// through `run_retests` (given the pairs of ranks to run, it returns their results; not called
/// when `retest` is false or there is no suspect), then the final word. The retests' results are
/// appended to `pairs`. `ranks`: every rank of the run and its host; `missing`: the hosts of
/// ranks that did not finish.
pub fn judge<E>(
    pairs: &mut Vec<PairResult>,
    ranks: &[(u32, String)],
    missing: &BTreeSet<String>,
    t: &Thresholds,
    retest: bool,
    run_retests: impl FnOnce(Vec<Pair>) -> Result<Vec<PairResult>, E>,
) -> Result<Verdict, E> {
    let reference = reference(pairs, missing, t);
    flag(pairs, &reference, t);
    let judgement = classify(pairs, missing, &reference, t);
    let suspects = &judgement.suspects;
    let planned: Vec<Option<Pair>> = if retest && !suspects.is_empty() {
        retest_pairs(suspects, ranks, missing)
    } else {
        vec![None; suspects.len()]
    };
    let unique: Vec<Pair> = planned
        .iter()
        .flatten()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut results = if unique.is_empty() {
        Vec::new()
    } else {
        run_retests(unique)?
    };
    for p in &mut results {
        p.retested = true;
    }
    flag(&mut results, &reference, t);
    let retests: Vec<Option<&PairResult>> = planned
        .iter()
        .map(|p| {
            p.and_then(|(a, b)| {
                results
                    .iter()
                    .find(|r| r.a_rank.min(r.b_rank) == a && r.a_rank.max(r.b_rank) == b)
            })
        })
        .collect();
    let (suspects, notes) = conclude(suspects, &retests, &reference, t);
    pairs.extend(results);
    Ok(Verdict {
        reference,
        findings: judgement.findings,
        limits: judgement.limits,
        suspects,
        notes,
    })
}

mod classify;
mod reference;
mod retest;
pub use classify::classify;
use classify::*;
use reference::*;
pub use reference::{flag, median, reference};
pub use retest::{conclude, host_summary, retest_pairs};

#[cfg(test)]
mod tests;
