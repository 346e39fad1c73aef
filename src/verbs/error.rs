//! Errors from verbs calls: the call's name, what it acted on, and the errno text.

use std::fmt;
use std::io;

/// A failed libibverbs call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsError {
    /// The C function that failed, e.g. `ibv_open_device`.
    pub call: &'static str,
    /// What it was called on, e.g. `rxe0 port 1`.
    pub target: String,
    /// The errno value it reported.
    pub errno: i32,
}

impl VerbsError {
    pub fn new(call: &'static str, target: impl Into<String>, errno: i32) -> Self {
        VerbsError {
            call,
            target: target.into(),
            errno,
        }
    }

    /// Build the error from the thread's current `errno` (for calls that return NULL or -1).
    pub fn last(call: &'static str, target: impl Into<String>) -> Self {
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        Self::new(call, target, errno)
    }

    /// Interpret an int return code: 0 is success, a positive value is an errno (libibverbs'
    /// convention for most calls), a negative value means "look at errno".
    pub fn check(call: &'static str, target: impl Into<String>, rc: i32) -> Result<(), Self> {
        match rc {
            0 => Ok(()),
            rc => Err(Self::from_rc(call, target, rc)),
        }
    }

    /// The error a failed call's non-zero return code `rc` stands for ([`check`](Self::check)'s
    /// convention: a positive value is the errno, a negative one says "look at errno").
    pub fn from_rc(call: &'static str, target: impl Into<String>, rc: i32) -> Self {
        if rc > 0 {
            return Self::new(call, target, rc);
        }
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(-rc);
        Self::new(call, target, if errno == 0 { -rc } else { errno })
    }

    /// The errno's symbolic name and text, e.g. `ENOSYS: Function not implemented`.
    pub fn errno_text(&self) -> String {
        let text = io::Error::from_raw_os_error(self.errno).to_string();
        // std appends " (os error N)"; we print the number our own way.
        let text = text.split(" (os error").next().unwrap_or(&text).to_string();
        match errno_name(self.errno) {
            Some(name) => format!("{name}: {text}"),
            None => text,
        }
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.target.is_empty() {
            write!(f, "{} failed: {}", self.call, self.errno_text())
        } else {
            write!(
                f,
                "{} failed on {}: {}",
                self.call,
                self.target,
                self.errno_text()
            )
        }
    }
}

impl std::error::Error for VerbsError {}

/// Symbolic names of the errno values verbs calls commonly return.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::ENODATA => "ENODATA",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_call_target_and_errno() {
        let e = VerbsError::new("ibv_query_port", "rxe0 port 3", libc::EINVAL);
        let s = e.to_string();
        assert!(
            s.starts_with("ibv_query_port failed on rxe0 port 3: EINVAL: "),
            "{s}"
        );
        assert!(s.contains("Invalid argument"), "{s}");
        assert!(!s.contains("os error"), "{s}");
    }

    #[test]
    fn check_maps_positive_rc_to_errno() {
        assert_eq!(VerbsError::check("x", "", 0), Ok(()));
        let e = VerbsError::check("ibv_modify_qp", "qp 0x11", libc::EINVAL).unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert_eq!(e.call, "ibv_modify_qp");
    }
}
