//! The operation of a send-queue work request, and how it fills an `ibv_send_wr`.

use rdma_sys::*;

/// The operation of a send-queue work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    Send,
    SendWithImm(u32),
    Write {
        remote_addr: u64,
        rkey: u32,
    },
    WriteWithImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    Read {
        remote_addr: u64,
        rkey: u32,
    },
    /// Atomic fetch-and-add of `add` to the 8 bytes at `remote_addr` (8-byte aligned); the
    /// value before the add lands in the request's local 8 bytes.
    FetchAdd {
        remote_addr: u64,
        rkey: u32,
        add: u64,
    },
    /// Atomic compare-and-swap of the 8 bytes at `remote_addr` (8-byte aligned): `swap` is
    /// written there if they equal `compare`; the value before lands in the local 8 bytes.
    CmpSwap {
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    },
}

impl SendOp {
    /// Set `wr`'s opcode, immediate and remote fields for this operation.
    pub(super) fn fill(self, wr: &mut ibv_send_wr) {
        match self {
            SendOp::Send => wr.opcode = ibv_wr_opcode::IBV_WR_SEND,
            SendOp::SendWithImm(imm) => {
                wr.opcode = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
                wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
            }
            SendOp::Write { remote_addr, rkey } => {
                wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
                wr.wr.rdma = rdma_t { remote_addr, rkey };
            }
            SendOp::WriteWithImm {
                remote_addr,
                rkey,
                imm,
            } => {
                wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM;
                wr.wr.rdma = rdma_t { remote_addr, rkey };
                wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
            }
            SendOp::Read { remote_addr, rkey } => {
                wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_READ;
                wr.wr.rdma = rdma_t { remote_addr, rkey };
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                wr.opcode = ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD;
                wr.wr.atomic = atomic_t {
                    remote_addr,
                    compare_add: add,
                    swap: 0,
                    rkey,
                };
            }
            SendOp::CmpSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                wr.opcode = ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP;
                wr.wr.atomic = atomic_t {
                    remote_addr,
                    compare_add: compare,
                    swap,
                    rkey,
                };
            }
        }
    }

    /// This operation `offset` bytes further into the peer's memory (SENDs have no address).
    pub(super) fn shifted(self, offset: u64) -> SendOp {
        let mut op = self;
        match &mut op {
            SendOp::Send | SendOp::SendWithImm(_) => {}
            SendOp::Write { remote_addr, .. }
            | SendOp::WriteWithImm { remote_addr, .. }
            | SendOp::Read { remote_addr, .. }
            | SendOp::FetchAdd { remote_addr, .. }
            | SendOp::CmpSwap { remote_addr, .. } => *remote_addr += offset,
        }
        op
    }

    /// Why this request cannot be posted as an atomic (its local range must be 8 bytes, not
    /// inline, its remote address 8-byte aligned); None for a fit one or a non-atomic op.
    pub(super) fn atomic_misfit(self, local_len: usize, inline: bool) -> Option<String> {
        let remote_addr = match self {
            SendOp::FetchAdd { remote_addr, .. } | SendOp::CmpSwap { remote_addr, .. } => {
                remote_addr
            }
            _ => return None,
        };
        if local_len != 8 || inline {
            Some(format!(
                "an atomic operation moves 8 bytes, not inline ({local_len} bytes asked)"
            ))
        } else if !remote_addr.is_multiple_of(8) {
            Some(format!(
                "an atomic operation's remote address must be 8-byte aligned (0x{remote_addr:x})"
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomics_fill_their_opcode_and_refuse_a_misfit() {
        // SAFETY: ibv_send_wr is plain data; all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        let op = SendOp::CmpSwap {
            remote_addr: 0x1000,
            rkey: 7,
            compare: 3,
            swap: 4,
        };
        op.fill(&mut wr);
        assert_eq!(wr.opcode, ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP);
        // SAFETY: `fill` just wrote the atomic member of the union.
        let a = unsafe { wr.wr.atomic };
        assert_eq!(
            (a.remote_addr, a.compare_add, a.swap, a.rkey),
            (0x1000, 3, 4, 7)
        );
        assert_eq!(op.atomic_misfit(8, false), None);
        assert!(op.atomic_misfit(16, false).unwrap().contains("8 bytes"));
        assert!(op.atomic_misfit(8, true).is_some());
        let odd = SendOp::FetchAdd {
            remote_addr: 0x1004,
            rkey: 1,
            add: 1,
        };
        assert!(odd.atomic_misfit(8, false).unwrap().contains("aligned"));
        assert_eq!(SendOp::Send.atomic_misfit(64, true), None);
    }
}
