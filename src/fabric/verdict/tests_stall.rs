//! The verdict with retests measured while a host stalled: their bandwidth counts neither way,
//! the suspect is retested again, and a fault is never passed for them.

use super::tests::pair;
use super::tests_retest::{fabric_of, judged_with_retests, retested};
use super::*;

/// The lab's run in CI (fab1..fab4 as h0..h3): every pair at about 0.069 Gb/s and 520-690 us,
/// except fab1 -> fab3 (h0 -> h2) at 0.047 Gb/s, 0.68 x: below the ratio, within the noise.
/// The reference latency is 600 us.
fn ci_run() -> Vec<PairResult> {
    let figures = [
        (0, 1, 0.070, 0.067, 560.0),
        (0, 2, 0.047, 0.071, 640.0),
        (0, 3, 0.068, 0.072, 610.0),
        (1, 2, 0.066, 0.069, 520.0),
        (1, 3, 0.071, 0.068, 690.0),
        (2, 3, 0.069, 0.070, 590.0),
    ];
    figures
        .iter()
        .map(|&(a, b, x, y, lat)| {
            let mut q = pair(a, b, x, lat);
            q.bw_gbps_reverse = Some(y);
            q
        })
        .collect()
}

/// A retest of h0 - h2 in the CI run: `(h0 -> h2, h2 -> h0, latency)`.
fn ci_retest(a: u32, b: u32, (x, y, lat): (f64, f64, f64)) -> PairResult {
    assert_eq!((a, b), (0, 2), "only fab1 - fab3 is retested");
    let mut q = pair(a, b, x, lat);
    q.bw_gbps_reverse = Some(y);
    q.retested = true;
    q
}

/// The CI run judged, its retests of h0 - h2 round by round from `retests` (the last again
/// once they run out).
fn ci_verdict(t: &Thresholds, retests: &[(f64, f64, f64)]) -> Verdict {
    judged_with_retests(&mut ci_run(), t, |round, a, b| {
        if (a, b) != (0, 2) {
            // A control beside it: as the schedule measured it.
            let mut q = (ci_run().into_iter())
                .find(|q| (q.a_rank, q.b_rank) == (a, b))
                .expect("a scheduled pair");
            q.retested = true;
            return q;
        }
        let k = (round as usize - 1).min(retests.len() - 1);
        ci_retest(a, b, retests[k])
    })
}

/// The CI run's retests: 0.061 Gb/s (0.88 x) at 620 us, then 0.035 (0.51 x) with the guest
/// stalled (1657.9 us, 2.8 x the reference latency), then the link at its rate.
const CI_RETESTS: [(f64, f64, f64); 3] = [
    (0.061, 0.070, 620.0),
    (0.035, 0.052, 1657.9),
    (0.066, 0.069, 600.0),
];

#[test]
fn the_ci_runs_false_suspect_is_retested_past_its_stalled_retest_and_cleared() {
    let t = Thresholds::default();
    let v = ci_verdict(&t, &CI_RETESTS);
    let near = |x: Option<f64>, y: f64| x.is_some_and(|x| (x / y - 1.0).abs() < 0.005);
    assert!(near(v.reference.bw_gbps, 0.069), "{v:?}");
    assert!(near(v.reference.lat_us, 600.0), "{v:?}");
    assert_eq!(v.notes.len(), 1, "h0 - h2 alone is a suspect: {v:?}");
    let note = &v.notes[0];
    assert_eq!(
        (note.name.as_str(), note.rule),
        ("h0 - h2", Rule::BwLink),
        "{note:?}"
    );
    assert!(v.suspects.is_empty(), "not confirmed: {v:?}");
    assert!(!note.confirmed && !note.undecided, "cleared: {note:?}");
    // Retested again after the stall: three retests, one of them stalled.
    assert_eq!(note.retests, 3, "{note:?}");
    assert_eq!((v.retests.rounds, v.retests.stalled), (3, 1), "{v:?}");
    let said = note.retest.as_deref().unwrap();
    assert!(
        said.contains(
            "1657.9 us (stalled: 2.76 x the reference latency, its bandwidth not counted)"
        ),
        "{said}"
    );
    assert!(said.ends_with("bw-link passed"), "{said}");
}

#[test]
fn the_same_retest_at_a_normal_latency_is_a_link_at_half_speed_and_confirms_it() {
    // What the CI run's verdict did with its stalled retest, and still does when the latency
    // is the run's: 0.88 x and 0.51 x, below the ratio and standing out together.
    let mut retests = CI_RETESTS;
    retests[1].2 = 610.0;
    let v = ci_verdict(&Thresholds::default(), &retests);
    assert_eq!(
        v.suspects.links,
        [["h0".to_string(), "h2".to_string()]],
        "{v:?}"
    );
    assert_eq!((v.retests.rounds, v.retests.stalled), (2, 0), "{v:?}");
}

#[test]
fn a_suspect_whose_budget_ends_on_a_stall_is_undecided_not_confirmed() {
    // Two rounds: 0.88 x, then the stall. One counted figure below the ratio cannot decide.
    let t = Thresholds {
        retest_rounds: 2,
        ..Thresholds::default()
    };
    let v = ci_verdict(&t, &CI_RETESTS);
    assert!(v.suspects.is_empty(), "{v:?}");
    assert!(v.notes[0].undecided, "{v:?}");
    assert_eq!(v.retests.undecided, 1, "{v:?}");
    // Stalls alone: a charge within the noise stays undecided (not cleared, not confirmed).
    let v = ci_verdict(&t, &[CI_RETESTS[1]]);
    assert!(v.suspects.is_empty() && v.notes[0].undecided, "{v:?}");
    assert_eq!((v.retests.pairs, v.retests.stalled), (2, 2), "{v:?}");
    let said = v.notes[0].retest.as_deref().unwrap();
    assert!(
        said.ends_with(
            "bw-link not measured (every retest stalled), undecided when the budget ran out"
        ),
        "{said}"
    );
}

/// A fabric of 4 hosts at 10 Gb/s and 5 us, `slow(a, b)` scaling the direction a to b, its
/// retests answered by `retest(round, a, b)`.
fn slow_fabric(
    slow: impl Fn(u32, u32) -> f64 + Copy,
    t: &Thresholds,
    retest: impl Fn(u32, u32, u32) -> PairResult,
) -> Verdict {
    judged_with_retests(&mut fabric_of(4, slow), t, retest)
}

/// A retest of `slow`'s fabric at `lat` x the latency.
fn retest_at(a: u32, b: u32, slow: impl Fn(u32, u32) -> f64, lat: f64) -> PairResult {
    let mut q = retested(a, b, slow);
    q.lat_us = q.lat_us.map(|v| v * lat);
    q
}

#[test]
fn a_link_at_a_half_or_a_quarter_with_a_somewhat_higher_latency_is_confirmed() {
    // Throttled links whose retests' latency is up to 1.9 x the reference: not stalls.
    for (rate, lat) in [(0.5, 1.0), (0.5, 1.9), (0.25, 1.4), (0.25, 1.9)] {
        for both_ways in [false, true] {
            let slow = move |a: u32, b: u32| {
                if (a, b) == (1, 3) || (both_ways && (a, b) == (3, 1)) {
                    rate
                } else {
                    1.0
                }
            };
            let v = slow_fabric(slow, &Thresholds::default(), |_, a, b| {
                retest_at(a, b, slow, if (a, b) == (1, 3) { lat } else { 1.0 })
            });
            assert_eq!(
                v.suspects.links,
                [["h1".to_string(), "h3".to_string()]],
                "{rate} x, latency {lat} x, both ways {both_ways}: {v:?}"
            );
            assert_eq!(v.retests.stalled, 0, "{v:?}");
        }
    }
}

#[test]
fn a_stalled_retest_does_not_clear_a_real_slow_link() {
    // h1 -> h3 at 0.3 x (gross). Its first retest stalls, at 3 x the latency, and at full rate
    // besides: counted neither way, so it does not clear the link (it did); the next retest
    // sees it at 0.3 x again.
    let slow = |a: u32, b: u32| if (a, b) == (1, 3) { 0.3 } else { 1.0 };
    let t = Thresholds::default();
    let v = slow_fabric(slow, &t, |round, a, b| {
        if round == 1 {
            retest_at(a, b, |_, _| 1.0, 3.0)
        } else {
            retest_at(a, b, slow, 1.0)
        }
    });
    assert_eq!(
        v.suspects.links,
        [["h1".to_string(), "h3".to_string()]],
        "{v:?}"
    );
    assert_eq!((v.retests.rounds, v.retests.stalled), (2, 1), "{v:?}");
    // Every retest stalled: not measured, the gross charge stands (a fault is never passed).
    let v = slow_fabric(slow, &t, |_, a, b| retest_at(a, b, |_, _| 1.0, 3.0));
    assert_eq!(
        v.suspects.links,
        [["h1".to_string(), "h3".to_string()]],
        "{v:?}"
    );
    assert_eq!(v.retests.stalled, t.retest_rounds, "{v:?}");
    let said = v.notes[0].retest.as_deref().unwrap();
    assert!(
        said.ends_with("bw-link not measured (every retest stalled): it stands"),
        "{said}"
    );
}

#[test]
fn a_link_with_a_high_latency_is_still_named_by_the_latency_rule() {
    // h0 - h2 at 3 x the latency on the schedule and on every retest (at full rate, then at
    // half): the latency is the link's, and lat-link names it.
    for rate in [1.0, 0.5] {
        let slow = move |a: u32, b: u32| if (a, b) == (0, 2) { rate } else { 1.0 };
        let mut p = fabric_of(4, slow);
        for q in p.iter_mut().filter(|q| (q.a_rank, q.b_rank) == (0, 2)) {
            q.lat_us = q.lat_us.map(|v| 3.0 * v);
        }
        let v = judged_with_retests(&mut p, &Thresholds::default(), |_, a, b| {
            retest_at(a, b, slow, if (a, b) == (0, 2) { 3.0 } else { 1.0 })
        });
        assert_eq!(
            v.suspects.links,
            [["h0".to_string(), "h2".to_string()]],
            "{rate} x: {v:?}"
        );
        let note = &v.notes[0];
        assert!(note.confirmed && note.rule == Rule::LatLink, "{note:?}");
    }
}

#[test]
fn a_stall_is_a_latency_at_twice_the_reference_and_above_the_latency_ratio() {
    let r = Reference {
        lat_us: Some(600.0),
        lat_spread: Some(0.1),
        ..Reference::default()
    };
    let t = Thresholds::default();
    assert!(!r.stalled(Some(1190.0), &t));
    assert!(r.stalled(Some(1200.0), &t));
    assert!(r.stalled(Some(1657.9), &t));
    assert!(!r.stalled(None, &t), "no latency measured");
    assert!(
        !Reference::default().stalled(Some(1657.9), &t),
        "no reference latency"
    );
    // A run that allows 3 x the latency takes no less for a stall.
    let wide = Thresholds {
        max_lat_ratio: 3.0,
        ..t
    };
    assert!(!r.stalled(Some(1657.9), &wide) && r.stalled(Some(1900.0), &wide));
}
