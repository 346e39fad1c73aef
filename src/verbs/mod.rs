//! The verbs core: safe RAII wrappers over libibverbs (via rdma-sys). The only module with `unsafe`.
//!
//! Ownership mirrors the verbs object tree: a `QueuePair` holds `Arc`s to its PD and CQs, which
//! hold their `Context`, so a child can never outlive its parent and drop order is always right.

mod ah;
mod cm;
mod cq;
mod device;
mod error;
mod mr;
mod pd;
mod qp;
mod send_list;
mod send_op;

pub use ah::{AddressHandle, GlobalRoute, PathAttr};
pub use cm::{
    ACCEPT_PRIVATE_DATA_MAX, CONNECT_PRIVATE_DATA_MAX, CmConnParams, CmError, CmEvent,
    CmEventChannel, CmEventKind, CmId, CmListener, IncomingRequest, REJECT_PRIVATE_DATA_MAX,
    explain_status, reject_reason,
};
pub use cq::{Completion, CompletionChannel, CompletionQueue, Reaped, Wc, WcOpcode, WcStatus};
pub use device::{Context, Device, DeviceAttr, DeviceList, PortAttr, netdev_name};
pub use error::{VerbsError, errno_name};
pub use mr::{Access, MemoryRegion, page_size};
pub use pd::ProtectionDomain;
pub use qp::{
    QpCaps, QpType, QueuePair, RecvRequest, RemoteQp, RtrParams, RtsParams, SendList, SendOp,
    SendRequest, UdDest,
};
pub use send_list::AddressCycle;
// The values the verbs report are the InfiniBand vocabulary's, shared with sysfs and the reports.
pub use crate::ib::{
    AtomicCap, DeviceLimits, DeviceTransport, Gid, GidEntry, GidType, LinkLayer, Mtu, NodeType,
    PhysState, PortState, default_gid_index, speed_per_lane, width_lanes,
};
