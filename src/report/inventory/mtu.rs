//! A port's active IB MTU in the `ports` report: the type, where it came from, and its text.

use super::PortInfo;
use crate::ib::Mtu;
use crate::report::opt;
use serde::Serialize;

/// A port's active IB MTU, as `ibv_devinfo` shows it, and how rdmadiag knows it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ActiveMtu {
    pub mtu: Mtu,
    pub source: MtuSource,
    /// With `source` "netdev": the bytes of RoCE headers the driver takes off the netdev MTU
    /// (80 for Soft-RoCE, 96 for ib_core's rule).
    pub header_bytes: Option<u32>,
}

/// Where a port's active IB MTU came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MtuSource {
    /// Computed from the netdev's MTU by the driver's rule (RoCE; no device opened).
    Netdev,
    /// `ibv_query_port` (InfiniBand and iWARP ports, and every port with `-v`).
    Verbs,
}

/// The IB MTUs and the netdev's: "1024 active (netdev 1500 less 80 B of headers)", with `-v`
/// "1024 active, 4096 max (netdev 1500)".
pub(super) fn mtu_text(p: &PortInfo) -> String {
    let netdev = p.netdev_mtu.map(|m| format!("netdev {m}"));
    let ib = match (&p.details, &p.active_mtu) {
        (Some(d), _) => format!("{} active, {} max", opt(&d.active_mtu), opt(&d.max_mtu)),
        (None, Some(a)) => format!("{} active", a.mtu),
        (None, None) => "IB MTU unknown (ports -v)".to_string(),
    };
    match (netdev, p.active_mtu.and_then(|a| a.header_bytes)) {
        (Some(n), Some(h)) if p.details.is_none() => format!("{ib} ({n} less {h} B of headers)"),
        (Some(n), _) => format!("{ib} ({n})"),
        (None, _) => ib,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_infiniband_port_shows_the_queried_mtu_and_one_unknown_says_so() {
        let mut p = super::super::tests::port();
        p.netdev_mtu = None;
        p.active_mtu = Some(ActiveMtu {
            mtu: Mtu(2048),
            source: MtuSource::Verbs,
            header_bytes: None,
        });
        assert_eq!(mtu_text(&p), "2048 active");
        p.active_mtu = None;
        assert_eq!(mtu_text(&p), "IB MTU unknown (ports -v)");
    }
}
