//! Host tests of `devices` and `ports` on a fake sysfs tree: they read sysfs only, so they work
//! here, where libibverbs finds no device at all (its SYSFS_PATH points at an empty tree).

mod common;
use common::*;
use std::fs;
use std::path::{Path, PathBuf};

fn write(path: PathBuf, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, format!("{text}\n")).unwrap();
}

/// A port's attribute files as the kernel writes them.
fn port(dev: &Path, n: u8, attrs: &[(&str, &str)]) {
    let p = dev.join("ports").join(n.to_string());
    for (name, text) in attrs {
        write(p.join(name), text);
    }
}

/// A Soft-RoCE device on dummy0 (no PCI parent, no firmware string, 4 GID slots of which 2 are
/// used) and a two-port InfiniBand HCA on PCI with port 2 down.
fn fake_tree(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("rdmadiag-sysfs-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let class = root.join("class/infiniband");

    let rxe = class.join("rxe0");
    write(rxe.join("node_guid"), "5009:5fff:fe18:7007");
    write(rxe.join("sys_image_guid"), "5009:5fff:fe18:7007");
    write(rxe.join("node_type"), "1: CA");
    write(rxe.join("fw_ver"), "");
    write(rxe.join("parent"), "dummy0");
    port(
        &rxe,
        1,
        &[
            ("state", "4: ACTIVE"),
            ("phys_state", "5: LinkUp"),
            ("link_layer", "Ethernet"),
            ("rate", "2.5 Gb/sec (1X SDR)"),
            ("lid", "0x0"),
            ("sm_lid", "0x0"),
            ("lid_mask_count", "0"),
            ("pkeys/0", "0xffff"),
            ("gids/0", "fe80:0000:0000:0000:5009:5fff:fe18:7007"),
            ("gids/1", "0000:0000:0000:0000:0000:ffff:0a4d:0001"),
            ("gids/2", "0000:0000:0000:0000:0000:0000:0000:0000"),
            ("gids/3", "0000:0000:0000:0000:0000:0000:0000:0000"),
            ("gid_attrs/types/0", "RoCE v2"),
            ("gid_attrs/types/1", "RoCE v2"),
            ("gid_attrs/ndevs/0", "dummy0"),
            ("gid_attrs/ndevs/1", "dummy0"),
            ("counters/port_rcv_errors", "2"),
        ],
    );
    write(root.join("class/net/dummy0/mtu"), "1500");

    let mlx = class.join("mlx5_0");
    write(mlx.join("node_guid"), "0c42:a103:0065:d4a6");
    write(mlx.join("sys_image_guid"), "0c42:a103:0065:d4a6");
    write(mlx.join("node_type"), "1: CA");
    write(mlx.join("fw_ver"), "20.31.1014");
    write(mlx.join("board_id"), "MT_0000000222");
    write(mlx.join("device/vendor"), "0x15b3");
    write(mlx.join("device/device"), "0x101b");
    for (n, state, phys, lid) in [
        (1, "4: ACTIVE", "5: LinkUp", "0x1a"),
        (2, "1: DOWN", "3: Disabled", "0xffff"),
    ] {
        port(
            &mlx,
            n,
            &[
                ("state", state),
                ("phys_state", phys),
                ("link_layer", "InfiniBand"),
                ("rate", "100 Gb/sec (4X EDR)"),
                ("lid", lid),
                ("sm_lid", "0x1"),
                ("lid_mask_count", "0"),
                ("pkeys/0", "0xffff"),
                ("pkeys/1", "0x8001"),
                ("pkeys/2", "0x0000"),
                ("gids/0", "fe80:0000:0000:0000:0c42:a103:0065:d4a6"),
                ("gid_attrs/types/0", "IB/RoCE v1"),
            ],
        );
    }
    // libibverbs gets an RDMA core with no device: a verbs path would fail.
    write(root.join("class/infiniband_verbs/abi_version"), "6");
    root
}

fn run(root: &Path, args: &[&str]) -> std::process::Output {
    let class = root.join("class/infiniband");
    rdmadiag_env(
        args,
        &[
            (
                "SYSFS_PATH",
                root.join("libibverbs-sees-nothing").to_str().unwrap(),
            ),
            ("RDMADIAG_SYSFS_ROOT", class.to_str().unwrap()),
        ],
    )
}

fn json(root: &Path, args: &[&str]) -> serde_json::Value {
    let o = run(root, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(&o)))
}

#[test]
fn devices_come_from_sysfs_alone() {
    let root = fake_tree("devices");
    let doc = json(&root, &["devices", "--json"]);
    let devs = doc["devices"].as_array().unwrap();
    let names: Vec<&str> = devs.iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mlx5_0", "rxe0"]);
    let (mlx, rxe) = (&devs[0], &devs[1]);
    assert_eq!(mlx["node_guid"], "0c42:a103:0065:d4a6");
    assert_eq!(mlx["node_type"], "ca");
    assert_eq!(mlx["transport"], "InfiniBand");
    assert_eq!(mlx["fw_ver"], "20.31.1014");
    assert_eq!(mlx["board_id"], "MT_0000000222");
    assert_eq!(mlx["pci_vendor_id"], 0x15b3);
    assert_eq!(mlx["pci_device_id"], 0x101b);
    assert_eq!(mlx["phys_port_cnt"], 2);
    assert_eq!(mlx["ports_active"], 1);
    assert_eq!(mlx["port_summary"], "1/2 active");
    assert_eq!(rxe["fw_ver"], "");
    assert_eq!(rxe["pci_vendor_id"], serde_json::Value::Null);
    assert_eq!(rxe["board_id"], serde_json::Value::Null);
    for verbs_only in ["vendor_id", "hw_ver", "limits"] {
        assert!(rxe.get(verbs_only).is_none(), "{verbs_only} needs ports -v");
    }

    let o = run(&root, &["devices"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let row = |name: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} in {out}"))
            .to_string()
    };
    assert!(row("mlx5_0").contains("15b3:101b") && row("mlx5_0").contains("1/2 active"));
    assert!(row("rxe0").contains("5009:5fff:fe18:7007"), "{out}");

    let only = json(&root, &["devices", "-d", "rxe0", "--json"]);
    assert_eq!(only["devices"].as_array().unwrap().len(), 1);
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn ports_come_from_sysfs_alone() {
    let root = fake_tree("ports");
    let doc = json(&root, &["ports", "--counters", "--json"]);
    let ports = doc["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 3, "{doc}");
    assert!(doc.get("devices").is_none(), "devices only with -v");
    let rxe = ports.iter().find(|p| p["device"] == "rxe0").unwrap();
    assert_eq!(rxe["state"], "active");
    assert_eq!(rxe["physical_state"], "link_up");
    assert_eq!(rxe["link_layer"], "Ethernet");
    assert_eq!(rxe["active_width"], "1X");
    assert_eq!(rxe["active_speed"], "SDR");
    assert_eq!(rxe["rate_gbps"], 2.5);
    assert_eq!(rxe["netdev"], "dummy0");
    assert_eq!(rxe["netdev_mtu"], 1500);
    let mtu = &rxe["active_mtu"];
    assert_eq!(
        mtu["mtu"], 1024,
        "1500 less rxe's 80 bytes of headers: {mtu}"
    );
    assert_eq!(mtu["source"], "netdev");
    assert_eq!(mtu["header_bytes"], 80);
    assert_eq!(rxe["pkeys"], serde_json::json!(["0xffff"]));
    let gids = rxe["gids"].as_array().unwrap();
    assert_eq!(gids.len(), 2, "zero GIDs are not listed: {gids:?}");
    assert_eq!(gids[1]["gid"], "::ffff:10.77.0.1");
    assert_eq!(gids[1]["ip"], "10.77.0.1");
    assert_eq!(gids[1]["type"], "RoCE v2");
    assert_eq!(rxe["default_gid_index"], 1);
    assert_eq!(rxe["counters"]["port_rcv_errors"], 2);
    assert!(rxe.get("details").is_none(), "details only with -v");

    let ib: Vec<_> = ports.iter().filter(|p| p["device"] == "mlx5_0").collect();
    assert_eq!(ib[0]["lid"], 0x1a);
    assert_eq!(ib[0]["sm_lid"], 1);
    assert_eq!(ib[0]["rate_gbps"], 100.0);
    assert_eq!(ib[0]["speed_per_lane_gbps"], 25.0);
    assert_eq!(ib[0]["pkeys"], serde_json::json!(["0xffff", "0x8001"]));
    assert_eq!(ib[0]["gids"][0]["type"], "IB");
    assert_eq!(ib[0]["gids"][0]["ip"], serde_json::Value::Null);
    assert_eq!(ib[0]["netdev"], serde_json::Value::Null);
    // InfiniBand: only the device tells, and libibverbs finds none here.
    assert_eq!(ib[0]["active_mtu"], serde_json::Value::Null);
    assert_eq!(ib[1]["state"], "down");
    assert_eq!(ib[1]["physical_state"], "disabled");

    // Every key is documented in docs/json.md.
    let mut keys = std::collections::BTreeSet::new();
    json_keys(&doc, &mut keys);
    json_keys(&json(&root, &["devices", "--json"]), &mut keys);
    let documented = documented_json_names();
    let missing: Vec<_> = keys.iter().filter(|k| !documented.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "undocumented in docs/json.md: {missing:?}"
    );

    let o = run(&root, &["ports", "-d", "mlx5_0", "-p", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("LID / SM LID / LMC") && out.contains("0x001a / 0x0001 / 0"),
        "{out}"
    );
    assert!(
        out.contains("4X EDR (25 Gb/s per lane) = 100 Gb/s"),
        "{out}"
    );
    assert!(!out.contains("port 2"), "{out}");
    let o = run(&root, &["ports", "-d", "rxe0"]);
    assert!(
        stdout(&o).contains("1024 active (netdev 1500 less 80 B of headers)"),
        "{}",
        stdout(&o)
    );
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn names_that_sysfs_lacks_are_errors_listing_what_exists() {
    let root = fake_tree("names");
    let o = run(&root, &["ports", "-d", "mlx5_9"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let line = one_error_line(&o);
    assert!(
        line.contains("mlx5_9") && line.contains("devices present: mlx5_0, rxe0"),
        "{line}"
    );
    let o = run(&root, &["devices", "-d", "../../.."]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(one_error_line(&o).contains("no RDMA device named"));
    let o = run(&root, &["ports", "-d", "mlx5_0", "-p", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(one_error_line(&o).contains("mlx5_0 has no port 3; valid ports: 1..2"));
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn an_unreadable_attribute_is_one_line_naming_the_file() {
    let root = fake_tree("garbled");
    write(root.join("class/infiniband/rxe0/node_guid"), "not a guid");
    let o = run(&root, &["devices"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let line = one_error_line(&o);
    assert!(
        line.contains("rxe0/node_guid") && line.contains("not a guid"),
        "{line}"
    );

    fs::remove_file(root.join("class/infiniband/mlx5_0/ports/1/state")).unwrap();
    let o = run(&root, &["ports", "-d", "mlx5_0"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let line = one_error_line(&o);
    assert!(
        line.contains("mlx5_0 port 1") && line.contains("ports/1/state"),
        "{line}"
    );
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn the_active_mtu_follows_the_netdev_mtu_by_the_drivers_rule() {
    let root = fake_tree("mtu");
    let netdev_mtu = root.join("class/net/dummy0/mtu");
    let parent = root.join("class/infiniband/rxe0/parent");
    let active = |args: &[&str]| {
        let doc = json(&root, args);
        doc["ports"][0]["active_mtu"].clone()
    };
    let rxe = ["ports", "-d", "rxe0", "--json"];
    for (mtu, want) in [
        (1500, 1024),
        (4175, 2048),
        (4176, 4096),
        (4200, 4096),
        (9000, 4096),
    ] {
        write(netdev_mtu.clone(), &mtu.to_string());
        assert_eq!(active(&rxe)["mtu"], want, "rxe at netdev MTU {mtu}");
    }
    write(netdev_mtu.clone(), "300");
    assert_eq!(active(&rxe)["mtu"], 256, "rxe's floor");

    // Without rxe's `parent` attribute the port is a hardware RoCE one: ib_core's 96 bytes.
    fs::remove_file(&parent).unwrap();
    for (mtu, want) in [(4191, 2048), (4192, 4096), (1500, 1024)] {
        write(netdev_mtu.clone(), &mtu.to_string());
        let a = active(&rxe);
        assert_eq!(a["mtu"], want, "ib_core at netdev MTU {mtu}");
        assert_eq!(a["header_bytes"], 96);
    }
    write(netdev_mtu.clone(), "300");
    assert_eq!(active(&rxe), serde_json::Value::Null, "no IB MTU fits");

    write(netdev_mtu, "4200");
    let o = run(&root, &["ports", "-d", "rxe0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("4096 active (netdev 4200 less 96 B of headers)"),
        "{out}"
    );
    let o = run(&root, &["ports", "-d", "mlx5_0", "-p", "1"]);
    assert!(
        stdout(&o).contains("IB MTU unknown (ports -v)"),
        "{}",
        stdout(&o)
    );
    fs::remove_dir_all(root).unwrap();
}
