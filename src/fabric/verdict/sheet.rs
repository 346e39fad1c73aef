//! The verdict's lean view of a run's judged pairs: hosts by index (in name order, so a map or
//! a `Vec` keyed by index goes through them as one keyed by name would), one small record per
//! pair with no strings, the error counters interned. Names come back only where a text needs
//! them ([`Sheet::pair`]).

use super::*;
use std::collections::HashMap;

/// A host's index in a [`Sheet`]: its place among the hosts' names, sorted.
pub type Ix = u32;

const HAS_BW: u8 = 1;
const HAS_BW_REVERSE: u8 = 2;
const HAS_LAT: u8 = 4;
const FAILED: u8 = 8;

/// One pair's figures (a to b, b to a, latency): what [`Sheet::push`] takes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    pub bw_gbps: Option<f64>,
    pub bw_gbps_reverse: Option<f64>,
    pub lat_us: Option<f64>,
}

/// One judged pair, lean: its hosts' indices and its figures.
#[derive(Debug, Clone, Copy)]
pub struct Fig {
    pub a: Ix,
    pub b: Ix,
    bw: f64,
    bw_reverse: f64,
    lat: f64,
    /// Where its counter rises end in the sheet's list (they start where the pair before's end).
    rises_end: u32,
    bits: u8,
}

impl Fig {
    fn get(&self, bit: u8, v: f64) -> Option<f64> {
        (self.bits & bit != 0).then_some(v)
    }

    pub fn bw(&self) -> Option<f64> {
        self.get(HAS_BW, self.bw)
    }

    pub fn bw_reverse(&self) -> Option<f64> {
        self.get(HAS_BW_REVERSE, self.bw_reverse)
    }

    pub fn lat(&self) -> Option<f64> {
        self.get(HAS_LAT, self.lat)
    }

    /// A test of the pair failed.
    pub fn failed(&self) -> bool {
        self.bits & FAILED != 0
    }

    /// Its bandwidth figures, a to b then b to a.
    pub fn bw_figures(&self) -> impl Iterator<Item = f64> {
        [self.bw(), self.bw_reverse()].into_iter().flatten()
    }
}

/// One counter's rise on one host of a pair.
#[derive(Debug, Clone, Copy)]
struct Rise {
    delta: u64,
    host: Ix,
    counter: u16,
}

/// The judged pairs of a run (scheduled, neither end missing), lean.
#[derive(Debug, Clone, Default)]
pub struct Sheet {
    /// By index: each host's name (sorted) and rank.
    names: Vec<String>,
    ranks: Vec<u32>,
    /// Rank to index (u32::MAX: none).
    by_rank: Vec<Ix>,
    figs: Vec<Fig>,
    rises: Vec<Rise>,
    /// The counters' names, by their id.
    counters: Vec<String>,
    /// Why a pair's test failed, by pair (few).
    errors: BTreeMap<usize, String>,
}

impl Sheet {
    /// A sheet for a run of these ranks and hosts (unique names), pairs to [`Sheet::push`].
    pub fn new(ranks: &[(u32, String)]) -> Sheet {
        let mut hosts: Vec<(u32, String)> = ranks.to_vec();
        hosts.sort_by(|x, y| x.1.cmp(&y.1));
        hosts.dedup_by(|x, y| x.1 == y.1);
        let top = hosts.iter().map(|h| h.0 as usize + 1).max().unwrap_or(0);
        let mut by_rank = vec![Ix::MAX; top];
        for (i, (r, _)) in hosts.iter().enumerate() {
            by_rank[*r as usize] = i as Ix;
        }
        let (ranks, names) = hosts.into_iter().unzip();
        Sheet {
            names,
            ranks,
            by_rank,
            ..Sheet::default()
        }
    }

    /// The sheet of `pairs`' judged pairs: scheduled (not retests), neither end in `missing`.
    pub fn of(pairs: &[PairResult], missing: &BTreeSet<String>) -> Sheet {
        let judged = || {
            pairs
                .iter()
                .filter(|p| !p.retested && !missing.contains(&p.a) && !missing.contains(&p.b))
        };
        let mut names: BTreeSet<&str> = BTreeSet::new();
        for p in judged() {
            names.extend([p.a.as_str(), p.b.as_str()]);
            names.extend(p.counters.keys().map(String::as_str));
        }
        let ix: HashMap<&str, Ix> = names
            .iter()
            .enumerate()
            .map(|(i, h)| (*h, i as Ix))
            .collect();
        let mut s = Sheet {
            names: names.iter().map(|h| h.to_string()).collect(),
            ranks: vec![u32::MAX; names.len()],
            ..Sheet::default()
        };
        s.reserve(judged().count(), 0);
        let mut ids: BTreeMap<&str, u16> = BTreeMap::new();
        let mut rises = Vec::new();
        for p in judged() {
            let (a, b) = (ix[p.a.as_str()], ix[p.b.as_str()]);
            // The rank a host is known by: its last pair's (as a map built from the pairs).
            s.ranks[a as usize] = p.a_rank;
            s.ranks[b as usize] = p.b_rank;
            rises.clear();
            for (h, m) in &p.counters {
                for (c, d) in m {
                    let id = *ids.entry(c).or_insert_with(|| s.counter(c));
                    rises.push(Rise {
                        delta: *d,
                        host: ix[h.as_str()],
                        counter: id,
                    });
                }
            }
            let f = Figures {
                bw_gbps: p.bw_gbps,
                bw_gbps_reverse: p.bw_gbps_reverse,
                lat_us: p.lat_us,
            };
            s.push_ix(a, b, f, p.error.clone(), &rises);
        }
        s
    }

    /// Room for `pairs` more pairs and `rises` more counter rises (a fleet's millions of pairs
    /// then take what they need, not twice that while they grow).
    pub fn reserve(&mut self, pairs: usize, rises: usize) {
        self.figs.reserve_exact(pairs);
        self.rises.reserve_exact(rises);
    }

    /// A counter's id (interned on first use).
    pub fn counter(&mut self, name: &str) -> u16 {
        match self.counters.iter().position(|c| c == name) {
            Some(i) => i as u16,
            None => {
                self.counters.push(name.to_string());
                (self.counters.len() - 1) as u16
            }
        }
    }

    /// One more judged pair, by its ranks; `rises`: (rank, counter id, rise) each.
    pub fn push(
        &mut self,
        a_rank: u32,
        b_rank: u32,
        f: Figures,
        error: Option<String>,
        rises: &[(u32, u16, u64)],
    ) {
        let ix = |s: &Sheet, r: u32| {
            let i = s.by_rank.get(r as usize).copied().unwrap_or(Ix::MAX);
            assert!(i != Ix::MAX, "rank {r} is not one of the sheet's ranks");
            i
        };
        let (a, b) = (ix(self, a_rank), ix(self, b_rank));
        let rises: Vec<Rise> = rises
            .iter()
            .map(|(r, c, d)| Rise {
                delta: *d,
                host: ix(self, *r),
                counter: *c,
            })
            .collect();
        self.push_ix(a, b, f, error, &rises);
    }

    fn push_ix(&mut self, a: Ix, b: Ix, f: Figures, error: Option<String>, rises: &[Rise]) {
        let mut bits = 0;
        for (v, bit) in [
            (f.bw_gbps, HAS_BW),
            (f.bw_gbps_reverse, HAS_BW_REVERSE),
            (f.lat_us, HAS_LAT),
        ] {
            if v.is_some() {
                bits |= bit;
            }
        }
        if let Some(e) = error {
            bits |= FAILED;
            self.errors.insert(self.figs.len(), e);
        }
        self.rises.extend_from_slice(rises);
        self.figs.push(Fig {
            a,
            b,
            bw: f.bw_gbps.unwrap_or(0.0),
            bw_reverse: f.bw_gbps_reverse.unwrap_or(0.0),
            lat: f.lat_us.unwrap_or(0.0),
            rises_end: self.rises.len() as u32,
            bits,
        });
    }

    /// The judged pairs.
    pub fn figs(&self) -> &[Fig] {
        &self.figs
    }

    /// Those with no failed test, with their place.
    pub fn ok(&self) -> impl Iterator<Item = (usize, &Fig)> {
        self.figs.iter().enumerate().filter(|(_, f)| !f.failed())
    }

    /// The hosts known (pair ends, counters' hosts and the ranks given), by index.
    pub fn hosts(&self) -> usize {
        self.names.len()
    }

    pub fn name(&self, h: Ix) -> &str {
        &self.names[h as usize]
    }

    pub fn rank(&self, h: Ix) -> u32 {
        self.ranks[h as usize]
    }

    /// The index of a host's name.
    pub fn find(&self, name: &str) -> Option<Ix> {
        self.names
            .binary_search_by(|h| h.as_str().cmp(name))
            .ok()
            .map(|i| i as Ix)
    }

    /// The counters' names, by id.
    pub fn counter_names(&self) -> &[String] {
        &self.counters
    }

    fn rises(&self, i: usize) -> &[Rise] {
        let start = if i == 0 {
            0
        } else {
            self.figs[i - 1].rises_end
        };
        &self.rises[start as usize..self.figs[i].rises_end as usize]
    }

    /// Pair `i`'s total rise of each counter that rose (both hosts), once per counter.
    pub fn totals(&self, i: usize) -> impl Iterator<Item = (u16, u64)> + '_ {
        let rises = self.rises(i);
        rises
            .iter()
            .enumerate()
            .filter(|(k, x)| !rises[..*k].iter().any(|y| y.counter == x.counter))
            .map(|(k, x)| {
                let same = rises[k..].iter().filter(|y| y.counter == x.counter);
                (x.counter, same.map(|y| y.delta).sum())
            })
    }

    /// Pair `i` as a result again, names and all (for the texts that quote it).
    pub fn pair(&self, i: usize) -> PairResult {
        let f = &self.figs[i];
        let mut counters: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for x in self.rises(i) {
            counters
                .entry(self.name(x.host).to_string())
                .or_default()
                .insert(self.counters[x.counter as usize].clone(), x.delta);
        }
        PairResult {
            a: self.name(f.a).to_string(),
            b: self.name(f.b).to_string(),
            a_rank: self.rank(f.a),
            b_rank: self.rank(f.b),
            round: 0,
            bw_gbps: f.bw(),
            bw_gbps_reverse: f.bw_reverse(),
            lat_us: f.lat(),
            counters,
            error: self.errors.get(&i).cloned(),
            flagged: false,
            reason: None,
            retested: false,
            control: false,
            control_bw_gbps: None,
        }
    }
}
