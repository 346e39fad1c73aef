//! Which hosts test each other in which round: all pairs by the circle method, a ring, or a few
//! random perfect matchings. No host is in two tests of one round.

use serde::{Deserialize, Serialize};

/// Two ranks that test each other, the lower first.
pub type Pair = (u32, u32);

/// How the pairs are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Every unordered pair once: N-1 rounds of N/2 pairs (N rounds with a bye when N is odd).
    AllPairs,
    /// Each host with its successor (the last with the first): 2 rounds, 3 when N is odd.
    Ring,
    /// A few random perfect matchings: a quick look at a large fabric.
    Quick,
}

/// How many matchings `quick` draws.
pub const QUICK_MATCHINGS: usize = 3;

/// The rounds of one run. All pairs are computed round by round (4096 hosts are 8 million
/// pairs: never held at once); the ring and quick rounds are few and kept.
#[derive(Debug, Clone)]
pub struct Schedule {
    n: u32,
    pattern: Pattern,
    kept: Vec<Vec<Pair>>,
}

impl Schedule {
    /// The schedule for `n` ranks. `seed` picks quick's matchings (the same seed, the same
    /// rounds, on every rank).
    pub fn new(pattern: Pattern, n: u32, seed: u64) -> Schedule {
        let kept = match pattern {
            Pattern::AllPairs => Vec::new(),
            Pattern::Ring => ring(n),
            Pattern::Quick => quick(n, QUICK_MATCHINGS, seed),
        };
        Schedule { n, pattern, kept }
    }

    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// The number of rounds.
    pub fn rounds(&self) -> usize {
        match self.pattern {
            Pattern::AllPairs if self.n < 2 => 0,
            Pattern::AllPairs if self.n.is_multiple_of(2) => self.n as usize - 1,
            Pattern::AllPairs => self.n as usize,
            _ => self.kept.len(),
        }
    }

    /// The pairs of round `r` (0-based).
    pub fn round(&self, r: usize) -> Vec<Pair> {
        match self.pattern {
            Pattern::AllPairs => circle_round(self.n, r as u32),
            _ => self.kept.get(r).cloned().unwrap_or_default(),
        }
    }

    /// The number of pairs over all rounds.
    pub fn pairs(&self) -> usize {
        match self.pattern {
            Pattern::AllPairs => (self.n as usize * self.n.saturating_sub(1) as usize) / 2,
            _ => self.kept.iter().map(Vec::len).sum(),
        }
    }
}

fn ordered(a: u32, b: u32) -> Pair {
    (a.min(b), a.max(b))
}

/// Round `r` of the circle method: seat the ranks at a table of even size m (a phantom seat
/// when n is odd: its partner sits out), keep seat 0 still and turn the others by r; seat i
/// plays seat m-1-i.
fn circle_round(n: u32, r: u32) -> Vec<Pair> {
    if n < 2 {
        return Vec::new();
    }
    let m = n + n % 2;
    let turn = m - 1;
    let seat = |i: u32| if i == 0 { 0 } else { 1 + (i - 1 + r) % turn };
    (0..m / 2)
        .map(|i| (seat(i), seat(m - 1 - i)))
        .filter(|&(a, b)| a < n && b < n)
        .map(|(a, b)| ordered(a, b))
        .collect()
}

/// Each rank with its successor, packed greedily into rounds (2 for an even ring, 3 for odd).
fn ring(n: u32) -> Vec<Vec<Pair>> {
    let edges: Vec<Pair> = match n {
        0 | 1 => Vec::new(),
        2 => vec![(0, 1)],
        _ => (0..n).map(|i| ordered(i, (i + 1) % n)).collect(),
    };
    pack(n, edges)
}

/// Put each pair in the first round where neither of its ranks already tests.
pub fn pack(n: u32, pairs: Vec<Pair>) -> Vec<Vec<Pair>> {
    let mut rounds: Vec<(Vec<Pair>, Vec<bool>)> = Vec::new();
    for (a, b) in pairs {
        let slot = rounds
            .iter()
            .position(|(_, busy)| !busy[a as usize] && !busy[b as usize]);
        let i = slot.unwrap_or_else(|| {
            rounds.push((Vec::new(), vec![false; n as usize]));
            rounds.len() - 1
        });
        let (round, busy) = &mut rounds[i];
        round.push((a, b));
        busy[a as usize] = true;
        busy[b as usize] = true;
    }
    rounds.into_iter().map(|(r, _)| r).collect()
}

/// `k` random perfect matchings (one rank sits out each when n is odd); a pair drawn again is
/// left out of the later matching, so no pair is tested twice.
fn quick(n: u32, k: usize, seed: u64) -> Vec<Vec<Pair>> {
    let mut rng = SplitMix(seed);
    let mut seen = std::collections::HashSet::new();
    let mut rounds = Vec::new();
    for _ in 0..k {
        let mut order: Vec<u32> = (0..n).collect();
        for i in (1..order.len()).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let round: Vec<Pair> = order
            .chunks_exact(2)
            .map(|c| ordered(c[0], c[1]))
            .filter(|p| seen.insert(*p))
            .collect();
        if !round.is_empty() {
            rounds.push(round);
        }
    }
    rounds
}

/// A small seeded generator (splitmix64): quick's matchings need to be the same everywhere, not
/// unpredictable.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every unordered pair at most once (exactly once when `complete`), no rank twice in a
    /// round; returns the number of pairs seen.
    fn check(s: &Schedule, n: u32, complete: bool) -> usize {
        let n = n as usize;
        let mut seen = vec![false; n * n];
        let mut count = 0;
        for r in 0..s.rounds() {
            let mut busy = vec![false; n];
            for (a, b) in s.round(r) {
                let (a, b) = (a as usize, b as usize);
                assert!(a < b && b < n, "round {r}: bad pair ({a}, {b})");
                assert!(!busy[a] && !busy[b], "round {r}: a rank tests twice");
                busy[a] = true;
                busy[b] = true;
                assert!(!seen[a * n + b], "({a}, {b}) tested twice");
                seen[a * n + b] = true;
                count += 1;
            }
        }
        if complete {
            assert_eq!(count, n * (n - 1) / 2, "n = {n}: not every pair");
        }
        assert_eq!(count, s.pairs());
        count
    }

    #[test]
    fn all_pairs_once_each_no_rank_twice_in_a_round() {
        for n in [2u32, 3, 4, 5, 64, 4096] {
            let s = Schedule::new(Pattern::AllPairs, n, 0);
            let rounds = if n.is_multiple_of(2) { n - 1 } else { n };
            assert_eq!(s.rounds(), rounds as usize, "n = {n}");
            for r in [0, s.rounds() - 1] {
                assert_eq!(s.round(r).len(), (n / 2) as usize, "n = {n}: a full round");
            }
            check(&s, n, true);
        }
        assert_eq!(Schedule::new(Pattern::AllPairs, 1, 0).rounds(), 0);
    }

    #[test]
    fn ring_pairs_each_rank_with_its_successor() {
        for n in [2u32, 3, 4, 5, 64] {
            let s = Schedule::new(Pattern::Ring, n, 0);
            let pairs = check(&s, n, n <= 3);
            assert_eq!(pairs, if n == 2 { 1 } else { n as usize }, "n = {n}");
            assert!(s.rounds() <= 3, "n = {n}: {} rounds", s.rounds());
        }
    }

    #[test]
    fn quick_draws_disjoint_matchings_the_same_for_a_seed() {
        for n in [2u32, 3, 4, 5, 64] {
            let s = Schedule::new(Pattern::Quick, n, 7);
            check(&s, n, false);
            assert!(
                s.round(0).len() == (n / 2) as usize,
                "n = {n}: the first is perfect"
            );
            let again = Schedule::new(Pattern::Quick, n, 7);
            assert_eq!(s.kept, again.kept, "n = {n}: same seed, same rounds");
        }
        let (a, b) = (
            Schedule::new(Pattern::Quick, 64, 1),
            Schedule::new(Pattern::Quick, 64, 2),
        );
        assert_ne!(a.kept, b.kept, "another seed, other matchings");
    }
}
