//! The run's own yardsticks: the reference figures, the noise around them, the counter fences,
//! and each pair's flag against them.

use super::*;

/// The median (the middle value, or the mean of the two middle ones).
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    median_of(&mut v)
}

/// [`median`] in place (the order of `v` is lost): a selection, not a sort.
pub(super) fn median_of(v: &mut [f64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (left, mid, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    let mid = *mid;
    Some(if n % 2 == 1 {
        mid
    } else {
        let below = left.iter().copied().max_by(f64::total_cmp).unwrap_or(mid);
        (below + mid) / 2.0
    })
}

/// The value at quantile `q` of `v` (linear between neighbours; the order of `v` is lost).
pub(super) fn quantile(v: &mut [f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let (_, x, right) = v.select_nth_unstable_by(lo, f64::total_cmp);
    let x = *x;
    let y = if hi > lo {
        right.iter().copied().min_by(f64::total_cmp).unwrap_or(x)
    } else {
        x
    };
    x + (y - x) * (pos - lo as f64)
}

/// Each host's log figures (bandwidth: both directions; latency: one per pair) over `figs`, by
/// index (None: the host is in none of them).
pub(super) fn per_host_logs<'a>(
    s: &Sheet,
    figs: impl Iterator<Item = &'a Fig>,
    figures: fn(&Fig) -> [Option<f64>; 2],
) -> Vec<Option<Vec<f64>>> {
    let mut m: Vec<Option<Vec<f64>>> = vec![None; s.hosts()];
    for p in figs {
        for h in [p.a, p.b] {
            let e = m[h as usize].get_or_insert_with(Vec::new);
            for v in figures(p).into_iter().flatten() {
                if v > 0.0 && v.is_finite() {
                    e.push(v.ln());
                }
            }
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
pub(super) fn scale(per_host: &[Option<Vec<f64>>]) -> (Option<f64>, Option<f64>) {
    let hosts = || per_host.iter().flatten();
    let scores: Vec<f64> = hosts().filter_map(|v| median(v.clone())).collect();
    let reference = median(scores);
    let mut dev = Vec::new();
    for v in hosts().filter(|v| v.len() >= 3) {
        let m = median(v.clone()).unwrap_or(0.0);
        let k = (v.len() as f64 / (v.len() - 1) as f64).sqrt();
        let start = dev.len();
        dev.extend(v.iter().map(|x| k * (x - m).abs()));
        if v.len() % 2 == 1 {
            // The least deviation (the median's own) goes.
            let d = &dev[start..];
            let least = (0..d.len())
                .min_by(|i, j| d[*i].total_cmp(&d[*j]))
                .unwrap_or(0);
            dev.swap_remove(start + least);
        }
    }
    // A Gaussian core's scale (1.4826 x the median absolute deviation), widened to what the
    // tail shows (the 90th percentile over 1.645) where there are enough deviations for a
    // tail (the lab's figures have a heavy low tail: 4 % of them at 8 of the core's sigmas).
    let tail = (dev.len() >= MIN_DEVIATIONS_FOR_TAIL).then(|| quantile(&mut dev, 0.9) / 1.645);
    let spread =
        median_of(&mut dev).map(|mad| (1.4826 * mad).max(tail.unwrap_or(0.0)).max(MIN_SPREAD));
    (reference, spread)
}

/// [`scale`] twice: the hosts whose score is beyond the ratio alone (`beyond`, on the log ratio
/// to the first reference) are left out of the second, when they are fewer than half and enough
/// figures remain, so that a slow host's pairs neither lower the reference nor widen the noise
/// that is to judge it (with 4 hosts, half of all figures involve a slow one).
pub(super) fn refined_scale(
    s: &Sheet,
    figures: fn(&Fig) -> [Option<f64>; 2],
    beyond: impl Fn(f64) -> bool,
) -> (Option<f64>, Option<f64>) {
    let ok = || s.ok().map(|(_, p)| p);
    let per_host = per_host_logs(s, ok(), figures);
    let (reference, spread) = scale(&per_host);
    let Some(first) = reference else {
        return (reference, spread);
    };
    let out: Vec<bool> = per_host
        .iter()
        .map(|v| {
            v.as_ref()
                .is_some_and(|v| median(v.to_vec()).is_some_and(|m| beyond(m - first)))
        })
        .collect();
    let outs = out.iter().filter(|x| **x).count();
    let hosts = per_host.iter().flatten().count();
    if outs == 0 || 2 * outs >= hosts {
        return (reference, spread);
    }
    drop(per_host);
    let rest = ok().filter(|p| !out[p.a as usize] && !out[p.b as usize]);
    let again = per_host_logs(s, rest, figures);
    if again.iter().flatten().filter(|v| v.len() >= 3).count() < 3 {
        return (reference, spread);
    }
    match scale(&again) {
        (Some(r), Some(s)) => (Some(r), Some(s)),
        _ => (reference, spread),
    }
}

pub(super) fn bw_figures(p: &Fig) -> [Option<f64>; 2] {
    [p.bw(), p.bw_reverse()]
}

pub(super) fn lat_figures(p: &Fig) -> [Option<f64>; 2] {
    [p.lat(), None]
}

/// The run's reference, noise and counter fences.
pub fn reference(pairs: &[PairResult], missing: &BTreeSet<String>, t: &Thresholds) -> Reference {
    reference_of(&Sheet::of(pairs, missing), t)
}

/// [`reference`] of a sheet's pairs.
pub fn reference_of(s: &Sheet, t: &Thresholds) -> Reference {
    let (bw_ref, bw_spread) = refined_scale(s, bw_figures, |x| x < t.min_bw_ratio.ln());
    let (lat_ref, lat_spread) = refined_scale(s, lat_figures, |x| x > t.max_lat_ratio.ln());
    // Each counter that rose on a judged pair: its rise on every pair (0 where it did not).
    let names = s.counter_names();
    let mut rises: Vec<Option<Vec<f64>>> = vec![None; names.len()];
    for i in 0..s.figs().len() {
        for (c, d) in s.totals(i) {
            rises[c as usize].get_or_insert_with(|| vec![0.0; s.figs().len()])[i] = d as f64;
        }
    }
    let counter_fence = names
        .iter()
        .zip(rises)
        .filter_map(|(c, v)| {
            let mut v = v?;
            let fence = t.max_error_delta.unwrap_or_else(|| {
                let (q1, q3) = (quantile(&mut v, 0.25), quantile(&mut v, 0.75));
                (q3 + 3.0 * (q3 - q1).max(q3).max(1.0)).floor() as u64
            });
            Some((c.clone(), fence))
        })
        .collect();
    let mut seen = vec![false; s.hosts()];
    for p in s.figs() {
        seen[p.a as usize] = true;
        seen[p.b as usize] = true;
    }
    let ok = || s.ok().map(|(_, p)| p);
    Reference {
        bw_gbps: bw_ref.map(f64::exp),
        bw_spread,
        lat_us: lat_ref.map(f64::exp),
        lat_spread,
        counter_fence,
        hosts: seen.iter().filter(|x| **x).count(),
        bw_figures: ok().map(|p| p.bw_figures().count()).sum(),
        lat_figures: ok().filter(|p| p.lat().is_some()).count(),
    }
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

    /// [`Reference::lat_high`] for the mean (in log scale) of `m` independent latencies, as the
    /// retests gather them.
    pub(super) fn lat_high_mean(&self, ratio: f64, m: usize, sigmas: f64, t: &Thresholds) -> bool {
        let Some(s) = self.lat_spread else {
            return false;
        };
        ratio > t.max_lat_ratio && ratio.ln() > sigmas * s / (m.max(1) as f64).sqrt()
    }

    /// Whether a retest's latency `lat_us` says a host stalled while it ran: at least
    /// [`STALL_LAT_RATIO`] x the reference and above `--max-lat-ratio` (no reference latency, or no
    /// latency measured: never).
    pub(super) fn stalled(&self, lat_us: Option<f64>, t: &Thresholds) -> bool {
        lat_us
            .and_then(|v| self.lat_ratio(v))
            .is_some_and(|x| x >= STALL_LAT_RATIO && x > t.max_lat_ratio)
    }

    /// Whether a retest `p` that is no stall by its latency looks like one all the same: both
    /// directions below `--min-bw-ratio` and its latency above the reference's by more than the
    /// latency's noise (one spread). A paused guest slows both ways at once and raises the
    /// latency, not always to [`STALL_LAT_RATIO`]; a slow link is slow on every retest.
    pub(super) fn stall_like(&self, p: &PairResult, t: &Thresholds) -> bool {
        let Some(spread) = self.lat_spread else {
            return false;
        };
        let low = |v: Option<f64>| {
            v.and_then(|v| self.bw_ratio(v))
                .is_some_and(|x| x < t.min_bw_ratio)
        };
        low(p.bw_gbps)
            && low(p.bw_gbps_reverse)
            && p.lat_us
                .and_then(|v| self.lat_ratio(v))
                .is_some_and(|x| x.ln() > spread)
    }

    pub(super) fn bw_ratio(&self, v: f64) -> Option<f64> {
        self.bw_gbps.map(|r| v / r)
    }

    pub(super) fn lat_ratio(&self, v: f64) -> Option<f64> {
        self.lat_us.map(|r| v / r)
    }

    /// A bandwidth figure's ratio to the reference where it flags its pair (`bw-link`): below
    /// the ratio and beyond `sigmas` of the noise, or gross.
    fn bw_flags(&self, v: f64, sigmas: f64, t: &Thresholds) -> Option<f64> {
        let ratio = self.bw_ratio(v).filter(|_| self.ratios_on())?;
        (self.bw_low(ratio, 1, sigmas, t) || ratio <= GROSS_BW_RATIO.min(t.min_bw_ratio))
            .then_some(ratio)
    }

    /// A latency's ratio to the reference where it flags its pair (`lat-link`).
    fn lat_flags(&self, v: f64, sigmas: f64, t: &Thresholds) -> Option<f64> {
        let ratio = self.lat_ratio(v).filter(|_| self.ratios_on())?;
        self.lat_high(ratio, 1, sigmas, t).then_some(ratio)
    }

    /// Each of a sheet's counters' fence, by id (None: no fence, never flagged).
    pub(super) fn fences(&self, s: &Sheet) -> Vec<Option<u64>> {
        s.counter_names()
            .iter()
            .map(|c| self.counter_fence.get(c).copied())
            .collect()
    }
}

/// The rules that flag a pair, as a set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Rules(u16);

impl Rules {
    fn with(self, rule: Rule) -> Rules {
        Rules(self.0 | 1 << rule as u16)
    }

    pub(super) fn has(self, rule: Rule) -> bool {
        self.0 & 1 << rule as u16 != 0
    }

    /// The rules of [`pair_reasons`]' reasons.
    pub(super) fn of(reasons: &[(Rule, String)]) -> Rules {
        reasons
            .iter()
            .fold(Rules::default(), |x, (rule, _)| x.with(*rule))
    }
}

/// The rules that flag the sheet's pair `i` (what [`pair_reasons`] says, without the words).
/// `fences`: [`Reference::fences`].
pub(super) fn pair_rules(
    s: &Sheet,
    i: usize,
    fences: &[Option<u64>],
    r: &Reference,
    t: &Thresholds,
) -> Rules {
    let p = &s.figs()[i];
    let mut rules = Rules::default();
    if p.failed() {
        rules = rules.with(Rule::Failure);
    }
    let bw_sigmas = noise_sigmas(r.bw_figures);
    for v in p.bw_figures() {
        if r.bw_flags(v, bw_sigmas, t).is_some() {
            rules = rules.with(Rule::BwLink);
        }
        if t.expect_bw_gbps.is_some_and(|e| v < e) {
            rules = rules.with(Rule::ExpectBw);
        }
    }
    if let Some(v) = p.lat() {
        if r.lat_flags(v, noise_sigmas(r.lat_figures), t).is_some() {
            rules = rules.with(Rule::LatLink);
        }
        if t.expect_lat_us.is_some_and(|e| v > e) {
            rules = rules.with(Rule::ExpectLat);
        }
    }
    if t.counters
        && s.totals(i)
            .any(|(c, d)| fences[c as usize].is_some_and(|f| d > f))
    {
        rules = rules.with(Rule::Counters);
    }
    rules
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

/// Each pair's rule-by-rule reasons (empty: not flagged).
pub(super) fn pair_reasons(p: &PairResult, r: &Reference, t: &Thresholds) -> Vec<(Rule, String)> {
    let mut why = Vec::new();
    if let Some(e) = &p.error {
        why.push((Rule::Failure, format!("a test failed: {e}")));
    }
    let bw_sigmas = noise_sigmas(r.bw_figures);
    for (v, (from, to)) in [(p.bw_gbps, (&p.a, &p.b)), (p.bw_gbps_reverse, (&p.b, &p.a))] {
        let Some(v) = v else { continue };
        if let Some(ratio) = r.bw_flags(v, bw_sigmas, t) {
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
        if let Some(ratio) = r.lat_flags(v, noise_sigmas(r.lat_figures), t) {
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
        flag_one(p, r, t);
    }
}

/// [`flag`] one pair; returns the rules that flag it.
pub(super) fn flag_one(p: &mut PairResult, r: &Reference, t: &Thresholds) -> Rules {
    let reasons = pair_reasons(p, r, t);
    let rules = Rules::of(&reasons);
    let why: Vec<String> = reasons.into_iter().map(|w| w.1).collect();
    p.flagged = !why.is_empty();
    p.reason = p.flagged.then(|| why.join("; "));
    rules
}
