//! A failed rdma_cm operation: a failed call, a timeout, or an unexpected event.

use super::event::{CmEvent, CmEventKind};
use crate::verbs::VerbsError;
use std::fmt;
use std::time::Duration;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
