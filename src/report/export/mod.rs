//! Every output format, one file each (as hyperfine's `export/`): JSON for every report, and
//! CSV, Prometheus metrics and NHC lines for the report kinds that have them. Text is each
//! report kind's own layout (its tables, in its module under report/). A report kind implements
//! [`Export`] for the formats it supports; asking it for another is a usage error naming both.

pub mod csv;
pub mod json;
pub mod nhc;
pub mod prometheus;

use super::Style;
use super::check::CheckReport;
use super::fabric::{FabricReport, fabric_text};
use super::pingpong::{PingpongReport, pingpong_text};
use crate::exit::UsageError;
use anyhow::Result;
use serde::Serialize;
use std::time::SystemTime;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
    Prometheus,
    Nhc,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Text => "text",
            Format::Json => "JSON",
            Format::Csv => "CSV",
            Format::Prometheus => "Prometheus",
            Format::Nhc => "NHC",
        })
    }
}

/// What a rendering needs besides the report.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// How text looks (a terminal's boxes and colour, or plain).
    pub style: Style,
    /// When the report was written, seconds since the Unix epoch (metrics are stamped with it).
    pub unix_time_s: f64,
}

impl Context {
    /// Text in `style`, stamped now.
    pub fn now(style: Style) -> Context {
        Context {
            style,
            unix_time_s: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }
}

/// A report that can be written out: text and JSON always, the other formats where the kind
/// has them (None: this kind has no such form).
pub trait Export: Serialize {
    /// What the report is, for messages: "a fabric report".
    const KIND: &'static str;
    fn text(&self, style: Style) -> String;
    fn csv(&self) -> Option<String> {
        None
    }
    fn prometheus(&self, _unix_time_s: f64) -> Option<String> {
        None
    }
    fn nhc(&self) -> Option<String> {
        None
    }
}

/// `r` in `format`; a format its kind does not have is a usage error.
pub fn render<R: Export>(r: &R, format: Format, cx: &Context) -> Result<String> {
    let out = match format {
        Format::Text => Some(r.text(cx.style)),
        Format::Json => Some(json::document(r)?),
        Format::Csv => r.csv(),
        Format::Prometheus => r.prometheus(cx.unix_time_s),
        Format::Nhc => r.nhc(),
    };
    out.ok_or_else(|| {
        UsageError(format!(
            "{} has no {format} form (it has text, JSON{})",
            R::KIND,
            [
                (r.csv().is_some(), ", CSV"),
                (r.prometheus(0.0).is_some(), ", Prometheus"),
                (r.nhc().is_some(), ", NHC"),
            ]
            .iter()
            .filter(|(has, _)| *has)
            .map(|(_, name)| *name)
            .collect::<String>()
        ))
        .into()
    })
}

impl Export for CheckReport {
    const KIND: &'static str = "a check report";
    fn text(&self, style: Style) -> String {
        super::check::text(self, style)
    }
    fn prometheus(&self, unix_time_s: f64) -> Option<String> {
        Some(prometheus::check(self, unix_time_s))
    }
    fn nhc(&self) -> Option<String> {
        Some(nhc::check(self))
    }
}

impl Export for FabricReport {
    const KIND: &'static str = "a fabric report";
    fn text(&self, style: Style) -> String {
        fabric_text(self, style)
    }
    fn csv(&self) -> Option<String> {
        Some(csv::fabric(self))
    }
    fn prometheus(&self, _unix_time_s: f64) -> Option<String> {
        Some(prometheus::fabric(self))
    }
}

impl Export for PingpongReport {
    const KIND: &'static str = "a ping-pong report";
    fn text(&self, style: Style) -> String {
        let mut out = pingpong_text(self, style);
        if let Some(d) = &self.counter_deltas {
            out.push_str(&super::counters::test_counters_text(d, style));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_a_report_kind_lacks_is_a_usage_error_naming_what_it_has() {
        let cx = Context::now(Style::plain());
        let r = crate::report::check::tests::sample();
        assert!(render(&r, Format::Nhc, &cx).is_ok());
        let e = render(&r, Format::Csv, &cx).unwrap_err();
        assert_eq!(crate::exit::code_for(&e), crate::exit::USAGE, "{e:#}");
        assert_eq!(
            e.to_string(),
            "a check report has no CSV form (it has text, JSON, Prometheus, NHC)"
        );
        let f = crate::report::fabric::tests::sample();
        assert!(
            render(&f, Format::Csv, &cx)
                .unwrap()
                .starts_with("a,b,round,")
        );
        let e = render(&f, Format::Nhc, &cx).unwrap_err();
        assert!(
            e.to_string()
                .contains("(it has text, JSON, CSV, Prometheus)"),
            "{e}"
        );
        let j = render(&f, Format::Json, &cx).unwrap();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["schema_version"], json::SCHEMA_VERSION);
    }
}
