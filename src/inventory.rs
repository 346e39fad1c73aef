//! Gathers what `devices` and `ports` report: device and port attributes, GID tables, counters.

use crate::device_access::{device_list, gid_table, unknown_device};
use crate::exit::UsageError;
use crate::report::inventory::{DeviceInfo, GidInfo, PortDetails, PortInfo, PortsReport};
use crate::sysfs;
use crate::verbs::{self, Context, Device, DeviceList, GidEntry, GidType, LinkLayer};
use anyhow::{Context as _, Result, bail};

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
        counters: q
            .counters
            .then(|| sysfs::port_counters(&root, ctx.name(), port, "counters")),
        hw_counters: q
            .counters
            .then(|| sysfs::port_counters(&root, ctx.name(), port, "hw_counters")),
    })
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
