//! The Prometheus text exposition format (version 0.0.4), written once for every report that
//! exports to it (`check --format prometheus`, `fabric --prometheus`): gauge families with HELP
//! and TYPE, label values escaped, NaN and infinities spelled as the format wants.

use std::fmt::Write as _;

/// A label value with `\`, `"` and newlines escaped.
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value as the format writes it (`NaN`, `+Inf`, `-Inf` for the non-finite).
pub fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

/// One exposition: gauge families in the order written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// A gauge family, its HELP and TYPE even when it has no sample (the family exists, with
    /// nothing to report now: no suspect link, say). Each sample: its labels (`a="x",b="y"`,
    /// empty for none) and its value.
    pub fn gauge(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (String, f64)>,
    ) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, v) in samples {
            if labels.is_empty() {
                let _ = writeln!(self.out, "{name} {}", number(v));
            } else {
                let _ = writeln!(self.out, "{name}{{{labels}}} {}", number(v));
            }
        }
    }

    /// A gauge family only when it has samples (a measurement no check of this run made).
    pub fn gauge_if_any(&mut self, name: &str, help: &str, samples: Vec<(String, f64)>) {
        if !samples.is_empty() {
            self.gauge(name, help, samples);
        }
    }

    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `promtool check metrics` on `text`: its complaints, empty when it has none (promtool
    /// comes with Debian's prometheus package, which scripts/setup installs).
    pub(crate) fn promtool_complaints(text: &str) -> String {
        use std::io::Write as _;
        let mut p = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool (Debian package prometheus; scripts/setup installs it)");
        p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let o = p.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if o.status.success() {
            said
        } else {
            format!("exit {:?}: {said}", o.status.code())
        }
    }

    #[test]
    fn families_labels_and_special_values() {
        let mut e = Exposition::default();
        e.gauge(
            "x_seconds",
            "A figure.",
            [
                (format!("host=\"{}\"", label("a\"b\\c\nd")), f64::NAN),
                (String::new(), f64::INFINITY),
                ("k=\"v\"".into(), -f64::INFINITY),
                ("k=\"w\"".into(), 1.5),
            ],
        );
        e.gauge_if_any("y", "Nothing.", vec![]);
        e.gauge("z", "Empty.", []);
        assert_eq!(
            e.finish(),
            "# HELP x_seconds A figure.\n# TYPE x_seconds gauge\n\
             x_seconds{host=\"a\\\"b\\\\c\\nd\"} NaN\nx_seconds +Inf\n\
             x_seconds{k=\"v\"} -Inf\nx_seconds{k=\"w\"} 1.5\n\
             # HELP z Empty.\n# TYPE z gauge\n"
        );
    }
}
