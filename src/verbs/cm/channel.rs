//! The event channel: a non-blocking fd, polled with a deadline, every event acknowledged at once.

use super::event::{CmEvent, CmEventKind};
use super::id::CmIdInner;
use crate::verbs::VerbsError;
use rdma_sys::*;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::Arc;
use std::time::Instant;

/// A librdmacm event channel (`rdma_create_event_channel`) with a non-blocking fd.
pub struct CmEventChannel {
    pub(super) raw: *mut rdma_event_channel,
}

// SAFETY: the channel is a file descriptor wrapper; librdmacm's calls on it are thread-safe
// (each is one write(2) the kernel serialises), and we never mutate the struct ourselves.
unsafe impl Send for CmEventChannel {}
// SAFETY: as above.
unsafe impl Sync for CmEventChannel {}

impl CmEventChannel {
    pub fn new() -> Result<Arc<Self>, VerbsError> {
        // SAFETY: no preconditions; NULL (with errno) on failure.
        let raw = unsafe { rdma_create_event_channel() };
        if raw.is_null() {
            return Err(VerbsError::last("rdma_create_event_channel", ""));
        }
        let ch = CmEventChannel { raw };
        let fd = ch.fd();
        // SAFETY: `fd` is the channel's open descriptor; F_GETFL/F_SETFL only change its flags.
        let rc = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags < 0 {
                flags
            } else {
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK)
            }
        };
        if rc < 0 {
            return Err(VerbsError::last(
                "fcntl(O_NONBLOCK)",
                "rdma_cm event channel",
            ));
        }
        Ok(Arc::new(ch))
    }

    /// The channel's file descriptor (non-blocking), for an outside poll loop.
    pub fn fd(&self) -> RawFd {
        // SAFETY: `raw` is live; fd is a plain field.
        unsafe { (*self.raw).fd }
    }

    /// The next event, or None once `deadline` passes. The event is copied and acknowledged
    /// before this returns; a CONNECT_REQUEST's new id comes back owned (destroyed on drop).
    pub(super) fn next(
        self: &Arc<Self>,
        deadline: Instant,
    ) -> Result<Option<Received>, VerbsError> {
        loop {
            let mut ev: *mut rdma_cm_event = ptr::null_mut();
            // SAFETY: the channel is live and its fd non-blocking, so this returns at once;
            // `ev` is a valid out-pointer.
            let rc = unsafe { rdma_get_cm_event(self.raw, &mut ev) };
            if rc == 0 && !ev.is_null() {
                // SAFETY: a successful get hands us a valid event until it is acknowledged.
                let r = unsafe { self.copy_event(ev) };
                // SAFETY: acknowledged exactly once; nothing borrowed from it is used after.
                unsafe { rdma_ack_cm_event(ev) };
                return Ok(Some(r));
            }
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if errno != libc::EAGAIN && errno != libc::EWOULDBLOCK && errno != libc::EINTR {
                return Err(VerbsError::new(
                    "rdma_get_cm_event",
                    "rdma_cm event channel",
                    errno,
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let left = deadline - now;
            // Round up so a sub-millisecond remainder sleeps instead of spinning.
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            let mut pfd = libc::pollfd {
                fd: self.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc < 0 {
                let e = VerbsError::last("poll (rdma_cm event channel)", "");
                if e.errno != libc::EINTR {
                    return Err(e);
                }
            }
        }
    }

    /// Copy what we need out of a live event.
    ///
    /// # Safety
    /// `ev` must be a valid event from `rdma_get_cm_event` on this channel, not yet acknowledged.
    unsafe fn copy_event(self: &Arc<Self>, ev: *mut rdma_cm_event) -> Received {
        // SAFETY: the caller guarantees `ev` is valid.
        let e = unsafe { &*ev };
        let event = CmEvent::new(CmEventKind::from_raw(e.event, e.status), e.status);
        // SAFETY: librdmacm zero-fills the event, and fills `conn` for every connection event of
        // RDMA_PS_TCP (the only port space we use); both union members start with plain fields.
        let conn = unsafe { e.param.conn };
        let private_data = if conn.private_data.is_null() || conn.private_data_len == 0 {
            Vec::new()
        } else {
            // SAFETY: librdmacm points private_data at private_data_len bytes inside the event.
            unsafe {
                std::slice::from_raw_parts(
                    conn.private_data as *const u8,
                    conn.private_data_len as usize,
                )
            }
            .to_vec()
        };
        let (for_id, child) =
            if e.event == rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST && !e.id.is_null() {
                // The request's new id is ours from here on, still on this channel.
                let child = CmIdInner {
                    raw: e.id,
                    channel: Arc::clone(self),
                };
                (e.listen_id, Some(child))
            } else {
                (e.id, None)
            };
        Received {
            event,
            for_id,
            child,
            private_data,
            responder_resources: conn.responder_resources,
            initiator_depth: conn.initiator_depth,
        }
    }
}

impl Drop for CmEventChannel {
    fn drop(&mut self) {
        // SAFETY: every id on this channel holds an Arc to it, so none is left.
        unsafe { rdma_destroy_event_channel(self.raw) };
    }
}

/// One event, copied out of librdmacm and already acknowledged.
pub(super) struct Received {
    pub(super) event: CmEvent,
    /// The id the event is for (for CONNECT_REQUEST: the listener).
    pub(super) for_id: *mut rdma_cm_id,
    /// CONNECT_REQUEST only: the new id, destroyed if nobody takes it.
    pub(super) child: Option<CmIdInner>,
    pub(super) private_data: Vec<u8>,
    pub(super) responder_resources: u8,
    pub(super) initiator_depth: u8,
}
