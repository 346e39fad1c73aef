//! Node health checks (`rdmadiag check`): what each port is expected to be, evaluated from the
//! sysfs inventory, error counters over an interval and short active tests, as typed verdicts.
//!
//! [`run`] takes a [`Plan`] (no flags: the command line builds it) and returns a
//! [`CheckReport`]; it never prints. Every step has its own deadline inside the plan's timeout.

mod active;
mod errors;
mod expect;
pub mod output;
mod place;
pub mod slurm;
mod targets;

pub use active::Peer;
pub use expect::{Expectations, ExpectedState};
pub use place::{
    CpuList, PcieExpect, PcieRule, PlaceRules, cpu_list_text, parse_cpus, parse_pcie_expect,
};
pub use targets::{Target, parse_target};

use crate::connect::control::Priority;
use crate::exit::{Interrupted, STOP, UsageError};
use crate::report::check::{Check, CheckReport};
use anyhow::Result;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Watch the error counters: read them, wait `interval`, read them again; more than
/// `max_delta` in all on a port fails it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorWatch {
    pub interval: Duration,
    pub max_delta: u64,
}

/// Everything one check run does.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The ports to check; empty: every port of every device.
    pub targets: Vec<Target>,
    pub expect: Expectations,
    /// Where each device sits: its PCIe link and NUMA node.
    pub place: PlaceRules,
    pub errors: Option<ErrorWatch>,
    /// `--loopback-bw`: at least this many bits per second on each target.
    pub loopback_bw: Option<f64>,
    /// `--loopback-lat`: at most this median latency on each target.
    pub loopback_lat: Option<Duration>,
    pub peer: Option<Peer>,
    /// `--tclass`, `--sl`: the active tests' packets' priority.
    pub priority: Priority,
    /// Bounds the whole run.
    pub timeout: Duration,
}

/// When the run must be over, and what is left of it.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    start: Instant,
    end: Instant,
}

impl Deadline {
    pub fn after(timeout: Duration) -> Deadline {
        let start = Instant::now();
        Deadline {
            start,
            end: start + timeout,
        }
    }

    pub fn left(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

impl Plan {
    /// Refuse what cannot fit or cannot be judged, before anything runs.
    pub fn validate(&self) -> Result<(), UsageError> {
        if let Some(w) = &self.errors
            && w.interval >= self.timeout
        {
            return Err(UsageError(format!(
                "--interval {} does not fit in --timeout {}: give a longer --timeout",
                humantime::format_duration(w.interval),
                humantime::format_duration(self.timeout)
            )));
        }
        let active =
            self.loopback_bw.is_some() || self.loopback_lat.is_some() || self.peer.is_some();
        if !active && self.priority != Priority::default() {
            return Err(UsageError(
                "--tclass and --sl set the priority of the active tests: add --loopback-bw, \
                 --loopback-lat, --peer-bw or --peer-lat"
                    .into(),
            ));
        }
        if let Some(p) = &self.peer
            && p.bw.is_none()
            && p.lat.is_none()
        {
            return Err(UsageError(
                "--peer needs a test to run against it: --peer-bw RATE and/or --peer-lat DURATION"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Run every check of `plan`. Errors are what kept the check from running (sysfs unreadable, a
/// signal); a port that fails an expectation or a test is a failed [`Check`] in the report.
pub fn run(plan: &Plan) -> Result<CheckReport> {
    plan.validate()?;
    let deadline = Deadline::after(plan.timeout);
    let _watchdog = Watchdog::start(deadline);
    let mut checks: Vec<Check> = Vec::new();
    let ports = targets::resolve(&plan.targets, &mut checks)?;
    for p in &ports {
        checks.extend(expect::evaluate(p, &plan.expect)?);
    }
    let mut devices: Vec<String> = Vec::new();
    for p in &ports {
        if !devices.contains(&p.device) {
            devices.push(p.device.clone());
        }
    }
    checks.extend(place::evaluate(&devices, &plan.place)?);
    if let Some(w) = plan.errors {
        checks.extend(errors::watch(&ports, w, &deadline)?);
    }
    for p in &ports {
        checks.extend(active::loopback(p, plan, &deadline)?);
    }
    if let Some(peer) = &plan.peer {
        let pinned = (plan.targets.len() == 1 && ports.len() == 1).then(|| &ports[0]);
        checks.extend(active::peer(peer, pinned, plan.priority, &deadline)?);
    }
    Ok(CheckReport::new(
        checks,
        deadline.elapsed().as_secs_f64(),
        plan.timeout.as_secs_f64(),
    ))
}

/// Asks every wait of the library to give up (through [`STOP`]) once the deadline has passed, so
/// that no test outlives `--timeout`; on drop, it stops watching and takes its request back.
struct Watchdog {
    done: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(deadline: Deadline) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicBool::new(false));
        let (d, f) = (done.clone(), fired.clone());
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::SeqCst) {
                if deadline.left().is_zero() {
                    f.store(true, Ordering::SeqCst);
                    STOP.store(true, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(deadline.left().min(Duration::from_millis(50)));
            }
        });
        Watchdog {
            done,
            fired,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.fired.load(Ordering::SeqCst) && crate::exit::stop_signal().is_none() {
            STOP.store(false, Ordering::SeqCst);
        }
    }
}

/// A stop asked for by SIGINT or SIGTERM ends the run (exit 130/143); anything else that went
/// wrong in a test is that test's failure.
fn stopped_by_signal() -> Result<()> {
    if crate::exit::stop_signal().is_some() {
        return Err(Interrupted.into());
    }
    Ok(())
}

/// Rates in words: "2.5 Gb/s", "0.21 Gb/s", "400 Gb/s".
pub fn gbits_text(bits_per_s: f64) -> String {
    let g = bits_per_s / 1e9;
    if g >= 100.0 || g.fract() == 0.0 {
        format!("{g:.0} Gb/s")
    } else if g >= 1.0 {
        let t = format!("{g:.2}");
        format!("{} Gb/s", t.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{g:.3} Gb/s")
    }
}

/// Latencies in words, microseconds: "12.3 us".
pub fn micros_text(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 100.0 {
        format!("{us:.0} us")
    } else {
        format!("{us:.2} us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_latencies_read_as_people_write_them() {
        assert_eq!(gbits_text(2.5e9), "2.5 Gb/s");
        assert_eq!(gbits_text(400e9), "400 Gb/s");
        assert_eq!(gbits_text(100e9), "100 Gb/s");
        assert_eq!(gbits_text(0.21e9), "0.210 Gb/s");
        assert_eq!(gbits_text(56.25e9), "56.25 Gb/s");
        assert_eq!(micros_text(Duration::from_nanos(12_340)), "12.34 us");
        assert_eq!(micros_text(Duration::from_micros(250)), "250 us");
    }

    #[test]
    fn an_interval_longer_than_the_timeout_is_refused() {
        let plan = Plan {
            errors: Some(ErrorWatch {
                interval: Duration::from_secs(40),
                max_delta: 0,
            }),
            timeout: Duration::from_secs(30),
            ..Plan::default()
        };
        let e = plan.validate().unwrap_err().to_string();
        assert!(
            e.contains("--interval 40s does not fit in --timeout 30s"),
            "{e}"
        );
    }
}
