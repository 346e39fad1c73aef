//! perftest-grade measurements: one bandwidth engine and one latency engine, parameterised by the
//! operation (SEND, RDMA WRITE, RDMA READ). Engines never print; they return plain results.

pub mod atomic;
pub mod bw;
pub mod lat;
pub mod tcp;
pub mod verify;

use crate::clock::{Clock, Stamp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use crate::connect::control::{LatTiming, Op};

/// Which end of a test this side is: the one that starts each exchange and times it (the
/// client), or the one that answers (the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Sends first and takes the samples (the client).
    Initiator,
    /// Answers (the server).
    Responder,
}

/// True on every `every`-th call (the calls so far a multiple of `every`; 0 counts as 1): which
/// posts are signalled, by a countdown, not a division by a runtime divisor on every post.
#[derive(Debug, Clone, Copy)]
pub struct Countdown {
    every: u64,
    left: u64,
}

impl Countdown {
    pub fn new(every: u64) -> Self {
        let every = every.max(1);
        Countdown { every, left: every }
    }

    #[inline]
    pub fn tick(&mut self) -> bool {
        self.left -= 1;
        if self.left == 0 {
            self.left = self.every;
            return true;
        }
        false
    }
}

/// One beat of a [`Pulse`] (a message on a control channel).
pub trait Beat {
    fn beat(&mut self);
}

/// Beats a timed loop gives a peer that waits on its control channel meanwhile (the server of
/// a one-sided round), at most one a period, timed by the clock reads the loop already makes:
/// no thread runs beside the loop (see `exit::stop_on_signals` for what one costs). The engine
/// only calls `beat`; what a beat is belongs to whoever made the pulse.
pub struct Pulse<'a> {
    beat: Option<&'a mut dyn Beat>,
    period: Duration,
    /// When the next beat is due; `Stamp::NEVER` without beats (one compare a sample).
    next: Stamp,
}

impl<'a> Pulse<'a> {
    /// No beats: the peer runs the loop too, or does not wait on a channel.
    pub fn none() -> Pulse<'a> {
        Pulse {
            beat: None,
            period: Duration::ZERO,
            next: Stamp::NEVER,
        }
    }

    /// `beat` at most every `period`, the first a period after the loop starts.
    pub fn every(period: Duration, beat: &'a mut dyn Beat) -> Pulse<'a> {
        Pulse {
            beat: Some(beat),
            period,
            next: Stamp::NEVER,
        }
    }

    /// The loop starts at `now`.
    pub(crate) fn start(&mut self, clock: &Clock, now: Stamp) {
        if self.beat.is_some() {
            self.next = clock.after(now, self.period);
        }
    }

    /// Beat when a period has passed by `now`; true when it did (the loop's clock reading is
    /// then stale: read it again).
    #[inline(always)]
    pub(crate) fn beat_if_due(&mut self, clock: &Clock, now: Stamp) -> bool {
        if now < self.next {
            return false;
        }
        self.beat_now(clock);
        true
    }

    #[cold]
    #[inline(never)]
    fn beat_now(&mut self, clock: &Clock) {
        if let Some(beat) = self.beat.as_mut() {
            beat.beat();
        }
        self.next = clock.after(clock.now(), self.period);
    }
}

/// Live counters an engine updates (relaxed stores, no locks) for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    pub messages: AtomicU64,
    pub bytes: AtomicU64,
}

impl Progress {
    pub fn set(&self, messages: u64, bytes: u64) {
        self.messages.store(messages, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }
}

/// What a running test tells whoever watches it: the live counters the engines update, and
/// each round as it starts. The library never prints; the command line draws a progress line.
pub trait Observer: Sync {
    /// Counters for the engines to update; None: nobody watches.
    fn progress(&self) -> Option<&Progress> {
        None
    }
    /// A round of `size`-byte messages starts (bw, lat, write, read).
    fn round_started(&self, _size: u32) {}
}

/// An observer that watches nothing.
pub struct Unobserved;

impl Observer for Unobserved {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The countdown signals exactly the posts the modulo did: the n-th (1-based) when n is
    /// a multiple of the period, for periods 1, 2, 3, 7 and 48 (0 counts as 1).
    #[test]
    fn the_signal_countdown_picks_every_nth_post() {
        for every in [0u64, 1, 2, 3, 7, 48] {
            let mut c = Countdown::new(every);
            let picked: Vec<u64> = (1..=200).filter(|_| c.tick()).collect();
            let want: Vec<u64> = (1..=200).filter(|n| n % every.max(1) == 0).collect();
            assert_eq!(picked, want, "every {every}");
        }
    }

    /// A pulse beats once a period has passed since the loop started, then a period after that
    /// beat; no pulse never does.
    #[test]
    fn a_pulse_beats_once_a_period() {
        struct Count(u32);
        impl Beat for Count {
            fn beat(&mut self) {
                self.0 += 1;
            }
        }
        let clock = Clock::monotonic();
        let mut beats = Count(0);
        let mut pulse = Pulse::every(Duration::from_secs(1), &mut beats);
        let t0 = clock.now();
        pulse.start(&clock, t0);
        assert!(!pulse.beat_if_due(&clock, clock.after(t0, Duration::from_millis(500))));
        assert!(pulse.beat_if_due(&clock, clock.after(t0, Duration::from_millis(1500))));
        // The next is a period after the beat (now), not after the stamp it was given.
        assert!(!pulse.beat_if_due(&clock, clock.now()));
        let later = clock.after(clock.now(), Duration::from_millis(1100));
        assert!(pulse.beat_if_due(&clock, later));
        assert_eq!(beats.0, 2);
        let mut none = Pulse::none();
        none.start(&clock, t0);
        assert!(!none.beat_if_due(&clock, clock.after(t0, Duration::from_secs(3600))));
    }
}
