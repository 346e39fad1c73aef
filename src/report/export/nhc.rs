//! LBNL NHC's convention (`check --format nhc`): nothing on success, one `ERROR:` line per
//! failure.

use crate::report::check::{CheckReport, what_failed};

/// NHC's convention: nothing when every check passed, else one `ERROR: rdmadiag: TARGET: WHAT`
/// line per failure.
pub fn check(r: &CheckReport) -> String {
    r.failures()
        .map(|c| format!("ERROR: rdmadiag: {}: {}\n", c.target, what_failed(c)))
        .collect()
}
