//! Renders man/ and completions/ from the clap definition (src/cli.rs) and the hand-written
//! sections (src/manual.rs). Shared by examples/gen-docs (writes the files) and tests/docs.rs
//! (fails when the committed files differ). Only the sources decide the output: the version is
//! the crate's (no git revision), and the pages carry no date.

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

/// One page: clap_mangen's sections, then EXIT STATUS, ENVIRONMENT (rdmadiag.1 only), EXAMPLES,
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
    add(exit_status().render().into_bytes());
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

/// bash, zsh and fish completions, from the same CLI the binary parses with (`help` included).
fn completions() -> Vec<GeneratedFile> {
    [Shell::Bash, Shell::Zsh, Shell::Fish]
        .into_iter()
        .map(|shell| {
            let mut cmd = command();
            let mut contents = Vec::new();
            clap_complete::generate(shell, &mut cmd, BIN, &mut contents);
            GeneratedFile {
                path: PathBuf::from("completions").join(shell.file_name(BIN)),
                contents,
            }
        })
        .collect()
}
