//! rdma_cm (librdmacm): connect our own RC QPs by IP address, every wait bounded by a deadline.
//!
//! The PD/CQ/QP are ours (`QueuePair`), not librdmacm's (no `rdma_create_qp`), so the QP is not
//! associated with the cm_id: we walk it RESET→INIT→RTR→RTS ourselves with the attributes
//! `rdma_init_qp_attr` computes from the CM exchange, pass its number in `rdma_conn_param`, and
//! the active side completes with `rdma_establish` after RDMA_CM_EVENT_CONNECT_RESPONSE.
//!
//! Every id has its own event channel whose fd is non-blocking; waiting is `poll` with a deadline.
//! Each event is copied out and acknowledged at once, so no unacknowledged event can ever make
//! `rdma_destroy_id` or `rdma_migrate_id` block.

mod channel;
mod connect;
mod error;
mod event;
mod explain;
mod id;
mod listener;
mod params;
mod sockaddr;

pub use channel::CmEventChannel;
pub use error::CmError;
pub use event::{CmEvent, CmEventKind};
pub use explain::{explain_status, reject_reason};
pub use id::CmId;
pub use listener::{CmListener, IncomingRequest};
pub use params::{
    ACCEPT_PRIVATE_DATA_MAX, CONNECT_PRIVATE_DATA_MAX, CmConnParams, REJECT_PRIVATE_DATA_MAX,
};
