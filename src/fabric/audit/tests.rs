use super::*;
use crate::ib::{GidType, LinkLayer, Mtu};
use crate::report::inventory::pcie::{PcieInfo, link};
use std::time::Instant;

/// A healthy ConnectX-6 port on RoCE v2: Gen4 x16, 100 Gb/s, active MTU 1024.
fn config() -> PortConfig {
    PortConfig {
        firmware: Some("20.31.1014".into()),
        driver: Some("mlx5_core".into()),
        kernel: Some("6.1.0-18-amd64".into()),
        rdma_core: Some("44.0".into()),
        rdmadiag: Some("0.9.0".into()),
        link_layer: Some(LinkLayer::Ethernet),
        rate_gbps: Some(100.0),
        width: Some("4X".into()),
        active_mtu: Some(Mtu(1024)),
        gid_type: Some(GidType::RoceV2),
        pcie: Some(PcieConfig {
            link: Some(link("0000:3b:00.0", (16.0, 16), (16.0, 16))),
            limit: None,
        }),
        numa_node: Some(0),
    }
}

fn fabric(n: usize) -> Vec<(String, PortConfig)> {
    (1..=n).map(|i| (format!("fab{i}"), config())).collect()
}

fn hosts(g: &ValueGroup) -> Vec<&str> {
    g.hosts.iter().map(String::as_str).collect()
}

#[test]
fn the_one_host_with_another_active_mtu_fails_by_name_with_both_values() {
    let mut configs = fabric(4);
    configs[2].1.active_mtu = Some(Mtu(4096));
    let findings = audit(&configs, &[]);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let f = &findings[0];
    assert_eq!(
        (f.field, f.kind, f.severity),
        (Field::Mtu, FindingKind::Differs, Severity::Failure)
    );
    assert_eq!(
        f.majority,
        Some(MajorityValue {
            value: "1024".into(),
            hosts: 3
        })
    );
    assert_eq!(f.groups.len(), 1);
    assert_eq!(
        (f.groups[0].value.as_str(), hosts(&f.groups[0])),
        ("4096", vec!["fab3"])
    );
    assert_eq!(f.text(), "active MTU 4096 on fab3; 1024 on 3 of 4");
}

#[test]
fn a_healthy_fabric_has_no_finding() {
    assert!(audit(&fabric(4), &Field::ALL).is_empty());
    assert!(audit(&[], &[]).is_empty());
}

#[test]
fn firmware_that_differs_is_information_unless_required_the_same() {
    let mut configs = fabric(4);
    configs[0].1.firmware = Some("20.28.1002".into());
    let findings = audit(&configs, &[]);
    assert_eq!(findings.len(), 1);
    assert_eq!(
        (findings[0].field, findings[0].severity),
        (Field::Firmware, Severity::Information)
    );
    assert_eq!(
        findings[0].text(),
        "firmware 20.28.1002 on fab1; 20.31.1014 on 3 of 4"
    );
    let required = audit(&configs, &Field::parse_list("firmware,driver").unwrap());
    assert_eq!(required[0].severity, Severity::Failure);
}

#[test]
fn two_against_two_is_no_majority_and_names_both_groups() {
    let mut configs = fabric(4);
    configs[1].1.gid_type = Some(GidType::RoceV1);
    configs[3].1.gid_type = Some(GidType::RoceV1);
    let findings = audit(&configs, &[]);
    assert_eq!(findings.len(), 1);
    let f = &findings[0];
    assert_eq!(
        (f.kind, f.severity),
        (FindingKind::NoMajority, Severity::Failure)
    );
    assert_eq!(f.majority, None);
    assert_eq!(hosts(&f.groups[0]), ["fab1", "fab3"]);
    assert_eq!(hosts(&f.groups[1]), ["fab2", "fab4"]);
    assert_eq!(
        f.text(),
        "no majority for GID type: RoCE v2 on fab1 and fab3; RoCE v1 on fab2 and fab4"
    );
}

#[test]
fn hosts_that_do_not_report_a_field_are_left_out_of_it() {
    let mut configs = fabric(5);
    for c in &mut configs[..3] {
        c.1.rdma_core = None;
    }
    configs[3].1.kernel = None;
    configs[4].1.kernel = Some("6.8.0".into());
    configs[4].1.rdma_core = Some("".into());
    let findings = audit(&configs, &[Field::Kernel, Field::RdmaCore]);
    assert_eq!(
        findings.len(),
        1,
        "one rdma-core known, nothing to compare: {findings:?}"
    );
    let f = &findings[0];
    assert_eq!((f.field, f.reporting, f.unreported), (Field::Kernel, 4, 1));
    assert_eq!(
        f.text(),
        "kernel 6.8.0 on fab5; 6.1.0-18-amd64 on 3 of 4 (1 host does not report it)"
    );
    let mut soft = fabric(3);
    for c in &mut soft {
        c.1.pcie = None;
    }
    soft[0].1.pcie = config().pcie;
    assert!(
        audit(&soft, &[]).is_empty(),
        "no PCI parent is not a difference"
    );
}

#[test]
fn pcie_x8_on_one_host_among_x16_fails_once_with_its_figures() {
    let mut configs = fabric(4);
    configs[1].1.pcie = Some(PcieConfig {
        link: Some(link("0000:3b:00.0", (16.0, 8), (16.0, 16))),
        limit: None,
    });
    let findings = audit(&configs, &[]);
    assert_eq!(
        findings.len(),
        1,
        "named once, not again as below maximum: {findings:?}"
    );
    let f = &findings[0];
    assert_eq!(
        (f.field, f.kind, f.severity),
        (Field::Pcie, FindingKind::Differs, Severity::Failure)
    );
    assert_eq!(f.text(), "PCIe link Gen4 x8 on fab2; Gen4 x16 on 3 of 4");
}

#[test]
fn pcie_below_its_maximum_everywhere_or_behind_a_bridge_is_named() {
    let mut configs = fabric(3);
    let x8 = PcieConfig {
        link: Some(link("0000:3b:00.0", (16.0, 8), (16.0, 16))),
        limit: None,
    };
    for c in &mut configs {
        c.1.pcie = Some(x8.clone());
    }
    configs[0].1.pcie = Some(PcieConfig {
        link: Some(link("0000:3b:00.0", (16.0, 8), (16.0, 16))),
        limit: Some(link("0000:39:00.0", (8.0, 8), (16.0, 16))),
    });
    let findings = audit(&configs, &[]);
    assert_eq!(findings.len(), 2, "{findings:?}");
    assert_eq!(
        findings[0].text(),
        "PCIe link Gen3 x8 on fab1; Gen4 x8 on 2 of 3"
    );
    let below = &findings[1];
    assert_eq!(
        (below.kind, below.severity),
        (FindingKind::BelowMaximum, Severity::Failure)
    );
    assert_eq!(
        below.text(),
        "PCIe link below its maximum: Gen4 x8 (max Gen4 x16) on fab2 and fab3"
    );
    let behind = PcieConfig {
        link: Some(link("0000:3b:00.0", (16.0, 16), (16.0, 16))),
        limit: Some(link("0000:39:00.0", (8.0, 16), (8.0, 16))),
    };
    assert_eq!(
        behind.below_maximum().as_deref(),
        Some("Gen3 x16 at bridge 0000:39:00.0 (max Gen4 x16)")
    );
}

#[test]
fn ten_thousand_hosts_with_three_outliers_are_quick_and_named() {
    let mut configs = fabric(10_000);
    for i in [17, 4_242, 9_999] {
        configs[i].1.active_mtu = Some(Mtu(4096));
    }
    for c in &mut configs[..40] {
        c.1.firmware = Some("20.28.1002".into());
    }
    let start = Instant::now();
    let findings = audit(&configs, &[]);
    assert!(start.elapsed().as_secs_f64() < 2.0, "{:?}", start.elapsed());
    assert_eq!(findings.len(), 2);
    assert_eq!(
        findings[0].text(),
        "active MTU 4096 on fab18, fab4243 and fab10000; 1024 on 9997 of 10000"
    );
    let fw = &findings[1];
    assert_eq!(fw.groups[0].hosts.len(), 40, "JSON names every host");
    assert!(
        fw.text().starts_with("firmware 20.28.1002 on fab1, fab2,")
            && fw
                .text()
                .ends_with("fab16 and 24 more; 20.31.1014 on 9960 of 10000"),
        "{}",
        fw.text()
    );
    let json = serde_json::to_string(&findings[0]).unwrap();
    assert!(json.contains("\"field\":\"mtu\"") && json.contains("\"kind\":\"differs\""));
}

#[test]
fn a_port_config_comes_from_the_inventory() {
    let mut device = crate::report::inventory::tests::device();
    let port = crate::report::inventory::tests::port();
    let software = HostSoftware {
        kernel: Some("6.1.0".into()),
        rdma_core: None,
        rdmadiag: Some(crate::VERSION.into()),
    };
    let own = link("0000:3b:00.0", (16.0, 16), (16.0, 16));
    let mut pcie = PcieInfo {
        address: own.address.clone(),
        link: Some(own),
        path: vec![link("0000:39:00.0", (8.0, 16), (16.0, 16))],
        limit: None,
    };
    pcie.limit = pcie.find_limit();
    device.pcie = Some(pcie);
    device.numa_node = Some(1);
    let c = port_config(&device, &port, None, &software);
    assert_eq!(c.firmware.as_deref(), Some("20.31.1014"));
    assert_eq!(c.active_mtu, Some(Mtu(1024)));
    assert_eq!((c.rate_gbps, c.width.as_deref()), (Some(100.0), Some("4X")));
    assert_eq!(c.gid_type, Some(GidType::RoceV2));
    assert_eq!(c.link_layer, Some(LinkLayer::Ethernet));
    assert_eq!(c.numa_node, Some(1));
    let p = c.pcie.as_ref().unwrap();
    assert_eq!(p.limit.as_ref().unwrap().address, "0000:39:00.0");
    assert_eq!(field_value(&c, Field::Pcie).as_deref(), Some("Gen3 x16"));
    let fe80: Gid = "fe80::1".parse().unwrap();
    let mut v1 = port.clone();
    v1.gids[0].gid_type = GidType::RoceV1;
    assert_eq!(
        port_config(&device, &v1, Some(&fe80), &software).gid_type,
        Some(GidType::RoceV1),
        "the GID the rank tests with, not the default"
    );
    device.pcie = None;
    device.fw_ver.clear();
    let soft = port_config(&device, &port, None, &software);
    assert_eq!((soft.pcie, soft.firmware), (None, None));
    let json = serde_json::to_string(&c).unwrap();
    assert!(json.len() < 1024, "compact: {json}");
    assert_eq!(serde_json::from_str::<PortConfig>(&json).unwrap(), c);
}

#[test]
fn rdma_core_is_told_by_the_libibverbs_file_mapped() {
    let maps = "\
7f1c2a000000-7f1c2a01a000 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c2b000000-7f1c2b00a000 r--p 00000000 08:01 5678 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0
7f1c2b00a000-7f1c2b01a000 r-xp 0000a000 08:01 5678 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0
";
    assert_eq!(rdma_core_from_maps(maps).as_deref(), Some("50.0"));
    let none = "7f1c2b000000-7f1c2b00a000 r--p 00000000 08:01 5678 /opt/lib/libibverbs.so.1\n";
    assert_eq!(
        rdma_core_from_maps(none),
        None,
        "a bare soname tells nothing"
    );
    assert_eq!(rdma_core_from_maps(""), None);
}
