//! Port counters across a test or an interval: sysfs snapshots, their deltas, and which count errors.
//!
//! The typed API `--counters` (on the test subcommands), `ports --counters --interval` and the
//! health checks share: take [`Before`] (or a [`Snapshot`]), run or wait, then compare with
//! [`CounterDeltas::between`]. Nothing here prints.

use crate::sysfs;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The two sysfs directories of a port's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// `counters/`: the InfiniBand PortCounters (and PortCountersExtended) the kernel reads.
    Counters,
    /// `hw_counters/`: the driver's own counters (rxe, mlx5...).
    HwCounters,
}

impl Group {
    pub const ALL: [Group; 2] = [Group::Counters, Group::HwCounters];

    /// The directory's name under `ports/N/`.
    pub fn dir(self) -> &'static str {
        match self {
            Group::Counters => "counters",
            Group::HwCounters => "hw_counters",
        }
    }
}

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.dir())
    }
}

// ---------------------------------------------------------------------------------------------
// Which counters count errors: one rule, used by `ports --counters` and every delta.

/// InfiniBand PortCounters that count errors (IBA vol. 1, PortCounters), as the kernel names
/// them in `counters/`. Not here: `port_xmit_wait` (ticks a port had data but no credit to send:
/// congestion, not an error) and the data and packet counters.
const IB_SPEC_ERRORS: &[&str] = &[
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
];

/// Soft-RoCE (rdma_rxe) hw_counters that count errors: retransmissions seen from either side
/// (duplicate or out-of-sequence requests, sequence NAKs, retries), RNR NAKs, retries given up,
/// failed sends and link losses. Not here: `sent_pkts`, `rcvd_pkts`, `rdma_sends`,
/// `rdma_recvs` (traffic) and `ack_deferred` (acknowledgements coalesced, normal).
const RXE_ERRORS: &[&str] = &[
    "duplicate_request",
    "out_of_seq_request",
    "rcvd_rnr_err",
    "send_rnr_err",
    "rcvd_seq_err",
    "completer_retry_err",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "send_err",
    "link_downed",
];

/// mlx5 hw_counters that count errors: drops for want of receive buffers, sequence errors and
/// the NAKs and timeouts behind retransmissions, retries given up, completions in error
/// (flushes follow a QP's error), remote access and length errors, bad ICRCs. Not here: the
/// request and packet counters and the congestion-control ones (`np_cnp_sent`, `rp_cnp_handled`,
/// `np_ecn_marked_roce_packets`, `roce_adp_retrans`...).
const MLX5_ERRORS: &[&str] = &[
    "out_of_buffer",
    "out_of_sequence",
    "duplicate_request",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "req_rnr_retries_exceeded",
    "req_transport_retries_exceeded",
    "req_cqe_error",
    "resp_cqe_error",
    "req_cqe_flush_error",
    "resp_cqe_flush_error",
    "resp_local_length_error",
    "req_remote_invalid_request",
    "req_remote_access_errors",
    "resp_remote_access_errors",
    "rx_icrc_encapsulated",
];

/// Words that mark an error counter of a driver not listed above (bnxt_re, irdma, efa...): a
/// word of the name (split at `_` and at lower-to-upper case changes) that starts with one.
/// Whole words, so `ack_deferred` is no error.
const ERROR_MARKERS: &[&str] = &["err", "discard", "drop", "exceeded", "nak", "timeout"];

/// The words of a counter name, lowercased: `rx_roce_discards` and `ip4RxDiscard` both hold a
/// word `discard…`.
fn words(name: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    let mut prev_lower = false;
    for ch in name.chars() {
        if !ch.is_ascii_alphanumeric() {
            words.push(String::new());
            prev_lower = false;
            continue;
        }
        if ch.is_ascii_uppercase() && prev_lower {
            words.push(String::new());
        }
        prev_lower = ch.is_ascii_lowercase() || ch.is_ascii_digit();
        words.last_mut().unwrap().push(ch.to_ascii_lowercase());
    }
    words.retain(|w| !w.is_empty());
    words
}

/// Whether a counter counts errors or drops, so a rise deserves attention: the IB spec's error
/// counters, rxe's and mlx5's, and for other drivers a name with an error word (`err…`,
/// `discard…`, `drop…`, `exceeded`, `nak…`, `timeout…`).
pub fn is_error_counter(name: &str) -> bool {
    let listed = [IB_SPEC_ERRORS, RXE_ERRORS, MLX5_ERRORS]
        .iter()
        .any(|l| l.iter().any(|n| n.eq_ignore_ascii_case(name)));
    listed
        || words(name)
            .iter()
            .any(|w| ERROR_MARKERS.iter().any(|m| w.starts_with(m)))
}

// ---------------------------------------------------------------------------------------------
// Snapshots.

/// Every counter of one port at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub device: String,
    pub port: u8,
    /// When the reading was taken.
    pub taken: Instant,
    pub counters: BTreeMap<String, u64>,
    pub hw_counters: BTreeMap<String, u64>,
}

impl Snapshot {
    /// Read `counters/` and `hw_counters/` of `device` port `port` under `root` (a port without
    /// them reads as empty).
    pub fn read(root: &Path, device: &str, port: u8) -> Snapshot {
        Snapshot {
            device: device.to_string(),
            port,
            taken: Instant::now(),
            counters: sysfs::port_counters(root, device, port, Group::Counters.dir()),
            hw_counters: sysfs::port_counters(root, device, port, Group::HwCounters.dir()),
        }
    }

    pub fn group(&self, g: Group) -> &BTreeMap<String, u64> {
        match g {
            Group::Counters => &self.counters,
            Group::HwCounters => &self.hw_counters,
        }
    }

    /// The names, in both groups, of the counters that count errors (sorted, each once).
    pub fn error_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Group::ALL
            .iter()
            .flat_map(|&g| self.group(g).keys())
            .filter(|n| is_error_counter(n))
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Counters read before a test on every port it may use (the test picks its port itself), to
/// compare with the one it used once it is over.
#[derive(Debug, Clone)]
pub struct Before {
    root: PathBuf,
    snapshots: Vec<Snapshot>,
}

impl Before {
    /// Read every port of `device` (or of every device) under `root`, or only `port`.
    pub fn read(root: &Path, device: Option<&str>, port: Option<u8>) -> Before {
        let devices = match device {
            Some(d) => vec![d.to_string()],
            None => sysfs::kernel_devices(root).unwrap_or_default(),
        };
        let snapshots = devices
            .iter()
            .flat_map(|d| {
                let ports = match port {
                    Some(p) => vec![p],
                    None => sysfs::port_numbers(root, d),
                };
                ports.into_iter().map(move |p| Snapshot::read(root, d, p))
            })
            .collect();
        Before {
            root: root.to_path_buf(),
            snapshots,
        }
    }

    /// What changed on `device` port `port` since: None when that port was not read before.
    pub fn since(&self, device: &str, port: u8) -> Option<CounterDeltas> {
        let before = self
            .snapshots
            .iter()
            .find(|s| s.device == device && s.port == port)?;
        Some(CounterDeltas::between(
            before,
            &Snapshot::read(&self.root, device, port),
        ))
    }
}

/// Sleep for `interval` unless `stop` is set first (checked every 50 ms). Returns true when it
/// was stopped.
pub fn wait_interval(interval: Duration, stop: &AtomicBool) -> bool {
    let start = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        let left = interval.saturating_sub(start.elapsed());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

// ---------------------------------------------------------------------------------------------
// Deltas.

/// How one counter changed between two readings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterDelta {
    pub group: Group,
    pub name: String,
    pub before: u64,
    pub after: u64,
    /// `after - before`; when the counter went down (it was reset), what it counted since the
    /// reset, `after`: a lower bound.
    pub delta: u64,
    /// The counter went down between the readings: it was cleared (or a driver's 32-bit
    /// counter wrapped; the IB spec's counters saturate instead). `delta` is then a lower bound.
    pub reset: bool,
    /// It counts errors or drops ([`is_error_counter`]).
    pub error: bool,
    /// `delta` per second of the time between the readings.
    pub rate_per_s: f64,
}

impl CounterDelta {
    /// Whether the counter moved (rose, or was reset).
    pub fn moved(&self) -> bool {
        self.delta > 0 || self.reset
    }
}

/// How the counters of one port changed between two readings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterDeltas {
    pub device: String,
    pub port: u8,
    /// Seconds between the two readings.
    pub elapsed_s: f64,
    /// The sum of the error counters' deltas (0: no error counter moved).
    pub error_delta: u64,
    /// Every counter read both times: `counters` first, then `hw_counters`, each by name.
    pub deltas: Vec<CounterDelta>,
}

impl CounterDeltas {
    /// Compare two readings of one port. A counter in only one of them (a file that appeared
    /// or vanished) is left out.
    pub fn between(before: &Snapshot, after: &Snapshot) -> CounterDeltas {
        let elapsed = after.taken.saturating_duration_since(before.taken);
        let secs = elapsed.as_secs_f64();
        let mut deltas = Vec::new();
        for g in Group::ALL {
            for (name, &now) in after.group(g) {
                let Some(&then) = before.group(g).get(name) else {
                    continue;
                };
                let reset = now < then;
                let delta = if reset { now } else { now - then };
                deltas.push(CounterDelta {
                    group: g,
                    name: name.clone(),
                    before: then,
                    after: now,
                    delta,
                    reset,
                    error: is_error_counter(name),
                    rate_per_s: if secs > 0.0 { delta as f64 / secs } else { 0.0 },
                });
            }
        }
        CounterDeltas {
            device: after.device.clone(),
            port: after.port,
            elapsed_s: secs,
            error_delta: deltas
                .iter()
                .filter(|d| d.error)
                .fold(0u64, |sum, d| sum.saturating_add(d.delta)),
            deltas,
        }
    }

    /// One counter's change, if it was read both times.
    pub fn get(&self, group: Group, name: &str) -> Option<&CounterDelta> {
        self.deltas
            .iter()
            .find(|d| d.group == group && d.name == name)
    }

    /// The counters that moved.
    pub fn moved(&self) -> impl Iterator<Item = &CounterDelta> {
        self.deltas.iter().filter(|d| d.moved())
    }

    /// The error counters that moved.
    pub fn errors(&self) -> impl Iterator<Item = &CounterDelta> {
        self.moved().filter(|d| d.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn snap(at: Instant, counters: &[(&str, u64)], hw: &[(&str, u64)]) -> Snapshot {
        let map = |kv: &[(&str, u64)]| kv.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        Snapshot {
            device: "rxe0".into(),
            port: 1,
            taken: at,
            counters: map(counters),
            hw_counters: map(hw),
        }
    }

    #[test]
    fn deltas_rates_and_error_sums() {
        let t0 = Instant::now();
        let before = snap(
            t0,
            &[("port_xmit_data", 100), ("port_rcv_errors", 1)],
            &[("sent_pkts", 10), ("retry_exceeded_err", 0)],
        );
        let after = snap(
            t0 + Duration::from_secs(2),
            &[("port_xmit_data", 500), ("port_rcv_errors", 4)],
            &[("sent_pkts", 10), ("retry_exceeded_err", 2)],
        );
        let d = CounterDeltas::between(&before, &after);
        assert_eq!((d.device.as_str(), d.port), ("rxe0", 1));
        assert!((d.elapsed_s - 2.0).abs() < 1e-9, "{}", d.elapsed_s);
        let data = d.get(Group::Counters, "port_xmit_data").unwrap();
        assert_eq!((data.before, data.after, data.delta), (100, 500, 400));
        assert!(!data.error && !data.reset);
        assert!((data.rate_per_s - 200.0).abs() < 1e-9);
        let sent = d.get(Group::HwCounters, "sent_pkts").unwrap();
        assert!(!sent.moved());
        assert_eq!(d.error_delta, 3 + 2);
        let errors: Vec<&str> = d.errors().map(|e| e.name.as_str()).collect();
        assert_eq!(errors, ["port_rcv_errors", "retry_exceeded_err"]);
        let order: Vec<(Group, &str)> = d.deltas.iter().map(|x| (x.group, &*x.name)).collect();
        assert_eq!(
            order,
            [
                (Group::Counters, "port_rcv_errors"),
                (Group::Counters, "port_xmit_data"),
                (Group::HwCounters, "retry_exceeded_err"),
                (Group::HwCounters, "sent_pkts"),
            ]
        );
    }

    #[test]
    fn a_counter_that_went_down_was_reset_not_wrapped() {
        let t0 = Instant::now();
        let before = snap(t0, &[("symbol_error", 7_000_000)], &[("rcvd_pkts", 900)]);
        let after = snap(
            t0 + Duration::from_secs(1),
            &[("symbol_error", 3)],
            &[("rcvd_pkts", 40)],
        );
        let d = CounterDeltas::between(&before, &after);
        let sym = d.get(Group::Counters, "symbol_error").unwrap();
        assert!(sym.reset && sym.moved());
        assert_eq!(sym.delta, 3, "counted since the reset, not a wrap-around");
        let rcvd = d.get(Group::HwCounters, "rcvd_pkts").unwrap();
        assert_eq!((rcvd.reset, rcvd.delta), (true, 40));
        assert_eq!(d.error_delta, 3);
    }

    #[test]
    fn counters_read_only_once_are_left_out_and_no_time_means_no_rate() {
        let t0 = Instant::now();
        let before = snap(t0, &[("gone", 1)], &[]);
        let after = snap(t0, &[("new", 5)], &[("sent_pkts", 1)]);
        let d = CounterDeltas::between(&before, &after);
        assert!(d.deltas.is_empty(), "{d:?}");
        let d = CounterDeltas::between(&before, &before);
        assert_eq!(d.deltas[0].rate_per_s, 0.0);
        assert_eq!(d.elapsed_s, 0.0);
    }

    #[test]
    fn the_error_set() {
        for e in IB_SPEC_ERRORS.iter().chain(RXE_ERRORS).chain(MLX5_ERRORS) {
            assert!(is_error_counter(e), "{e}");
        }
        assert!(
            is_error_counter("vl15_dropped"),
            "sysfs spells it VL15_dropped"
        );
        for traffic in [
            "port_xmit_data",
            "port_rcv_data",
            "port_xmit_packets",
            "port_rcv_packets",
            "unicast_xmit_packets",
            "multicast_rcv_packets",
            "port_xmit_wait",
            "sent_pkts",
            "rcvd_pkts",
            "rdma_sends",
            "rdma_recvs",
            "ack_deferred",
            "rx_write_requests",
            "rx_read_requests",
            "np_cnp_sent",
            "rp_cnp_handled",
            "np_ecn_marked_roce_packets",
            "roce_adp_retrans",
        ] {
            assert!(!is_error_counter(traffic), "{traffic}");
        }
        // Drivers not listed: by their names' error markers.
        for other in [
            "rx_roce_discards",
            "max_retry_exceeded",
            "seq_err_naks_rcvd",
        ] {
            assert!(is_error_counter(other), "{other}");
        }
    }

    #[test]
    fn snapshots_before_and_since_read_sysfs() {
        let root = std::env::temp_dir().join(format!("rdmadiag-counters-{}", std::process::id()));
        for port in ["1", "2"] {
            let p = root.join("rxe0/ports").join(port);
            fs::create_dir_all(p.join("hw_counters")).unwrap();
            fs::write(p.join("hw_counters/sent_pkts"), "10\n").unwrap();
            fs::write(p.join("hw_counters/send_err"), "0\n").unwrap();
        }
        fs::create_dir_all(root.join("mlx5_0/ports/1/counters")).unwrap();
        fs::write(root.join("mlx5_0/ports/1/counters/symbol_error"), "2\n").unwrap();

        let all = Before::read(&root, None, None);
        let ports: Vec<(&str, u8)> = all
            .snapshots
            .iter()
            .map(|s| (s.device.as_str(), s.port))
            .collect();
        assert_eq!(ports, [("mlx5_0", 1), ("rxe0", 1), ("rxe0", 2)]);
        assert_eq!(all.snapshots[0].error_names(), ["symbol_error"]);
        let one = Before::read(&root, Some("rxe0"), Some(2));
        assert_eq!(one.snapshots.len(), 1);

        fs::write(root.join("rxe0/ports/2/hw_counters/sent_pkts"), "25\n").unwrap();
        fs::write(root.join("rxe0/ports/2/hw_counters/send_err"), "1\n").unwrap();
        let d = one.since("rxe0", 2).expect("port 2 was read before");
        assert_eq!(d.get(Group::HwCounters, "sent_pkts").unwrap().delta, 15);
        assert_eq!(d.error_delta, 1);
        assert!(one.since("rxe0", 1).is_none(), "port 1 was not read before");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_interval_ends_early_when_stopped() {
        let stop = AtomicBool::new(false);
        let t = Instant::now();
        assert!(!wait_interval(Duration::from_millis(120), &stop));
        assert!(t.elapsed() >= Duration::from_millis(120));
        stop.store(true, Ordering::Relaxed);
        let t = Instant::now();
        assert!(wait_interval(Duration::from_secs(30), &stop));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
