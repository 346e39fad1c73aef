//! Renders man/ and completions/ from the clap definition (src/cli/), the hand-written
//! sections (src/manual/) and docs/json.md (rdmadiag-json(7)). Shared by examples/gen-docs
//! (writes the files) and tests/docs.rs (fails when the committed files differ). Only the sources
//! decide the output: the version is the crate's (no git revision), and the pages carry no date.

use clap::{Command, CommandFactory};
use clap_complete::{Generator, Shell};
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};
use rdmadiag::cli::Cli;
use rdmadiag::manual;
use std::path::PathBuf;

/// The directories the generator owns: everything in them is generated.
pub const DIRS: [&str; 2] = ["man", "completions"];

const BIN: &str = "rdmadiag";

/// One generated file, its path relative to the repository root.
pub struct GeneratedFile {
    pub path: PathBuf,
    pub contents: Vec<u8>,
}

/// Every file of man/ and completions/.
pub fn all() -> Vec<GeneratedFile> {
    let mut files = man_pages();
    files.push(json_page());
    files.extend(completions());
    files
}

/// The CLI as the generated files describe it: the crate version instead of `rdmadiag::VERSION`
/// (which carries the git revision), so regenerating at another commit changes nothing.
fn command() -> Command {
    Cli::command().version(env!("CARGO_PKG_VERSION"))
}

/// rdmadiag.1 and one rdmadiag-SUBCOMMAND.1 per subcommand (no page for `help`).
fn man_pages() -> Vec<GeneratedFile> {
    let mut root = command().disable_help_subcommand(true);
    root.build();
    let subs: Vec<Command> = root
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let mut pages: Vec<String> = vec![BIN.to_string()];
    pages.extend(subs.iter().map(page_name));
    let mut files = vec![man_page(&root, None, &pages)];
    for sub in &subs {
        files.push(man_page(sub, Some(sub.get_name()), &pages));
    }
    files
}

fn page_name(cmd: &Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

/// One page: clap_mangen's sections, then EXIT STATUS, SECURITY (subcommands with a port),
/// ENVIRONMENT (rdmadiag.1 only), EXAMPLES,
/// VERSION and SEE ALSO. The root's after_help (a one-line exit status summary)
/// is left out: EXIT STATUS says it in full.
fn man_page(cmd: &Command, subcommand: Option<&str>, pages: &[String]) -> GeneratedFile {
    let name = page_name(cmd);
    let man = Man::new(cmd.clone());

    // The title line by hand: clap_mangen drops an empty date from `.TH`, which shifts the
    // source into the date's place. No date at all keeps the pages reproducible.
    let mut out = Roff::new().render().into_bytes();
    out.extend_from_slice(
        format!(
            ".TH {} 1 \"\" \"{BIN} {}\" \"rdmadiag manual\"\n",
            name.to_uppercase(),
            env!("CARGO_PKG_VERSION")
        )
        .as_bytes(),
    );
    // Each rendering starts with roff's apostrophe preamble; the page keeps one.
    let mut add = |rendered: Vec<u8>| out.extend_from_slice(without_preamble(&rendered));
    add(rendered(|w| man.render_name_section(w)));
    add(rendered(|w| man.render_synopsis_section(w)));
    add(rendered(|w| man.render_description_section(w)));
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        add(rendered(|w| man.render_options_section(w)));
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        add(rendered(|w| man.render_subcommands_section(w)));
    }
    if let Some(sub) = subcommand {
        add(other_tools_flags(sub).render().into_bytes());
    }
    add(exit_status().render().into_bytes());
    if let Some(sub) = subcommand {
        add(items_section("COMPATIBILITY", manual::compatibility(sub))
            .render()
            .into_bytes());
        add(items_section("SECURITY", manual::security(sub))
            .render()
            .into_bytes());
    }
    if subcommand.is_none() {
        add(environment().render().into_bytes());
    }
    add(examples(subcommand).render().into_bytes());
    add(rendered(|w| man.render_version_section(w)));
    add(see_also(&name, pages).render().into_bytes());

    GeneratedFile {
        path: PathBuf::from("man").join(format!("{name}.1")),
        contents: out,
    }
}

/// What one of clap_mangen's section renderers writes.
fn rendered(render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Vec<u8> {
    let mut buf = Vec::new();
    render(&mut buf).expect("writing to a Vec cannot fail");
    buf
}

/// A rendering without roff's apostrophe preamble (which makes `'` print as a typewriter quote,
/// so `jq '…'` copies as typed).
fn without_preamble(rendered: &[u8]) -> &[u8] {
    let preamble = Roff::new().render();
    rendered
        .strip_prefix(preamble.as_bytes())
        .unwrap_or(rendered)
}

/// The flags of perftest, ibv_rc_pingpong and ibv_devinfo a subcommand accepts without showing
/// them in --help (nothing when it takes none).
fn other_tools_flags(subcommand: &str) -> Roff {
    let flags = manual::other_tools_flags(subcommand);
    let mut r = Roff::new();
    if flags.is_empty() {
        return r;
    }
    r.control("SH", ["FLAGS FROM OTHER TOOLS"]);
    r.text([roman(manual::other_tools_intro(subcommand))]);
    for (flag, meaning) in flags {
        r.control("TP", []);
        r.text([bold(flag)]);
        r.text([roman(meaning)]);
    }
    r
}

/// A section of (heading, text) items, such as SECURITY (who may use a subcommand's port) or
/// COMPATIBILITY (the other tools' wires it speaks); nothing when there are no items.
fn items_section(title: &str, items: &[(&str, &str)]) -> Roff {
    let mut r = Roff::new();
    if items.is_empty() {
        return r;
    }
    r.control("SH", [title]);
    for (heading, text) in items {
        r.control("TP", []);
        r.text([bold(*heading)]);
        r.text([roman(*text)]);
    }
    r
}

fn exit_status() -> Roff {
    let mut r = Roff::new();
    r.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in manual::EXIT_STATUS {
        r.control("TP", []);
        r.text([bold(code.to_string())]);
        r.text([roman(*meaning)]);
    }
    r
}

fn environment() -> Roff {
    let mut r = Roff::new();
    r.control("SH", ["ENVIRONMENT"]);
    for (var, meaning) in manual::ENVIRONMENT {
        r.control("TP", []);
        r.text([bold(*var)]);
        r.text([roman(*meaning)]);
    }
    r
}

/// EXAMPLES of a subcommand's page, or of rdmadiag.1 (`None`).
fn examples(subcommand: Option<&str>) -> Roff {
    let (list, name) = match subcommand {
        Some(sub) => (manual::examples(sub), sub),
        None => (manual::OVERVIEW_EXAMPLES, ""),
    };
    let mut r = Roff::new();
    r.control("SH", ["EXAMPLES"]);
    for ex in list {
        r.control("PP", []);
        r.text([roman(ex.what)]);
        r.control("PP", []);
        r.control("RS", ["4"]);
        r.control("nf", []);
        for line in ex.commands {
            r.text([roman(manual::expand(line, name))]);
        }
        r.control("fi", []);
        r.control("RE", []);
    }
    r
}

/// The other rdmadiag pages, then the tools rdmadiag stands beside.
fn see_also(this: &str, pages: &[String]) -> Roff {
    let mut refs: Vec<(&str, &str)> = pages
        .iter()
        .filter(|p| *p != this)
        .map(|p| (p.as_str(), "1"))
        .collect();
    refs.extend(manual::SEE_ALSO.iter().copied());
    let mut r = Roff::new();
    r.control("SH", ["SEE ALSO"]);
    let mut line = Vec::new();
    for (i, (name, section)) in refs.iter().enumerate() {
        let sep = if i + 1 < refs.len() { ", " } else { "" };
        line.push(bold(*name));
        line.push(roman(format!("({section}){sep}")));
    }
    r.text(line);
    r
}

/// Stands for the device names in the generated scripts until [`device_names`] replaces it.
const DEVICES: &str = "__RDMADIAG_DEVICES__";

/// bash, zsh and fish completions, from the same CLI the binary parses with (`help` included).
/// `-d`/`--device` completes the RDMA devices present (the names in /sys/class/infiniband, or in
/// $RDMADIAG_SYSFS_ROOT as the binary reads it), not file names.
fn completions() -> Vec<GeneratedFile> {
    [Shell::Bash, Shell::Zsh, Shell::Fish]
        .into_iter()
        .map(|shell| {
            let mut cmd = with_device_placeholder(command());
            let mut contents = Vec::new();
            clap_complete::generate(shell, &mut cmd, BIN, &mut contents);
            let text = String::from_utf8(contents).expect("the scripts are UTF-8");
            GeneratedFile {
                path: PathBuf::from("completions").join(shell.file_name(BIN)),
                contents: device_names(shell, &text).into_bytes(),
            }
        })
        .collect()
}

/// The CLI with [`DEVICES`] as the one possible value of every `--device`: each generator then
/// writes it exactly where that option's values are completed.
fn with_device_placeholder(mut cmd: Command) -> Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| s.get_arguments().any(|a| a.get_id() == "device"))
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |s| {
            s.mut_arg("device", |a| {
                a.value_parser(clap::builder::PossibleValuesParser::new([DEVICES]))
            })
        });
    }
    cmd
}

/// Each shell's script with the placeholder replaced by a listing of the devices present.
fn device_names(shell: Shell, script: &str) -> String {
    let (placeholder, list, prelude) = match shell {
        // No file names either when no device is present (the script's `-o default`).
        Shell::Bash => (
            format!("COMPREPLY=($(compgen -W \"{DEVICES}\""),
            "compopt +o default +o bashdefault 2>/dev/null\n                    \
             COMPREPLY=($(compgen -W \"$(ls \"${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}\" \
             2>/dev/null)\""
                .to_string(),
            "",
        ),
        // No colon in the action: _arguments splits its specs at colons.
        Shell::Zsh => (
            format!("({DEVICES})"),
            "{compadd -- $(ls \"${RDMADIAG_SYSFS_ROOT-/sys/class/infiniband}\" 2>/dev/null)}"
                .to_string(),
            "",
        ),
        Shell::Fish => (
            format!("\"{DEVICES}\\t''\""),
            "\"(__fish_rdmadiag_devices)\"".to_string(),
            "# The RDMA devices present, for -d/--device.\n\
             function __fish_rdmadiag_devices\n    \
             set -l root /sys/class/infiniband\n    \
             set -q RDMADIAG_SYSFS_ROOT; and set root $RDMADIAG_SYSFS_ROOT\n    \
             ls $root 2>/dev/null\n\
             end\n\n",
        ),
        other => panic!("no device completion for {other}"),
    };
    assert!(
        script.contains(&placeholder),
        "the {shell} script has no {placeholder}: clap_complete changed how it writes values"
    );
    let out = format!("{prelude}{}", script.replace(&placeholder, &list));
    assert!(
        !out.contains(DEVICES),
        "a {DEVICES} is left in the {shell} script"
    );
    out
}

/// rdmadiag-json(7): docs/json.md as a man page, so the schema is where the pages point.
fn json_page() -> GeneratedFile {
    let mut out = Roff::new().render();
    out.push_str(&format!(
        ".TH RDMADIAG-JSON 7 \"\" \"{BIN} {}\" \"rdmadiag manual\"\n",
        env!("CARGO_PKG_VERSION")
    ));
    out.push_str(
        ".SH NAME\nrdmadiag-json \\- the JSON documents rdmadiag prints with \\-\\-json\n",
    );
    out.push_str(&markdown_to_roff(include_str!("../../docs/json.md")));
    out.push_str(".SH \"SEE ALSO\"\n\\fBrdmadiag\\fR(1)\n");
    GeneratedFile {
        path: PathBuf::from("man").join("rdmadiag-json.7"),
        contents: out.into_bytes(),
    }
}

/// Text for roff: backslashes, hyphens and the few non-ASCII characters docs/json.md uses
/// escaped, `code` in bold.
fn roff_text(line: &str) -> String {
    let mut out = String::new();
    for (i, part) in line.split('`').enumerate() {
        let escaped = part
            .replace('\\', "\\e")
            .replace('-', "\\-")
            .replace('µ', "\\(mc")
            .replace('…', "...")
            .replace('→', "\\(->");
        if i % 2 == 1 {
            out.push_str(&format!("\\fB{escaped}\\fR"));
        } else {
            out.push_str(&escaped);
        }
    }
    // A line starting with a dot or an apostrophe would be a roff request.
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// The subset of Markdown docs/json.md uses: a title, `##` sections, paragraphs, ``` blocks and
/// tables (each row a tagged paragraph: the first cell, then the others).
fn markdown_to_roff(md: &str) -> String {
    let mut out = String::new();
    let mut lines = md.lines().peekable();
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, out: &mut String| {
        if !paragraph.is_empty() {
            out.push_str(".PP\n");
            for l in paragraph.drain(..) {
                out.push_str(&roff_text(l.trim()));
                out.push('\n');
            }
        }
    };
    while let Some(line) = lines.next() {
        if let Some(title) = line.strip_prefix("# ") {
            flush(&mut paragraph, &mut out);
            out.push_str(".SH DESCRIPTION\n");
            let _ = title; // the NAME section says it
        } else if let Some(head) = line.strip_prefix("## ") {
            flush(&mut paragraph, &mut out);
            let head = head.replace('`', "").to_uppercase();
            out.push_str(&format!(".SH \"{}\"\n", roff_text(&head)));
        } else if line.starts_with("```") {
            flush(&mut paragraph, &mut out);
            out.push_str(".PP\n.RS 4\n.nf\n");
            for code in lines.by_ref() {
                if code.starts_with("```") {
                    break;
                }
                out.push_str(&roff_text(code).replace("\\fB", "").replace("\\fR", ""));
                out.push('\n');
            }
            out.push_str(".fi\n.RE\n");
        } else if line.starts_with('|') {
            flush(&mut paragraph, &mut out);
            let mut rows = vec![line];
            while let Some(next) = lines.next_if(|l| l.starts_with('|')) {
                rows.push(next);
            }
            // The header row and the |---| row name the columns; each row after is an entry.
            for row in rows.iter().skip(2) {
                let cells: Vec<&str> = row.trim().trim_matches('|').split(" | ").collect();
                let (tag, rest) = cells.split_first().expect("a table row has cells");
                out.push_str(".TP\n");
                out.push_str(&roff_text(tag.trim()).replace("\\fR", "\\fB"));
                out.push_str("\\fR\n");
                let body: Vec<String> = rest.iter().map(|c| c.trim().to_string()).collect();
                let body = match body.as_slice() {
                    [kind, meaning] => format!("({kind}) {meaning}"),
                    other => other.join("; "),
                };
                out.push_str(&roff_text(&body));
                out.push('\n');
            }
        } else if line.trim().is_empty() {
            flush(&mut paragraph, &mut out);
        } else {
            paragraph.push(line);
        }
    }
    flush(&mut paragraph, &mut out);
    out
}
