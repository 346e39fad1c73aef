//! Helpers shared by the integration tests: run the binary, parse ibv_devinfo's output.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_rdmadiag");

/// Run rdmadiag with `args` and extra environment.
pub fn rdmadiag_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args).env_remove("NO_COLOR");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run rdmadiag")
}

pub fn rdmadiag(args: &[&str]) -> Output {
    rdmadiag_env(args, &[])
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Run rdmadiag, require exit 0, parse stdout as JSON.
pub fn rdmadiag_json(args: &[&str]) -> serde_json::Value {
    let o = rdmadiag(args);
    assert!(
        o.status.success(),
        "rdmadiag {args:?} failed ({:?}): {}",
        o.status.code(),
        stderr(&o)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("rdmadiag {args:?}: invalid JSON ({e}): {}", stdout(&o)))
}

/// Assert a failed run printed exactly one line on stderr, no panic, and return it.
pub fn one_error_line(o: &Output) -> String {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(!err.contains("RUST_BACKTRACE"), "backtrace hint: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {err:?}");
    assert!(lines[0].starts_with("rdmadiag: "), "{err}");
    lines[0].to_string()
}

/// One device of `ibv_devinfo -v`: its fields, and per port its fields and GIDs.
#[derive(Debug, Default)]
pub struct DevinfoDevice {
    pub fields: BTreeMap<String, String>,
    pub ports: BTreeMap<u32, DevinfoPort>,
}

#[derive(Debug, Default)]
pub struct DevinfoPort {
    pub fields: BTreeMap<String, String>,
    /// index -> (gid text, type text)
    pub gids: BTreeMap<u32, (String, String)>,
}

/// Parse `ibv_devinfo -v` into devices keyed by hca_id.
pub fn parse_devinfo(text: &str) -> BTreeMap<String, DevinfoDevice> {
    let mut devs: BTreeMap<String, DevinfoDevice> = BTreeMap::new();
    let mut dev: Option<String> = None;
    let mut port: Option<u32> = None;
    for line in text.lines() {
        let t = line.trim();
        let Some((k, v)) = t.split_once(':') else {
            continue; // flag names under device_cap_flags, blank lines
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "hca_id" {
            dev = Some(v.to_string());
            port = None;
            devs.entry(v.to_string()).or_default();
            continue;
        }
        let Some(d) = dev.as_ref().and_then(|d| devs.get_mut(d)) else {
            continue;
        };
        if k == "port" {
            let n: u32 = v.parse().expect("port number");
            port = Some(n);
            d.ports.entry(n).or_default();
            continue;
        }
        match port {
            None => {
                d.fields.insert(k.to_string(), v.to_string());
            }
            Some(p) => {
                let pe = d.ports.get_mut(&p).unwrap();
                if let Some(idx) = k.strip_prefix("GID[").and_then(|s| s.strip_suffix(']')) {
                    let (gid, ty) = v.rsplit_once(',').expect("GID line has a type");
                    pe.gids.insert(
                        idx.trim().parse().unwrap(),
                        (gid.trim().to_string(), ty.trim().to_string()),
                    );
                } else {
                    pe.fields.insert(k.to_string(), v.to_string());
                }
            }
        }
    }
    devs
}

/// The number a devinfo value starts with: hex (0x…) or decimal.
pub fn devinfo_number(v: &str) -> u64 {
    let first = v.split_whitespace().next().unwrap_or(v);
    match first.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap_or_else(|_| panic!("hex {v:?}")),
        None => first.parse().unwrap_or_else(|_| panic!("number {v:?}")),
    }
}

/// The raw value in parentheses at the end of e.g. `LINK_UP (5)`.
pub fn devinfo_paren(v: &str) -> u64 {
    let inner = v
        .rsplit_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no (N) in {v:?}"));
    inner.trim().parse().unwrap()
}

/// Start rdmadiag in the background with stdout/stderr captured.
pub fn spawn_rdmadiag(args: &[&str]) -> std::process::Child {
    Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn rdmadiag")
}

/// Start any program in the background with stdout/stderr captured.
pub fn spawn_cmd(prog: &str, args: &[&str]) -> std::process::Child {
    Command::new(prog)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {prog}: {e}"))
}

/// Wait for a child at most `limit`; kill it and fail the test if it overruns.
pub fn wait_limit(
    mut child: std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> Output {
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("collect output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().expect("collect output");
            panic!(
                "{what} did not finish within {limit:?}; stderr: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Wait until some socket listens on TCP `port` (read from /proc/net/tcp*, so the check itself
/// is not a connection the server would take for its client), at most `limit`.
pub fn wait_listening(port: u16, limit: std::time::Duration) {
    let start = std::time::Instant::now();
    let needle = format!(":{port:04X} ");
    while start.elapsed() < limit {
        for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            // Columns: sl local_address rem_address st ...; st 0A is LISTEN.
            if text.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).contains(&needle) && cols[3] == "0A"
            }) {
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("nothing listened on port {port} within {limit:?}");
}

/// Start rdmadiag in the background with stdout/stderr captured and extra environment.
pub fn spawn_rdmadiag_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let mut c = Command::new(BIN);
    c.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().expect("spawn rdmadiag")
}

/// Every name written as `code` in docs/json.md: the fields the JSON schema documents.
pub fn documented_json_names() -> std::collections::BTreeSet<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md"))
        .expect("read docs/json.md");
    doc.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.trim().to_string())
        .collect()
}

/// Every object key in `v`, recursively, except inside maps keyed by data (counter names).
pub fn json_keys(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                out.insert(k.clone());
                if k != "counters" && k != "hw_counters" {
                    json_keys(child, out);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|c| json_keys(c, out)),
        _ => {}
    }
}

/// The checks named `name` in a `check --json` document.
pub fn checks<'a>(doc: &'a serde_json::Value, name: &str) -> Vec<&'a serde_json::Value> {
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == name)
        .collect()
}
