//! Plain Rust names for the numeric codes of the IB spec (port states, MTUs, speeds, GID types…).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Logical port state (`enum ibv_port_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PortState {
    Nop,
    Down,
    Init,
    Armed,
    Active,
    ActiveDefer,
    Unknown(u32),
}

impl PortState {
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => Self::Nop,
            1 => Self::Down,
            2 => Self::Init,
            3 => Self::Armed,
            4 => Self::Active,
            5 => Self::ActiveDefer,
            v => Self::Unknown(v),
        }
    }
    pub fn is_active(self) -> bool {
        self == Self::Active
    }
}

impl fmt::Display for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nop => f.write_str("NOP"),
            Self::Down => f.write_str("DOWN"),
            Self::Init => f.write_str("INIT"),
            Self::Armed => f.write_str("ARMED"),
            Self::Active => f.write_str("ACTIVE"),
            Self::ActiveDefer => f.write_str("ACTIVE_DEFER"),
            Self::Unknown(v) => write!(f, "unknown ({v})"),
        }
    }
}

/// Physical port state as the IB spec numbers it (`ibv_port_attr.phys_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhysState {
    Sleep,
    Polling,
    Disabled,
    PortConfigurationTraining,
    LinkUp,
    LinkErrorRecovery,
    PhyTest,
    Unknown(u8),
}

impl PhysState {
    pub fn from_raw(v: u8) -> Self {
        match v {
            1 => Self::Sleep,
            2 => Self::Polling,
            3 => Self::Disabled,
            4 => Self::PortConfigurationTraining,
            5 => Self::LinkUp,
            6 => Self::LinkErrorRecovery,
            7 => Self::PhyTest,
            v => Self::Unknown(v),
        }
    }
}

impl fmt::Display for PhysState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sleep => f.write_str("SLEEP"),
            Self::Polling => f.write_str("POLLING"),
            Self::Disabled => f.write_str("DISABLED"),
            Self::PortConfigurationTraining => f.write_str("PORT_CONFIGURATION_TRAINING"),
            Self::LinkUp => f.write_str("LINK_UP"),
            Self::LinkErrorRecovery => f.write_str("LINK_ERROR_RECOVERY"),
            Self::PhyTest => f.write_str("PHY_TEST"),
            Self::Unknown(v) => write!(f, "unknown ({v})"),
        }
    }
}

/// Link layer of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
    Unknown(u8),
}

impl LinkLayer {
    /// `IBV_LINK_LAYER_UNSPECIFIED` (0) means InfiniBand, as in ibv_devinfo.
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 | 1 => Self::InfiniBand,
            2 => Self::Ethernet,
            v => Self::Unknown(v),
        }
    }
}

impl fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InfiniBand => f.write_str("InfiniBand"),
            Self::Ethernet => f.write_str("Ethernet"),
            Self::Unknown(v) => write!(f, "unknown ({v})"),
        }
    }
}

/// An IB MTU (`enum ibv_mtu`), stored as its size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Mtu(pub u32);

impl Mtu {
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            1..=5 => Some(Mtu(128 << v)),
            _ => None,
        }
    }
    /// The `enum ibv_mtu` value for this size, if it is one of the five IB MTUs.
    pub fn to_raw(self) -> Option<u32> {
        match self.0 {
            256 => Some(1),
            512 => Some(2),
            1024 => Some(3),
            2048 => Some(4),
            4096 => Some(5),
            _ => None,
        }
    }
    pub fn bytes(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Link width (`ibv_port_attr.active_width`): the number of lanes.
pub fn width_lanes(raw: u8) -> Option<u32> {
    match raw {
        1 => Some(1),
        2 => Some(4),
        4 => Some(8),
        8 => Some(12),
        16 => Some(2),
        _ => None,
    }
}

/// The IB link speeds: `ibv_port_attr.active_speed` (or `active_speed_ex` from XDR on), the
/// name sysfs `rate` shows ("4X XDR"), nominal Gb/s per lane. Every speed the kernel reports
/// (`enum ib_port_speed`).
const SPEEDS: &[(u32, &str, f64)] = &[
    (1, "SDR", 2.5),
    (2, "DDR", 5.0),
    (4, "QDR", 10.0),
    (8, "FDR10", 10.0),
    (16, "FDR", 14.0),
    (32, "EDR", 25.0),
    (64, "HDR", 50.0),
    (128, "NDR", 100.0),
    (256, "XDR", 200.0),
];

/// Per-lane speed (`active_speed`/`active_speed_ex`): (name, nominal Gb/s per lane).
pub fn speed_per_lane(raw: u32) -> Option<(&'static str, f64)> {
    SPEEDS
        .iter()
        .find(|s| s.0 == raw)
        .map(|&(_, name, gbps)| (name, gbps))
}

/// Per-lane speed by the name sysfs `rate` gives it ("EDR"): (name, nominal Gb/s per lane).
pub fn speed_named(name: &str) -> Option<(&'static str, f64)> {
    SPEEDS
        .iter()
        .find(|s| s.1 == name)
        .map(|&(_, name, gbps)| (name, gbps))
}

/// Node type of a device (`enum ibv_node_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeType {
    Ca,
    Switch,
    Router,
    Rnic,
    Usnic,
    UsnicUdp,
    Unspecified,
    Unknown(i32),
}

impl NodeType {
    pub fn from_raw(v: i32) -> Self {
        match v {
            1 => Self::Ca,
            2 => Self::Switch,
            3 => Self::Router,
            4 => Self::Rnic,
            5 => Self::Usnic,
            6 => Self::UsnicUdp,
            7 => Self::Unspecified,
            v => Self::Unknown(v),
        }
    }
}

impl fmt::Display for NodeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ca => f.write_str("CA"),
            Self::Switch => f.write_str("switch"),
            Self::Router => f.write_str("router"),
            Self::Rnic => f.write_str("RNIC"),
            Self::Usnic => f.write_str("usNIC"),
            Self::UsnicUdp => f.write_str("usNIC UDP"),
            Self::Unspecified => f.write_str("unspecified"),
            Self::Unknown(v) => write!(f, "unknown ({v})"),
        }
    }
}

/// Transport of a device (`enum ibv_transport_type`), spelled as ibv_devinfo does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DeviceTransport {
    InfiniBand,
    #[serde(rename = "iWARP")]
    Iwarp,
    #[serde(rename = "usNIC")]
    Usnic,
    #[serde(rename = "usNIC UDP")]
    UsnicUdp,
    #[serde(rename = "unspecified")]
    Unspecified,
    #[serde(rename = "unknown")]
    Unknown(i32),
}

impl DeviceTransport {
    /// The transport libibverbs gives a device of this node type (it reads sysfs `node_type`
    /// and derives the transport from it).
    pub fn of_node_type(node_type: NodeType) -> Self {
        match node_type {
            NodeType::Ca | NodeType::Switch | NodeType::Router => Self::InfiniBand,
            NodeType::Rnic => Self::Iwarp,
            NodeType::Usnic => Self::Usnic,
            NodeType::UsnicUdp => Self::UsnicUdp,
            NodeType::Unspecified => Self::Unspecified,
            NodeType::Unknown(_) => Self::Unknown(-1),
        }
    }

    pub fn from_raw(v: i32) -> Self {
        match v {
            0 => Self::InfiniBand,
            1 => Self::Iwarp,
            2 => Self::Usnic,
            3 => Self::UsnicUdp,
            4 => Self::Unspecified,
            v => Self::Unknown(v),
        }
    }
}

impl fmt::Display for DeviceTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InfiniBand => f.write_str("InfiniBand"),
            Self::Iwarp => f.write_str("iWARP"),
            Self::Usnic => f.write_str("usNIC"),
            Self::UsnicUdp => f.write_str("usNIC UDP"),
            Self::Unspecified => f.write_str("unspecified"),
            Self::Unknown(v) => write!(f, "unknown ({v})"),
        }
    }
}

/// Atomic operation support (`enum ibv_atomic_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AtomicCap {
    None,
    Hca,
    Glob,
    Unknown(u32),
}

impl AtomicCap {
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => Self::None,
            1 => Self::Hca,
            2 => Self::Glob,
            v => Self::Unknown(v),
        }
    }
}

impl fmt::Display for AtomicCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("ATOMIC_NONE"),
            Self::Hca => f.write_str("ATOMIC_HCA"),
            Self::Glob => f.write_str("ATOMIC_GLOB"),
            Self::Unknown(v) => write!(f, "unknown ({v})"),
        }
    }
}

/// What kind of address a GID table entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GidType {
    #[serde(rename = "IB")]
    Ib,
    #[serde(rename = "RoCE v1")]
    RoceV1,
    #[serde(rename = "RoCE v2")]
    RoceV2,
}

impl GidType {
    /// From `enum ibv_gid_type` as `ibv_query_gid_table` reports it.
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            0 => Some(Self::Ib),
            1 => Some(Self::RoceV1),
            2 => Some(Self::RoceV2),
            _ => None,
        }
    }

    /// From the text of sysfs `gid_attrs/types/N` ("IB/RoCE v1" or "RoCE v2").
    pub fn from_sysfs(text: &str, link_layer: LinkLayer) -> Option<Self> {
        match text.trim() {
            "RoCE v2" => Some(Self::RoceV2),
            "IB/RoCE v1" if link_layer == LinkLayer::Ethernet => Some(Self::RoceV1),
            "IB/RoCE v1" => Some(Self::Ib),
            _ => None,
        }
    }
}

impl fmt::Display for GidType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ib => "IB",
            Self::RoceV1 => "RoCE v1",
            Self::RoceV2 => "RoCE v2",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_round_trips_through_raw() {
        for raw in 1..=5 {
            let m = Mtu::from_raw(raw).unwrap();
            assert_eq!(m.to_raw(), Some(raw));
        }
        assert_eq!(Mtu::from_raw(3), Some(Mtu(1024)));
        assert_eq!(Mtu::from_raw(0), None);
        assert_eq!(Mtu::from_raw(6), None);
        assert_eq!(Mtu(1500).to_raw(), None);
    }

    #[test]
    fn width_and_speed_tables() {
        assert_eq!(width_lanes(2), Some(4));
        assert_eq!(width_lanes(3), None);
        assert_eq!(speed_per_lane(32), Some(("EDR", 25.0)));
        assert_eq!(speed_per_lane(3), None);
        assert_eq!(speed_per_lane(256), Some(("XDR", 200.0)));
        // Every speed and width the kernel reports has a name: one bit each, SDR to XDR.
        let speeds: Vec<&str> = (0..9)
            .filter_map(|b| speed_per_lane(1 << b))
            .map(|s| s.0)
            .collect();
        assert_eq!(
            speeds,
            [
                "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"
            ]
        );
        let lanes: Vec<u32> = [1, 16, 2, 4, 8]
            .iter()
            .filter_map(|&w| width_lanes(w))
            .collect();
        assert_eq!(lanes, [1, 2, 4, 8, 12]);
        assert_eq!(speed_named("EDR"), speed_per_lane(32));
        assert_eq!(speed_named("FDR10"), Some(("FDR10", 10.0)));
        assert_eq!(speed_named("XDR"), Some(("XDR", 200.0)));
        assert_eq!(speed_named("ZDR"), None);
    }

    #[test]
    fn gid_type_from_sysfs_depends_on_link_layer() {
        assert_eq!(
            GidType::from_sysfs("RoCE v2\n", LinkLayer::Ethernet),
            Some(GidType::RoceV2)
        );
        assert_eq!(
            GidType::from_sysfs("IB/RoCE v1", LinkLayer::Ethernet),
            Some(GidType::RoceV1)
        );
        assert_eq!(
            GidType::from_sysfs("IB/RoCE v1", LinkLayer::InfiniBand),
            Some(GidType::Ib)
        );
        assert_eq!(GidType::from_sysfs("bogus", LinkLayer::Ethernet), None);
    }

    #[test]
    fn states_print_like_ibv_devinfo() {
        assert_eq!(PortState::from_raw(4).to_string(), "ACTIVE");
        assert_eq!(PhysState::from_raw(5).to_string(), "LINK_UP");
        assert_eq!(LinkLayer::from_raw(0), LinkLayer::InfiniBand);
        assert_eq!(LinkLayer::from_raw(2).to_string(), "Ethernet");
        assert_eq!(
            serde_json::to_string(&GidType::RoceV2).unwrap(),
            "\"RoCE v2\""
        );
    }
}
