//! A test's verbs resources on one side (PD, CQ, QP, buffer) and connecting them to the peer.

use super::endpoint::{Endpoint, LocalPort, RemoteMemory, path_mtu};
use crate::verbs::{
    Access, AddressHandle, CompletionChannel, CompletionQueue, GlobalRoute, LinkLayer,
    MemoryRegion, Mtu, PathAttr, ProtectionDomain, QpCaps, QpType, QueuePair, RemoteQp, RtrParams,
    RtsParams,
};
use anyhow::{Context as _, Result};
use std::sync::Arc;

/// The Q_Key UD tests use (the one ibv_ud_pingpong uses).
pub const UD_QKEY: u32 = 0x1111_1111;
/// Bytes of GRH that precede every UD receive.
pub const GRH_BYTES: usize = 40;

/// The priority a test's packets ask for: the GRH traffic class on RoCE (the IP TOS byte of
/// RoCE v2 packets; the DSCP is its top 6 bits) and the service level on InfiniBand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Qos {
    pub traffic_class: u8,
    pub sl: u8,
}

/// How to size a test's queues and buffer.
#[derive(Debug, Clone, Copy)]
pub struct QpShape {
    pub transport: QpType,
    pub send_depth: u32,
    pub recv_depth: u32,
    pub buffer_len: usize,
    pub max_inline: u32,
    pub access: Access,
    pub events: bool,
    /// Outstanding RDMA READs this QP issues and accepts (1 unless a READ test wants more).
    pub rd_atomic: u8,
}

/// One side's resources. Field order is drop order: QP before AH, MR, CQ and channel.
pub struct TestQp {
    pub qp: QueuePair,
    pub ah: Option<AddressHandle>,
    pub mr: MemoryRegion,
    pub cq: Arc<CompletionQueue>,
    pub channel: Option<Arc<CompletionChannel>>,
    pub pd: Arc<ProtectionDomain>,
    pub local: LocalPort,
    pub psn: u32,
    pub transport: QpType,
    pub path_mtu: Option<Mtu>,
    pub rd_atomic: u8,
    /// WRITE latency: the offset in `mr` where the peer's writes are to land (advertised in
    /// the endpoint); None for other tests.
    pub landing: Option<usize>,
}

fn random_psn() -> u32 {
    // Any 24-bit value will do; derive one from the clock and pid without a crate.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (t ^ std::process::id().rotate_left(12)) & 0x00ff_ffff
}

impl TestQp {
    /// Create PD, CQ, QP and buffer on `local`, and move the QP to INIT.
    pub fn new(local: LocalPort, shape: QpShape) -> Result<Self> {
        let ctx = local.ctx.clone();
        let pd = ProtectionDomain::new(&ctx)?;
        let channel = if shape.events {
            Some(CompletionChannel::new(&ctx)?)
        } else {
            None
        };
        let cq = CompletionQueue::new(
            &ctx,
            shape.send_depth + shape.recv_depth + 1,
            channel.as_ref(),
        )?;
        let qp_type = shape.transport;
        let caps = QpCaps {
            max_send_wr: shape.send_depth.max(1),
            max_recv_wr: shape.recv_depth.max(1),
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: shape.max_inline,
        };
        let qp = QueuePair::new(&pd, &cq, &cq, qp_type, caps).or_else(|e| {
            if shape.max_inline == 0 {
                return Err(e);
            }
            // Some devices refuse inline data on some QP types: retry without it.
            QueuePair::new(
                &pd,
                &cq,
                &cq,
                qp_type,
                QpCaps {
                    max_inline_data: 0,
                    ..caps
                },
            )
        })?;
        let mr = MemoryRegion::new(&pd, shape.buffer_len, shape.access)?;
        qp.to_init(local.port, 0, shape.access, UD_QKEY)?;
        let rd_atomic = shape.rd_atomic;
        Ok(TestQp {
            qp,
            ah: None,
            mr,
            cq,
            channel,
            pd,
            local,
            psn: random_psn(),
            transport: shape.transport,
            path_mtu: None,
            rd_atomic: rd_atomic.max(1),
            landing: None,
        })
    }

    /// What the peer needs to reach this QP (and its buffer, if the peer may write, read or
    /// apply atomics to it).
    pub fn endpoint(&self) -> Endpoint {
        let mut e = self.local.endpoint(self.qp.qp_num(), self.psn, UD_QKEY);
        let remote = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
        if self.mr.access().0 & remote.0 != 0 {
            e.memory = Some(RemoteMemory {
                addr: self.mr.addr(),
                rkey: self.mr.rkey(),
                len: self.mr.len() as u64,
                landing: self.landing.map(|l| l as u64),
            });
        }
        e
    }

    fn path_to(&self, remote: &Endpoint, qos: Qos) -> PathAttr {
        // RoCE always routes by GID; InfiniBand within a subnet routes by LID.
        let global = self.local.attr.link_layer == LinkLayer::Ethernet;
        PathAttr {
            port: self.local.port,
            dlid: remote.lid,
            sl: qos.sl,
            grh: global.then_some(GlobalRoute {
                dgid: remote.gid,
                sgid_index: self.local.gid_index() as u8,
                hop_limit: 1,
                traffic_class: qos.traffic_class,
                flow_label: 0,
            }),
        }
    }

    /// Connect to the peer: INIT→RTR→RTS for RC/UC, and an address handle for UD, its packets
    /// carrying `qos`.
    pub fn connect(&mut self, remote: &Endpoint, forced_mtu: Option<u32>, qos: Qos) -> Result<()> {
        let mtu = path_mtu(self.local.active_mtu(), remote.active_mtu, forced_mtu)?;
        let path = self.path_to(remote, qos);
        let who = format!(
            "connecting {} port {} to QP 0x{:06x} on {} (GID {})",
            self.local.ctx.name(),
            self.local.port,
            remote.qpn,
            remote.device,
            remote.gid
        );
        self.qp
            .to_rtr(
                &RemoteQp {
                    qpn: remote.qpn,
                    psn: remote.psn,
                    path,
                },
                &RtrParams {
                    path_mtu: mtu,
                    max_dest_rd_atomic: self.rd_atomic,
                    min_rnr_timer: 12,
                },
            )
            .with_context(|| who.clone())?;
        self.qp
            .to_rts(&RtsParams {
                sq_psn: self.psn,
                timeout: 14,
                retry_cnt: 7,
                rnr_retry: 7,
                max_rd_atomic: self.rd_atomic,
            })
            .with_context(|| who.clone())?;
        if self.transport == QpType::Ud {
            self.ah = Some(AddressHandle::new(&self.pd, path).with_context(|| who.clone())?);
        }
        self.path_mtu = Some(mtu);
        Ok(())
    }
}
