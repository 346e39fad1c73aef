//! What the kernel exposes about RDMA devices under /sys/class/infiniband, read as text and
//! parsed into the IB vocabulary: device and port attributes, GID and P_Key tables, counters.

use crate::ib::{Gid, GidEntry, GidType, LinkLayer};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

pub mod pci;

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

/// A port's directory (`DEV/ports/N`).
pub fn port_dir(root: &Path, dev: &str, port: u8) -> PathBuf {
    root.join(dev).join("ports").join(port.to_string())
}

fn read_trimmed(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// A device attribute file such as `board_id` or `fw_ver`.
pub fn device_attr(root: &Path, dev: &str, name: &str) -> Option<String> {
    read_trimmed(&root.join(dev).join(name)).filter(|s| !s.is_empty())
}

/// The numbers of a device's ports (`ports/N`), in order.
pub fn port_numbers(root: &Path, dev: &str) -> Vec<u8> {
    numbered_entries(&root.join(dev).join("ports"))
        .into_iter()
        .filter_map(|n| u8::try_from(n).ok())
        .collect()
}

/// The numeric names in a directory (`gids/`, `pkeys/`, `ports/`), in order.
fn numbered_entries(dir: &Path) -> Vec<u32> {
    let mut out: Vec<u32> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort_unstable();
    out
}

/// The number before the colon of `state`, `phys_state` and `node_type` ("4: ACTIVE").
pub fn leading_number(text: &str) -> Option<u32> {
    text.split(':').next()?.trim().parse().ok()
}

/// A hexadecimal attribute such as `lid` ("0x1a"), or a decimal one such as `lid_mask_count`.
pub fn parse_number(text: &str) -> Option<u32> {
    match text.trim().strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.trim().parse().ok(),
    }
}

/// `link_layer`: "InfiniBand", "Ethernet", or "Unknown" for a driver that leaves it unspecified,
/// which libibverbs reports as 0 and rdmadiag, like ibv_devinfo, takes as InfiniBand.
pub fn parse_link_layer(text: &str) -> Option<LinkLayer> {
    match text.trim() {
        "InfiniBand" => Some(LinkLayer::InfiniBand),
        "Ethernet" => Some(LinkLayer::Ethernet),
        "Unknown" => Some(LinkLayer::from_raw(0)),
        _ => None,
    }
}

/// A GUID as sysfs prints it ("5009:5fff:fe18:7007"), in host order.
pub fn parse_guid(text: &str) -> Option<u64> {
    let groups: Vec<&str> = text.trim().split(':').collect();
    if groups.len() != 4 || groups.iter().any(|g| g.len() != 4) {
        return None;
    }
    u64::from_str_radix(&groups.concat(), 16).ok()
}

/// Lanes and per-lane speed name from `rate` ("100 Gb/sec (4X EDR)" gives (4, "EDR")).
pub fn parse_rate(text: &str) -> Option<(u32, String)> {
    let inner = text.trim().split_once('(')?.1.strip_suffix(')')?;
    let (width, speed) = inner.split_once(' ')?;
    let lanes = width.strip_suffix('X')?.parse().ok()?;
    Some((lanes, speed.trim().to_string()))
}

/// The PCI vendor and device ids of the device behind an RDMA device (`device/vendor`,
/// `device/device`); None for a device with no PCI parent (Soft-RoCE, siw).
pub fn pci_ids(root: &Path, dev: &str) -> Option<(u16, u16)> {
    let id = |name: &str| {
        let text = read_trimmed(&root.join(dev).join("device").join(name))?;
        u16::from_str_radix(text.strip_prefix("0x")?, 16).ok()
    };
    Some((id("vendor")?, id("device")?))
}

/// The MTU of a network device (`/sys/class/net/NETDEV/mtu`, next to the RDMA class).
pub fn netdev_mtu(root: &Path, netdev: &str) -> Option<u32> {
    let net = root.parent()?.join("net").join(netdev).join("mtu");
    read_trimmed(&net)?.parse().ok()
}

/// The non-zero P_Keys of a port (`pkeys/N`), in index order.
pub fn pkeys(root: &Path, dev: &str, port: u8) -> Vec<u16> {
    let dir = port_dir(root, dev, port).join("pkeys");
    numbered_entries(&dir)
        .into_iter()
        .filter_map(|i| read_trimmed(&dir.join(i.to_string())))
        .filter_map(|t| u16::try_from(parse_number(&t)?).ok())
        .filter(|&k| k != 0)
        .collect()
}

/// Every valid (non-zero) GID of a port, with its type and netdev from `gid_attrs/`.
pub fn gid_table(root: &Path, dev: &str, port: u8, link_layer: LinkLayer) -> Vec<GidEntry> {
    let dir = port_dir(root, dev, port).join("gids");
    // RoCE ports have hundreds of mostly empty entries: one path and one buffer for them all.
    let mut path = dir.clone();
    let mut text = String::with_capacity(48);
    let mut out = Vec::new();
    for index in numbered_entries(&dir) {
        path.push(index.to_string());
        text.clear();
        let read = fs::File::open(&path).and_then(|mut f| f.read_to_string(&mut text));
        path.pop();
        let Some(gid) = read.ok().and_then(|_| text.trim().parse::<Gid>().ok()) else {
            continue;
        };
        if gid.is_zero() {
            continue;
        }
        out.push(gid_entry(root, dev, port, index, gid, link_layer));
    }
    out
}

/// The netdev of GID `index` (`gid_attrs/ndevs/N`); absent on InfiniBand.
/// GID `index` of `dev`'s `port`, with its type and network device as sysfs tells them.
pub fn gid_entry(
    root: &Path,
    dev: &str,
    port: u8,
    index: u32,
    gid: Gid,
    link_layer: LinkLayer,
) -> GidEntry {
    GidEntry {
        port,
        index,
        gid,
        gid_type: gid_type(root, dev, port, index, link_layer),
        netdev: gid_netdev(root, dev, port, index),
    }
}

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

/// The type of GID `index`; where `gid_attrs/types` is missing or unreadable (kernels before
/// 4.9), RoCE v1 on Ethernet and IB otherwise.
pub fn gid_type(root: &Path, dev: &str, port: u8, index: u32, link_layer: LinkLayer) -> GidType {
    gid_type_text(root, dev, port, index)
        .and_then(|t| GidType::from_sysfs(&t, link_layer))
        .unwrap_or(match link_layer {
            LinkLayer::Ethernet => GidType::RoceV1,
            _ => GidType::Ib,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tree(name: &str) -> PathBuf {
        let dir = format!("rdmadiag-sysfs-{name}-{}", std::process::id());
        let root = std::env::temp_dir().join(dir);
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
        let root = fake_tree("counters");
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

    #[test]
    fn parses_attributes_as_the_kernel_writes_them() {
        assert_eq!(leading_number("4: ACTIVE"), Some(4));
        assert_eq!(leading_number("5: LinkUp\n"), Some(5));
        assert_eq!(leading_number("ACTIVE"), None);
        assert_eq!(parse_number("0x1a"), Some(0x1a));
        assert_eq!(parse_number("0\n"), Some(0));
        assert_eq!(parse_number("0xzz"), None);
        assert_eq!(
            parse_guid("5009:5fff:fe18:7007\n"),
            Some(0x5009_5fff_fe18_7007)
        );
        assert_eq!(parse_guid("5009:5fff:fe18"), None);
        assert_eq!(parse_guid("50095fff:fe18:7007:0000"), None);
        assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)"), Some((1, "SDR".into())));
        assert_eq!(parse_rate("100 Gb/sec (4X EDR)\n"), Some((4, "EDR".into())));
        assert_eq!(
            parse_rate("53.125 Gb/sec (1X HDR)"),
            Some((1, "HDR".into()))
        );
        assert_eq!(parse_rate("garbage"), None);
        assert_eq!(parse_link_layer("Ethernet\n"), Some(LinkLayer::Ethernet));
        assert_eq!(parse_link_layer("Unknown"), Some(LinkLayer::InfiniBand));
        assert_eq!(parse_link_layer("Token Ring"), None);
    }

    #[test]
    fn reads_gid_and_pkey_tables_and_pci_ids() {
        let root = fake_tree("tables");
        let p = root.join("rxe0/ports/1");
        fs::create_dir_all(p.join("gids")).unwrap();
        fs::create_dir_all(p.join("pkeys")).unwrap();
        fs::write(
            p.join("gids/0"),
            "fe80:0000:0000:0000:5009:5fff:fe18:7007\n",
        )
        .unwrap();
        fs::write(
            p.join("gids/1"),
            "0000:0000:0000:0000:0000:ffff:0a4d:0001\n",
        )
        .unwrap();
        fs::write(
            p.join("gids/10"),
            "0000:0000:0000:0000:0000:0000:0000:0000\n",
        )
        .unwrap();
        fs::write(p.join("pkeys/0"), "0xffff\n").unwrap();
        fs::write(p.join("pkeys/1"), "0x0000\n").unwrap();
        let gids = gid_table(&root, "rxe0", 1, LinkLayer::Ethernet);
        assert_eq!(gids.len(), 2, "{gids:?}");
        assert_eq!(gids[1].gid.to_string(), "::ffff:10.77.0.1");
        assert_eq!(gids[1].gid_type, GidType::RoceV2);
        assert_eq!(gids[1].netdev.as_deref(), Some("dummy0"));
        // No gid_attrs/types/0: RoCE v1 on Ethernet, as rdma-core assumes on old kernels.
        assert_eq!(gids[0].gid_type, GidType::RoceV1);
        assert_eq!(pkeys(&root, "rxe0", 1), [0xffff]);
        assert_eq!(port_numbers(&root, "rxe0"), [1]);
        assert_eq!(pci_ids(&root, "rxe0"), None);
        fs::create_dir_all(root.join("rxe0/device")).unwrap();
        fs::write(root.join("rxe0/device/vendor"), "0x15b3\n").unwrap();
        fs::write(root.join("rxe0/device/device"), "0x101b\n").unwrap();
        assert_eq!(pci_ids(&root, "rxe0"), Some((0x15b3, 0x101b)));
        fs::remove_dir_all(root).unwrap();
    }
}
