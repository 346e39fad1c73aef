//! The rdma_cm id (`CmId`): address and route resolution, waiting for its events, disconnecting.

use super::channel::{CmEventChannel, Received};
use super::error::CmError;
use super::event::{CmEvent, CmEventKind};
use super::sockaddr::{raw_sockaddr, socket_addr};
use crate::verbs::VerbsError;
use crate::verbs::device::Context;
use rdma_sys::*;
use std::net::{IpAddr, SocketAddr};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The owned `rdma_cm_id`, destroyed when the last holder goes (a `CmId` and every `Context`
/// borrowed from it).
pub(super) struct CmIdInner {
    pub(super) raw: *mut rdma_cm_id,
    pub(super) channel: Arc<CmEventChannel>,
}

// SAFETY: librdmacm ids are used through thread-safe library calls (each a write(2) on the
// channel fd); the fields we read (verbs, port_num, route) are written only by librdmacm while
// it processes an event on the thread that fetched it, which is one of our methods.
unsafe impl Send for CmIdInner {}
// SAFETY: as above.
unsafe impl Sync for CmIdInner {}

impl Drop for CmIdInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from rdma_create_id or a CONNECT_REQUEST and is destroyed once.
        // Every event we fetched was acknowledged at once, so this cannot wait on one; the
        // channel (held by us) outlives the id.
        unsafe { rdma_destroy_id(self.raw) };
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Made by `CmId::resolve`: connects.
    Active,
    /// From a CONNECT_REQUEST: accepts.
    Passive,
    /// Bound and listening.
    Listener,
}

/// An rdma_cm communication id (`rdma_create_id`, RDMA_PS_TCP) on its own event channel.
pub struct CmId {
    pub(super) inner: Arc<CmIdInner>,
    ctx: OnceLock<Arc<Context>>,
    pub(super) role: Role,
    /// The peer's address (the bound address for a listener), for messages.
    pub(super) peer: String,
    pub(super) connected: AtomicBool,
    disconnect_sent: AtomicBool,
    peer_disconnected: AtomicBool,
}

/// Milliseconds left until `deadline`, as librdmacm's timeouts want them (at least 1).
fn ms_left(deadline: Instant) -> i32 {
    deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .clamp(1, i32::MAX as u128) as i32
}

impl CmId {
    pub(super) fn create(
        channel: &Arc<CmEventChannel>,
        target: &str,
    ) -> Result<CmIdInner, VerbsError> {
        let mut raw: *mut rdma_cm_id = ptr::null_mut();
        // SAFETY: the channel is live (the id keeps it alive); `raw` is a valid out-pointer.
        let rc = unsafe {
            rdma_create_id(
                channel.raw,
                &mut raw,
                ptr::null_mut(),
                rdma_port_space::RDMA_PS_TCP,
            )
        };
        VerbsError::check("rdma_create_id", target, rc)?;
        Ok(CmIdInner {
            raw,
            channel: Arc::clone(channel),
        })
    }

    pub(super) fn wrap(inner: CmIdInner, role: Role, peer: String) -> CmId {
        CmId {
            inner: Arc::new(inner),
            ctx: OnceLock::new(),
            role,
            peer,
            connected: AtomicBool::new(false),
            disconnect_sent: AtomicBool::new(false),
            peer_disconnected: AtomicBool::new(false),
        }
    }

    /// Active side: a new id with its own channel, its address and route to `dst` resolved
    /// (`rdma_resolve_addr` from `src`, or any local address, then `rdma_resolve_route`), both
    /// within `timeout`. Afterwards [`context`](Self::context) is the device that reaches `dst`.
    pub fn resolve(
        dst: SocketAddr,
        src: Option<IpAddr>,
        timeout: Duration,
    ) -> Result<CmId, CmError> {
        CmId::resolve_with_tos(dst, src, None, timeout)
    }

    /// [`resolve`](Self::resolve), with the connection's type of service set first when `tos`
    /// is given (`rdma_set_option` RDMA_OPTION_ID_TOS): on RoCE it becomes the GRH traffic
    /// class of the route, and so the IP TOS byte of every packet; it must precede
    /// `rdma_resolve_route`.
    pub fn resolve_with_tos(
        dst: SocketAddr,
        src: Option<IpAddr>,
        tos: Option<u8>,
        timeout: Duration,
    ) -> Result<CmId, CmError> {
        let deadline = Instant::now() + timeout;
        let peer = dst.to_string();
        let channel = CmEventChannel::new()?;
        let id = CmId::wrap(CmId::create(&channel, &peer)?, Role::Active, peer);
        if let Some(tos) = tos {
            id.set_tos(tos)?;
        }
        let mut dst_ss = raw_sockaddr(dst);
        let mut src_ss = src.map(|ip| raw_sockaddr(SocketAddr::new(ip, 0)));
        let src_ptr = src_ss.as_mut().map_or(ptr::null_mut(), |s| {
            (s as *mut libc::sockaddr_storage).cast()
        });
        // SAFETY: the id is live; both sockaddrs live across the call (librdmacm copies them).
        let rc = unsafe {
            rdma_resolve_addr(
                id.inner.raw,
                src_ptr,
                (&mut dst_ss as *mut libc::sockaddr_storage).cast(),
                ms_left(deadline),
            )
        };
        let target = match src {
            Some(ip) => format!("{dst} (from {ip})"),
            None => dst.to_string(),
        };
        VerbsError::check("rdma_resolve_addr", &target, rc)?;
        id.wait_for(
            CmEventKind::AddrResolved,
            "rdma_resolve_addr",
            deadline,
            timeout,
        )?;
        // SAFETY: the id is live with its address resolved.
        let rc = unsafe { rdma_resolve_route(id.inner.raw, ms_left(deadline)) };
        VerbsError::check("rdma_resolve_route", &target, rc)?;
        id.wait_for(
            CmEventKind::RouteResolved,
            "rdma_resolve_route",
            deadline,
            timeout,
        )?;
        Ok(id)
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS)`: the type of service of this id's
    /// connection (one byte, as the kernel takes it).
    fn set_tos(&self, tos: u8) -> Result<(), CmError> {
        // rdma_cma.h's option levels and names (not in rdma-sys's bindings).
        const RDMA_OPTION_ID: i32 = 0;
        const RDMA_OPTION_ID_TOS: i32 = 0;
        let mut value = tos;
        // SAFETY: the id is live; `value` outlives the call, which copies its one byte.
        let rc = unsafe {
            rdma_set_option(
                self.inner.raw,
                RDMA_OPTION_ID,
                RDMA_OPTION_ID_TOS,
                (&mut value as *mut u8).cast(),
                1,
            )
        };
        VerbsError::check("rdma_set_option(TOS)", &self.peer, rc)?;
        Ok(())
    }

    /// The device context librdmacm chose for this id (bound or resolved ids only). It is
    /// librdmacm's, not ours: it stays open while any PD/CQ/QP made from it lives.
    pub fn context(&self) -> Result<Arc<Context>, VerbsError> {
        if let Some(ctx) = self.ctx.get() {
            return Ok(Arc::clone(ctx));
        }
        // SAFETY: the id is live; `verbs` is a plain field librdmacm set when binding.
        let verbs = unsafe { (*self.inner.raw).verbs };
        if verbs.is_null() {
            return Err(VerbsError::new(
                "rdma_cm_id->verbs",
                format!("{} (no device yet: resolve or bind first)", self.peer),
                libc::ENODEV,
            ));
        }
        let keepalive: Arc<dyn std::any::Any + Send + Sync> = self.inner.clone();
        // SAFETY: librdmacm keeps `verbs` open while the id exists, and the context holds the
        // id (`keepalive`) until the last PD/CQ/QP made from it is gone.
        let ctx = self
            .ctx
            .get_or_init(|| unsafe { Context::borrowed(verbs, keepalive) });
        Ok(Arc::clone(ctx))
    }

    /// The device port the id is bound to (`id->port_num`; 0 before binding).
    pub fn port(&self) -> u8 {
        // SAFETY: the id is live; a plain field.
        unsafe { (*self.inner.raw).port_num }
    }

    /// Our address (`rdma_get_local_addr`), once bound or resolved.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        // SAFETY: the id is live; every bit pattern of the union is a valid sockaddr_storage.
        let ss = unsafe { (*self.inner.raw).route.addr.src_addr_union.src_storage };
        socket_addr(&ss)
    }

    /// The peer's address (`rdma_get_peer_addr`), once resolved or requested.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        // SAFETY: as above.
        let ss = unsafe { (*self.inner.raw).route.addr.dst_addr_union.dst_storage };
        socket_addr(&ss)
    }

    /// The peer as messages name it: "to 10.77.0.1:18515" (an error in a call on this id).
    fn call_label(&self) -> String {
        match self.role {
            Role::Active => format!("to {}", self.peer),
            Role::Passive => format!("from {}", self.peer),
            Role::Listener => format!("on {}", self.peer),
        }
    }

    /// "from 10.77.0.1:18515" (what we wait for comes from there).
    fn wait_label(&self) -> String {
        match self.role {
            Role::Listener => format!("on {}", self.peer),
            _ => format!("from {}", self.peer),
        }
    }

    fn note(&self, ev: &CmEvent) {
        if ev.kind == CmEventKind::Disconnected {
            self.peer_disconnected.store(true, Ordering::SeqCst);
        }
    }

    /// Wait until an event of `want`'s type arrives for this id. Harmless strays are skipped;
    /// any other event fails the wait naming the call and the peer.
    pub(super) fn wait_for(
        &self,
        want: CmEventKind,
        call: &'static str,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Received, CmError> {
        loop {
            let Some(r) = self.inner.channel.next(deadline)? else {
                return Err(CmError::Timeout {
                    after: timeout,
                    waiting_for: want,
                    peer: self.wait_label(),
                });
            };
            if r.for_id != self.inner.raw {
                continue; // not ours (cannot happen with one id per channel); already acked
            }
            self.note(&r.event);
            if r.event.kind.same_type(want) {
                return Ok(r);
            }
            if r.event.kind.is_benign() {
                continue;
            }
            return Err(CmError::Event {
                call,
                peer: self.call_label(),
                expected: want,
                got: r.event,
            });
        }
    }

    /// The next event on this id within `timeout` (None if none came), e.g. to watch for
    /// RDMA_CM_EVENT_DISCONNECTED during a test.
    pub fn next_event(&self, timeout: Duration) -> Result<Option<CmEvent>, CmError> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(r) = self.inner.channel.next(deadline)? else {
                return Ok(None);
            };
            if r.for_id == self.inner.raw {
                self.note(&r.event);
                return Ok(Some(r.event));
            }
        }
    }

    /// Tear the connection down (`rdma_disconnect`) and wait for RDMA_CM_EVENT_DISCONNECTED,
    /// which comes when the peer answers (or its CM gives up). Returns at once if the peer
    /// disconnected first. rdma_disconnect cannot touch our QP: move it to ERR to flush it.
    pub fn disconnect(&self, timeout: Duration) -> Result<(), CmError> {
        let deadline = Instant::now() + timeout;
        if !self.disconnect_sent.swap(true, Ordering::SeqCst) {
            // SAFETY: the id is live.
            let rc = unsafe { rdma_disconnect(self.inner.raw) };
            VerbsError::check("rdma_disconnect", &self.peer, rc)?;
        }
        if self.peer_disconnected.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.wait_for(
            CmEventKind::Disconnected,
            "rdma_disconnect",
            deadline,
            timeout,
        )
        .map(|_| ())
    }

    /// Wait until the peer disconnects (RDMA_CM_EVENT_DISCONNECTED), within `timeout`.
    pub fn wait_disconnected(&self, timeout: Duration) -> Result<(), CmError> {
        if self.peer_disconnected.load(Ordering::SeqCst) {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        self.wait_for(
            CmEventKind::Disconnected,
            "rdma_get_cm_event",
            deadline,
            timeout,
        )
        .map(|_| ())
    }

    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        if self.connected.load(Ordering::SeqCst)
            && !self.disconnect_sent.swap(true, Ordering::SeqCst)
        {
            // Best effort: tell the peer before the id goes (its destruction follows once the
            // last context borrowed from it is gone).
            // SAFETY: the id is live (we hold `inner`).
            unsafe { rdma_disconnect(self.inner.raw) };
        }
    }
}
