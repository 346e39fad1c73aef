//! The InfiniBand vocabulary (RoCE's too): port states, MTUs, speeds, node types, GIDs, limits.
//!
//! Plain values with the numbers the IB spec and libibverbs give them. The verbs core reports
//! them, sysfs spells them as text, and the reports carry them; this module imports nothing.

mod gid;
mod limits;
mod mtu;
mod types;

pub use gid::{Gid, GidEntry, default_gid_index};
pub use limits::DeviceLimits;
pub use mtu::RoceMtuRule;
pub use types::{
    AtomicCap, DeviceTransport, GidType, LinkLayer, Mtu, NodeType, PhysState, PortState,
    speed_named, speed_per_lane, width_lanes,
};
