//! rdma_cm (librdmacm): connect our own RC QPs by IP address, every wait bounded by a deadline.
//!
//! The PD/CQ/QP are ours (`QueuePair`), not librdmacm's (no `rdma_create_qp`), so the QP is not
//! associated with the cm_id: we walk it RESET→INIT→RTR→RTS ourselves with the attributes
//! `rdma_init_qp_attr` computes from the CM exchange, pass its number in `rdma_conn_param`, and
//! the active side completes with `rdma_establish` after RDMA_CM_EVENT_CONNECT_RESPONSE.
//!
//! Every id has its own event channel whose fd is non-blocking; waiting is `poll` with a deadline.
//! Each event is copied out and acknowledged at once, so no unacknowledged event can ever make
//! `rdma_destroy_id` or `rdma_migrate_id` block.

use super::device::Context;
use super::error::VerbsError;
use super::qp::{QpType, QueuePair};
use rdma_sys::*;
use std::fmt;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Most private data `rdma_connect` carries on RDMA_PS_TCP (rdma_connect(3)).
pub const CONNECT_PRIVATE_DATA_MAX: usize = 56;
/// Most private data `rdma_accept` carries on RDMA_PS_TCP (rdma_accept(3)).
pub const ACCEPT_PRIVATE_DATA_MAX: usize = 196;
/// Most private data an IB CM REJ carries.
pub const REJECT_PRIVATE_DATA_MAX: usize = 148;

/// `ibv_qp_attr_mask` bits 21–24 are kernel-internal RoCE bits (smac/vid) that old kernels leak
/// through `rdma_init_qp_attr`; they mean nothing to `ibv_modify_qp`, so they are dropped.
const KERNEL_ONLY_QP_MASK: u32 = 0xf << 21;

/// What an rdma_cm event says happened (`enum rdma_cm_event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmEventKind {
    AddrResolved,
    AddrError,
    RouteResolved,
    RouteError,
    ConnectRequest,
    ConnectResponse,
    ConnectError,
    Unreachable,
    /// `status` is the transport's reject reason (the IB CM REJ reason on IB and RoCE).
    Rejected {
        status: i32,
    },
    Established,
    Disconnected,
    DeviceRemoval,
    TimewaitExit,
    Other(u32),
}

impl CmEventKind {
    pub fn from_raw(event: u32, status: i32) -> Self {
        use rdma_cm_event_type::*;
        match event {
            RDMA_CM_EVENT_ADDR_RESOLVED => Self::AddrResolved,
            RDMA_CM_EVENT_ADDR_ERROR => Self::AddrError,
            RDMA_CM_EVENT_ROUTE_RESOLVED => Self::RouteResolved,
            RDMA_CM_EVENT_ROUTE_ERROR => Self::RouteError,
            RDMA_CM_EVENT_CONNECT_REQUEST => Self::ConnectRequest,
            RDMA_CM_EVENT_CONNECT_RESPONSE => Self::ConnectResponse,
            RDMA_CM_EVENT_CONNECT_ERROR => Self::ConnectError,
            RDMA_CM_EVENT_UNREACHABLE => Self::Unreachable,
            RDMA_CM_EVENT_REJECTED => Self::Rejected { status },
            RDMA_CM_EVENT_ESTABLISHED => Self::Established,
            RDMA_CM_EVENT_DISCONNECTED => Self::Disconnected,
            RDMA_CM_EVENT_DEVICE_REMOVAL => Self::DeviceRemoval,
            RDMA_CM_EVENT_TIMEWAIT_EXIT => Self::TimewaitExit,
            other => Self::Other(other),
        }
    }

    pub fn to_raw(self) -> u32 {
        use rdma_cm_event_type::*;
        match self {
            Self::AddrResolved => RDMA_CM_EVENT_ADDR_RESOLVED,
            Self::AddrError => RDMA_CM_EVENT_ADDR_ERROR,
            Self::RouteResolved => RDMA_CM_EVENT_ROUTE_RESOLVED,
            Self::RouteError => RDMA_CM_EVENT_ROUTE_ERROR,
            Self::ConnectRequest => RDMA_CM_EVENT_CONNECT_REQUEST,
            Self::ConnectResponse => RDMA_CM_EVENT_CONNECT_RESPONSE,
            Self::ConnectError => RDMA_CM_EVENT_CONNECT_ERROR,
            Self::Unreachable => RDMA_CM_EVENT_UNREACHABLE,
            Self::Rejected { .. } => RDMA_CM_EVENT_REJECTED,
            Self::Established => RDMA_CM_EVENT_ESTABLISHED,
            Self::Disconnected => RDMA_CM_EVENT_DISCONNECTED,
            Self::DeviceRemoval => RDMA_CM_EVENT_DEVICE_REMOVAL,
            Self::TimewaitExit => RDMA_CM_EVENT_TIMEWAIT_EXIT,
            Self::Other(v) => v,
        }
    }

    /// The event's name as librdmacm's `rdma_event_str` spells it.
    pub fn name(self) -> &'static str {
        match self.to_raw() {
            0 => "RDMA_CM_EVENT_ADDR_RESOLVED",
            1 => "RDMA_CM_EVENT_ADDR_ERROR",
            2 => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            3 => "RDMA_CM_EVENT_ROUTE_ERROR",
            4 => "RDMA_CM_EVENT_CONNECT_REQUEST",
            5 => "RDMA_CM_EVENT_CONNECT_RESPONSE",
            6 => "RDMA_CM_EVENT_CONNECT_ERROR",
            7 => "RDMA_CM_EVENT_UNREACHABLE",
            8 => "RDMA_CM_EVENT_REJECTED",
            9 => "RDMA_CM_EVENT_ESTABLISHED",
            10 => "RDMA_CM_EVENT_DISCONNECTED",
            11 => "RDMA_CM_EVENT_DEVICE_REMOVAL",
            12 => "RDMA_CM_EVENT_MULTICAST_JOIN",
            13 => "RDMA_CM_EVENT_MULTICAST_ERROR",
            14 => "RDMA_CM_EVENT_ADDR_CHANGE",
            15 => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            16 => "RDMA_CM_EVENT_ADDRINFO_RESOLVED",
            17 => "RDMA_CM_EVENT_ADDRINFO_ERROR",
            _ => "UNKNOWN EVENT",
        }
    }

    /// Events that report a failure of the operation they answer.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Self::AddrError
                | Self::RouteError
                | Self::ConnectError
                | Self::Unreachable
                | Self::Rejected { .. }
                | Self::DeviceRemoval
        ) || self.to_raw() == rdma_cm_event_type::RDMA_CM_EVENT_MULTICAST_ERROR
    }

    fn same_type(self, other: CmEventKind) -> bool {
        self.to_raw() == other.to_raw()
    }

    /// Events that may arrive while waiting for something else and mean no harm: a late
    /// ESTABLISHED, the end of timewait, an address change.
    fn is_benign(self) -> bool {
        matches!(self, Self::Established | Self::TimewaitExit)
            || self.to_raw() == rdma_cm_event_type::RDMA_CM_EVENT_ADDR_CHANGE
    }
}

impl fmt::Display for CmEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Other(v) if self.name() == "UNKNOWN EVENT" => write!(f, "UNKNOWN EVENT {v}"),
            _ => f.write_str(self.name()),
        }
    }
}

/// One rdma_cm event as we saw it: its kind and its `status` (0, a negative errno, or a
/// transport-specific value such as the IB CM reject reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmEvent {
    pub kind: CmEventKind,
    pub status: i32,
}

impl CmEvent {
    pub fn new(kind: CmEventKind, status: i32) -> Self {
        CmEvent { kind, status }
    }

    /// What the status means, for the operator; None when the status is 0.
    pub fn explain(&self) -> Option<String> {
        explain_status(self.kind, self.status)
    }
}

impl fmt::Display for CmEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.explain() {
            Some(why) => write!(f, "{} (status {}: {why})", self.kind, self.status),
            None => write!(f, "{}", self.kind),
        }
    }
}

/// The IB CM REJ reasons (`enum ib_cm_rej_reason`), with what they usually mean here.
pub fn reject_reason(status: i32) -> Option<(&'static str, &'static str)> {
    Some(match status {
        1 => ("IB_CM_REJ_NO_QP", "the peer has no QP for the connection"),
        2 => ("IB_CM_REJ_NO_EEC", "the peer has no EE context"),
        3 => ("IB_CM_REJ_NO_RESOURCES", "the peer is out of resources"),
        4 => (
            "IB_CM_REJ_TIMEOUT",
            "a CM message timed out (the peer did not answer a REP in time)",
        ),
        5 => (
            "IB_CM_REJ_UNSUPPORTED",
            "the peer does not support a requested feature",
        ),
        6 => (
            "IB_CM_REJ_INVALID_COMM_ID",
            "the peer does not know this connection",
        ),
        7 => (
            "IB_CM_REJ_INVALID_COMM_INSTANCE",
            "the peer saw a stale connection instance",
        ),
        8 => (
            "IB_CM_REJ_INVALID_SERVICE_ID",
            "nothing listens on that address and port (no rdma_cm listener there)",
        ),
        9 => (
            "IB_CM_REJ_INVALID_TRANSPORT_TYPE",
            "the peer does not support this transport (QP type)",
        ),
        10 => (
            "IB_CM_REJ_STALE_CONN",
            "the peer still holds an older connection with this QP; retry after its timewait",
        ),
        11 => (
            "IB_CM_REJ_RDC_NOT_EXIST",
            "no such reliable datagram channel",
        ),
        12 => (
            "IB_CM_REJ_INVALID_GID",
            "the peer rejected the GID of the path",
        ),
        13 => (
            "IB_CM_REJ_INVALID_LID",
            "the peer rejected the LID of the path",
        ),
        14 => (
            "IB_CM_REJ_INVALID_SL",
            "the peer rejected the service level",
        ),
        15 => (
            "IB_CM_REJ_INVALID_TRAFFIC_CLASS",
            "the peer rejected the traffic class",
        ),
        16 => (
            "IB_CM_REJ_INVALID_HOP_LIMIT",
            "the peer rejected the hop limit",
        ),
        17 => (
            "IB_CM_REJ_INVALID_PACKET_RATE",
            "the peer rejected the packet rate",
        ),
        18 => (
            "IB_CM_REJ_INVALID_ALT_GID",
            "the peer rejected the alternate path's GID",
        ),
        19 => (
            "IB_CM_REJ_INVALID_ALT_LID",
            "the peer rejected the alternate path's LID",
        ),
        20 => (
            "IB_CM_REJ_INVALID_ALT_SL",
            "the peer rejected the alternate path's SL",
        ),
        21 => (
            "IB_CM_REJ_INVALID_ALT_TRAFFIC_CLASS",
            "the peer rejected the alternate path's traffic class",
        ),
        22 => (
            "IB_CM_REJ_INVALID_ALT_HOP_LIMIT",
            "the peer rejected the alternate path's hop limit",
        ),
        23 => (
            "IB_CM_REJ_INVALID_ALT_PACKET_RATE",
            "the peer rejected the alternate path's packet rate",
        ),
        24 => (
            "IB_CM_REJ_PORT_CM_REDIRECT",
            "the peer redirects CM traffic to another port",
        ),
        25 => (
            "IB_CM_REJ_PORT_REDIRECT",
            "the peer redirects the connection to another port",
        ),
        26 => ("IB_CM_REJ_INVALID_MTU", "the peer cannot use the path MTU"),
        27 => (
            "IB_CM_REJ_INSUFFICIENT_RESP_RESOURCES",
            "the peer cannot serve that many outstanding RDMA reads/atomics",
        ),
        28 => (
            "IB_CM_REJ_CONSUMER_DEFINED",
            "the peer application rejected the connection (rdma_reject)",
        ),
        29 => (
            "IB_CM_REJ_INVALID_RNR_RETRY",
            "the peer rejected the RNR retry count",
        ),
        30 => (
            "IB_CM_REJ_DUPLICATE_LOCAL_COMM_ID",
            "the peer already has a connection with this id",
        ),
        31 => (
            "IB_CM_REJ_INVALID_CLASS_VERSION",
            "the peer speaks another CM version",
        ),
        32 => (
            "IB_CM_REJ_INVALID_FLOW_LABEL",
            "the peer rejected the flow label",
        ),
        33 => (
            "IB_CM_REJ_INVALID_ALT_FLOW_LABEL",
            "the peer rejected the alternate path's flow label",
        ),
        35 => (
            "IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED",
            "the peer does not support the requested vendor options (ECE)",
        ),
        _ => return None,
    })
}

fn errno_text(errno: i32) -> String {
    VerbsError::new("", "", errno).errno_text()
}

/// Explain an event's status: the errno (or reject reason) and, where it helps, a likely cause.
pub fn explain_status(kind: CmEventKind, status: i32) -> Option<String> {
    if status == 0 {
        return None;
    }
    if let CmEventKind::Rejected { .. } = kind
        && status > 0
    {
        return Some(match reject_reason(status) {
            Some((name, why)) => format!("{name}: {why}"),
            None => format!("IB CM reject reason {status}"),
        });
    }
    if status == -1 {
        // librdmacm reports -1 (and leaves the reason in errno) when it fails to process an
        // event itself, e.g. ENODEV when no local RDMA device serves the resolved address.
        let hint = match kind {
            CmEventKind::AddrError => {
                ": usually no local RDMA device serves the address (is it on the netdev of an \
                 RDMA device, e.g. the rxe netdev?)"
            }
            _ => "",
        };
        return Some(format!("librdmacm could not process the event{hint}"));
    }
    if status > 0 {
        return Some(format!("transport-specific status {status}"));
    }
    let errno = -status;
    let hint = match (kind, errno) {
        (CmEventKind::AddrError, libc::ENODEV) => {
            "no local RDMA device serves that address (is it on the netdev of an RDMA device?)"
        }
        (CmEventKind::AddrError, libc::ETIMEDOUT) => {
            "address resolution (ARP/neighbour discovery) got no answer"
        }
        (CmEventKind::AddrError, libc::EHOSTUNREACH | libc::ENETUNREACH) => {
            "no IP route to that address"
        }
        (CmEventKind::AddrError, libc::EADDRNOTAVAIL) => "the source address is not local",
        (CmEventKind::RouteError, libc::ETIMEDOUT) => "route resolution got no answer",
        (CmEventKind::Unreachable, libc::ETIMEDOUT) => {
            "the peer did not answer the connection request: no such host, its RDMA device is \
             not on that address, or CM packets are lost"
        }
        (CmEventKind::Rejected { .. }, libc::ECONNREFUSED) => "the peer refused the connection",
        (CmEventKind::ConnectError, _) => "the connection could not be completed",
        (CmEventKind::Disconnected, libc::ETIMEDOUT) => {
            "the peer did not answer the disconnect request"
        }
        _ => "",
    };
    let text = errno_text(errno);
    Some(if hint.is_empty() {
        text
    } else {
        format!("{text}; {hint}")
    })
}

/// A failed rdma_cm operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmError {
    /// A librdmacm or libibverbs call failed.
    Verbs(VerbsError),
    /// The awaited event did not come before the deadline.
    Timeout {
        after: Duration,
        waiting_for: CmEventKind,
        /// "from 10.77.0.1:18515" or "on 10.77.0.1:20886" (a listener).
        peer: String,
    },
    /// Another event came instead, e.g. RDMA_CM_EVENT_REJECTED instead of CONNECT_RESPONSE.
    Event {
        call: &'static str,
        /// "to 10.77.0.1:18515", "from 10.77.0.1:41022" or "on 10.77.0.1:20886".
        peer: String,
        expected: CmEventKind,
        got: CmEvent,
    },
}

impl CmError {
    /// The event that ended the operation, if one did.
    pub fn event(&self) -> Option<CmEvent> {
        match self {
            CmError::Event { got, .. } => Some(*got),
            _ => None,
        }
    }
}

impl From<VerbsError> for CmError {
    fn from(e: VerbsError) -> Self {
        CmError::Verbs(e)
    }
}

/// "5s", "1s 500ms": whole milliseconds in humantime form.
fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}

impl fmt::Display for CmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmError::Verbs(e) => e.fmt(f),
            CmError::Timeout {
                after,
                waiting_for,
                peer,
            } => write!(
                f,
                "timed out after {} waiting for {waiting_for} {peer}",
                human(*after)
            ),
            CmError::Event {
                call,
                peer,
                expected,
                got,
            } => write!(
                f,
                "{call} {peer} failed: got {got} while waiting for {expected}"
            ),
        }
    }
}

impl std::error::Error for CmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CmError::Verbs(e) => Some(e),
            _ => None,
        }
    }
}

/// Connection parameters of `rdma_connect`/`rdma_accept` beyond the QP number and private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmConnParams {
    /// Outstanding RDMA reads/atomics we accept from the peer.
    pub responder_resources: u8,
    /// Outstanding RDMA reads/atomics we issue to the peer.
    pub initiator_depth: u8,
    /// Transport retries on a missing ACK (3 bits).
    pub retry_count: u8,
    /// Retries after receiver-not-ready (3 bits; 7 = forever).
    pub rnr_retry_count: u8,
}

impl Default for CmConnParams {
    fn default() -> Self {
        CmConnParams {
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
        }
    }
}

/// A librdmacm event channel (`rdma_create_event_channel`) with a non-blocking fd.
pub struct CmEventChannel {
    raw: *mut rdma_event_channel,
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
    fn next(self: &Arc<Self>, deadline: Instant) -> Result<Option<Received>, VerbsError> {
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
struct Received {
    event: CmEvent,
    /// The id the event is for (for CONNECT_REQUEST: the listener).
    for_id: *mut rdma_cm_id,
    /// CONNECT_REQUEST only: the new id, destroyed if nobody takes it.
    child: Option<CmIdInner>,
    private_data: Vec<u8>,
    responder_resources: u8,
    initiator_depth: u8,
}

/// The owned `rdma_cm_id`, destroyed when the last holder goes (a `CmId` and every `Context`
/// borrowed from it).
struct CmIdInner {
    raw: *mut rdma_cm_id,
    channel: Arc<CmEventChannel>,
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
enum Role {
    /// Made by `CmId::resolve`: connects.
    Active,
    /// From a CONNECT_REQUEST: accepts.
    Passive,
    /// Bound and listening.
    Listener,
}

/// An rdma_cm communication id (`rdma_create_id`, RDMA_PS_TCP) on its own event channel.
pub struct CmId {
    inner: Arc<CmIdInner>,
    ctx: OnceLock<Arc<Context>>,
    role: Role,
    /// The peer's address (the bound address for a listener), for messages.
    peer: String,
    connected: AtomicBool,
    disconnect_sent: AtomicBool,
    peer_disconnected: AtomicBool,
}

fn raw_sockaddr(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for every sockaddr type.
            unsafe { ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above.
            unsafe { ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
        }
    }
    ss
}

fn socket_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which fits and aligns.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Milliseconds left until `deadline`, as librdmacm's timeouts want them (at least 1).
fn ms_left(deadline: Instant) -> i32 {
    deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .clamp(1, i32::MAX as u128) as i32
}

fn check_private_data(
    call: &'static str,
    peer: &str,
    data: &[u8],
    max: usize,
) -> Result<(), VerbsError> {
    if data.len() > max {
        return Err(VerbsError::new(
            call,
            format!(
                "{peer}: {} bytes of private data, at most {max} fit",
                data.len()
            ),
            libc::EINVAL,
        ));
    }
    Ok(())
}

impl CmId {
    fn create(channel: &Arc<CmEventChannel>, target: &str) -> Result<CmIdInner, VerbsError> {
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

    fn wrap(inner: CmIdInner, role: Role, peer: String) -> CmId {
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
        let deadline = Instant::now() + timeout;
        let peer = dst.to_string();
        let channel = CmEventChannel::new()?;
        let id = CmId::wrap(CmId::create(&channel, &peer)?, Role::Active, peer);
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
    fn wait_for(
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

    fn check_qp(&self, qp: &QueuePair, call: &'static str) -> Result<(), VerbsError> {
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
    fn qp_to(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_round_trip_and_are_named_like_rdma_event_str() {
        for raw in 0..=18u32 {
            let k = CmEventKind::from_raw(raw, 0);
            assert_eq!(k.to_raw(), raw);
        }
        assert_eq!(
            CmEventKind::AddrResolved.to_string(),
            "RDMA_CM_EVENT_ADDR_RESOLVED"
        );
        assert_eq!(
            CmEventKind::from_raw(8, 28),
            CmEventKind::Rejected { status: 28 }
        );
        assert_eq!(
            CmEventKind::Rejected { status: 8 }.to_string(),
            "RDMA_CM_EVENT_REJECTED"
        );
        assert_eq!(CmEventKind::from_raw(15, 0), CmEventKind::TimewaitExit);
        assert_eq!(
            CmEventKind::Other(14).to_string(),
            "RDMA_CM_EVENT_ADDR_CHANGE"
        );
        assert_eq!(CmEventKind::Other(99).to_string(), "UNKNOWN EVENT 99");
        assert_eq!(
            CmEventKind::ConnectResponse.name(),
            "RDMA_CM_EVENT_CONNECT_RESPONSE"
        );
        assert!(CmEventKind::Unreachable.is_error());
        assert!(!CmEventKind::Established.is_error());
        assert!(CmEventKind::Established.is_benign());
        assert!(!CmEventKind::Disconnected.is_benign());
    }

    #[test]
    fn statuses_are_explained() {
        let rej = CmEvent::new(CmEventKind::Rejected { status: 8 }, 8);
        let s = rej.to_string();
        assert!(
            s.starts_with("RDMA_CM_EVENT_REJECTED (status 8: IB_CM_REJ_INVALID_SERVICE_ID: "),
            "{s}"
        );
        assert!(s.contains("nothing listens"), "{s}");
        let user = CmEvent::new(CmEventKind::Rejected { status: 28 }, 28);
        assert!(user.explain().unwrap().contains("rdma_reject"));
        let unreach = CmEvent::new(CmEventKind::Unreachable, -libc::ETIMEDOUT);
        let s = unreach.to_string();
        assert!(s.contains("status -110: ETIMEDOUT"), "{s}");
        assert!(s.contains("did not answer"), "{s}");
        let addr = CmEvent::new(CmEventKind::AddrError, -libc::ENODEV);
        assert!(addr.explain().unwrap().contains("ENODEV"));
        assert!(addr.explain().unwrap().contains("RDMA device"));
        assert!(
            CmEvent::new(CmEventKind::AddrError, -1)
                .explain()
                .unwrap()
                .contains("no local RDMA device")
        );
        assert_eq!(CmEvent::new(CmEventKind::Established, 0).explain(), None);
        assert_eq!(
            CmEvent::new(CmEventKind::Established, 0).to_string(),
            "RDMA_CM_EVENT_ESTABLISHED"
        );
        assert_eq!(
            explain_status(CmEventKind::Rejected { status: 77 }, 77).unwrap(),
            "IB CM reject reason 77"
        );
        assert_eq!(reject_reason(28).unwrap().0, "IB_CM_REJ_CONSUMER_DEFINED");
    }

    #[test]
    fn errors_name_the_event_and_the_peer() {
        let t = CmError::Timeout {
            after: Duration::from_secs(5),
            waiting_for: CmEventKind::AddrResolved,
            peer: "from 10.77.0.1:18515".into(),
        };
        assert_eq!(
            t.to_string(),
            "timed out after 5s waiting for RDMA_CM_EVENT_ADDR_RESOLVED from 10.77.0.1:18515"
        );
        let e = CmError::Event {
            call: "rdma_connect",
            peer: "to 10.77.0.1:20887".into(),
            expected: CmEventKind::ConnectResponse,
            got: CmEvent::new(CmEventKind::Rejected { status: 8 }, 8),
        };
        let s = e.to_string();
        assert!(
            s.starts_with("rdma_connect to 10.77.0.1:20887 failed: got RDMA_CM_EVENT_REJECTED"),
            "{s}"
        );
        assert!(
            s.ends_with("while waiting for RDMA_CM_EVENT_CONNECT_RESPONSE"),
            "{s}"
        );
        assert_eq!(e.event().unwrap().status, 8);
        let v: CmError = VerbsError::new("rdma_listen", "10.77.0.1:1", libc::EINVAL).into();
        assert!(
            v.to_string()
                .starts_with("rdma_listen failed on 10.77.0.1:1: EINVAL")
        );
        assert_eq!(human(Duration::from_millis(1500)), "1s 500ms");
    }

    #[test]
    fn private_data_limits_are_checked_before_the_call() {
        assert!(check_private_data("rdma_connect", "p", &[0; 56], 56).is_ok());
        let e = check_private_data("rdma_connect", "10.77.0.1:1", &[0; 57], 56).unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert!(
            e.to_string()
                .contains("57 bytes of private data, at most 56"),
            "{e}"
        );
    }

    #[test]
    fn socket_addresses_survive_the_sockaddr_round_trip() {
        for a in [
            "10.77.0.1:18515",
            "0.0.0.0:0",
            "[fe80::1%3]:20886",
            "[::ffff:10.77.0.1]:1",
        ] {
            let addr: SocketAddr = a.parse().unwrap();
            assert_eq!(socket_addr(&raw_sockaddr(addr)), Some(addr), "{a}");
        }
        // SAFETY: plain data; all-zero is an AF_UNSPEC storage.
        let empty: libc::sockaddr_storage = unsafe { mem::zeroed() };
        assert_eq!(socket_addr(&empty), None);
    }
}
