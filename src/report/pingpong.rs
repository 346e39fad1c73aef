//! The result of a ping-pong run, and how it reads.

use super::{Style, endpoint_text, finish};
use crate::connect::control::{LinkSpec, PingpongSpec, PingpongSummary, QpType};
use crate::connect::endpoint::Endpoint;
use crate::counters::CounterDeltas;
use crate::stats::LatencyStats;
use comfy_table::Cell;
use serde::{Deserialize, Serialize};

/// The result of a ping-pong run (see docs/json.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PingpongReport {
    pub test: String,
    pub transport: QpType,
    pub size: u32,
    /// Round trips actually run.
    pub iterations: u64,
    /// Round trips asked for (-n).
    #[serde(default)]
    pub requested_iterations: u64,
    pub rx_depth: u32,
    pub events: bool,
    pub compat: Option<String>,
    pub path_mtu: u32,
    /// RoCE GRH traffic class and InfiniBand service level, as in bw's report.
    #[serde(default)]
    pub tclass: Option<u8>,
    #[serde(default)]
    pub sl: Option<u8>,
    pub local: Endpoint,
    pub remote: Endpoint,
    pub elapsed_s: f64,
    pub round_trips_per_sec: f64,
    /// Elapsed time over round trips, as ibv_rc_pingpong's "usec/iter" (a mean that includes
    /// everything from just after the first send is posted, where ibv_rc_pingpong starts its
    /// clock, to the last completion).
    #[serde(default)]
    pub usec_per_iter: f64,
    /// Completions requested: "every send" (as ibv_rc_pingpong).
    #[serde(default)]
    pub signaling: String,
    /// Payload bits moved both ways per second, in Mb/s (as ibv_rc_pingpong counts).
    pub bandwidth_mbps: f64,
    /// Round-trip latency.
    #[serde(flatten)]
    pub latency: LatencyStats,
    /// Where the client's samples' clock readings came from (one per round trip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::clock::ClockSource>,
    /// `--counters`: how this host's port counters changed across the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_deltas: Option<CounterDeltas>,
}

impl PingpongReport {
    /// The report of a ping-pong `p` over `link` between `local` (the client) and `remote`, from the
    /// client's measurement: built the same way on both ends, so both print the same document.
    pub fn new(
        link: &LinkSpec,
        p: &PingpongSpec,
        path_mtu: u32,
        local: Endpoint,
        remote: Endpoint,
        m: &PingpongSummary,
        compat: Option<&str>,
    ) -> PingpongReport {
        let secs = m.elapsed_s.max(1e-9);
        PingpongReport {
            test: "pingpong".into(),
            transport: link.transport,
            size: p.size,
            iterations: m.round_trips,
            requested_iterations: p.iterations,
            rx_depth: p.rx_depth,
            events: p.events,
            compat: compat.map(String::from),
            path_mtu,
            tclass: link.reported_tclass(),
            sl: link.reported_sl(),
            local,
            remote,
            elapsed_s: secs,
            round_trips_per_sec: m.round_trips as f64 / secs,
            usec_per_iter: secs * 1e6 / m.round_trips.max(1) as f64,
            signaling: "every send, each side waits for it every round trip".into(),
            bandwidth_mbps: (p.size as f64 * 2.0 * m.round_trips as f64 * 8.0) / secs / 1e6,
            latency: m.latency,
            clock: m.clock,
            counter_deltas: None,
        }
    }
}

/// `rdmadiag pingpong`: what ran where, round-trip latency, rate.
pub fn pingpong_text(r: &PingpongReport, style: Style) -> String {
    let mut out = format!(
        "pingpong {} {} B x {} round trips, path MTU {}{}\n",
        r.transport,
        r.size,
        r.iterations,
        r.path_mtu,
        r.compat
            .as_deref()
            .map(|c| format!(" (compat {c})"))
            .unwrap_or_default()
    );
    out.push_str(&format!("  local   {}\n", endpoint_text(&r.local)));
    out.push_str(&format!("  remote  {}\n", endpoint_text(&r.remote)));
    out.push_str(&format!(
        "  settings  {}{}\n",
        super::qos_text(r.tclass, r.sl),
        r.clock
            .map(|c| format!(", clock {c} (one read per round trip)"))
            .unwrap_or_default()
    ));
    let l = &r.latency;
    let mut t = style.table(&[
        "round trip (us)",
        "min",
        "median",
        "mean",
        "stdev",
        "p99",
        "p99.9",
        "max",
    ]);
    let f = |v: f64| Cell::new(format!("{v:.2}"));
    t.add_row(vec![
        Cell::new(""),
        f(l.min_us),
        f(l.median_us),
        f(l.avg_us),
        f(l.stdev_us),
        f(l.p99_us),
        f(l.p999_us),
        f(l.max_us),
    ]);
    out.push_str(&finish(&t));
    out.push_str(&format!(
        "  {} round trips in {:.3} s = {:.2} usec/iter (as ibv_rc_pingpong): {:.0} round \
         trips/s, {:.2} Mb/s\n",
        r.iterations, r.elapsed_s, r.usec_per_iter, r.round_trips_per_sec, r.bandwidth_mbps
    ));
    if r.requested_iterations != 0 && r.requested_iterations != r.iterations {
        out.push_str(&format!(
            "  ({} round trips were asked for)\n",
            r.requested_iterations
        ));
    }
    out.push_str(&format!("  signalling: {}\n", r.signaling));
    out
}
