//! The inventory through libibverbs: the device list, each device opened and queried.

use super::{DeviceFacts, PortFacts, PortQuery, device_info, port_info, selected_ports};
use crate::device_access::{device_list, gid_table, unknown_device};
use crate::ib::Mtu;
use crate::report::inventory::{DeviceDetails, DeviceInfo, PortDetails, PortInfo, PortsReport};
use crate::sysfs;
use crate::verbs::{Context, Device, DeviceAttr, DeviceList, speed_per_lane, width_lanes};
use anyhow::{Context as _, Result};
use std::path::Path;

/// The list entries to look at: all, or the one named (an unknown name is an error).
fn selected<'l>(list: &'l DeviceList, name: Option<&str>) -> Result<Vec<Device<'l>>> {
    match name {
        Some(n) => Ok(vec![
            list.find(n)
                .ok_or_else(|| unknown_device(n, &list.names()))?,
        ]),
        None => Ok(list.iter().collect()),
    }
}

/// Describe one open device; with `verbose`, its limits too.
fn describe_device(
    root: &Path,
    dev: &Device<'_>,
    ctx: &Context,
    attr: &DeviceAttr,
    verbose: bool,
) -> Result<DeviceInfo> {
    let port_states = (1..=attr.phys_port_cnt)
        .map(|p| Ok(ctx.query_port(p)?.state))
        .collect::<Result<_>>()?;
    let facts = DeviceFacts {
        name: ctx.name().to_string(),
        node_guid: attr.node_guid,
        sys_image_guid: attr.sys_image_guid,
        node_type: dev.node_type(),
        transport: dev.transport(),
        port_states,
    };
    let details = verbose.then(|| DeviceDetails {
        hw_ver: attr.hw_ver,
        vendor_id: attr.vendor_id,
        vendor_part_id: attr.vendor_part_id,
        limits: attr.limits.clone(),
    });
    Ok(device_info(root, facts, details))
}

/// Describe every device (or `name` only).
pub fn devices(name: Option<&str>) -> Result<Vec<DeviceInfo>> {
    let root = sysfs::class_root();
    let list = device_list()?;
    selected(&list, name)?
        .iter()
        .map(|dev| {
            let ctx = dev.open()?;
            describe_device(&root, dev, &ctx, &ctx.query_device()?, false)
        })
        .collect()
}

/// Describe one port of an open device.
fn describe_port(
    root: &Path,
    ctx: &Context,
    port: u8,
    port_count: u8,
    q: PortQuery,
) -> Result<PortInfo> {
    let a = ctx.query_port(port)?;
    let gids = gid_table(ctx, port, &a, port_count)?;
    let mut pkeys = Vec::new();
    for i in 0..a.pkey_tbl_len {
        match ctx.query_pkey(port, i) {
            Ok(0) => {}
            Ok(k) => pkeys.push(k),
            Err(_) => break,
        }
    }
    let facts = PortFacts {
        state: a.state,
        physical_state: a.phys_state,
        link_layer: a.link_layer,
        lid: a.lid,
        sm_lid: a.sm_lid,
        lmc: a.lmc,
        lanes: width_lanes(a.active_width),
        speed: speed_per_lane(a.active_speed),
        gids,
        pkeys,
        queried_mtu: a.active_mtu,
    };
    let details = q.verbose.then_some(PortDetails {
        max_mtu: a.max_mtu,
        active_mtu: a.active_mtu,
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
    });
    Ok(port_info(root, ctx.name(), port, None, facts, details, q))
}

/// The active IB MTU of one port, the device opened for it alone; None when it cannot be
/// opened or queried (`ports` then says the MTU is unknown rather than failing).
pub fn active_mtu(device: &str, port: u8) -> Option<Mtu> {
    let list = device_list().ok()?;
    let ctx = list.find(device)?.open().ok()?;
    ctx.query_port(port).ok()?.active_mtu
}

/// Gather `ports` for `device` (or all) and `port` (or all); each device too when verbose.
pub fn ports(device: Option<&str>, port: Option<u8>, q: PortQuery) -> Result<PortsReport> {
    let root = sysfs::class_root();
    let list = device_list()?;
    let mut report = PortsReport {
        devices: Vec::new(),
        ports: Vec::new(),
    };
    for dev in selected(&list, device)? {
        let ctx = dev.open()?;
        let attr = ctx.query_device()?;
        let n = attr.phys_port_cnt;
        let present: Vec<u8> = (1..=n).collect();
        for p in selected_ports(ctx.name(), &present, port)? {
            report.ports.push(
                describe_port(&root, &ctx, p, n, q)
                    .with_context(|| format!("{} port {p}", ctx.name()))?,
            );
        }
        if q.verbose {
            report
                .devices
                .push(describe_device(&root, &dev, &ctx, &attr, true)?);
        }
    }
    Ok(report)
}
