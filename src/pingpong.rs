//! The ping-pong engine: SEND/RECV round trips over a connected test QP. It never prints.

use crate::clock::{Clock, Deadline, Stamp};
use crate::connect::control::QpType;
use crate::connect::test_qp::{GRH_BYTES, TestQp};
use crate::perf::{Countdown, Progress, Side};
use crate::stats::{LatencyRecorder, Samples};
use crate::verbs::{
    CompletionQueue, Reaped, RecvRequest, SendList, SendOp, SendRequest, UdDest, Wc,
};
use anyhow::{Result, bail};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Send work requests carry this bit and their sequence number in their id.
const SEND_BIT: u64 = 1 << 63;
/// Sends allowed in flight before the send queue counts as full (it holds 64).
const SEND_WINDOW: u64 = 48;

/// What a ping-pong run needs besides the QP.
#[derive(Debug, Clone)]
pub struct PingpongParams {
    pub size: usize,
    /// Length of the receive area (at least `size`; larger when one QP serves a size sweep).
    pub recv_size: usize,
    pub iterations: u64,
    pub rx_depth: u32,
    pub events: bool,
    /// Run for this long instead of `iterations` (the initiator decides; it marks its last
    /// message so the responder stops too).
    pub duration: Option<Duration>,
    /// Mark the initiator's last message with an immediate value the responder stops on
    /// (rdmadiag peers); rdma-core's pingpong counts iterations instead.
    pub mark_last: bool,
    /// Send messages up to this size inline.
    pub inline_max: usize,
    /// Request a completion for every this many sends (and the last). 1, as ibv_rc_pingpong
    /// and perftest's ib_send_lat: each side also waits for its own send's completion before
    /// a round trip counts (the initiator) or before the next message (the responder). More
    /// than 1: completions are reaped on the way, outside the samples.
    pub signal_every: u64,
    /// Longest wait for any one completion.
    pub timeout: Duration,
    /// Who is on the other side, for messages.
    pub peer: String,
}

/// The measured result of one side's run.
pub struct PingpongOutcome {
    /// Round-trip samples: on the initiator from each send to the reply; on the responder
    /// from each reply to the next message (one sample fewer).
    pub latency: LatencyRecorder,
    pub elapsed: Duration,
    pub round_trips: u64,
}

/// Bytes of one receive slot.
fn slot_len(transport: QpType, size: usize) -> usize {
    size + if transport == QpType::Ud {
        GRH_BYTES
    } else {
        0
    }
}

/// Size of the registered buffer: a send area of `size`, then one receive area (at offset
/// `size`) that every posted receive shares, as ibv_rc_pingpong does: the data is not
/// inspected, and one small buffer keeps the memory touched per round trip to a few pages.
pub fn buffer_len(transport: QpType, size: usize, _rx_depth: u32) -> usize {
    size + slot_len(transport, size)
}

fn slot(tq: &TestQp, p: &PingpongParams) -> Range<usize> {
    let at = p.recv_size;
    at..at + slot_len(tq.transport, p.recv_size)
}

/// Post the initial receives; do this before telling the peer we are ready.
pub fn post_receives(tq: &TestQp, p: &PingpongParams) -> Result<()> {
    let mut recv = RecvRequest::new(&tq.mr, slot(tq, p))?;
    for i in 0..p.rx_depth as u64 {
        tq.qp.post_recv_request(&mut recv, i)?;
    }
    Ok(())
}

/// Hands out completions one by one, polling for each or sleeping on events; each lands in
/// its slot (`wc`), read where it is until the next.
struct Poller<'a> {
    cq: &'a CompletionQueue,
    events: bool,
    armed: bool,
    wc: Wc,
}

impl<'a> Poller<'a> {
    fn new(cq: &'a CompletionQueue, events: bool) -> Self {
        Poller {
            cq,
            events,
            armed: false,
            wc: Wc::default(),
        }
    }

    /// The next completion into `wc` (true), or false once `timeout` has passed without one. A
    /// round trip has at most two completions ready (the message and our send): one poll each,
    /// no batch to copy. Inlined into the loop (a call's entry, exit and returned result cost
    /// some 45 instructions a round trip, bench/cost.sh); the wait stays a call, made once a
    /// wait.
    #[inline(always)]
    fn next(&mut self, timeout: Duration, stop: &AtomicBool) -> Result<bool> {
        if self.cq.poll_into(&mut self.wc)? {
            return Ok(true);
        }
        self.wait(timeout, stop)
    }

    /// The CQ was empty: spin (or sleep on events) until a completion comes. The clock is
    /// read only once the CQ has stayed empty for a while.
    #[inline(never)]
    fn wait(&mut self, timeout: Duration, stop: &AtomicBool) -> Result<bool> {
        let mut spins = 0u32;
        let mut bound = Deadline::new(timeout);
        let mut deadline = None;
        let mut deadline = move || *deadline.get_or_insert_with(|| Instant::now() + timeout);
        loop {
            if self.cq.poll_into(&mut self.wc)? {
                return Ok(true);
            }
            if self.events {
                if !self.armed {
                    self.cq.req_notify(false)?;
                    self.armed = true;
                    continue; // poll once more: a completion may have beaten the arming
                }
                let left = deadline().saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                if self.cq.wait_event(left.min(Duration::from_millis(100)))? {
                    self.armed = false;
                }
            } else {
                // No PAUSE hint: it delays noticing the completion (and under QEMU's TCG it
                // leaves the translated block on every spin); the clock is read rarely.
                if bound.expired() {
                    return Ok(false);
                }
                spins = spins.wrapping_add(1);
                if !spins.is_multiple_of(512) {
                    continue;
                }
            }
            if stop.load(Ordering::Relaxed) {
                return Err(crate::exit::Interrupted.into());
            }
        }
    }
}

/// A failed completion as an error; `what` names the round trip (built only on failure: no
/// formatting in the timed loop).
#[inline(always)]
fn check(c: &Wc, what: impl FnOnce() -> String) -> Result<()> {
    if c.status().is_success() {
        return Ok(());
    }
    Err(failed(c, what()))
}

#[cold]
#[inline(never)]
fn failed(c: &Wc, what: String) -> anyhow::Error {
    anyhow::anyhow!(
        "{what}: the {} completed with {}: {} (vendor error 0x{:x})",
        if c.wr_id() & SEND_BIT != 0 {
            "send"
        } else {
            "receive"
        },
        c.status(),
        c.status().likely_cause(),
        c.vendor_err()
    )
}

/// A wait's error during round trip `i` (0-based): a stop keeps its kind (its exit code); other
/// errors name the round trip after them. Out of line: the loop carries only the call.
#[cold]
#[inline(never)]
fn during(e: anyhow::Error, i: u64, of_n: &str) -> anyhow::Error {
    if e.is::<crate::exit::Interrupted>() {
        e.context(format!("round trip {}{of_n}", i + 1))
    } else {
        anyhow::anyhow!("{e} during round trip {}{of_n}", i + 1)
    }
}

/// Immediate value marking the initiator's last message.
pub const LAST_IMM: u32 = 0x4c41_5354;

/// The send every round trip posts, built and checked once: per post only its id, its signal
/// bit and (the last) its immediate value change.
fn reply_list<'a>(tq: &'a TestQp, p: &PingpongParams, remote: (u32, u32)) -> Result<SendList<'a>> {
    let (remote_qpn, remote_qkey) = remote;
    let inline = p.size <= p.inline_max.min(tq.qp.caps().max_inline_data as usize) && p.size > 0;
    let ud = match (&tq.ah, tq.transport) {
        (Some(ah), QpType::Ud) => Some(UdDest {
            ah,
            qpn: remote_qpn,
            qkey: remote_qkey,
        }),
        _ => None,
    };
    Ok(SendList::single(&SendRequest {
        wr_id: 0,
        op: SendOp::Send,
        mr: &tq.mr,
        range: 0..p.size,
        signaled: false,
        inline,
        ud,
    })?)
}

/// Post send number `seq`, signalled when `signals` says (every `signal_every`-th) or `last`,
/// the final one (marked when `mark`).
#[inline(always)]
fn send_reply(
    tq: &TestQp,
    list: &mut SendList<'_>,
    signals: &mut Countdown,
    seq: u64,
    last: bool,
    mark: bool,
) -> Result<()> {
    let signaled = signals.tick() || last;
    list.mark(0, SEND_BIT | seq, signaled);
    if last && mark {
        list.set_send_imm(0, Some(LAST_IMM));
    }
    tq.qp.post_send_list(list, 1)?;
    Ok(())
}

/// Round trips between updates of the progress counters (two relaxed stores, off the hot path).
const PROGRESS_EVERY: u64 = 64;

/// Run `p.iterations` round trips. The peer's QP number and Q_Key are needed for UD; `progress`
/// counts the round trips done (for a progress line).
pub fn run(
    tq: &TestQp,
    side: Side,
    remote: (u32, u32),
    p: &PingpongParams,
    progress: &Progress,
    stop: &AtomicBool,
) -> Result<PingpongOutcome> {
    let mut poller = Poller::new(&tq.cq, p.events);
    let mut sends = reply_list(tq, p, remote)?;
    let mut signals = Countdown::new(p.signal_every);
    let mut recv = RecvRequest::new(&tq.mr, slot(tq, p))?;
    let mut latency = Samples::new(Clock::get(), p.duration.is_none().then_some(p.iterations));
    // Sends posted, and sends known complete (through the signaled ones).
    let (mut sent, mut acked) = (0u64, 0u64);
    let clock = Clock::get();
    let mut start: Option<Stamp> = None;
    let mut last_reply: Option<Stamp> = None;
    let mut rounds = 0u64;
    let n = match (side, p.duration) {
        (_, None) => p.iterations,
        (_, Some(_)) => u64::MAX,
    };
    // One clock read per sample, as perftest's: the initiator's round trip runs from the end
    // of the previous one (this send's post, give or take the loop) to the reply's arrival.
    let mut t = clock.now();
    let run_until = p.duration.map(|d| clock.after(t, d));
    let of_n = if p.duration.is_some() {
        String::new()
    } else {
        format!(" of {n}")
    };
    let wait_err = |i: u64, what: &str| {
        anyhow::anyhow!(
            "timed out after {} waiting for {what} of round trip {}{of_n} from {} (is the \
             peer still running and reachable?)",
            humantime::format_duration(p.timeout),
            i + 1,
            p.peer
        )
    };
    let strict = p.signal_every <= 1;
    // A message that arrived while the responder waited for its own send's completion.
    let mut early: Option<Reaped> = None;
    for i in 0..n {
        let mut last = i + 1 == n;
        if side == Side::Initiator {
            last |= run_until.is_some_and(|u| t >= u);
            if sent - acked >= SEND_WINDOW {
                bail!("the send queue to {} stopped draining", p.peer);
            }
            send_reply(tq, &mut sends, &mut signals, sent, last, p.mark_last)?;
            sent += 1;
            // The elapsed time starts once the first send is posted, where ibv_rc_pingpong
            // takes its start time (its usec/iter leaves the first post out; the first sample,
            // as perftest's, keeps it). One more clock read, once a run.
            if start.is_none() {
                start = Some(clock.now());
            }
        }
        // Wait for the peer's message (and reap our sends on the way). Strict: on the initiator
        // the round trip also ends only once our send has completed.
        let mut got = early.take();
        while got.is_none() || (strict && side == Side::Initiator && acked < sent) {
            if !poller
                .next(p.timeout, stop)
                .map_err(|e| during(e, i, &of_n))?
            {
                let what = if got.is_some() {
                    "our send's completion"
                } else {
                    "the message"
                };
                return Err(wait_err(i, what));
            }
            let c = &poller.wc;
            check(c, || format!("round trip {}{of_n} with {}", i + 1, p.peer))?;
            if c.wr_id() & SEND_BIT != 0 {
                acked = (c.wr_id() & !SEND_BIT) + 1;
            } else {
                got = Some(c.reaped());
            }
        }
        let got = got.expect("the loop ends with a message");
        match side {
            Side::Initiator => {
                let end = clock.now();
                // (After the rare move of a full buffer, the next sample starts after it.)
                t = if latency.push(t, end) {
                    clock.now()
                } else {
                    end
                };
            }
            Side::Responder => {
                last |= got.imm_data == Some(LAST_IMM);
                if sent - acked >= SEND_WINDOW {
                    bail!("the send queue to {} stopped draining", p.peer);
                }
                send_reply(tq, &mut sends, &mut signals, sent, last, false)?;
                sent += 1;
                // Strict: wait for the reply's own completion (keeping a message that beats it).
                while strict && acked < sent {
                    if !poller.next(p.timeout, stop)? {
                        return Err(wait_err(i, "our reply's completion"));
                    }
                    let c = &poller.wc;
                    check(c, || format!("round trip {}{of_n} with {}", i + 1, p.peer))?;
                    if c.wr_id() & SEND_BIT != 0 {
                        acked = (c.wr_id() & !SEND_BIT) + 1;
                    } else {
                        early = Some(c.reaped());
                    }
                }
                // The reply is on its way: the timestamp (reply to reply) costs the peer nothing.
                let mut now = clock.now();
                if let Some(sent) = last_reply
                    && latency.push(sent, now)
                {
                    now = clock.now();
                }
                start.get_or_insert(now);
                last_reply = Some(now);
            }
        }
        // Replace the consumed receive after the reply is on its way (off the critical path).
        tq.qp.post_recv_request(&mut recv, got.wr_id)?;
        rounds = i + 1;
        if rounds.is_multiple_of(PROGRESS_EVERY) {
            progress.set(rounds, rounds * p.size as u64);
        }
        if last {
            break;
        }
    }
    // Reap the sends still in flight, so the peer has really got everything.
    while acked < sent {
        if !poller.next(p.timeout, stop)? {
            return Err(wait_err(
                rounds.saturating_sub(1),
                "the last send's completion",
            ));
        }
        let c = &poller.wc;
        check(c, || format!("the last round trip with {}", p.peer))?;
        if c.wr_id() & SEND_BIT != 0 {
            acked = (c.wr_id() & !SEND_BIT) + 1;
        }
    }
    progress.set(rounds, rounds * p.size as u64);
    Ok(PingpongOutcome {
        latency: latency.finish(),
        elapsed: start.map_or(Duration::ZERO, |s| clock.between(s, clock.now())),
        round_trips: rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_layout_has_room_for_grh_on_ud() {
        assert_eq!(buffer_len(QpType::Rc, 4096, 500), 2 * 4096);
        assert_eq!(buffer_len(QpType::Ud, 2048, 500), 2048 + 2048 + 40);
    }
}
