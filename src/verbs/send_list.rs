//! Send work requests chained for one `ibv_post_send` (post lists), optionally stepping
//! their addresses through a cycle buffer as perftest's bandwidth clients do.

use super::error::VerbsError;
use super::mr::MemoryRegion;
use super::qp::{QueuePair, SendOp, SendRequest, fill_send_wr};
use rdma_sys::*;
use std::mem;

/// perftest's address stepping: operation k of a slot goes `offset(k)` bytes past the slot's
/// first local and remote addresses, `stride` bytes further each time and back to the start
/// after `positions` operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressCycle {
    pub stride: u64,
    pub positions: u64,
}

impl AddressCycle {
    /// perftest's rule (`INC` and `increase_rem_addr`): `size`-byte operations step by `size`
    /// rounded up to a whole cache line (at least one line) through a `cycle_buffer`-byte
    /// buffer; sizes above half the buffer do not step (None), nor do degenerate figures.
    pub fn perftest(size: usize, cycle_buffer: u32, cache_line: u32) -> Option<Self> {
        let (size, cycle, line) = (size as u64, u64::from(cycle_buffer), u64::from(cache_line));
        if size == 0 || line == 0 || size > cycle / 2 {
            return None;
        }
        let stride = size.div_ceil(line) * line;
        let positions = cycle / stride;
        (positions >= 2).then_some(AddressCycle { stride, positions })
    }

    /// How far past the first addresses operation `op_index` lies.
    pub fn offset(self, op_index: u64) -> u64 {
        (op_index % self.positions.max(1)) * self.stride
    }
}

/// A stepping slot's first local address and operation.
#[derive(Debug, Clone, Copy)]
struct Cycled {
    cycle: AddressCycle,
    local: u64,
    op: SendOp,
}

/// A reusable, pre-allocated chain of send work requests for post lists: fill slots once with
/// [`set`](Self::set), adjust `wr_id`/signaling per post, post with
/// [`QueuePair::post_send_list`]. It borrows the buffers and AHs its requests name for `'a`.
pub struct SendList<'a> {
    pub(super) wrs: Box<[ibv_send_wr]>,
    pub(super) sges: Box<[ibv_sge]>,
    /// Slots filled without a UD destination (refused on UD QPs).
    pub(super) ud_missing: Box<[bool]>,
    pub(super) len: usize,
    /// How many requests are chained to each other and to their SGEs (0: none yet): a post of
    /// as many as last time chains nothing again. The arrays are boxed, so the pointers stay
    /// good when the list moves; `set` and `mark` never touch them.
    pub(super) chained: usize,
    /// Slots that step their addresses ([`place`](Self::place)): their first addresses.
    cycles: Box<[Option<Cycled>]>,
    _borrows: std::marker::PhantomData<&'a MemoryRegion>,
}

// SAFETY: the raw pointers inside point at the list's own arrays or at MRs/AHs borrowed for 'a,
// which are Sync; the list is only used through &mut.
unsafe impl Send for SendList<'_> {}

impl<'a> SendList<'a> {
    /// Room for `capacity` requests.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        SendList {
            // SAFETY: ibv_send_wr/ibv_sge are plain data; all-zero is valid.
            wrs: (0..capacity).map(|_| unsafe { mem::zeroed() }).collect(),
            // SAFETY: as above.
            sges: (0..capacity).map(|_| unsafe { mem::zeroed() }).collect(),
            ud_missing: vec![true; capacity].into_boxed_slice(),
            len: 0,
            chained: 0,
            cycles: vec![None; capacity].into_boxed_slice(),
            _borrows: std::marker::PhantomData,
        }
    }

    /// A list of one request, `req`, built and checked once (a latency loop's post: then only
    /// [`mark`](Self::mark) and friends per post).
    pub fn single(req: &SendRequest<'a>) -> Result<Self, VerbsError> {
        let mut list = SendList::new(1);
        list.set(0, req)?;
        Ok(list)
    }

    pub fn capacity(&self) -> usize {
        self.wrs.len()
    }

    /// Fill slot `i` (< capacity) from `req`; slots up to `i` count as filled.
    pub fn set(&mut self, i: usize, req: &SendRequest<'a>) -> Result<(), VerbsError> {
        if i >= self.wrs.len() {
            return Err(VerbsError::new(
                "ibv_post_send",
                format!("post list slot {i} beyond its capacity {}", self.wrs.len()),
                libc::EINVAL,
            ));
        }
        fill_send_wr(req, &mut self.wrs[i], &mut self.sges[i])?;
        self.ud_missing[i] = req.ud.is_none();
        self.cycles[i] = None;
        self.len = self.len.max(i + 1);
        Ok(())
    }

    /// Change slot `i`'s id and whether it is signaled (the hot path: no validation needed).
    pub fn mark(&mut self, i: usize, wr_id: u64, signaled: bool) {
        if let Some(wr) = self.wrs.get_mut(i) {
            wr.wr_id = wr_id;
            if signaled {
                wr.send_flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
            } else {
                wr.send_flags &= !ibv_send_flags::IBV_SEND_SIGNALED.0;
            }
        }
    }

    /// Change slot `i`'s compare and swap operands (a compare-and-swap slot; others are left
    /// as they are): the hot path of a latency run whose every swap differs.
    pub fn set_compare_swap(&mut self, i: usize, compare: u64, swap: u64) {
        if let Some(wr) = self.wrs.get_mut(i)
            && wr.opcode == ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP
        {
            // (A compare-and-swap request's union holds its atomic fields: SendOp::fill.)
            wr.wr.atomic.compare_add = compare;
            wr.wr.atomic.swap = swap;
        }
    }

    /// Change slot `i`'s immediate value, turning a SEND into a SEND with immediate.
    pub fn set_send_imm(&mut self, i: usize, imm: Option<u32>) {
        if let Some(wr) = self.wrs.get_mut(i) {
            match imm {
                Some(v) => {
                    wr.opcode = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
                    wr.imm_data_invalidated_rkey_union.imm_data = v.to_be();
                }
                None => wr.opcode = ibv_wr_opcode::IBV_WR_SEND,
            }
        }
    }

    /// Fill slot `i` from `req` as [`set`](Self::set) does, its local bytes and its remote
    /// address (RDMA and atomics) to step through `cycle` as [`place`](Self::place) is told:
    /// every position's local bytes must lie in the request's memory region.
    pub fn set_cycled(
        &mut self,
        i: usize,
        req: &SendRequest<'a>,
        cycle: AddressCycle,
    ) -> Result<(), VerbsError> {
        let last = cycle.offset(cycle.positions.saturating_sub(1)) as usize;
        let range = req.range.start + last..req.range.end + last;
        QueuePair::sge(req.mr, &range, "ibv_post_send")?;
        if let Some(why) = req
            .op
            .shifted(last as u64)
            .atomic_misfit(req.range.len(), req.inline)
        {
            return Err(VerbsError::new("ibv_post_send", why, libc::EINVAL));
        }
        self.set(i, req)?;
        self.cycles[i] = Some(Cycled {
            cycle,
            local: self.sges[i].addr,
            op: req.op,
        });
        Ok(())
    }

    /// Put slot `i` at the position of its `op_index`-th operation (a slot not set with
    /// [`set_cycled`](Self::set_cycled) stays where it is).
    pub fn place(&mut self, i: usize, op_index: u64) {
        if let (Some(Some(c)), Some(wr), Some(sge)) = (
            self.cycles.get(i),
            self.wrs.get_mut(i),
            self.sges.get_mut(i),
        ) {
            let offset = c.cycle.offset(op_index);
            sge.addr = c.local + offset;
            let opcode = wr.opcode;
            c.op.shifted(offset).fill(wr);
            // A SEND may carry the stop mark's immediate (set_send_imm): keep its opcode.
            wr.opcode = opcode;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perftest's own walk (`increase_rem_addr`): after each post the address moves one
    /// `INC(size, line)` on and returns to the start when (count + 1) is a multiple of
    /// cycle / INC; the address a post uses is the one before that move.
    fn perftest_walk(size: u64, cycle: u64, line: u64, posts: u64) -> Vec<u64> {
        let inc = if size > line {
            size.div_ceil(line) * line
        } else {
            line
        };
        let mut addr = 0;
        let mut used = Vec::new();
        for scnt in 0..posts {
            used.push(addr);
            addr += inc;
            if (scnt + 1) % (cycle / inc) == 0 {
                addr = 0;
            }
        }
        used
    }

    #[test]
    fn the_cycle_walks_as_perftests_clients_do() {
        for (size, cycle, line) in [
            (2, 4096, 64),
            (8, 4096, 64),
            (64, 4096, 64),
            (100, 4096, 64),
            (2048, 4096, 64),
            (1000, 8192, 128),
            (65, 4096, 64),
        ] {
            let c = AddressCycle::perftest(size, cycle, line).expect("steps");
            let ours: Vec<u64> = (0..300).map(|k| c.offset(k)).collect();
            assert_eq!(
                ours,
                perftest_walk(size as u64, cycle.into(), line.into(), 300),
                "{size} in {cycle}"
            );
            // Every position's bytes stay inside the cycle buffer.
            assert!(c.offset(c.positions - 1) + size as u64 <= u64::from(cycle));
        }
        assert_eq!(
            AddressCycle::perftest(8, 4096, 64),
            Some(AddressCycle {
                stride: 64,
                positions: 64
            })
        );
    }

    #[test]
    fn large_or_degenerate_sizes_do_not_step() {
        assert_eq!(AddressCycle::perftest(2049, 4096, 64), None);
        assert_eq!(AddressCycle::perftest(65536, 4096, 64), None);
        assert_eq!(AddressCycle::perftest(0, 4096, 64), None);
        assert_eq!(AddressCycle::perftest(8, 4096, 0), None);
    }

    #[test]
    fn an_op_shifts_its_remote_address_and_a_send_has_none() {
        let w = SendOp::Write {
            remote_addr: 0x1000,
            rkey: 7,
        };
        assert_eq!(
            w.shifted(64),
            SendOp::Write {
                remote_addr: 0x1040,
                rkey: 7
            }
        );
        let a = SendOp::FetchAdd {
            remote_addr: 0x2000,
            rkey: 1,
            add: 1,
        };
        assert_eq!(
            a.shifted(128),
            SendOp::FetchAdd {
                remote_addr: 0x2080,
                rkey: 1,
                add: 1
            }
        );
        assert_eq!(SendOp::Send.shifted(64), SendOp::Send);
    }
}
