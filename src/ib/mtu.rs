//! A RoCE port's active IB MTU, derived from its netdev's MTU as the kernel derives it.
//!
//! sysfs has no IB MTU, but on RoCE the kernel computes the active one from the netdev MTU, so
//! `ports` can show it without opening the device. The rule (learnt from the kernel sources,
//! Linux 6.1 and later): take the netdev MTU, subtract the headers a RoCE v2 packet may carry
//! beyond the Ethernet header, and use the largest IB MTU (256, 512, 1024, 2048, 4096) that
//! still fits, never more than 4096. Two drivers' sums of headers:
//!
//! - Soft-RoCE (rxe, `rxe_set_mtu`/`eth_mtu_int_to_enum`): 80 bytes (`RXE_MAX_HDR_LENGTH`); what
//!   is left below 256 still gives 256, rxe's floor. 1500 gives 1024, 4176 the first 4096.
//! - ib_core's `iboe_get_mtu` (used by mlx4 and mlx5): 96 bytes (GRH 40, UDP 8, BTH 12, XRC 4,
//!   AtomicETH 28, ICRC 4); below 256 left there is no IB MTU. 1500 gives 1024, 4192 the first 4096.
//!
//! Other RoCE drivers may derive it their own way: `ports -v` asks the device itself.

use crate::ib::Mtu;

/// Which driver's sum of headers a RoCE port's active MTU is computed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoceMtuRule {
    /// Soft-RoCE: 80 bytes, floor 256.
    Rxe,
    /// ib_core's `iboe_get_mtu`: 96 bytes, nothing below 256.
    IbCore,
}

impl RoceMtuRule {
    /// The bytes of headers the driver takes off the netdev MTU.
    pub fn header_bytes(self) -> u32 {
        match self {
            RoceMtuRule::Rxe => 80,
            RoceMtuRule::IbCore => 96,
        }
    }

    /// The active IB MTU of a port on a netdev of MTU `netdev_mtu` (None: the driver has none).
    pub fn active_mtu(self, netdev_mtu: u32) -> Option<Mtu> {
        let room = netdev_mtu.saturating_sub(self.header_bytes());
        let fits = [4096, 2048, 1024, 512, 256]
            .into_iter()
            .find(|&m| m <= room);
        match (fits, self) {
            (Some(m), _) => Some(Mtu(m)),
            (None, RoceMtuRule::Rxe) => Some(Mtu(256)),
            (None, RoceMtuRule::IbCore) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RoceMtuRule::{IbCore, Rxe};
    use crate::ib::Mtu;

    #[test]
    fn the_lab_mtus_give_what_rxe_reports() {
        assert_eq!(Rxe.active_mtu(1500), Some(Mtu(1024)));
        assert_eq!(Rxe.active_mtu(4200), Some(Mtu(4096)));
        assert_eq!(Rxe.active_mtu(9000), Some(Mtu(4096)));
        assert_eq!(IbCore.active_mtu(1500), Some(Mtu(1024)));
        assert_eq!(IbCore.active_mtu(4200), Some(Mtu(4096)));
        assert_eq!(IbCore.active_mtu(9000), Some(Mtu(4096)));
    }

    #[test]
    fn each_step_starts_exactly_at_the_mtu_plus_the_headers() {
        for (rule, h) in [(Rxe, 80), (IbCore, 96)] {
            for (m, below) in [(4096, 2048), (2048, 1024), (1024, 512), (512, 256)] {
                assert_eq!(
                    rule.active_mtu(m + h),
                    Some(Mtu(m)),
                    "{rule:?} at {}",
                    m + h
                );
                assert_eq!(rule.active_mtu(m + h - 1), Some(Mtu(below)), "{rule:?}");
            }
            assert_eq!(rule.active_mtu(256 + h), Some(Mtu(256)), "{rule:?}");
            assert_eq!(rule.active_mtu(65535), Some(Mtu(4096)), "{rule:?}");
        }
        assert_eq!(Rxe.active_mtu(4176), Some(Mtu(4096)));
        assert_eq!(Rxe.active_mtu(4175), Some(Mtu(2048)));
        assert_eq!(IbCore.active_mtu(4192), Some(Mtu(4096)));
        assert_eq!(IbCore.active_mtu(4191), Some(Mtu(2048)));
    }

    #[test]
    fn below_the_smallest_rxe_keeps_256_and_ib_core_has_none() {
        for small in [0, 68, 80, 96, 335, 351] {
            assert_eq!(Rxe.active_mtu(small), Some(Mtu(256)), "{small}");
            assert_eq!(IbCore.active_mtu(small), None, "{small}");
        }
        assert_eq!(Rxe.active_mtu(335), Some(Mtu(256)));
        assert_eq!(IbCore.active_mtu(352), Some(Mtu(256)));
    }
}
