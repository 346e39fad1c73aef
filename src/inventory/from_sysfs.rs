//! The inventory from /sys/class/infiniband alone: no provider library loaded, no device opened.

use super::{
    DeviceFacts, PortFacts, PortQuery, device_info, from_verbs, port_info, roce_mtu_rule,
    selected_ports,
};
use crate::device_access::{no_device_message, unknown_device};
use crate::ib::{DeviceTransport, NodeType, PhysState, PortState, speed_named};
use crate::report::inventory::{DeviceInfo, PortInfo, PortsReport};
use crate::sysfs;
use anyhow::{Context as _, Result, anyhow, bail};
use std::fs;
use std::path::{Path, PathBuf};

/// The text of an attribute file, or an error that names it.
fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .with_context(|| format!("cannot read {}", path.display()))
}

/// An attribute file parsed, or an error that names it and shows what it held.
fn parsed<T>(path: PathBuf, parse: impl FnOnce(&str) -> Option<T>) -> Result<T> {
    let text = read(&path)?;
    parse(&text).ok_or_else(|| anyhow!("unexpected contents in {}: '{text}'", path.display()))
}

/// The devices to look at: all the kernel has, or the one named (an unknown name is an error).
fn selected(root: &Path, name: Option<&str>) -> Result<Vec<String>> {
    let present = match sysfs::kernel_devices(root) {
        Some(names) if !names.is_empty() => names,
        _ => bail!(no_device_message(None, root)),
    };
    match name {
        Some(n) if present.iter().any(|p| p == n) => Ok(vec![n.to_string()]),
        Some(n) => Err(unknown_device(n, &present)),
        None => Ok(present),
    }
}

fn port_state(root: &Path, dev: &str, port: u8) -> Result<PortState> {
    let path = sysfs::port_dir(root, dev, port).join("state");
    Ok(PortState::from_raw(parsed(path, sysfs::leading_number)?))
}

fn node_type(root: &Path, dev: &str) -> Result<NodeType> {
    Ok(NodeType::from_raw(parsed(
        root.join(dev).join("node_type"),
        |t| i32::try_from(sysfs::leading_number(t)?).ok(),
    )?))
}

fn describe_device(root: &Path, dev: &str) -> Result<DeviceInfo> {
    let at = |name: &str| root.join(dev).join(name);
    let node_type = node_type(root, dev)?;
    let port_states = sysfs::port_numbers(root, dev)
        .into_iter()
        .map(|p| port_state(root, dev, p))
        .collect::<Result<_>>()?;
    let facts = DeviceFacts {
        name: dev.to_string(),
        node_guid: parsed(at("node_guid"), sysfs::parse_guid)?,
        sys_image_guid: parsed(at("sys_image_guid"), sysfs::parse_guid)?,
        node_type,
        transport: DeviceTransport::of_node_type(node_type),
        port_states,
    };
    Ok(device_info(root, facts, None))
}

/// Describe every device (or `name` only).
pub fn devices(name: Option<&str>) -> Result<Vec<DeviceInfo>> {
    let root = sysfs::class_root();
    selected(&root, name)?
        .iter()
        .map(|dev| describe_device(&root, dev))
        .collect()
}

fn describe_port(root: &Path, dev: &str, port: u8, q: PortQuery) -> Result<PortInfo> {
    let at = |name: &str| sysfs::port_dir(root, dev, port).join(name);
    let small = |t: &str| u16::try_from(sysfs::parse_number(t)?).ok();
    let link_layer = parsed(at("link_layer"), sysfs::parse_link_layer)?;
    // `rate` fails to read on a port whose width the driver reports as invalid.
    let rate = read(&at("rate")).ok().and_then(|t| sysfs::parse_rate(&t));
    let node_type = node_type(root, dev)?;
    // Only the device knows the active MTU of a port whose driver derives none from a netdev.
    let rule = roce_mtu_rule(root, dev, link_layer, node_type);
    let queried_mtu = match rule {
        Some(_) => None,
        None => from_verbs::active_mtu(dev, port),
    };
    let facts = PortFacts {
        state: port_state(root, dev, port)?,
        physical_state: PhysState::from_raw(parsed(at("phys_state"), |t| {
            u8::try_from(sysfs::leading_number(t)?).ok()
        })?),
        link_layer,
        lid: parsed(at("lid"), small)?,
        sm_lid: parsed(at("sm_lid"), small)?,
        lmc: parsed(at("lid_mask_count"), |t| {
            u8::try_from(sysfs::parse_number(t)?).ok()
        })?,
        lanes: rate.as_ref().map(|r| r.0),
        speed: rate.as_ref().and_then(|r| speed_named(&r.1)),
        gids: sysfs::gid_table(root, dev, port, link_layer),
        pkeys: sysfs::pkeys(root, dev, port),
        queried_mtu,
    };
    Ok(port_info(root, dev, port, rule, facts, None, q))
}

/// Gather `ports` for `device` (or all) and `port` (or all).
pub fn ports(device: Option<&str>, port: Option<u8>, q: PortQuery) -> Result<PortsReport> {
    let root = sysfs::class_root();
    let mut report = PortsReport {
        devices: Vec::new(),
        ports: Vec::new(),
    };
    for dev in selected(&root, device)? {
        let present = sysfs::port_numbers(&root, &dev);
        for p in selected_ports(&dev, &present, port)? {
            report
                .ports
                .push(describe_port(&root, &dev, p, q).with_context(|| format!("{dev} port {p}"))?);
        }
    }
    Ok(report)
}
