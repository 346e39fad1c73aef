//! Latency statistics from every sample, through an HDR histogram.

use crate::clock::{Clock, Stamp};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Collects latency samples in nanoseconds (3 significant digits, up to an hour).
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    sum_ns: u128,
    /// Integer, as `sum_ns`: a square of a u64 is one multiply into a u128 (it cannot overflow
    /// one), where a float sum took two conversions a sample. The sum saturates, some 10^13
    /// samples of an hour each past any real run.
    sum_sq_ns: u128,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    pub fn new() -> Self {
        LatencyRecorder {
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("valid histogram bounds"),
            sum_ns: 0,
            sum_sq_ns: 0,
        }
    }

    /// Record one sample (allocation-free: the histogram is pre-sized).
    pub fn record(&mut self, d: Duration) {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Record one sample of `ns` nanoseconds.
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        let ns = ns.max(1);
        self.hist.saturating_record(ns);
        self.sum_ns += ns as u128;
        self.sum_sq_ns = self
            .sum_sq_ns
            .saturating_add(u128::from(ns) * u128::from(ns));
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Add another recorder's samples (e.g. one batch of a longer run) to this one.
    pub fn absorb(&mut self, other: &LatencyRecorder) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.hist.add(&other.hist);
        self.sum_ns += other.sum_ns;
        self.sum_sq_ns = self.sum_sq_ns.saturating_add(other.sum_sq_ns);
    }

    /// Summarise; `scale` divides every sample (2.0 reports half round trips).
    pub fn stats(&self, scale: f64) -> LatencyStats {
        let n = self.hist.len();
        let us = |ns: f64| ns / 1000.0 / scale;
        if n == 0 {
            return LatencyStats::default();
        }
        let mean = self.sum_ns as f64 / n as f64;
        let var = (self.sum_sq_ns as f64 / n as f64 - mean * mean).max(0.0);
        let q = |p: f64| us(self.hist.value_at_quantile(p) as f64);
        LatencyStats {
            samples: n,
            min_us: us(self.hist.min() as f64),
            median_us: q(0.5),
            avg_us: us(mean),
            stdev_us: us(var.sqrt()),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p999_us: q(0.999),
            p9999_us: q(0.9999),
            max_us: us(self.hist.max() as f64),
        }
    }
}

/// One bar of a latency histogram: samples at most `le_us` (and above the previous bar).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    pub le_us: f64,
    pub count: u64,
}

/// The timed loops' samples, kept as raw clock ticks in a buffer sized before the loop (a
/// store each, as perftest's `tposted` array), turned into a [`LatencyRecorder`] after it.
pub struct Samples<'c> {
    clock: &'c Clock,
    ticks: Vec<u64>,
    /// Made when the samples first move into it: after the loop, or when the buffer fills.
    /// Its histogram (an hour's range at 3 digits) is some 256 KiB to zero, which the timed
    /// loop's start must not wait for: made before the loop, it held each side's start back by
    /// 10-50 ms under the lab's emulation (the responder's late start then was the client's
    /// first sample), and would by tens of microseconds on hardware.
    recorder: Option<LatencyRecorder>,
}

/// The most samples held raw (8 MiB); a longer run moves them into the histogram when full.
const MAX_RAW_SAMPLES: usize = 1 << 20;

impl<'c> Samples<'c> {
    /// Room for `expected` samples (None: a run for a duration), on `clock`.
    pub fn new(clock: &'c Clock, expected: Option<u64>) -> Samples<'c> {
        let room = expected.map_or(1 << 16, |n| n.min(MAX_RAW_SAMPLES as u64) as usize);
        Samples {
            clock,
            ticks: Vec::with_capacity(room.max(1)),
            recorder: None,
        }
    }

    /// Keep the sample from `a` to `b`. Returns true when the buffer was full and moved into
    /// the histogram first (rare: the caller's next sample should start after it).
    #[inline]
    pub fn push(&mut self, a: Stamp, b: Stamp) -> bool {
        let full = self.ticks.len() == self.ticks.capacity();
        if full {
            self.flush();
        }
        self.ticks.push(self.clock.ticks(a, b));
        full
    }

    fn flush(&mut self) {
        let recorder = self.recorder.get_or_insert_with(LatencyRecorder::new);
        for t in self.ticks.drain(..) {
            recorder.record_ns(self.clock.nanos_of(t));
        }
    }

    /// Every sample, in the histogram.
    pub fn finish(mut self) -> LatencyRecorder {
        self.flush();
        self.recorder.unwrap_or_default()
    }
}

impl LatencyRecorder {
    /// `n` equal-width bars from the minimum to the 99.9th percentile; the last bar also holds
    /// everything above it.
    pub fn buckets(&self, n: usize, scale: f64) -> Vec<Bucket> {
        if self.hist.is_empty() || n == 0 {
            return Vec::new();
        }
        let lo = self.hist.min();
        let hi = self.hist.value_at_quantile(0.999).max(lo + 1);
        let width = ((hi - lo) as f64 / n as f64).max(1.0);
        let mut out: Vec<Bucket> = (1..=n)
            .map(|i| Bucket {
                le_us: (lo as f64 + width * i as f64) / 1000.0 / scale,
                count: 0,
            })
            .collect();
        for v in self.hist.iter_recorded() {
            let x = v.value_iterated_to();
            let i = (((x.saturating_sub(lo)) as f64 / width) as usize).min(n - 1);
            out[i].count += v.count_at_value();
        }
        out
    }
}

/// Latency summary in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub samples: u64,
    pub min_us: f64,
    pub median_us: f64,
    pub avg_us: f64,
    pub stdev_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_follow_the_samples() {
        let mut r = LatencyRecorder::new();
        for us in 1..=1000u64 {
            r.record(Duration::from_micros(us));
        }
        let s = r.stats(1.0);
        assert_eq!(s.samples, 1000);
        let close = |a: f64, b: f64| (a - b).abs() <= b * 0.002 + 0.01;
        assert!(close(s.min_us, 1.0), "{s:?}");
        assert!(close(s.max_us, 1000.0), "{s:?}");
        assert!(close(s.median_us, 500.0), "{s:?}");
        assert!(close(s.avg_us, 500.5), "{s:?}");
        assert!(close(s.p99_us, 990.0), "{s:?}");
        assert!(close(s.stdev_us, 288.675), "{s:?}");
        let half = r.stats(2.0);
        assert!(close(half.median_us, 250.0), "{half:?}");
        assert_eq!(LatencyRecorder::new().stats(1.0).samples, 0);
        let b = r.buckets(10, 1.0);
        assert_eq!(b.len(), 10);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 1000);
        assert!(b.windows(2).all(|w| w[0].le_us < w[1].le_us));
    }

    #[test]
    fn raw_samples_reach_the_histogram_and_a_full_buffer_says_so() {
        let clock = Clock::monotonic();
        let mut s = Samples::new(&clock, Some(3));
        let a = clock.now();
        let full: Vec<bool> = (1..=5u64)
            .map(|us| s.push(a, clock.after(a, Duration::from_micros(us))))
            .collect();
        assert_eq!(full, [false, false, false, true, false]);
        // The histogram is made when samples first move into it (the full buffer), never
        // before the loop: the loop's start must not wait for its 256 KiB.
        assert!(s.recorder.is_some());
        assert!(Samples::new(&clock, Some(1000)).recorder.is_none());
        assert_eq!(Samples::new(&clock, Some(3)).finish().stats(1.0).samples, 0);
        let st = s.finish().stats(1.0);
        assert_eq!(st.samples, 5);
        let close = |a: f64, b: f64| (a - b).abs() <= b * 0.002 + 0.01;
        assert!(close(st.min_us, 1.0) && close(st.max_us, 5.0), "{st:?}");
        assert!(close(st.avg_us, 3.0), "{st:?}");
    }
}
