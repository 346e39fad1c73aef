//! The fabric verdict at fleet scale, simulated: N hosts with synthetic bandwidth (a model of
//! each host's NIC, each direction, each link and each switch) and latency, multiplicative
//! noise of +-5 % or +-20 % or the lab's own (with its stalls: a paused guest's test, slow
//! with a latency spike, one test in 50, scheduled or retest), rxe-like error counters rising on every pair,
//! one fault planted per case; the real verdict (`verdict::judge`, retests with fresh noise
//! included) judges them and each case prints the suspects it found, missed and named falsely.
//! Three cases add the lab's load (a pair beside another in its round at 0.67 x the speed of
//! one alone): a healthy fabric, and a link at 60 % and at 65 % under load only (charged by the
//! loaded schedule, named by retests run beside control pairs at the schedule's load; a retest
//! alone, before control pairs, cleared them).
//!
//! Sizes: `RDMADIAG_VERDICT_SIM_N` (default `4,8,64,512`), pattern all-pairs (`quick` with
//! `RDMADIAG_VERDICT_SIM_PATTERN=quick`: a group is then 8 slow hosts, as its members are
//! not paired); seeds: `RDMADIAG_VERDICT_SIM_SEEDS` (default `1,2,3`, only the first above 64
//! hosts). bench/fabric-verdict.sh runs 4096 hosts (quick), 1024 and 4096 (all-pairs) in
//! release; the table judges lean sheets ([`judged_lean`]), as a fleet's millions of pairs need.
//! Stalls: `RDMADIAG_VERDICT_SIM_STALL` (one retest in N, default 50; 0 for none) and
//! `RDMADIAG_VERDICT_SIM_STALL_SCHEDULED` (one scheduled test in N, default the same).
//! `RDMADIAG_VERDICT_SIM_FALSE_NOTES` set: each false or missed host's and link's note (its
//! charges and its retests' figures) goes to stderr, to classify them.
//!
//! Goals (from issue 18): every planted host, link and group found and no false suspect at
//! +-5 % noise (the 80 % host from 8 hosts up, the switch from 64), and no false suspect on a
//! healthy fabric at +-20 %; the bad switch is one group, not 8 hosts.

use rdmadiag::fabric::coordinator::Outcome;
use rdmadiag::fabric::schedule::{Pattern, Schedule};
use rdmadiag::fabric::verdict::{
    Figures, RetestRound, Sheet, Thresholds, Verdict, judge, judge_sheet_keeping,
};
use rdmadiag::report::Style;
use rdmadiag::report::fabric::{FabricSettings, HostInfo, fabric_text};
use rdmadiag::report::fabric::{PairResult, SuspectKind, SuspectNote, Suspects};
use std::collections::{BTreeMap, BTreeSet};

/// A seeded generator (splitmix64) for the noise.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn signed(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    /// One of `v`, uniformly.
    fn pick(&mut self, v: &[f64]) -> f64 {
        v[(self.next() % v.len() as u64) as usize]
    }
}

/// The figures' noise: uniform +-x, or drawn from what healthy lab runs really produced.
#[derive(Clone, Copy, PartialEq)]
enum Noise {
    Uniform(f64),
    Lab,
}

impl Noise {
    fn label(self) -> String {
        match self {
            Noise::Uniform(x) => format!("{:.0}%", 100.0 * x),
            Noise::Lab => "lab".into(),
        }
    }
}

/// The healthy lab's figures over their run's median (tests/data/fabric-lab-noise.json,
/// recorded by bench/record-fabric-noise.sh): bandwidth directions and latencies.
struct LabNoise {
    bw: Vec<f64>,
    lat: Vec<f64>,
}

fn lab_noise() -> &'static LabNoise {
    static LAB: std::sync::OnceLock<LabNoise> = std::sync::OnceLock::new();
    LAB.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/fabric-lab-noise.json"
        );
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e} (bench/record-fabric-noise.sh records it)"));
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let list = |k: &str| -> Vec<f64> {
            let l: Vec<f64> = v[k]
                .as_array()
                .unwrap_or_else(|| panic!("{path}: no {k} array"))
                .iter()
                .filter_map(|x| x.as_f64())
                .filter(|x| *x > 0.0)
                .collect();
            assert!(l.len() >= 20, "{path}: only {} figures in {k}", l.len());
            l
        };
        LabNoise {
            bw: list("bw_ratio"),
            lat: list("lat_ratio"),
        }
    })
}

/// One retest in this many stalls in the lab's noise (`RDMADIAG_VERDICT_SIM_STALL`, default 50;
/// 0: none, the figures drawn as before stalls were simulated): the guest pauses, as the lab's
/// QEMU guests do now and then, and the retest measures both directions at 0.3 to 0.7 x and a
/// latency of 2.5 to 4.5 x (CI of b1f4c51: a retest at 0.51 x with 1657.9 us against some
/// 600 us). A stall that spares the latency test cannot be told from the noise's low tail,
/// which the recorded figures hold already.
fn lab_stall_one_in() -> u64 {
    static ONE_IN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ONE_IN.get_or_init(|| env_number("RDMADIAG_VERDICT_SIM_STALL", 50))
}

/// One scheduled test in this many stalls likewise (`RDMADIAG_VERDICT_SIM_STALL_SCHEDULED`,
/// default [`lab_stall_one_in`]; 0: none, the scheduled figures the recorded ones, none of
/// whose 24 latencies is above 1.62 x). A guest pauses whatever test it runs: a stalled
/// scheduled test makes a lat-link charge (and a low bandwidth), which its retests must clear.
fn lab_scheduled_stall_one_in() -> u64 {
    static ONE_IN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ONE_IN.get_or_init(|| env_number("RDMADIAG_VERDICT_SIM_STALL_SCHEDULED", lab_stall_one_in()))
}

/// `var` as a number (absent: `default`).
fn env_number(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var}: '{v}' is not a number")),
        Err(_) => default,
    }
}

/// The healthy figures: Gb/s one way, us.
const BW: f64 = 90.0;
const LAT: f64 = 2.0;

/// The lab's load: a pair measured beside others (a scheduled round, two pairs on the 2 cores
/// of a host's machine) runs at 0.67 x the speed of one alone (a retest alone measured 1.2 to
/// 2.0 x the scheduled reference, ten healthy lab fabric runs of b537b70).
const LAB_LOAD: f64 = 0.67;

/// A round of this many pairs or more loads its pairs (the [`Fabric`]'s `load` and
/// `loaded_links`); fewer run alone.
const LOADED_AT: usize = 2;

/// A fabric: each host's NIC rate and its send and receive factors, slow links, a switch group.
struct Fabric {
    n: u32,
    nic: Vec<f64>,
    send: Vec<f64>,
    recv: Vec<f64>,
    links: BTreeMap<(u32, u32), f64>,
    /// Links slow one way only: (from, to).
    one_way: BTreeMap<(u32, u32), f64>,
    /// Hosts behind one switch, and the factor of their links out of it.
    group: (BTreeSet<u32>, f64),
    /// The load: every bandwidth figure's factor in a round of [`LOADED_AT`] pairs or more
    /// (scheduled: the schedule's round; retest: its packed retest round), as the lab's
    /// shared host cores slow each test beside another. None: a pair runs as fast in any round.
    load: Option<f64>,
    /// Links slow only under load (an oversubscribed uplink, congestion): their factor, both
    /// ways, in a round of [`LOADED_AT`] pairs or more; alone they run at full speed.
    loaded_links: BTreeMap<(u32, u32), f64>,
    noise: Noise,
    /// The schedule it is tested with (quick rarely pairs two hosts of one group), and its seed.
    pattern: Pattern,
    seed: u64,
}

impl Fabric {
    fn healthy(n: u32, noise: Noise, pattern: Pattern, seed: u64) -> Fabric {
        Fabric {
            n,
            nic: vec![1.0; n as usize],
            send: vec![1.0; n as usize],
            recv: vec![1.0; n as usize],
            links: BTreeMap::new(),
            one_way: BTreeMap::new(),
            group: (BTreeSet::new(), 1.0),
            load: None,
            loaded_links: BTreeMap::new(),
            noise,
            pattern,
            seed,
        }
    }

    /// from -> to: the slower of the sender's and the receiver's side, then the link, the
    /// switch (a link leaving the group), and the noise.
    fn bw(&self, from: u32, to: u32, rng: &mut Rng) -> f64 {
        let (f, t) = (from as usize, to as usize);
        let ends = (self.nic[f] * self.send[f]).min(self.nic[t] * self.recv[t]);
        let link = self
            .links
            .get(&(from.min(to), from.max(to)))
            .copied()
            .unwrap_or(1.0)
            * self.one_way.get(&(from, to)).copied().unwrap_or(1.0);
        let (members, factor) = &self.group;
        let switch = if members.contains(&from) != members.contains(&to) {
            *factor
        } else {
            1.0
        };
        BW * ends * link * switch * self.wobble(rng, false)
    }

    /// The load's factor of pair a - b's bandwidth in a round of `concurrent` pairs: 1 alone,
    /// else `load` times the link's own under load. The latency is not loaded (the lab: two
    /// retests at once measured 0.88 to 1.12 x).
    fn loaded(&self, a: u32, b: u32, concurrent: usize) -> f64 {
        if concurrent < LOADED_AT {
            return 1.0;
        }
        let link = self.loaded_links.get(&(a.min(b), a.max(b))).copied();
        self.load.unwrap_or(1.0) * link.unwrap_or(1.0)
    }

    /// A figure's noise factor (bandwidth, or latency with `lat`).
    fn wobble(&self, rng: &mut Rng, lat: bool) -> f64 {
        match self.noise {
            Noise::Uniform(x) => 1.0 + x * rng.signed(),
            Noise::Lab if lat => rng.pick(&lab_noise().lat),
            Noise::Lab => rng.pick(&lab_noise().bw),
        }
    }

    /// A pair test's stall in the lab's noise (one in `one_in`; None: none): the factors of its
    /// two bandwidth figures (0.3 to 0.7 each) and of its latency (2.5 to 4.5, over the
    /// latency's own noise).
    fn stall(&self, one_in: u64, rng: &mut Rng) -> Option<[f64; 3]> {
        if self.noise != Noise::Lab || one_in == 0 || !rng.next().is_multiple_of(one_in) {
            return None;
        }
        let mut between = |lo: f64, hi: f64| lo + (hi - lo) * (rng.signed() + 1.0) / 2.0;
        Some([between(0.3, 0.7), between(0.3, 0.7), between(2.5, 4.5)])
    }

    /// A pair's figures and counters (a is the lower rank), measured in a round of
    /// `concurrent` pairs: rxe retransmits on every pair, +1..+13 and +1..+6 of two counters
    /// on a, as the lab shows; in the lab's noise, a test stalls now and then (drawn from
    /// `stalls`, its own stream: the noise is drawn as before). The load draws nothing.
    fn measure(
        &self,
        (a, b, concurrent): (u32, u32, usize),
        stalls: &mut Stalls,
        rng: &mut Rng,
    ) -> (u32, u32, Figures, [u64; 2]) {
        let (a, b) = (a.min(b), a.max(b));
        let rises = [1 + rng.next() % 13, 1 + rng.next() % 6];
        let stall = self.stall(stalls.1, &mut stalls.0);
        let [x, y, l] = stall.unwrap_or([1.0; 3]);
        let load = self.loaded(a, b, concurrent);
        let f = Figures {
            bw_gbps: Some(x * load * self.bw(a, b, rng)),
            bw_gbps_reverse: Some(y * load * self.bw(b, a, rng)),
            lat_us: Some(l * LAT * self.wobble(rng, true)),
        };
        (a, b, f, rises)
    }

    fn pair(
        &self,
        pair: (u32, u32, usize),
        round: u32,
        stalls: &mut Stalls,
        rng: &mut Rng,
    ) -> PairResult {
        let (a, b, f, rises) = self.measure(pair, stalls, rng);
        let moved = COUNTERS.iter().map(|c| c.to_string()).zip(rises).collect();
        PairResult {
            a: name(a),
            b: name(b),
            a_rank: a,
            b_rank: b,
            round,
            bw_gbps: f.bw_gbps,
            bw_gbps_reverse: f.bw_gbps_reverse,
            lat_us: f.lat_us,
            counters: [(name(a), moved)].into(),
            error: None,
            flagged: false,
            reason: None,
            retested: false,
            control: false,
            control_bw_gbps: None,
        }
    }
}

/// The counters that rise on every pair.
const COUNTERS: [&str; 2] = ["completer_retry_err", "duplicate_request"];

fn name(r: u32) -> String {
    format!("h{r:04}")
}

/// A planted fault and what the verdict should name.
struct Case {
    name: &'static str,
    /// The smallest fabric the case is judged on (its goal holds from there up).
    min_hosts: u32,
    /// Plant the fault; returns the expected suspects ("host h0002", "link h0001-h0003",
    /// "group h0008,...").
    plant: fn(&mut Fabric) -> BTreeSet<String>,
    /// Its goal (everything found, nothing false) holds at +-20 % noise too, and in the lab's
    /// noise (a fault the lab tests plant), not only at +-5 %.
    at_20: bool,
    in_lab: bool,
    /// A fault the verdict is known to miss today, and why: no goal, its row reported as a
    /// known miss (and said when it is named after all), a test of its own asserting the miss.
    known_miss: Option<&'static str>,
}

/// Hosts spread over the fabric, never rank 0 (the coordinator's host is no different, but
/// a spread says more than the first few).
fn spread(n: u32, k: u32) -> Vec<u32> {
    (0..k).map(|i| 1 + i * (n - 1) / k.max(1)).collect()
}

fn host(r: u32) -> String {
    format!("host {}", name(r))
}

/// A scheduled pair: ranks 1 and N-1 (all-pairs), or quick's first pair of rank 1.
fn scheduled_pair(f: &Fabric) -> (u32, u32) {
    match f.pattern {
        Pattern::AllPairs => (1, f.n - 1),
        _ => Schedule::new(f.pattern, f.n, f.seed)
            .round(0)
            .into_iter()
            .find(|p| p.0 == 1 || p.1 == 1)
            .expect("rank 1 is in quick's first (perfect) matching"),
    }
}

/// Slow one direction of a scheduled link (the higher rank sending to the lower) to `factor`.
fn one_way_link(f: &mut Fabric, factor: f64) -> BTreeSet<String> {
    let (a, b) = scheduled_pair(f);
    f.one_way.insert((b, a), factor);
    [format!("link {}-{}", name(a), name(b))].into()
}

/// The lab's load on every pair, and a scheduled link slow to `factor` under load only.
fn loaded_link(f: &mut Fabric, factor: f64) -> BTreeSet<String> {
    f.load = Some(LAB_LOAD);
    let (a, b) = scheduled_pair(f);
    f.loaded_links.insert((a, b), factor);
    [format!("link {}-{}", name(a), name(b))].into()
}

/// Slow the NICs of `k` spread hosts to `factor` of the rest; returns the expected suspects.
fn slow_nics(f: &mut Fabric, k: u32, factor: f64) -> BTreeSet<String> {
    spread(f.n, k)
        .into_iter()
        .map(|h| {
            f.nic[h as usize] = factor;
            host(h)
        })
        .collect()
}

/// The lab's noise is judged against goals up to this many hosts (the lab has 4). Beyond, its
/// 48 figures drawn independently make its round-1 warm-up outliers (0.52 and 0.57 x) 4 % of
/// every figure, and two of them on one healthy direction in a row name a false link now
/// and then (the table reports those runs).
const LAB_NOISE_GOAL_HOSTS: u32 = 8;

const CASES: &[Case] = &[
    Case {
        name: "healthy",
        min_hosts: 4,
        plant: |_| BTreeSet::new(),
        at_20: true,
        in_lab: true,
        known_miss: None,
    },
    Case {
        // The lab's load: a lone retest runs 1.5 x the loaded reference, and clears.
        name: "healthy, loaded",
        min_hosts: 4,
        plant: |f| {
            f.load = Some(LAB_LOAD);
            BTreeSet::new()
        },
        at_20: true,
        in_lab: true,
        known_miss: None,
    },
    Case {
        name: "1 host at 50 %",
        min_hosts: 4,
        plant: |f| slow_nics(f, 1, 0.5),
        at_20: false,
        in_lab: true,
        known_miss: None,
    },
    Case {
        name: "1 host at 80 %",
        min_hosts: 8,
        plant: |f| slow_nics(f, 1, 0.8),
        at_20: false,
        in_lab: false,
        known_miss: None,
    },
    Case {
        name: "2 % of hosts at 70 %",
        min_hosts: 4,
        plant: |f| slow_nics(f, (f.n as f64 * 0.02).ceil() as u32, 0.7),
        at_20: false,
        in_lab: false,
        known_miss: None,
    },
    Case {
        name: "1 link at 50 %",
        min_hosts: 4,
        plant: |f| {
            let (a, b) = scheduled_pair(f);
            f.links.insert((a, b), 0.5);
            [format!("link {}-{}", name(a), name(b))].into()
        },
        at_20: false,
        in_lab: true,
        known_miss: None,
    },
    Case {
        name: "1 link one way at 10 %",
        min_hosts: 4,
        plant: |f| one_way_link(f, 0.1),
        at_20: true,
        in_lab: true,
        known_miss: None,
    },
    Case {
        name: "1 link one way at 30 %",
        min_hosts: 4,
        plant: |f| one_way_link(f, 0.3),
        at_20: true,
        in_lab: true,
        known_miss: None,
    },
    Case {
        name: "1 link one way at 50 %",
        min_hosts: 4,
        plant: |f| one_way_link(f, 0.5),
        at_20: true,
        in_lab: false,
        known_miss: None,
    },
    Case {
        name: "a switch of 8 at 50 % out",
        min_hosts: 64,
        plant: |f| {
            let members: BTreeSet<u32> = (8..16).collect();
            let names: Vec<String> = members.iter().map(|r| name(*r)).collect();
            let hosts = members.iter().map(|r| host(*r)).collect();
            f.group = (members, 0.5);
            if f.pattern == Pattern::Quick {
                // Quick's few matchings (almost) never pair two members: 8 slow hosts is all
                // that can be seen.
                return hosts;
            }
            [format!("group {}", names.join(","))].into()
        },
        at_20: false,
        in_lab: false,
        known_miss: None,
    },
    Case {
        name: "1 host sends at 50 %",
        min_hosts: 4,
        plant: |f| {
            let h = spread(f.n, 1)[0];
            f.send[h as usize] = 0.5;
            [host(h)].into()
        },
        at_20: true,
        in_lab: true,
        known_miss: None,
    },
    Case {
        name: "1 host receives at 50 %",
        min_hosts: 4,
        plant: |f| {
            let h = spread(f.n, 1)[0];
            f.recv[h as usize] = 0.5;
            [host(h)].into()
        },
        at_20: true,
        in_lab: true,
        known_miss: None,
    },
    Case {
        // Charged by the loaded schedule, retested beside controls (the schedule's load):
        // named (a retest alone cleared it, 1.5 x the loaded reference).
        name: "1 link at 60 % loaded only",
        min_hosts: 4,
        plant: |f| loaded_link(f, 0.6),
        at_20: false,
        in_lab: false,
        known_miss: None,
    },
    Case {
        name: "1 link at 65 % loaded only",
        min_hosts: 4,
        plant: |f| loaded_link(f, 0.65),
        at_20: false,
        in_lab: false,
        known_miss: None,
    },
];

/// A host's or link's note as [`named`] names it ("host h0002", "link h0001-h0003").
fn note_key(note: &SuspectNote) -> Option<String> {
    match note.kind {
        SuspectKind::Link => Some(format!("link {}", note.name.replace(" - ", "-"))),
        SuspectKind::Host => Some(format!("host {}", note.name)),
        _ => None,
    }
}

fn named(s: &Suspects) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = s.hosts.iter().map(|h| format!("host {h}")).collect();
    for [a, b] in &s.links {
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        out.insert(format!("link {a}-{b}"));
    }
    for g in &s.groups {
        let mut g = g.clone();
        g.sort();
        out.insert(format!("group {}", g.join(",")));
    }
    out
}

/// One run: the fabric's scheduled pairs, judged with the defaults, retests from the model.
fn run(f: &Fabric, t: &Thresholds) -> (Suspects, bool) {
    let (v, ..) = judged_lean(f, t);
    let fails = v.findings.iter().any(|x| x.fails);
    (v.suspects, fails)
}

/// The seeded generator of a fabric's figures.
fn rng_of(f: &Fabric) -> Rng {
    Rng(f.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ f.n as u64)
}

/// A stream of stalls: its seeded generator and one test in how many stalls (0: none).
struct Stalls(Rng, u64);

/// The seeded generator of its retests' stalls (apart, so that the figures are drawn as they
/// were before stalls were simulated, and only the stalled retests differ).
fn stalls_of(f: &Fabric) -> Stalls {
    Stalls(Rng(rng_of(f).0 ^ 0x5354_414C_4C53), lab_stall_one_in())
}

/// The seeded generator of its scheduled tests' stalls (apart again: the figures and the
/// retests' stalls are drawn as before, only the stalled scheduled tests differ).
fn scheduled_stalls_of(f: &Fabric) -> Stalls {
    Stalls(
        Rng(rng_of(f).0 ^ 0x5343_4845_4455_4C45),
        lab_scheduled_stall_one_in(),
    )
}

/// The generators of the retest rounds' control pairs, their figures' and their stalls' (apart:
/// the retests' figures and stalls are drawn as they were before controls ran beside them).
fn controls_of(f: &Fabric) -> (Stalls, Rng) {
    let rng = Rng(rng_of(f).0 ^ 0x434F_4E54_524F_4C53);
    (
        Stalls(Rng(rng.0 ^ 0x5354_414C_4C53), lab_stall_one_in()),
        rng,
    )
}

/// A retest round as the verdict plans it, run at once: its retests (from the retests'
/// generators) and its controls (from theirs), each pair loaded by the round's size.
fn run_round(
    f: &Fabric,
    planned: RetestRound,
    round: u32,
    (stalls, rng): (&mut Stalls, &mut Rng),
    (control_stalls, control_rng): &mut (Stalls, Rng),
) -> Vec<PairResult> {
    let k = planned.retests.len() + planned.controls.len();
    let mut out: Vec<PairResult> = (planned.retests.iter())
        .map(|&(a, b)| f.pair((a, b, k), round, stalls, rng))
        .collect();
    out.extend(
        (planned.controls.iter())
            .map(|&(a, b)| f.pair((a, b, k), round, control_stalls, control_rng)),
    );
    out
}

/// The fabric's scheduled pairs and retests as results, and the verdict on them (what the
/// coordinator does).
fn judged(f: &Fabric, t: &Thresholds) -> (Verdict, Vec<PairResult>) {
    let mut rng = rng_of(f);
    let mut stalls = stalls_of(f);
    let mut scheduled = scheduled_stalls_of(f);
    let schedule = Schedule::new(f.pattern, f.n, f.seed);
    let mut pairs = Vec::with_capacity(schedule.pairs());
    for r in 0..schedule.rounds() {
        let round = schedule.round(r);
        for &(a, b) in &round {
            let pair = (a, b, round.len());
            pairs.push(f.pair(pair, r as u32 + 1, &mut scheduled, &mut rng));
        }
    }
    let ranks: Vec<(u32, String)> = (0..f.n).map(|r| (r, name(r))).collect();
    let rounds = schedule.rounds() as u32;
    let mut controls = controls_of(f);
    let verdict = judge(&mut pairs, &ranks, &BTreeSet::new(), t, |planned| {
        let retests = (&mut stalls, &mut rng);
        Ok::<_, ()>(run_round(f, planned, rounds + 1, retests, &mut controls))
    })
    .expect("the simulated retests cannot fail");
    (verdict, pairs)
}

/// [`judged`] lean: the scheduled pairs straight into a sheet (no result with names for each
/// of a fleet's millions of pairs), the same figures, the same verdict. Returns the verdict,
/// the sheet, the retests' results (up to 64 hosts: a fleet's heavy-tailed noise retests a
/// million pairs, made one at a time and not kept) and how long the verdict took.
fn judged_lean(
    f: &Fabric,
    t: &Thresholds,
) -> (Verdict, Sheet, Vec<PairResult>, std::time::Duration) {
    let mut rng = rng_of(f);
    let schedule = Schedule::new(f.pattern, f.n, f.seed);
    let ranks: Vec<(u32, String)> = (0..f.n).map(|r| (r, name(r))).collect();
    let mut sheet = Sheet::new(&ranks);
    let ids = COUNTERS.map(|c| sheet.counter(c));
    sheet.reserve(schedule.pairs(), COUNTERS.len() * schedule.pairs());
    let mut scheduled = scheduled_stalls_of(f);
    for r in 0..schedule.rounds() {
        let round = schedule.round(r);
        for &(a, b) in &round {
            let (a, b, figures, rises) = f.measure((a, b, round.len()), &mut scheduled, &mut rng);
            let rises = [(a, ids[0], rises[0]), (a, ids[1], rises[1])];
            sheet.push(a, b, figures, None, &rises);
        }
    }
    let rounds = schedule.rounds() as u32;
    let rng = &std::cell::RefCell::new(rng);
    let stalls = &std::cell::RefCell::new(stalls_of(f));
    let controls = &std::cell::RefCell::new(controls_of(f));
    let mut retests = Vec::new();
    let start = std::time::Instant::now();
    let verdict = judge_sheet_keeping(
        &sheet,
        &ranks,
        &BTreeSet::new(),
        t,
        move |planned| {
            let (stalls, rng) = (&mut *stalls.borrow_mut(), &mut *rng.borrow_mut());
            let controls = &mut *controls.borrow_mut();
            Ok::<_, ()>(run_round(f, planned, rounds + 1, (stalls, rng), controls))
        },
        |p| {
            if f.n <= 64 {
                retests.push(p)
            }
        },
    )
    .expect("the simulated retests cannot fail");
    (verdict, sheet, retests, start.elapsed())
}

fn env_list<T: std::str::FromStr>(var: &str, default: &str) -> Vec<T> {
    let v = std::env::var(var).unwrap_or_else(|_| default.to_string());
    v.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{var}: '{x}' is not a number"))
        })
        .collect()
}

fn shown(s: &BTreeSet<String>) -> String {
    if s.is_empty() {
        return "-".into();
    }
    let v: Vec<&str> = s.iter().map(String::as_str).collect();
    if v.len() > 4 {
        format!("{} and {} more", v[..4].join("; "), v.len() - 4)
    } else {
        v.join("; ")
    }
}

#[test]
fn the_verdict_finds_every_planted_fault_and_no_false_suspect_up_to_512_hosts() {
    let sizes: Vec<u32> = env_list("RDMADIAG_VERDICT_SIM_N", "4,8,64,512");
    let seeds: Vec<u64> = env_list("RDMADIAG_VERDICT_SIM_SEEDS", "1,2,3");
    let pattern = match std::env::var("RDMADIAG_VERDICT_SIM_PATTERN").as_deref() {
        Ok("quick") => Pattern::Quick,
        Ok("all-pairs") | Err(_) => Pattern::AllPairs,
        Ok(other) => panic!("RDMADIAG_VERDICT_SIM_PATTERN: '{other}' (all-pairs or quick)"),
    };
    // Only the cases whose name contains one of these, only these noises (labels: 5%, 20%,
    // lab): a reduced table, as bench/fabric-verdict.sh runs at 4096 hosts all-pairs.
    let only = |var: &str| -> Option<Vec<String>> {
        let v = std::env::var(var).ok().filter(|v| !v.is_empty())?;
        Some(v.split(',').map(|x| x.trim().to_string()).collect())
    };
    let (only_cases, only_noises) = (
        only("RDMADIAG_VERDICT_SIM_CASES"),
        only("RDMADIAG_VERDICT_SIM_NOISES"),
    );
    let mut misses = Vec::new();
    let mut table = format!(
        "{:>5} {:>5} {:<26} {:>4} | {:<40} | {:<30} | {:<30} | goal\n",
        "hosts", "noise", "case", "seed", "found", "missed", "false"
    );
    let mut runs = 0;
    let (mut slowest, mut spent) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    for &n in &sizes {
        for noise in [Noise::Uniform(0.05), Noise::Uniform(0.20), Noise::Lab]
            .into_iter()
            .filter(|x| only_noises.as_ref().is_none_or(|o| o.contains(&x.label())))
        {
            let chosen = |c: &&Case| {
                only_cases
                    .as_ref()
                    .is_none_or(|o| o.iter().any(|x| c.name.contains(x.as_str())))
            };
            for case in CASES.iter().filter(|c| n >= c.min_hosts).filter(chosen) {
                let seeds = if n > 64 { &seeds[..1] } else { &seeds[..] };
                for &seed in seeds {
                    let mut f = Fabric::healthy(n, noise, pattern, seed);
                    let expected = (case.plant)(&mut f);
                    let (v, sheet, retests, took) = judged_lean(&f, &Thresholds::default());
                    if std::env::var_os("RDMADIAG_VERDICT_SIM_TIMES").is_some() {
                        eprintln!(
                            "{n} hosts, {} noise, {}, seed {seed}: verdict {:.2} s ({} suspects \
                             before the retests, {} retests in {} rounds)",
                            noise.label(),
                            case.name,
                            took.as_secs_f64(),
                            v.notes.len(),
                            v.retests.pairs,
                            v.retests.rounds
                        );
                    }
                    slowest = slowest.max(took);
                    spent += took;
                    let fails = v.findings.iter().any(|x| x.fails);
                    let suspects = v.suspects.clone();
                    runs += 1;
                    let got = named(&suspects);
                    let found: BTreeSet<String> = got.intersection(&expected).cloned().collect();
                    let missed: BTreeSet<String> = expected.difference(&got).cloned().collect();
                    let false_ones: BTreeSet<String> = got.difference(&expected).cloned().collect();
                    // The goal: at 5 % everything found, nothing false, no failing finding;
                    // at 20 % and in the lab's noise the same for the cases marked so (a
                    // healthy fabric, the one-way faults; in the lab's noise the faults the
                    // lab tests plant), the others reported only.
                    if std::env::var_os("RDMADIAG_VERDICT_SIM_FALSE_NOTES").is_some() {
                        // Each false suspect's note: its charges and its retests' figures.
                        for note in &v.notes {
                            let Some(key) = note_key(note) else {
                                continue;
                            };
                            let what = if note.confirmed && false_ones.contains(&key) {
                                "FALSE"
                            } else if missed.contains(&key) {
                                "MISSED"
                            } else {
                                continue;
                            };
                            {
                                eprintln!(
                                    "{what} {n} {} {} {seed} ref {:.3} {:.3}: {} | {} | {}",
                                    noise.label(),
                                    case.name,
                                    v.reference.bw_gbps.unwrap_or(0.0),
                                    v.reference.lat_us.unwrap_or(0.0),
                                    note.name,
                                    note.reason,
                                    note.retest.as_deref().unwrap_or("-")
                                );
                            }
                        }
                    }
                    let goal = match noise {
                        _ if case.known_miss.is_some() => false,
                        Noise::Uniform(x) if x < 0.1 => true,
                        Noise::Uniform(_) => case.at_20,
                        Noise::Lab => case.in_lab && n <= LAB_NOISE_GOAL_HOSTS,
                    }
                    .then_some(missed.is_empty() && false_ones.is_empty() && !fails);
                    let mark = match (goal, case.known_miss) {
                        (_, Some(_)) if missed.is_empty() => "known miss: named",
                        (_, Some(_)) => "known miss: missed",
                        (Some(true), _) => "met",
                        (Some(false), _) => "MISSED",
                        (None, _) => "(report)",
                    };
                    table.push_str(&format!(
                        "{n:>5} {:>5} {:<26} {seed:>4} | {:<40} | {:<30} | {:<30} | {mark}\n",
                        noise.label(),
                        case.name,
                        shown(&found),
                        shown(&missed),
                        shown(&false_ones)
                    ));
                    if goal == Some(false) {
                        misses.push(format!(
                            "{n} hosts, {} noise, {}, seed {seed}: missed {}, false {}{}",
                            noise.label(),
                            case.name,
                            shown(&missed),
                            shown(&false_ones),
                            if fails { ", a failing finding" } else { "" }
                        ));
                        if n <= 8 {
                            // What the verdict saw, for whoever reads the failure.
                            let ratio = |x: Option<f64>| x.unwrap_or(0.0) / BW;
                            let scheduled: Vec<String> = sheet
                                .figs()
                                .iter()
                                .map(|p| {
                                    let (a, b) = (sheet.name(p.a), sheet.name(p.b));
                                    (String::new(), a, b, ratio(p.bw()), ratio(p.bw_reverse()))
                                })
                                .chain(retests.iter().map(|p| {
                                    let (x, y) = (ratio(p.bw_gbps), ratio(p.bw_gbps_reverse));
                                    ("retest ".to_string(), p.a.as_str(), p.b.as_str(), x, y)
                                }))
                                .map(|(what, a, b, x, y)| {
                                    format!("    {what}{a} - {b} {x:.3} / {y:.3}")
                                })
                                .collect();
                            misses.push(format!(
                                "  reference {:.3} x, noise {:.3}\n{}\n{}",
                                v.reference.bw_gbps.unwrap_or(0.0) / BW,
                                v.reference.bw_spread.unwrap_or(0.0),
                                scheduled.join("\n"),
                                v.notes
                                    .iter()
                                    .map(|n| format!("  note {n:?}"))
                                    .collect::<Vec<_>>()
                                    .join("\n")
                            ));
                        }
                    }
                }
            }
        }
    }
    println!("{table}");
    for (case, why) in CASES.iter().filter_map(|c| Some((c.name, c.known_miss?))) {
        println!("{case}: a known miss, no goal: {why}");
    }
    println!(
        "{runs} verdicts in {:.1} s, the slowest {:.1} s (the figures' simulation not counted)",
        spent.as_secs_f64(),
        slowest.as_secs_f64()
    );
    let filtered = only_cases.is_some() || only_noises.is_some();
    assert!(
        runs >= if filtered { 1 } else { CASES.len() },
        "only {runs} runs: the table is empty"
    );
    assert!(
        misses.is_empty(),
        "{} of {runs} runs missed their goal:\n{}\n{table}",
        misses.len(),
        misses.join("\n")
    );
}

#[test]
fn a_fault_on_most_hosts_becomes_the_reference_and_only_an_absolute_floor_sees_it() {
    // What the ratio rules cannot see: seven of eight hosts at half rate are the fabric's
    // reference, and the one healthy host is merely fast. --expect-bw sees it: most pairs
    // below the floor are one failing fabric-wide finding.
    let mut f = Fabric::healthy(8, Noise::Uniform(0.05), Pattern::AllPairs, 1);
    for r in 1..8 {
        f.nic[r] = 0.5;
    }
    let (suspects, fails) = run(&f, &Thresholds::default());
    assert!(suspects.is_empty() && !fails, "ratios alone: {suspects:?}");
    let floor = Thresholds {
        expect_bw_gbps: Some(0.8 * BW),
        ..Thresholds::default()
    };
    let (_, fails) = run(&f, &floor);
    assert!(fails, "--expect-bw {} Gb/s: no failing finding", 0.8 * BW);
}

#[test]
fn at_fleet_size_the_text_is_suspects_a_sorted_summary_and_histograms_not_matrices() {
    let mut f = Fabric::healthy(128, Noise::Uniform(0.05), Pattern::AllPairs, 1);
    f.nic[77] = 0.6;
    let (v, pairs) = judged(&f, &Thresholds::default());
    let hosts: Vec<HostInfo> = (0..f.n)
        .map(|r| HostInfo {
            rank: r,
            host: name(r),
            hostname: name(r),
            device: "rxe0".into(),
            port: 1,
            gid: String::new(),
            address: String::new(),
            test_port: 0,
            config: None,
        })
        .collect();
    let outcome = Outcome {
        hosts,
        pairs,
        rounds: f.n,
        reference: v.reference,
        findings: v.findings,
        limits: v.limits,
        suspects: v.suspects,
        notes: v.notes,
        retests: v.retests,
        missing: Vec::new(),
        missing_reasons: Vec::new(),
        refused: Vec::new(),
        config: Vec::new(),
        exit_code: 3,
    };
    let settings = FabricSettings {
        pattern: "all-pairs".into(),
        tests: vec!["bw".into(), "lat".into()],
        bw_size: 65536,
        bw_iterations: 100,
        lat_size: 2,
        lat_iterations: 100,
        min_bw_ratio: 0.9,
        max_lat_ratio: 1.5,
        expect_bw_gbps: None,
        expect_lat_us: None,
        timeout_s: 30.0,
        counter_check: true,
        max_error_delta: None,
        tclass: 0,
        sl: 0,
        require_same: vec![],
    };
    let report = rdmadiag::fabric::report(outcome, settings, std::time::Duration::from_secs(1));
    assert_eq!(report.host_summary[0].host, name(77), "worst host first");
    assert_eq!(report.suspects.hosts, [name(77)]);
    let text = fabric_text(&report, Style::plain());
    let lines = text.lines().count();
    assert!(
        lines < 100,
        "{lines} lines for 128 hosts: matrices were printed?\n{text}"
    );
    assert!(
        !text.contains("from \\ to"),
        "no host x host matrix above 16 hosts:\n{text}"
    );
    assert!(text.contains(&name(77)), "the suspect is named:\n{text}");
    assert!(
        text.to_lowercase().contains("histogram") || text.contains('#'),
        "a histogram of the pairs instead:\n{text}"
    );
}

#[test]
fn a_sheet_of_the_pairs_is_judged_as_the_pairs_themselves_are() {
    // The table judges lean sheets; the coordinator judges its results: one verdict, to the
    // last word, whichever way the pairs came (a slow host, a one-way link and a group, so
    // that retests run and held links are released).
    // The last under the lab's load: its retests packed into rounds of their own sizes.
    for (n, plant) in [(8, 0), (64, 1), (64, 2), (8, 3)] {
        let mut f = Fabric::healthy(n, Noise::Lab, Pattern::AllPairs, 7);
        match plant {
            0 => f.nic[3] = 0.6,
            1 => f.send[5] = 0.5,
            2 => f.group = ((8..16).collect(), 0.5),
            _ => {
                f.nic[3] = 0.6;
                f.load = Some(LAB_LOAD);
            }
        }
        one_way_link(&mut f, 0.3);
        let (lean, sheet, retests, _) = judged_lean(&f, &Thresholds::default());
        let (full, pairs) = judged(&f, &Thresholds::default());
        assert_eq!(lean, full, "{n} hosts, fault {plant}");
        assert!(
            !lean.notes.is_empty(),
            "{n} hosts, fault {plant}: nothing to compare"
        );
        assert_eq!(sheet.figs().len() + retests.len(), pairs.len());
        assert_eq!(retests[..], pairs[sheet.figs().len()..]);
    }
}

#[test]
fn a_link_slow_only_under_load_is_named_by_its_retests_beside_controls() {
    // Under the lab's load, a link at 60 % (or 65 %) in every loaded round (an oversubscribed
    // uplink) is charged by the schedule, then retested beside control pairs that give its
    // round the schedule's load: slow again, named. Alone (before control pairs), it ran at
    // full speed, 1.5 x the reference the loaded schedule measured, and was cleared (0/15 named
    // at 0.60-0.70 in the lab).
    for factor in [0.6, 0.65] {
        for n in [4, 5, 7, 8] {
            for seed in 1..=3 {
                let at = format!("{n} hosts, seed {seed}, the link at {factor}");
                let mut f = Fabric::healthy(n, Noise::Uniform(0.05), Pattern::AllPairs, seed);
                let link = loaded_link(&mut f, factor);
                let (v, _, retests, _) = judged_lean(&f, &Thresholds::default());
                let note = v
                    .notes
                    .iter()
                    .find(|x| note_key(x).is_some_and(|k| link.contains(&k)))
                    .unwrap_or_else(|| panic!("{at}: the schedule did not charge {link:?}"));
                assert!(note.retests > 0, "{at}: {link:?} not retested: {note:?}");
                assert!(
                    note.confirmed && named(&v.suspects) == link,
                    "{at}: {link:?} not named, or not alone: {:?} {note:?}",
                    v.suspects
                );
                // Its retests ran beside controls, which are judged by no rule.
                assert!(v.retests.controls > 0, "{at}: no control: {:?}", v.retests);
                let controls: Vec<&PairResult> = retests.iter().filter(|p| p.control).collect();
                assert_eq!(controls.len() as u32, v.retests.controls, "{at}");
                assert!(
                    controls.iter().all(|p| p.retested && !p.flagged),
                    "{at}: {controls:?}"
                );
            }
        }
    }
}
