//! Tests of the inventory's tables and text, and sample reports other tests build on.
use super::*;

pub(crate) fn port() -> PortInfo {
    PortInfo {
        device: "rxe0".into(),
        port: 1,
        state: PortState::Active,
        physical_state: PhysState::LinkUp,
        link_layer: LinkLayer::Ethernet,
        lid: 0,
        sm_lid: 0,
        lmc: 0,
        active_width: Some("4X".into()),
        active_speed: Some("EDR".into()),
        speed_per_lane_gbps: Some(25.0),
        rate_gbps: Some(100.0),
        netdev: Some("dummy0".into()),
        netdev_mtu: Some(1500),
        netdev_speed_mbps: None,
        netdev_driver: None,
        active_mtu: Some(ActiveMtu {
            mtu: Mtu(1024),
            source: MtuSource::Netdev,
            header_bytes: Some(80),
        }),
        default_gid_index: Some(1),
        gids: vec![
            GidInfo {
                index: 0,
                gid: "fe80::1".parse().unwrap(),
                gid_type: GidType::RoceV2,
                netdev: Some("dummy0".into()),
                ip: Some("fe80::1".into()),
                default: false,
            },
            GidInfo {
                index: 1,
                gid: "::ffff:10.77.0.1".parse().unwrap(),
                gid_type: GidType::RoceV2,
                netdev: Some("dummy0".into()),
                ip: Some("10.77.0.1".into()),
                default: true,
            },
        ],
        pkeys: vec!["0xffff".into()],
        details: None,
        counters: Some(BTreeMap::from([
            ("port_rcv_errors".to_string(), 3),
            ("port_xmit_data".to_string(), 10),
        ])),
        hw_counters: None,
        error_counters: Some(vec!["port_rcv_errors".into()]),
        counter_deltas: None,
    }
}

#[test]
fn plain_ports_text_has_gids_types_ips_and_marks() {
    let r = PortsReport {
        devices: vec![],
        ports: vec![port()],
    };
    let out = ports_text(&r, Style::plain());
    assert!(!out.contains('\u{1b}'), "no escape codes on a pipe");
    assert!(out.contains("ACTIVE (LINK_UP)"), "{out}");
    assert!(
        out.contains("4X EDR (25 Gb/s per lane) = 100 Gb/s"),
        "{out}"
    );
    assert!(
        out.contains("1024 active (netdev 1500 less 80 B of headers)"),
        "{out}"
    );
    let json = serde_json::to_value(&r).unwrap();
    let a = &json["ports"][0]["active_mtu"];
    assert_eq!(a["mtu"], 1024, "{json}");
    assert_eq!(a["source"], "netdev", "{json}");
    assert_eq!(a["header_bytes"], 80, "{json}");
    let row = out
        .lines()
        .find(|l| l.contains("::ffff:10.77.0.1") && l.contains("dummy0"))
        .expect("GID row");
    assert!(row.trim_start().starts_with('*'), "{row}");
    assert!(
        row.contains("RoCE v2") && row.contains("10.77.0.1"),
        "{row}"
    );
    let bad = out.lines().find(|l| l.contains("port_rcv_errors")).unwrap();
    assert!(bad.contains("! error count"), "{bad}");
    let fine = out.lines().find(|l| l.contains("port_xmit_data")).unwrap();
    assert!(!fine.contains('!'), "{fine}");
    assert!(!out.contains("LID / SM LID"), "no LID row on Ethernet");
    assert!(!out.contains("max_msg_sz"), "port details only with -v");
}

#[test]
fn verbose_ports_text_has_ib_mtus_and_device_details() {
    let mut p = port();
    p.details = Some(PortDetails {
        max_mtu: Some(Mtu(4096)),
        active_mtu: Some(Mtu(1024)),
        max_msg_sz: 0x8000_0000,
        port_cap_flags: 0x0001_0000,
        port_cap_flags2: 0,
        max_vl_num: 1,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        sm_sl: 0,
        pkey_tbl_len: 1,
        gid_tbl_len: 1024,
        subnet_timeout: 0,
        init_type_reply: 0,
        flags: 0,
    });
    let mut d = device();
    d.details = Some(DeviceDetails {
        hw_ver: 0,
        vendor_id: 0xff_ffff,
        vendor_part_id: 0,
        limits: limits(),
    });
    let r = PortsReport {
        devices: vec![d],
        ports: vec![p],
    };
    let out = ports_text(&r, Style::plain());
    assert!(out.contains("1024 active, 4096 max (netdev 1500)"), "{out}");
    assert!(
        out.contains("max_msg_sz") && out.contains("0x80000000"),
        "{out}"
    );
    assert!(
        out.contains("vendor_id 0xffffff, vendor_part_id 0"),
        "{out}"
    );
    assert!(
        out.contains("max_qp") && out.contains("ATOMIC_HCA"),
        "{out}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["devices"][0]["vendor_id"], 0xff_ffff, "{json}");
    assert_eq!(json["devices"][0]["limits"]["max_qp"], 1024, "{json}");
    assert_eq!(json["ports"][0]["details"]["active_mtu"], 1024, "{json}");
}

fn limits() -> DeviceLimits {
    DeviceLimits {
        max_mr_size: u64::MAX,
        page_size_cap: 0xffff_f000,
        max_qp: 1024,
        max_qp_wr: 1024,
        device_cap_flags: 0,
        max_sge: 32,
        max_sge_rd: 32,
        max_cq: 1024,
        max_cqe: 1024,
        max_mr: 1024,
        max_pd: 1024,
        max_qp_rd_atom: 128,
        max_ee_rd_atom: 0,
        max_res_rd_atom: 0,
        max_qp_init_rd_atom: 128,
        max_ee_init_rd_atom: 0,
        atomic_cap: crate::ib::AtomicCap::Hca,
        max_ee: 0,
        max_rdd: 0,
        max_mw: 0,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
        max_ah: 0,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: 0,
        max_srq_wr: 0,
        max_srq_sge: 0,
        max_pkeys: 64,
        local_ca_ack_delay: 15,
    }
}

pub(crate) fn device() -> DeviceInfo {
    DeviceInfo {
        name: "mlx5_0".into(),
        node_guid: "0c42:a103:0065:d4a6".into(),
        sys_image_guid: "0c42:a103:0065:d4a6".into(),
        node_type: NodeType::Ca,
        transport: DeviceTransport::InfiniBand,
        fw_ver: "20.31.1014".into(),
        board_id: Some("MT_0000000222".into()),
        pci_vendor_id: Some(0x15b3),
        pci_device_id: Some(0x101b),
        pcie: None,
        numa_node: None,
        local_cpulist: None,
        driver: None,
        phys_port_cnt: 2,
        ports_active: 1,
        port_summary: "1/2 active".into(),
        details: None,
    }
}

#[test]
fn devices_table_one_row_per_device() {
    let d = device();
    let soft = DeviceInfo {
        name: "rxe0".into(),
        fw_ver: String::new(),
        pci_vendor_id: None,
        pci_device_id: None,
        ..d.clone()
    };
    let out = devices_table(
        &[
            d.clone(),
            DeviceInfo {
                name: "mlx5_1".into(),
                ..d
            },
            soft,
        ],
        Style::plain(),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].contains("DEVICE") && lines[0].contains("NODE GUID"));
    assert!(lines[0].contains("PCI ID"), "{out}");
    assert!(lines[1].contains("0c42:a103:0065:d4a6") && lines[1].contains("15b3:101b"));
    assert!(lines[1].contains("1/2 active") && lines[1].contains("20.31.1014"));
    // No firmware string, no PCI ids and no NUMA node (Soft-RoCE): dashes, not blanks; and
    // its PCIe link is not zero but said to be absent.
    let cells: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(cells[0], "rxe0");
    assert_eq!(cells.iter().filter(|c| **c == "-").count(), 3, "{out}");
    assert!(
        lines[3].contains("no PCI parent (software device)"),
        "{out}"
    );
    assert!(
        lines[0].contains("PCIE") && lines[0].contains("NUMA"),
        "{out}"
    );
    assert!(!out.contains("vendor_id"), "no verbs details in the table");
}

#[test]
fn verbose_ports_text_has_the_pcie_path_numa_node_and_driver() {
    use super::pcie::{PcieGen, PcieLink};
    let link = |address: &str, gts: f64, width| PcieLink {
        address: address.into(),
        speed_gts: Some(gts),
        generation: PcieGen::from_gts(gts),
        width: Some(width),
        max_speed_gts: Some(16.0),
        max_generation: Some(PcieGen::Gen4),
        max_width: Some(16),
    };
    let mut d = device();
    let mut pcie = PcieInfo {
        address: "0000:3b:00.0".into(),
        link: Some(link("0000:3b:00.0", 16.0, 16)),
        path: vec![link("0000:3a:00.0", 8.0, 16)],
        limit: None,
    };
    pcie.limit = pcie.find_limit();
    d.pcie = Some(pcie);
    d.numa_node = Some(1);
    d.local_cpulist = Some("16-31".into());
    d.driver = Some("mlx5_core".into());
    d.details = Some(DeviceDetails {
        hw_ver: 0,
        vendor_id: 0x02c9,
        vendor_part_id: 4125,
        limits: limits(),
    });
    let r = PortsReport {
        devices: vec![d.clone()],
        ports: vec![port()],
    };
    let out = ports_text(&r, Style::plain());
    for want in [
        "PCI function",
        "x16 at 16.0 GT/s (Gen4), max x16 at 16.0 GT/s (Gen4)",
        "0000:3a:00.0: x16 at 8.0 GT/s (Gen3), max x16 at 16.0 GT/s (Gen4)",
        "x16 at 8.0 GT/s (Gen3) (bridge 0000:3a:00.0)",
        "16-31",
        "mlx5_core",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    d.pcie = None;
    let r = PortsReport {
        devices: vec![d],
        ports: vec![],
    };
    let out = ports_text(&r, Style::plain());
    assert!(out.contains("no PCI parent (software device)"), "{out}");
    assert!(!out.contains("NUMA node"), "{out}");
}
