//! What the kernel exposes about RDMA devices under /sys/class/infiniband (counters, GID attributes).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Root of the RDMA device tree in sysfs (overridable for tests).
pub fn class_root() -> PathBuf {
    std::env::var_os("RDMADIAG_SYSFS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys/class/infiniband"))
}

/// Names of the RDMA devices the kernel has, or None when it has no RDMA core at all.
pub fn kernel_devices(root: &Path) -> Option<Vec<String>> {
    let rd = fs::read_dir(root).ok()?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Some(names)
}

fn port_dir(root: &Path, dev: &str, port: u8) -> PathBuf {
    root.join(dev).join("ports").join(port.to_string())
}

fn read_trimmed(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// A device attribute file such as `board_id` or `fw_ver`.
pub fn device_attr(root: &Path, dev: &str, name: &str) -> Option<String> {
    read_trimmed(&root.join(dev).join(name)).filter(|s| !s.is_empty())
}

/// The netdev of GID `index` (`gid_attrs/ndevs/N`); absent on InfiniBand.
pub fn gid_netdev(root: &Path, dev: &str, port: u8, index: u32) -> Option<String> {
    read_trimmed(
        &port_dir(root, dev, port)
            .join("gid_attrs/ndevs")
            .join(index.to_string()),
    )
    .filter(|s| !s.is_empty())
}

/// The type text of GID `index` (`gid_attrs/types/N`: "IB/RoCE v1" or "RoCE v2").
pub fn gid_type_text(root: &Path, dev: &str, port: u8, index: u32) -> Option<String> {
    read_trimmed(
        &port_dir(root, dev, port)
            .join("gid_attrs/types")
            .join(index.to_string()),
    )
}

/// All counters in `counters/` or `hw_counters/` of a port, by name. Files that do not read as
/// an integer (some devices refuse reads of unsupported counters) are left out.
pub fn port_counters(root: &Path, dev: &str, port: u8, group: &str) -> BTreeMap<String, u64> {
    let dir = port_dir(root, dev, port).join(group);
    let mut out = BTreeMap::new();
    let Ok(rd) = fs::read_dir(&dir) else {
        return out;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "lifespan" {
            continue; // a setting of hw_counters, not a counter
        }
        if let Some(v) = read_trimmed(&e.path()).and_then(|s| s.parse::<u64>().ok()) {
            out.insert(name, v);
        }
    }
    out
}

/// The port numbers of `dev` (`ports/1`, `ports/2`...), in order.
pub fn port_numbers(root: &Path, dev: &str) -> Vec<u8> {
    let Ok(rd) = fs::read_dir(root.join(dev).join("ports")) else {
        return Vec::new();
    };
    let mut ports: Vec<u8> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ports.sort();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tree() -> PathBuf {
        let root = std::env::temp_dir().join(format!("rdmadiag-sysfs-{}", std::process::id()));
        let p = root.join("rxe0/ports/1");
        fs::create_dir_all(p.join("counters")).unwrap();
        fs::create_dir_all(p.join("hw_counters")).unwrap();
        fs::create_dir_all(p.join("gid_attrs/ndevs")).unwrap();
        fs::create_dir_all(p.join("gid_attrs/types")).unwrap();
        fs::write(p.join("counters/port_rcv_errors"), "7\n").unwrap();
        fs::write(p.join("counters/port_xmit_data"), "1234\n").unwrap();
        fs::write(p.join("counters/unreadable"), "N/A\n").unwrap();
        fs::write(p.join("hw_counters/lifespan"), "10\n").unwrap();
        fs::write(p.join("hw_counters/rcvd_pkts"), "99\n").unwrap();
        fs::write(p.join("gid_attrs/ndevs/1"), "dummy0\n").unwrap();
        fs::write(p.join("gid_attrs/types/1"), "RoCE v2\n").unwrap();
        fs::write(root.join("rxe0/board_id"), "\n").unwrap();
        root
    }

    #[test]
    fn reads_counters_and_gid_attrs() {
        let root = fake_tree();
        let c = port_counters(&root, "rxe0", 1, "counters");
        assert_eq!(c.get("port_rcv_errors"), Some(&7));
        assert_eq!(c.get("port_xmit_data"), Some(&1234));
        assert!(!c.contains_key("unreadable"));
        let hw = port_counters(&root, "rxe0", 1, "hw_counters");
        assert_eq!(hw.len(), 1);
        assert_eq!(gid_netdev(&root, "rxe0", 1, 1).as_deref(), Some("dummy0"));
        assert_eq!(gid_netdev(&root, "rxe0", 1, 2), None);
        assert_eq!(
            gid_type_text(&root, "rxe0", 1, 1).as_deref(),
            Some("RoCE v2")
        );
        assert_eq!(device_attr(&root, "rxe0", "board_id"), None);
        assert_eq!(kernel_devices(&root), Some(vec!["rxe0".to_string()]));
        assert_eq!(kernel_devices(&root.join("nope")), None);
        fs::create_dir_all(root.join("rxe0/ports/2")).unwrap();
        assert_eq!(port_numbers(&root, "rxe0"), [1, 2]);
        assert!(port_numbers(&root, "nope").is_empty());
        fs::remove_dir_all(root).unwrap();
    }
}
