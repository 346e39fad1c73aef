//! The connection layer: control channel and its heartbeat, addressing, QP set-up and
//! establishment, and the rdma-core compat exchange.

pub mod admission;
pub mod compat_ibv;
pub mod control;
pub mod endpoint;
pub mod establish;
pub mod heartbeat;
pub mod key;
pub mod protocol;
pub mod request;
pub mod test_qp;
