//! rdma_cm events: what happened (`CmEventKind`), with the status it came with (`CmEvent`).

use super::explain::explain_status;
use rdma_sys::*;
use std::fmt;

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

    pub(super) fn same_type(self, other: CmEventKind) -> bool {
        self.to_raw() == other.to_raw()
    }

    /// Events that may arrive while waiting for something else and mean no harm: a late
    /// ESTABLISHED, the end of timewait, an address change.
    pub(super) fn is_benign(self) -> bool {
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
}
