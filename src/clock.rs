//! The clock latency samples are read from, once per sample, as perftest reads its cycle counter.
//!
//! Where the CPU has a counter that ticks at a constant rate in every power state (x86-64: the
//! TSC, when the kernel lists `constant_tsc` and `nonstop_tsc`, i.e. invariant; aarch64: the
//! virtual counter CNTVCT_EL0, constant-rate by the architecture), a read costs a few
//! nanoseconds and no system call. Its rate is measured against CLOCK_MONOTONIC_RAW at first
//! use, twice, and must agree to 0.1 % (never the MHz in /proc/cpuinfo, the current scaled
//! frequency, the source of perftest's "Conflicting CPU frequency" warnings). Elsewhere, or
//! where the two measurements disagree, samples come from the monotonic clock (std's
//! `Instant`): a vDSO call, or a system call on a clocksource without one (the lab's HPET).
//! `RDMADIAG_CLOCK=monotonic` forces the latter. `RDMADIAG_CLOCK=tsc` takes the TSC even where
//! the CPU does not list it as invariant (as perftest always does), still calibrated and still
//! checked twice, and says so: `tsc_forced` (for a benchmark that matches perftest's clock in a
//! guest whose kernel keeps the TSC from its clocksource, as the lab's TCG guest).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where a clock's readings come from (the settings line and JSON's `clock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// x86-64's invariant time-stamp counter.
    Tsc,
    /// x86-64's time-stamp counter taken with `RDMADIAG_CLOCK=tsc` where the CPU does not
    /// list it as invariant.
    TscForced,
    /// aarch64's virtual counter.
    Cntvct,
    /// CLOCK_MONOTONIC, through std's `Instant`.
    Monotonic,
}

impl fmt::Display for ClockSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClockSource::Tsc => "tsc",
            ClockSource::TscForced => "tsc_forced",
            ClockSource::Cntvct => "cntvct",
            ClockSource::Monotonic => "monotonic",
        })
    }
}

/// One reading: counter ticks, or nanoseconds since the clock's origin (monotonic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u64);

impl Stamp {
    /// Later than every reading: a time that never comes.
    pub const NEVER: Stamp = Stamp(u64::MAX);
}

/// A calibrated clock; `Clock::get()` gives the process's one.
#[derive(Debug)]
pub struct Clock {
    source: ClockSource,
    ns_per_tick: f64,
    /// `ns_per_tick` in 32.32 fixed point: turning a sample's ticks into nanoseconds is one
    /// integer multiply (the float round trip cost some 25 instructions a sample).
    ns_per_tick_fixed: u64,
    origin: Instant,
}

impl Clock {
    /// The process's clock, calibrated on first use (about 20 ms with a counter).
    pub fn get() -> &'static Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        CLOCK.get_or_init(|| {
            let asked = std::env::var("RDMADIAG_CLOCK").ok();
            let counter = match asked.as_deref() {
                Some("monotonic") => None,
                Some("tsc") => counter::calibrate_forced(),
                _ => counter::calibrate(),
            };
            match counter {
                Some((source, ns_per_tick)) => Clock::at_rate(source, ns_per_tick),
                None => Clock::monotonic(),
            }
        })
    }

    /// A clock on CLOCK_MONOTONIC (std's `Instant`).
    pub fn monotonic() -> Clock {
        Clock::at_rate(ClockSource::Monotonic, 1.0)
    }

    /// A clock of `source` ticking every `ns_per_tick` nanoseconds, its fixed-point rate
    /// derived here once.
    fn at_rate(source: ClockSource, ns_per_tick: f64) -> Clock {
        Clock {
            source,
            ns_per_tick,
            ns_per_tick_fixed: fixed(ns_per_tick),
            origin: Instant::now(),
        }
    }

    pub fn source(&self) -> ClockSource {
        self.source
    }

    /// The counter's rate in Hz (1e9 for the monotonic clock).
    pub fn hz(&self) -> f64 {
        1e9 / self.ns_per_tick
    }

    /// Read the clock.
    #[inline]
    pub fn now(&self) -> Stamp {
        match self.source {
            ClockSource::Monotonic => {
                Stamp(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
            }
            _ => Stamp(counter::read()),
        }
    }

    /// The time from `a` to `b` (zero if `b` is not later).
    #[inline]
    pub fn between(&self, a: Stamp, b: Stamp) -> Duration {
        Duration::from_nanos(self.nanos_of(self.ticks(a, b)))
    }

    /// Ticks from `a` to `b` (zero if `b` is not later): a sample kept raw, converted later
    /// with [`Clock::nanos_of`].
    #[inline]
    pub fn ticks(&self, a: Stamp, b: Stamp) -> u64 {
        b.0.saturating_sub(a.0)
    }

    /// The nanoseconds `ticks` of this clock take (a multiply: the samples' path).
    #[inline]
    pub fn nanos_of(&self, ticks: u64) -> u64 {
        let ns = (u128::from(ticks) * u128::from(self.ns_per_tick_fixed)) >> 32;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// The reading `d` after `s`. (Through `as_secs_f64`: a 128-bit nanosecond count turned
    /// into a float is a library call of some 45 instructions, which the compiler hoisted out
    /// of `Deadline::expired`'s rare branch into every wait.)
    pub fn after(&self, s: Stamp, d: Duration) -> Stamp {
        Stamp(s.0.saturating_add((d.as_secs_f64() * 1e9 / self.ns_per_tick) as u64))
    }
}

/// `ns_per_tick` in 32.32 fixed point, rounded to 2^-33 ns a tick (a billion ticks of a 3 GHz
/// counter: off by under 0.2 ns); only a tick longer than 4 s would not fit, and none is.
fn fixed(ns_per_tick: f64) -> u64 {
    (ns_per_tick * 4_294_967_296.0).round() as u64
}

/// A spinning wait's bound: `expired()` is called on every empty spin and reads the clock only
/// every `CHECK_EVERY` calls, so a wait that ends soon reads it not at all. The timeout runs
/// from the first reading.
#[derive(Debug)]
pub struct Deadline {
    timeout: Duration,
    at: Option<Stamp>,
    spins: u32,
}

/// Empty spins between clock reads in a wait (a few ms under the lab's emulation, ~0.1 ms on
/// hardware; a sample rarely waits that long).
const CHECK_EVERY: u32 = 4096;

impl Deadline {
    #[inline]
    pub fn new(timeout: Duration) -> Self {
        Deadline {
            timeout,
            at: None,
            spins: 0,
        }
    }

    /// One more empty spin: has the timeout passed?
    #[inline]
    pub fn expired(&mut self) -> bool {
        self.spins = self.spins.wrapping_add(1);
        if !self.spins.is_multiple_of(CHECK_EVERY) {
            return false;
        }
        self.read_clock()
    }

    /// The rare branch, kept out of line so that nothing of it is hoisted into the spin's
    /// callers.
    #[cold]
    #[inline(never)]
    fn read_clock(&mut self) -> bool {
        let clock = Clock::get();
        let now = clock.now();
        now > *self
            .at
            .get_or_insert_with(|| clock.after(now, self.timeout))
    }
}

/// CLOCK_MONOTONIC_RAW in nanoseconds: the reference the counter's rate is measured against.
fn raw_ns() -> Option<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_RAW).ok()?;
    let (s, ns) = (
        u64::try_from(t.tv_sec()).ok()?,
        u64::try_from(t.tv_nsec()).ok()?,
    );
    Some(s * 1_000_000_000 + ns)
}

/// One counter reading and the reference time it was taken at: the middle of the tightest of
/// a few reference reads around it (a preemption between them would skew the rate).
fn paired(read: fn() -> u64) -> Option<(u64, u64)> {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..50 {
        let a = raw_ns()?;
        let c = read();
        let b = raw_ns()?;
        let gap = b.saturating_sub(a);
        if best.is_none_or(|(g, _, _)| gap < g) {
            best = Some((gap, a + gap / 2, c));
        }
        if gap < 1_000 {
            break;
        }
    }
    best.map(|(_, at, c)| (at, c))
}

/// Ticks of `read` per nanosecond of CLOCK_MONOTONIC_RAW over about `window`.
fn rate(read: fn() -> u64, window: Duration) -> Option<f64> {
    let (r0, c0) = paired(read)?;
    std::thread::sleep(window);
    let (r1, c1) = paired(read)?;
    (c1 > c0 && r1 > r0).then(|| (c1 - c0) as f64 / (r1 - r0) as f64)
}

/// Two measurements of `read`'s rate that agree to 0.1 %: nanoseconds per tick.
fn agreed_rate(read: fn() -> u64) -> Option<f64> {
    let a = rate(read, Duration::from_millis(10))?;
    let b = rate(read, Duration::from_millis(10))?;
    ((a - b).abs() <= a * 1e-3 && a > 0.0).then(|| 2.0 / (a + b))
}

// The one place outside the verbs core with `unsafe`: reading the counter is an instruction
// (RDTSC, MRS) that std does not wrap safely.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod counter {
    use super::ClockSource;

    /// The TSC, if the kernel says it is invariant: (source, ns per tick).
    pub fn calibrate() -> Option<(ClockSource, f64)> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let flags = cpuinfo.lines().find(|l| l.starts_with("flags"))?;
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        if !(has("constant_tsc") && has("nonstop_tsc")) {
            return None;
        }
        Some((ClockSource::Tsc, super::agreed_rate(read)?))
    }

    /// The TSC whatever the flags (`RDMADIAG_CLOCK=tsc`), if its two rates agree.
    pub fn calibrate_forced() -> Option<(ClockSource, f64)> {
        calibrate().or_else(|| Some((ClockSource::TscForced, super::agreed_rate(read)?)))
    }

    #[inline]
    pub fn read() -> u64 {
        // SAFETY: RDTSC reads a register; it touches no memory, and every x86-64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
}

#[cfg(target_arch = "aarch64")]
#[allow(unsafe_code)]
mod counter {
    use super::ClockSource;

    /// The virtual counter, always constant-rate: (source, ns per tick).
    pub fn calibrate() -> Option<(ClockSource, f64)> {
        Some((ClockSource::Cntvct, super::agreed_rate(read)?))
    }

    /// `RDMADIAG_CLOCK=tsc` on aarch64: its counter is always trusted.
    pub fn calibrate_forced() -> Option<(ClockSource, f64)> {
        calibrate()
    }

    #[inline]
    pub fn read() -> u64 {
        let v: u64;
        // SAFETY: Linux lets user space read CNTVCT_EL0; the read touches no memory. The ISB
        // keeps it from being taken before the instructions it follows.
        unsafe {
            core::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v, options(nomem, nostack));
        }
        v
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod counter {
    use super::ClockSource;

    pub fn calibrate() -> Option<(ClockSource, f64)> {
        None
    }

    pub fn calibrate_forced() -> Option<(ClockSource, f64)> {
        None
    }

    pub fn read() -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks become nanoseconds through the fixed-point rate as through the float one (to a
    /// nanosecond in a second of a 3.2 GHz counter, exactly on the monotonic clock), and an
    /// impossible count saturates instead of wrapping.
    #[test]
    fn ticks_become_nanoseconds_in_fixed_point() {
        let at = |ns_per_tick: f64| Clock::at_rate(ClockSource::TscForced, ns_per_tick);
        let tsc = at(1.0 / 3.2);
        assert!(tsc.nanos_of(3_200_000_000).abs_diff(1_000_000_000) <= 1);
        assert_eq!(tsc.nanos_of(32_000), 10_000);
        let odd = at(1.0 / 2.994_123);
        let float = (2_994_123_000.0 * odd.ns_per_tick) as u64;
        assert!(odd.nanos_of(2_994_123_000).abs_diff(float) <= 1);
        let mono = Clock::monotonic();
        assert_eq!(mono.nanos_of(123_456_789), 123_456_789);
        assert_eq!(at(4.0).nanos_of(u64::MAX), u64::MAX);
    }

    /// Whatever the source, a measured sleep reads as that sleep (within scheduling noise).
    #[test]
    fn the_calibrated_clock_measures_a_sleep() {
        for clock in [Clock::get(), &Clock::monotonic()] {
            let a = clock.now();
            std::thread::sleep(Duration::from_millis(30));
            let b = clock.now();
            let d = clock.between(a, b);
            assert!(
                d >= Duration::from_millis(29) && d < Duration::from_millis(60),
                "{}: {d:?}",
                clock.source()
            );
            assert_eq!(clock.between(b, a), Duration::ZERO);
            let later = clock.after(a, Duration::from_millis(5));
            let back = clock.between(a, later).as_secs_f64();
            assert!((back - 0.005).abs() < 1e-6, "{}: {back}", clock.source());
        }
    }

    #[test]
    fn a_deadline_reads_the_clock_rarely_and_expires() {
        let mut d = Deadline::new(Duration::from_millis(20));
        assert!((0..CHECK_EVERY * 2).all(|_| !d.expired()), "too soon");
        std::thread::sleep(Duration::from_millis(25));
        assert!((0..CHECK_EVERY).any(|_| d.expired()), "20 ms passed");
    }

    #[test]
    fn a_counter_is_used_where_the_kernel_says_it_is_invariant() {
        let invariant = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
            c.lines().find(|l| l.starts_with("flags")).is_some_and(|f| {
                f.split_whitespace().any(|w| w == "constant_tsc")
                    && f.split_whitespace().any(|w| w == "nonstop_tsc")
            })
        });
        let c = Clock::get();
        if cfg!(target_arch = "x86_64") && invariant && std::env::var("RDMADIAG_CLOCK").is_err() {
            assert_eq!(c.source(), ClockSource::Tsc);
            assert!(c.hz() > 1e8, "{}", c.hz());
        }
        if cfg!(target_arch = "x86_64") && !invariant && std::env::var("RDMADIAG_CLOCK").is_err() {
            assert_eq!(c.source(), ClockSource::Monotonic);
        }
    }
}
