//! The passive side: a listening id, and the connection requests it hands out to accept or reject.

use super::channel::CmEventChannel;
use super::error::CmError;
use super::event::CmEventKind;
use super::id::{CmId, Role};
use super::params::{
    ACCEPT_PRIVATE_DATA_MAX, CmConnParams, REJECT_PRIVATE_DATA_MAX, check_private_data,
};
use super::sockaddr::{raw_sockaddr, socket_addr};
use crate::verbs::device::Context;
use crate::verbs::{QueuePair, VerbsError};
use rdma_sys::*;
use std::mem;
use std::net::SocketAddr;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A listening id (`rdma_bind_addr` + `rdma_listen`) on its own channel.
pub struct CmListener {
    id: CmId,
}

impl CmListener {
    /// Listen on `addr` (a port of 0 picks one: see [`local_addr`](Self::local_addr)).
    pub fn bind(addr: SocketAddr, backlog: i32) -> Result<CmListener, CmError> {
        let peer = addr.to_string();
        let channel = CmEventChannel::new()?;
        let id = CmId::wrap(CmId::create(&channel, &peer)?, Role::Listener, peer);
        let mut ss = raw_sockaddr(addr);
        // SAFETY: the id is live; `ss` lives across the call.
        let rc = unsafe {
            rdma_bind_addr(
                id.inner.raw,
                (&mut ss as *mut libc::sockaddr_storage).cast(),
            )
        };
        VerbsError::check("rdma_bind_addr", &id.peer, rc)?;
        // SAFETY: the id is live and bound.
        let rc = unsafe { rdma_listen(id.inner.raw, backlog) };
        VerbsError::check("rdma_listen", &id.peer, rc)?;
        Ok(CmListener { id })
    }

    /// The bound address, with the port the kernel picked.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.id.local_addr()
    }

    /// The device behind the bound address (none when bound to a wildcard address).
    pub fn context(&self) -> Result<Arc<Context>, VerbsError> {
        self.id.context()
    }

    /// Wait up to `timeout` for a client's RDMA_CM_EVENT_CONNECT_REQUEST. The request's new id
    /// moves to its own channel (`rdma_migrate_id`), so its later events never mix with the
    /// listener's.
    pub fn get_request(&self, timeout: Duration) -> Result<IncomingRequest, CmError> {
        let deadline = Instant::now() + timeout;
        let own = CmEventChannel::new()?;
        let mut r = self.id.wait_for(
            CmEventKind::ConnectRequest,
            "rdma_get_cm_event",
            deadline,
            timeout,
        )?;
        let Some(mut child) = r.child.take() else {
            return Err(VerbsError::new(
                "rdma_get_cm_event",
                format!("{}: CONNECT_REQUEST without a new id", self.id.peer),
                libc::EINVAL,
            )
            .into());
        };
        // SAFETY: the child and the new channel are live; the request event was acknowledged,
        // so nothing is outstanding on the child and this does not block.
        let rc = unsafe { rdma_migrate_id(child.raw, own.raw) };
        VerbsError::check("rdma_migrate_id", &self.id.peer, rc)?;
        child.channel = own;
        // SAFETY: the child is live; every bit pattern of the union is a valid sockaddr_storage.
        let dst = unsafe { (*child.raw).route.addr.dst_addr_union.dst_storage };
        let peer = socket_addr(&dst)
            .map(|a| a.to_string())
            .unwrap_or_else(|| "an unknown peer".into());
        Ok(IncomingRequest {
            id: CmId::wrap(child, Role::Passive, peer),
            private_data: r.private_data,
            responder_resources: r.responder_resources,
            initiator_depth: r.initiator_depth,
        })
    }
}

/// A client's connection request, not yet accepted. Dropping it destroys the id, which rejects.
pub struct IncomingRequest {
    id: CmId,
    private_data: Vec<u8>,
    responder_resources: u8,
    initiator_depth: u8,
}

impl IncomingRequest {
    pub fn id(&self) -> &CmId {
        &self.id
    }

    /// The device the request came in on: make the PD/CQ/QP for it here.
    pub fn context(&self) -> Result<Arc<Context>, VerbsError> {
        self.id.context()
    }

    /// The device port the request came in on.
    pub fn port(&self) -> u8 {
        self.id.port()
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.id.peer_addr()
    }

    /// The client's private data (the transport may pad it: 56 bytes on IB/RoCE).
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// Outstanding reads/atomics the client accepts from us (caps our initiator depth).
    pub fn initiator_depth(&self) -> u8 {
        self.initiator_depth
    }

    /// Outstanding reads/atomics the client will issue to us.
    pub fn responder_resources(&self) -> u8 {
        self.responder_resources
    }

    /// See [`CmId::init_qp`]: call it before posting receives on the QP.
    pub fn init_qp(&self, qp: &QueuePair) -> Result<(), CmError> {
        self.id.init_qp(qp)
    }

    /// Accept with the default [`CmConnParams`]; see [`accept_with`](Self::accept_with).
    pub fn accept(
        self,
        qp: &QueuePair,
        private_data: &[u8],
        timeout: Duration,
    ) -> Result<CmId, CmError> {
        self.accept_with(qp, private_data, CmConnParams::default(), timeout)
    }

    /// QP →INIT→RTR→RTS with `rdma_init_qp_attr` (our read/atomic depths, the initiator depth
    /// capped by what the client accepts), `rdma_accept` with its QP number, then wait for
    /// RDMA_CM_EVENT_ESTABLISHED. Returns the connected id.
    pub fn accept_with(
        self,
        qp: &QueuePair,
        private_data: &[u8],
        params: CmConnParams,
        timeout: Duration,
    ) -> Result<CmId, CmError> {
        let deadline = Instant::now() + timeout;
        let id = self.id;
        check_private_data(
            "rdma_accept",
            &id.peer,
            private_data,
            ACCEPT_PRIVATE_DATA_MAX,
        )?;
        let resp_res = params.responder_resources;
        let init_depth = params.initiator_depth.min(self.initiator_depth);
        id.check_qp(qp, "ibv_modify_qp")?;
        let walk = id
            .qp_to(qp, ibv_qp_state::IBV_QPS_INIT, "->INIT", |_| {})
            .and_then(|_| {
                id.qp_to(qp, ibv_qp_state::IBV_QPS_RTR, "INIT->RTR", |a| {
                    a.max_dest_rd_atomic = resp_res
                })
            })
            .and_then(|_| {
                id.qp_to(qp, ibv_qp_state::IBV_QPS_RTS, "RTR->RTS", |a| {
                    a.max_rd_atomic = init_depth
                })
            });
        if let Err(e) = walk {
            // SAFETY: the id is live; no private data.
            unsafe { rdma_reject(id.inner.raw, ptr::null(), 0) };
            return Err(e.into());
        }
        // SAFETY: rdma_conn_param is plain data; all-zero is valid.
        let mut p: rdma_conn_param = unsafe { mem::zeroed() };
        p.private_data = private_data.as_ptr().cast();
        p.private_data_len = private_data.len() as u8;
        p.responder_resources = resp_res;
        p.initiator_depth = init_depth;
        p.retry_count = params.retry_count;
        p.rnr_retry_count = params.rnr_retry_count;
        p.qp_num = qp.qp_num();
        // SAFETY: the id is live with a pending request; `p` and its private data live across
        // the call (librdmacm copies them).
        let rc = unsafe { rdma_accept(id.inner.raw, &mut p) };
        VerbsError::check("rdma_accept", &id.peer, rc)?;
        id.wait_for(CmEventKind::Established, "rdma_accept", deadline, timeout)?;
        id.connected.store(true, Ordering::SeqCst);
        Ok(id)
    }

    /// Refuse the request (`rdma_reject`); the client sees RDMA_CM_EVENT_REJECTED with
    /// IB_CM_REJ_CONSUMER_DEFINED (28) and `private_data`.
    pub fn reject(self, private_data: &[u8]) -> Result<(), CmError> {
        check_private_data(
            "rdma_reject",
            &self.id.peer,
            private_data,
            REJECT_PRIVATE_DATA_MAX,
        )?;
        let ptr = if private_data.is_empty() {
            ptr::null()
        } else {
            private_data.as_ptr().cast()
        };
        // SAFETY: the id is live with a pending request; the data lives across the call.
        let rc = unsafe { rdma_reject(self.id.inner.raw, ptr, private_data.len() as u8) };
        VerbsError::check("rdma_reject", &self.id.peer, rc)?;
        Ok(())
    }
}
