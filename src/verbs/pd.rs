//! Protection domains (`ibv_alloc_pd`): the scope every MR, QP and AH lives in.

use super::device::Context;
use super::error::VerbsError;
use rdma_sys::*;
use std::sync::Arc;

/// A protection domain; holds its context open until it is deallocated.
pub struct ProtectionDomain {
    raw: *mut ibv_pd,
    ctx: Arc<Context>,
}

// SAFETY: PDs are thread-safe libibverbs objects; we never mutate through `raw` ourselves.
unsafe impl Send for ProtectionDomain {}
// SAFETY: as above.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Self>, VerbsError> {
        // SAFETY: the context is open for as long as `ctx` lives, and we keep a clone.
        let raw = unsafe { ibv_alloc_pd(ctx.as_ptr()) };
        if raw.is_null() {
            return Err(VerbsError::last("ibv_alloc_pd", ctx.name()));
        }
        Ok(Arc::new(ProtectionDomain {
            raw,
            ctx: Arc::clone(ctx),
        }))
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    pub(crate) fn as_ptr(&self) -> *mut ibv_pd {
        self.raw
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_alloc_pd; every MR/QP/AH holds an Arc to us, so all are gone.
        unsafe { ibv_dealloc_pd(self.raw) };
    }
}
