//! Gathers what `devices` and `ports` report. From sysfs by default: libibverbs is never loaded,
//! which is most of the time `ibv_devinfo` takes. What only the verbs tell (device limits, the
//! IB MTUs: `ports -v`) comes from libibverbs, and then so does everything sysfs also shows.

mod from_sysfs;
mod from_verbs;
mod place;

use crate::counters::Snapshot;
use crate::exit::UsageError;
use crate::ib::{
    DeviceTransport, GidEntry, GidType, LinkLayer, Mtu, NodeType, PhysState, PortState,
    RoceMtuRule, default_gid_index,
};
use crate::report::inventory::{
    ActiveMtu, DeviceDetails, DeviceInfo, GidInfo, MtuSource, PortDetails, PortInfo, PortsReport,
};
use crate::sysfs;
use anyhow::{Result, bail};
use std::path::Path;

/// Where the inventory is read from. Both give the same values for what both know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Source {
    /// /sys/class/infiniband only: no provider library is loaded, no device is opened.
    #[default]
    Sysfs,
    /// libibverbs: the device list, then each device opened and queried.
    Verbs,
}

/// What `ports` should gather.
#[derive(Debug, Clone, Copy, Default)]
pub struct PortQuery {
    /// Device limits and port details: only the verbs have them, so this reads everything
    /// through libibverbs whatever `source` says.
    pub verbose: bool,
    pub counters: bool,
    pub source: Source,
}

impl PortQuery {
    fn source(&self) -> Source {
        if self.verbose {
            Source::Verbs
        } else {
            self.source
        }
    }
}

/// Describe every device (or `name` only).
pub fn devices(name: Option<&str>, source: Source) -> Result<Vec<DeviceInfo>> {
    match source {
        Source::Sysfs => from_sysfs::devices(name),
        Source::Verbs => from_verbs::devices(name),
    }
}

/// Gather `ports` for `device` (or all) and `port` (or all); with `q.verbose`, each device
/// with its limits too.
pub fn ports(device: Option<&str>, port: Option<u8>, q: PortQuery) -> Result<PortsReport> {
    match q.source() {
        Source::Sysfs => from_sysfs::ports(device, port, q),
        Source::Verbs => from_verbs::ports(device, port, q),
    }
}

/// Reject an empty `-d` early, as a usage error.
pub fn check_device_name(name: Option<&str>) -> Result<()> {
    if name.is_some_and(|n| n.trim().is_empty()) {
        return Err(UsageError("-d/--device needs a device name".into()).into());
    }
    Ok(())
}

/// GUIDs as ibv_devinfo (and sysfs) print them: four groups of four hex digits.
pub fn format_guid(guid: u64) -> String {
    let h = format!("{guid:016x}");
    format!("{}:{}:{}:{}", &h[0..4], &h[4..8], &h[8..12], &h[12..16])
}

/// The ports to describe: all of `present`, or the one asked for (another is an error).
fn selected_ports(device: &str, present: &[u8], wanted: Option<u8>) -> Result<Vec<u8>> {
    match wanted {
        Some(p) if !present.contains(&p) => {
            let range = match present {
                [] => "none".to_string(),
                [one] => one.to_string(),
                [first, .., last] => format!("{first}..{last}"),
            };
            bail!("{device} has no port {p}; valid ports: {range}")
        }
        Some(p) => Ok(vec![p]),
        None => Ok(present.to_vec()),
    }
}

/// What either source found out about a device.
struct DeviceFacts {
    name: String,
    node_guid: u64,
    sys_image_guid: u64,
    node_type: NodeType,
    transport: DeviceTransport,
    port_states: Vec<PortState>,
}

/// A device's report: `facts` from either source, the rest from sysfs for both.
fn device_info(root: &Path, facts: DeviceFacts, details: Option<DeviceDetails>) -> DeviceInfo {
    let name = facts.name;
    let ports = facts.port_states.len() as u8;
    let active = facts.port_states.iter().filter(|s| s.is_active()).count() as u8;
    let pci = sysfs::pci_ids(root, &name);
    let place = place::read(root, &name);
    DeviceInfo {
        node_guid: format_guid(facts.node_guid),
        sys_image_guid: format_guid(facts.sys_image_guid),
        node_type: facts.node_type,
        transport: facts.transport,
        fw_ver: sysfs::device_attr(root, &name, "fw_ver").unwrap_or_default(),
        board_id: sysfs::device_attr(root, &name, "board_id"),
        pci_vendor_id: pci.map(|p| p.0),
        pci_device_id: pci.map(|p| p.1),
        pcie: place.pcie,
        numa_node: place.numa_node,
        local_cpulist: place.local_cpulist,
        driver: place.driver,
        phys_port_cnt: ports,
        ports_active: active,
        port_summary: format!("{active}/{ports} active"),
        details,
        name,
    }
}

/// What either source found out about a port.
struct PortFacts {
    state: PortState,
    physical_state: PhysState,
    link_layer: LinkLayer,
    lid: u16,
    sm_lid: u16,
    lmc: u8,
    lanes: Option<u32>,
    /// Per-lane speed: (name, nominal Gb/s).
    speed: Option<(&'static str, f64)>,
    gids: Vec<GidEntry>,
    pkeys: Vec<u16>,
    /// The active IB MTU as `ibv_query_port` gave it; None when the device was not asked.
    queried_mtu: Option<Mtu>,
}

/// How the kernel derives a port's active MTU from its netdev's, if it does: on RoCE ports
/// (an Ethernet link layer on an IB-transport device), Soft-RoCE's rule on rxe (the one RoCE
/// driver with a `parent` attribute, naming its netdev) and ib_core's on every other driver.
/// None on InfiniBand and iWARP ports, whose active MTU only the device tells.
fn roce_mtu_rule(
    root: &Path,
    device: &str,
    link_layer: LinkLayer,
    node: NodeType,
) -> Option<RoceMtuRule> {
    if link_layer != LinkLayer::Ethernet
        || DeviceTransport::of_node_type(node) != DeviceTransport::InfiniBand
    {
        return None;
    }
    Some(match sysfs::device_attr(root, device, "parent") {
        Some(_) => RoceMtuRule::Rxe,
        None => RoceMtuRule::IbCore,
    })
}

/// A port's active MTU: what the device said when it was asked, else the RoCE rule's answer.
fn active_mtu(
    queried: Option<Mtu>,
    rule: Option<RoceMtuRule>,
    netdev_mtu: Option<u32>,
) -> Option<ActiveMtu> {
    if let Some(mtu) = queried {
        return Some(ActiveMtu {
            mtu,
            source: MtuSource::Verbs,
            header_bytes: None,
        });
    }
    let rule = rule?;
    Some(ActiveMtu {
        mtu: rule.active_mtu(netdev_mtu?)?,
        source: MtuSource::Netdev,
        header_bytes: Some(rule.header_bytes()),
    })
}

/// A port's report: `facts` from either source, netdev MTU and counters from sysfs for both.
fn port_info(
    root: &Path,
    device: &str,
    port: u8,
    rule: Option<RoceMtuRule>,
    facts: PortFacts,
    details: Option<PortDetails>,
    q: PortQuery,
) -> PortInfo {
    let (gids, default_gid_index) = gid_infos(&facts.gids, facts.link_layer);
    let netdev = facts
        .gids
        .iter()
        .find_map(|e| e.netdev.clone())
        .or_else(|| {
            (facts.link_layer == LinkLayer::Ethernet)
                .then(|| sysfs::gid_netdev(root, device, port, 0))
                .flatten()
        });
    let (lanes, speed) = (facts.lanes, facts.speed);
    let snapshot = q.counters.then(|| Snapshot::read(root, device, port));
    let netdev_mtu = netdev.as_deref().and_then(|n| sysfs::netdev_mtu(root, n));
    PortInfo {
        device: device.to_string(),
        port,
        state: facts.state,
        physical_state: facts.physical_state,
        link_layer: facts.link_layer,
        lid: facts.lid,
        sm_lid: facts.sm_lid,
        lmc: facts.lmc,
        active_width: lanes.map(|l| format!("{l}X")),
        active_speed: speed.map(|(n, _)| n.to_string()),
        speed_per_lane_gbps: speed.map(|(_, g)| g),
        rate_gbps: lanes.zip(speed).map(|(l, (_, g))| l as f64 * g),
        netdev_mtu,
        netdev_speed_mbps: netdev
            .as_deref()
            .and_then(|n| sysfs::pci::netdev_speed_mbps(root, n)),
        netdev_driver: netdev
            .as_deref()
            .and_then(|n| sysfs::pci::netdev_driver(root, n)),
        active_mtu: active_mtu(facts.queried_mtu, rule, netdev_mtu),
        netdev,
        default_gid_index,
        gids,
        pkeys: facts.pkeys.iter().map(|k| format!("0x{k:04x}")).collect(),
        details,
        error_counters: snapshot.as_ref().map(Snapshot::error_names),
        counter_deltas: None,
        counters: snapshot.as_ref().map(|s| s.counters.clone()),
        hw_counters: snapshot.map(|s| s.hw_counters),
    }
}

fn gid_infos(entries: &[GidEntry], link_layer: LinkLayer) -> (Vec<GidInfo>, Option<u32>) {
    let default = match link_layer {
        LinkLayer::Ethernet => default_gid_index(entries),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ib::Gid;

    #[test]
    fn guid_formats_like_ibv_devinfo() {
        assert_eq!(format_guid(0x5054_00ff_fe12_3456), "5054:00ff:fe12:3456");
        assert_eq!(format_guid(0), "0000:0000:0000:0000");
    }

    #[test]
    fn a_port_not_present_is_refused_with_the_valid_ones() {
        assert_eq!(selected_ports("rxe0", &[1], None).unwrap(), [1]);
        assert_eq!(selected_ports("mlx5_0", &[1, 2], Some(2)).unwrap(), [2]);
        let e = selected_ports("rxe0", &[1], Some(2))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "rxe0 has no port 2; valid ports: 1");
        let e = selected_ports("mlx5_0", &[1, 2], Some(0))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "mlx5_0 has no port 0; valid ports: 1..2");
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
