//! What `rdmadiag devices` and `rdmadiag ports` report, and its tables and text.

use super::{Style, finish, opt};
use crate::counters::{CounterDeltas, Group, is_error_counter};
use crate::ib::{
    DeviceLimits, DeviceTransport, Gid, GidType, LinkLayer, Mtu, NodeType, PhysState, PortState,
};
use comfy_table::Cell;
use mtu::mtu_text;
pub use mtu::{ActiveMtu, MtuSource};
use pcie::{PcieInfo, pcie_cell, pcie_rows};

mod mtu;
pub mod pcie;
use serde::Serialize;
use std::collections::BTreeMap;

/// One row of `rdmadiag devices`. Everything but `details` is what sysfs shows; both ways of
/// gathering it (sysfs, or libibverbs with `ports -v`) give the same values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceInfo {
    pub name: String,
    pub node_guid: String,
    pub sys_image_guid: String,
    pub node_type: NodeType,
    pub transport: DeviceTransport,
    /// The kernel's firmware version (sysfs `fw_ver`); empty when the driver reports none.
    pub fw_ver: String,
    pub board_id: Option<String>,
    /// PCI ids of the device's function (None without a PCI parent, as for Soft-RoCE).
    pub pci_vendor_id: Option<u16>,
    pub pci_device_id: Option<u16>,
    /// The device's PCIe link and the links above it; None without a PCI parent (Soft-RoCE).
    pub pcie: Option<PcieInfo>,
    /// The NUMA node of its PCI function; None without one (`numa_node` -1) or a PCI parent.
    pub numa_node: Option<u32>,
    /// The CPUs local to its PCI function (`local_cpulist`, "0-15,32-47").
    pub local_cpulist: Option<String>,
    /// The kernel driver bound to its PCI function (`mlx5_core`).
    pub driver: Option<String>,
    pub phys_port_cnt: u8,
    pub ports_active: u8,
    /// e.g. "1/1 active".
    pub port_summary: String,
    /// What only `ibv_query_device` tells (`ports -v`).
    #[serde(flatten)]
    pub details: Option<DeviceDetails>,
}

/// What `ibv_query_device` adds to a device's sysfs attributes (`ports -v`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceDetails {
    pub hw_ver: u32,
    /// The vendor's IEEE OUI (0x02c9 for NVIDIA/Mellanox: not its PCI vendor id).
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub limits: DeviceLimits,
}

/// One GID table entry as `ports` reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GidInfo {
    pub index: u32,
    pub gid: Gid,
    #[serde(rename = "type")]
    pub gid_type: GidType,
    pub netdev: Option<String>,
    /// The IP address a RoCE GID stands for (None on InfiniBand).
    pub ip: Option<String>,
    /// The GID rdmadiag uses by default on this port.
    pub default: bool,
}

/// What `ibv_query_port` adds to a port's sysfs attributes (`ports -v`), named as
/// `ibv_devinfo -v` names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortDetails {
    pub max_mtu: Option<Mtu>,
    pub active_mtu: Option<Mtu>,
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

/// One port as `rdmadiag ports` reports it. Everything but `details` is what sysfs shows; both
/// ways of gathering it give the same values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortInfo {
    pub device: String,
    pub port: u8,
    pub state: PortState,
    pub physical_state: PhysState,
    pub link_layer: LinkLayer,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    /// e.g. "4X".
    pub active_width: Option<String>,
    /// Per-lane speed name, e.g. "EDR".
    pub active_speed: Option<String>,
    pub speed_per_lane_gbps: Option<f64>,
    /// Lanes × per-lane speed.
    pub rate_gbps: Option<f64>,
    pub netdev: Option<String>,
    /// The netdev's MTU in bytes (RoCE).
    pub netdev_mtu: Option<u32>,
    /// The netdev's speed in Mb/s (RoCE); None when it is down or does not say.
    pub netdev_speed_mbps: Option<u32>,
    /// The netdev's driver (RoCE: `mlx5_core`; `rdma_rxe` has none of its own).
    pub netdev_driver: Option<String>,
    /// The active IB MTU (ibv_devinfo's `active_mtu`) and where it came from.
    pub active_mtu: Option<ActiveMtu>,
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

/// The report of `rdmadiag ports`: each selected port, plus device limits when verbose.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortsReport {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceInfo>,
    pub ports: Vec<PortInfo>,
}

/// `rdmadiag devices`: one row per device.
pub fn devices_table(devs: &[DeviceInfo], style: Style) -> String {
    let mut t = style.table(&[
        "DEVICE",
        "NODE GUID",
        "TYPE",
        "TRANSPORT",
        "FIRMWARE",
        "PCI ID",
        "PCIE",
        "NUMA",
        "PORTS",
    ]);
    for d in devs {
        t.add_row(vec![
            Cell::new(&d.name),
            Cell::new(&d.node_guid),
            Cell::new(d.node_type),
            Cell::new(d.transport),
            Cell::new(if d.fw_ver.is_empty() { "-" } else { &d.fw_ver }),
            Cell::new(match (d.pci_vendor_id, d.pci_device_id) {
                (Some(v), Some(p)) => format!("{v:04x}:{p:04x}"),
                _ => "-".to_string(),
            }),
            match pcie_cell(d.pcie.as_ref()) {
                (text, true) => style.alert(text),
                (text, false) => Cell::new(text),
            },
            Cell::new(d.numa_node.map_or_else(|| "-".into(), |n| n.to_string())),
            if d.ports_active < d.phys_port_cnt {
                style.alert(d.port_summary.clone())
            } else {
                Cell::new(&d.port_summary)
            },
        ]);
    }
    finish(&t)
}

fn speed_text(p: &PortInfo) -> String {
    match (
        &p.active_width,
        &p.active_speed,
        p.speed_per_lane_gbps,
        p.rate_gbps,
    ) {
        (Some(w), Some(s), Some(lane), Some(rate)) => {
            format!("{w} {s} ({lane} Gb/s per lane) = {rate} Gb/s")
        }
        _ => "unknown".to_string(),
    }
}

/// "ens1f0np0 (mlx5_core, 100000 Mb/s)"; "-" without a netdev.
fn netdev_text(p: &PortInfo) -> String {
    let Some(n) = &p.netdev else {
        return "-".into();
    };
    let speed = p
        .netdev_speed_mbps
        .map_or_else(|| "speed unknown".into(), |s| format!("{s} Mb/s"));
    match &p.netdev_driver {
        Some(d) => format!("{n} ({d}, {speed})"),
        None => format!("{n} ({speed})"),
    }
}

fn port_block(p: &PortInfo, style: Style) -> String {
    let mut out = String::new();
    let state = format!("{} ({})", p.state, p.physical_state);
    let mut kv = style.table(&[]);
    let head = format!("{} port {}", p.device, p.port);
    kv.add_row(vec![
        style.bold(&head),
        if p.state.is_active() {
            Cell::new(state)
        } else {
            style.alert(state)
        },
    ]);
    kv.add_row(vec![Cell::new("link layer"), Cell::new(p.link_layer)]);
    kv.add_row(vec![Cell::new("netdev"), Cell::new(netdev_text(p))]);
    kv.add_row(vec![Cell::new("MTU"), Cell::new(mtu_text(p))]);
    kv.add_row(vec![Cell::new("speed"), Cell::new(speed_text(p))]);
    if p.link_layer == LinkLayer::InfiniBand {
        kv.add_row(vec![
            Cell::new("LID / SM LID / LMC"),
            Cell::new(format!("0x{:04x} / 0x{:04x} / {}", p.lid, p.sm_lid, p.lmc)),
        ]);
    }
    let default = p
        .default_gid_index
        .and_then(|i| p.gids.iter().find(|g| g.index == i))
        .map_or_else(
            || "none".to_string(),
            |g| format!("{} ({}, {})", g.index, g.gid, g.gid_type),
        );
    kv.add_row(vec![Cell::new("default GID"), Cell::new(default)]);
    kv.add_row(vec![
        Cell::new("P_Keys"),
        Cell::new(if p.pkeys.is_empty() {
            "-".to_string()
        } else {
            p.pkeys.join(" ")
        }),
    ]);
    if let Some(d) = &p.details {
        for (k, v) in [
            ("max_msg_sz", format!("0x{:x}", d.max_msg_sz)),
            ("port_cap_flags", format!("0x{:08x}", d.port_cap_flags)),
            ("port_cap_flags2", format!("0x{:04x}", d.port_cap_flags2)),
            ("max_vl_num", d.max_vl_num.to_string()),
            ("bad_pkey_cntr", format!("0x{:x}", d.bad_pkey_cntr)),
            ("qkey_viol_cntr", format!("0x{:x}", d.qkey_viol_cntr)),
            ("sm_sl", d.sm_sl.to_string()),
            ("pkey_tbl_len", d.pkey_tbl_len.to_string()),
            ("gid_tbl_len", d.gid_tbl_len.to_string()),
            ("subnet_timeout", d.subnet_timeout.to_string()),
            ("init_type_reply", d.init_type_reply.to_string()),
        ] {
            kv.add_row(vec![Cell::new(k), Cell::new(v)]);
        }
    }
    out.push_str(&finish(&kv));

    let mut g = style.table(&["", "INDEX", "GID", "TYPE", "NETDEV", "IP"]);
    for e in &p.gids {
        g.add_row(vec![
            Cell::new(if e.default { "*" } else { "" }),
            Cell::new(e.index),
            Cell::new(e.gid),
            Cell::new(e.gid_type),
            Cell::new(opt(&e.netdev)),
            Cell::new(opt(&e.ip)),
        ]);
    }
    if p.gids.is_empty() {
        out.push_str("  (no valid GIDs)\n");
    } else {
        out.push_str(&finish(&g));
        out.push_str("  * the GID rdmadiag uses by default\n");
    }
    for (group, counters) in [
        (Group::Counters, &p.counters),
        (Group::HwCounters, &p.hw_counters),
    ] {
        match (counters, &p.counter_deltas) {
            (Some(c), Some(d)) => out.push_str(&super::counters::interval_table(
                group.dir(),
                group,
                c,
                d,
                style,
            )),
            (Some(c), None) => out.push_str(&counter_table(group.dir(), c, style)),
            _ => {}
        }
    }
    if let Some(d) = &p.counter_deltas {
        out.push_str(&super::counters::interval_summary(d));
    }
    out
}

fn counter_table(title: &str, c: &BTreeMap<String, u64>, style: Style) -> String {
    if c.is_empty() {
        return format!("  ({title}: none exposed by this device)\n");
    }
    let mut t = style.table(&[&title.to_uppercase(), "VALUE", ""]);
    for (name, v) in c {
        let bad = *v != 0 && is_error_counter(name);
        if bad {
            t.add_row(vec![
                style.alert(name.clone()),
                style.alert(v.to_string()),
                style.alert("! error count".to_string()),
            ]);
        } else {
            t.add_row(vec![Cell::new(name), Cell::new(v), Cell::new("")]);
        }
    }
    finish(&t)
}

fn limits_block(d: &DeviceInfo, style: Style) -> String {
    let Some(details) = &d.details else {
        return String::new();
    };
    let l = &details.limits;
    let mut t = style.table(&[]);
    t.add_row(vec![
        style.bold(&format!("{} device", d.name)),
        Cell::new(format!(
            "fw {}, hw_ver 0x{:x}, vendor_id 0x{:x}, vendor_part_id {}, sys_image_guid {}, \
             board_id {}",
            if d.fw_ver.is_empty() { "-" } else { &d.fw_ver },
            details.hw_ver,
            details.vendor_id,
            details.vendor_part_id,
            d.sys_image_guid,
            opt(&d.board_id)
        )),
    ]);
    for (k, v) in device_place_rows(d) {
        t.add_row(vec![Cell::new(k), Cell::new(v)]);
    }
    let value = serde_json::to_value(l).unwrap_or_default();
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            let text = match (k.as_str(), v) {
                ("max_mr_size" | "page_size_cap" | "device_cap_flags", v) => {
                    v.as_u64().map_or(v.to_string(), |n| format!("0x{n:x}"))
                }
                ("atomic_cap", _) => l.atomic_cap.to_string(),
                (_, v) => v.to_string(),
            };
            t.add_row(vec![Cell::new(k), Cell::new(text)]);
        }
    }
    finish(&t)
}

/// Where a device sits: its PCIe link and path, NUMA node, local CPUs and driver.
fn device_place_rows(d: &DeviceInfo) -> Vec<(&'static str, String)> {
    let mut rows = pcie_rows(d.pcie.as_ref());
    if d.pcie.is_some() {
        let node = d
            .numa_node
            .map_or_else(|| "none (numa_node -1)".into(), |n| n.to_string());
        rows.push(("NUMA node", node));
        rows.push(("local CPUs", opt(&d.local_cpulist)));
        rows.push(("driver", opt(&d.driver)));
    }
    rows
}

/// `rdmadiag ports`: a block per port, device limits first when verbose.
pub fn ports_text(r: &PortsReport, style: Style) -> String {
    let mut out = String::new();
    for d in &r.devices {
        out.push_str(&limits_block(d, style));
        out.push('\n');
    }
    for (i, p) in r.ports.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&port_block(p, style));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
