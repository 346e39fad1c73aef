//! The place rules on made-up devices: every PCIe case of the fixtures, and NUMA.

use super::*;
use crate::ib::{DeviceTransport, NodeType};
use crate::report::inventory::pcie::{PcieInfo, PcieLink, link};

fn device(own: Option<PcieLink>, path: Vec<PcieLink>) -> DeviceInfo {
    let mut pcie = PcieInfo {
        address: "0000:3b:00.0".into(),
        link: own,
        path,
        limit: None,
    };
    pcie.limit = pcie.find_limit();
    DeviceInfo {
        name: "mlx5_0".into(),
        node_guid: String::new(),
        sys_image_guid: String::new(),
        node_type: NodeType::Ca,
        transport: DeviceTransport::InfiniBand,
        fw_ver: String::new(),
        board_id: None,
        pci_vendor_id: Some(0x15b3),
        pci_device_id: Some(0x101d),
        pcie: Some(pcie),
        numa_node: Some(1),
        local_cpulist: Some("16-31,48-63".into()),
        driver: Some("mlx5_core".into()),
        phys_port_cnt: 1,
        ports_active: 1,
        port_summary: "1/1 active".into(),
        details: None,
    }
}

const G4X16: (f64, u32) = (16.0, 16);

#[test]
fn expectations_and_cpu_lists_parse_and_errors_name_the_part() {
    let e = parse_pcie_expect("4,16").unwrap();
    assert_eq!((e.generation, e.width), (PcieGen::Gen4, 16));
    assert_eq!(
        parse_pcie_expect("gen3,x8").unwrap().generation,
        PcieGen::Gen3
    );
    assert_eq!(parse_pcie_expect(" Gen5 , X16 ").unwrap().width, 16);
    assert!(parse_pcie_expect("4").unwrap_err().contains("GEN,WIDTH"));
    assert!(
        parse_pcie_expect("7,16")
            .unwrap_err()
            .contains("generation")
    );
    assert!(parse_pcie_expect("4,x3").unwrap_err().contains("width"));
    assert_eq!(parse_cpus("0-3,8").unwrap().0, [0, 1, 2, 3, 8]);
    assert!(parse_cpus("").is_err());
    assert!(parse_cpus("0-").is_err());
    assert_eq!(cpu_list_text(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
}

#[test]
fn a_healthy_link_passes_with_its_figures() {
    let d = device(Some(link("0000:3b:00.0", G4X16, G4X16)), vec![]);
    let c = pcie(&d, PcieRule::AtMaximum);
    assert!(c.ok && !c.skipped, "{c:?}");
    assert_eq!(c.actual, "x16 at 16.0 GT/s (Gen4) (0000:3b:00.0)");
    assert_eq!(c.expected, "at least x16 at 16.0 GT/s (Gen4) (its maximum)");
    assert_eq!(c.target, "mlx5_0");
    let bytes = c.value.unwrap();
    assert!(
        (bytes - 16.0 * 16.0 * 128.0 / 130.0 * 1e9 / 8.0).abs() < 1.0,
        "{bytes}"
    );
}

#[test]
fn a_downgraded_width_fails_naming_both_figures() {
    let d = device(
        Some(link("0000:3b:00.0", (16.0, 8), G4X16)),
        vec![link("0000:3a:00.0", (16.0, 8), G4X16)],
    );
    let c = pcie(&d, PcieRule::AtMaximum);
    assert!(!c.ok);
    assert_eq!(
        c.actual,
        "PCIe link x8 at 16.0 GT/s (Gen4) is narrower than its maximum x16 (0000:3b:00.0)"
    );
    assert_eq!(
        crate::report::check::what_failed(&c),
        c.actual,
        "the NHC line and the Slurm reason are the sentence"
    );
    // An x8 slot accepted on purpose.
    let e = PcieRule::AtLeast(parse_pcie_expect("4,8").unwrap());
    assert!(pcie(&d, e).ok);
    let e = PcieRule::AtLeast(parse_pcie_expect("5,16").unwrap());
    let c = pcie(&d, e);
    assert!(
        c.actual
            .contains("is narrower and slower than the expected x16 at 32.0 GT/s (Gen5)"),
        "{c:?}"
    );
}

#[test]
fn a_slow_bridge_on_the_path_fails_naming_the_bridge() {
    let d = device(
        Some(link("0000:3b:00.0", G4X16, G4X16)),
        vec![
            link("0000:3a:00.0", G4X16, G4X16),
            link("0000:39:00.0", (8.0, 16), G4X16),
            link("0000:38:00.0", (8.0, 16), G4X16),
        ],
    );
    let c = pcie(&d, PcieRule::AtMaximum);
    assert!(!c.ok);
    assert_eq!(
        c.actual,
        "PCIe link x16 at 8.0 GT/s (Gen3) at bridge 0000:39:00.0 on its path is slower than \
         the device's maximum 16.0 GT/s (Gen4) (0000:3b:00.0)"
    );
    assert!(pcie(&d, PcieRule::AtLeast(parse_pcie_expect("3,16").unwrap())).ok);
}

#[test]
fn no_pci_parent_or_no_link_is_skipped_with_a_note() {
    let mut d = device(None, vec![]);
    let c = pcie(&d, PcieRule::AtMaximum);
    assert!(c.ok && c.skipped, "{c:?}");
    assert!(c.actual.contains("no PCIe link attributes"), "{c:?}");
    d.pcie = None;
    let c = pcie(&d, PcieRule::AtMaximum);
    assert!(c.skipped);
    assert_eq!(c.actual, "does not apply: no PCI parent (software device)");
    let n = numa(
        &d,
        &PlaceRules {
            numa: Some(0),
            ..PlaceRules::default()
        },
        |_| None,
    );
    assert!(n.skipped && n.actual.contains("no PCI parent"), "{n:?}");
}

#[test]
fn numa_node_and_cpus_name_both_figures() {
    let d = device(Some(link("0000:3b:00.0", G4X16, G4X16)), vec![]);
    let cpus = |n: u32| Some(if n == 0 { "0-15,32-47" } else { "16-31,48-63" }.to_string());
    let rules = |numa, c: Option<&str>| PlaceRules {
        numa,
        cpus: c.map(|c| parse_cpus(c).unwrap()),
        pcie: None,
    };
    let ok = numa(&d, &rules(Some(1), Some("16-19")), cpus);
    assert!(ok.ok, "{ok:?}");
    assert_eq!(ok.actual, "node 1 (CPUs 16-31,48-63) (0000:3b:00.0)");
    assert_eq!(ok.value, Some(1.0));
    let bad = numa(&d, &rules(Some(0), None), cpus);
    assert!(!bad.ok);
    assert_eq!(
        bad.actual,
        "NUMA node 1 (CPUs 16-31,48-63) is not node 0 (0000:3b:00.0)"
    );
    let bad = numa(&d, &rules(None, Some("0-3,16")), cpus);
    assert!(!bad.ok);
    assert!(bad.actual.contains("does not hold CPUs 0-3"), "{bad:?}");
    assert_eq!(bad.expected, "a node holding CPUs 0-3,16");
    let mut none = d.clone();
    none.numa_node = None;
    let c = numa(&none, &rules(Some(0), None), cpus);
    assert!(!c.ok && c.actual.contains("numa_node -1"), "{c:?}");
}

#[test]
fn a_link_the_kernel_calls_unknown_is_not_judged_as_zero() {
    let mut unknown = link("0000:3b:00.0", G4X16, G4X16);
    unknown.speed_gts = None;
    unknown.width = None;
    // A bridge above that says Unknown is left out of the limit: the device's own link counts.
    let mut bridge = link("0000:3a:00.0", G4X16, G4X16);
    bridge.speed_gts = None;
    let d = device(Some(link("0000:3b:00.0", G4X16, G4X16)), vec![bridge]);
    assert!(pcie(&d, PcieRule::AtMaximum).ok);
    // Nothing known on the whole path: skipped, saying why.
    let d = device(Some(unknown.clone()), vec![]);
    let c = pcie(&d, PcieRule::AtMaximum);
    assert!(c.skipped && c.actual.contains("Unknown"), "{c:?}");
    // No maximum to compare with: --expect-pcie is asked for.
    let mut no_max = link("0000:3b:00.0", G4X16, G4X16);
    no_max.max_speed_gts = None;
    no_max.max_width = None;
    let d = device(Some(no_max), vec![]);
    let c = pcie(&d, PcieRule::AtMaximum);
    assert!(c.skipped && c.actual.contains("--expect-pcie"), "{c:?}");
    assert!(pcie(&d, PcieRule::AtLeast(parse_pcie_expect("4,16").unwrap())).ok);
}
