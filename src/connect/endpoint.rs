//! Choosing the local device, port and GID for a peer, and the QP endpoint both sides exchange.

use crate::device_access;
use crate::verbs::{Context, Gid, GidEntry, GidType, LinkLayer, Mtu, PortAttr, default_gid_index};
use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, UdpSocket};
use std::sync::Arc;

/// What one side tells the other about its QP (and, for one-sided tests, its memory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub device: String,
    pub port: u8,
    pub link_layer: String,
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    pub gid: Gid,
    pub gid_index: u32,
    pub gid_type: Option<GidType>,
    pub netdev: Option<String>,
    /// The port's active MTU in bytes.
    pub active_mtu: u32,
    pub qkey: u32,
    /// The registered buffer the peer may access with RDMA WRITE/READ (one-sided tests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<RemoteMemory>,
}

/// A peer's registered buffer: where one-sided operations may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteMemory {
    pub addr: u64,
    pub rkey: u32,
    pub len: u64,
    /// WRITE latency: where the peer's writes are to land, in bytes past `addr` (a page of
    /// their own, apart from the source byte this side writes). None from a peer that does
    /// not say, whose writes land `max_size` bytes in: both sides then use that layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landing: Option<u64>,
}

/// The local port a test runs on, with the GID chosen for it.
#[derive(Clone)]
pub struct LocalPort {
    pub ctx: Arc<Context>,
    pub port: u8,
    pub attr: PortAttr,
    pub gid: Option<GidEntry>,
}

impl LocalPort {
    pub fn gid_index(&self) -> u32 {
        self.gid.as_ref().map_or(0, |g| g.index)
    }

    pub fn active_mtu(&self) -> Mtu {
        self.attr.active_mtu.unwrap_or(Mtu(1024))
    }

    /// This port's half of an endpoint, for a QP numbered `qpn` starting at `psn`.
    pub fn endpoint(&self, qpn: u32, psn: u32, qkey: u32) -> Endpoint {
        Endpoint {
            device: self.ctx.name().to_string(),
            port: self.port,
            link_layer: self.attr.link_layer.to_string(),
            lid: self.attr.lid,
            qpn,
            psn,
            gid: self.gid.as_ref().map(|g| g.gid).unwrap_or_default(),
            gid_index: self.gid_index(),
            gid_type: self.gid.as_ref().map(|g| g.gid_type),
            netdev: self.gid.as_ref().and_then(|g| g.netdev.clone()),
            active_mtu: self.active_mtu().bytes(),
            qkey,
            memory: None,
        }
    }
}

/// The local IP address this host uses to reach `peer` (no packet is sent).
pub fn local_ip_towards(peer: IpAddr) -> Option<IpAddr> {
    let bind = if peer.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let s = UdpSocket::bind(bind).ok()?;
    s.connect((peer, 9)).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

/// Which GID a port should use: `forced` if given (and valid), else on RoCE the RoCE v2 GID
/// carrying `local_ip`, else the port's default; on InfiniBand the lowest index.
pub fn choose_gid(
    entries: &[GidEntry],
    link_layer: LinkLayer,
    forced: Option<u32>,
    local_ip: Option<IpAddr>,
) -> Result<Option<GidEntry>, String> {
    if let Some(i) = forced {
        return match entries.iter().find(|e| e.index == i) {
            Some(e) => Ok(Some(e.clone())),
            None => Err(format!(
                "GID index {i} is not valid here; valid indexes: {}",
                if entries.is_empty() {
                    "none".to_string()
                } else {
                    entries
                        .iter()
                        .map(|e| e.index.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )),
        };
    }
    if link_layer != LinkLayer::Ethernet {
        return Ok(entries.iter().min_by_key(|e| e.index).cloned());
    }
    let ip = local_ip.filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    if let Some(ip) = ip {
        let matching: Vec<GidEntry> = entries
            .iter()
            .filter(|e| e.gid.ip() == ip)
            .cloned()
            .collect();
        let pick = matching
            .iter()
            .find(|e| e.gid_type == GidType::RoceV2)
            .or(matching.first());
        if let Some(e) = pick {
            return Ok(Some(e.clone()));
        }
    }
    let def = default_gid_index(entries);
    Ok(def.and_then(|i| entries.iter().find(|e| e.index == i).cloned()))
}

/// What the user asked for when choosing the local port.
#[derive(Debug, Clone, Default)]
pub struct PortChoice {
    pub device: Option<String>,
    pub port: Option<u8>,
    pub gid_index: Option<u32>,
}

/// Pick device, port and GID: the named ones, or the first active port whose GID table carries
/// `local_ip`, or else the first active port.
pub fn choose_port(choice: &PortChoice, local_ip: Option<IpAddr>) -> Result<LocalPort> {
    let ctxs = device_access::open_devices(choice.device.as_deref())?;
    let mut candidates = Vec::new();
    for ctx in &ctxs {
        let n = ctx.query_device()?.phys_port_cnt;
        let ports: Vec<u8> = match choice.port {
            Some(p) if p == 0 || p > n => {
                bail!("{} has no port {p}; valid ports: 1..{n}", ctx.name())
            }
            Some(p) => vec![p],
            None => (1..=n).collect(),
        };
        for p in ports {
            let attr = ctx.query_port(p)?;
            let entries = device_access::gid_table(ctx, p, &attr, n)?;
            let carries_ip = local_ip.is_some_and(|ip| entries.iter().any(|e| e.gid.ip() == ip));
            candidates.push((ctx.clone(), p, attr, entries, carries_ip));
        }
    }
    let best = candidates
        .iter()
        .position(|c| c.2.state.is_active() && c.4)
        .or_else(|| candidates.iter().position(|c| c.2.state.is_active()));
    let Some(i) = best else {
        let states: Vec<String> = candidates
            .iter()
            .map(|c| format!("{} port {} is {}", c.0.name(), c.1, c.2.state))
            .collect();
        bail!("no active RDMA port: {}", states.join(", "));
    };
    let (ctx, port, attr, entries, _) = candidates.swap_remove(i);
    finish_port(ctx, port, attr, &entries, choice.gid_index, local_ip)
}

fn finish_port(
    ctx: Arc<Context>,
    port: u8,
    attr: PortAttr,
    entries: &[GidEntry],
    gid_index: Option<u32>,
    local_ip: Option<IpAddr>,
) -> Result<LocalPort> {
    let gid = choose_gid(entries, attr.link_layer, gid_index, local_ip)
        .map_err(|e| anyhow::anyhow!("{} port {port}: {e}", ctx.name()))?;
    if attr.link_layer == LinkLayer::Ethernet && gid.is_none() {
        bail!(
            "{} port {port} is RoCE but has no usable GID: give its netdev an IP address",
            ctx.name()
        );
    }
    Ok(LocalPort {
        ctx,
        port,
        attr,
        gid,
    })
}

/// The local port on a context someone else chose (rdma_cm picks device and port by IP).
pub fn local_port_on(
    ctx: Arc<Context>,
    port: u8,
    gid_index: Option<u32>,
    local_ip: Option<IpAddr>,
) -> Result<LocalPort> {
    let n = ctx.query_device()?.phys_port_cnt;
    let attr = ctx.query_port(port)?;
    let entries = device_access::gid_table(&ctx, port, &attr, n)?;
    finish_port(ctx, port, attr, &entries, gid_index, local_ip)
}

/// The IP address rdma_cm should use for an endpoint: the IPv4 its GID maps, else `fallback`.
pub fn cm_address(e: &Endpoint, fallback: IpAddr) -> IpAddr {
    e.gid.ipv4_mapped().map(IpAddr::V4).unwrap_or(fallback)
}

/// The path MTU: `forced` if given (must be an IB MTU no larger than either port allows),
/// else the smaller active MTU of the two ports.
pub fn path_mtu(local: Mtu, remote: u32, forced: Option<u32>) -> Result<Mtu> {
    let remote = Mtu(remote);
    let natural = local.min(remote);
    match forced {
        None => Ok(natural),
        Some(m) => {
            let m = Mtu(m);
            if m.to_raw().is_none() {
                bail!("--mtu {m} is not an RDMA MTU (256, 512, 1024, 2048 or 4096)");
            }
            if m > natural {
                bail!("--mtu {m} is larger than the ports allow (local {local}, remote {remote})");
            }
            Ok(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(index: u32, gid: &str, t: GidType) -> GidEntry {
        GidEntry {
            port: 1,
            index,
            gid: gid.parse().unwrap(),
            gid_type: t,
            netdev: Some("eth0".into()),
        }
    }

    /// An older rdmadiag's buffer says nothing of a landing zone (read as None, so both sides
    /// keep the old layout), and one that has none sends nothing new.
    #[test]
    fn a_buffer_without_a_landing_zone_reads_as_before() {
        let old: RemoteMemory =
            serde_json::from_str(r#"{"addr":4096,"rkey":7,"len":128}"#).unwrap();
        assert_eq!(old.landing, None);
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            r#"{"addr":4096,"rkey":7,"len":128}"#
        );
        let new = RemoteMemory {
            landing: Some(4096),
            ..old
        };
        let back: RemoteMemory =
            serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(back.landing, Some(4096));
    }

    #[test]
    fn gid_follows_the_local_ip_then_the_default() {
        let t = vec![
            e(0, "fe80::1", GidType::RoceV2),
            e(1, "::ffff:10.0.0.5", GidType::RoceV1),
            e(2, "::ffff:10.0.0.5", GidType::RoceV2),
            e(3, "::ffff:192.168.1.5", GidType::RoceV2),
        ];
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let pick = |l| {
            choose_gid(&t, LinkLayer::Ethernet, None, l)
                .unwrap()
                .unwrap()
                .index
        };
        assert_eq!(pick(ip("192.168.1.5")), 3);
        assert_eq!(pick(ip("10.0.0.5")), 2);
        assert_eq!(
            pick(ip("127.0.0.1")),
            2,
            "loopback falls back to the default"
        );
        assert_eq!(pick(None), 2);
        let forced = choose_gid(&t, LinkLayer::Ethernet, Some(0), ip("10.0.0.5"));
        assert_eq!(forced.unwrap().unwrap().index, 0);
        let bad = choose_gid(&t, LinkLayer::Ethernet, Some(9), None).unwrap_err();
        assert!(bad.contains("valid indexes: 0, 1, 2, 3"), "{bad}");
        let ib = vec![e(0, "fe80::2", GidType::Ib)];
        let g = choose_gid(&ib, LinkLayer::InfiniBand, None, ip("10.0.0.5"));
        assert_eq!(g.unwrap().unwrap().index, 0);
    }

    #[test]
    fn path_mtu_is_the_smaller_unless_forced() {
        assert_eq!(path_mtu(Mtu(4096), 1024, None).unwrap(), Mtu(1024));
        assert_eq!(path_mtu(Mtu(1024), 4096, None).unwrap(), Mtu(1024));
        assert_eq!(path_mtu(Mtu(4096), 4096, Some(512)).unwrap(), Mtu(512));
        assert!(path_mtu(Mtu(1024), 1024, Some(1500)).is_err());
        assert!(path_mtu(Mtu(1024), 4096, Some(2048)).is_err());
    }
}
