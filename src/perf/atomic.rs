//! RDMA atomics (fetch-and-add, compare-and-swap): the work requests bw and lat post, and the
//! check that fails closed when the responder's 8-byte target is not what the operations left.
//!
//! The responder zeroes each QP's target (the first 8 bytes of its buffer) before a round, so
//! the sequence is determinate:
//! - lat, one operation at a time: fetch-and-add i (0-based) adds 1; compare-and-swap i
//!   compares i and swaps i + 1. Either way operation i must return the old value i, and every
//!   returned value is checked.
//! - bw, many in flight: every fetch-and-add adds 1, so after the round each QP's target holds
//!   exactly the adds of that QP that completed (the returned values, racing in one 8-byte
//!   result buffer, are not checked); compare-and-swap compares 0 and swaps 0, so every one
//!   succeeds and leaves the target 0, which is checked; a target that was not 0 stays as it was.
//!
//! After the timed run the initiator reads each target with one more fetch-and-add of 0, off
//! the clock, and compares. A mismatch is a [`DataMismatch`] (exit 4) naming both values.
//!
//! A perftest responder fills its buffer with random bytes and never zeroes it: against one,
//! the initiator reads each target before the run too ([`Targets::AsFound`]) and the sequence
//! starts from that value (every figure above is offset by it, wrapping). A perftest
//! initiator steps its adds through the whole cycle buffer, so a responder serving one checks
//! the sum of its buffer's 8-byte words ([`sum_words`]).

use super::Op;
use crate::connect::endpoint::RemoteMemory;
use crate::connect::test_qp::TestQp;
use crate::exit::DataMismatch;
use crate::verbs::{Completion, SendOp, SendRequest};
use anyhow::{Result, anyhow, bail};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The local bytes an atomic's old value lands in: the start of the QP's buffer.
pub const RESULT: std::ops::Range<usize> = 0..8;
/// Work-request id of the read-back after the run (no engine uses it).
const READ_BACK_ID: u64 = 0x4000_0000_0000_0000;

/// The target's address in the peer's buffer: its start, which must be 8-byte aligned.
fn target(remote: RemoteMemory) -> Result<u64> {
    if remote.len < 8 {
        bail!("the peer exposed no 8-byte buffer for atomics");
    }
    if !remote.addr.is_multiple_of(8) {
        bail!(
            "the peer's buffer at 0x{:x} is not 8-byte aligned, as atomics need",
            remote.addr
        );
    }
    Ok(remote.addr)
}

/// What the initiator knows of the targets before a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Targets {
    /// rdmadiag's responder zeroed them (a target that is not 0 was disturbed).
    #[default]
    Zeroed,
    /// perftest's responder left them random: read each before the run.
    AsFound,
}

/// Operation `i` (0-based) of a latency run on a target that held `base` before it: see the
/// module's sequence.
pub fn lat_op(op: Op, remote: RemoteMemory, base: u64, i: u64) -> Result<SendOp> {
    let (remote_addr, rkey) = (target(remote)?, remote.rkey);
    let before = base.wrapping_add(i);
    Ok(match op {
        Op::AtomicCswap => SendOp::CmpSwap {
            remote_addr,
            rkey,
            compare: before,
            swap: before.wrapping_add(1),
        },
        _ => SendOp::FetchAdd {
            remote_addr,
            rkey,
            add: 1,
        },
    })
}

/// Every operation of a bandwidth run: add 1, or compare 0 and swap 0.
pub fn bw_op(op: Op, remote: RemoteMemory) -> Result<SendOp> {
    let (remote_addr, rkey) = (target(remote)?, remote.rkey);
    Ok(match op {
        Op::AtomicCswap => SendOp::CmpSwap {
            remote_addr,
            rkey,
            compare: 0,
            swap: 0,
        },
        _ => SendOp::FetchAdd {
            remote_addr,
            rkey,
            add: 1,
        },
    })
}

/// The value held in `buf`'s result bytes (host order, as the device wrote it).
pub fn returned(buf: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[RESULT]);
    u64::from_ne_bytes(b)
}

/// Latency operation `i` (0-based) on a target that held `base` returned `found`: it must be
/// `base + i` (module doc).
pub fn check_returned(
    op: Op,
    (base, i): (u64, u64),
    found: u64,
    peer: &str,
) -> Result<(), DataMismatch> {
    let expected = base.wrapping_add(i);
    if found == expected {
        return Ok(());
    }
    Err(DataMismatch(format!(
        "{} {} with {peer} returned {found}, expected {expected}: the target was not as the \
         previous operations left it",
        op.verbs_name(),
        i + 1
    )))
}

/// What a target that held `base` must hold after a run: `completed` adds more (fetch-and-add,
/// and latency compare-and-swap, whose chain leaves its count), or for bandwidth
/// compare-and-swap (0 for 0) what it held: 0 on rdmadiag's zeroed targets.
pub fn expected_final(op: Op, serial: bool, base: u64, completed: u64) -> u64 {
    if op == Op::AtomicCswap && !serial {
        base
    } else {
        base.wrapping_add(completed)
    }
}

/// The sum of `buf`'s 8-byte words (host order, wrapping): what a responder checks after a
/// perftest initiator's adds, stepped through its cycle buffer, have landed.
pub fn sum_words(buf: &[u8]) -> u64 {
    buf.chunks_exact(8)
        .map(|w| u64::from_ne_bytes(w.try_into().unwrap_or_default()))
        .fold(0, u64::wrapping_add)
}

/// `which` target(s) ("the target of QP 0", "the targets of 4 QPs, summed") held `found`
/// after the run, `expected` by the operations completed.
pub fn check_final(
    op: Op,
    which: &str,
    expected: u64,
    found: u64,
    peer: &str,
) -> Result<(), DataMismatch> {
    if found == expected {
        return Ok(());
    }
    Err(DataMismatch(format!(
        "after the {} run {which} on {peer} held {found}, expected {expected}: the operations \
         did not land as sent",
        op.verbs_name()
    )))
}

/// After a perftest client's atomics on this server: its fetch-and-adds (1 each, stepped
/// through each QP's buffer) sum to `adds` over every 8-byte word of our buffers; its
/// compare-and-swaps (0 for 0) leave every word 0. `what` says where `adds` came from.
pub fn check_served(
    qps: &[TestQp],
    op: Op,
    adds: u64,
    what: &str,
    peer: &str,
) -> Result<(), DataMismatch> {
    let found = qps
        .iter()
        .map(|tq| sum_words(tq.mr.as_slice()))
        .fold(0u64, u64::wrapping_add);
    let expected = if op == Op::AtomicFadd { adds } else { 0 };
    if found == expected {
        return Ok(());
    }
    Err(DataMismatch(format!(
        "after the perftest client {peer}'s {} run this side's buffers summed to {found}, \
         expected {}: the operations did not land as sent",
        op.verbs_name(),
        if op == Op::AtomicFadd { what } else { "0" }
    )))
}

/// Read QP `tq`'s target on the peer with one fetch-and-add of 0 (after the run, off the clock).
pub fn read_back(
    tq: &TestQp,
    remote: RemoteMemory,
    timeout: Duration,
    peer: &str,
    stop: &AtomicBool,
) -> Result<u64> {
    let op = SendOp::FetchAdd {
        remote_addr: target(remote)?,
        rkey: remote.rkey,
        add: 0,
    };
    tq.qp.post_send(&SendRequest {
        wr_id: READ_BACK_ID,
        op,
        mr: &tq.mr,
        range: RESULT,
        signaled: true,
        inline: false,
        ud: None,
    })?;
    let deadline = Instant::now() + timeout;
    let mut wcs = [Completion::default(); 16];
    loop {
        let n = tq.cq.poll(&mut wcs)?;
        for c in &wcs[..n] {
            if !c.status.is_success() {
                bail!(
                    "reading back the atomic target on {peer} completed with {}: {}",
                    c.status,
                    c.status.likely_cause()
                );
            }
            if c.wr_id == READ_BACK_ID {
                return Ok(returned(tq.mr.as_slice()));
            }
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "timed out after {} reading back the atomic target on {peer}",
                humantime::format_duration(timeout)
            ));
        }
        if stop.load(Ordering::Relaxed) {
            return Err(crate::exit::Interrupted.into());
        }
    }
}

/// The value the responder gives its target before a round: 0, or with the `test-hooks`
/// feature `RDMADIAG_TEST_ATOMIC_TARGET=N`, N, so the lab can show that a target disturbed
/// behind the initiator's back is reported (exit 4).
#[cfg(feature = "test-hooks")]
pub fn target_start() -> u64 {
    std::env::var("RDMADIAG_TEST_ATOMIC_TARGET")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
}

/// Without the `test-hooks` feature (every shipped build) the target always starts at 0.
#[cfg(not(feature = "test-hooks"))]
pub fn target_start() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEM: RemoteMemory = RemoteMemory {
        addr: 0x10_0000,
        rkey: 9,
        len: 8,
        landing: None,
    };

    #[test]
    fn the_sequence_is_determinate_and_targets_are_aligned() {
        assert_eq!(
            lat_op(Op::AtomicCswap, MEM, 0, 4).unwrap(),
            SendOp::CmpSwap {
                remote_addr: MEM.addr,
                rkey: 9,
                compare: 4,
                swap: 5
            }
        );
        let add = SendOp::FetchAdd {
            remote_addr: MEM.addr,
            rkey: 9,
            add: 1,
        };
        assert_eq!(lat_op(Op::AtomicFadd, MEM, 0, 7).unwrap(), add);
        // Against perftest's random target the chain starts where the target was.
        assert!(matches!(
            lat_op(Op::AtomicCswap, MEM, u64::MAX, 0).unwrap(),
            SendOp::CmpSwap {
                compare: u64::MAX,
                swap: 0,
                ..
            }
        ));
        assert_eq!(bw_op(Op::AtomicFadd, MEM).unwrap(), add);
        assert!(matches!(
            bw_op(Op::AtomicCswap, MEM).unwrap(),
            SendOp::CmpSwap {
                compare: 0,
                swap: 0,
                ..
            }
        ));
        let odd = RemoteMemory {
            addr: 0x1004,
            ..MEM
        };
        assert!(
            bw_op(Op::AtomicFadd, odd)
                .unwrap_err()
                .to_string()
                .contains("aligned")
        );
        let small = RemoteMemory { len: 4, ..MEM };
        assert!(lat_op(Op::AtomicFadd, small, 0, 0).is_err());
    }

    #[test]
    fn returned_values_and_final_targets_are_checked_and_a_disturbed_one_is_named() {
        let mut buf = vec![0u8; 64];
        buf[RESULT].copy_from_slice(&41u64.to_ne_bytes());
        assert_eq!(returned(&buf), 41);
        for op in [Op::AtomicFadd, Op::AtomicCswap] {
            // An undisturbed chain: operation i sees i.
            assert!((0..100).all(|i| check_returned(op, (0, i), i, "peer").is_ok()));
            assert!((0..100).all(|i| check_returned(op, (77, i), 77 + i, "peer").is_ok()));
            assert!(check_returned(op, (77, 3), 3, "peer").is_err());
            // A target moved to 1000 behind our back: the first operation sees it.
            let e = check_returned(op, (0, 0), 1000, "node2")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("returned 1000, expected 0") && e.contains("node2"),
                "{e}"
            );
            assert!(!e.contains('\n'));
        }
        // bw fetch-and-add: the target counts the adds that completed.
        assert_eq!(expected_final(Op::AtomicFadd, false, 0, 5000), 5000);
        assert_eq!(expected_final(Op::AtomicFadd, false, u64::MAX, 2), 1);
        assert!(check_final(Op::AtomicFadd, "the target of QP 0", 5000, 5000, "p").is_ok());
        let e = check_final(Op::AtomicFadd, "the target of QP 1", 5000, 6000, "p")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("held 6000, expected 5000") && e.contains("QP 1"),
            "{e}"
        );
        // cswap: the latency chain leaves its count, bandwidth's 0-for-0 leaves 0.
        assert_eq!(expected_final(Op::AtomicCswap, true, 0, 200), 200);
        assert_eq!(expected_final(Op::AtomicCswap, false, 0, 200), 0);
        // perftest's random target: 0-for-0 compares fail and leave it as it was.
        assert_eq!(expected_final(Op::AtomicCswap, false, 0xdead, 200), 0xdead);
        // A perftest initiator's adds, stepped through the buffer: their sum is their count.
        let mut buf = vec![0u8; 4096];
        for (n, at) in [(3u64, 0), (2, 64), (u64::MAX, 128)] {
            buf[at..at + 8].copy_from_slice(&n.to_ne_bytes());
        }
        assert_eq!(sum_words(&buf), 4);
        let e = check_final(Op::AtomicCswap, "the target of QP 0", 0, 1000, "p").unwrap_err();
        assert!(e.to_string().contains("compare-and-swap"));
    }
}
