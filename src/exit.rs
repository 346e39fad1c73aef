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
/// Data did not arrive as sent (the `write`/`read` verification found a difference).
pub const DATA_MISMATCH: u8 = 4;
/// Interrupted by SIGINT (128 + 2).
pub const INTERRUPTED: u8 = 130;
/// Stopped by SIGTERM (128 + 15).
pub const TERMINATED: u8 = 143;

/// A mistake in the command line that clap alone cannot see (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Data that did not arrive as sent (exit code 4): the message names the size, the offset and
/// the bytes expected and found.
#[derive(Debug)]
pub struct DataMismatch(pub String);

impl fmt::Display for DataMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DataMismatch {}

/// The exit code for an error: usage errors 2, data mismatches 4, everything else 1.
pub fn code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        USAGE
    } else if err.chain().any(|e| e.is::<DataMismatch>()) {
        DATA_MISMATCH
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
        let data: anyhow::Error = DataMismatch("differs".into()).into();
        let wrapped = Err::<(), _>(data).context("round of 4 bytes").unwrap_err();
        assert_eq!(code_for(&wrapped), DATA_MISMATCH);
    }
}
