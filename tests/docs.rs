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
    let fabric = page("rdmadiag-fabric");
    assert!(
        fabric.contains("ENCODE_HOST") && fabric.contains("What munge cannot tell"),
        "the fabric page says what binds a munge credential to its rank, and what it cannot"
    );
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
        // Every subcommand that opens a port says who may use it and what an open one gives up.
        let listens = sub
            .get_arguments()
            .any(|a| matches!(a.get_id().as_str(), "key_file" | "persist" | "insecure"));
        assert_eq!(
            text.contains(".SH SECURITY"),
            listens,
            "rdmadiag-{}.1: SECURITY section iff it takes --key-file, --persist or --insecure",
            sub.get_name()
        );
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

#[test]
fn the_json_schema_is_a_man_page_every_page_points_at() {
    let files = generate::all();
    let text = |path: &str| -> String {
        let f = files.iter().find(|f| f.path == Path::new(path));
        String::from_utf8(f.unwrap_or_else(|| panic!("no {path}")).contents.clone()).unwrap()
    };
    let json = text("man/rdmadiag-json.7");
    assert!(
        json.starts_with(".ie") || json.contains(".TH RDMADIAG-JSON 7"),
        "{json}"
    );
    // Every section of docs/json.md is a section of the page, and its fields are there.
    let doc = fs::read_to_string(root().join("docs/json.md")).unwrap();
    for head in doc.lines().filter_map(|l| l.strip_prefix("## ")) {
        let head = head.replace('`', "").to_uppercase().replace('-', "\\-");
        assert!(
            json.contains(&format!(".SH \"{head}\"")),
            "no section {head}"
        );
    }
    for field in [
        "schema_version",
        "bw_avg_gbps",
        "thresholds",
        "phase",
        "peer",
    ] {
        assert!(
            json.contains(&format!("\\fB{field}")),
            "{field} not in rdmadiag-json.7"
        );
    }
    for f in files
        .iter()
        .filter(|f| f.path.extension().is_some_and(|e| e == "1"))
    {
        let page = String::from_utf8(f.contents.clone()).unwrap();
        let see_also = page.split(".SH \"SEE ALSO\"").nth(1).unwrap_or_default();
        assert!(
            see_also.contains("rdmadiag\\-json\\fR(7)"),
            "{} does not point at rdmadiag-json(7)",
            f.path.display()
        );
        assert!(
            !page.contains("docs/json.md"),
            "{} names a source file",
            f.path.display()
        );
    }
}

/// What the bash completion offers for `rdmadiag WORDS... <TAB>` with RDMADIAG_SYSFS_ROOT at
/// `sysfs`, run from `cwd`.
fn bash_completion(words: &[&str], sysfs: &Path, cwd: &Path) -> Vec<String> {
    let script = root().join("completions/rdmadiag.bash");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let prog = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\n_rdmadiag rdmadiag '{}' '{}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(prog)
        .current_dir(cwd)
        .env("RDMADIAG_SYSFS_ROOT", sysfs)
        .output()
        .expect("run bash");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn bash_completes_device_names_not_files() {
    let tmp = std::env::temp_dir().join(format!("rdmadiag-complete-{}", std::process::id()));
    let (sysfs, cwd) = (tmp.join("class/infiniband"), tmp.join("cwd"));
    for d in [sysfs.join("mlx5_0"), sysfs.join("rxe0"), cwd.clone()] {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(cwd.join("a_file_here"), "").unwrap();
    for words in [
        &["rdmadiag", "bw", "-d", ""][..],
        &["rdmadiag", "pingpong", "10.0.0.1", "--device", ""],
        &["rdmadiag", "ports", "-d", ""],
        &["rdmadiag", "devices", "-d", ""],
    ] {
        assert_eq!(
            bash_completion(words, &sysfs, &cwd),
            ["mlx5_0", "rxe0"],
            "{words:?}"
        );
    }
    assert_eq!(
        bash_completion(&["rdmadiag", "lat", "-d", "r"], &sysfs, &cwd),
        ["rxe0"]
    );
    // No device at all: nothing, not the files of the current directory.
    let none = tmp.join("empty");
    fs::create_dir_all(&none).unwrap();
    assert!(bash_completion(&["rdmadiag", "bw", "-d", ""], &none, &cwd).is_empty());
    // Other options still complete as before (the flags of bw).
    let flags = bash_completion(&["rdmadiag", "bw", "--expect-"], &sysfs, &cwd);
    assert!(flags.contains(&"--expect-bw".to_string()), "{flags:?}");
    fs::remove_dir_all(tmp).unwrap();
}
