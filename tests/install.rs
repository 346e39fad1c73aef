//! scripts/install into a temporary PREFIX, with this build's binary (RDMADIAG_BIN) so the test
//! does not build a release binary: every file lands where the shells and man look for it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rdmadiag");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed ({:?}):\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn install_puts_binary_man_pages_and_completions_under_prefix() {
    let prefix = std::env::temp_dir().join(format!("rdmadiag-install-{}", std::process::id()));
    let _ = fs::remove_dir_all(&prefix);
    run(Command::new(root().join("scripts/install"))
        .arg(&prefix)
        .env("RDMADIAG_BIN", BIN));

    let mut expected: Vec<(PathBuf, PathBuf)> = vec![
        (
            "completions/rdmadiag.bash",
            "share/bash-completion/completions/rdmadiag",
        ),
        (
            "completions/_rdmadiag",
            "share/zsh/site-functions/_rdmadiag",
        ),
        (
            "completions/rdmadiag.fish",
            "share/fish/vendor_completions.d/rdmadiag.fish",
        ),
    ]
    .into_iter()
    .map(|(from, to)| (root().join(from), prefix.join(to)))
    .collect();
    let mut pages = 0;
    for entry in fs::read_dir(root().join("man")).unwrap() {
        let name = entry.unwrap().file_name();
        // Each page in the directory of its section: rdmadiag.1 in man1, rdmadiag-json.7 in man7.
        let section = Path::new(&name)
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_else(|| panic!("man/{name:?} has no section"))
            .to_string();
        expected.push((
            root().join("man").join(&name),
            prefix.join(format!("share/man/man{section}")).join(&name),
        ));
        pages += 1;
    }
    assert!(pages >= 4, "man/ holds {pages} pages");
    assert!(
        expected
            .iter()
            .any(|(_, to)| to.ends_with("share/man/man7/rdmadiag-json.7")),
        "the JSON schema is installed as rdmadiag-json(7)"
    );
    for (from, to) in &expected {
        let installed = fs::read(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
        assert_eq!(
            installed,
            fs::read(from).unwrap(),
            "{} differs from {}",
            to.display(),
            from.display()
        );
    }

    let installed_bin = prefix.join("bin/rdmadiag");
    assert_eq!(fs::read(&installed_bin).unwrap(), fs::read(BIN).unwrap());
    let version = run(Command::new(&installed_bin).arg("--version"));
    assert!(
        version.starts_with(&format!("rdmadiag {}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    fs::remove_dir_all(&prefix).unwrap();
}

#[test]
fn install_refuses_a_missing_binary_in_one_line() {
    let prefix = std::env::temp_dir().join(format!("rdmadiag-noinstall-{}", std::process::id()));
    let o = Command::new(root().join("scripts/install"))
        .arg(&prefix)
        .env("RDMADIAG_BIN", "/nonexistent/rdmadiag")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("RDMADIAG_BIN=/nonexistent/rdmadiag"), "{err}");
    assert!(!prefix.exists(), "nothing installed");
}
