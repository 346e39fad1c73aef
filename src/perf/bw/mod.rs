//! The bandwidth engine: keep `tx_depth` operations in flight per QP, post lists, signal every
//! `cq_mod`-th request, poll completions in batches. No allocation, formatting or locking inside
//! the timed loop.

mod samples;

use super::{Op, Progress};
use crate::connect::control::QpType;
use crate::connect::endpoint::{Endpoint, RemoteMemory};
use crate::connect::test_qp::TestQp;
use crate::verbs::{AddressCycle, Completion, SendList, SendOp, SendRequest, UdDest};
use anyhow::{Result, anyhow, bail};
use samples::peak_bytes;
pub use samples::{PEAK_MIN_SAMPLES, PEAK_MIN_WINDOW, Samples, peak_rate};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Immediate value of the SEND that ends a QP's stream: the receiver stops when it sees it.
pub const STOP_IMM: u32 = 0xFFFF_FFFF;
/// Receive work requests carry this bit in their id.
const RECV_FLAG: u64 = 1 << 63;

/// How a SEND receiver knows a QP's stream has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamEnd {
    /// rdmadiag's sender marks its last SEND with [`STOP_IMM`] (so -D needs no count).
    #[default]
    StopMark,
    /// perftest's sender marks nothing: the receiver counts this many messages per QP (both
    /// sides' -n).
    Count(u64),
}

/// What one bandwidth run does.
#[derive(Debug, Clone)]
pub struct BwParams {
    pub op: Op,
    pub size: usize,
    /// Operations per QP; None in duration mode.
    pub iterations: Option<u64>,
    pub duration: Option<Duration>,
    pub tx_depth: u32,
    pub cq_mod: u32,
    pub post_list: u32,
    pub inline: bool,
    /// Receives kept posted per QP (SEND only).
    pub rx_depth: u32,
    /// Where in each QP's buffer a receive lands (see [`post_receives`]).
    pub recv: Range<usize>,
    /// This side issues operations.
    pub send: bool,
    /// This side receives SENDs (the peer's, in a SEND test).
    pub receive: bool,
    /// How a receiver knows the sender's stream has ended.
    pub end: StreamEnd,
    /// Longest time without any completion before the run is declared stuck.
    pub timeout: Duration,
    pub peer: String,
    /// Step each operation's local bytes and remote address through a cycle buffer, as
    /// perftest's clients do (one request per post: per operation; a post list: request i
    /// at position i); None: one address each.
    pub cycle: Option<AddressCycle>,
}

/// What one side measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BwOutcome {
    /// Operations this side completed (sent, or received when only receiving).
    pub messages: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    /// Best rate over a window of at least [`PEAK_MIN_SAMPLES`] sample intervals and
    /// [`PEAK_MIN_WINDOW`], bytes per second (see [`peak_rate`]).
    pub peak_bytes_per_sec: f64,
}

impl BwOutcome {
    pub fn avg_bytes_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn msg_rate(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Post the receives of a SEND test before the peer starts sending. Like perftest, every
/// receive lands in the same `max_size` bytes at `offset`: a bandwidth test does not look at
/// the data, and the buffer then stays small whatever the depth.
pub fn post_receives(tq: &TestQp, max_size: usize, rx_depth: u32, offset: usize) -> Result<()> {
    for slot in 0..rx_depth as u64 {
        tq.qp
            .post_recv(RECV_FLAG | slot, &tq.mr, offset..offset + max_size)?;
    }
    Ok(())
}

struct QpState<'a> {
    tq: &'a TestQp,
    list: SendList<'a>,
    posted: u64,
    completed: u64,
    /// Posting has ended (count reached or time up) and the final request is out.
    closed: bool,
    received: u64,
    stopped: bool,
}

fn op_for(op: Op, remote: Option<RemoteMemory>, size: usize) -> Result<SendOp> {
    let mem = |what: &str| {
        remote
            .filter(|m| m.len >= size as u64)
            .ok_or_else(|| anyhow!("the peer exposed no buffer of {size} bytes for {what}"))
    };
    Ok(match op {
        Op::Send => SendOp::Send,
        Op::Write => {
            let m = mem("RDMA WRITE")?;
            SendOp::Write {
                remote_addr: m.addr,
                rkey: m.rkey,
            }
        }
        Op::Read => {
            let m = mem("RDMA READ")?;
            SendOp::Read {
                remote_addr: m.addr,
                rkey: m.rkey,
            }
        }
        Op::AtomicFadd | Op::AtomicCswap => super::atomic::bw_op(op, mem("atomics")?)?,
    })
}

fn check(c: &Completion, peer: &str, op: Op) -> Result<()> {
    if c.status.is_success() {
        return Ok(());
    }
    let what = if c.wr_id & RECV_FLAG != 0 {
        "receive".to_string()
    } else {
        format!("{op} operation")
    };
    bail!(
        "a {what} with {peer} completed with {}: {} (vendor error 0x{:x})",
        c.status,
        c.status.likely_cause(),
        c.vendor_err
    )
}

/// Run one bandwidth measurement over `qps`; `remotes[i]` is QP i's peer (its buffer for
/// one-sided ops, its QPN and Q_Key for UD). The local source/sink for operations is bytes
/// `0..size` of each QP's buffer; receives use `p.recv`.
pub fn run(
    qps: &[TestQp],
    remotes: &[Endpoint],
    p: &BwParams,
    progress: &Progress,
    stop: &AtomicBool,
) -> Result<BwOutcome> {
    let total = p.iterations.unwrap_or(u64::MAX);
    let list_cap = p.post_list.clamp(1, p.tx_depth.max(1)) as usize;
    let cq_mod = p.cq_mod.clamp(1, p.tx_depth.max(1)) as u64;
    let mut states = Vec::with_capacity(qps.len());
    for (i, tq) in qps.iter().enumerate() {
        let remote = remotes.get(i);
        let op = op_for(p.op, remote.and_then(|e| e.memory), p.size)?;
        // UD sends need the peer's address handle, QPN and Q_Key in every request.
        let ud = match (tq.transport, &tq.ah, remote) {
            (QpType::Ud, Some(ah), Some(e)) => Some(UdDest {
                ah,
                qpn: e.qpn,
                qkey: e.qkey,
            }),
            (QpType::Ud, _, _) if p.send => {
                bail!("UD QP {i} has no address handle for its peer")
            }
            _ => None,
        };
        let mut list = SendList::new(list_cap);
        for slot in 0..list_cap {
            let req = SendRequest {
                wr_id: 0,
                op,
                mr: &tq.mr,
                range: 0..p.size,
                signaled: false,
                inline: p.inline,
                ud,
            };
            match p.cycle {
                Some(cycle) => {
                    list.set_cycled(slot, &req, cycle)?;
                    // A post list's request i always goes to position i, as perftest lays its
                    // lists out: placed once here, not per post.
                    list.place(slot, slot as u64);
                }
                None => list.set(slot, &req)?,
            }
        }
        states.push(QpState {
            tq,
            list,
            posted: 0,
            completed: 0,
            closed: !p.send,
            received: 0,
            stopped: !p.receive,
        });
    }
    // With a cycle (perftest's), one request per post steps per operation.
    let step = p.cycle.is_some() && list_cap == 1;
    let mut wcs = [Completion::default(); 16];
    let mut samples = Samples::new();
    let start = Instant::now();
    let deadline = p.duration.map(|d| start + d);
    let mut first_recv: Option<Instant> = None;
    // When a completion last arrived, to within one clock check (the clock is read every 64
    // spins, not per completion).
    let mut last_activity = start;
    let mut active = false;
    // Receives since the last receive-side sample (receivers sample every `cq_mod` receives).
    let mut unsampled_receives = 0u64;
    let mut spins = 0u32;
    let mut time_up = false;
    loop {
        spins = spins.wrapping_add(1);
        let now_check = spins.is_multiple_of(64);
        if now_check && deadline.is_some_and(|d| Instant::now() >= d) {
            time_up = true;
        }
        let mut all_done = true;
        let mut sample_now = false;
        for s in states.iter_mut() {
            // Post as much as the send queue allows, in post lists.
            if !s.closed {
                let ending = time_up || s.posted + 1 >= total;
                let in_flight = s.posted - s.completed;
                if ending {
                    if in_flight < p.tx_depth as u64 {
                        // One last signaled request (a SEND carries the stop mark).
                        if step {
                            s.list.place(0, s.posted);
                        }
                        s.list.mark(0, s.posted, true);
                        if p.op == Op::Send {
                            s.list.set_send_imm(0, Some(STOP_IMM));
                        }
                        s.tq.qp.post_send_list(&mut s.list, 1)?;
                        s.list.set_send_imm(0, None);
                        s.posted += 1;
                        s.closed = true;
                    }
                } else {
                    let room = (p.tx_depth as u64 - in_flight)
                        .min(total.saturating_sub(s.posted).saturating_sub(1))
                        .min(list_cap as u64) as usize;
                    if room > 0 {
                        for i in 0..room {
                            let seq = s.posted + i as u64;
                            if step {
                                s.list.place(i, seq);
                            }
                            s.list.mark(i, seq, (seq + 1).is_multiple_of(cq_mod));
                        }
                        s.tq.qp.post_send_list(&mut s.list, room)?;
                        s.posted += room as u64;
                    }
                }
            }
            // Reap completions.
            let n = s.tq.cq.poll(&mut wcs)?;
            let mut sends_done = false;
            for c in &wcs[..n] {
                check(c, &p.peer, p.op)?;
                if c.wr_id & RECV_FLAG != 0 {
                    first_recv.get_or_insert_with(Instant::now);
                    s.received += 1;
                    unsampled_receives += 1;
                    let counted_out = matches!(p.end, StreamEnd::Count(n) if s.received >= n);
                    if c.imm_data == Some(STOP_IMM) || counted_out {
                        s.stopped = true;
                    }
                    s.tq.qp.post_recv(c.wr_id, &s.tq.mr, p.recv.clone())?;
                } else {
                    s.completed = c.wr_id + 1;
                    sends_done = true;
                }
            }
            active |= n > 0;
            // A progress sample per reaped batch of signalled sends (the only moments the
            // count of completed operations is known), or per `cq_mod` receives.
            if (p.send && sends_done) || (!p.send && unsampled_receives >= cq_mod) {
                unsampled_receives = 0;
                sample_now = true;
            }
            if !(s.closed && s.completed == s.posted && s.stopped) {
                all_done = false;
            }
        }
        let sent: u64 = states.iter().map(|s| s.completed).sum();
        let received: u64 = states.iter().map(|s| s.received).sum();
        let messages = if p.send { sent } else { received };
        if sample_now {
            samples.record(start.elapsed(), messages);
        }
        if now_check {
            let now = Instant::now();
            if active {
                (last_activity, active) = (now, false);
            }
            progress.set(messages, messages * p.size as u64);
            let lossy = qps.iter().any(|q| q.transport != QpType::Rc);
            let quiet = now - last_activity;
            if lossy && !p.send && received > 0 && quiet > p.timeout.min(Duration::from_secs(2)) {
                // UC/UD may drop messages, the stop mark included: report what arrived.
                let elapsed = last_activity.saturating_duration_since(first_recv.unwrap_or(start));
                let bytes = received * p.size as u64;
                progress.set(received, bytes);
                samples.record(last_activity.saturating_duration_since(start), received);
                samples.rebase(first_recv.unwrap_or(start).saturating_duration_since(start));
                return Ok(BwOutcome {
                    messages: received,
                    bytes,
                    elapsed,
                    peak_bytes_per_sec: peak_bytes(&samples, p.size),
                });
            }
            if quiet > p.timeout {
                let posted: u64 = states.iter().map(|s| s.posted).sum();
                let waiting = if p.send && states.iter().any(|s| s.completed < s.posted) {
                    "completions of our operations"
                } else {
                    "the peer's messages"
                };
                let counts = if p.send {
                    format!(
                        "{posted} posted, {sent} known complete (a completion is requested \
                         every {cq_mod}), {received} received so far"
                    )
                } else {
                    format!("{received} received so far")
                };
                bail!(
                    "no progress for {} waiting for {waiting} from {} ({counts}; is the peer \
                     still running?)",
                    humantime::format_duration(p.timeout),
                    p.peer
                );
            }
            if stop.load(Ordering::Relaxed) {
                return Err(crate::exit::Interrupted.into());
            }
        }
        if all_done {
            let elapsed_from = if p.send {
                start
            } else {
                first_recv.unwrap_or(start)
            };
            // All done: the last completion was reaped in this very spin.
            let elapsed = elapsed_from.elapsed();
            let bytes = messages * p.size as u64;
            progress.set(messages, bytes);
            samples.record(start.elapsed(), messages);
            // A receiver's clock starts at its first message: so do its windows.
            samples.rebase(elapsed_from.saturating_duration_since(start));
            return Ok(BwOutcome {
                messages,
                bytes,
                elapsed,
                peak_bytes_per_sec: peak_bytes(&samples, p.size),
            });
        }
    }
}

/// Messages larger than this get a completion each unless CQ moderation was asked for (as
/// perftest does): a moderated batch of large messages can take longer than the no-progress
/// timeout, and a bandwidth figure over a few batches is coarse.
pub const CQ_MOD_SIZE_LIMIT: usize = 8192;

/// The CQ moderation a round of `size`-byte messages really uses: 1 above
/// [`CQ_MOD_SIZE_LIMIT`] unless `explicit` (UD messages fit one MTU and keep it), never more
/// than the send queue depth.
pub fn effective_cq_mod(
    requested: u32,
    explicit: bool,
    size: usize,
    transport: QpType,
    tx_depth: u32,
) -> u32 {
    let m = if !explicit && size > CQ_MOD_SIZE_LIMIT && transport != QpType::Ud {
        1
    } else {
        requested
    };
    m.clamp(1, tx_depth.max(1))
}

/// Peak rate in bytes per second from a run's samples.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_messages_get_a_completion_each_unless_asked() {
        assert_eq!(effective_cq_mod(100, false, 8192, QpType::Rc, 128), 100);
        assert_eq!(effective_cq_mod(100, false, 8193, QpType::Rc, 128), 1);
        assert_eq!(effective_cq_mod(100, true, 1 << 23, QpType::Rc, 128), 100);
        assert_eq!(effective_cq_mod(100, false, 1 << 20, QpType::Ud, 128), 100);
        assert_eq!(effective_cq_mod(100, false, 64, QpType::Rc, 16), 16);
    }

    #[test]
    fn rates_are_bytes_over_time() {
        let o = BwOutcome {
            messages: 1000,
            bytes: 1000 * 65536,
            elapsed: Duration::from_millis(500),
            peak_bytes_per_sec: 0.0,
        };
        assert_eq!(o.msg_rate(), 2000.0);
        assert_eq!(o.avg_bytes_per_sec(), 131_072_000.0);
    }

    #[test]
    fn one_sided_ops_need_a_peer_buffer() {
        assert!(op_for(Op::Write, None, 64).is_err());
        let m = RemoteMemory {
            addr: 0x1000,
            rkey: 7,
            len: 32,
            landing: None,
        };
        assert!(op_for(Op::Read, Some(m), 64).is_err(), "too small");
        assert_eq!(
            op_for(Op::Read, Some(m), 32).unwrap(),
            SendOp::Read {
                remote_addr: 0x1000,
                rkey: 7
            }
        );
        assert_eq!(op_for(Op::Send, None, 64).unwrap(), SendOp::Send);
    }
}
