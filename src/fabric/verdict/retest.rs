//! The retests of the suspects, round by round within the budget, beside control pairs
//! ([`super::controls`]), and where each suspect stands after them.

use super::controls::{CONTROL_SIGMAS, Controls};
use super::partners::Partners;
use super::*;
use crate::fabric::schedule::pack;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::rc::Rc;

/// Where a suspect's retests stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not decided yet: retested again next round (within the budget).
    Pending,
    /// A retest reproduced the fault (or none could run for a fault that stood out).
    Confirmed,
    /// Its retests passed.
    Cleared,
    /// The budget ran out before its figures could decide.
    Undecided,
}

/// A suspect and its retests.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub suspect: Suspect,
    /// Its retest pairs, in the order they ran.
    pub retests: Vec<Retest>,
    pub state: State,
}

/// A retest pair's result as a trial keeps it: the figures, the hosts' names (shared) and the
/// rules that flag it. A fleet's round may retest a million pairs: the results themselves,
/// with their counters and sentences, go to the caller as they come (1.3 GB at 4096 hosts
/// all-pairs in the lab's noise, held to the end, made the verdict's peak).
#[derive(Debug, Clone, PartialEq)]
pub struct Retest {
    pub a: Rc<str>,
    pub b: Rc<str>,
    pub a_rank: u32,
    pub bw_gbps: Option<f64>,
    pub bw_gbps_reverse: Option<f64>,
    pub lat_us: Option<f64>,
    pub error: Option<Rc<str>>,
    /// Its latency says a host stalled while it ran ([`Reference::stalled`]): its bandwidth
    /// counts neither way.
    pub stalled: bool,
    /// Not stalled by its latency, but slow both ways with a latency above the reference's, as
    /// a stall is ([`Reference::stall_like`]): a bw-link counts it only once its retests show
    /// it twice.
    pub stall_like: bool,
    /// Its yardstick from its round, Gb/s: the median bandwidth of the control pairs run
    /// beside it (both ways), where it is above the reference beyond the noise
    /// ([`CONTROL_SIGMAS`]). None: judged against the reference.
    pub control_bw_gbps: Option<f64>,
    /// The rules that flag it ([`pair_reasons`]).
    rules: Rules,
}

impl Retest {
    /// The record of `p`, a retest's result.
    pub fn of(p: &PairResult, r: &Reference, t: &Thresholds) -> Retest {
        let rules = Rules::of(&pair_reasons(p, r, t));
        let stalled = r.stalled(p.lat_us, t);
        let stall_like = !stalled && r.stall_like(p, t);
        Retest::named(
            p,
            rules,
            [stalled, stall_like],
            p.a.as_str().into(),
            p.b.as_str().into(),
        )
    }

    fn named(p: &PairResult, rules: Rules, stall: [bool; 2], a: Rc<str>, b: Rc<str>) -> Retest {
        let [stalled, stall_like] = stall;
        Retest {
            a,
            b,
            a_rank: p.a_rank,
            bw_gbps: p.bw_gbps,
            bw_gbps_reverse: p.bw_gbps_reverse,
            lat_us: p.lat_us,
            error: p.error.as_deref().map(Rc::from),
            stalled,
            stall_like,
            control_bw_gbps: None,
            rules,
        }
    }

    /// What its bandwidth figures are judged against: the reference, or its round's controls
    /// where they ran faster (a retest never judged against less than the reference).
    fn yardstick(&self, reference: f64) -> f64 {
        self.control_bw_gbps.map_or(reference, |c| c.max(reference))
    }
}

/// What the retests are planned over: the judged pairs, every rank of the run and its host, the
/// hosts of ranks that did not finish.
pub(super) type Fabric<'a> = (&'a Sheet, &'a [(u32, String)], &'a BTreeSet<String>);

/// Retest the suspects of `j` (its suspects and held links, taken), round by round, until each
/// is decided or `t.retest_rounds` rounds have run. A round's retests are packed into rounds
/// of pairs at once ([`pack`]), each filled with control pairs from `sheet` (pairs it measured
/// healthy, [`Controls`]) up to a scheduled round's size and run by one call of `run_retests`
/// (a [`RetestRound`]; it returns the results of its pairs). Each result goes
/// to `keep` at the end of its packed round (flagged, marked retested; a control marked so,
/// not judged; a retest with its round's control bandwidth). Returns the trials and what the
/// retests cost.
pub(super) fn run<E, I: IntoIterator<Item = PairResult>>(
    j: &mut Judgement,
    (sheet, ranks, missing): Fabric,
    r: &Reference,
    t: &Thresholds,
    mut run_retests: impl FnMut(RetestRound) -> Result<I, E>,
    mut keep: impl FnMut(PairResult),
) -> Result<(Vec<Trial>, RetestSummary), E> {
    let suspects = std::mem::take(&mut j.suspects);
    let mut held = std::mem::take(&mut j.held);
    let controls = {
        let all: Vec<&Suspect> = suspects.iter().chain(held.iter()).collect();
        Controls::new(sheet, &all, ranks, missing, r, t)
    };
    // A held link's far end is no partner either: a host retested against the other end of
    // its own slow link measures the link again (the lab's fab4, slow to fab2 both ways, was
    // retested against fab2 and "confirmed" as a slow sender).
    let mut partners = Partners::new(suspects.iter().chain(held.iter()), ranks, missing);
    let mut trials: Vec<Trial> = suspects
        .into_iter()
        .map(|suspect| Trial {
            suspect,
            retests: Vec::new(),
            state: State::Pending,
        })
        .collect();
    let mut summary = RetestSummary {
        budget_rounds: t.retest_rounds,
        ..RetestSummary::default()
    };
    // Each host's name once (shared by its retests' records).
    let mut names: HashMap<String, Rc<str>> = HashMap::new();
    let mut name = |h: &str| -> Rc<str> {
        if let Some(x) = names.get(h) {
            return Rc::clone(x);
        }
        let x: Rc<str> = h.into();
        names.insert(h.to_string(), Rc::clone(&x));
        x
    };
    // The budget's rounds, then one more only for the links a host held until the budget's
    // end (cleared in its last round, or undecided): judged on their one scheduled figure
    // alone, the lab's noise named two healthy links so.
    for round in 0..t.retest_rounds + (t.retest_rounds > 0) as u32 {
        let extra = round == t.retest_rounds;
        if extra {
            // The hosts and groups are done: their held links go free (not yet judged).
            for x in trials.iter_mut().filter(|x| x.state == State::Pending) {
                if !matches!(x.suspect.target, Target::Link { .. }) {
                    x.state = x.unretested();
                }
            }
            held = release(&mut trials, held, r, t);
        }
        let plan: Vec<(usize, Pair)> = trials
            .iter()
            .enumerate()
            .filter(|(_, x)| x.state == State::Pending)
            .filter(|(_, x)| {
                !extra || (x.retests.is_empty() && matches!(x.suspect.target, Target::Link { .. }))
            })
            .filter_map(|(i, x)| {
                partners
                    .pick(&x.suspect.target, x.retests.len())
                    .map(|p| (i, p))
            })
            .collect();
        if plan.is_empty() {
            break;
        }
        let unique: Vec<Pair> = plan
            .iter()
            .map(|x| x.1)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        // Each pair's first result, as its record (a fleet's round retests hundreds of
        // thousands of links); the results go to `keep` one by one, a packed round's at its
        // end (each retest's yardstick is its round's controls).
        let mut by_pair: HashMap<Pair, usize> = HashMap::with_capacity(unique.len());
        let mut records: Vec<Retest> = Vec::with_capacity(unique.len());
        // Each retest round has a scheduled round's load: its retests packed as the schedule
        // packs pairs, the idle hosts paired by controls (a retest alone ran 1.5 x the loaded
        // reference in the lab and cleared a link slow under load), run at once.
        let mut used: BTreeSet<Pair> = BTreeSet::new();
        for retests in pack(controls.ranks(), unique) {
            let planned = controls.plan(&retests, &mut used);
            if planned.is_empty() {
                summary.rounds_without_controls += 1;
            }
            let control: BTreeSet<Pair> = planned.iter().copied().collect();
            let pairs = RetestRound {
                round: round + 1,
                retests,
                controls: planned,
            };
            let (mut results, mut yard) = (Vec::new(), Vec::new());
            let first = records.len();
            for mut p in run_retests(pairs)? {
                p.retested = true;
                let pair = (p.a_rank.min(p.b_rank), p.a_rank.max(p.b_rank));
                if control.contains(&pair) {
                    // Not judged: a yardstick, when it measured (no failure, no stall).
                    p.control = true;
                    summary.controls += 1;
                    if p.error.is_none() && !r.stalled(p.lat_us, t) {
                        yard.extend([p.bw_gbps, p.bw_gbps_reverse].into_iter().flatten());
                    }
                    results.push(p);
                    continue;
                }
                summary.pairs += 1;
                let rules = flag_one(&mut p, r, t);
                let stalled = r.stalled(p.lat_us, t);
                let stall_like = !stalled && r.stall_like(&p, t);
                summary.stalled += stalled as u32;
                if let Entry::Vacant(e) = by_pair.entry(pair) {
                    e.insert(records.len());
                    let stall = [stalled, stall_like];
                    records.push(Retest::named(&p, rules, stall, name(&p.a), name(&p.b)));
                }
                results.push(p);
            }
            let m = yard.len();
            let yard = median(yard);
            let stands = |c: f64| {
                let beyond = |(x, s): (f64, f64)| (c / x).ln() > CONTROL_SIGMAS * se(s, m);
                r.bw_gbps.zip(r.bw_spread).is_some_and(beyond)
            };
            for x in &mut records[first..] {
                x.control_bw_gbps = yard.filter(|c| stands(*c));
            }
            for mut p in results {
                if !p.control {
                    p.control_bw_gbps = yard;
                }
                keep(p);
            }
        }
        summary.rounds += 1;
        for (i, pair) in plan {
            if let Some(&k) = by_pair.get(&pair) {
                trials[i].retests.push(records[k].clone());
            }
            trials[i].state = trials[i].decide(r, t);
        }
        drop((by_pair, records));
        held = release(&mut trials, held, r, t);
    }
    settle(&mut trials, r, t);
    // Links still held by a host that ended undecided (or never retested) are judged as they
    // stand: never dropped.
    let _ = release(&mut trials, held, r, t);
    settle(&mut trials, r, t);
    summary.undecided = trials
        .iter()
        .filter(|x| x.state == State::Undecided)
        .count() as u32;
    Ok((trials, summary))
}

/// The retests are over: what is still pending ends as [`Trial::unretested`] says, once judged
/// on its retests that looked like a stall where they are all it has (no other is to come).
fn settle(trials: &mut [Trial], r: &Reference, t: &Thresholds) {
    for x in trials.iter_mut().filter(|x| x.state == State::Pending) {
        let alone = x.retests.iter().any(|p| p.stall_like)
            && x.retests.iter().all(|p| p.stall_like || p.stalled);
        if alone {
            for p in &mut x.retests {
                p.stall_like = false;
            }
            x.state = x.decide(r, t);
            if x.state != State::Pending {
                continue;
            }
        }
        x.state = x.unretested();
    }
}

/// The held links whose hosts and groups are no longer suspects (cleared, or undecided) join
/// the trials: merged into a trial of the same link where there is one (which is pending again
/// if it was cleared), else new and pending. Returns the links still held.
fn release(
    trials: &mut Vec<Trial>,
    held: Vec<Suspect>,
    r: &Reference,
    t: &Thresholds,
) -> Vec<Suspect> {
    let standing: BTreeSet<u32> = trials
        .iter()
        .filter(|x| {
            matches!(x.state, State::Pending | State::Confirmed)
                && !matches!(x.suspect.target, Target::Link { .. })
        })
        .flat_map(|x| x.suspect.target.ranks())
        .collect();
    let (free, still): (Vec<Suspect>, Vec<Suspect>) = held
        .into_iter()
        .partition(|s| s.target.ranks().iter().all(|r| !standing.contains(r)));
    if free.is_empty() {
        return still;
    }
    // Where each goes: the first trial of its target (Ok), or the first of the free links
    // with its target, which becomes a new trial (Err).
    let goes: Vec<Result<usize, usize>> = {
        let mut trial_of: HashMap<&Target, usize> = HashMap::with_capacity(trials.len());
        for (i, x) in trials.iter().enumerate() {
            trial_of.entry(&x.suspect.target).or_insert(i);
        }
        let mut first: HashMap<&Target, usize> = HashMap::new();
        free.iter()
            .enumerate()
            .map(|(k, s)| match trial_of.get(&s.target) {
                Some(&i) => Ok(i),
                None => Err(*first.entry(&s.target).or_insert(k)),
            })
            .collect()
    };
    let mut new_trial = vec![usize::MAX; free.len()];
    for (k, (suspect, goes)) in free.into_iter().zip(goes).enumerate() {
        let i = match goes {
            Ok(i) => i,
            Err(first) if first != k => new_trial[first],
            Err(_) => {
                new_trial[k] = trials.len();
                trials.push(Trial {
                    suspect,
                    retests: Vec::new(),
                    state: State::Pending,
                });
                continue;
            }
        };
        let x = &mut trials[i];
        x.suspect.charges.extend(suspect.charges);
        if x.state == State::Cleared {
            // Its retests so far judge the new charges too (none: pending).
            x.state = x.decide(r, t);
        }
    }
    still
}

/// A suspect's bandwidth figures in a retest pair, in `direction` (None: both ways).
fn figures(target: &Target, direction: Option<Direction>, p: &Retest) -> Vec<f64> {
    let first = match target {
        Target::Host { rank, .. } => *rank,
        Target::Group { members } => members[0].0,
        Target::Link { a, .. } => a.0,
    };
    let (out, back) = if first == p.a_rank {
        (p.bw_gbps, p.bw_gbps_reverse)
    } else {
        (p.bw_gbps_reverse, p.bw_gbps)
    };
    match direction {
        Some(Direction::Send) => vec![out],
        Some(Direction::Receive) => vec![back],
        _ => vec![out, back],
    }
    .into_iter()
    .flatten()
    .collect()
}

/// Whether `rule` judges a suspect by its retests' bandwidth (the figures a stall spoils).
fn judges_bandwidth(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::BwHost | Rule::BwSend | Rule::BwRecv | Rule::BwGroup | Rule::BwLink | Rule::ExpectBw
    )
}

pub(super) fn geometric_mean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp()
}

impl Trial {
    /// The retests that count for charge `c`: for a bandwidth charge, those without a stall.
    pub(super) fn counted<'a>(&'a self, c: &Charge) -> impl Iterator<Item = &'a Retest> + 'a {
        let bandwidth = judges_bandwidth(c.rule);
        // A bw-link's retests that look like a stall count once there are two of them.
        let lone = c.rule == Rule::BwLink
            && self.retests.iter().filter(|p| p.stall_like).count() < STALL_LIKE_TO_COUNT;
        self.retests
            .iter()
            .filter(move |p| !(bandwidth && p.stalled || lone && p.stall_like))
    }

    /// Where one charge stands after the retests so far.
    pub fn charge_state(&self, c: &Charge, r: &Reference, t: &Thresholds) -> State {
        let Some(last) = self.retests.last() else {
            return State::Pending;
        };
        // A retest that failed keeps every charge (fail closed).
        if last.error.is_some() {
            return State::Confirmed;
        }
        let by = |rule: Rule| last.rules.has(rule);
        let stands = |yes: bool| {
            if yes {
                State::Confirmed
            } else {
                State::Cleared
            }
        };
        match c.rule {
            Rule::Failure => State::Cleared,
            Rule::Counters | Rule::ExpectLat => stands(by(c.rule)),
            // The last retest without a stall (none yet: retested again).
            Rule::ExpectBw => self
                .counted(c)
                .last()
                .map_or(State::Pending, |p| stands(p.rules.has(c.rule))),
            Rule::LatHost | Rule::LatLink => latency::retest_state(&self.retests, c, r, t),
            Rule::BwHost | Rule::BwSend | Rule::BwRecv | Rule::BwGroup | Rule::BwLink => {
                let Some(reference) = r.bw_gbps.filter(|x| *x > 0.0) else {
                    return State::Confirmed;
                };
                // Each retest's figures (a figure of 0 is kept, as the least there is), those
                // measured while a host stalled left out: a paused guest's figure is no more
                // the link's than a failed test's (CI: a false suspect confirmed on a retest at
                // 0.51 x with a latency of 1657.9 us, 2.8 x the run's).
                // Each retest's ratios against `yardstick` (the reference, or its round's
                // controls where they ran faster).
                let against = |yardstick: &dyn Fn(&Retest) -> f64| -> Vec<Vec<f64>> {
                    self.counted(c)
                        .map(|p| {
                            let by = yardstick(p);
                            figures(&self.suspect.target, c.direction, p)
                                .into_iter()
                                .filter(|v| *v >= 0.0)
                                .map(|v| v.max(f64::MIN_POSITIVE) / by)
                                .collect()
                        })
                        .collect()
                };
                // A retest run at the schedule's load is judged at it: against its round's
                // controls where they ran faster than the reference (a retest alone ran 1.5 x
                // the loaded reference in the lab), never against less than the reference. The
                // gross floor stays the reference's (half of it, whatever the round's load):
                // the heavy tail's figures near half the reference are not gross by a
                // yardstick a few per cent above it.
                let each = against(&|p| p.yardstick(reference));
                let each_gross = against(&|_| reference);
                let ratios: Vec<f64> = each.iter().flatten().copied().collect();
                if ratios.is_empty() {
                    return State::Pending;
                }
                // Retests at the ratio clear it (noise, or a passing slowdown). It stands when
                // it was at half the reference or below twice, or when every retest is below
                // the ratio and the retests alone (fresh figures, not the one picked for being
                // low) stand out beyond the noise, over two retests at least (one outlier of
                // a heavy-tailed noise is not a fault). Else more figures are needed.
                // The median, not the mean: one retest in the noise's tail (the lab's
                // heavy-tailed noise has 4 % of its figures near half the reference) is
                // out-voted by the others rather than keeping the suspect undecided.
                if median(ratios.clone()).is_some_and(|m| m >= t.min_bw_ratio) {
                    return State::Cleared;
                }
                let gross = GROSS_BW_RATIO.min(t.min_bw_ratio);
                // Sightings: the schedule's, then each retest's (one a retest, whatever
                // number of its figures were at the floor).
                let seen_gross = c.ratios.iter().any(|x| *x <= gross) as usize
                    + each_gross
                        .iter()
                        .filter(|v| v.iter().any(|x| *x <= gross))
                        .count();
                if seen_gross >= 2
                    || (each.len() >= MIN_RETESTS_TO_CONFIRM
                        && ratios.iter().all(|x| *x < t.min_bw_ratio)
                        && r.bw_low_mean(geometric_mean(&ratios), ratios.len(), c.sigmas, t))
                {
                    State::Confirmed
                } else {
                    State::Pending
                }
            }
        }
    }

    /// Confirmed when a charge is, cleared when every charge is, else pending.
    pub(super) fn decide(&self, r: &Reference, t: &Thresholds) -> State {
        let states: Vec<State> = self
            .suspect
            .charges
            .iter()
            .map(|c| self.charge_state(c, r, t))
            .collect();
        if states.contains(&State::Confirmed) {
            State::Confirmed
        } else if states.iter().all(|s| *s == State::Cleared) {
            State::Cleared
        } else {
            State::Pending
        }
    }

    /// Still pending when the retests end: a charge that stood out (or was gross) and was never
    /// retested, or whose retests all stalled, stands; retested within the budget and still
    /// undecided, it is said so.
    fn unretested(&self) -> State {
        if self
            .suspect
            .charges
            .iter()
            .any(|c| c.gate != Gate::Undecided && self.counted(c).next().is_none())
        {
            State::Confirmed
        } else {
            State::Undecided
        }
    }
}
