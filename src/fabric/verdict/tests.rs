//! The verdict's rules on small hand-made fabrics (the large simulated ones are in
//! tests/fabric_verdict.rs).

use super::*;

pub(super) fn name(r: u32) -> String {
    format!("h{r}")
}

pub(super) fn pair(a: u32, b: u32, bw: f64, lat: f64) -> PairResult {
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
        control: false,
        control_bw_gbps: None,
    }
}

/// A deterministic +-2 % wobble, so the noise estimate is not zero.
pub(super) fn wobble(a: u32, b: u32, k: u32) -> f64 {
    1.0 + 0.02 * (((a * 7 + b * 13 + k * 5) % 5) as f64 - 2.0) / 2.0
}

/// All pairs of n hosts at about 10 Gb/s and 5 us; `bw(a, b)` scales a pair.
fn fabric(n: u32, bw: impl Fn(u32, u32) -> f64) -> Vec<PairResult> {
    let mut v = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let mut p = pair(
                a,
                b,
                10.0 * bw(a, b) * wobble(a, b, 0),
                5.0 * wobble(a, b, 2),
            );
            p.bw_gbps_reverse = Some(10.0 * bw(a, b) * wobble(a, b, 1));
            v.push(p);
        }
    }
    v
}

fn judge_with(pairs: &mut [PairResult], t: &Thresholds) -> (Reference, Judgement) {
    let missing = BTreeSet::new();
    let r = reference(pairs, &missing, t);
    flag(pairs, &r, t);
    let j = classify(pairs, &missing, &r, t);
    (r, j)
}

pub(super) fn judge(pairs: &mut [PairResult]) -> (Reference, Judgement) {
    judge_with(pairs, &Thresholds::default())
}

pub(super) fn hosts(j: &Judgement) -> Vec<(String, &'static str)> {
    j.suspects
        .iter()
        .filter_map(|s| match &s.target {
            Target::Host { host, .. } => Some((host.clone(), s.rule().name())),
            _ => None,
        })
        .collect()
}

/// A pending trial of charge `c` against the link `a` - `b`, with `retests`.
pub(super) fn link_trial(c: &Charge, (a, b): (u32, u32), retests: Vec<Retest>) -> Trial {
    Trial {
        suspect: Suspect {
            target: Target::Link {
                a: (a, name(a)),
                b: (b, name(b)),
            },
            charges: vec![c.clone()],
        },
        retests,
        state: retest::State::Pending,
    }
}

/// The trials of `suspects` with their retests (`retests[i]` for suspect i, run twice).
fn tried(suspects: &[Suspect], retests: &[PairResult], r: &Reference) -> Vec<Trial> {
    let t = Thresholds::default();
    let mut out = Vec::new();
    for (s, p) in suspects.iter().zip(retests) {
        let mut x = Trial {
            suspect: s.clone(),
            // Two retests alike (what it takes to confirm a charge on its retests alone).
            retests: (0..MIN_RETESTS_TO_CONFIRM)
                .map(|_| Retest::of(p, r, &t))
                .collect(),
            state: retest::State::Pending,
        };
        x.state = x.decide(r, &t);
        out.push(x);
    }
    out
}

pub(super) fn links(j: &Judgement) -> Vec<(String, String)> {
    j.suspects
        .iter()
        .filter_map(|s| match &s.target {
            Target::Link { a, b } => Some((a.1.clone(), b.1.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_healthy_fabric_flags_nothing() {
    let mut p = fabric(4, |_, _| 1.0);
    let (r, j) = judge(&mut p);
    assert!(j.suspects.is_empty() && j.findings.is_empty(), "{j:?}");
    assert!(p.iter().all(|p| !p.flagged && p.reason.is_none()));
    let bw = r.bw_gbps.unwrap();
    assert!((bw - 10.0).abs() < 0.3, "{r:?}");
    // +-2 % of wobble: the noise is the floor.
    assert_eq!(r.bw_spread, Some(MIN_SPREAD), "{r:?}");
}

#[test]
fn four_hosts_one_host_at_half_is_the_only_suspect_and_the_reference_holds() {
    let mut p = fabric(4, |a, b| if a == 2 || b == 2 { 0.5 } else { 1.0 });
    let (r, j) = judge(&mut p);
    assert_eq!(hosts(&j), [("h2".to_string(), "bw-host")], "{j:?}");
    assert!(
        links(&j).is_empty(),
        "its pairs are explained by the host: {j:?}"
    );
    assert!(
        r.bw_gbps.unwrap() > 9.0,
        "one slow host of 4 does not move it: {r:?}"
    );
    let reason = j.suspects[0].charges[0].reason.clone();
    assert!(
        reason.contains("0.5") && reason.contains("below 0.9 x"),
        "{reason}"
    );

    let ranks: Vec<(u32, String)> = (0..4).map(|r| (r, name(r))).collect();
    let plan = retest_pairs(&j.suspects, &ranks, &BTreeSet::new());
    let (x, y) = plan[0].unwrap();
    assert!(
        (x == 2) != (y == 2),
        "the suspect against another host: {plan:?}"
    );
    let retest = |bw: f64| {
        let mut q = pair(x, y, bw, 5.0);
        q.retested = true;
        q
    };
    let t = Thresholds::default();
    let (s, notes) = conclude(tried(&j.suspects, &[retest(5.0)], &r), &r, &t);
    assert_eq!(s.hosts, ["h2"]);
    assert!(notes[0].confirmed && notes[0].rule == Rule::BwHost);
    assert!(notes[0].retest.as_deref().unwrap().contains("slow again"));
    let (s, notes) = conclude(tried(&j.suspects, &[retest(10.0)], &r), &r, &t);
    assert!(s.is_empty() && !notes[0].confirmed, "{notes:?}");
}

#[test]
fn four_hosts_one_slow_link_names_the_link_not_its_hosts() {
    let mut p = fabric(4, |a, b| if (a, b) == (0, 3) { 0.5 } else { 1.0 });
    let (_, j) = judge(&mut p);
    assert!(hosts(&j).is_empty(), "{j:?}");
    assert_eq!(links(&j), [("h0".to_string(), "h3".to_string())]);
    let ranks: Vec<(u32, String)> = (0..4).map(|r| (r, name(r))).collect();
    assert_eq!(
        retest_pairs(&j.suspects, &ranks, &BTreeSet::new()),
        [Some((0, 3))]
    );
}

#[test]
fn one_direction_of_a_host() {
    let mut p = fabric(8, |_, _| 1.0);
    for q in &mut p {
        if q.a == "h5" {
            q.bw_gbps = q.bw_gbps.map(|v| v * 0.6);
        } else if q.b == "h5" {
            q.bw_gbps_reverse = q.bw_gbps_reverse.map(|v| v * 0.6);
        }
    }
    let (_, j) = judge(&mut p);
    assert_eq!(hosts(&j), [("h5".to_string(), "bw-send")], "{j:?}");
}

#[test]
fn a_group_fast_inside_slow_outside_is_one_finding() {
    let inside = |h: u32| h < 4;
    let mut p = fabric(12, |a, b| if inside(a) != inside(b) { 0.5 } else { 1.0 });
    let (_, j) = judge(&mut p);
    assert_eq!(j.suspects.len(), 1, "{j:?}");
    let reason = &j.suspects[0].charges[0].reason;
    match &j.suspects[0].target {
        Target::Group { members } => {
            let names: Vec<&str> = members.iter().map(|m| m.1.as_str()).collect();
            assert_eq!(names, ["h0", "h1", "h2", "h3"]);
            assert!(reason.contains("fast among themselves"), "{reason}");
        }
        s => panic!("not a group: {s:?}"),
    }
}

#[test]
fn noise_hides_what_it_can_explain() {
    // Figures that swing +-30 % pair to pair: a pair at 0.75 x is within the noise.
    let swing = |a: u32, b: u32| 1.0 + 0.3 * (((a * 5 + b * 3) % 7) as f64 - 3.0) / 3.0;
    let mut p = fabric(6, swing);
    let (r, j) = judge(&mut p);
    assert!(r.bw_spread.unwrap() > 0.1, "{r:?}");
    // Nothing stands out on one figure: at most a pair the retests are to decide.
    assert!(
        j.suspects
            .iter()
            .flat_map(|s| &s.charges)
            .all(|c| c.gate == Gate::Undecided),
        "{j:?}"
    );
    // ...while half the rate still stands out.
    let mut p = fabric(6, |a, b| {
        swing(a, b) * if a == 1 || b == 1 { 0.4 } else { 1.0 }
    });
    let (_, j) = judge(&mut p);
    assert_eq!(hosts(&j), [("h1".to_string(), "bw-host")], "{j:?}");
}

#[test]
fn latency_high_host() {
    let mut p = fabric(6, |_, _| 1.0);
    for q in p.iter_mut().filter(|q| q.has("h4")) {
        q.lat_us = q.lat_us.map(|v| v * 3.0);
    }
    let (_, j) = judge(&mut p);
    assert_eq!(hosts(&j), [("h4".to_string(), "lat-host")], "{j:?}");
}

#[test]
fn counters_rising_everywhere_are_information_and_an_outlier_is_flagged() {
    let mut p = fabric(4, |_, _| 1.0);
    for (i, q) in p.iter_mut().enumerate() {
        q.counters.insert(
            q.a.clone(),
            BTreeMap::from([("completer_retry_err".to_string(), 1 + i as u64 % 4)]),
        );
    }
    let (r, j) = judge(&mut p);
    assert!(j.suspects.is_empty(), "{j:?}");
    assert!(p.iter().all(|p| !p.flagged), "{p:?}");
    assert_eq!(j.findings.len(), 1, "{j:?}");
    let f = &j.findings[0];
    assert!(!f.fails && f.text.contains("rose on 6 of 6 pairs"), "{f:?}");
    assert!(f.text.contains("completer_retry_err +1..+4"), "{f:?}");
    assert!(r.counter_fence["completer_retry_err"] >= 4, "{r:?}");

    // One pair far above the others' rise is flagged: a link (its hosts are fine elsewhere).
    let b = p[2].b.clone();
    p[2].counters.insert(
        b,
        BTreeMap::from([("completer_retry_err".to_string(), 500)]),
    );
    let (_, j) = judge(&mut p);
    assert!(
        p[2].flagged && p[2].reason.as_deref().unwrap().contains("+500"),
        "{p:?}"
    );
    assert_eq!(links(&j), [(p[2].a.clone(), p[2].b.clone())], "{j:?}");

    // An explicit --max-error-delta judges every pair against it: most pairs above it are one
    // failing fabric-wide finding, not 4 suspect hosts.
    let t = Thresholds {
        max_error_delta: Some(0),
        ..Thresholds::default()
    };
    let (_, j) = judge_with(&mut p, &t);
    assert!(j.suspects.is_empty(), "{j:?}");
    assert!(
        j.findings
            .iter()
            .any(|f| f.fails && f.rule == Rule::Counters),
        "{j:?}"
    );
    // --no-counter-check: reported, not judged.
    let t = Thresholds {
        counters: false,
        ..Thresholds::default()
    };
    let (_, j) = judge_with(&mut p, &t);
    assert!(j.suspects.is_empty() && !p[2].flagged, "{j:?}");
}

#[test]
fn an_absolute_floor_below_everything_is_fabric_wide() {
    let mut p = fabric(5, |_, _| 1.0);
    let t = Thresholds {
        expect_bw_gbps: Some(50.0),
        ..Thresholds::default()
    };
    let (_, j) = judge_with(&mut p, &t);
    assert!(j.suspects.is_empty(), "{j:?}");
    assert_eq!(j.findings.len(), 1);
    assert!(
        j.findings[0].fails && j.findings[0].text.contains("10 of 10 pairs"),
        "{j:?}"
    );
}

#[test]
fn three_hosts_say_what_they_cannot_judge() {
    let mut p = fabric(3, |a, b| if a == 2 || b == 2 { 0.5 } else { 1.0 });
    let (_, j) = judge(&mut p);
    assert!(j.suspects.is_empty(), "{j:?}");
    assert!(
        j.limits[0].contains("3 hosts: the ratio rules need 4"),
        "{j:?}"
    );
    // ...an absolute floor still judges, and a host whose tests fail is found by the failures.
    let t = Thresholds {
        expect_bw_gbps: Some(7.0),
        ..Thresholds::default()
    };
    let (_, j) = judge_with(&mut p, &t);
    assert_eq!(hosts(&j), [("h2".to_string(), "expect-bw")]);
    let mut p = fabric(3, |_, _| 1.0);
    for q in p.iter_mut().filter(|q| q.has("h1")) {
        q.error = Some("no completion within 10s".into());
        q.bw_gbps = None;
    }
    let (_, j) = judge(&mut p);
    assert_eq!(hosts(&j), [("h1".to_string(), "failure")]);
    assert!(links(&j).is_empty());
}

#[test]
fn a_missing_rank_explains_its_pairs() {
    let mut p = fabric(5, |_, _| 1.0);
    for q in p.iter_mut().filter(|q| q.has("h3")) {
        q.error = Some("rank 3 (h3) is missing".into());
        q.bw_gbps = None;
    }
    let missing = BTreeSet::from(["h3".to_string()]);
    let t = Thresholds::default();
    let r = reference(&p, &missing, &t);
    flag(&mut p, &r, &t);
    assert!(classify(&p, &missing, &r, &t).suspects.is_empty());
}

#[test]
fn two_hosts_cannot_tell_host_from_link() {
    let mut p = vec![pair(0, 1, 1.0, 5.0)];
    p[0].error = Some("refused".into());
    let (_, j) = judge(&mut p);
    assert!(hosts(&j).is_empty());
    assert_eq!(links(&j).len(), 1);
    let ranks: Vec<(u32, String)> = (0..2).map(|r| (r, name(r))).collect();
    assert_eq!(
        retest_pairs(&j.suspects, &ranks, &BTreeSet::new()),
        [Some((0, 1))]
    );
}

#[test]
fn medians_noise_gate_and_summary() {
    assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    assert_eq!(median(vec![]), None);
    assert_eq!(noise_sigmas(4), MIN_SIGMAS);
    assert!(noise_sigmas(8_000_000) > 6.0);
    let mut p = fabric(5, |a, b| if a == 0 || b == 0 { 0.5 } else { 1.0 });
    let (r, _) = judge(&mut p);
    let names: Vec<String> = (0..5).map(name).collect();
    let s = host_summary(&names, &p, &r);
    assert_eq!(s[0].host, "h0", "worst first: {s:?}");
    assert_eq!((s[0].pairs, s[0].flagged), (4, 4));
    assert!((s[0].bw_ratio.unwrap() - 0.5).abs() < 0.05, "{s:?}");
}
