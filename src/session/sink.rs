//! Where a session's side output goes, when its caller wants it: status lines, a server's
//! log of clients, the clients it refused. Nothing here prints.

use std::net::IpAddr;
use std::sync::Arc;

/// A callback the caller may give, or none (nothing is reported).
pub struct Sink<F: ?Sized>(pub(super) Option<Arc<F>>);

/// What receives status lines.
pub type StatusFn = dyn Fn(&str) + Send + Sync;

/// What receives refused clients: the address, and why without it.
pub type RefusalFn = dyn Fn(IpAddr, &str) + Send + Sync;

/// Where status lines go ("connected 2 QP(s) to ...", "waiting for a client on ..."):
/// nowhere unless the caller says.
pub type StatusSink = Sink<StatusFn>;

/// Where a server reports each client it refused for want of its key: nowhere unless the
/// caller says (`fabric` reports them to rank 0).
pub type RefusalSink = Sink<RefusalFn>;

impl Sink<StatusFn> {
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Sink(Some(Arc::new(f)))
    }
}

impl Sink<RefusalFn> {
    pub fn new(f: impl Fn(IpAddr, &str) + Send + Sync + 'static) -> Self {
        Sink(Some(Arc::new(f)))
    }
}

impl<F: ?Sized> Clone for Sink<F> {
    fn clone(&self) -> Self {
        Sink(self.0.clone())
    }
}

impl<F: ?Sized> Default for Sink<F> {
    fn default() -> Self {
        Sink(None)
    }
}

impl<F: ?Sized> std::fmt::Debug for Sink<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Sink(..)"
        } else {
            "Sink(none)"
        })
    }
}
