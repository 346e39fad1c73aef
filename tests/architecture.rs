//! The module graph of src/: no module imports what its layer forbids, and no import cycle.
//!
//! Every `crate::` path in the code counts as an edge (`use` lines, grouped and multi-line, and
//! paths written inline such as `crate::connect::test_qp::GRH_BYTES`), as does a `super::` path
//! that climbs to the crate root. Comments and string literals are blanked out first.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Everything above the verbs core.
#[rustfmt::skip]
const ABOVE_VERBS: &[&str] = &[
    "cli", "commands", "connect", "session", "perf", "pingpong", "report", "api", "inventory",
    "manual", "check", "fabric",
];

/// The vocabulary below the verbs core (`ib`) imports no other module.
#[rustfmt::skip]
const EVERY_OTHER_MODULE: &[&str] = &[
    "cli", "commands", "connect", "session", "perf", "pingpong", "report", "api", "inventory",
    "manual", "verbs", "sysfs", "exit", "units", "stats", "cpu", "check", "fabric",
];

/// What the engines (`perf`, `pingpong`) may not import.
const ABOVE_ENGINES: &[&str] = &[
    "report", "cli", "commands", "session", "api", "check", "fabric",
];

/// What the renderers may not import.
const OFF_LIMITS_TO_RENDERERS: &[&str] = &[
    "verbs", "commands", "session", "cli", "api", "check", "fabric",
];

/// What QP establishment may not import.
const ABOVE_CONNECT: &[&str] = &[
    "cli", "report", "commands", "session", "api", "perf", "pingpong", "check", "fabric",
];

/// What the roles may not import: they are driven by the library API, which the commands call.
const ABOVE_SESSION: &[&str] = &["cli", "commands", "api", "check", "fabric"];

/// What the fabric run may not import: it drives pairs through the library API (whose options
/// type, `session::SessionOptions`, it fills in) and reads counters; never the verbs core
/// directly, and it knows nothing of flags.
const BELOW_FABRIC: &[&str] = &["cli", "commands", "verbs", "check"];

/// The layers: (module, the modules it may not import, why).
#[rustfmt::skip]
const RULES: &[(&str, &[&str], &str)] = &[
    ("report",   OFF_LIMITS_TO_RENDERERS, "renderers take result types only"),
    ("ib",       EVERY_OTHER_MODULE, "the IB vocabulary is plain values and imports nothing"),
    ("verbs",    ABOVE_VERBS,   "the verbs core imports nothing above it"),
    ("perf",     ABOVE_ENGINES, "engines measure; they neither parse flags nor print"),
    ("pingpong", ABOVE_ENGINES, "engines measure; they neither parse flags nor print"),
    ("connect",  ABOVE_CONNECT, "QP set-up knows nothing of flags, sessions, engines or output"),
    ("session",  ABOVE_SESSION, "the roles know nothing of flags"),
    ("api",      &["cli", "commands", "check", "fabric"], "the library API knows nothing of flags"),
    ("check",    &["cli", "commands", "verbs", "fabric"],
                 "health checks get a typed plan, not flags, and test through the library API"),
    ("fabric",   BELOW_FABRIC,  "the fabric run drives pairs through the library API, not flags or verbs"),
];

/// Edges that break a rule or close a cycle today and go in a restructuring under way:
/// (from, to, reason). Both checks ignore them; an entry whose edge no longer exists fails the
/// test, so the list only shrinks.
#[rustfmt::skip]
const KNOWN_EXCEPTIONS: &[(&str, &str, &str)] = &[
];

/// One import of another top-level module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edge {
    from: String,
    to: String,
    file: String,
    line: usize,
    path: String,
}

impl Edge {
    fn at(&self) -> String {
        format!(
            "{}:{}: {} -> {} ({})",
            self.file, self.line, self.from, self.to, self.path
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the source.

/// `code` with comments, string and char literals blanked (newlines kept, so lines still count).
fn blank_comments_and_strings(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let mut out = c.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for ch in &mut out[from..to.min(c.len())] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let at_word_start = i == 0 || !ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            let end = c[i..]
                .iter()
                .position(|&x| x == '\n')
                .map_or(c.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if at_word_start && let Some(end) = raw_string_end(&c, i) {
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{1F600}'), or else a lifetime or label: left alone.
            let end = if c.get(i + 1) == Some(&'\\') {
                c.get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&x| x == '\''))
                    .map(|n| i + 3 + n + 1)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// Where a raw string (`r"…"`, `r#"…"#`, `br"…"`, `cr#"…"#`) starting at `i` ends, if one does.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(c.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&x| x == '#').count();
    j += hashes;
    if c.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < c.len() {
        if c[j] == '"'
            && c[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&x| x == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(c.len())
}

/// Identifiers, `::` and single punctuation characters, each with its line (1-based).
fn tokens(code: &str) -> Vec<(String, usize)> {
    let c: Vec<char> = code.chars().collect();
    let (mut out, mut line, mut i) = (Vec::new(), 1, 0);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((c[start..i].iter().collect(), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(("::".into(), line));
            i += 2;
        } else {
            out.push((ch.to_string(), line));
            i += 1;
        }
    }
    out
}

/// The paths of a path tree starting at `i` (`a::b::{c, d::{e as f, self}}` gives `a::b::c`,
/// `a::b::d::e` and `a::b::d::self`), each segment with its line, and where the tree ends.
fn path_tree(t: &[(String, usize)], mut i: usize) -> (Vec<Vec<(String, usize)>>, usize) {
    let mut prefix: Vec<(String, usize)> = Vec::new();
    while i < t.len() {
        let tok = t[i].0.as_str();
        if tok == "{" {
            let mut leaves = Vec::new();
            i += 1;
            while i < t.len() && t[i].0 != "}" {
                let (subs, next) = path_tree(t, i);
                leaves.extend(subs.into_iter().map(|s| [prefix.clone(), s].concat()));
                i = next;
                // Skip `as alias` and anything else up to the next item of the group.
                while i < t.len() && t[i].0 != "," && t[i].0 != "}" {
                    i += 1;
                }
                if i < t.len() && t[i].0 == "," {
                    i += 1;
                }
            }
            return (leaves, i + 1);
        }
        let is_name = tok.chars().all(|ch| ch.is_alphanumeric() || ch == '_') || tok == "*";
        if !is_name {
            break;
        }
        prefix.push(t[i].clone());
        i += 1;
        if t.get(i).map(|x| x.0.as_str()) != Some("::") {
            break;
        }
        i += 1;
    }
    (vec![prefix], i)
}

/// The crate-level names a file's code refers to: (name, line, the path as written). `module` is
/// the file's module path (`["verbs", "cm", "id"]`), for resolving `super::`.
fn crate_paths(code: &str, module: &[String]) -> Vec<(String, usize, String)> {
    let t = tokens(&blank_comments_and_strings(code));
    let mut found = Vec::new();
    // Inline modules (`mod tests { … }`) open below the file's module: (name, brace depth).
    let (mut inline, mut depth): (Vec<(String, usize)>, usize) = (Vec::new(), 0);
    let mut i = 0;
    while i < t.len() {
        let tok = t[i].0.as_str();
        match tok {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if t.get(i + 2).is_some_and(|x| x.0 == "{") => {
                inline.push((t[i + 1].0.clone(), depth + 1));
            }
            _ => {}
        }
        let starts_path = (tok == "crate" || tok == "super")
            && t.get(i + 1).is_some_and(|x| x.0 == "::")
            && (i == 0 || (t[i - 1].0 != "::" && t[i - 1].0 != "$"));
        if !starts_path {
            i += 1;
            continue;
        }
        let (leaves, next) = path_tree(&t, i);
        for leaf in leaves {
            let written = leaf
                .iter()
                .map(|s| s.0.as_str())
                .collect::<Vec<_>>()
                .join("::")
                .trim_end_matches("::self")
                .to_string();
            let supers = leaf.iter().take_while(|s| s.0 == "super").count();
            let root_at = if leaf[0].0 == "crate" {
                Some(1)
            } else {
                let mut here: Vec<&str> = module.iter().map(String::as_str).collect();
                here.extend(inline.iter().map(|(n, _)| n.as_str()));
                (supers == here.len()).then_some(supers)
            };
            if let Some((name, line)) = root_at.and_then(|k| leaf.get(k)) {
                found.push((name.clone(), *line, written));
            }
        }
        i = next.max(i + 1);
    }
    found
}

// ---------------------------------------------------------------------------------------------
// The graph.

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every edge between two top-level modules of src/ (lib.rs and main.rs left out).
fn edges() -> Vec<Edge> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let module_of = |p: &Path| -> Vec<String> {
        let rel = p.strip_prefix(&src).unwrap().with_extension("");
        let mut m: Vec<String> = rel
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if m.last().is_some_and(|s| s == "mod") {
            m.pop();
        }
        m
    };
    let top_level: BTreeSet<String> = files
        .iter()
        .map(|p| module_of(p)[0].clone())
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut out = Vec::new();
    for p in &files {
        let module = module_of(p);
        let from = &module[0];
        if !top_level.contains(from) {
            continue;
        }
        let code = std::fs::read_to_string(p).expect("read a source file");
        for (to, line, path) in crate_paths(&code, &module) {
            if to != *from && top_level.contains(&to) {
                out.push(Edge {
                    from: from.clone(),
                    to,
                    file: p.strip_prefix(root).unwrap().display().to_string(),
                    line,
                    path,
                });
            }
        }
    }
    out
}

fn is_exception(e: &Edge) -> bool {
    KNOWN_EXCEPTIONS
        .iter()
        .any(|&(from, to, _)| from == e.from && to == e.to)
}

/// Rule breaches, one line each: the file, the line, the edge and the rule.
fn forbidden_edges(edges: &[Edge]) -> Vec<String> {
    let mut found = Vec::new();
    for e in edges.iter().filter(|e| !is_exception(e)) {
        for (_, forbidden, why) in RULES.iter().filter(|r| r.0 == e.from) {
            if forbidden.contains(&e.to.as_str()) {
                found.push(format!("{}: forbidden: {why}", e.at()));
            }
        }
    }
    found
}

/// Cycles between top-level modules: for each module not yet on a printed cycle, the shortest
/// cycle through it, with an edge (file and line) that makes each step.
fn cycles(edges: &[Edge]) -> Vec<String> {
    let mut graph: BTreeMap<&str, BTreeMap<&str, &Edge>> = BTreeMap::new();
    for e in edges.iter().filter(|e| !is_exception(e)) {
        graph.entry(&e.from).or_default().entry(&e.to).or_insert(e);
    }
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    let mut found = Vec::new();
    for &start in graph.keys() {
        if reported.contains(start) {
            continue;
        }
        // The shortest way back to `start`, breadth first.
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        let mut closing = None;
        while let Some(m) = queue.pop_front() {
            for &next in graph.get(m).map(|n| n.keys()).into_iter().flatten() {
                if next == start {
                    closing = Some(m);
                    break;
                }
                if !came_from.contains_key(next) {
                    came_from.insert(next, m);
                    queue.push_back(next);
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let Some(mut m) = closing else { continue };
        let mut ring = vec![start];
        while m != start {
            ring.push(m);
            m = came_from[m];
        }
        ring[1..].reverse();
        ring.push(start);
        let mut text = format!("cycle: {}", ring.join(" -> "));
        for step in ring.windows(2) {
            write!(text, "\n    {}", graph[step[0]][step[1]].at()).unwrap();
        }
        reported.extend(ring.iter().copied());
        found.push(text);
    }
    found
}

// ---------------------------------------------------------------------------------------------
// The checks.

#[test]
fn no_module_imports_what_its_layer_forbids() {
    let found = forbidden_edges(&edges());
    assert!(found.is_empty(), "forbidden imports:\n{}", found.join("\n"));
}

#[test]
fn no_import_cycle_between_modules() {
    let found = cycles(&edges());
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn every_known_exception_still_exists() {
    let edges = edges();
    let stale: Vec<String> = KNOWN_EXCEPTIONS
        .iter()
        .filter(|&&(from, to, _)| !edges.iter().any(|e| e.from == from && e.to == to))
        .map(|(from, to, reason)| format!("{from} -> {to} ({reason})"))
        .collect();
    assert!(
        stale.is_empty(),
        "these edges are gone: remove them from KNOWN_EXCEPTIONS\n{}",
        stale.join("\n")
    );
}

/// A file holds one concern: one screen of concepts, well under this many lines.
const MAX_LINES_PER_FILE: usize = 600;

#[test]
fn no_file_in_src_is_over_the_line_limit() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(
        files.len() > 10,
        "the scan found only {} files",
        files.len()
    );
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).expect("read").lines().count()))
        .filter(|(_, n)| *n > MAX_LINES_PER_FILE)
        .map(|(f, n)| format!("{}: {n} lines", f.display()))
        .collect();
    assert!(
        long.is_empty(),
        "split these by concern (limit {MAX_LINES_PER_FILE}):\n{}",
        long.join("\n")
    );
}

/// The source files under `src/` that contain `needle` in code before any `#[cfg(test)]`
/// (comments and strings blanked unless `in_strings`), outside the files `allowed` (paths
/// relative to `src/`).
fn files_containing(needle: &str, in_strings: bool, allowed: &[&str]) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&src).unwrap().display().to_string();
            let mut code = std::fs::read_to_string(f).expect("read");
            code.truncate(code.find("#[cfg(test)]").unwrap_or(code.len()));
            let code = if in_strings {
                code
            } else {
                blank_comments_and_strings(&code)
            };
            (code.contains(needle) && !allowed.iter().any(|a| rel.starts_with(a))).then_some(rel)
        })
        .collect()
}

/// Which test a request runs is a type (connect/request.rs `Test`), never a name compared as
/// a string: a new test is a variant the compiler makes every dispatch handle.
#[test]
fn no_test_is_dispatched_by_its_name() {
    for needle in [".test ==", "test.as_str()", "from_test("] {
        let found = files_containing(needle, false, &[]);
        assert!(found.is_empty(), "'{needle}' in {found:?}");
    }
}

/// Each machine-readable format is written in one file of `src/report/export/` (the
/// Prometheus exposition, CSV quoting, the JSON envelope), whatever the report kind.
#[test]
fn every_export_format_is_written_in_one_place() {
    for (needle, home) in [
        ("# TYPE ", "report/export/prometheus.rs"),
        ("to_string_pretty", "report/export/json.rs"),
        ("\"ERROR: rdmadiag: {}", "report/export/nhc.rs"),
    ] {
        let found = files_containing(needle, true, &[home]);
        assert!(
            found.is_empty(),
            "'{needle}' written outside {home}: {found:?}"
        );
        assert!(
            !files_containing(needle, true, &[]).is_empty(),
            "'{needle}' is no longer in {home}: update this test"
        );
    }
}

#[test]
fn the_scan_sees_the_crate() {
    // A scan that silently found nothing would pass every check.
    let edges = edges();
    assert!(edges.len() > 20, "only {} edges found", edges.len());
    assert!(edges.iter().any(|e| e.from == "connect" && e.to == "verbs"));
}

// ---------------------------------------------------------------------------------------------
// The parser.

fn names(code: &str, module: &[&str]) -> Vec<(String, usize)> {
    let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
    crate_paths(code, &module)
        .into_iter()
        .map(|(n, l, _)| (n, l))
        .collect()
}

#[test]
fn plain_grouped_and_multi_line_uses_are_read() {
    let code = "use crate::verbs::Gid;\n\
                use crate::{cli::Cli, connect::{control, endpoint::Endpoint}, units};\n\
                use crate::session::{\n    self,\n    perf::{PerfReport as R},\n};\n\
                use crate::{\n    exit,\n    stats::LatencyStats,\n};\n";
    assert_eq!(
        names(code, &["render"]),
        [
            ("verbs", 1),
            ("cli", 2),
            ("connect", 2),
            ("connect", 2),
            ("units", 2),
            ("session", 3),
            ("session", 3),
            ("exit", 8),
            ("stats", 9),
        ]
        .map(|(n, l)| (n.to_string(), l))
    );
}

#[test]
fn inline_paths_count_and_comments_strings_do_not() {
    let code = "fn f() -> usize {\n\
                    // crate::cli::VERSION in a comment\n\
                    /* crate::report::X, /* nested */ crate::output */\n\
                    let s = \"crate::commands::perf\";\n\
                    let r = r#\"crate::manual \"quoted\" \"#;\n\
                    let c = '\"'; let l: &'static str = \"x\";\n\
                    2 * crate::connect::test_qp::GRH_BYTES + s.len()\n\
                }\n\
                /// Doc: uses crate::session::perf.\n\
                pub(crate) fn g<T>(x: crate::stats::Bucket) -> Vec<T> { $crate::x; Vec::new() }\n";
    assert_eq!(
        names(code, &["pingpong"]),
        [("connect", 7), ("stats", 10)].map(|(n, l)| (n.to_string(), l))
    );
}

#[test]
fn super_paths_count_only_when_they_reach_the_crate_root() {
    let code = "use super::error::VerbsError;\n\
                use super::super::cli::Cli;\n\
                mod tests {\n    use super::*;\n    use super::super::super::output;\n}\n";
    assert_eq!(
        names(code, &["verbs", "cm"]),
        [("cli", 2), ("output", 5)].map(|(n, l)| (n.to_string(), l))
    );
    assert_eq!(
        names("use super::units::Units;\n", &["render"]),
        [("units".to_string(), 1)]
    );
}

#[test]
fn cycles_are_found_and_printed_with_their_edges() {
    let edge = |from: &str, to: &str, line| Edge {
        from: from.into(),
        to: to.into(),
        file: format!("src/{from}.rs"),
        line,
        path: format!("crate::{to}"),
    };
    let found = cycles(&[
        edge("a", "b", 1),
        edge("b", "c", 2),
        edge("c", "a", 3),
        edge("c", "d", 4),
    ]);
    assert_eq!(
        found,
        ["cycle: a -> b -> c -> a\n    \
          src/a.rs:1: a -> b (crate::b)\n    \
          src/b.rs:2: b -> c (crate::c)\n    \
          src/c.rs:3: c -> a (crate::a)"]
    );
    assert!(cycles(&[edge("a", "b", 1), edge("b", "c", 2)]).is_empty());
}
