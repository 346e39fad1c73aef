//! Who retests whom: the partner of each suspect in a retest round.

use super::*;
use std::collections::HashMap;

/// Who retests whom: each suspect host against a host that passed (neither a suspect nor a
/// suspect link's end; the next one each time, so several suspects and rounds get different
/// ones where there are enough), each suspect link run again, a group's first member against a
/// host outside it.
///
/// Where every host is involved (a small fabric), a host is retested over one of its own
/// suspect or held links, the least slow of them first and the slowest never while another is
/// left: over its slowest link a retest measures that link again (the lab's fab4, charged by
/// fab2 -> fab4 at 0.15 x and a noisy fab1 - fab4, was retested against fab2 and "confirmed" as
/// a slow receiver; the link was never named). A host slow to everyone is slow over its least
/// slow link too; a link fault with noise beside it is not.
pub(super) struct Partners {
    passed: Vec<u32>,
    /// Each passed rank's place in `passed`.
    at: HashMap<u32, usize>,
    /// The suspect and held links (lower rank first), each with its slowest scheduled figure
    /// as a ratio to the reference (0 where a rule charged it without one: a failure).
    links: HashMap<Pair, f64>,
    next: usize,
}

/// How many of the passed hosts a pick looks at for one that is not over a suspect link (a
/// fleet's round picks for thousands of suspects).
const PICK_SCAN: usize = 64;

impl Partners {
    pub(super) fn new<'a>(
        suspects: impl Iterator<Item = &'a Suspect>,
        ranks: &[(u32, String)],
        missing: &BTreeSet<String>,
    ) -> Partners {
        let mut involved: BTreeSet<u32> = BTreeSet::new();
        let mut suspect_hosts: BTreeSet<u32> = BTreeSet::new();
        let mut links: HashMap<Pair, f64> = HashMap::new();
        for s in suspects {
            involved.extend(s.target.ranks());
            match &s.target {
                Target::Link { a, b } => {
                    let slowest = s
                        .charges
                        .iter()
                        .map(|c| c.ratios.iter().copied().reduce(f64::min).unwrap_or(0.0))
                        .fold(f64::INFINITY, f64::min);
                    let e = links
                        .entry((a.0.min(b.0), a.0.max(b.0)))
                        .or_insert(f64::INFINITY);
                    *e = e.min(slowest);
                }
                _ => suspect_hosts.extend(s.target.ranks()),
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
        let mut at = HashMap::with_capacity(passed.len());
        for (i, r) in passed.iter().enumerate() {
            at.entry(*r).or_insert(i);
        }
        Partners {
            passed,
            at,
            links,
            next: 0,
        }
    }

    /// The retest pair of `target` in its retest number `attempt` (0 for the first).
    pub(super) fn pick(&mut self, target: &Target, attempt: usize) -> Option<Pair> {
        let rank = match target {
            Target::Link { a, b } => return Some((a.0.min(b.0), a.0.max(b.0))),
            Target::Host { rank, .. } => *rank,
            Target::Group { members } => members[0].0,
        };
        // The next of the hosts that passed, the suspect itself left out (without a list of
        // them for each pick: a fleet's round picks for thousands of suspects).
        let own = self.at.get(&rank).copied();
        let n = self.passed.len() - own.is_some() as usize;
        if n == 0 {
            return None;
        }
        let nth = |k: usize| {
            let k = k % n;
            let partner = self.passed[if own.is_some_and(|o| k >= o) {
                k + 1
            } else {
                k
            }];
            (partner.min(rank), partner.max(rank))
        };
        let scanned = (self.next..self.next + n.min(PICK_SCAN)).map(nth);
        self.next += 1;
        // The next that is not over one of the suspect's links.
        let mut over: Vec<(Pair, f64)> = Vec::new();
        for p in scanned {
            match self.links.get(&p) {
                None => return Some(p),
                Some(slowest) => over.push((p, *slowest)),
            }
        }
        // All are: the least slow first, round after round; the slowest only when alone.
        over.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
        if over.len() > 1 {
            over.pop();
        }
        Some(over[attempt % over.len()].0)
    }
}

/// The first round's retest pair of each suspect (None: no host passed to test against).
pub fn retest_pairs(
    suspects: &[Suspect],
    ranks: &[(u32, String)],
    missing: &BTreeSet<String>,
) -> Vec<Option<Pair>> {
    let mut partners = Partners::new(suspects.iter(), ranks, missing);
    suspects
        .iter()
        .map(|s| partners.pick(&s.target, 0))
        .collect()
}
