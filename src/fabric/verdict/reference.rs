//! The run's own yardsticks: the reference figures, the noise around them, the counter fences,
//! and each pair's flag against them.

use super::*;

pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The value at quantile `q` of sorted `v` (linear between neighbours).
pub(super) fn quantile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// The pairs that judge: scheduled (not retests), neither end missing.
pub(super) fn judged<'a>(
    pairs: &'a [PairResult],
    missing: &BTreeSet<String>,
) -> Vec<&'a PairResult> {
    pairs
        .iter()
        .filter(|p| !p.retested && !missing.contains(&p.a) && !missing.contains(&p.b))
        .collect()
}

/// Each host's log figures (bandwidth: both directions; latency: one per pair).
pub(super) fn per_host_logs<'a>(
    judged: &[&'a PairResult],
    figures: impl Fn(&PairResult) -> Vec<f64>,
) -> BTreeMap<&'a str, Vec<f64>> {
    let mut m: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for p in judged {
        let v: Vec<f64> = figures(p)
            .into_iter()
            .filter(|v| *v > 0.0 && v.is_finite())
            .map(f64::ln)
            .collect();
        for h in [p.a.as_str(), p.b.as_str()] {
            m.entry(h).or_default().extend(&v);
        }
    }
    m
}

/// The least noise a run is taken to have (a fraction), bandwidth and latency alike: below it,
/// one figure proves little. A bandwidth test repeated on one healthy link under load varies by
/// this much (the lab's figures: 10 % of them more than 24 % below their run's median).
pub const MIN_SPREAD: f64 = 0.10;

/// Deviations needed before the noise estimate looks at their tail (8 hosts all-pairs have 112).
pub(super) const MIN_DEVIATIONS_FOR_TAIL: usize = 40;

/// The reference (median of host medians) and the pooled spread around each host's own median.
/// The median's own zero deviation (odd counts) is left out and each host's deviations are
/// scaled by sqrt(m / (m - 1)): a host's figures lie closer to their own median than to the truth.
pub(super) fn scale(per_host: &BTreeMap<&str, Vec<f64>>) -> (Option<f64>, Option<f64>) {
    let scores: Vec<f64> = per_host
        .values()
        .filter_map(|v| median(v.clone()))
        .collect();
    let reference = median(scores);
    let mut dev = Vec::new();
    for v in per_host.values().filter(|v| v.len() >= 3) {
        let m = median(v.clone()).unwrap_or(0.0);
        let k = (v.len() as f64 / (v.len() - 1) as f64).sqrt();
        let mut d: Vec<f64> = v.iter().map(|x| k * (x - m).abs()).collect();
        if v.len() % 2 == 1 {
            d.sort_by(f64::total_cmp);
            d.remove(0);
        }
        dev.extend(d);
    }
    // A Gaussian core's scale (1.4826 x the median absolute deviation), widened to what the
    // tail shows (the 90th percentile over 1.645) where there are enough deviations for a
    // tail (the lab's figures have a heavy low tail: 4 % of them at 8 of the core's sigmas).
    dev.sort_by(f64::total_cmp);
    let tail = (dev.len() >= MIN_DEVIATIONS_FOR_TAIL).then(|| quantile(&dev, 0.9) / 1.645);
    let spread = median(dev).map(|mad| (1.4826 * mad).max(tail.unwrap_or(0.0)).max(MIN_SPREAD));
    (reference, spread)
}

/// [`scale`] twice: the hosts whose score is beyond the ratio alone (`beyond`, on the log ratio
/// to the first reference) are left out of the second, when they are fewer than half and enough
/// figures remain, so that a slow host's pairs neither lower the reference nor widen the noise
/// that is to judge it (with 4 hosts, half of all figures involve a slow one).
pub(super) fn refined_scale(
    ok: &[&PairResult],
    figures: impl Fn(&PairResult) -> Vec<f64> + Copy,
    beyond: impl Fn(f64) -> bool,
) -> (Option<f64>, Option<f64>) {
    let per_host = per_host_logs(ok, figures);
    let (reference, spread) = scale(&per_host);
    let Some(first) = reference else {
        return (reference, spread);
    };
    let out: BTreeSet<&str> = per_host
        .iter()
        .filter(|(_, v)| median(v.to_vec()).is_some_and(|m| beyond(m - first)))
        .map(|(h, _)| *h)
        .collect();
    if out.is_empty() || 2 * out.len() >= per_host.len() {
        return (reference, spread);
    }
    let rest: Vec<&PairResult> = ok
        .iter()
        .copied()
        .filter(|p| !out.contains(p.a.as_str()) && !out.contains(p.b.as_str()))
        .collect();
    let again = per_host_logs(&rest, figures);
    if again.values().filter(|v| v.len() >= 3).count() < 3 {
        return (reference, spread);
    }
    match scale(&again) {
        (Some(r), Some(s)) => (Some(r), Some(s)),
        _ => (reference, spread),
    }
}

pub(super) fn bw_figures(p: &PairResult) -> Vec<f64> {
    [p.bw_gbps, p.bw_gbps_reverse]
        .into_iter()
        .flatten()
        .collect()
}

pub(super) fn lat_figures(p: &PairResult) -> Vec<f64> {
    p.lat_us.into_iter().collect()
}

/// A pair's total rise of each counter (both hosts).
pub(super) fn counter_totals(p: &PairResult) -> BTreeMap<&str, u64> {
    let mut t: BTreeMap<&str, u64> = BTreeMap::new();
    for m in p.counters.values() {
        for (c, d) in m {
            *t.entry(c.as_str()).or_default() += d;
        }
    }
    t
}

/// The run's reference, noise and counter fences.
pub fn reference(pairs: &[PairResult], missing: &BTreeSet<String>, t: &Thresholds) -> Reference {
    let judged = judged(pairs, missing);
    let ok: Vec<&PairResult> = judged
        .iter()
        .copied()
        .filter(|p| p.error.is_none())
        .collect();
    let (bw_ref, bw_spread) = refined_scale(&ok, bw_figures, |x| x < t.min_bw_ratio.ln());
    let (lat_ref, lat_spread) = refined_scale(&ok, lat_figures, |x| x > t.max_lat_ratio.ln());
    let names: BTreeSet<String> = counter_names(&judged);
    let counter_fence = names
        .into_iter()
        .map(|c| {
            let fence = t.max_error_delta.unwrap_or_else(|| {
                let mut v: Vec<f64> = judged
                    .iter()
                    .map(|p| *counter_totals(p).get(c.as_str()).unwrap_or(&0) as f64)
                    .collect();
                v.sort_by(f64::total_cmp);
                let (q1, q3) = (quantile(&v, 0.25), quantile(&v, 0.75));
                (q3 + 3.0 * (q3 - q1).max(q3).max(1.0)).floor() as u64
            });
            (c, fence)
        })
        .collect();
    Reference {
        bw_gbps: bw_ref.map(f64::exp),
        bw_spread,
        lat_us: lat_ref.map(f64::exp),
        lat_spread,
        counter_fence,
        hosts: judged
            .iter()
            .flat_map(|p| [p.a.as_str(), p.b.as_str()])
            .collect::<BTreeSet<_>>()
            .len(),
        bw_figures: ok.iter().map(|p| bw_figures(p).len()).sum(),
        lat_figures: ok.iter().map(|p| lat_figures(p).len()).sum(),
    }
}

pub(super) fn counter_names(pairs: &[&PairResult]) -> BTreeSet<String> {
    pairs
        .iter()
        .flat_map(|p| p.counters.values().flat_map(|m| m.keys().cloned()))
        .collect()
}

impl Reference {
    pub(super) fn ratios_on(&self) -> bool {
        self.hosts >= MIN_HOSTS_FOR_RATIOS
    }

    /// Whether a bandwidth `ratio` (to the reference) over `m` figures is low beyond the ratio
    /// and `sigmas` standard errors of the noise.
    pub(super) fn bw_low(&self, ratio: f64, m: usize, sigmas: f64, t: &Thresholds) -> bool {
        let Some(s) = self.bw_spread else {
            return false;
        };
        ratio < t.min_bw_ratio && ratio.ln() < -sigmas * se(s, m)
    }

    /// [`Reference::bw_low`] for the mean (in log scale) of `m` independent figures, as the
    /// retests gather them.
    pub(super) fn bw_low_mean(&self, ratio: f64, m: usize, sigmas: f64, t: &Thresholds) -> bool {
        let Some(s) = self.bw_spread else {
            return false;
        };
        ratio < t.min_bw_ratio && ratio.ln() < -sigmas * s / (m.max(1) as f64).sqrt()
    }

    pub(super) fn lat_high(&self, ratio: f64, m: usize, sigmas: f64, t: &Thresholds) -> bool {
        let Some(s) = self.lat_spread else {
            return false;
        };
        ratio > t.max_lat_ratio && ratio.ln() > sigmas * se(s, m)
    }

    pub(super) fn bw_ratio(&self, v: f64) -> Option<f64> {
        self.bw_gbps.map(|r| v / r)
    }

    pub(super) fn lat_ratio(&self, v: f64) -> Option<f64> {
        self.lat_us.map(|r| v / r)
    }
}

/// Each pair's rule-by-rule reasons (empty: not flagged).
pub(super) fn pair_reasons(p: &PairResult, r: &Reference, t: &Thresholds) -> Vec<(Rule, String)> {
    let mut why = Vec::new();
    if let Some(e) = &p.error {
        why.push((Rule::Failure, format!("a test failed: {e}")));
    }
    let bw_sigmas = noise_sigmas(r.bw_figures);
    for (v, (from, to)) in [(p.bw_gbps, (&p.a, &p.b)), (p.bw_gbps_reverse, (&p.b, &p.a))] {
        let Some(v) = v else { continue };
        if let (true, Some(ratio)) = (r.ratios_on(), r.bw_ratio(v))
            && (r.bw_low(ratio, 1, bw_sigmas, t) || ratio <= GROSS_BW_RATIO.min(t.min_bw_ratio))
        {
            why.push((
                Rule::BwLink,
                format!(
                    "bandwidth {from} to {to} {v:.3} Gb/s is {ratio:.2} x the reference {:.3}",
                    r.bw_gbps.unwrap_or(0.0)
                ),
            ));
        }
        if let Some(e) = t.expect_bw_gbps.filter(|e| v < *e) {
            why.push((
                Rule::ExpectBw,
                format!("bandwidth {from} to {to} {v:.3} Gb/s is below --expect-bw {e:.3}"),
            ));
        }
    }
    if let Some(v) = p.lat_us {
        if let (true, Some(ratio)) = (r.ratios_on(), r.lat_ratio(v))
            && r.lat_high(ratio, 1, noise_sigmas(r.lat_figures), t)
        {
            why.push((
                Rule::LatLink,
                format!(
                    "latency {v:.1} us is {ratio:.2} x the reference {:.1}",
                    r.lat_us.unwrap_or(0.0)
                ),
            ));
        }
        if let Some(e) = t.expect_lat_us.filter(|e| v > *e) {
            why.push((
                Rule::ExpectLat,
                format!("latency {v:.1} us is above --expect-lat {e:.1}"),
            ));
        }
    }
    if t.counters {
        let totals = counter_totals(p);
        let over: Vec<String> = totals
            .iter()
            .filter(|(c, d)| r.counter_fence.get(**c).is_some_and(|f| **d > *f))
            .map(|(c, _)| {
                let each: Vec<String> = p
                    .counters
                    .iter()
                    .filter_map(|(h, m)| m.get(*c).map(|d| format!("{h} +{d}")))
                    .collect();
                format!(
                    "{c} {} (above {} {})",
                    each.join(", "),
                    if t.max_error_delta.is_some() {
                        "--max-error-delta"
                    } else {
                        "the run's fence"
                    },
                    r.counter_fence[*c]
                )
            })
            .collect();
        if !over.is_empty() {
            why.push((
                Rule::Counters,
                format!("error counters rose: {}", over.join("; ")),
            ));
        }
    }
    why
}

/// Flag each pair (and say why) against the run's reference and the thresholds.
pub fn flag(pairs: &mut [PairResult], r: &Reference, t: &Thresholds) {
    for p in pairs {
        let why: Vec<String> = pair_reasons(p, r, t).into_iter().map(|w| w.1).collect();
        p.flagged = !why.is_empty();
        p.reason = p.flagged.then(|| why.join("; "));
    }
}
