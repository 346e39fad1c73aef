//! A bw-link's retests that look like a stall without the latency of one: both directions
//! below the ratio at a latency above the reference's (a paused guest that was not paused for
//! the whole latency test). One alone does not count while another retest can be had; two, or
//! one that is all a suspect has when the budget ends, count as any retest.

use super::tests::pair;
use super::tests_retest::{fabric_of, judged_with_retests, retested};
use super::*;

/// A retest of `slow`'s 4-host fabric (10 Gb/s, 5 us) at `lat` x the latency.
fn retest_at(a: u32, b: u32, slow: impl Fn(u32, u32) -> f64, lat: f64) -> PairResult {
    let mut q = retested(a, b, slow);
    q.lat_us = q.lat_us.map(|v| v * lat);
    q
}

/// The 4-host fabric with h1 -> h3 at `sched` x on the schedule, judged with `t`, the retests
/// of h1 - h3 round by round from `retests` (`(h1 -> h3, h3 -> h1, latency)` in x of the
/// reference; the last again once they run out), every other retest at full rate.
fn judged(t: &Thresholds, sched: f64, retests: &[(f64, f64, f64)]) -> Verdict {
    let scheduled = move |a: u32, b: u32| if (a, b) == (1, 3) { sched } else { 1.0 };
    judged_with_retests(&mut fabric_of(4, scheduled), t, |round, a, b| {
        if (a, b) != (1, 3) {
            return retested(a, b, |_, _| 1.0);
        }
        let (x, y, lat) = retests[(round as usize - 1).min(retests.len() - 1)];
        let slow = move |f: u32, _| if f == 1 { x } else { y };
        retest_at(a, b, slow, lat)
    })
}

fn h1_h3() -> Vec<[String; 2]> {
    vec![["h1".to_string(), "h3".to_string()]]
}

#[test]
fn a_stall_like_retest_is_both_ways_below_the_ratio_at_a_latency_above_the_reference() {
    let r = Reference {
        bw_gbps: Some(10.0),
        lat_us: Some(5.0),
        lat_spread: Some(0.1),
        ..Reference::default()
    };
    let t = Thresholds::default();
    let at = |x: f64, y: Option<f64>, lat: Option<f64>| {
        let mut p = pair(0, 1, 10.0 * x, 5.0);
        p.bw_gbps_reverse = y.map(|y| 10.0 * y);
        p.lat_us = lat.map(|l| 5.0 * l);
        r.stall_like(&p, &t)
    };
    assert!(at(0.45, Some(0.6), Some(1.11)));
    assert!(at(0.3, Some(0.89), Some(1.9)));
    assert!(!at(0.45, Some(0.9), Some(1.5)), "one way: a slow direction");
    assert!(
        !at(0.45, Some(0.6), Some(1.1)),
        "within the latency's noise (10 %)"
    );
    assert!(!at(0.45, None, Some(1.5)), "one direction measured");
    assert!(!at(0.45, Some(0.6), None), "no latency measured");
}

#[test]
fn a_healthy_link_whose_first_retest_looks_like_a_stall_is_retested_and_cleared() {
    // The lab's noise at 512 hosts, simulated: h1 -> h3 at 0.45 x on the schedule (a stall, or
    // the noise's tail), retested at 0.45 / 0.55 x with 1.6 x the latency (under the 2 x of a
    // stall; the noise here is 10 %), then at its rate. Counted, that retest was a second sighting at half the
    // reference and confirmed the link at once (18 of the 20 false links of the lab's noise
    // at 512 hosts, seed 1, were named so).
    for first in [(0.45, 0.55, 1.6), (0.3, 0.7, 1.15), (0.5, 0.5, 1.95)] {
        let v = judged(
            &Thresholds::default(),
            0.45,
            &[first, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0)],
        );
        assert!(v.suspects.is_empty(), "{first:?}: {v:?}");
        let note = &v.notes[0];
        assert_eq!(note.name, "h1 - h3", "{v:?}");
        assert!(!note.confirmed && !note.undecided, "cleared: {note:?}");
        // Not counted, then cleared by the next at its rate.
        assert_eq!((note.retests, v.retests.stalled), (2, 0), "{note:?}");
    }
}

#[test]
fn a_link_slow_both_ways_is_confirmed_on_its_second_retest_alike() {
    // A link at half its rate both ways with a latency of 1.5 x: each retest looks like a
    // stall, and two of them count.
    let v = judged(&Thresholds::default(), 0.45, &[(0.5, 0.5, 1.5)]);
    assert_eq!(v.suspects.links, h1_h3(), "{v:?}");
    assert_eq!(v.notes[0].retests, 2, "{v:?}");
    // One way at half, its first retest's reverse low with the noise: confirmed all the same.
    let v = judged(
        &Thresholds::default(),
        0.45,
        &[(0.5, 0.8, 1.2), (0.5, 1.0, 1.0)],
    );
    assert_eq!(v.suspects.links, h1_h3(), "{v:?}");
}

#[test]
fn a_retest_that_looks_like_a_stall_and_is_all_a_suspect_has_counts_when_the_budget_ends() {
    let one = Thresholds {
        retest_rounds: 1,
        ..Thresholds::default()
    };
    // At 0.7 x both ways with 1.3 x the latency (a link to a slow host, released in the last
    // round): judged on it, one figure below the ratio cannot decide; not "never measured",
    // which would let the charge stand (43 false links to a host at 0.7 x, simulated).
    let v = judged(&one, 0.45, &[(0.7, 0.7, 1.3)]);
    assert!(v.suspects.is_empty(), "{v:?}");
    assert!(v.notes[0].undecided, "{v:?}");
    // At 0.45 x both ways: seen at half the reference twice, confirmed.
    let v = judged(&one, 0.45, &[(0.45, 0.45, 1.3)]);
    assert_eq!(v.suspects.links, h1_h3(), "{v:?}");
    // Beside a retest that counted, it stays out: 0.8 x alone cannot decide.
    let two = Thresholds {
        retest_rounds: 2,
        ..Thresholds::default()
    };
    let v = judged(&two, 0.45, &[(0.8, 1.0, 1.0), (0.4, 0.45, 1.5)]);
    assert!(v.suspects.is_empty(), "{v:?}");
    assert!(v.notes[0].undecided, "{v:?}");
}
