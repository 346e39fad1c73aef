//! Writing a report to a file atomically: a reader (node_exporter's textfile collector) sees
//! the old file or the new one, never half of one.

use anyhow::{Context as _, Result};
use std::fs;
use std::io::Write as _;
use std::path::Path;

/// Write `text` to `path` through a temporary file in the same directory (named so that the
/// textfile collector, which reads `*.prom`, skips it), flushed to disk, then renamed over it.
pub fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("--output {}: not a file name", path.display()))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_is_left() {
        let dir = std::env::temp_dir().join(format!("rdmadiag-output-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rdmadiag.prom");
        fs::write(&path, "old\n").unwrap();
        write_atomically(&path, "new\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
        let left: Vec<_> = fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        let e = write_atomically(&dir.join("missing/x.prom"), "x").unwrap_err();
        assert!(format!("{e:#}").contains("cannot write"), "{e:#}");
        fs::remove_dir_all(dir).unwrap();
    }
}
