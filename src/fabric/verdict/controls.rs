//! The control pairs of the retest rounds: pairs the schedule measured healthy, run beside a
//! round's retests so that it has a scheduled round's load, their bandwidth the retests'
//! yardstick (a retest alone ran 1.2 to 2.0 x the loaded reference in the lab, and cleared a
//! link slow only under load).

use super::*;

/// A retest round's controls are its retests' yardstick when their median bandwidth is above
/// the reference by more than this many standard errors of a median of their figures: a
/// round that ran faster than the schedule (a retest alone ran 1.2 to 2.0 x the loaded
/// reference in the lab), not the noise of a few figures (the higher of the reference and any
/// controls' median is above the reference on average: in tests/fabric_verdict.rs, the lab's
/// noise, a 4-host fabric's one control pair at 1.03 x turned a healthy link's retest at
/// 0.905 x into 0.876 x and named it).
pub const CONTROL_SIGMAS: f64 = 2.0;

/// How many healthy partners of each host the control plan keeps (a fleet's sheet has millions
/// of pairs; a few per host match a round's idle hosts).
const CONTROL_PARTNERS: usize = 8;

/// The control pairs of the retest rounds: pairs the schedule measured healthy (no failure,
/// both ways at the ratio or above, no stall), between hosts that are neither suspects nor
/// missing, over no suspect or held link; a few per host.
pub(super) struct Controls {
    partners: Vec<Vec<u32>>,
    /// Pairs a scheduled round ran at once (half the hosts judged): a retest round is filled
    /// with controls up to it.
    round_pairs: usize,
}

impl Controls {
    pub(super) fn new(
        sheet: &Sheet,
        suspects: &[&Suspect],
        ranks: &[(u32, String)],
        missing: &BTreeSet<String>,
        r: &Reference,
        t: &Thresholds,
    ) -> Controls {
        let n = ranks.iter().map(|x| x.0 as usize + 1).max().unwrap_or(0);
        let mut out_host = vec![false; n];
        for (rank, host) in ranks {
            out_host[*rank as usize] = missing.contains(host);
        }
        let mut links: BTreeSet<Pair> = BTreeSet::new();
        for s in suspects {
            match &s.target {
                Target::Link { a, b } => {
                    links.insert((a.0.min(b.0), a.0.max(b.0)));
                }
                x => {
                    for k in x.ranks() {
                        if let Some(o) = out_host.get_mut(k as usize) {
                            *o = true;
                        }
                    }
                }
            }
        }
        let usable = |k: u32| out_host.get(k as usize) == Some(&false);
        let mut partners = vec![Vec::new(); n];
        let reference = r.bw_gbps.filter(|x| *x > 0.0);
        for (_, f) in sheet.ok() {
            let (a, b) = (sheet.rank(f.a), sheet.rank(f.b));
            let pair = (a.min(b), a.max(b));
            let healthy = reference.is_some_and(|x| {
                let both = [f.bw(), f.bw_reverse()];
                both.iter()
                    .all(|v| v.is_some_and(|v| v / x >= t.min_bw_ratio))
            }) && !r.stalled(f.lat(), t);
            if a == b || !healthy || !usable(a) || !usable(b) || links.contains(&pair) {
                continue;
            }
            for (x, y) in [(a, b), (b, a)] {
                let mine = &mut partners[x as usize];
                if mine.len() < CONTROL_PARTNERS {
                    mine.push(y);
                }
            }
        }
        let judged = ranks.iter().filter(|(_, h)| !missing.contains(h)).count();
        Controls {
            partners,
            round_pairs: judged / 2,
        }
    }

    /// The ranks it knows (one more than the highest).
    pub(super) fn ranks(&self) -> u32 {
        self.partners.len() as u32
    }

    /// The control pairs beside the retests of `round` (greedily matched among its idle
    /// hosts, each control pair once in `used`), up to a scheduled round's size.
    pub(super) fn plan(&self, round: &[Pair], used: &mut BTreeSet<Pair>) -> Vec<Pair> {
        let mut busy = vec![false; self.partners.len()];
        for (a, b) in round {
            for k in [a, b] {
                if let Some(x) = busy.get_mut(*k as usize) {
                    *x = true;
                }
            }
        }
        let mut out = Vec::new();
        for a in 0..self.partners.len() {
            if round.len() + out.len() >= self.round_pairs {
                break;
            }
            if busy[a] {
                continue;
            }
            let a = a as u32;
            let free = |b: &&u32| !busy[**b as usize] && !used.contains(&(a.min(**b), a.max(**b)));
            if let Some(&b) = self.partners[a as usize].iter().find(free) {
                let pair = (a.min(b), a.max(b));
                used.insert(pair);
                busy[a as usize] = true;
                busy[b as usize] = true;
                out.push(pair);
            }
        }
        out
    }
}
