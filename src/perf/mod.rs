//! perftest-grade measurements: one bandwidth engine and one latency engine, parameterised by the
//! operation (SEND, RDMA WRITE, RDMA READ). Engines never print; they return plain results.

pub mod atomic;
pub mod bw;
pub mod lat;
pub mod tcp;
pub mod verify;

use std::sync::atomic::{AtomicU64, Ordering};

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
}
