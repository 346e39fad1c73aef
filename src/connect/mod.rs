//! The connection layer: control channel, addressing, QP setup and the rdma-core compat exchange.

pub mod compat_ibv;
pub mod control;
pub mod endpoint;
pub mod test_qp;
