//! The latency rules: hosts whose median latency is high, then links between other hosts.

use super::retest::{State, geometric_mean};
use super::*;

/// `lat-host`: a host whose median latency is above the ratio and beyond the noise.
pub(super) fn hosts(ctx: &Ctx) -> Vec<(Ix, Charge)> {
    let (r, t) = (ctx.r, ctx.t);
    let (Some(reference), Some(spread)) = (r.lat_us.map(f64::ln), r.lat_spread) else {
        return Vec::new();
    };
    let per = per_host_logs(ctx.s, ctx.ok().map(|(_, p)| p), lat_figures);
    let sig = noise_sigmas(per.iter().flatten().count());
    let mut out = Vec::new();
    for (h, v) in per.iter().enumerate() {
        let Some(v) = v else { continue };
        if let Some((x, m)) = bandwidth::score(v.clone(), reference)
            && m >= MIN_FIGURES_DIRECTION
            && r.lat_high(x, m, sig, t)
        {
            let mut charge = Charge::new(
                Rule::LatHost,
                format!(
                    "its median latency is {x:.2} x the reference {:.1} us over {m} pairs; \
                     above {} x and beyond the noise ({:.0} %, {sig:.1} standard errors)",
                    reference.exp(),
                    t.max_lat_ratio,
                    100.0 * spread
                ),
            );
            charge.sigmas = sig;
            out.push((h as Ix, charge));
        }
    }
    out
}

/// `lat-link`: a pair whose latency is high while neither host is a suspect (`slow`).
pub(super) fn links(ctx: &Ctx, slow: &[bool]) -> Vec<(Target, Charge)> {
    let (r, t) = (ctx.r, ctx.t);
    let Some(reference) = r.lat_us else {
        return Vec::new();
    };
    let sig = noise_sigmas(ctx.ok().count());
    let mut out = Vec::new();
    for (_, p) in ctx.ok() {
        if slow[p.a as usize] || slow[p.b as usize] {
            continue;
        }
        let Some(x) = p.lat().map(|v| v / reference) else {
            continue;
        };
        if r.lat_high(x, 1, sig, t) {
            let mut charge = Charge::new(
                Rule::LatLink,
                format!(
                    "the pair's latency is {x:.2} x the reference {reference:.1} us, while {} \
                     and {} are fine with their other pairs",
                    ctx.s.name(p.a),
                    ctx.s.name(p.b)
                ),
            );
            charge.sigmas = sig;
            out.push((ctx.link(p), charge));
        }
    }
    out
}

/// Where a latency charge (`lat-host`, `lat-link`) stands after the suspect's `retests`, judged
/// as a bandwidth charge is: on every retest, not the last one alone. Retests whose median is at
/// `--max-lat-ratio` or below clear it. It stands when two retests were at [`GROSS_LAT_RATIO`] or
/// above, or when every retest is above the ratio and their mean (geometric) stands out beyond
/// the noise over [`MIN_RETESTS_TO_CONFIRM`] of them at least. Else it is retested again (and
/// ends undecided, never cleared, when the budget runs out).
///
/// A stalled retest ([`Reference::stalled`]) counts here: its latency is what is judged, and a
/// stall can only raise it. That is why one high retest is not enough: one figure in the lab's
/// healthy tail (1.56 and 1.62 x of 24) or one stall (2.8 x in CI) used to confirm any latency
/// charge, the scheduled stall behind it included; two stalls on one suspect's retests, or two
/// tail figures that also stand out as a mean, are what a fault shows and the noise rarely does.
pub(super) fn retest_state(retests: &[Retest], c: &Charge, r: &Reference, t: &Thresholds) -> State {
    let Some(reference) = r.lat_us.filter(|x| *x > 0.0) else {
        // No yardstick to retest against (a charge needs one): it stands.
        return State::Confirmed;
    };
    let ratios: Vec<f64> = retests
        .iter()
        .filter_map(|p| p.lat_us)
        .filter(|v| *v > 0.0 && v.is_finite())
        .map(|v| v / reference)
        .collect();
    if ratios.is_empty() {
        return State::Pending;
    }
    // The median, not the last: one retest in the tail neither clears a link that is high on
    // the others nor confirms one that is not.
    if median(ratios.clone()).is_some_and(|m| m <= t.max_lat_ratio) {
        return State::Cleared;
    }
    let high = |x: f64| x > t.max_lat_ratio;
    let gross = ratios
        .iter()
        .filter(|x| high(**x) && **x >= GROSS_LAT_RATIO)
        .count();
    if gross >= 2
        || (ratios.len() >= MIN_RETESTS_TO_CONFIRM
            && ratios.iter().all(|x| high(*x))
            && r.lat_high_mean(geometric_mean(&ratios), ratios.len(), c.sigmas, t))
    {
        State::Confirmed
    } else {
        State::Pending
    }
}
