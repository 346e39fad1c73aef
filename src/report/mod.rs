//! What a test found and how it is shown: the result types, their renderers (tables, plain
//! text, JSON) and the live progress line. Renderers take result types only; nothing here
//! touches a device.

pub mod check;
pub mod counters;
pub mod export;
pub mod fabric;
pub mod inventory;
pub mod perf;
pub mod pingpong;
pub mod progress;
pub mod thresholds;

use crate::connect::endpoint::Endpoint;
use anyhow::Result;
use comfy_table::presets::{NOTHING, UTF8_FULL_CONDENSED};
use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table};
use serde::Serialize;

pub use export::json::SCHEMA_VERSION;
use std::io::{self, IsTerminal, Write};

/// How output should look: boxes and colour on a terminal, plain columns on a pipe.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub tty: bool,
    pub color: bool,
}

impl Style {
    /// Decide from stdout and the environment (NO_COLOR, TERM=dumb).
    pub fn detect() -> Self {
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
            || std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Style {
            tty,
            color: tty && !no_color,
        }
    }

    /// Plain text, no colour: what pipes and tests get.
    pub fn plain() -> Self {
        Style {
            tty: false,
            color: false,
        }
    }

    pub(crate) fn table(&self, header: &[&str]) -> Table {
        let mut t = Table::new();
        if self.tty {
            t.load_style(UTF8_FULL_CONDENSED)
                .set_content_arrangement(ContentArrangement::Dynamic);
        } else {
            t.load_style(NOTHING).force_no_tty();
        }
        if !header.is_empty() {
            t.set_header(header.iter().map(|h| self.bold(h)));
        }
        t
    }

    pub(crate) fn bold(&self, s: &str) -> Cell {
        let c = Cell::new(s);
        if self.color {
            c.add_attribute(Attribute::Bold)
        } else {
            c
        }
    }

    pub(crate) fn alert(&self, s: String) -> Cell {
        let c = Cell::new(s);
        if self.color {
            c.fg(Color::Red).add_attribute(Attribute::Bold)
        } else {
            c
        }
    }
}

/// The priority a test's packets carried: "traffic class 104 (DSCP 26, ECN 0), SL 0".
pub(crate) fn qos_text(tclass: Option<u8>, sl: Option<u8>) -> String {
    let tclass = match tclass {
        Some(t) => format!("traffic class {t} (DSCP {}, ECN {})", t >> 2, t & 3),
        None => "traffic class rdma_cm's default".to_string(),
    };
    let sl = match sl {
        Some(s) => format!("SL {s}"),
        None => "SL from the path".to_string(),
    };
    format!("{tclass}, {sl}")
}

pub(crate) fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Trim table lines: comfy-table pads the last column even in the plain preset.
pub(crate) fn finish(t: &Table) -> String {
    let mut s: String = t
        .to_string()
        .lines()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n");
    s.push('\n');
    s
}

/// One end of a test, in one line.
pub(crate) fn endpoint_text(e: &Endpoint) -> String {
    if e.port == 0 {
        // What rdma-core's exchange tells: no device, port or GID index.
        return format!("{}  QPN 0x{:06x}  GID {}", e.device, e.qpn, e.gid);
    }
    format!(
        "{} port {}  QPN 0x{:06x}  GID[{}] {}{}{}",
        e.device,
        e.port,
        e.qpn,
        e.gid_index,
        e.gid,
        e.gid_type.map(|t| format!(" {t}")).unwrap_or_default(),
        e.netdev
            .as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default()
    )
}

/// Write `text` to stdout. A reader that went away (EPIPE, `| head`) is not an error.
pub fn emit(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// Write one pretty-printed JSON document (in the common envelope) and a newline.
pub fn emit_json<T: Serialize>(value: &T) -> Result<()> {
    emit(&export::json::document(value)?)
}

/// A failure as one JSON document: `{"error": {"message", "exit_code", "phase", "peer"}}` in the
/// envelope.
#[derive(Serialize)]
struct ErrorDoc<'a> {
    error: ErrorBody<'a>,
}

/// What failed, as docs/json.md's ERROR says.
#[derive(Serialize)]
pub struct ErrorBody<'a> {
    pub message: &'a str,
    pub exit_code: u8,
    /// How far the test had got (`connect`, `qp setup`, `transfer`...), if one had started.
    pub phase: Option<&'a str>,
    /// The peer's control address, when one was known.
    pub peer: Option<&'a str>,
}

/// With `--json`, a failure still prints one document on stdout (and its line on stderr).
pub fn emit_error_json(error: ErrorBody) -> Result<()> {
    emit_json(&ErrorDoc { error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_text_splits_the_traffic_class_into_dscp_and_ecn() {
        assert_eq!(
            qos_text(Some(104), Some(3)),
            "traffic class 104 (DSCP 26, ECN 0), SL 3"
        );
        assert_eq!(
            qos_text(Some(0x6a), Some(0)),
            "traffic class 106 (DSCP 26, ECN 2), SL 0"
        );
        assert_eq!(
            qos_text(None, None),
            "traffic class rdma_cm's default, SL from the path"
        );
    }

    #[test]
    fn every_document_carries_the_envelope() {
        #[derive(Serialize)]
        struct Body {
            answer: u32,
        }
        let v = serde_json::to_value(export::json::envelope(&Body { answer: 42 })).unwrap();
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["rdmadiag_version"], crate::VERSION);
        assert_eq!(v["answer"], 42);
        let ts = v["timestamp"].as_str().unwrap();
        assert!(humantime::parse_rfc3339(ts).is_ok(), "{ts}");
        assert!(v["host"].is_string());
        let e = serde_json::to_value(export::json::envelope(&ErrorDoc {
            error: ErrorBody {
                message: "boom",
                exit_code: 1,
                phase: Some("transfer"),
                peer: Some("10.0.0.1:18515"),
            },
        }))
        .unwrap();
        assert_eq!(e["error"]["message"], "boom");
        assert_eq!(e["error"]["exit_code"], 1);
        assert_eq!(e["error"]["phase"], "transfer");
        assert_eq!(e["error"]["peer"], "10.0.0.1:18515");
        let before = serde_json::to_value(export::json::envelope(&ErrorDoc {
            error: ErrorBody {
                message: "bad flag",
                exit_code: 2,
                phase: None,
                peer: None,
            },
        }))
        .unwrap();
        assert!(before["error"]["phase"].is_null() && before["error"]["peer"].is_null());
    }
}
