//! GIDs (16-byte port addresses) and the GID-table entries that carry their type and netdev.

use super::types::GidType;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A 16-byte GID, in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    pub fn as_ipv6(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
    /// `fe80::/64`, the link-local prefix every port's GID 0 carries.
    pub fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && (self.0[1] & 0xc0) == 0x80
    }
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), as RoCE uses for IPv4.
    pub fn ipv4_mapped(&self) -> Option<Ipv4Addr> {
        self.as_ipv6().to_ipv4_mapped()
    }
    /// The lower 64 bits; rdma-core uses a GRH only when these are non-zero.
    pub fn interface_id(&self) -> u64 {
        u64::from_be_bytes(self.0[8..].try_into().expect("8 bytes"))
    }
    /// The IP address a RoCE GID stands for: the IPv4 of a mapped GID, else the IPv6 itself.
    pub fn ip(&self) -> std::net::IpAddr {
        match self.ipv4_mapped() {
            Some(v4) => v4.into(),
            None => self.as_ipv6().into(),
        }
    }
    /// The 32-hex-digit wire form ibv_rc_pingpong exchanges (`gid_to_wire_gid`).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.as_ipv6())
    }
}

impl std::str::FromStr for Gid {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<Ipv6Addr>()
            .map(|a| Gid(a.octets()))
            .map_err(|_| format!("'{s}' is not a GID (expected IPv6 notation)"))
    }
}

impl Serialize for Gid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Gid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One valid entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    pub port: u8,
    pub index: u32,
    pub gid: Gid,
    pub gid_type: GidType,
    /// The network device the GID belongs to (RoCE), if any.
    pub netdev: Option<String>,
}

/// Pick the GID a RoCE connection should use by default: RoCE v2, IPv4-mapped preferred,
/// link-local avoided, lowest index among equals. InfiniBand ports use index 0.
pub fn default_gid_index(entries: &[GidEntry]) -> Option<u32> {
    let rank = |e: &GidEntry| -> Option<u8> {
        if e.gid.is_zero() {
            return None;
        }
        Some(
            match (
                e.gid_type,
                e.gid.ipv4_mapped().is_some(),
                e.gid.is_link_local(),
            ) {
                (GidType::RoceV2, true, _) => 0,
                (GidType::RoceV2, false, false) => 1,
                (GidType::RoceV1, true, _) => 2,
                (GidType::RoceV1, false, false) => 3,
                (GidType::RoceV2, _, true) => 4,
                (GidType::RoceV1, _, true) => 5,
                (GidType::Ib, _, _) => 6,
            },
        )
    };
    entries
        .iter()
        .filter_map(|e| rank(e).map(|r| (r, e.index)))
        .min()
        .map(|(_, index)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u32, gid: &str, gid_type: GidType) -> GidEntry {
        GidEntry {
            port: 1,
            index,
            gid: gid.parse().unwrap(),
            gid_type,
            netdev: Some("dummy0".into()),
        }
    }

    #[test]
    fn parses_and_prints_like_ip_tools() {
        let g: Gid = "::ffff:10.77.0.1".parse().unwrap();
        assert_eq!(g.to_string(), "::ffff:10.77.0.1");
        assert_eq!(g.ipv4_mapped(), Some(Ipv4Addr::new(10, 77, 0, 1)));
        assert_eq!(g.to_hex(), "00000000000000000000ffff0a4d0001");
        assert!(!g.is_link_local());
        let ll: Gid = "fe80::5054:ff:fe12:3456".parse().unwrap();
        assert!(ll.is_link_local());
        assert_eq!(ll.interface_id(), 0x5054_00ff_fe12_3456);
        assert!("nope".parse::<Gid>().is_err());
    }

    #[test]
    fn default_prefers_roce_v2_ipv4_mapped() {
        let t = vec![
            entry(0, "fe80::1", GidType::RoceV2),
            entry(1, "::ffff:10.77.0.1", GidType::RoceV1),
            entry(2, "2001:db8::1", GidType::RoceV2),
            entry(3, "::ffff:10.77.0.1", GidType::RoceV2),
        ];
        assert_eq!(default_gid_index(&t), Some(3));
        assert_eq!(default_gid_index(&t[..3]), Some(2));
        assert_eq!(default_gid_index(&t[..2]), Some(1));
        assert_eq!(default_gid_index(&t[..1]), Some(0));
        assert_eq!(default_gid_index(&[]), None);
    }

    #[test]
    fn default_on_infiniband_is_first_gid() {
        let t = vec![
            entry(0, "fe80::2", GidType::Ib),
            entry(1, "fe80::3", GidType::Ib),
        ];
        assert_eq!(default_gid_index(&t), Some(0));
    }
}
