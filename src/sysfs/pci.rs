//! What sysfs tells about the PCI function behind an RDMA device: its PCIe link and the links of
//! the bridges above it, its NUMA node, local CPUs and driver; and a netdev's speed and driver.
//! Every path starts from the class root (`RDMADIAG_SYSFS_ROOT`), so a fixture tree can stand in.

use super::read_trimmed;
use std::fs;
use std::path::{Path, PathBuf};

/// The sysfs mount a class root lives in: `/sys` for `/sys/class/infiniband`.
pub fn sysfs_mount(root: &Path) -> Option<&Path> {
    root.parent()?.parent()
}

/// Whether a directory name is a PCI address, `DDDD:BB:DD.F` (`0000:3b:00.0`).
pub fn is_pci_address(name: &str) -> bool {
    let b = name.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && hex(0..4)
        && hex(5..7)
        && hex(8..10)
        && hex(11..12)
}

/// The directory of the PCI function behind `dev` (its `device` link resolved), or None when it
/// has none: no `device` link (Soft-RoCE, siw), or one to a parent that is not a PCI function.
pub fn pci_function(root: &Path, dev: &str) -> Option<PathBuf> {
    let dir = fs::canonicalize(root.join(dev).join("device")).ok()?;
    is_pci_address(dir.file_name()?.to_str()?).then_some(dir)
}

/// The PCI functions above `function` up to the root port, nearest first (the host bridge,
/// `pci0000:3a`, ends the walk: it is no PCI function).
pub fn upstream(function: &Path) -> Vec<PathBuf> {
    function
        .ancestors()
        .skip(1)
        .take_while(|d| {
            d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_pci_address)
        })
        .map(Path::to_path_buf)
        .collect()
}

/// `current_link_speed` and friends of one PCI function, parsed; None where a file is absent
/// or says "Unknown".
#[derive(Debug, Clone, PartialEq)]
pub struct LinkAttrs {
    pub address: String,
    pub speed_gts: Option<f64>,
    pub width: Option<u32>,
    pub max_speed_gts: Option<f64>,
    pub max_width: Option<u32>,
}

/// The link attributes of the PCI function at `dir`, or None when it has none of them
/// (conventional PCI, a virtual machine's root bus).
pub fn link_attrs(dir: &Path) -> Option<LinkAttrs> {
    let text = |name: &str| read_trimmed(&dir.join(name));
    let files = [
        "current_link_speed",
        "current_link_width",
        "max_link_speed",
        "max_link_width",
    ]
    .map(text);
    if files.iter().all(Option::is_none) {
        return None;
    }
    let [speed, width, max_speed, max_width] = files;
    Some(LinkAttrs {
        address: dir.file_name()?.to_string_lossy().into_owned(),
        speed_gts: speed.as_deref().and_then(parse_link_speed),
        width: width.as_deref().and_then(parse_link_width),
        max_speed_gts: max_speed.as_deref().and_then(parse_link_speed),
        max_width: max_width.as_deref().and_then(parse_link_width),
    })
}

/// A link speed as sysfs writes it ("16.0 GT/s PCIe", "8.0 GT/s", "2.5 GT/s"), in GT/s; None
/// for "Unknown" (a bridge whose link is down or not reported).
pub fn parse_link_speed(text: &str) -> Option<f64> {
    let gts: f64 = text.split_whitespace().next()?.parse().ok()?;
    (gts > 0.0 && text.contains("GT/s")).then_some(gts)
}

/// A link width as sysfs writes it ("16", or "x16" on some kernels); None for "Unknown" or 0.
pub fn parse_link_width(text: &str) -> Option<u32> {
    let t = text.trim();
    let n: u32 = t.strip_prefix(['x', 'X']).unwrap_or(t).parse().ok()?;
    (n > 0).then_some(n)
}

/// The NUMA node of a PCI function (`numa_node`); None for -1 (no node) or unreadable.
pub fn numa_node(function: &Path) -> Option<u32> {
    let n: i64 = read_trimmed(&function.join("numa_node"))?.parse().ok()?;
    u32::try_from(n).ok()
}

/// The CPUs local to a PCI function (`local_cpulist`, "0-15,32-47").
pub fn local_cpulist(function: &Path) -> Option<String> {
    read_trimmed(&function.join("local_cpulist")).filter(|s| !s.is_empty())
}

/// The name of the driver bound to a device directory (the basename of its `driver` link).
pub fn driver(dir: &Path) -> Option<String> {
    let target = fs::read_link(dir.join("driver")).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// A netdev's speed in Mb/s (`/sys/class/net/NETDEV/speed`); None when unreadable or -1 (the
/// link is down, or the driver does not say).
pub fn netdev_speed_mbps(root: &Path, netdev: &str) -> Option<u32> {
    let net = root.parent()?.join("net").join(netdev);
    let n: i64 = read_trimmed(&net.join("speed"))?.parse().ok()?;
    u32::try_from(n).ok().filter(|&s| s > 0)
}

/// The driver of a netdev's device (`/sys/class/net/NETDEV/device/driver`).
pub fn netdev_driver(root: &Path, netdev: &str) -> Option<String> {
    driver(&root.parent()?.join("net").join(netdev).join("device"))
}

/// The CPUs of NUMA node `node` (`/sys/devices/system/node/nodeN/cpulist`), as text.
pub fn node_cpulist(root: &Path, node: u32) -> Option<String> {
    let dir = sysfs_mount(root)?.join(format!("devices/system/node/node{node}"));
    read_trimmed(&dir.join("cpulist"))
}

/// A CPU list as the kernel writes it and taskset takes it ("0-3,8,10-11"), every CPU in order;
/// an empty list is empty. Errors name the part that is not a CPU or a range.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("'{part}' is not a CPU number or range (e.g. 0-3,8)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a || b - a > 65_535 {
                    return Err(format!("'{part}' is not a CPU range (e.g. 0-3)"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_speeds_widths_and_cpu_lists_parse_as_the_kernel_writes_them() {
        assert!(is_pci_address("0000:3b:00.0"));
        assert!(is_pci_address("0001:af:1f.7"));
        assert!(!is_pci_address("pci0000:3a"));
        assert!(!is_pci_address("device"));
        assert!(!is_pci_address("0000:3b:00:0"));
        assert_eq!(parse_link_speed("16.0 GT/s PCIe\n"), Some(16.0));
        assert_eq!(parse_link_speed("8.0 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed("2.5 GT/s"), Some(2.5));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("Unknown speed"), None);
        assert_eq!(parse_link_width("16\n"), Some(16));
        assert_eq!(parse_link_width("x8"), Some(8));
        assert_eq!(parse_link_width("0"), None);
        assert_eq!(parse_link_width("Unknown"), None);
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("5").unwrap(), [5]);
        assert!(parse_cpu_list("").unwrap().is_empty());
        assert!(parse_cpu_list("3-1").unwrap_err().contains("'3-1'"));
        assert!(parse_cpu_list("a,1").unwrap_err().contains("'a'"));
    }

    #[test]
    fn the_walk_up_stops_at_the_host_bridge() {
        let p = Path::new(
            "/sys/devices/pci0000:38/0000:38:00.0/0000:39:00.0/0000:3a:00.0/0000:3b:00.0",
        );
        let up: Vec<String> = upstream(p)
            .iter()
            .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(up, ["0000:3a:00.0", "0000:39:00.0", "0000:38:00.0"]);
    }

    #[test]
    fn unknown_links_and_functions_without_link_files_read_as_none() {
        let root = std::env::temp_dir().join(format!("rdmadiag-pci-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let bridge = root.join("devices/pci0000:00/0000:00:1c.0");
        let function = bridge.join("0000:01:00.0");
        fs::create_dir_all(&function).unwrap();
        for (name, text) in [
            ("current_link_speed", "Unknown\n"),
            ("current_link_width", "0\n"),
            ("max_link_speed", "8.0 GT/s PCIe\n"),
            ("max_link_width", "4\n"),
        ] {
            fs::write(bridge.join(name), text).unwrap();
        }
        fs::write(function.join("numa_node"), "-1\n").unwrap();
        let class = root.join("class/infiniband/mlx4_0");
        fs::create_dir_all(&class).unwrap();
        std::os::unix::fs::symlink(&function, class.join("device")).unwrap();
        let class_root = root.join("class/infiniband");
        let f = pci_function(&class_root, "mlx4_0").expect("a PCI function");
        assert!(f.ends_with("0000:01:00.0"), "{f:?}");
        assert_eq!(link_attrs(&f), None, "no link files: conventional PCI");
        assert_eq!(numa_node(&f), None, "-1 is no node");
        assert_eq!(driver(&f), None);
        let up = upstream(&f);
        assert_eq!(up.len(), 1);
        let b = link_attrs(&up[0]).unwrap();
        assert_eq!((b.speed_gts, b.width), (None, None), "{b:?}");
        assert_eq!((b.max_speed_gts, b.max_width), (Some(8.0), Some(4)));
        assert_eq!(pci_function(&class_root, "rxe0"), None);
        assert_eq!(sysfs_mount(&class_root), Some(root.as_path()));
        fs::remove_dir_all(root).unwrap();
    }
}
