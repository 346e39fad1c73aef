//! What a test found and how it is shown: the result types, their renderers (tables, plain
//! text, JSON) and the live progress line. Renderers take result types only; nothing here
//! touches a device.

pub mod inventory;
pub mod perf;
pub mod pingpong;
pub mod progress;

use crate::connect::endpoint::Endpoint;
use anyhow::Result;
use comfy_table::presets::{NOTHING, UTF8_FULL_CONDENSED};
use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table};
use serde::Serialize;
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

/// Write one pretty-printed JSON document and a newline.
pub fn emit_json<T: Serialize>(value: &T) -> Result<()> {
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    emit(&s)
}
