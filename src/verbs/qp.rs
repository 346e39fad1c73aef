//! Queue pairs (`ibv_create_qp`): creation, the RESET→INIT→RTR→RTS walk, and posting work.

use super::ah::{AddressHandle, PathAttr};
use super::cq::CompletionQueue;
use super::error::VerbsError;
use super::mr::{Access, MemoryRegion};
use super::pd::ProtectionDomain;
pub use super::send_list::SendList;
pub use super::send_op::SendOp;
use crate::ib::Mtu;
use rdma_sys::*;
use std::mem;
use std::ops::Range;
use std::sync::Arc;

/// Transport service of a QP: also what a test asks for (`-c RC|UC|UD`, `"transport"` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum QpType {
    Rc,
    Uc,
    Ud,
}

impl std::fmt::Display for QpType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
        })
    }
}

impl QpType {
    fn to_raw(self) -> u32 {
        match self {
            QpType::Rc => ibv_qp_type::IBV_QPT_RC,
            QpType::Uc => ibv_qp_type::IBV_QPT_UC,
            QpType::Ud => ibv_qp_type::IBV_QPT_UD,
        }
    }
}

/// Queue sizes of a QP (`struct ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// What the peer tells us about its QP so we can connect to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteQp {
    pub qpn: u32,
    pub psn: u32,
    pub path: PathAttr,
}

/// Parameters of the INIT→RTR transition beyond the remote QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtrParams {
    pub path_mtu: Mtu,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
}

/// Parameters of the RTR→RTS transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtsParams {
    pub sq_psn: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub max_rd_atomic: u8,
}

/// Destination of a UD send.
#[derive(Clone, Copy)]
pub struct UdDest<'a> {
    pub ah: &'a AddressHandle,
    pub qpn: u32,
    pub qkey: u32,
}

/// One send-queue work request over a slice of a registered buffer.
pub struct SendRequest<'a> {
    pub wr_id: u64,
    pub op: SendOp,
    pub mr: &'a MemoryRegion,
    pub range: Range<usize>,
    pub signaled: bool,
    pub inline: bool,
    pub ud: Option<UdDest<'a>>,
}

mod mask {
    pub const STATE: u32 = 1 << 0;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const DEST_QPN: u32 = 1 << 20;
}

/// A queue pair. It holds its PD and both CQs, so it can never outlive them.
pub struct QueuePair {
    raw: *mut ibv_qp,
    qp_type: QpType,
    caps: QpCaps,
    pd: Arc<ProtectionDomain>,
    send_cq: Arc<CompletionQueue>,
    recv_cq: Arc<CompletionQueue>,
}

// SAFETY: QPs are thread-safe libibverbs objects (providers lock their queues).
unsafe impl Send for QueuePair {}
// SAFETY: as above.
unsafe impl Sync for QueuePair {}

impl QueuePair {
    pub fn new(
        pd: &Arc<ProtectionDomain>,
        send_cq: &Arc<CompletionQueue>,
        recv_cq: &Arc<CompletionQueue>,
        qp_type: QpType,
        caps: QpCaps,
    ) -> Result<Self, VerbsError> {
        // SAFETY: ibv_qp_init_attr is plain data; all-zero is valid (no SRQ, no context).
        let mut init: ibv_qp_init_attr = unsafe { mem::zeroed() };
        init.send_cq = send_cq.as_ptr();
        init.recv_cq = recv_cq.as_ptr();
        init.qp_type = qp_type.to_raw();
        init.cap = ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: caps.max_send_sge,
            max_recv_sge: caps.max_recv_sge,
            max_inline_data: caps.max_inline_data,
        };
        // SAFETY: PD and CQs are live and kept alive by the clones stored below.
        let raw = unsafe { ibv_create_qp(pd.as_ptr(), &mut init) };
        if raw.is_null() {
            return Err(VerbsError::last(
                "ibv_create_qp",
                format!(
                    "{} ({:?}, send_wr {}, recv_wr {}, inline {})",
                    pd.context().name(),
                    qp_type,
                    caps.max_send_wr,
                    caps.max_recv_wr,
                    caps.max_inline_data
                ),
            ));
        }
        let c = init.cap; // the provider writes back what it actually allocated
        Ok(QueuePair {
            raw,
            qp_type,
            caps: QpCaps {
                max_send_wr: c.max_send_wr,
                max_recv_wr: c.max_recv_wr,
                max_send_sge: c.max_send_sge,
                max_recv_sge: c.max_recv_sge,
                max_inline_data: c.max_inline_data,
            },
            pd: Arc::clone(pd),
            send_cq: Arc::clone(send_cq),
            recv_cq: Arc::clone(recv_cq),
        })
    }

    pub fn qp_num(&self) -> u32 {
        // SAFETY: `raw` is live; qp_num is a plain field.
        unsafe { (*self.raw).qp_num }
    }

    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The capacities the provider actually granted.
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    pub fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    pub fn send_cq(&self) -> &Arc<CompletionQueue> {
        &self.send_cq
    }

    pub fn recv_cq(&self) -> &Arc<CompletionQueue> {
        &self.recv_cq
    }

    fn modify(&self, attr: &mut ibv_qp_attr, mask: u32, what: String) -> Result<(), VerbsError> {
        // SAFETY: `raw` is live; `attr` is initialised for every bit in `mask`.
        let rc = unsafe { ibv_modify_qp(self.raw, attr, mask as i32) };
        VerbsError::check(
            "ibv_modify_qp",
            format!(
                "{} QP 0x{:06x} {}",
                self.pd.context().name(),
                self.qp_num(),
                what
            ),
            rc,
        )
    }

    /// `ibv_modify_qp` with attributes someone else filled (rdma_cm's `rdma_init_qp_attr`).
    pub(crate) fn modify_raw(
        &self,
        attr: &mut ibv_qp_attr,
        mask: u32,
        what: String,
    ) -> Result<(), VerbsError> {
        self.modify(attr, mask, what)
    }

    /// RESET→INIT on `port`. RC/UC QPs get `access`; UD QPs get `qkey`.
    pub fn to_init(
        &self,
        port: u8,
        pkey_index: u16,
        access: Access,
        qkey: u32,
    ) -> Result<(), VerbsError> {
        // SAFETY: ibv_qp_attr is plain data; all-zero is valid.
        let mut a: ibv_qp_attr = unsafe { mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_INIT;
        a.pkey_index = pkey_index;
        a.port_num = port;
        let mut m = mask::STATE | mask::PKEY_INDEX | mask::PORT;
        if self.qp_type == QpType::Ud {
            a.qkey = qkey;
            m |= mask::QKEY;
        } else {
            a.qp_access_flags = access.0;
            m |= mask::ACCESS_FLAGS;
        }
        self.modify(
            &mut a,
            m,
            format!("RESET->INIT (port {port}, pkey_index {pkey_index})"),
        )
    }

    /// INIT→RTR towards `remote` (RC/UC), or just the state change (UD).
    pub fn to_rtr(&self, remote: &RemoteQp, p: &RtrParams) -> Result<(), VerbsError> {
        // SAFETY: ibv_qp_attr is plain data; all-zero is valid.
        let mut a: ibv_qp_attr = unsafe { mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        let mut m = mask::STATE;
        if self.qp_type != QpType::Ud {
            let Some(mtu) = p.path_mtu.to_raw() else {
                return Err(VerbsError::new(
                    "ibv_modify_qp",
                    format!("INIT->RTR: path MTU {} is not an IB MTU", p.path_mtu),
                    libc::EINVAL,
                ));
            };
            a.path_mtu = mtu;
            a.dest_qp_num = remote.qpn;
            a.rq_psn = remote.psn;
            a.ah_attr = remote.path.to_raw();
            m |= mask::AV | mask::PATH_MTU | mask::DEST_QPN | mask::RQ_PSN;
            if self.qp_type == QpType::Rc {
                a.max_dest_rd_atomic = p.max_dest_rd_atomic;
                a.min_rnr_timer = p.min_rnr_timer;
                m |= mask::MAX_DEST_RD_ATOMIC | mask::MIN_RNR_TIMER;
            }
        }
        let gid = remote
            .path
            .grh
            .map(|g| format!(", GID {} via sgid_index {}", g.dgid, g.sgid_index))
            .unwrap_or_default();
        self.modify(
            &mut a,
            m,
            format!(
                "INIT->RTR (remote QPN 0x{:06x}, LID 0x{:04x}{gid}, MTU {})",
                remote.qpn, remote.path.dlid, p.path_mtu
            ),
        )
    }

    /// RTR→RTS.
    pub fn to_rts(&self, p: &RtsParams) -> Result<(), VerbsError> {
        // SAFETY: ibv_qp_attr is plain data; all-zero is valid.
        let mut a: ibv_qp_attr = unsafe { mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_RTS;
        a.sq_psn = p.sq_psn;
        let mut m = mask::STATE | mask::SQ_PSN;
        if self.qp_type == QpType::Rc {
            a.timeout = p.timeout;
            a.retry_cnt = p.retry_cnt;
            a.rnr_retry = p.rnr_retry;
            a.max_rd_atomic = p.max_rd_atomic;
            m |= mask::TIMEOUT | mask::RETRY_CNT | mask::RNR_RETRY | mask::MAX_QP_RD_ATOMIC;
        }
        self.modify(&mut a, m, format!("RTR->RTS (sq_psn 0x{:06x})", p.sq_psn))
    }

    pub(super) fn sge(
        mr: &MemoryRegion,
        range: &Range<usize>,
        what: &'static str,
    ) -> Result<ibv_sge, VerbsError> {
        if range.start > range.end || range.end > mr.len() || range.len() > u32::MAX as usize {
            return Err(VerbsError::new(
                what,
                format!(
                    "bytes {}..{} outside the {}-byte memory region",
                    range.start,
                    range.end,
                    mr.len()
                ),
                libc::EINVAL,
            ));
        }
        Ok(ibv_sge {
            addr: mr.addr() + range.start as u64,
            length: range.len() as u32,
            lkey: mr.lkey(),
        })
    }

    /// Post one receive of `range` within `mr`.
    pub fn post_recv(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
    ) -> Result<(), VerbsError> {
        self.post_recv_request(&mut RecvRequest::new(mr, range)?, wr_id)
    }

    /// Post `req` (built and checked once) with id `wr_id`: a ping-pong's receive per round
    /// trip, without building or checking the request again.
    #[inline]
    pub fn post_recv_request(
        &self,
        req: &mut RecvRequest<'_>,
        wr_id: u64,
    ) -> Result<(), VerbsError> {
        req.wr.wr_id = wr_id;
        req.wr.sg_list = &mut req.sge;
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: `req.wr` and the SGE it points at live across the call (`req` is borrowed
        // mutably for it); the bytes lie in the MR the request borrows for its lifetime, which
        // deregisters before freeing, so the device never writes to freed memory.
        let rc = unsafe { ibv_post_recv(self.raw, &mut req.wr, &mut bad) };
        // The hot path: the error's text is formatted only when there is an error.
        if rc == 0 {
            return Ok(());
        }
        Err(self.post_failed("ibv_post_recv", rc))
    }

    /// A failed post (`rc` as the call returned it) as an error, out of line.
    #[cold]
    #[inline(never)]
    fn post_failed(&self, call: &'static str, rc: i32) -> VerbsError {
        VerbsError::from_rc(call, format!("QP 0x{:06x}", self.qp_num()), rc)
    }

    fn ud_without_dest(&self) -> VerbsError {
        VerbsError::new(
            "ibv_post_send",
            format!(
                "UD QP 0x{:06x}: a send needs the destination's address handle",
                self.qp_num()
            ),
            libc::EINVAL,
        )
    }

    /// Post one send-queue work request.
    pub fn post_send(&self, req: &SendRequest<'_>) -> Result<(), VerbsError> {
        // A UD send without an address handle would make the provider follow a null pointer.
        if self.qp_type == QpType::Ud && req.ud.is_none() {
            return Err(self.ud_without_dest());
        }
        // SAFETY: ibv_send_wr/ibv_sge are plain data; all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let mut sge: ibv_sge = unsafe { mem::zeroed() };
        fill_send_wr(req, &mut wr, &mut sge)?;
        wr.sg_list = &mut sge;
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: `wr`/`sge` live across the call; the local buffer is registered in `mr`
        // (deregistered before it is freed); the AH, if any, is borrowed for the call.
        let rc = unsafe { ibv_post_send(self.raw, &mut wr, &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        VerbsError::check("ibv_post_send", format!("QP 0x{:06x}", self.qp_num()), rc)
    }

    /// Post the first `n` requests of `list` as one chained `ibv_post_send` (a post list).
    /// Inlined into the latency loops: a list chained for `n` on an RC QP goes straight to
    /// the provider; chaining, the UD check and the error are out of line.
    #[inline]
    pub fn post_send_list(&self, list: &mut SendList<'_>, n: usize) -> Result<(), VerbsError> {
        let n = n.min(list.len);
        if n == 0 {
            return Ok(());
        }
        if list.chained != n || self.qp_type == QpType::Ud {
            self.chain_list(list, n)?;
        }
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: the first `n` WRs are filled (SendList::set) and chained to SGEs in the same
        // boxed arrays (chain_list), alive for the call; buffers and AHs are borrowed for 'a by
        // the list.
        let rc = unsafe { ibv_post_send(self.raw, list.wrs.as_mut_ptr(), &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        Err(self.post_list_failed(n, rc))
    }

    /// Before a post of the first `n` (at least 1) requests of `list`: every UD request has
    /// its destination, and the requests are chained to their SGEs and to each other.
    #[cold]
    #[inline(never)]
    fn chain_list(&self, list: &mut SendList<'_>, n: usize) -> Result<(), VerbsError> {
        if self.qp_type == QpType::Ud && list.ud_missing[..n].iter().any(|&m| m) {
            return Err(self.ud_without_dest());
        }
        if list.chained != n {
            for i in 0..n {
                let sge: *mut ibv_sge = &mut list.sges[i];
                let next: *mut ibv_send_wr = if i + 1 < n {
                    &mut list.wrs[i + 1]
                } else {
                    std::ptr::null_mut()
                };
                list.wrs[i].sg_list = sge;
                list.wrs[i].next = next;
            }
            list.chained = n;
        }
        Ok(())
    }

    /// A failed post of `n` requests (`rc` as ibv_post_send returned it) as an error.
    #[cold]
    #[inline(never)]
    fn post_list_failed(&self, n: usize, rc: i32) -> VerbsError {
        let target = format!("QP 0x{:06x} ({n} work requests)", self.qp_num());
        VerbsError::from_rc("ibv_post_send", target, rc)
    }
}

/// Fill one WR and its SGE from a request (validating the local range).
/// One receive of a range of a memory region, built and checked once and posted as often as
/// needed ([`QueuePair::post_recv_request`]); it borrows the region for `'a`.
pub struct RecvRequest<'a> {
    wr: ibv_recv_wr,
    sge: ibv_sge,
    _mr: std::marker::PhantomData<&'a MemoryRegion>,
}

// SAFETY: the raw pointer inside points at the request's own SGE (set at each post) and its
// bytes are in an MR borrowed for 'a, which is Sync; the request is only used through &mut.
unsafe impl Send for RecvRequest<'_> {}

impl<'a> RecvRequest<'a> {
    /// A receive into `range` of `mr` (checked to lie inside it).
    pub fn new(mr: &'a MemoryRegion, range: Range<usize>) -> Result<Self, VerbsError> {
        let sge = QueuePair::sge(mr, &range, "ibv_post_recv")?;
        // SAFETY: ibv_recv_wr is plain data; all-zero is valid.
        let mut wr: ibv_recv_wr = unsafe { mem::zeroed() };
        wr.num_sge = 1;
        Ok(RecvRequest {
            wr,
            sge,
            _mr: std::marker::PhantomData,
        })
    }
}

pub(super) fn fill_send_wr(
    req: &SendRequest<'_>,
    wr: &mut ibv_send_wr,
    sge: &mut ibv_sge,
) -> Result<(), VerbsError> {
    *sge = QueuePair::sge(req.mr, &req.range, "ibv_post_send")?;
    if let Some(why) = req.op.atomic_misfit(req.range.len(), req.inline) {
        return Err(VerbsError::new("ibv_post_send", why, libc::EINVAL));
    }
    wr.wr_id = req.wr_id;
    wr.num_sge = 1;
    let mut flags = 0u32;
    if req.signaled {
        flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
    }
    if req.inline {
        flags |= ibv_send_flags::IBV_SEND_INLINE.0;
    }
    wr.send_flags = flags;
    req.op.fill(wr);
    if let Some(ud) = req.ud {
        wr.wr.ud = ud_t {
            ah: ud.ah.as_ptr(),
            remote_qpn: ud.qpn,
            remote_qkey: ud.qkey,
        };
    }
    Ok(())
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_create_qp; destroyed once, before our PD/CQ Arcs drop.
        unsafe { ibv_destroy_qp(self.raw) };
    }
}
