//! Memory regions that own their page-aligned buffer (`ibv_reg_mr`).

use super::error::VerbsError;
use super::pd::ProtectionDomain;
use rdma_sys::*;
use std::alloc::{self, Layout};
use std::ops::BitOr;
use std::sync::Arc;

/// Access rights of a memory region (`enum ibv_access_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access(pub u32);

impl Access {
    pub const NONE: Access = Access(0);
    pub const LOCAL_WRITE: Access = Access(1);
    pub const REMOTE_WRITE: Access = Access(2);
    pub const REMOTE_READ: Access = Access(4);
    pub const REMOTE_ATOMIC: Access = Access(8);

    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// A zero-filled, page-aligned heap buffer.
struct AlignedBuffer {
    ptr: *mut u8,
    layout: Layout,
}

impl AlignedBuffer {
    fn new(len: usize) -> Option<Self> {
        let page = page_size();
        let layout = Layout::from_size_align(len.max(1).next_multiple_of(page), page).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        (!ptr.is_null()).then_some(AlignedBuffer { ptr, layout })
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated with exactly this layout.
        unsafe { alloc::dealloc(self.ptr, self.layout) }
    }
}

/// The host's memory page size in bytes.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// A registered memory region. It owns its buffer, which is freed only after deregistration,
/// so the device can never touch freed memory; it holds its PD.
pub struct MemoryRegion {
    raw: *mut ibv_mr,
    len: usize,
    access: Access,
    // Declared after `raw`'s owner logic: dropped after `Drop::drop` deregisters.
    buf: AlignedBuffer,
    pd: Arc<ProtectionDomain>,
}

// SAFETY: the buffer is uniquely owned; slices to it follow Rust's borrow rules through &/&mut self.
unsafe impl Send for MemoryRegion {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for MemoryRegion {}

impl MemoryRegion {
    /// Allocate `len` zeroed bytes (page-aligned) and register them with `access`.
    pub fn new(pd: &Arc<ProtectionDomain>, len: usize, access: Access) -> Result<Self, VerbsError> {
        let target = format!("{} ({} bytes)", pd.context().name(), len);
        let buf = AlignedBuffer::new(len).ok_or_else(|| {
            VerbsError::new("alloc (memory region buffer)", target.clone(), libc::ENOMEM)
        })?;
        // SAFETY: `buf` is valid for `len` bytes and outlives the registration (see Drop).
        let raw = unsafe { ibv_reg_mr(pd.as_ptr(), buf.ptr.cast(), len.max(1), access.0 as i32) };
        if raw.is_null() {
            return Err(VerbsError::last("ibv_reg_mr", target));
        }
        Ok(MemoryRegion {
            raw,
            len,
            access,
            buf,
            pd: Arc::clone(pd),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn access(&self) -> Access {
        self.access
    }

    pub fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    pub fn lkey(&self) -> u32 {
        // SAFETY: `raw` is a live registration.
        unsafe { (*self.raw).lkey }
    }

    pub fn rkey(&self) -> u32 {
        // SAFETY: `raw` is a live registration.
        unsafe { (*self.raw).rkey }
    }

    /// The address the peer uses for RDMA to this region.
    pub fn addr(&self) -> u64 {
        self.buf.ptr as u64
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `buf` holds at least `len` initialised (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.buf.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` gives unique access.
        unsafe { std::slice::from_raw_parts_mut(self.buf.ptr, self.len) }
    }
}

impl MemoryRegion {
    /// Read one byte the device (or a peer's RDMA WRITE) may be changing: volatile, so every
    /// poll really reads memory. None beyond the end.
    pub fn read_volatile(&self, offset: usize) -> Option<u8> {
        if offset >= self.len {
            return None;
        }
        // SAFETY: in bounds of the live buffer; a u8 read cannot tear; volatile because the
        // NIC writes this memory behind the compiler's back.
        let v = unsafe { std::ptr::read_volatile(self.buf.ptr.add(offset)) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        Some(v)
    }

    /// Write one byte the device reads (the last byte of a WRITE latency test's source) without
    /// taking the region mutably, so a posted work request built once may keep borrowing it.
    /// False beyond the end.
    pub fn write_volatile(&self, offset: usize, v: u8) -> bool {
        if offset >= self.len {
            return false;
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: in bounds of the live buffer; a u8 write cannot tear. The region's memory is
        // shared with the device, which reads and writes it at any time: no Rust reference to
        // these bytes is assumed stable (`as_slice` is a view of device memory, read between
        // operations), and the volatile write is not elided or moved past the post that follows.
        unsafe { std::ptr::write_volatile(self.buf.ptr.add(offset), v) };
        true
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_reg_mr; deregistering before `buf` is freed (fields drop
        // after this body) guarantees the device no longer maps the memory.
        unsafe { ibv_dereg_mr(self.raw) };
    }
}
