//! CSV (RFC 4180): a header row, then one row per record; a field holding a comma, a quote or a
//! line break is quoted, its quotes doubled. Then each report kind's rows.

use crate::report::fabric::FabricReport;
use std::fmt::Write as _;

/// One field as CSV writes it.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A figure, empty when there is none.
fn number(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// CSV, one row per pair (header first).
pub fn fabric(r: &FabricReport) -> String {
    let mut out = String::from(
        "a,b,round,bw_gbps,bw_gbps_reverse,lat_us,error_counter_delta,flagged,retested,reason\n",
    );
    // The control pairs of the retest rounds are no pair's result (judged by no rule): left out.
    for p in r.pairs.iter().filter(|p| !p.control) {
        let errors: u64 = p.counters.values().flat_map(|m| m.values()).sum();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            field(&p.a),
            field(&p.b),
            p.round,
            number(p.bw_gbps),
            number(p.bw_gbps_reverse),
            number(p.lat_us),
            errors,
            p.flagged,
            p.retested,
            field(p.reason.as_deref().unwrap_or(""))
        );
    }
    out
}
