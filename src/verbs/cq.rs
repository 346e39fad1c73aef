//! Completion queues, their optional completion channel, and work completions explained.

use super::device::Context;
use super::error::VerbsError;
use rdma_sys::*;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A completion channel (`ibv_create_comp_channel`): a file descriptor to sleep on for CQ events.
pub struct CompletionChannel {
    raw: *mut ibv_comp_channel,
    ctx: Arc<Context>,
}

// SAFETY: channels are thread-safe libibverbs objects.
unsafe impl Send for CompletionChannel {}
// SAFETY: as above.
unsafe impl Sync for CompletionChannel {}

impl CompletionChannel {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Self>, VerbsError> {
        // SAFETY: the context is open and kept alive by the clone we store.
        let raw = unsafe { ibv_create_comp_channel(ctx.as_ptr()) };
        if raw.is_null() {
            return Err(VerbsError::last("ibv_create_comp_channel", ctx.name()));
        }
        Ok(Arc::new(CompletionChannel {
            raw,
            ctx: Arc::clone(ctx),
        }))
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    fn fd(&self) -> i32 {
        // SAFETY: `raw` is live; fd is a plain field.
        unsafe { (*self.raw).fd }
    }
}

impl Drop for CompletionChannel {
    fn drop(&mut self) {
        // SAFETY: every CQ using this channel holds an Arc to it, so none is left.
        unsafe { ibv_destroy_comp_channel(self.raw) };
    }
}

/// The status of a work completion (`enum ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WcStatus(pub u32);

impl WcStatus {
    pub const SUCCESS: WcStatus = WcStatus(0);

    pub fn is_success(self) -> bool {
        self.0 == 0
    }

    /// The status's name as the verbs API spells it.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "IBV_WC_SUCCESS",
            1 => "IBV_WC_LOC_LEN_ERR",
            2 => "IBV_WC_LOC_QP_OP_ERR",
            3 => "IBV_WC_LOC_EEC_OP_ERR",
            4 => "IBV_WC_LOC_PROT_ERR",
            5 => "IBV_WC_WR_FLUSH_ERR",
            6 => "IBV_WC_MW_BIND_ERR",
            7 => "IBV_WC_BAD_RESP_ERR",
            8 => "IBV_WC_LOC_ACCESS_ERR",
            9 => "IBV_WC_REM_INV_REQ_ERR",
            10 => "IBV_WC_REM_ACCESS_ERR",
            11 => "IBV_WC_REM_OP_ERR",
            12 => "IBV_WC_RETRY_EXC_ERR",
            13 => "IBV_WC_RNR_RETRY_EXC_ERR",
            14 => "IBV_WC_LOC_RDD_VIOL_ERR",
            15 => "IBV_WC_REM_INV_RD_REQ_ERR",
            16 => "IBV_WC_REM_ABORT_ERR",
            17 => "IBV_WC_INV_EECN_ERR",
            18 => "IBV_WC_INV_EEC_STATE_ERR",
            19 => "IBV_WC_FATAL_ERR",
            20 => "IBV_WC_RESP_TIMEOUT_ERR",
            21 => "IBV_WC_GENERAL_ERR",
            22 => "IBV_WC_TM_ERR",
            23 => "IBV_WC_TM_RNDV_INCOMPLETE",
            _ => "unknown status",
        }
    }

    /// What usually causes this status, for the operator.
    pub fn likely_cause(self) -> &'static str {
        match self.0 {
            0 => "the operation completed",
            1 => "a received message was larger than the posted receive buffer",
            2 => {
                "the QP could not execute the request: its port's link went down (Soft-RoCE \
                 reports a downed netdev this way), or the request was invalid for it (too many \
                 SGEs, inline too large)"
            }
            4 => "the local buffer is not registered, or its lkey or bounds are wrong",
            5 => "the QP went into the error state earlier; this request was flushed",
            8 => "the local memory region lacks the access rights the operation needs",
            9 => "the peer rejected the request as invalid (unsupported op or length)",
            10 => {
                "the peer's rkey, address or bounds are wrong, the region lacks remote access, \
                 or the peer process is exiting (its memory was released first)"
            }
            11 => "the peer could not complete the operation",
            12 => {
                "no acknowledgement from the peer: it is unreachable, gone, or the GID, path or \
                 MTU is wrong"
            }
            13 => "the receiver posted no receive buffer in time (receiver not ready)",
            15 => "the peer cannot serve that many outstanding RDMA reads/atomics",
            20 => "the responder did not answer in time",
            _ => "see the device's documentation for this status",
        }
    }
}

impl std::fmt::Display for WcStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// Opcode of a completed work request (`enum ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    Send,
    RdmaWrite,
    RdmaRead,
    CompSwap,
    FetchAdd,
    Recv,
    RecvRdmaWithImm,
    Other(u32),
}

impl WcOpcode {
    fn from_raw(v: u32) -> Self {
        match v {
            0 => Self::Send,
            1 => Self::RdmaWrite,
            2 => Self::RdmaRead,
            3 => Self::CompSwap,
            4 => Self::FetchAdd,
            128 => Self::Recv,
            129 => Self::RecvRdmaWithImm,
            v => Self::Other(v),
        }
    }
}

/// One polled work completion, copied out of `ibv_wc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub byte_len: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub vendor_err: u32,
    pub imm_data: Option<u32>,
}

impl Default for Completion {
    fn default() -> Self {
        Completion {
            wr_id: 0,
            status: WcStatus::SUCCESS,
            opcode: WcOpcode::Send,
            byte_len: 0,
            qp_num: 0,
            src_qp: 0,
            vendor_err: 0,
            imm_data: None,
        }
    }
}

/// What a latency loop keeps of a completion ([`Wc::reaped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    pub wr_id: u64,
    pub status: WcStatus,
    pub vendor_err: u32,
    /// A received message's immediate value.
    pub imm_data: Option<u32>,
}

/// A slot one completion is polled into ([`CompletionQueue::poll_into`]): the provider writes
/// it in place and each field is read only when looked at, so a loop that reaps one at a time
/// copies nothing it does not use (returning a [`Reaped`] through `Result<Option<_>>` moved
/// some 20 instructions of fields a completion, bench/cost.sh).
pub struct Wc(ibv_wc);

impl Default for Wc {
    fn default() -> Self {
        // SAFETY: ibv_wc is plain integers and a union of integers: all zeroes is a value.
        Wc(unsafe { std::mem::zeroed() })
    }
}

impl Wc {
    #[inline(always)]
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    #[inline(always)]
    pub fn status(&self) -> WcStatus {
        WcStatus(self.0.status)
    }

    #[inline(always)]
    pub fn vendor_err(&self) -> u32 {
        self.0.vendor_err
    }

    /// Its fields as a [`Reaped`], to keep.
    pub fn reaped(&self) -> Reaped {
        Reaped {
            wr_id: self.0.wr_id,
            status: WcStatus(self.0.status),
            vendor_err: self.0.vendor_err,
            imm_data: imm_of(&self.0),
        }
    }
}

/// A completion's immediate value, when it carries one (IBV_WC_WITH_IMM).
#[inline]
fn imm_of(wc: &ibv_wc) -> Option<u32> {
    let with_imm = wc.wc_flags & 2 != 0; // IBV_WC_WITH_IMM
    // SAFETY: the union holds imm_data when IBV_WC_WITH_IMM is set.
    with_imm.then(|| u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }))
}

/// How many completions one `ibv_poll_cq` call asks for at most.
const POLL_BATCH: usize = 32;

/// A completion queue (`ibv_create_cq`), holding its context and channel.
pub struct CompletionQueue {
    raw: *mut ibv_cq,
    capacity: u32,
    channel: Option<Arc<CompletionChannel>>,
    ctx: Arc<Context>,
}

// SAFETY: CQs are thread-safe libibverbs objects (providers lock internally).
unsafe impl Send for CompletionQueue {}
// SAFETY: as above.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    /// Create a CQ with room for at least `cqe` completions, bound to `channel` if given.
    pub fn new(
        ctx: &Arc<Context>,
        cqe: u32,
        channel: Option<&Arc<CompletionChannel>>,
    ) -> Result<Arc<Self>, VerbsError> {
        let ch = channel.map_or(std::ptr::null_mut(), |c| c.raw);
        // SAFETY: the context (and channel, when given) are live and kept by the clones we store.
        let raw =
            unsafe { ibv_create_cq(ctx.as_ptr(), cqe.max(1) as i32, std::ptr::null_mut(), ch, 0) };
        if raw.is_null() {
            return Err(VerbsError::last(
                "ibv_create_cq",
                format!("{} ({} entries)", ctx.name(), cqe),
            ));
        }
        // SAFETY: `raw` is live; cqe is the actual size the provider chose.
        let capacity = unsafe { (*raw).cqe }.max(0) as u32;
        Ok(Arc::new(CompletionQueue {
            raw,
            capacity,
            channel: channel.cloned(),
            ctx: Arc::clone(ctx),
        }))
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    pub(crate) fn as_ptr(&self) -> *mut ibv_cq {
        self.raw
    }

    /// Poll up to `out.len()` completions without blocking; returns how many were written.
    #[inline]
    pub fn poll(&self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        let mut wcs: [MaybeUninit<ibv_wc>; POLL_BATCH] =
            [const { MaybeUninit::uninit() }; POLL_BATCH];
        let want = out.len().min(POLL_BATCH);
        // SAFETY: `wcs` has room for `want` entries; the provider initialises the first `n`.
        let n = unsafe { ibv_poll_cq(self.raw, want as i32, wcs.as_mut_ptr().cast()) };
        if n < 0 {
            return Err(VerbsError::new("ibv_poll_cq", self.ctx.name(), -n));
        }
        for (slot, wc) in out.iter_mut().zip(&wcs[..n as usize]) {
            // SAFETY: the first `n` entries were written by ibv_poll_cq.
            let wc = unsafe { wc.assume_init_ref() };
            *slot = Completion {
                wr_id: wc.wr_id,
                status: WcStatus(wc.status),
                opcode: WcOpcode::from_raw(wc.opcode),
                byte_len: wc.byte_len,
                qp_num: wc.qp_num,
                src_qp: wc.src_qp,
                vendor_err: wc.vendor_err,
                imm_data: imm_of(wc),
            };
        }
        Ok(n as usize)
    }

    /// Poll one completion into `slot`: true when one came (then `slot` holds it). The
    /// one-at-a-time loops' call (see [`Wc`]).
    #[inline(always)]
    pub fn poll_into(&self, slot: &mut Wc) -> Result<bool, VerbsError> {
        // SAFETY: `slot` has room for one entry, which the provider writes when it returns 1.
        let n = unsafe { ibv_poll_cq(self.raw, 1, &mut slot.0) };
        if n < 0 {
            return Err(self.poll_failed(n));
        }
        Ok(n > 0)
    }

    /// ibv_poll_cq's failure as an error: out of line, so the latency loops that inline
    /// [`poll_into`](Self::poll_into) carry none of its string building.
    #[cold]
    #[inline(never)]
    fn poll_failed(&self, rc: i32) -> VerbsError {
        VerbsError::new("ibv_poll_cq", self.ctx.name(), -rc)
    }

    /// Busy-poll until at least one completion arrives or `deadline` passes (Ok(0) then).
    pub fn poll_until(
        &self,
        out: &mut [Completion],
        deadline: Instant,
    ) -> Result<usize, VerbsError> {
        loop {
            let n = self.poll(out)?;
            if n > 0 || Instant::now() >= deadline {
                return Ok(n);
            }
        }
    }

    /// Arm the CQ so the next completion raises an event on its channel.
    pub fn req_notify(&self, solicited_only: bool) -> Result<(), VerbsError> {
        // SAFETY: `raw` is live.
        let rc = unsafe { ibv_req_notify_cq(self.raw, solicited_only as i32) };
        VerbsError::check("ibv_req_notify_cq", self.ctx.name(), rc)
    }

    /// Sleep until this CQ's channel delivers an event, or `timeout` passes or a signal comes
    /// (Ok(false) then).
    /// The event is consumed and acknowledged; re-arm with [`req_notify`](Self::req_notify).
    pub fn wait_event(&self, timeout: Duration) -> Result<bool, VerbsError> {
        let Some(ch) = &self.channel else {
            return Err(VerbsError::new(
                "ibv_get_cq_event",
                format!("{} (CQ has no completion channel)", self.ctx.name()),
                libc::EINVAL,
            ));
        };
        let mut pfd = libc::pollfd {
            fd: ch.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `pfd` is one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = VerbsError::last("poll (completion channel)", self.ctx.name());
            // A signal's handler ran: no event yet; the caller looks at its stop flag.
            return if e.errno == libc::EINTR {
                Ok(false)
            } else {
                Err(e)
            };
        }
        if rc == 0 {
            return Ok(false);
        }
        let mut cq: *mut ibv_cq = std::ptr::null_mut();
        let mut cq_ctx: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: the channel is readable, so this does not block; out-pointers are valid.
        let rc = unsafe { ibv_get_cq_event(ch.raw, &mut cq, &mut cq_ctx) };
        VerbsError::check("ibv_get_cq_event", self.ctx.name(), rc)?;
        // SAFETY: `cq` is the CQ the event was for (ours: one CQ per channel); ack exactly one.
        unsafe { ibv_ack_cq_events(cq, 1) };
        Ok(true)
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: every QP using this CQ holds an Arc to it, so none is left; events were acked.
        unsafe { ibv_destroy_cq(self.raw) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_have_names_and_causes() {
        assert_eq!(WcStatus(12).name(), "IBV_WC_RETRY_EXC_ERR");
        assert!(WcStatus(12).likely_cause().contains("unreachable"));
        assert!(WcStatus(13).likely_cause().contains("receive"));
        assert!(WcStatus(10).likely_cause().contains("rkey"));
        assert_eq!(WcStatus(12).to_string(), "IBV_WC_RETRY_EXC_ERR (12)");
        assert_eq!(WcStatus(999).name(), "unknown status");
        assert!(WcStatus::SUCCESS.is_success());
    }
}
