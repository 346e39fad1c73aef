//! JSON (docs/json.md): every report kind, pretty-printed, in the common envelope.

use anyhow::Result;
use serde::Serialize;

/// The version of the JSON documents' layout (docs/json.md); raised when a field changes
/// meaning or goes away, not when one is added.
pub const SCHEMA_VERSION: u32 = 2;

/// What every JSON document carries first, so documents from a fleet can be aggregated.
#[derive(Serialize)]
pub(crate) struct Envelope<'a, T: Serialize> {
    schema_version: u32,
    rdmadiag_version: &'static str,
    /// This host's name (the kernel's hostname).
    host: String,
    /// When the document was made, RFC 3339 in UTC.
    timestamp: String,
    #[serde(flatten)]
    body: &'a T,
}

/// This host's name, as the kernel knows it (empty when it cannot be read).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

pub(crate) fn envelope<T: Serialize>(body: &T) -> Envelope<'_, T> {
    Envelope {
        schema_version: SCHEMA_VERSION,
        rdmadiag_version: crate::VERSION,
        host: hostname(),
        timestamp: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        body,
    }
}

/// One pretty-printed JSON document (in the common envelope) and a newline.
pub fn document<T: Serialize>(value: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(&envelope(value))?;
    s.push('\n');
    Ok(s)
}
