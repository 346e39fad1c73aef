//! Writes reports to stdout: text or one JSON document; a closed pipe ends quietly.

use anyhow::Result;
use serde::Serialize;
use std::io::{self, Write};

/// Write `text` to stdout. A reader that went away (EPIPE, `| head`) is not an error.
pub fn emit(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// Write one pretty-printed JSON document and a newline.
pub fn emit_json<T: Serialize>(value: &T) -> Result<()> {
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    emit(&s)
}
