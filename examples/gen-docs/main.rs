//! Writes man/ and completions/ from the clap definition (src/cli/) and src/manual/.
//!
//! Run `cargo run --example gen-docs` after changing the CLI or the manual text and commit the
//! result; tests/docs.rs fails while the committed files are stale. Files in man/ or completions/
//! that are no longer generated (a removed subcommand's page) are deleted.

mod generate;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = generate::all();
    let wanted: BTreeSet<_> = files.iter().map(|f| f.path.clone()).collect();

    for dir in generate::DIRS {
        fs::create_dir_all(root.join(dir))?;
        for entry in fs::read_dir(root.join(dir))? {
            let rel = Path::new(dir).join(entry?.file_name());
            if !wanted.contains(&rel) {
                fs::remove_file(root.join(&rel))?;
                println!("removed {}", rel.display());
            }
        }
    }
    let mut changed = 0;
    for f in &files {
        let path = root.join(&f.path);
        if fs::read(&path).ok().as_deref() != Some(&f.contents[..]) {
            fs::write(&path, &f.contents)?;
            println!("wrote {}", f.path.display());
            changed += 1;
        }
    }
    println!(
        "gen-docs: {} files in {}, {changed} changed",
        files.len(),
        generate::DIRS.join("/ and ") + "/"
    );
    Ok(())
}
