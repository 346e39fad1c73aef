//! How far this thread's test has got (listen, connect, handshake...) and with whom: what an
//! error document says beside the message.

use std::cell::RefCell;

/// A server waiting for its client.
pub const LISTEN: &str = "listen";
/// Reaching the server's control port.
pub const CONNECT: &str = "connect";
/// The greeting and the test request.
pub const HANDSHAKE: &str = "handshake";
/// Creating the queue pairs and connecting them to the peer's.
pub const QP_SETUP: &str = "qp setup";
/// A round of the test.
pub const TRANSFER: &str = "transfer";
/// Each side's figures, and the end of the run.
pub const RESULT_EXCHANGE: &str = "result exchange";

/// Where a test is: its phase and, once known, the peer's control address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    pub phase: &'static str,
    pub peer: Option<String>,
}

thread_local! {
    static CURRENT: RefCell<Option<Stage>> = const { RefCell::new(None) };
}

/// This thread's test enters `phase`; `peer` replaces the known peer when given.
pub fn enter(phase: &'static str, peer: Option<&str>) {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let peer = peer
            .map(str::to_string)
            .or_else(|| c.as_ref().and_then(|p| p.peer.clone()));
        *c = Some(Stage { phase, peer });
    });
}

/// Where this thread's test got to (None: no test started).
pub fn current() -> Option<Stage> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Forget the last test (a new one starts).
pub fn reset() {
    CURRENT.with(|c| *c.borrow_mut() = None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_stays_known_across_phases_and_threads_keep_their_own() {
        reset();
        assert_eq!(current(), None);
        enter(CONNECT, Some("10.0.0.1:18515"));
        enter(QP_SETUP, None);
        let p = current().unwrap();
        assert_eq!(
            (p.phase, p.peer.as_deref()),
            (QP_SETUP, Some("10.0.0.1:18515"))
        );
        std::thread::spawn(|| assert_eq!(current(), None))
            .join()
            .unwrap();
        reset();
        assert_eq!(current(), None);
    }
}
