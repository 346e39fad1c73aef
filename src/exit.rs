//! Exit codes (documented in rdmadiag(1)) and the error kinds that map onto them.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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

/// Set by SIGINT (Ctrl-C) or SIGTERM: every wait loop checks it and unwinds, releasing resources
/// on the way (the signal is in [`stop_signal`]).
pub static STOP: AtomicBool = AtomicBool::new(false);

/// SIGINT's number (Ctrl-C).
pub const SIGINT: i32 = 2;
/// SIGTERM's number (timeout(1), a batch scheduler ending a job).
pub const SIGTERM: i32 = 15;

/// The first signal that asked this process to stop (0: none).
static STOP_SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// Record that `signal` asked the run to stop; true for the first one.
pub fn record_stop_signal(signal: i32) -> bool {
    STOP_SIGNAL
        .compare_exchange(0, signal as usize, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}

/// The signal that asked the run to stop, if one did.
pub fn stop_signal() -> Option<i32> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => i32::try_from(s).ok(),
    }
}

/// First SIGINT or SIGTERM: record which, and set [`STOP`] so every wait loop unwinds and
/// releases what it holds (the run then exits 130 or 143); a second: exit at once with its code.
///
/// Signal handlers (signal-hook's flags), not a thread in sigwait: in a process that has ever had
/// a second thread, glibc wraps every system call a thread can be cancelled in (`write`: rxe's
/// doorbell, one per post) in its cancellation bookkeeping, about 45 instructions each
/// (bench/cost.sh), which perftest does not pay; a latency client has no other thread.
/// The handlers restart what can be restarted (SA_RESTART); the waits a signal still interrupts
/// (poll, reads with a timeout) take EINTR as a tick and look at [`STOP`].
pub fn stop_on_signals() -> std::io::Result<()> {
    use signal_hook::flag;
    for signal in [SIGINT, SIGTERM] {
        // Each delivery runs these in order: a second signal exits before it is recorded.
        flag::register_conditional_shutdown(signal, i32::from(code_for_signal(signal)), &STOP)?;
        flag::register_usize(signal, &STOP_SIGNAL, signal as usize)?;
        flag::register(signal, &STOP)?;
    }
    Ok(())
}

/// The exit code of a run a signal stopped: 128 + its number (130 for SIGINT, 143 for SIGTERM).
pub fn code_for_signal(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(FAILURE)
}

/// The signal as its name says it, for the line on stderr.
pub fn signal_name(signal: i32) -> String {
    match signal {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}

/// A wait that gave up because a signal asked the run to stop (exit code 130 or 143).
#[derive(Debug)]
pub struct Interrupted;

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match stop_signal() {
            Some(s) => write!(f, "stopped by {}", signal_name(s)),
            None => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Interrupted {}

/// Context for an error that ends a run after its report was printed: that report is the run's
/// one document (no error document follows it); the message says what the report holds.
#[derive(Debug)]
pub struct AfterReport(pub String);

impl fmt::Display for AfterReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AfterReport {}

/// Whether the report was already printed before `err` ended the run ([`AfterReport`] as the
/// error or a context at any depth: anyhow's downcast searches them all).
pub fn after_report(err: &anyhow::Error) -> bool {
    err.downcast_ref::<AfterReport>().is_some()
}

/// The exit code for an error: usage errors 2, data mismatches 4, a stop asked for by a signal
/// 128 + the signal (SIGINT when none was recorded), everything else 1.
pub fn code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<Interrupted>()) {
        code_for_signal(stop_signal().unwrap_or(SIGINT))
    } else if err.chain().any(|e| e.is::<UsageError>()) {
        USAGE
    } else if err.downcast_ref::<DataMismatch>().is_some() {
        // As the error or as a context at any depth (a report's mismatch is a context).
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

    #[test]
    fn a_stop_exits_128_plus_the_signal() {
        assert_eq!(code_for_signal(SIGINT), INTERRUPTED);
        assert_eq!(code_for_signal(SIGTERM), TERMINATED);
        let stopped = Err::<(), _>(anyhow::Error::new(Interrupted))
            .context("waiting for a client")
            .unwrap_err();
        // No signal recorded (a library caller set STOP itself): as Ctrl-C.
        assert_eq!(code_for(&stopped), INTERRUPTED);
        assert_eq!(format!("{stopped:#}"), "waiting for a client: interrupted");
        assert!(record_stop_signal(SIGTERM), "the first signal is recorded");
        assert!(!record_stop_signal(SIGINT), "a second does not replace it");
        assert_eq!(stop_signal(), Some(SIGTERM));
        assert_eq!(code_for(&stopped), TERMINATED);
        assert_eq!(
            format!("{stopped:#}"),
            "waiting for a client: stopped by SIGTERM"
        );
        let cut = Err::<(), _>(anyhow::Error::new(Interrupted))
            .context(AfterReport("the changes over 1 s".into()))
            .unwrap_err();
        assert!(after_report(&cut) && !after_report(&stopped));
        assert_eq!(code_for(&cut), TERMINATED, "the signal still sets the code");
        // A mismatch found in a printed report: no error document, exit 4; one found during
        // the run (no report printed): the error is the document.
        let reported = anyhow::Error::new(AfterReport("the report shows it".into()))
            .context(DataMismatch("RDMA READ verification failed".into()));
        assert!(after_report(&reported));
        assert_eq!(code_for(&reported), DATA_MISMATCH);
        assert!(format!("{reported:#}").starts_with("RDMA READ verification failed"));
        let during: anyhow::Error = DataMismatch("returned 1000, expected 0".into()).into();
        assert!(!after_report(&during));
        assert_eq!(code_for(&during), DATA_MISMATCH);
    }
}
