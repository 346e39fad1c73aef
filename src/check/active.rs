//! Short, bounded active tests through the library API (no child process): loopback bandwidth
//! and latency on a port, and the same against a persistent rdmadiag server (`--peer`).

use super::targets::label;
use super::{Deadline, Plan, gbits_text, micros_text, stopped_by_signal};
use crate::connect::control::{
    DEFAULT_PORT, LAT_INLINE, LinkSpec, Op, PerfSpec, Priority, QpType, ServerBusy, Test, TestSpec,
};
use crate::connect::endpoint::PortChoice;
use crate::connect::key::TestKey;
use crate::report::check::{Check, CheckName};
use crate::report::inventory::PortInfo;
use crate::report::perf::PerfReport;
use crate::report::qos_text;
use crate::session::{SessionOptions, Unobserved};
use crate::{Role, TestReport};
use anyhow::{Result, bail};
use std::time::Duration;

/// The bandwidth test's message size: large enough to reach line rate on real HCAs.
const BW_SIZE: u32 = 64 * 1024;
/// How long the bandwidth test runs: bounded on any link, long enough for a stable average.
const BW_TIME: Duration = Duration::from_secs(1);
/// The latency test's message size and number of samples.
const LAT_SIZE: u32 = 2;
const LAT_ITERATIONS: u64 = 1000;
/// Longest wait of a test for anything (connect, a completion), within what the run has left.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Less than this left of --timeout: the test is not started.
const MIN_LEFT: Duration = Duration::from_secs(2);
/// How long to wait before asking a busy --peer server again.
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// `--peer HOST[:PORT]` and what to measure against it.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    pub host: String,
    pub port: u16,
    /// `--peer-bw`: at least this many bits per second.
    pub bw: Option<f64>,
    /// `--peer-lat`: at most this median latency.
    pub lat: Option<Duration>,
    /// The server's test-port key, when it was started with one.
    pub key: Option<TestKey>,
}

impl Peer {
    /// Parse `HOST`, `HOST:PORT`, `[IPV6]:PORT` or a bare IPv6 address.
    pub fn parse_address(s: &str) -> Result<(String, u16), String> {
        let s = s.trim();
        let port = |p: &str| {
            p.parse::<u16>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("'{p}' is not a TCP port in '{s}'"))
        };
        if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("'{s}': no closing ']'"))?;
            return match after.strip_prefix(':') {
                Some(p) => Ok((host.to_string(), port(p)?)),
                None if after.is_empty() => Ok((host.to_string(), DEFAULT_PORT)),
                None => Err(format!("'{s}': expected [IPV6]:PORT")),
            };
        }
        match s.split_once(':') {
            Some((h, p)) if !p.contains(':') && !h.is_empty() => Ok((h.to_string(), port(p)?)),
            _ if s.is_empty() => Err("--peer needs a host".into()),
            _ => Ok((s.to_string(), DEFAULT_PORT)),
        }
    }

    fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

fn bw_test(time: Duration) -> Test {
    Test::Bw(PerfSpec {
        qps: 1,
        tx_depth: 128,
        cq_mod: 100,
        post_list: 16,
        ..PerfSpec::one_at_a_time(Op::Write, vec![BW_SIZE], 0, Some(time))
    })
}

fn lat_test() -> Test {
    Test::Lat(PerfSpec {
        inline: LAT_INLINE,
        ..PerfSpec::one_at_a_time(Op::Write, vec![LAT_SIZE], LAT_ITERATIONS, None)
    })
}

/// What an active test is asked to show.
#[derive(Clone, Copy)]
enum Measure {
    /// At least this many bits per second.
    Bw(f64),
    /// At most this median latency.
    Lat(Duration),
}

/// Where a test's verdict goes and how it ran.
struct Verdict {
    name: CheckName,
    target: String,
    device: Option<String>,
    port: Option<u8>,
    peer: Option<String>,
    settings: String,
}

impl Verdict {
    fn check(self, expected: String, actual: String, ok: bool, value: Option<f64>) -> Check {
        Check {
            name: self.name,
            target: self.target,
            device: self.device,
            port: self.port,
            expected,
            actual,
            ok,
            skipped: false,
            value,
            settings: Some(self.settings),
            peer: self.peer,
        }
    }
}

fn expected_text(m: Measure) -> String {
    match m {
        Measure::Bw(bps) => format!("at least {}", gbits_text(bps)),
        Measure::Lat(d) => format!("at most {} (median)", micros_text(d)),
    }
}

/// Run one test and judge it. A test that fails to run is a failed check naming the error; a
/// signal ends the whole run.
fn run_one(
    m: Measure,
    mut v: Verdict,
    (choice, priority): (PortChoice, Priority),
    role: Role,
    port: u16,
    key: Option<TestKey>,
    deadline: &Deadline,
) -> Result<Check> {
    let left = deadline.left();
    let expected = expected_text(m);
    if left < MIN_LEFT {
        let actual = format!("not run: {:.1} s left of --timeout", left.as_secs_f64());
        return Ok(v.check(expected, actual, false, None));
    }
    let timeout = STEP_TIMEOUT.min(left);
    let spec = TestSpec {
        link: LinkSpec::plain(QpType::Rc).with_priority(priority),
        test: match m {
            Measure::Bw(_) => bw_test(BW_TIME.min(left / 3)),
            Measure::Lat(_) => lat_test(),
        },
    };
    let opts = SessionOptions {
        key,
        ..SessionOptions::in_process(choice, port, timeout)
    };
    // A persistent server busy with another client says so: try again while the run has time
    // (a health check must not fail a node because its peer was serving another at that moment).
    let mut ran = crate::run(&spec, &opts, role.clone(), &Unobserved);
    while let Err(e) = &ran
        && e.downcast_ref::<ServerBusy>().is_some()
        && deadline.left() > BUSY_RETRY + MIN_LEFT
    {
        std::thread::sleep(BUSY_RETRY);
        ran = crate::run(&spec, &opts, role.clone(), &Unobserved);
    }
    let report = match ran {
        Ok(TestReport::Perf(r)) => *r,
        Ok(_) => bail!("a {} test gave no perf report", spec.test.name()),
        Err(e) => {
            stopped_by_signal()?;
            let why = if deadline.left().is_zero() {
                "stopped at the --timeout"
            } else {
                "test failed"
            };
            return Ok(v.check(expected, format!("{why}: {e:#}"), false, None));
        }
    };
    if v.peer.is_some() {
        v.target = label(&report.local.device, report.local.port);
        v.device = Some(report.local.device.clone());
        v.port = Some(report.local.port);
    }
    Ok(judge(m, v, expected, &report))
}

fn judge(m: Measure, v: Verdict, expected: String, r: &PerfReport) -> Check {
    match m {
        Measure::Bw(min) => {
            let Some(b) = r.bw.first() else {
                return v.check(expected, "no bandwidth figure".into(), false, None);
            };
            let bps = b.bw_avg_gbps * 1e9;
            v.check(expected, gbits_text(bps), bps >= min, Some(bps / 8.0))
        }
        Measure::Lat(max) => {
            let Some(l) = r.lat.first() else {
                return v.check(expected, "no latency figure".into(), false, None);
            };
            let median = l.latency.median_us / 1e6;
            let d = Duration::from_secs_f64(median.max(0.0));
            v.check(
                expected,
                format!("{} (median)", micros_text(d)),
                d <= max,
                Some(median),
            )
        }
    }
}

fn settings(m: Measure, how: &str, priority: Priority) -> String {
    let text = match m {
        Measure::Bw(_) => format!(
            "RDMA WRITE {how}, {} KiB messages, 1 QP, for up to {} s",
            BW_SIZE / 1024,
            BW_TIME.as_secs()
        ),
        Measure::Lat(_) => format!(
            "RDMA WRITE {how}, {LAT_SIZE} B messages, {LAT_ITERATIONS} samples, median of half \
             round trips"
        ),
    };
    match (priority.tclass, priority.sl) {
        (None, None) => text,
        (t, s) => format!("{text}, {}", qos_text(t.or(Some(0)), s.or(Some(0)))),
    }
}

/// `--loopback-bw` and `--loopback-lat` on one port.
pub fn loopback(p: &PortInfo, plan: &Plan, deadline: &Deadline) -> Result<Vec<Check>> {
    let mut asked = Vec::new();
    if let Some(bps) = plan.loopback_bw {
        asked.push((CheckName::LoopbackBw, Measure::Bw(bps)));
    }
    if let Some(d) = plan.loopback_lat {
        asked.push((CheckName::LoopbackLat, Measure::Lat(d)));
    }
    let mut out = Vec::new();
    for (name, m) in asked {
        let v = Verdict {
            name,
            target: label(&p.device, p.port),
            device: Some(p.device.clone()),
            port: Some(p.port),
            peer: None,
            settings: settings(m, "loopback", plan.priority),
        };
        let choice = PortChoice {
            device: Some(p.device.clone()),
            port: Some(p.port),
            gid_index: None,
        };
        out.push(run_one(
            m,
            v,
            (choice, plan.priority),
            Role::Loopback,
            0,
            None,
            deadline,
        )?);
    }
    Ok(out)
}

/// `--peer-bw` and `--peer-lat` against the server at `peer`, from `pinned` (the one target
/// named with -d) or the port that reaches the peer.
pub fn peer(
    peer: &Peer,
    pinned: Option<&PortInfo>,
    priority: Priority,
    deadline: &Deadline,
) -> Result<Vec<Check>> {
    let mut asked = Vec::new();
    if let Some(bps) = peer.bw {
        asked.push((CheckName::PeerBw, Measure::Bw(bps)));
    }
    if let Some(d) = peer.lat {
        asked.push((CheckName::PeerLat, Measure::Lat(d)));
    }
    let address = peer.address();
    let mut out = Vec::new();
    for (name, m) in asked {
        let (target, device, port) = match pinned {
            Some(p) => (
                label(&p.device, p.port),
                Some(p.device.clone()),
                Some(p.port),
            ),
            None => (format!("peer {address}"), None, None),
        };
        let v = Verdict {
            name,
            target,
            device,
            port,
            peer: Some(address.clone()),
            settings: settings(m, &format!("to {address}"), priority),
        };
        let choice = PortChoice {
            device: pinned.map(|p| p.device.clone()),
            port: pinned.map(|p| p.port),
            gid_index: None,
        };
        let role = Role::Client {
            host: peer.host.clone(),
        };
        out.push(run_one(
            m,
            v,
            (choice, priority),
            role,
            peer.port,
            peer.key.clone(),
            deadline,
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_addresses_with_and_without_a_port() {
        assert_eq!(
            Peer::parse_address("10.0.0.2").unwrap(),
            ("10.0.0.2".into(), DEFAULT_PORT)
        );
        assert_eq!(
            Peer::parse_address("node7:19000").unwrap(),
            ("node7".into(), 19000)
        );
        assert_eq!(
            Peer::parse_address("[fe80::1]:19000").unwrap(),
            ("fe80::1".into(), 19000)
        );
        assert_eq!(
            Peer::parse_address("fe80::1").unwrap(),
            ("fe80::1".into(), DEFAULT_PORT)
        );
        assert!(Peer::parse_address("node7:0").is_err());
        assert!(Peer::parse_address("node7:x").is_err());
    }

    #[test]
    fn the_specs_pass_the_library_s_own_validation() {
        for test in [bw_test(BW_TIME), lat_test()] {
            let link = LinkSpec::plain(QpType::Rc);
            crate::session::perf::validate(&TestSpec { link, test }).unwrap();
        }
    }
}
