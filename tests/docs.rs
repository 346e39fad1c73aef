//! man/ and completions/ are generated from the CLI (examples/gen-docs) and committed: this test
//! regenerates them in memory and fails when a committed file differs, is missing or is left over.

#[path = "../examples/gen-docs/generate.rs"]
mod generate;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const REGENERATE: &str = "cargo run --example gen-docs";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn man_pages_and_completions_are_current() {
    let files = generate::all();
    let mut problems = Vec::new();
    for f in &files {
        match fs::read(root().join(&f.path)) {
            Ok(on_disk) if on_disk == f.contents => {}
            Ok(_) => problems.push(format!("{} is stale", f.path.display())),
            Err(e) => problems.push(format!("{} is missing ({e})", f.path.display())),
        }
    }
    let wanted: BTreeSet<&PathBuf> = files.iter().map(|f| &f.path).collect();
    for dir in generate::DIRS {
        for entry in fs::read_dir(root().join(dir)).into_iter().flatten() {
            let rel = Path::new(dir).join(entry.unwrap().file_name());
            if !wanted.contains(&rel) {
                problems.push(format!("{} is no longer generated", rel.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "generated docs out of date: {}; regenerate with `{REGENERATE}` and commit man/ and completions/",
        problems.join(", ")
    );
}

#[test]
fn generation_is_reproducible() {
    let a = generate::all();
    let b = generate::all();
    assert_eq!(a.len(), b.len());
    // The git revision in `--version` must not leak in: the files would change with every commit.
    let rev = rdmadiag::VERSION
        .split_once(" (")
        .map(|(_, r)| r.trim_end_matches(')'))
        .unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert!(
            x.path == y.path && x.contents == y.contents,
            "{}",
            x.path.display()
        );
        let text = String::from_utf8(x.contents.clone()).unwrap();
        assert!(
            !text.contains(rev),
            "{} contains the git revision {rev}",
            x.path.display()
        );
    }
}

#[test]
fn every_subcommand_has_a_page_with_the_hand_written_sections() {
    use clap::CommandFactory;
    let files = generate::all();
    let page = |name: &str| -> String {
        let path = PathBuf::from("man").join(format!("{name}.1"));
        let f = files.iter().find(|f| f.path == path);
        String::from_utf8(
            f.unwrap_or_else(|| panic!("no {}", path.display()))
                .contents
                .clone(),
        )
        .unwrap()
    };
    let root_page = page("rdmadiag");
    assert!(root_page.contains(".SH ENVIRONMENT") && root_page.contains("NO_COLOR"));
    for sub in rdmadiag::cli::Cli::command().get_subcommands() {
        let text = page(&format!("rdmadiag-{}", sub.get_name()));
        for section in [".SH \"EXIT STATUS\"", ".SH EXAMPLES", ".SH \"SEE ALSO\""] {
            assert!(
                text.contains(section),
                "rdmadiag-{}.1 lacks {section}",
                sub.get_name()
            );
        }
        assert!(text.contains(&format!("rdmadiag {}", sub.get_name())));
        assert!(root_page.contains(&format!("rdmadiag\\-{}(1)", sub.get_name())));
    }
    for shell_file in ["rdmadiag.bash", "_rdmadiag", "rdmadiag.fish"] {
        let path = PathBuf::from("completions").join(shell_file);
        assert!(
            files.iter().any(|f| f.path == path),
            "no {}",
            path.display()
        );
    }
}
