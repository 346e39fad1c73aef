//! The fabric's configuration audit as a report holds it: what each rank says of the port it
//! tests with ([`PortConfig`]), the fields the audit compares ([`Field`], also the names of
//! `--require-same`), its findings ([`ConfigFinding`]) and their words. The judging is
//! `fabric::audit`'s.

use crate::ib::{GidType, LinkLayer, Mtu};
use crate::report::inventory::pcie::PcieLink;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What one rank says of the port it tests with: sent with its hello, compact (a few hundred
/// bytes). None where the rank does not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortConfig {
    /// The device's firmware (sysfs `fw_ver`).
    pub firmware: Option<String>,
    /// The kernel driver of its PCI function (`mlx5_core`), else of its netdev.
    pub driver: Option<String>,
    /// The running kernel's release (`uname -r`).
    pub kernel: Option<String>,
    /// The rdma-core (libibverbs) version, when the rank could tell it.
    pub rdma_core: Option<String>,
    /// The rdmadiag the rank runs.
    pub rdmadiag: Option<String>,
    pub link_layer: Option<LinkLayer>,
    /// Lanes x per-lane speed, Gb/s.
    pub rate_gbps: Option<f64>,
    /// The active width as `ibv_devinfo` names it ("4X").
    pub width: Option<String>,
    pub active_mtu: Option<Mtu>,
    /// The type of the GID the rank tests with.
    pub gid_type: Option<GidType>,
    /// The device's PCIe link; None without a PCI parent (Soft-RoCE).
    pub pcie: Option<PcieConfig>,
    pub numa_node: Option<u32>,
}

/// The longest text a rank's [`PortConfig`] keeps per field: what a rank sends is cut to it on
/// arrival, so a report (and its Prometheus labels) stays small whatever a rank says.
pub const MAX_VALUE_CHARS: usize = 64;

impl PortConfig {
    /// This configuration with every text cut to [`MAX_VALUE_CHARS`] characters and its
    /// control characters made `?` (the hello's line is bounded already: this bounds what each
    /// rank adds to the report, and keeps a rank from writing on rank 0's terminal).
    pub fn bounded(mut self) -> PortConfig {
        let clean = |t: &str| -> String {
            t.chars()
                .take(MAX_VALUE_CHARS)
                .map(|c| if c.is_control() { '?' } else { c })
                .collect()
        };
        let cut = |s: &mut Option<String>| {
            if let Some(t) = s {
                *t = clean(t);
            }
        };
        for s in [
            &mut self.firmware,
            &mut self.driver,
            &mut self.kernel,
            &mut self.rdma_core,
            &mut self.rdmadiag,
            &mut self.width,
        ] {
            cut(s);
        }
        if let Some(p) = &mut self.pcie {
            for l in [&mut p.link, &mut p.limit].into_iter().flatten() {
                l.address = clean(&l.address);
            }
        }
        self
    }
}

/// A device's PCIe link as the audit compares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcieConfig {
    /// The device's own link; None for a function with no link attributes.
    pub link: Option<PcieLink>,
    /// The bridge link of least bandwidth on the path to the root port, when it is lower than
    /// the device's own (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<PcieLink>,
}

impl PcieConfig {
    /// The link that bounds the device's bandwidth: the path's limit, else its own.
    pub fn effective(&self) -> Option<&PcieLink> {
        self.limit.as_ref().or(self.link.as_ref())
    }

    /// "Gen4 x8 (max Gen4 x16)" when the effective link is slower or narrower than what the
    /// device's own link could do; None when it is not (or the figures are unknown).
    pub fn below_maximum(&self) -> Option<String> {
        let own = self.link.as_ref()?;
        let eff = self.effective()?;
        let slower =
            matches!((eff.speed_gts, own.max_speed_gts), (Some(c), Some(m)) if c + 0.01 < m);
        let narrower = matches!((eff.width, own.max_width), (Some(c), Some(m)) if c < m);
        if !(slower || narrower) {
            return None;
        }
        let at = if self.limit.is_some() {
            format!(" at bridge {}", eff.address)
        } else {
            String::new()
        };
        Some(format!(
            "{}{at} (max {})",
            eff.short_text(),
            own.max_short_text()
        ))
    }
}

/// A field the audit compares across hosts; by its kebab-case name in JSON and in
/// `--require-same`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Field {
    Mtu,
    Rate,
    Width,
    LinkLayer,
    GidType,
    Pcie,
    Numa,
    Firmware,
    Driver,
    Kernel,
    RdmaCore,
    Rdmadiag,
}

impl Field {
    /// Every field, in the order findings are reported.
    pub const ALL: [Field; 12] = [
        Field::Mtu,
        Field::Rate,
        Field::Width,
        Field::LinkLayer,
        Field::GidType,
        Field::Pcie,
        Field::Numa,
        Field::Firmware,
        Field::Driver,
        Field::Kernel,
        Field::RdmaCore,
        Field::Rdmadiag,
    ];

    /// Its name in `--require-same` and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Field::Mtu => "mtu",
            Field::Rate => "rate",
            Field::Width => "width",
            Field::LinkLayer => "link-layer",
            Field::GidType => "gid-type",
            Field::Pcie => "pcie",
            Field::Numa => "numa",
            Field::Firmware => "firmware",
            Field::Driver => "driver",
            Field::Kernel => "kernel",
            Field::RdmaCore => "rdma-core",
            Field::Rdmadiag => "rdmadiag",
        }
    }

    /// Its words in a finding: "active MTU 4096 on fab3".
    pub fn label(self) -> &'static str {
        match self {
            Field::Mtu => "active MTU",
            Field::Rate => "rate",
            Field::Width => "width",
            Field::LinkLayer => "link layer",
            Field::GidType => "GID type",
            Field::Pcie => "PCIe link",
            Field::Numa => "NUMA node",
            Field::Firmware => "firmware",
            Field::Driver => "driver",
            Field::Kernel => "kernel",
            Field::RdmaCore => "rdma-core",
            Field::Rdmadiag => "rdmadiag",
        }
    }

    /// Whether a difference changes the data path (and so fails the run by default).
    pub fn changes_data_path(self) -> bool {
        matches!(
            self,
            Field::Mtu
                | Field::Rate
                | Field::Width
                | Field::LinkLayer
                | Field::GidType
                | Field::Pcie
        )
    }

    /// A comma-separated list, as `--require-same firmware,driver` gives it (each once).
    pub fn parse_list(text: &str) -> Result<Vec<Field>, String> {
        let mut fields = Vec::new();
        for item in text.split(',') {
            let f: Field = item.parse()?;
            if !fields.contains(&f) {
                fields.push(f);
            }
        }
        Ok(fields)
    }
}

impl FromStr for Field {
    type Err = String;
    fn from_str(text: &str) -> Result<Field, String> {
        let t = text.trim();
        Field::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| {
                let valid: Vec<&str> = Field::ALL.iter().map(|f| f.name()).collect();
                format!(
                    "'{t}' is not a configuration field; valid: {}",
                    valid.join(", ")
                )
            })
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a finding fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Changes the data path, or was required the same: exit 3.
    Failure,
    /// Reported only.
    Information,
}

impl Severity {
    /// Its name in JSON and Prometheus labels.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Failure => "failure",
            Severity::Information => "information",
        }
    }
}

/// What a finding says of its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// Most hosts agree; the groups are the hosts that differ.
    Differs,
    /// No value is held by more hosts than every other (2 against 2); the groups are all hosts.
    NoMajority,
    /// PCIe: hosts whose link runs below what their device could do (and that no `differs`
    /// finding names already), even if most hosts do.
    BelowMaximum,
}

impl FindingKind {
    /// Its name in JSON and Prometheus labels.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Differs => "differs",
            FindingKind::NoMajority => "no-majority",
            FindingKind::BelowMaximum => "below-maximum",
        }
    }
}

/// The value most hosts report, and by how many.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MajorityValue {
    pub value: String,
    pub hosts: usize,
}

/// Hosts that report the same value (every one of them, in the order of the run's ranks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueGroup {
    pub value: String,
    pub hosts: Vec<String>,
}

/// One `config` finding of the audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigFinding {
    pub field: Field,
    pub kind: FindingKind,
    pub severity: Severity,
    /// None with `no-majority` and `below-maximum`.
    pub majority: Option<MajorityValue>,
    /// The hosts the finding names, by value, most hosts first.
    pub groups: Vec<ValueGroup>,
    /// How many hosts report the field.
    pub reporting: usize,
    /// How many do not (they are left out of the comparison).
    pub unreported: usize,
}

/// The most host names one finding's text shows (JSON has them all).
pub const TEXT_MAX_HOSTS: usize = 16;

impl ConfigFinding {
    /// The finding in a sentence: "active MTU 4096 on fab3; 1024 on 3 of 4", "no majority for
    /// GID type: RoCE v2 on a, b; RoCE v1 on c, d", "PCIe link below its maximum: Gen4 x8 (max
    /// Gen4 x16) on fab3". At most [`TEXT_MAX_HOSTS`] names, then how many more.
    pub fn text(&self) -> String {
        let mut budget = TEXT_MAX_HOSTS;
        let mut groups = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            if budget == 0 {
                let rest = &self.groups[i..];
                let hosts: usize = rest.iter().map(|g| g.hosts.len()).sum();
                let s = if rest.len() == 1 { "" } else { "s" };
                groups.push(format!("{} other value{s} on {hosts} hosts", rest.len()));
                break;
            }
            groups.push(format!("{} on {}", g.value, names(&g.hosts, &mut budget)));
        }
        let label = self.field.label();
        let mut text = match (&self.kind, &self.majority) {
            (FindingKind::Differs, Some(m)) => format!(
                "{label} {}; {} on {} of {}",
                groups.join("; "),
                m.value,
                m.hosts,
                self.reporting
            ),
            (FindingKind::BelowMaximum, _) => {
                format!("{label} below its maximum: {}", groups.join("; "))
            }
            _ => format!("no majority for {label}: {}", groups.join("; ")),
        };
        if self.unreported > 0 {
            let s = if self.unreported == 1 { "" } else { "s" };
            text.push_str(&format!(
                " ({} host{s} do{} not report it)",
                self.unreported,
                if self.unreported == 1 { "es" } else { "" }
            ));
        }
        text
    }
}

impl ConfigFinding {
    /// What the finding says of `host`, if it names it: "active MTU 4096 against 1024 on 3 of
    /// 4", "GID type RoCE v1 (no majority)", "PCIe link Gen4 x8 (max Gen4 x16), below its
    /// maximum".
    pub fn of_host(&self, host: &str) -> Option<String> {
        let g = self
            .groups
            .iter()
            .find(|g| g.hosts.iter().any(|h| h == host))?;
        let label = self.field.label();
        Some(match (&self.kind, &self.majority) {
            (FindingKind::Differs, Some(m)) => format!(
                "{label} {} against {} on {} of {}",
                g.value, m.value, m.hosts, self.reporting
            ),
            (FindingKind::BelowMaximum, _) => format!("{label} {}, below its maximum", g.value),
            _ => format!("{label} {} (no majority)", g.value),
        })
    }

    /// The hosts it names, every one, in its groups' order.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .flat_map(|g| g.hosts.iter().map(String::as_str))
    }

    /// The finding in a few words for the verdict line: "active MTU differs on fab3", "no
    /// majority for GID type", "PCIe link below its maximum on fab1 and fab2" (three names at
    /// most).
    pub fn short(&self) -> String {
        let label = self.field.label();
        let hosts: Vec<String> = self.hosts().map(str::to_string).collect();
        let on = names(&hosts, &mut 3);
        match self.kind {
            FindingKind::Differs => format!("{label} differs on {on}"),
            FindingKind::BelowMaximum => format!("{label} below its maximum on {on}"),
            FindingKind::NoMajority => format!("no majority for {label}"),
        }
    }
}

/// "a, b and c", or "a, b and 30 more" once `budget` names are spent.
fn names(hosts: &[String], budget: &mut usize) -> String {
    let shown = hosts.len().min(*budget).max(1);
    *budget = budget.saturating_sub(shown);
    let (head, rest) = hosts.split_at(shown.min(hosts.len()));
    match (head, rest.len()) {
        ([one], 0) => one.clone(),
        ([init @ .., last], 0) => format!("{} and {last}", init.join(", ")),
        (head, more) => format!("{} and {more} more", head.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_parse_by_name_and_a_wrong_one_names_the_choices() {
        assert_eq!(
            Field::parse_list("firmware,rdma-core, MTU,firmware").unwrap(),
            [Field::Firmware, Field::RdmaCore, Field::Mtu]
        );
        for f in Field::ALL {
            assert_eq!(f.name().parse::<Field>().unwrap(), f);
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.name()));
        }
        let e = Field::parse_list("firmware,fw").unwrap_err();
        assert_eq!(
            e,
            "'fw' is not a configuration field; valid: mtu, rate, width, link-layer, gid-type, \
             pcie, numa, firmware, driver, kernel, rdma-core, rdmadiag"
        );
        assert!(Field::parse_list("").is_err());
    }

    #[test]
    fn names_stop_at_the_budget() {
        let hosts: Vec<String> = (1..=20).map(|i| format!("h{i}")).collect();
        let mut budget = 3;
        assert_eq!(names(&hosts, &mut budget), "h1, h2, h3 and 17 more");
        assert_eq!(budget, 0);
        assert_eq!(names(&hosts[..1], &mut budget), "h1", "always one name");
        let mut budget = 16;
        assert_eq!(names(&hosts[..2], &mut budget), "h1 and h2");
    }

    #[test]
    fn many_values_stop_naming_hosts_at_the_limit() {
        let groups = (1..=20)
            .map(|i| ValueGroup {
                value: format!("fw{i}"),
                hosts: vec![format!("h{i}")],
            })
            .collect();
        let f = ConfigFinding {
            field: Field::Firmware,
            kind: FindingKind::Differs,
            severity: Severity::Information,
            majority: Some(MajorityValue {
                value: "fw0".into(),
                hosts: 30,
            }),
            groups,
            reporting: 50,
            unreported: 2,
        };
        assert_eq!(
            f.text(),
            "firmware fw1 on h1; fw2 on h2; fw3 on h3; fw4 on h4; fw5 on h5; fw6 on h6; fw7 on h7; \
             fw8 on h8; fw9 on h9; fw10 on h10; fw11 on h11; fw12 on h12; fw13 on h13; fw14 on \
             h14; fw15 on h15; fw16 on h16; 4 other values on 4 hosts; fw0 on 30 of 50 (2 hosts \
             do not report it)"
        );
    }
}
