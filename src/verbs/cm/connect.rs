//! Connecting our own QP: the state walk with `rdma_init_qp_attr`, and the active side's connect.

use super::error::CmError;
use super::event::CmEventKind;
use super::id::{CmId, Role};
use super::params::{CONNECT_PRIVATE_DATA_MAX, CmConnParams, check_private_data};
use crate::verbs::{QpType, QueuePair, VerbsError};
use rdma_sys::*;
use std::mem;
use std::ptr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// `ibv_qp_attr_mask` bits 21–24 are kernel-internal RoCE bits (smac/vid) that old kernels leak
/// through `rdma_init_qp_attr`; they mean nothing to `ibv_modify_qp`, so they are dropped.
const KERNEL_ONLY_QP_MASK: u32 = 0xf << 21;

impl CmId {
    pub(super) fn check_qp(&self, qp: &QueuePair, call: &'static str) -> Result<(), VerbsError> {
        if qp.qp_type() != QpType::Rc {
            return Err(VerbsError::new(
                call,
                format!(
                    "{}: QP 0x{:06x} is {:?}; rdma_cm (RDMA_PS_TCP) connects RC QPs",
                    self.peer,
                    qp.qp_num(),
                    qp.qp_type()
                ),
                libc::EINVAL,
            ));
        }
        // SAFETY: the id is live; a plain field.
        let verbs = unsafe { (*self.inner.raw).verbs };
        let qp_ctx = qp.pd().context();
        if verbs != qp_ctx.as_ptr() {
            let ours = self
                .context()
                .map(|c| c.name().to_string())
                .unwrap_or_else(|_| "no device".into());
            return Err(VerbsError::new(
                call,
                format!(
                    "{}: QP 0x{:06x} is on {} but this connection goes through {ours}; make the \
                     QP on the id's context()",
                    self.peer,
                    qp.qp_num(),
                    qp_ctx.name()
                ),
                libc::EINVAL,
            ));
        }
        Ok(())
    }

    /// Move `qp` to `state` with the attributes `rdma_init_qp_attr` gives for this id, after
    /// `tweak` adjusts them.
    pub(super) fn qp_to(
        &self,
        qp: &QueuePair,
        state: u32,
        what: &str,
        tweak: impl FnOnce(&mut ibv_qp_attr),
    ) -> Result<(), VerbsError> {
        // SAFETY: ibv_qp_attr is plain data; all-zero is valid.
        let mut attr: ibv_qp_attr = unsafe { mem::zeroed() };
        attr.qp_state = state;
        let mut mask: i32 = 0;
        // SAFETY: the id is live; `attr` and `mask` are valid out-pointers.
        let rc = unsafe { rdma_init_qp_attr(self.inner.raw, &mut attr, &mut mask) };
        VerbsError::check("rdma_init_qp_attr", format!("{} ({what})", self.peer), rc)?;
        tweak(&mut attr);
        qp.modify_raw(
            &mut attr,
            mask as u32 & !KERNEL_ONLY_QP_MASK,
            format!("{what} (rdma_cm, peer {})", self.peer),
        )
    }

    /// Move `qp` to INIT with rdma_cm's attributes (P_Key index, port, access flags): RESET→INIT
    /// before anything else, or INIT→INIT to refresh the access flags once the CM exchange has
    /// settled them. Call it before posting receives; connect/accept call it again.
    pub fn init_qp(&self, qp: &QueuePair) -> Result<(), CmError> {
        self.check_qp(qp, "ibv_modify_qp")?;
        self.qp_to(qp, ibv_qp_state::IBV_QPS_INIT, "->INIT", |_| {})?;
        Ok(())
    }

    /// Active side: connect `qp` to the resolved peer with the default [`CmConnParams`]
    /// (1 outstanding read each way, retry 7, RNR retry 7). Returns the private data the peer
    /// accepted with (the transport may pad it).
    pub fn connect(
        &self,
        qp: &QueuePair,
        private_data: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, CmError> {
        self.connect_with(qp, private_data, CmConnParams::default(), timeout)
    }

    /// [`connect`](Self::connect) with explicit parameters: QP →INIT, `rdma_connect`, wait for
    /// RDMA_CM_EVENT_CONNECT_RESPONSE, QP INIT→INIT→RTR→RTS with `rdma_init_qp_attr`, then
    /// `rdma_establish`. No ESTABLISHED event follows on this side (librdmacm only makes one
    /// for ids with an associated QP); a late one is skipped by later waits.
    pub fn connect_with(
        &self,
        qp: &QueuePair,
        private_data: &[u8],
        params: CmConnParams,
        timeout: Duration,
    ) -> Result<Vec<u8>, CmError> {
        let deadline = Instant::now() + timeout;
        if self.role != Role::Active {
            return Err(VerbsError::new(
                "rdma_connect",
                format!("{}: only an id made by CmId::resolve connects", self.peer),
                libc::EINVAL,
            )
            .into());
        }
        check_private_data(
            "rdma_connect",
            &self.peer,
            private_data,
            CONNECT_PRIVATE_DATA_MAX,
        )?;
        self.init_qp(qp)?;
        // SAFETY: rdma_conn_param is plain data; all-zero is valid.
        let mut p: rdma_conn_param = unsafe { mem::zeroed() };
        p.private_data = private_data.as_ptr().cast();
        p.private_data_len = private_data.len() as u8;
        p.responder_resources = params.responder_resources;
        p.initiator_depth = params.initiator_depth;
        p.retry_count = params.retry_count;
        p.rnr_retry_count = params.rnr_retry_count;
        p.qp_num = qp.qp_num();
        // SAFETY: the id is live with its route resolved; `p` and the private data it points
        // to live across the call (librdmacm copies them).
        let rc = unsafe { rdma_connect(self.inner.raw, &mut p) };
        VerbsError::check("rdma_connect", &self.peer, rc)?;
        let resp = self.wait_for(
            CmEventKind::ConnectResponse,
            "rdma_connect",
            deadline,
            timeout,
        )?;
        // The CM has negotiated the read/atomic depths; rdma_init_qp_attr returns them.
        let walk = self
            .qp_to(qp, ibv_qp_state::IBV_QPS_INIT, "INIT->INIT", |_| {})
            .and_then(|_| self.qp_to(qp, ibv_qp_state::IBV_QPS_RTR, "INIT->RTR", |_| {}))
            .and_then(|_| self.qp_to(qp, ibv_qp_state::IBV_QPS_RTS, "RTR->RTS", |_| {}));
        if let Err(e) = walk {
            // Tell the peer now rather than letting it time out; best effort.
            // SAFETY: the id is live; no private data.
            unsafe { rdma_reject(self.inner.raw, ptr::null(), 0) };
            return Err(e.into());
        }
        // SAFETY: the id is live, its QP is not associated and CONNECT_RESPONSE was received.
        let rc = unsafe { rdma_establish(self.inner.raw) };
        VerbsError::check("rdma_establish", &self.peer, rc)?;
        self.connected.store(true, Ordering::SeqCst);
        Ok(resp.private_data)
    }
}
