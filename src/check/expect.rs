//! What a port is expected to be (state, rate, width, MTU, link layer, a RoCE v2 GID), and the
//! verdicts on one port's sysfs inventory.

use crate::ib::{GidType, LinkLayer, PhysState, PortState};
use crate::inventory::{self, PortQuery, Source};
use crate::report::check::{Check, CheckName};
use crate::report::inventory::PortInfo;
use anyhow::{Context as _, Result};

/// The logical states `--expect-state` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpectedState {
    Down,
    Init,
    Armed,
    #[default]
    Active,
}

impl ExpectedState {
    fn port_state(self) -> PortState {
        match self {
            ExpectedState::Down => PortState::Down,
            ExpectedState::Init => PortState::Init,
            ExpectedState::Armed => PortState::Armed,
            ExpectedState::Active => PortState::Active,
        }
    }
}

/// The expectations of every port; without any, a port must be ACTIVE and LINK_UP.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expectations {
    /// None: ACTIVE.
    pub state: Option<ExpectedState>,
    /// The port's rate, bits per second (exactly, as NHC's check_hw_ib).
    pub rate: Option<f64>,
    /// Lanes.
    pub width: Option<u32>,
    /// Bytes: the netdev MTU on RoCE, the active IB MTU on InfiniBand.
    pub mtu: Option<u32>,
    pub link_layer: Option<LinkLayer>,
    /// A usable RoCE v2 GID: one with an IPv4-mapped or a routable IPv6 address.
    pub gid: bool,
}

/// The number sysfs gives a logical state (`state`: "4: ACTIVE").
fn state_number(s: PortState) -> f64 {
    f64::from(match s {
        PortState::Nop => 0,
        PortState::Down => 1,
        PortState::Init => 2,
        PortState::Armed => 3,
        PortState::Active => 4,
        PortState::ActiveDefer => 5,
        PortState::Unknown(v) => v,
    })
}

/// The number sysfs gives a physical state (`phys_state`: "5: LinkUp").
fn phys_number(s: PhysState) -> f64 {
    f64::from(match s {
        PhysState::Sleep => 1,
        PhysState::Polling => 2,
        PhysState::Disabled => 3,
        PhysState::PortConfigurationTraining => 4,
        PhysState::LinkUp => 5,
        PhysState::LinkErrorRecovery => 6,
        PhysState::PhyTest => 7,
        PhysState::Unknown(v) => u32::from(v),
    })
}

fn verdict(p: &PortInfo, name: CheckName, expected: String, actual: String, ok: bool) -> Check {
    Check::judged(name, (&p.device, Some(p.port)), expected, actual, ok)
}

/// "2.5 Gb/s (1X SDR)", or "unknown" when sysfs has no valid rate.
fn rate_text(p: &PortInfo) -> String {
    match (p.rate_gbps, &p.active_width, &p.active_speed) {
        (Some(r), Some(w), Some(s)) => format!("{} ({w} {s})", super::gbits_text(r * 1e9)),
        (Some(r), _, _) => super::gbits_text(r * 1e9),
        _ => "unknown".into(),
    }
}

fn lanes(width: &str) -> Option<u32> {
    width.trim_end_matches(['X', 'x']).parse().ok()
}

/// The port's MTU as `--expect-mtu` compares it, and what it is: the netdev's on RoCE (sysfs),
/// the active IB MTU on InfiniBand (only libibverbs tells it: the device is opened for it).
fn mtu_of(p: &PortInfo) -> Result<(Option<u32>, &'static str)> {
    if p.link_layer == LinkLayer::Ethernet {
        return Ok((p.netdev_mtu, "netdev MTU"));
    }
    let q = PortQuery {
        verbose: true,
        counters: false,
        source: Source::Verbs,
    };
    let r = inventory::ports(Some(&p.device), Some(p.port), q)
        .with_context(|| format!("reading the active MTU of {} port {}", p.device, p.port))?;
    let mtu = r
        .ports
        .first()
        .and_then(|x| x.details.as_ref())
        .and_then(|d| d.active_mtu)
        .map(|m| m.bytes());
    Ok((mtu, "active IB MTU"))
}

/// The GID a RoCE v2 connection can use: RoCE v2, with an IPv4-mapped or non-link-local IPv6
/// address (the one rdmadiag would pick first).
fn usable_gid(p: &PortInfo) -> Option<String> {
    p.gids
        .iter()
        .filter(|g| g.gid_type == GidType::RoceV2 && !g.gid.is_zero())
        .filter(|g| g.gid.ipv4_mapped().is_some() || !g.gid.is_link_local())
        .min_by_key(|g| (!g.default, g.gid.ipv4_mapped().is_none(), g.index))
        .map(|g| {
            let ip = g.ip.as_deref().unwrap_or("");
            format!("GID[{}] {} ({ip}, RoCE v2)", g.index, g.gid)
        })
}

/// Every expectation's verdict on one port.
pub fn evaluate(p: &PortInfo, e: &Expectations) -> Result<Vec<Check>> {
    let mut out = Vec::new();
    let want = e.state.unwrap_or_default().port_state();
    out.push(Check {
        value: Some(state_number(p.state)),
        ..verdict(
            p,
            CheckName::State,
            want.to_string(),
            p.state.to_string(),
            p.state == want,
        )
    });
    if want == PortState::Active {
        out.push(Check {
            value: Some(phys_number(p.physical_state)),
            ..verdict(
                p,
                CheckName::PhysState,
                PhysState::LinkUp.to_string(),
                p.physical_state.to_string(),
                p.physical_state == PhysState::LinkUp,
            )
        });
    }
    if let Some(rate) = e.rate {
        let actual = p.rate_gbps.map(|g| g * 1e9);
        let ok = actual.is_some_and(|a| (a - rate).abs() <= rate * 1e-6);
        out.push(Check {
            value: actual.map(|a| a / 8.0),
            ..verdict(
                p,
                CheckName::Rate,
                super::gbits_text(rate),
                rate_text(p),
                ok,
            )
        });
    }
    if let Some(w) = e.width {
        let actual = p.active_width.as_deref().and_then(lanes);
        out.push(Check {
            value: actual.map(f64::from),
            ..verdict(
                p,
                CheckName::Width,
                format!("{w}X"),
                p.active_width.clone().unwrap_or_else(|| "unknown".into()),
                actual == Some(w),
            )
        });
    }
    if let Some(m) = e.mtu {
        let (actual, what) = mtu_of(p)?;
        out.push(Check {
            value: actual.map(f64::from),
            ..verdict(
                p,
                CheckName::Mtu,
                format!("{m} ({what})"),
                actual.map_or_else(|| format!("unknown ({what})"), |a| format!("{a} ({what})")),
                actual == Some(m),
            )
        });
    }
    if let Some(ll) = e.link_layer {
        out.push(verdict(
            p,
            CheckName::LinkLayer,
            ll.to_string(),
            p.link_layer.to_string(),
            p.link_layer == ll,
        ));
    }
    if e.gid {
        let found = usable_gid(p);
        let actual = found.clone().unwrap_or_else(|| {
            if p.link_layer == LinkLayer::Ethernet {
                "none (no RoCE v2 GID with an IP address)".into()
            } else {
                format!("none ({} port: no RoCE GIDs)", p.link_layer)
            }
        });
        out.push(verdict(
            p,
            CheckName::Gid,
            "a RoCE v2 GID with an IP address".into(),
            actual,
            found.is_some(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ib::Gid;
    use crate::report::inventory::GidInfo;

    fn rxe(state: PortState, phys: PhysState) -> PortInfo {
        let gid = |index, text: &str, default| GidInfo {
            index,
            gid: text.parse::<Gid>().unwrap(),
            gid_type: GidType::RoceV2,
            netdev: Some("dummy0".into()),
            ip: Some(text.trim_start_matches("::ffff:").into()),
            default,
        };
        PortInfo {
            device: "rxe0".into(),
            port: 1,
            state,
            physical_state: phys,
            link_layer: LinkLayer::Ethernet,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            active_width: Some("1X".into()),
            active_speed: Some("SDR".into()),
            speed_per_lane_gbps: Some(2.5),
            rate_gbps: Some(2.5),
            netdev: Some("dummy0".into()),
            netdev_mtu: Some(1500),
            netdev_speed_mbps: None,
            netdev_driver: None,
            active_mtu: None,
            default_gid_index: Some(1),
            gids: vec![
                gid(0, "fe80::43:caff:feb6:e9d8", false),
                gid(1, "::ffff:10.77.0.1", true),
            ],
            pkeys: vec!["0xffff".into()],
            details: None,
            counters: None,
            hw_counters: None,
            error_counters: None,
            counter_deltas: None,
        }
    }

    fn find(checks: &[Check], n: CheckName) -> &Check {
        checks.iter().find(|c| c.name == n).expect("the check ran")
    }

    #[test]
    fn by_default_a_port_must_be_active_and_link_up() {
        let good = evaluate(
            &rxe(PortState::Active, PhysState::LinkUp),
            &Expectations::default(),
        )
        .unwrap();
        assert_eq!(good.len(), 2);
        assert!(good.iter().all(|c| c.ok), "{good:?}");
        assert_eq!(good[0].target, "rxe0:1");
        assert_eq!(good[0].value, Some(4.0));
        let down = evaluate(
            &rxe(PortState::Down, PhysState::Disabled),
            &Expectations::default(),
        )
        .unwrap();
        let s = find(&down, CheckName::State);
        assert!(
            !s.ok && s.actual == "DOWN" && s.expected == "ACTIVE",
            "{s:?}"
        );
        assert!(!find(&down, CheckName::PhysState).ok);
        // Expecting DOWN: the physical state is not judged.
        let e = Expectations {
            state: Some(ExpectedState::Down),
            ..Expectations::default()
        };
        let c = evaluate(&rxe(PortState::Down, PhysState::Disabled), &e).unwrap();
        assert_eq!(c.len(), 1);
        assert!(c[0].ok);
    }

    #[test]
    fn rate_width_link_layer_and_mtu_are_exact() {
        let p = rxe(PortState::Active, PhysState::LinkUp);
        let e = Expectations {
            rate: Some(100e9),
            width: Some(4),
            link_layer: Some(LinkLayer::InfiniBand),
            mtu: Some(9000),
            ..Expectations::default()
        };
        let c = evaluate(&p, &e).unwrap();
        let rate = find(&c, CheckName::Rate);
        assert!(!rate.ok, "{rate:?}");
        assert_eq!(rate.expected, "100 Gb/s");
        assert_eq!(rate.actual, "2.5 Gb/s (1X SDR)");
        assert_eq!(rate.value, Some(2.5e9 / 8.0));
        let w = find(&c, CheckName::Width);
        assert!(!w.ok && w.actual == "1X" && w.expected == "4X");
        assert!(!find(&c, CheckName::LinkLayer).ok);
        let m = find(&c, CheckName::Mtu);
        assert_eq!(m.actual, "1500 (netdev MTU)");
        assert!(!m.ok);
        let e = Expectations {
            rate: Some(2.5e9),
            width: Some(1),
            link_layer: Some(LinkLayer::Ethernet),
            mtu: Some(1500),
            gid: true,
            ..Expectations::default()
        };
        let c = evaluate(&p, &e).unwrap();
        assert!(c.iter().all(|c| c.ok), "{c:?}");
        assert!(
            find(&c, CheckName::Gid)
                .actual
                .starts_with("GID[1] ::ffff:10.77.0.1"),
            "{c:?}"
        );
    }

    #[test]
    fn a_port_with_only_a_link_local_gid_has_no_usable_one() {
        let mut p = rxe(PortState::Active, PhysState::LinkUp);
        p.gids.truncate(1);
        let e = Expectations {
            gid: true,
            ..Expectations::default()
        };
        let c = evaluate(&p, &e).unwrap();
        let g = find(&c, CheckName::Gid);
        assert!(!g.ok && g.actual.starts_with("none"), "{g:?}");
    }
}
