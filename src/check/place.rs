//! The rules on where a device sits (`--pcie`, `--expect-pcie`, `--expect-numa`, `--cpus`): its
//! PCIe link and the links on its path to the root port, and its NUMA node, as verdicts on the
//! sysfs inventory. A device with no PCI parent is skipped with a note: the rules do not apply.

use crate::inventory::{self, Source};
use crate::report::check::{Check, CheckName};
use crate::report::inventory::DeviceInfo;
use crate::report::inventory::pcie::{
    NO_PCI_PARENT, PcieGen, figures_text, speed_text, width_text,
};
use crate::sysfs::{self, pci::parse_cpu_list};
use anyhow::{Context as _, Result};

/// `--expect-pcie GEN,WIDTH`: at least this generation and this many lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieExpect {
    pub generation: PcieGen,
    pub width: u32,
}

/// Parse `4,16`, `gen4,x16` or `Gen4,x16`.
pub fn parse_pcie_expect(s: &str) -> Result<PcieExpect, String> {
    let usage = || format!("'{s}' is not GEN,WIDTH (e.g. 4,16 or gen4,x16)");
    let (g, w) = s.trim().split_once(',').ok_or_else(usage)?;
    let g = g.trim();
    let g = g
        .strip_prefix("gen")
        .or_else(|| g.strip_prefix("Gen"))
        .or_else(|| g.strip_prefix("GEN"))
        .unwrap_or(g);
    let generation = g
        .parse::<u8>()
        .ok()
        .and_then(|n| PcieGen::try_from(n).ok())
        .ok_or_else(|| format!("'{g}' in '{s}' is not a PCIe generation (1 to 6)"))?;
    let w = w.trim();
    let width = match w.strip_prefix(['x', 'X']).unwrap_or(w).parse::<u32>() {
        Ok(n @ (1 | 2 | 4 | 8 | 12 | 16 | 32)) => n,
        _ => {
            return Err(format!(
                "'{w}' in '{s}' is not a PCIe width (x1, x2, x4, x8, x12, x16, x32)"
            ));
        }
    };
    Ok(PcieExpect { generation, width })
}

/// `--cpus LIST`: the CPUs the device's NUMA node must hold, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

/// Parse a CPU list as taskset takes it (`0-3,8`); an empty one is refused.
pub fn parse_cpus(s: &str) -> Result<CpuList, String> {
    let cpus = parse_cpu_list(s)?;
    if cpus.is_empty() {
        return Err(format!("'{s}' names no CPU (e.g. 0-3,8)"));
    }
    Ok(CpuList(cpus))
}

/// CPUs in the kernel's words: "0-3,8,10-11".
pub fn cpu_list_text(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// What the PCIe rule compares each device's slowest link with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcieRule {
    /// `--pcie`: the device's own maximum speed and width.
    AtMaximum,
    /// `--expect-pcie GEN,WIDTH`: at least these, whatever the device's maximum.
    AtLeast(PcieExpect),
}

/// The rules on each device's place; none by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlaceRules {
    pub pcie: Option<PcieRule>,
    /// `--expect-numa N`.
    pub numa: Option<u32>,
    /// `--cpus LIST`.
    pub cpus: Option<CpuList>,
}

impl PlaceRules {
    pub fn any(&self) -> bool {
        self.pcie.is_some() || self.numa.is_some() || self.cpus.is_some()
    }
}

fn verdict(d: &DeviceInfo, name: CheckName, expected: String, actual: String, ok: bool) -> Check {
    Check::judged(name, (&d.name, None), expected, actual, ok)
}

/// A rule that does not apply to this device: not a failure, not a pass either.
fn skip(d: &DeviceInfo, name: CheckName, expected: String, why: String) -> Check {
    Check {
        skipped: true,
        ..verdict(d, name, expected, format!("does not apply: {why}"), true)
    }
}

/// The PCIe verdict: the slowest link on the device's path against its maximum or the
/// expectation.
pub fn pcie(d: &DeviceInfo, rule: PcieRule) -> Check {
    let name = CheckName::Pcie;
    let Some(p) = &d.pcie else {
        return skip(d, name, "a PCIe link".into(), NO_PCI_PARENT.into());
    };
    let Some(own) = &p.link else {
        let why = format!(
            "{} has no PCIe link attributes (not PCI Express)",
            p.address
        );
        return skip(d, name, "a PCIe link".into(), why);
    };
    let (want_w, want_s, whose) = match rule {
        PcieRule::AtMaximum => (own.max_width, own.max_speed_gts, None),
        PcieRule::AtLeast(e) => (
            Some(e.width),
            Some(e.generation.gts()),
            Some("--expect-pcie"),
        ),
    };
    let expected = format!(
        "at least {} ({})",
        figures_text(want_w, want_s),
        whose.unwrap_or("its maximum")
    );
    let Some(limit) = &p.limit else {
        let why = format!(
            "{}: no link speed and width known (sysfs says Unknown)",
            p.address
        );
        return skip(d, name, expected, why);
    };
    if want_w.is_none() && want_s.is_none() {
        let why = format!("{} reports no maximum link: give --expect-pcie", p.address);
        return skip(d, name, expected, why);
    }
    let narrower = matches!((limit.width, want_w), (Some(c), Some(w)) if c < w);
    let slower = matches!((limit.speed_gts, want_s), (Some(c), Some(w)) if c + 0.01 < w);
    let value = limit.data_gbps().map(|g| g * 1e9 / 8.0);
    let at = if p.limited_upstream() {
        format!(" at bridge {} on its path", limit.address)
    } else {
        String::new()
    };
    let actual = if !narrower && !slower {
        format!("{}{at} ({})", limit.current_text(), p.address)
    } else {
        let reference = match (whose, p.limited_upstream()) {
            (Some(_), _) => "the expected",
            (None, false) => "its maximum",
            (None, true) => "the device's maximum",
        };
        let (how, figures) = match (narrower, slower) {
            (true, true) => ("narrower and slower", figures_text(want_w, want_s)),
            (true, false) => ("narrower", width_text(want_w)),
            _ => ("slower", speed_text(want_s)),
        };
        format!(
            "PCIe link {}{at} is {how} than {reference} {figures} ({})",
            limit.current_text(),
            p.address
        )
    };
    Check {
        value,
        ..verdict(d, name, expected, actual, !narrower && !slower)
    }
}

/// The NUMA verdict: the device's node is `--expect-numa` and holds `--cpus`. `node_cpus`
/// reads a node's CPU list.
pub fn numa(
    d: &DeviceInfo,
    rules: &PlaceRules,
    node_cpus: impl Fn(u32) -> Option<String>,
) -> Check {
    let name = CheckName::Numa;
    let cpus = rules.cpus.as_ref().map(|c| cpu_list_text(&c.0));
    let expected = match (rules.numa, &cpus) {
        (Some(n), Some(c)) => format!("node {n}, holding CPUs {c}"),
        (Some(n), None) => format!("node {n}"),
        (None, Some(c)) => format!("a node holding CPUs {c}"),
        (None, None) => "a NUMA node".into(),
    };
    let Some(p) = &d.pcie else {
        return skip(d, name, expected, NO_PCI_PARENT.into());
    };
    let Some(node) = d.numa_node else {
        let actual = format!(
            "NUMA node unknown: the kernel gives {} none (numa_node -1)",
            p.address
        );
        return verdict(d, name, expected, actual, false);
    };
    let list = node_cpus(node);
    let held = list.as_deref().map(parse_cpu_list).and_then(Result::ok);
    let mut wrong = Vec::new();
    if let Some(n) = rules.numa
        && n != node
    {
        wrong.push(format!("is not node {n}"));
    }
    if let Some(want) = &rules.cpus {
        match &held {
            Some(h) => {
                let missing: Vec<u32> = want.0.iter().copied().filter(|c| !h.contains(c)).collect();
                if !missing.is_empty() {
                    wrong.push(format!("does not hold CPUs {}", cpu_list_text(&missing)));
                }
            }
            None => wrong.push(format!(
                "has no readable CPU list (devices/system/node/node{node}/cpulist)"
            )),
        }
    }
    let cpus_now = list.map_or_else(String::new, |l| format!(" (CPUs {l})"));
    let actual = if wrong.is_empty() {
        format!("node {node}{cpus_now} ({})", p.address)
    } else {
        format!(
            "NUMA node {node}{cpus_now} {} ({})",
            wrong.join(" and "),
            p.address
        )
    };
    Check {
        value: Some(f64::from(node)),
        ..verdict(d, name, expected, actual, wrong.is_empty())
    }
}

/// Every place rule's verdict on each device of `devices`, read from sysfs.
pub fn evaluate(devices: &[String], rules: &PlaceRules) -> Result<Vec<Check>> {
    if !rules.any() {
        return Ok(Vec::new());
    }
    let root = sysfs::class_root();
    let mut out = Vec::new();
    for name in devices {
        let infos = inventory::devices(Some(name), Source::Sysfs)
            .with_context(|| format!("reading {name} from sysfs"))?;
        for d in &infos {
            if let Some(rule) = rules.pcie {
                out.push(pcie(d, rule));
            }
            if rules.numa.is_some() || rules.cpus.is_some() {
                out.push(numa(d, rules, |n| sysfs::pci::node_cpulist(&root, n)));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
