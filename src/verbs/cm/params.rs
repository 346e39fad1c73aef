//! What a connection request carries besides the QP: CM parameters and private-data limits.

use crate::verbs::VerbsError;

/// Most private data `rdma_connect` carries on RDMA_PS_TCP (rdma_connect(3)).
pub const CONNECT_PRIVATE_DATA_MAX: usize = 56;
/// Most private data `rdma_accept` carries on RDMA_PS_TCP (rdma_accept(3)).
pub const ACCEPT_PRIVATE_DATA_MAX: usize = 196;
/// Most private data an IB CM REJ carries.
pub const REJECT_PRIVATE_DATA_MAX: usize = 148;

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

pub(super) fn check_private_data(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
