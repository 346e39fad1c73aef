//! Exit codes (documented in rdmadiag(1)) and the error kinds that map onto them.

use std::fmt;

/// Everything went well.
pub const OK: u8 = 0;
/// A runtime failure: no device, a verbs error, a peer that vanished…
pub const FAILURE: u8 = 1;
/// The command line was wrong.
pub const USAGE: u8 = 2;
/// A health threshold (`--expect-*`) was not met.
pub const THRESHOLD: u8 = 3;

/// A mistake in the command line that clap alone cannot see (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The exit code for an error: usage errors 2, everything else 1.
pub fn code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        USAGE
    } else {
        FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn usage_errors_map_to_2_even_when_wrapped() {
        let e: anyhow::Error = UsageError("bad".into()).into();
        assert_eq!(code_for(&e), USAGE);
        let wrapped = Err::<(), _>(e).context("while parsing").unwrap_err();
        assert_eq!(code_for(&wrapped), USAGE);
        assert_eq!(code_for(&anyhow::anyhow!("boom")), FAILURE);
    }
}
