//! The latency engine for one-sided operations. WRITE: each side RDMA-writes into the other's
//! buffer and spins on the last byte changing (perftest's ib_write_lat); READ: the initiator
//! reads and waits for the completion; atomics as READ, each returned value checked
//! (crate::perf::atomic). SEND latency is the ping-pong engine (crate::pingpong).

use super::{Countdown, Op, Pulse, Side, atomic};
use crate::clock::{Clock, Deadline, Stamp};
use crate::connect::endpoint::RemoteMemory;
use crate::connect::test_qp::TestQp;
use crate::stats::{LatencyRecorder, Samples};
use crate::verbs::{AddressCycle, SendList, SendOp, SendRequest, Wc};
use anyhow::{Result, anyhow, bail};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The last-byte value that tells the responder the initiator's final write has come.
const STOP_MARK: u8 = 255;

/// How the two sides of a WRITE latency run mark their writes and where they land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Marks {
    /// rdmadiag's: the last byte cycles 1..=254 and 255 marks the final write, so the
    /// responder needs no iteration count; each write lands `max_size` bytes into the peer's
    /// buffer (its first half is the source).
    #[default]
    Rdmadiag,
    /// perftest's ib_write_lat: the last byte is the iteration number's low byte, both sides
    /// count the same iterations, and the peer's advertised address is its landing zone.
    Perftest,
}

/// What one latency run does.
#[derive(Debug, Clone)]
pub struct LatParams {
    pub op: Op,
    pub size: usize,
    pub iterations: Option<u64>,
    pub duration: Option<Duration>,
    /// Send writes of up to this many bytes inline.
    pub inline_max: usize,
    /// WRITE latency: request a completion every this many writes. 1 (perftest's ib_write_lat):
    /// each side also waits for its write's completion, inside the sample.
    pub signal_every: u64,
    /// The operations a `run_serial` run cycles over: operation i uses slot i % slots, i.e.
    /// bytes `(i % slots) * size..` of both buffers. 1 for latency tests.
    pub slots: u64,
    /// Test-only: leave operation number N (0-based) unposted, as if it had been lost, to prove
    /// that verification notices data that never arrived (`RDMADIAG_TEST_DROP_TRANSFER`).
    pub drop_for_test: Option<u64>,
    /// WRITE latency: whose marks and layout.
    pub marks: Marks,
    /// Atomics: what the target held before the run (0 on rdmadiag's zeroed target; read
    /// first against perftest's random one).
    pub atomic_base: u64,
    pub timeout: Duration,
    pub peer: String,
}

/// Samples of one side: full round trips for READ; for WRITE the initiator's round trips (and,
/// against perftest, the responder's: the time between its writes, as perftest's own server
/// measures).
pub struct LatOutcome {
    pub latency: LatencyRecorder,
    pub iterations: u64,
    pub elapsed: Duration,
}

/// Where a WRITE latency test's landing zone starts: on a page of its own past the source,
/// as perftest keeps them apart (the byte the peer's write changes and the byte this side
/// writes then share no cache line, nor page).
pub fn landing_offset(max_size: usize) -> usize {
    max_size.max(1).next_multiple_of(LANDING_ALIGN)
}

/// The landing zone's alignment (a page on every host this runs on).
const LANDING_ALIGN: usize = 4096;

/// Bytes each side's buffer needs for a WRITE latency test: a source, then a landing zone.
pub fn write_buffer_len(max_size: usize) -> usize {
    landing_offset(max_size) + max_size
}

/// Where the peer's writes land in our buffer and ours in the peer's: `own` is what we
/// advertised (None: nothing), `theirs` what the peer did. rdmadiag's wire: each side's
/// advertised zone when both say where it is, else (a peer that does not) both at `max_size`,
/// the layout before zones were advertised. perftest's: its advertised address is its zone.
fn landing_zones(
    marks: Marks,
    own: Option<usize>,
    theirs: Option<u64>,
    max_size: usize,
) -> (usize, u64) {
    match (marks, own, theirs) {
        (Marks::Perftest, own, _) => (own.unwrap_or(max_size), 0),
        (Marks::Rdmadiag, Some(own), Some(theirs)) => (own, theirs),
        (Marks::Rdmadiag, ..) => (max_size, max_size as u64),
    }
}

/// The mark of the iteration after one marked `m` (both start at 1): perftest's the iteration
/// number's low byte, wrapping; rdmadiag's cycles 1..=254 (iteration i's is i % 254 + 1, never
/// 0 nor STOP_MARK). A step, not a division, in the loop.
#[inline(always)]
fn next_mark(m: u8, perftest: bool) -> u8 {
    match (perftest, m) {
        (true, _) => m.wrapping_add(1),
        (false, 254) => 1,
        (false, _) => m + 1,
    }
}

/// Our RDMA WRITEs: sequence-numbered, signaled every `signal_every` and the last, posted from
/// one work request built (and checked) once: per post only its id and signal bit change.
struct Writes<'a> {
    list: SendList<'a>,
    /// Where our writes' completions are polled into.
    wc: Wc,
    sent: u64,
    acked: u64,
    signals: Countdown,
}

/// Writes allowed in flight (the send queue holds 64).
const WRITE_WINDOW: u64 = 48;

impl<'a> Writes<'a> {
    fn new(req: &SendRequest<'a>, signal_every: u64) -> Result<Self> {
        Ok(Writes {
            list: SendList::single(req)?,
            wc: Wc::default(),
            sent: 0,
            acked: 0,
            signals: Countdown::new(signal_every),
        })
    }

    /// Reap at most one completion (one is all a strict run ever has in flight); true when
    /// one came.
    #[inline(always)]
    fn reap(&mut self, tq: &TestQp, peer: &str) -> Result<bool> {
        if !tq.cq.poll_into(&mut self.wc)? {
            return Ok(false);
        }
        if !self.wc.status().is_success() {
            return Err(failed_write(peer, &self.wc));
        }
        self.acked = self.acked.max(self.wc.wr_id() + 1);
        Ok(true)
    }

    /// Reap until fewer than `window` writes are in flight (1: all of them done). The deadline
    /// reads the clock only once the wait has lasted (crate::clock::Deadline).
    #[inline(always)]
    fn wait_room(&mut self, tq: &TestQp, p: &LatParams, window: u64) -> Result<()> {
        if self.sent - self.acked < window {
            return Ok(());
        }
        let mut deadline = Deadline::new(p.timeout);
        loop {
            if self.reap(tq, &p.peer)? {
                if self.sent - self.acked < window {
                    return Ok(());
                }
            } else if deadline.expired() {
                return Err(write_timed_out(p));
            }
        }
    }

    /// Wait until byte `landing` of our buffer is `want` (or `or`): the peer's WRITE of
    /// iteration `i` (0-based) has landed; reap our writes meanwhile. Plain bytes, not a
    /// predicate: nothing called through a pointer in the spin.
    #[inline(always)]
    fn wait_landing(
        &mut self,
        tq: &TestQp,
        (landing, want, or): (usize, u8, Option<u8>),
        i: u64,
        p: &LatParams,
        stop: &AtomicBool,
    ) -> Result<u8> {
        // The clock is read only once the wait has lasted: not at all on the fast path.
        let mut deadline = Deadline::new(p.timeout);
        let mut spins = 0u32;
        loop {
            let seen = tq.mr.read_volatile(landing).unwrap_or(0);
            if seen == want || Some(seen) == or {
                return Ok(seen);
            }
            // A byte read costs next to nothing: reap, look at the stop flag and count one
            // deadline spin only every 256.
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) {
                // Only unsignaled runs have writes in flight here (a strict one waited for
                // its write's completion before this wait): no empty poll otherwise.
                if self.sent > self.acked {
                    self.reap(tq, &p.peer)?;
                }
                if deadline.expired() {
                    return Err(landing_timed_out(p, i, seen));
                }
                if stop.load(Ordering::Relaxed) {
                    return Err(crate::exit::Interrupted.into());
                }
            }
        }
    }

    #[inline(always)]
    fn post(&mut self, tq: &TestQp, last: bool) -> Result<()> {
        // Every `signal_every`-th write and the last.
        let signaled = self.signals.tick() || last;
        self.list.mark(0, self.sent, signaled);
        tq.qp.post_send_list(&mut self.list, 1)?;
        self.sent += 1;
        Ok(())
    }
}

/// Our WRITE's completion did not come in time.
#[cold]
#[inline(never)]
fn write_timed_out(p: &LatParams) -> anyhow::Error {
    anyhow!(
        "our RDMA WRITE to {} did not complete within {}",
        p.peer,
        humantime::format_duration(p.timeout)
    )
}

/// The peer's WRITE of iteration `i` (0-based) did not land in time; `seen` is the byte there.
#[cold]
#[inline(never)]
fn landing_timed_out(p: &LatParams, i: u64, seen: u8) -> anyhow::Error {
    anyhow!(
        "timed out after {} waiting for the peer's RDMA WRITE of iteration {} from {} (is the \
         peer still running? the landing zone's last byte holds {seen})",
        humantime::format_duration(p.timeout),
        i + 1,
        p.peer
    )
}

/// A failed WRITE's completion as an error (out of line: the loop only tests the status).
#[cold]
#[inline(never)]
fn failed_write(peer: &str, c: &Wc) -> anyhow::Error {
    anyhow!(
        "an RDMA operation with {peer} completed with {}: {} (vendor error 0x{:x})",
        c.status(),
        c.status().likely_cause(),
        c.vendor_err()
    )
}

/// WRITE latency, either side. The landing zone of `size` bytes is where [`landing_zones`]
/// puts it.
pub fn run_write(
    tq: &TestQp,
    side: Side,
    remote: RemoteMemory,
    max_size: usize,
    p: &LatParams,
    stop: &AtomicBool,
) -> Result<LatOutcome> {
    let size = p.size;
    let perftest = p.marks == Marks::Perftest;
    // Where the peer's writes land in our buffer, and ours in the peer's.
    let (own_landing, remote_landing) =
        landing_zones(p.marks, tq.landing, remote.landing, max_size);
    if remote.len < remote_landing.saturating_add(size as u64) {
        bail!("the peer's buffer is too small for {size}-byte writes");
    }
    if tq.mr.len() < own_landing + size {
        bail!("this side's buffer is too small for the peer's {size}-byte writes");
    }
    let mut next = 1u8;
    let stop_mark = (!perftest).then_some(STOP_MARK);
    let clock = Clock::get();
    let mut last_post: Option<Stamp> = None;
    let inline = size <= p.inline_max.min(tq.qp.caps().max_inline_data as usize);
    let landing = own_landing + size - 1;
    let total = p.iterations.unwrap_or(u64::MAX);
    let mut latency = Samples::new(clock, p.iterations);
    let mut writes = Writes::new(
        &SendRequest {
            wr_id: 0,
            op: SendOp::Write {
                remote_addr: remote.addr + remote_landing,
                rkey: remote.rkey,
            },
            mr: &tq.mr,
            range: 0..size,
            signaled: false,
            inline,
            ud: None,
        },
        p.signal_every,
    )?;
    // perftest's way: our write's completion is part of every sample (and every reply).
    let strict = p.signal_every <= 1;
    let start = Instant::now();
    // One clock read per sample, as perftest's: the initiator's sample runs from its previous
    // round trip's end (the moment this write is posted, give or take the loop) to this one's.
    let mut t = clock.now();
    let run_until = p.duration.map_or(Stamp::NEVER, |d| clock.after(t, d));
    let mut i = 0u64;
    loop {
        let last = i + 1 >= total || t >= run_until;
        // This iteration's mark.
        let want = next;
        next = next_mark(next, perftest);
        let v = match stop_mark {
            Some(stop) if last => stop,
            _ => want,
        };
        if side == Side::Responder {
            // The responder learns "last" from the mark itself (or, against perftest, from the
            // count both sides share), and echoes it.
            let seen = writes.wait_landing(tq, (landing, want, stop_mark), i, p, stop)?;
            writes.wait_room(tq, p, WRITE_WINDOW)?;
            tq.mr.write_volatile(size - 1, seen);
            let stopped = Some(seen) == stop_mark;
            let last = stopped || i + 1 >= total;
            if perftest {
                // perftest's server times the gap between its writes: one round trip each.
                let now = clock.now();
                if let Some(before) = last_post.replace(now) {
                    latency.push(before, now);
                }
            }
            writes.post(tq, last)?;
            if strict {
                writes.wait_room(tq, p, 1)?;
            }
            i += 1;
            if stopped || i >= total {
                break;
            }
            continue;
        }
        tq.mr.write_volatile(size - 1, v);
        writes.post(tq, last)?;
        if strict {
            writes.wait_room(tq, p, 1)?;
        }
        writes.wait_landing(tq, (landing, v, None), i, p, stop)?;
        let end = clock.now();
        // (After the rare move of a full buffer, the next sample starts after it.)
        t = if latency.push(t, end) {
            clock.now()
        } else {
            end
        };
        // Keep the send queue from filling (unsignaled runs: a strict one has none in flight).
        if !strict {
            writes.wait_room(tq, p, WRITE_WINDOW)?;
        }
        i += 1;
        if last {
            break;
        }
    }
    writes.wait_room(tq, p, 1)?;
    Ok(LatOutcome {
        latency: latency.finish(),
        iterations: i,
        elapsed: start.elapsed(),
    })
}

/// One-sided operations one at a time, each timed to its completion (the responder's CPU takes
/// no part): READ latency, and the WRITE/READ diagnostics. Bytes `0..size` of our buffer are
/// the source (WRITE) or sink (READ); the peer's buffer starts at `remote.addr`.
pub fn run_serial(
    tq: &TestQp,
    remote: RemoteMemory,
    p: &LatParams,
    stop: &AtomicBool,
    pulse: &mut Pulse,
) -> Result<LatOutcome> {
    let slots = p.slots.max(1);
    let span = slots * p.size as u64;
    if remote.len < span || (tq.mr.len() as u64) < span {
        bail!(
            "the buffers are too small for {slots} slot(s) of {} bytes",
            p.size
        );
    }
    let (op, name) = match p.op {
        Op::AtomicFadd | Op::AtomicCswap => (
            atomic::lat_op(p.op, remote, p.atomic_base, 0)?,
            p.op.verbs_name(),
        ),
        Op::Write => (
            SendOp::Write {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            "RDMA WRITE",
        ),
        _ => (
            SendOp::Read {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            "RDMA READ",
        ),
    };
    // One work request built and checked once; per operation only its id, its slot's
    // addresses (slots > 1) and a compare-and-swap's operands change.
    let mut list = SendList::new(1);
    let req = SendRequest {
        wr_id: 0,
        op,
        mr: &tq.mr,
        range: 0..p.size,
        signaled: true,
        inline: false,
        ud: None,
    };
    // (Atomics stay on their one target word, and their result lands at the buffer's start.)
    let cycled = slots > 1 && !p.op.is_atomic();
    if cycled {
        let cycle = AddressCycle {
            stride: p.size as u64,
            positions: slots,
        };
        list.set_cycled(0, &req, cycle)?;
    } else {
        list.set(0, &req)?;
    }
    let total = p.iterations.unwrap_or(u64::MAX);
    let clock = Clock::get();
    let mut latency = Samples::new(clock, p.iterations);
    let start = Instant::now();
    // One clock read per sample, as perftest's: a sample runs from the previous completion
    // (the moment this operation is posted, give or take the loop) to this one's.
    let mut t = clock.now();
    let run_until = p.duration.map_or(Stamp::NEVER, |d| clock.after(t, d));
    pulse.start(clock, t);
    let mut wc = Wc::default();
    let mut i = 0u64;
    while i < total && t < run_until {
        if p.drop_for_test == Some(i) {
            i += 1;
            continue;
        }
        if cycled {
            list.place(0, i);
        }
        if let SendOp::CmpSwap { .. } = op {
            let before = p.atomic_base.wrapping_add(i);
            list.set_compare_swap(0, before, before.wrapping_add(1));
        }
        list.mark(0, i, true);
        tq.qp.post_send_list(&mut list, 1)?;
        let mut deadline = Deadline::new(p.timeout);
        let mut spins = 0u32;
        loop {
            if tq.cq.poll_into(&mut wc)? {
                break;
            }
            if deadline.expired() {
                return Err(anyhow!(
                    "timed out after {} waiting for {name} {} with {} (is the peer still \
                     running and reachable?)",
                    humantime::format_duration(p.timeout),
                    i + 1,
                    p.peer
                ));
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && stop.load(Ordering::Relaxed) {
                return Err(crate::exit::Interrupted.into());
            }
        }
        let end = clock.now();
        if !wc.status().is_success() {
            bail!(
                "{name} {} with {} completed with {}: {}",
                i + 1,
                p.peer,
                wc.status(),
                wc.status().likely_cause()
            );
        }
        // (After the rare move of a full buffer or a beat, the next sample starts after it.)
        t = if latency.push(t, end) | pulse.beat_if_due(clock, end) {
            clock.now()
        } else {
            end
        };
        if p.op.is_atomic() {
            let found = atomic::returned(tq.mr.as_slice());
            atomic::check_returned(p.op, (p.atomic_base, i), found, &p.peer)?;
        }
        i += 1;
    }
    Ok(LatOutcome {
        latency: latency.finish(),
        iterations: i,
        elapsed: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rdmadiag's mark of iteration `i`, as a formula.
    fn mark(i: u64) -> u8 {
        (i % 254) as u8 + 1
    }

    /// The loop's stepped marks are the iteration's: rdmadiag's `mark(i)`, perftest's `i + 1`.
    #[test]
    fn stepped_marks_are_the_iterations() {
        let (mut ours, mut theirs) = (1u8, 1u8);
        for i in 0..2000u64 {
            assert_eq!(ours, mark(i), "rdmadiag's at {i}");
            assert_eq!(theirs, (i + 1) as u8, "perftest's at {i}");
            ours = next_mark(ours, false);
            theirs = next_mark(theirs, true);
        }
    }

    #[test]
    fn marks_cycle_without_zero_or_stop() {
        let marks: Vec<u8> = (0..600).map(mark).collect();
        assert!(marks.iter().all(|&m| m != 0 && m != STOP_MARK));
        assert!(
            marks.windows(2).all(|w| w[0] != w[1]),
            "each iteration differs"
        );
    }

    /// Both sides of rdmadiag's wire put the landing zone on its own page when both advertise
    /// it; with a peer that does not (an older rdmadiag), both keep the old layout, so neither
    /// waits on a byte the other never writes. perftest's zone is its advertised address.
    #[test]
    fn landing_zones_are_on_their_own_page_unless_the_peer_does_not_say() {
        assert_eq!(landing_offset(2), 4096);
        assert_eq!(landing_offset(4096), 4096);
        assert_eq!(landing_offset(4097), 8192);
        assert_eq!(write_buffer_len(64), 4096 + 64);
        let own = Some(landing_offset(64));
        assert_eq!(
            landing_zones(Marks::Rdmadiag, own, Some(8192), 64),
            (4096, 8192)
        );
        assert_eq!(landing_zones(Marks::Rdmadiag, own, None, 64), (64, 64));
        assert_eq!(
            landing_zones(Marks::Rdmadiag, None, Some(4096), 64),
            (64, 64)
        );
        assert_eq!(landing_zones(Marks::Perftest, own, None, 64), (4096, 0));
        // The old layout's zone lies inside the new buffer too.
        assert!(64 + 64 <= write_buffer_len(64));
    }
}
