//! Where a device sits in the host, from sysfs: its PCI function, PCIe link and the links of the
//! bridges up to the root port, NUMA node, local CPUs and driver.

use crate::report::inventory::pcie::{PcieGen, PcieInfo, PcieLink};
use crate::sysfs::pci::{self, LinkAttrs};
use std::path::Path;

/// What sysfs tells of a device's place; all None for a device with no PCI parent.
#[derive(Debug, Default)]
pub(super) struct Place {
    pub pcie: Option<PcieInfo>,
    pub numa_node: Option<u32>,
    pub local_cpulist: Option<String>,
    pub driver: Option<String>,
}

fn link(a: LinkAttrs) -> PcieLink {
    PcieLink {
        address: a.address,
        speed_gts: a.speed_gts,
        generation: a.speed_gts.and_then(PcieGen::from_gts),
        width: a.width,
        max_speed_gts: a.max_speed_gts,
        max_generation: a.max_speed_gts.and_then(PcieGen::from_gts),
        max_width: a.max_width,
    }
}

/// Read the place of `dev` under the class root `root`.
pub(super) fn read(root: &Path, dev: &str) -> Place {
    let Some(function) = pci::pci_function(root, dev) else {
        return Place::default();
    };
    let address = function
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut info = PcieInfo {
        address,
        link: pci::link_attrs(&function).map(link),
        path: pci::upstream(&function)
            .iter()
            .filter_map(|d| pci::link_attrs(d))
            .map(link)
            .collect(),
        limit: None,
    };
    info.limit = info.find_limit();
    Place {
        pcie: Some(info),
        numa_node: pci::numa_node(&function),
        local_cpulist: pci::local_cpulist(&function),
        driver: pci::driver(&function),
    }
}
