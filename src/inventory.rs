//! Gathers what `devices` and `ports` report: device and port attributes, GID tables, counters.

use crate::counters::{CounterDeltas, Snapshot};
use crate::exit::UsageError;
use crate::sysfs;
use crate::verbs::{
    self, Context, Device, DeviceLimits, DeviceList, DeviceTransport, GidEntry, GidType, LinkLayer,
    Mtu, NodeType, PhysState, PortAttr, PortState, VerbsError,
};
use anyhow::{Context as _, Result, anyhow, bail};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// One row of `rdmadiag devices`.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub name: String,
    pub node_guid: String,
    pub sys_image_guid: String,
    pub node_type: NodeType,
    pub transport: DeviceTransport,
    pub fw_ver: String,
    pub hw_ver: u32,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub board_id: Option<String>,
    pub phys_port_cnt: u8,
    pub ports_active: u8,
    /// e.g. "1/1 active".
    pub port_summary: String,
    /// Device capabilities and limits (`ports -v`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<DeviceLimits>,
}

/// One GID table entry as `ports` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct GidInfo {
    pub index: u32,
    pub gid: verbs::Gid,
    #[serde(rename = "type")]
    pub gid_type: GidType,
    pub netdev: Option<String>,
    /// The IP address a RoCE GID stands for (None on InfiniBand).
    pub ip: Option<String>,
    /// The GID rdmadiag uses by default on this port.
    pub default: bool,
}

/// Port details beyond the summary (`ports -v`), named as `ibv_devinfo -v` names them.
#[derive(Debug, Clone, Serialize)]
pub struct PortDetails {
    pub max_msg_sz: u32,
    pub port_cap_flags: u32,
    pub port_cap_flags2: u16,
    pub max_vl_num: u8,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub sm_sl: u8,
    pub pkey_tbl_len: u16,
    pub gid_tbl_len: i32,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub flags: u8,
}

/// One port as `rdmadiag ports` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct PortInfo {
    pub device: String,
    pub port: u8,
    pub state: PortState,
    pub physical_state: PhysState,
    pub link_layer: LinkLayer,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_mtu: Option<Mtu>,
    pub active_mtu: Option<Mtu>,
    /// e.g. "4X".
    pub active_width: Option<String>,
    /// Per-lane speed name, e.g. "EDR".
    pub active_speed: Option<String>,
    pub speed_per_lane_gbps: Option<f64>,
    /// Lanes × per-lane speed.
    pub rate_gbps: Option<f64>,
    pub netdev: Option<String>,
    pub default_gid_index: Option<u32>,
    pub gids: Vec<GidInfo>,
    pub pkeys: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<PortDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<BTreeMap<String, u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_counters: Option<BTreeMap<String, u64>>,
    /// With `--counters`: the names, in both maps, of the counters that count errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_counters: Option<Vec<String>>,
    /// With `--counters --interval`: how the counters changed over the interval (the maps
    /// above then hold the second reading).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter_deltas: Option<CounterDeltas>,
}

/// What `ports` should gather.
#[derive(Debug, Clone, Copy, Default)]
pub struct PortQuery {
    pub verbose: bool,
    pub counters: bool,
}

/// GUIDs as ibv_devinfo prints them: four groups of four hex digits.
pub fn format_guid(guid: u64) -> String {
    let h = format!("{guid:016x}");
    format!("{}:{}:{}:{}", &h[0..4], &h[4..8], &h[8..12], &h[12..16])
}

/// Explain why there is no device, telling "no RDMA in the kernel" from "no device present".
pub fn no_device_message(list_error: Option<&VerbsError>, sysfs_root: &Path) -> String {
    const HINT: &str =
        "for Soft-RoCE: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE";
    match sysfs::kernel_devices(sysfs_root) {
        None => {
            let why = list_error.map(|e| format!(" ({e})")).unwrap_or_default();
            format!(
                "no RDMA device: this kernel has no RDMA support loaded{why}; load your NIC's \
                 RDMA driver, or {HINT}"
            )
        }
        Some(names) if !names.is_empty() => format!(
            "no usable RDMA device: the kernel has {} but libibverbs found no userspace driver \
             for it; install the provider package (Debian/Ubuntu: ibverbs-providers) and check \
             that ib_uverbs is loaded",
            names.join(", ")
        ),
        Some(_) => format!("no RDMA device present (the kernel's RDMA core has none); {HINT}"),
    }
}

/// The device list, or the explained no-device error.
pub fn device_list() -> Result<DeviceList> {
    let root = sysfs::class_root();
    match DeviceList::new() {
        Ok(list) if list.is_empty() => bail!(no_device_message(None, &root)),
        Ok(list) => Ok(list),
        Err(e) => bail!(no_device_message(Some(&e), &root)),
    }
}

/// Open the named device, or every device when `name` is None.
pub fn open_devices(name: Option<&str>) -> Result<Vec<Arc<Context>>> {
    let list = device_list()?;
    match name {
        Some(n) => Ok(vec![
            list.find(n)
                .ok_or_else(|| unknown_device(n, &list))?
                .open()?,
        ]),
        None => list
            .iter()
            .map(|d| d.open().map_err(anyhow::Error::from))
            .collect(),
    }
}

fn unknown_device(name: &str, list: &DeviceList) -> anyhow::Error {
    anyhow!(
        "no RDMA device named '{name}'; devices present: {}",
        list.names().join(", ")
    )
}

/// Describe one open device from its list entry and context.
fn describe_device(dev: &Device<'_>, ctx: &Context, verbose: bool) -> Result<DeviceInfo> {
    let root = sysfs::class_root();
    let attr = ctx.query_device()?;
    let mut active = 0;
    for p in 1..=attr.phys_port_cnt {
        if ctx.query_port(p)?.state.is_active() {
            active += 1;
        }
    }
    Ok(DeviceInfo {
        name: ctx.name().to_string(),
        node_guid: format_guid(attr.node_guid),
        sys_image_guid: format_guid(attr.sys_image_guid),
        node_type: dev.node_type(),
        transport: dev.transport(),
        fw_ver: attr.fw_ver.clone(),
        hw_ver: attr.hw_ver,
        vendor_id: attr.vendor_id,
        vendor_part_id: attr.vendor_part_id,
        board_id: sysfs::device_attr(&root, ctx.name(), "board_id"),
        phys_port_cnt: attr.phys_port_cnt,
        ports_active: active,
        port_summary: format!("{active}/{} active", attr.phys_port_cnt),
        limits: verbose.then(|| attr.limits.clone()),
    })
}

/// The list entries to look at: all, or the one named (an unknown name is an error).
fn selected<'l>(list: &'l DeviceList, name: Option<&str>) -> Result<Vec<Device<'l>>> {
    match name {
        Some(n) => Ok(vec![list.find(n).ok_or_else(|| unknown_device(n, list))?]),
        None => Ok(list.iter().collect()),
    }
}

/// Describe every device (or `name` only), with limits when `verbose`.
pub fn devices(name: Option<&str>, verbose: bool) -> Result<Vec<DeviceInfo>> {
    let list = device_list()?;
    selected(&list, name)?
        .iter()
        .map(|dev| describe_device(dev, &*dev.open()?, verbose))
        .collect()
}

/// The GID table of one port: from `ibv_query_gid_table`, or, where that verb is missing,
/// from `ibv_query_gid` plus sysfs `gid_attrs`. `port_count` sizes the device-wide query.
pub fn gid_table(
    ctx: &Context,
    port: u8,
    attr: &PortAttr,
    port_count: u8,
) -> Result<Vec<GidEntry>> {
    let len = attr.gid_tbl_len.max(0) as u32;
    if let Ok(all) = ctx.gid_table(len as usize * port_count.max(1) as usize) {
        return Ok(all.into_iter().filter(|e| e.port == port).collect());
    }
    let root = sysfs::class_root();
    let mut out = Vec::new();
    for index in 0..len {
        let Ok(gid) = ctx.query_gid(port, index) else {
            continue;
        };
        if gid.is_zero() {
            continue;
        }
        let gid_type = sysfs::gid_type_text(&root, ctx.name(), port, index)
            .and_then(|t| GidType::from_sysfs(&t, attr.link_layer))
            .unwrap_or(match attr.link_layer {
                LinkLayer::Ethernet => GidType::RoceV1,
                _ => GidType::Ib,
            });
        out.push(GidEntry {
            port,
            index,
            gid,
            gid_type,
            netdev: sysfs::gid_netdev(&root, ctx.name(), port, index),
        });
    }
    Ok(out)
}

fn gid_infos(entries: &[GidEntry], link_layer: LinkLayer) -> (Vec<GidInfo>, Option<u32>) {
    let default = match link_layer {
        LinkLayer::Ethernet => verbs::default_gid_index(entries),
        _ => entries.iter().map(|e| e.index).min(),
    };
    let infos = entries
        .iter()
        .map(|e| GidInfo {
            index: e.index,
            gid: e.gid,
            gid_type: e.gid_type,
            netdev: e.netdev.clone(),
            ip: (e.gid_type != GidType::Ib).then(|| e.gid.ip().to_string()),
            default: Some(e.index) == default,
        })
        .collect();
    (infos, default)
}

/// Describe one port of an open device.
pub fn port_info(ctx: &Context, port: u8, port_count: u8, q: PortQuery) -> Result<PortInfo> {
    let a = ctx.query_port(port)?;
    let entries = gid_table(ctx, port, &a, port_count)?;
    let (gids, default_gid_index) = gid_infos(&entries, a.link_layer);
    let mut pkeys = Vec::new();
    for i in 0..a.pkey_tbl_len {
        match ctx.query_pkey(port, i) {
            Ok(0) => {}
            Ok(k) => pkeys.push(format!("0x{k:04x}")),
            Err(_) => break,
        }
    }
    let lanes = verbs::width_lanes(a.active_width);
    let speed = verbs::speed_per_lane(a.active_speed);
    let root = sysfs::class_root();
    let netdev = entries.iter().find_map(|e| e.netdev.clone()).or_else(|| {
        (a.link_layer == LinkLayer::Ethernet)
            .then(|| sysfs::gid_netdev(&root, ctx.name(), port, 0))
            .flatten()
    });
    let snapshot = q.counters.then(|| Snapshot::read(&root, ctx.name(), port));
    Ok(PortInfo {
        device: ctx.name().to_string(),
        port,
        state: a.state,
        physical_state: a.phys_state,
        link_layer: a.link_layer,
        lid: a.lid,
        sm_lid: a.sm_lid,
        lmc: a.lmc,
        max_mtu: a.max_mtu,
        active_mtu: a.active_mtu,
        active_width: lanes.map(|l| format!("{l}X")),
        active_speed: speed.map(|(n, _)| n.to_string()),
        speed_per_lane_gbps: speed.map(|(_, g)| g),
        rate_gbps: lanes.zip(speed).map(|(l, (_, g))| l as f64 * g),
        netdev,
        default_gid_index,
        gids,
        pkeys,
        details: q.verbose.then_some(PortDetails {
            max_msg_sz: a.max_msg_sz,
            port_cap_flags: a.port_cap_flags,
            port_cap_flags2: a.port_cap_flags2,
            max_vl_num: a.max_vl_num,
            bad_pkey_cntr: a.bad_pkey_cntr,
            qkey_viol_cntr: a.qkey_viol_cntr,
            sm_sl: a.sm_sl,
            pkey_tbl_len: a.pkey_tbl_len,
            gid_tbl_len: a.gid_tbl_len,
            subnet_timeout: a.subnet_timeout,
            init_type_reply: a.init_type_reply,
            flags: a.flags,
        }),
        error_counters: snapshot.as_ref().map(Snapshot::error_names),
        counter_deltas: None,
        counters: snapshot.as_ref().map(|s| s.counters.clone()),
        hw_counters: snapshot.map(|s| s.hw_counters),
    })
}

/// The report of `rdmadiag ports`: each selected port, plus device limits when verbose.
#[derive(Debug, Clone, Serialize)]
pub struct PortsReport {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceInfo>,
    pub ports: Vec<PortInfo>,
}

/// Gather `ports` for `device` (or all) and `port` (or all).
pub fn ports(device: Option<&str>, port: Option<u8>, q: PortQuery) -> Result<PortsReport> {
    let list = device_list()?;
    let mut report = PortsReport {
        devices: Vec::new(),
        ports: Vec::new(),
    };
    for dev in selected(&list, device)? {
        let ctx = dev.open()?;
        let n = ctx.query_device()?.phys_port_cnt;
        let selected: Vec<u8> = match port {
            Some(p) if p == 0 || p > n => {
                let range = if n == 1 {
                    "1".to_string()
                } else {
                    format!("1..{n}")
                };
                bail!("{} has no port {p}; valid ports: {range}", ctx.name());
            }
            Some(p) => vec![p],
            None => (1..=n).collect(),
        };
        for p in selected {
            report.ports.push(
                port_info(&ctx, p, n, q).with_context(|| format!("{} port {p}", ctx.name()))?,
            );
        }
        if q.verbose {
            report.devices.push(describe_device(&dev, &ctx, true)?);
        }
    }
    Ok(report)
}

/// Reject an empty `-d` early, as a usage error.
pub fn check_device_name(name: Option<&str>) -> Result<()> {
    if name.is_some_and(|n| n.trim().is_empty()) {
        return Err(UsageError("-d/--device needs a device name".into()).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::Gid;

    #[test]
    fn guid_formats_like_ibv_devinfo() {
        assert_eq!(format_guid(0x5054_00ff_fe12_3456), "5054:00ff:fe12:3456");
        assert_eq!(format_guid(0), "0000:0000:0000:0000");
    }

    #[test]
    fn no_device_messages_tell_the_cases_apart() {
        let base = std::env::temp_dir().join(format!("rdmadiag-nodev-{}", std::process::id()));
        let e = VerbsError::new("ibv_get_device_list", "", libc::ENOSYS);
        let none = no_device_message(Some(&e), &base.join("absent"));
        assert!(none.contains("this kernel has no RDMA support"), "{none}");
        assert!(none.contains("ENOSYS"), "{none}");
        assert!(
            none.contains("rdma link add rxe0 type rxe netdev"),
            "{none}"
        );

        std::fs::create_dir_all(base.join("empty")).unwrap();
        let empty = no_device_message(None, &base.join("empty"));
        assert!(empty.contains("no RDMA device present"), "{empty}");
        assert!(empty.contains("rdma link add"), "{empty}");

        std::fs::create_dir_all(base.join("orphan/mlx5_0")).unwrap();
        let orphan = no_device_message(None, &base.join("orphan"));
        assert!(orphan.contains("mlx5_0"), "{orphan}");
        assert!(orphan.contains("ibverbs-providers"), "{orphan}");
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn gid_infos_mark_default_and_ip() {
        let e = |index, gid: &str, t| GidEntry {
            port: 1,
            index,
            gid: gid.parse::<Gid>().unwrap(),
            gid_type: t,
            netdev: Some("dummy0".into()),
        };
        let entries = vec![
            e(0, "fe80::5054:ff:fe12:3456", GidType::RoceV2),
            e(1, "::ffff:10.77.0.1", GidType::RoceV2),
        ];
        let (infos, def) = gid_infos(&entries, LinkLayer::Ethernet);
        assert_eq!(def, Some(1));
        assert!(!infos[0].default && infos[1].default);
        assert_eq!(infos[1].ip.as_deref(), Some("10.77.0.1"));
        assert_eq!(infos[0].ip.as_deref(), Some("fe80::5054:ff:fe12:3456"));
        let ib = vec![e(0, "fe80::2", GidType::Ib)];
        let (infos, def) = gid_infos(&ib, LinkLayer::InfiniBand);
        assert_eq!(def, Some(0));
        assert_eq!(infos[0].ip, None);
    }
}
