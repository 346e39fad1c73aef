//! The PCIe link and NUMA placement of a device, as `devices`, `ports -v` and `check` report
//! them: plain serde values (a fabric rank can send them as they are), and their words.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A PCIe generation, named by its per-lane transfer rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum PcieGen {
    Gen1,
    Gen2,
    Gen3,
    Gen4,
    Gen5,
    Gen6,
}

impl PcieGen {
    pub const ALL: [PcieGen; 6] = [
        PcieGen::Gen1,
        PcieGen::Gen2,
        PcieGen::Gen3,
        PcieGen::Gen4,
        PcieGen::Gen5,
        PcieGen::Gen6,
    ];

    /// The generation's number, 1 to 6.
    pub fn number(self) -> u8 {
        self as u8 + 1
    }

    /// Per-lane transfer rate, GT/s.
    pub fn gts(self) -> f64 {
        match self {
            PcieGen::Gen1 => 2.5,
            PcieGen::Gen2 => 5.0,
            PcieGen::Gen3 => 8.0,
            PcieGen::Gen4 => 16.0,
            PcieGen::Gen5 => 32.0,
            PcieGen::Gen6 => 64.0,
        }
    }

    /// The generation of a transfer rate sysfs reports (2.5 GT/s is Gen1 ... 64 GT/s Gen6).
    pub fn from_gts(gts: f64) -> Option<PcieGen> {
        PcieGen::ALL
            .into_iter()
            .find(|g| (g.gts() - gts).abs() < 0.01)
    }

    /// The share of the transfer rate left for data: 8b/10b up to Gen2, 128b/130b from Gen3,
    /// FLIT mode (242 of 256 bytes) on Gen6.
    fn encoding(self) -> f64 {
        match self {
            PcieGen::Gen1 | PcieGen::Gen2 => 0.8,
            PcieGen::Gen3 | PcieGen::Gen4 | PcieGen::Gen5 => 128.0 / 130.0,
            PcieGen::Gen6 => 242.0 / 256.0,
        }
    }
}

impl From<PcieGen> for u8 {
    fn from(g: PcieGen) -> u8 {
        g.number()
    }
}

impl TryFrom<u8> for PcieGen {
    type Error = String;
    fn try_from(n: u8) -> Result<PcieGen, String> {
        PcieGen::ALL
            .into_iter()
            .find(|g| g.number() == n)
            .ok_or_else(|| format!("{n} is not a PCIe generation (1 to 6)"))
    }
}

impl fmt::Display for PcieGen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gen{}", self.number())
    }
}

/// One PCI function's link, as its sysfs `current_link_*` and `max_link_*` tell it; a value
/// the kernel reports as "Unknown" is None.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    /// The function's PCI address, `0000:3b:00.0`.
    pub address: String,
    pub speed_gts: Option<f64>,
    pub generation: Option<PcieGen>,
    pub width: Option<u32>,
    pub max_speed_gts: Option<f64>,
    pub max_generation: Option<PcieGen>,
    pub max_width: Option<u32>,
}

impl PcieLink {
    /// Data bandwidth per direction after line encoding, Gb/s (None when speed or width is
    /// unknown).
    pub fn data_gbps(&self) -> Option<f64> {
        let gts = self.speed_gts?;
        let enc = PcieGen::from_gts(gts).map_or(1.0, PcieGen::encoding);
        Some(gts * enc * f64::from(self.width?))
    }

    /// "x16 at 16.0 GT/s (Gen4)"; unknown parts say so.
    pub fn current_text(&self) -> String {
        figures_text(self.width, self.speed_gts)
    }

    /// "x16 at 16.0 GT/s (Gen4)" for the maximum.
    pub fn max_text(&self) -> String {
        figures_text(self.max_width, self.max_speed_gts)
    }

    /// "Gen4 x16": the current figures as a table cell or an audit value shows them.
    pub fn short_text(&self) -> String {
        short_figures(self.speed_gts, self.width)
    }

    /// "Gen4 x16" for the maximum.
    pub fn max_short_text(&self) -> String {
        short_figures(self.max_speed_gts, self.max_width)
    }

    /// Whether the link runs slower or narrower than its own maximum.
    pub fn below_maximum(&self) -> bool {
        below(self.speed_gts, self.max_speed_gts) || below_w(self.width, self.max_width)
    }
}

/// A speed and a width in few words: "Gen4 x16", "8.5 GT/s x4" off the generations' rates.
pub fn short_figures(speed_gts: Option<f64>, width: Option<u32>) -> String {
    let generation = speed_gts
        .and_then(PcieGen::from_gts)
        .map_or_else(|| speed_text(speed_gts), |g| g.to_string());
    format!("{generation} {}", width_text(width))
}

/// A width and a speed in words: "x8 at 16.0 GT/s (Gen4)".
pub fn figures_text(width: Option<u32>, speed_gts: Option<f64>) -> String {
    format!("{} at {}", width_text(width), speed_text(speed_gts))
}

/// "x16", or "width unknown".
pub fn width_text(width: Option<u32>) -> String {
    width.map_or_else(|| "width unknown".into(), |w| format!("x{w}"))
}

/// "16.0 GT/s (Gen4)", or "speed unknown".
pub fn speed_text(gts: Option<f64>) -> String {
    match gts {
        Some(g) => match PcieGen::from_gts(g) {
            Some(n) => format!("{g:.1} GT/s ({n})"),
            None => format!("{g:.1} GT/s"),
        },
        None => "speed unknown".into(),
    }
}

/// A device's place on PCIe: its function, its own link, the links on its path to the root
/// port, and the one of least bandwidth among them. Absent (`null`) for a device with no PCI
/// parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcieInfo {
    /// The device's PCI function, `0000:3b:00.0`.
    pub address: String,
    /// Its own link; None for a PCI function with no link attributes (conventional PCI, a
    /// virtual machine's root bus).
    pub link: Option<PcieLink>,
    /// The bridges above it up to the root port, nearest first, each with its link.
    pub path: Vec<PcieLink>,
    /// The link of least bandwidth on the way to the root port, the device's own included
    /// (its own when no other is lower); None when no link's speed and width are known.
    pub limit: Option<PcieLink>,
}

impl PcieInfo {
    /// The device's own link with the path above it, nearest first.
    pub fn links(&self) -> impl Iterator<Item = &PcieLink> {
        self.link.iter().chain(&self.path)
    }

    /// The link of least data bandwidth, the nearest on a tie.
    pub fn find_limit(&self) -> Option<PcieLink> {
        let mut best: Option<(&PcieLink, f64)> = None;
        for l in self.links() {
            if let Some(bw) = l.data_gbps()
                && best.is_none_or(|(_, b)| bw < b)
            {
                best = Some((l, bw));
            }
        }
        best.map(|(l, _)| l.clone())
    }

    /// Whether the limit is a bridge on the path rather than the device's own link.
    pub fn limited_upstream(&self) -> bool {
        self.limit
            .as_ref()
            .is_some_and(|l| l.address != self.address)
    }
}

/// The words for a device that has no PCI parent.
pub const NO_PCI_PARENT: &str = "no PCI parent (software device)";

/// A device's PCIe link in a table cell: "Gen4 x16", "Gen4 x8 (max x16)", "Gen4 x16, path
/// Gen3 x16 (0000:39:00.0)"; and whether it runs below what it could.
pub fn pcie_cell(p: Option<&PcieInfo>) -> (String, bool) {
    let Some(p) = p else {
        return (NO_PCI_PARENT.into(), false);
    };
    let Some(link) = &p.link else {
        return ("no PCIe link attributes".into(), false);
    };
    let mut text = link.short_text();
    let own_below = link.below_maximum();
    if own_below {
        text.push_str(&format!(" (max {})", link.max_short_text()));
    }
    let mut low = own_below;
    if p.limited_upstream()
        && let Some(l) = &p.limit
    {
        text.push_str(&format!(", path {} ({})", l.short_text(), l.address));
        low = true;
    }
    (text, low)
}

fn below(cur: Option<f64>, max: Option<f64>) -> bool {
    matches!((cur, max), (Some(c), Some(m)) if c + 0.01 < m)
}

fn below_w(cur: Option<u32>, max: Option<u32>) -> bool {
    matches!((cur, max), (Some(c), Some(m)) if c < m)
}

/// The lines `ports -v` shows for a device's PCIe link: (key, value) pairs.
pub fn pcie_rows(p: Option<&PcieInfo>) -> Vec<(&'static str, String)> {
    let Some(p) = p else {
        return vec![("PCIe", NO_PCI_PARENT.into())];
    };
    let mut rows = vec![("PCI function", p.address.clone())];
    match &p.link {
        Some(l) => rows.push((
            "PCIe link",
            format!("{}, max {}", l.current_text(), l.max_text()),
        )),
        None => rows.push(("PCIe link", "no link attributes (not PCI Express)".into())),
    }
    for l in &p.path {
        rows.push((
            "PCIe upstream",
            format!("{}: {}, max {}", l.address, l.current_text(), l.max_text()),
        ));
    }
    if let Some(l) = &p.limit {
        let whose = if p.limited_upstream() {
            format!("bridge {}", l.address)
        } else {
            "its own link".into()
        };
        rows.push(("PCIe path limit", format!("{} ({whose})", l.current_text())));
    }
    rows
}

/// A link at `cur` (GT/s, lanes) of its maximum `max`, for tests.
#[cfg(test)]
pub(crate) fn link(address: &str, cur: (f64, u32), max: (f64, u32)) -> PcieLink {
    PcieLink {
        address: address.into(),
        speed_gts: Some(cur.0),
        generation: PcieGen::from_gts(cur.0),
        width: Some(cur.1),
        max_speed_gts: Some(max.0),
        max_generation: PcieGen::from_gts(max.0),
        max_width: Some(max.1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_follow_the_transfer_rate() {
        for (gts, n) in [
            (2.5, 1),
            (5.0, 2),
            (8.0, 3),
            (16.0, 4),
            (32.0, 5),
            (64.0, 6),
        ] {
            assert_eq!(PcieGen::from_gts(gts).map(PcieGen::number), Some(n));
        }
        assert_eq!(PcieGen::from_gts(7.0), None);
        assert_eq!(serde_json::to_string(&PcieGen::Gen4).unwrap(), "4");
        assert_eq!(serde_json::from_str::<PcieGen>("3").unwrap(), PcieGen::Gen3);
        assert!(serde_json::from_str::<PcieGen>("7").is_err());
        assert_eq!(speed_text(Some(16.0)), "16.0 GT/s (Gen4)");
        assert_eq!(figures_text(Some(8), None), "x8 at speed unknown");
    }

    #[test]
    fn the_limit_is_the_link_of_least_bandwidth_nearest_first() {
        let own = link("0000:3b:00.0", (16.0, 16), (16.0, 16));
        let mut p = PcieInfo {
            address: own.address.clone(),
            link: Some(own.clone()),
            path: vec![
                link("0000:3a:00.0", (16.0, 16), (16.0, 16)),
                link("0000:39:00.0", (8.0, 16), (16.0, 16)),
            ],
            limit: None,
        };
        p.limit = p.find_limit();
        assert_eq!(p.limit.as_ref().unwrap().address, "0000:39:00.0");
        assert!(p.limited_upstream());
        let (cell, low) = pcie_cell(Some(&p));
        assert_eq!(cell, "Gen4 x16, path Gen3 x16 (0000:39:00.0)");
        assert!(low);
        p.path.truncate(1);
        p.limit = p.find_limit();
        assert_eq!(p.limit.as_ref().unwrap().address, "0000:3b:00.0");
        assert_eq!(pcie_cell(Some(&p)), ("Gen4 x16".into(), false));
        p.link = Some(link("0000:3b:00.0", (16.0, 8), (16.0, 16)));
        p.limit = p.find_limit();
        assert_eq!(pcie_cell(Some(&p)), ("Gen4 x8 (max Gen4 x16)".into(), true));
        assert_eq!(pcie_cell(None).0, NO_PCI_PARENT);
    }
}
