//! The connection layer: control channel and its heartbeat, addressing, QP set-up and
//! establishment, the rdma-core compat exchange, and perftest's wire formats.

pub mod admission;
pub mod compat_ibv;
pub mod control;
pub mod endpoint;
pub mod establish;
pub mod heartbeat;
pub mod key;
pub mod perftest_wire;
pub mod protocol;
pub mod request;
pub mod test_qp;
