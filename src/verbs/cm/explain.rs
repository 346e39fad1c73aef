//! What an rdma_cm event's status means: IB CM reject reasons and errnos, with likely causes.

use super::event::CmEventKind;
use crate::verbs::VerbsError;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::CmEvent;

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
}
