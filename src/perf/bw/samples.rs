//! A bandwidth run's progress samples and the peak rate found in them.

use std::time::Duration;

/// A peak window spans at least this many intervals between progress samples...
pub const PEAK_MIN_SAMPLES: usize = 4;
/// ...and at least this long.
pub const PEAK_MIN_WINDOW: Duration = Duration::from_millis(1);
/// Most progress samples kept per run; past it every other one is dropped (windows get longer).
const MAX_SAMPLES: usize = 1 << 16;

/// Progress samples: when a signalled completion (or a batch of receives) was reaped, and how
/// many messages had completed by then. The first sample is the start (0 messages). Preallocated;
/// recording never allocates.
#[derive(Debug, Clone)]
pub struct Samples {
    points: Vec<(Duration, u64)>,
}

impl Samples {
    pub fn new() -> Self {
        let mut points = Vec::with_capacity(MAX_SAMPLES);
        points.push((Duration::ZERO, 0));
        Samples { points }
    }

    /// Record `messages` completed at `at` (since the start). When full, halve the resolution:
    /// windows only get longer, so no peak is invented.
    pub fn record(&mut self, at: Duration, messages: u64) {
        if self.points.len() == self.points.capacity() {
            let mut keep = 0;
            for i in (0..self.points.len()).step_by(2) {
                self.points[keep] = self.points[i];
                keep += 1;
            }
            self.points.truncate(keep);
        }
        self.points.push((at, messages));
    }

    pub fn points(&self) -> &[(Duration, u64)] {
        &self.points
    }

    /// Start the clock at `offset` (a receiver's first message): earlier samples are dropped,
    /// the rest shifted, and the start is again a sample of 0 messages.
    pub(super) fn rebase(&mut self, offset: Duration) {
        if offset.is_zero() {
            return;
        }
        self.points.retain(|p| p.0 > offset);
        for p in self.points.iter_mut() {
            p.0 -= offset;
        }
        self.points.insert(0, (Duration::ZERO, 0));
    }
}

impl Default for Samples {
    fn default() -> Self {
        Self::new()
    }
}

/// The best rate, in messages per second, over windows between two samples that hold at least
/// `min_intervals` sample intervals and last at least `min_window`. A run with too few samples
/// for such a window has one window: all of it. Counts only advance at real completions, so a
/// window never credits a batch to less time than it took; None when no time passed at all.
pub fn peak_rate(
    samples: &[(Duration, u64)],
    min_intervals: usize,
    min_window: Duration,
) -> Option<f64> {
    let last = samples.len().checked_sub(1)?;
    let rate = |j: usize, i: usize| {
        let (tj, mj) = samples[j];
        let (ti, mi) = samples[i];
        let dt = ti.saturating_sub(tj).as_secs_f64();
        (dt > 0.0).then(|| mi.saturating_sub(mj) as f64 / dt)
    };
    let mut best: Option<f64> = None;
    let mut j = 0;
    // For each end i, the shortest qualifying window (latest start j); starts only move forward.
    for i in 0..=last {
        if i < min_intervals {
            continue;
        }
        while j + 1 + min_intervals <= i
            && samples[i].0.saturating_sub(samples[j + 1].0) >= min_window
        {
            j += 1;
        }
        if samples[i].0.saturating_sub(samples[j].0) < min_window {
            continue;
        }
        if let Some(r) = rate(j, i) {
            best = Some(best.map_or(r, |b: f64| b.max(r)));
        }
    }
    best.or_else(|| rate(0, last))
}

/// The peak rate in bytes per second of `size`-byte messages (0 when no time passed).
pub(super) fn peak_bytes(samples: &Samples, size: usize) -> f64 {
    peak_rate(samples.points(), PEAK_MIN_SAMPLES, PEAK_MIN_WINDOW).unwrap_or(0.0) * size as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn steady_batches_give_the_steady_rate_not_a_burst() {
        // 100 messages complete together every 10 ms (CQ moderation 100): 10,000 msg/s. A
        // window that credits one batch to the 1 ms around its completion would read 100,000.
        let samples: Vec<(Duration, u64)> = (0..=50).map(|k| (ms(10 * k), 100 * k)).collect();
        let peak = peak_rate(&samples, PEAK_MIN_SAMPLES, PEAK_MIN_WINDOW).unwrap();
        assert!((peak - 10_000.0).abs() < 1e-6, "{peak}");
    }

    #[test]
    fn a_real_burst_is_found_and_a_lone_batch_is_not_one() {
        // 10 ms per batch, except batches 20..30 that take 5 ms each: the peak is 20,000 msg/s.
        let mut t = 0;
        let mut samples = vec![(ms(0), 0)];
        for k in 1..=50u64 {
            t += if (21..=30).contains(&k) { 5 } else { 10 };
            samples.push((ms(t), 100 * k));
        }
        let peak = peak_rate(&samples, PEAK_MIN_SAMPLES, PEAK_MIN_WINDOW).unwrap();
        assert!((peak - 20_000.0).abs() < 1e-6, "{peak}");
        // Two samples 1 us apart in an otherwise steady run: a window must span 4 intervals.
        let mut samples: Vec<(Duration, u64)> = (0..=10).map(|k| (ms(10 * k), 100 * k)).collect();
        samples.insert(6, (ms(50) - Duration::from_micros(1), 499));
        let peak = peak_rate(&samples, PEAK_MIN_SAMPLES, PEAK_MIN_WINDOW).unwrap();
        assert!(peak < 12_000.0, "a 1-us gap made a peak of {peak}");
    }

    #[test]
    fn too_few_samples_make_one_window_and_no_time_no_rate() {
        let samples = [(ms(0), 0), (ms(40), 100)];
        assert_eq!(peak_rate(&samples, 4, ms(1)), Some(2500.0));
        assert_eq!(peak_rate(&[(ms(0), 0), (ms(0), 10)], 4, ms(1)), None);
        assert_eq!(peak_rate(&[], 4, ms(1)), None);
    }

    #[test]
    fn peak_is_not_forced_above_the_average() {
        // Slow at the end: the best window is the early one; nothing clamps it to the mean.
        let samples = [
            (ms(0), 0),
            (ms(10), 100),
            (ms(20), 200),
            (ms(30), 300),
            (ms(40), 400),
            (ms(400), 500),
        ];
        let peak = peak_rate(&samples, 4, ms(1)).unwrap();
        assert!((peak - 10_000.0).abs() < 1e-6, "{peak}");
        let avg = 500.0 / 0.4;
        assert!(peak > avg);
        let samples = [(ms(0), 0), (ms(100), 1), (ms(200), 2)];
        assert!((peak_rate(&samples, 4, ms(1)).unwrap() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn samples_halve_when_full_and_keep_the_ends() {
        let mut s = Samples::new();
        for k in 1..(MAX_SAMPLES as u64 + 10) {
            s.record(ms(k), k);
        }
        let p = s.points();
        assert!(p.len() <= MAX_SAMPLES);
        assert_eq!(p[0], (ms(0), 0));
        assert_eq!(p.last().unwrap().1, MAX_SAMPLES as u64 + 9);
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
