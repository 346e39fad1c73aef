//! Host tests of the PCIe and NUMA inventory (`devices`, `ports`) and of `check --pcie`,
//! `--expect-numa` and `--cpus`, on sysfs fixture trees shaped like real hosts' (tests/data/sysfs/:
//! a ConnectX-6 Dx at Gen4 x16, the same trained at x8, one behind a switch whose upstream link
//! runs Gen3, and Soft-RoCE with no PCI parent). The trees are read, never written.

mod common;
use common::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sysfs")
        .join(name)
}

fn run(tree: &str, args: &[&str]) -> Output {
    let root = fixture(tree);
    let class = root.join("class/infiniband");
    assert!(class.is_dir(), "no fixture {}", root.display());
    rdmadiag_env(
        args,
        &[
            // libibverbs must find nothing: every figure here comes from sysfs.
            (
                "SYSFS_PATH",
                root.join("libibverbs-sees-nothing").to_str().unwrap(),
            ),
            ("RDMADIAG_SYSFS_ROOT", class.to_str().unwrap()),
        ],
    )
}

fn json(tree: &str, args: &[&str]) -> Value {
    let o = run(tree, args);
    assert!(o.status.success(), "{tree} {args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(&o)))
}

fn device(tree: &str) -> Value {
    json(tree, &["devices", "--json"])["devices"][0].clone()
}

#[test]
fn a_healthy_gen4_x16_card_shows_its_link_numa_node_and_drivers() {
    let d = device("gen4-x16");
    let p = &d["pcie"];
    assert_eq!(p["address"], "0000:3b:00.0", "{d}");
    assert_eq!(p["link"]["speed_gts"], 16.0);
    assert_eq!(p["link"]["generation"], 4);
    assert_eq!(p["link"]["width"], 16);
    assert_eq!(p["link"]["max_width"], 16);
    assert_eq!(p["path"][0]["address"], "0000:3a:00.0", "the root port");
    assert_eq!(p["path"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(
        p["limit"]["address"], "0000:3b:00.0",
        "its own link limits it"
    );
    assert_eq!(d["numa_node"], 0);
    assert_eq!(d["local_cpulist"], "0-15,32-47");
    assert_eq!(d["driver"], "mlx5_core");
    let port = &json("gen4-x16", &["ports", "--json"])["ports"][0];
    assert_eq!(port["netdev"], "ens1f0np0");
    assert_eq!(port["netdev_speed_mbps"], 100000);
    assert_eq!(port["netdev_driver"], "mlx5_core");
    let out = stdout(&run("gen4-x16", &["devices"]));
    let row = out.lines().find(|l| l.contains("mlx5_0")).unwrap();
    assert!(row.contains("Gen4 x16") && !row.contains("max"), "{out}");
    let out = stdout(&run("gen4-x16", &["ports"]));
    assert!(out.contains("ens1f0np0 (mlx5_core, 100000 Mb/s)"), "{out}");
}

#[test]
fn a_card_trained_at_x8_shows_both_widths() {
    let d = device("gen4-x8-downgraded");
    let l = &d["pcie"]["link"];
    assert_eq!(
        (l["width"].clone(), l["max_width"].clone()),
        (8.into(), 16.into()),
        "{d}"
    );
    assert_eq!(d["pcie"]["limit"]["address"], "0000:3b:00.0");
    assert_eq!(d["numa_node"], 1);
    let out = stdout(&run("gen4-x8-downgraded", &["devices"]));
    assert!(out.contains("Gen4 x8 (max Gen4 x16)"), "{out}");
}

#[test]
fn a_gen3_bridge_above_a_gen4_card_is_the_paths_limit() {
    let d = device("gen3-behind-gen4-bridge");
    let p = &d["pcie"];
    assert_eq!(
        p["link"]["generation"], 4,
        "the card itself trained Gen4: {p}"
    );
    let path: Vec<&str> = p["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["address"].as_str().unwrap())
        .collect();
    assert_eq!(path, ["0000:3a:00.0", "0000:39:00.0", "0000:38:00.0"]);
    assert_eq!(
        p["limit"]["address"], "0000:39:00.0",
        "the nearest Gen3 link"
    );
    assert_eq!(p["limit"]["speed_gts"], 8.0);
    assert_eq!(p["limit"]["generation"], 3);
    let out = stdout(&run("gen3-behind-gen4-bridge", &["devices"]));
    assert!(
        out.contains("Gen4 x16, path Gen3 x16 (0000:39:00.0)"),
        "{out}"
    );
}

#[test]
fn soft_roce_says_it_has_no_pci_parent_and_no_zeros() {
    let d = device("rxe-no-pci-parent");
    for absent in ["pcie", "numa_node", "local_cpulist", "driver"] {
        assert_eq!(d[absent], Value::Null, "{absent}: {d}");
    }
    let out = stdout(&run("rxe-no-pci-parent", &["devices"]));
    let row = out.lines().find(|l| l.contains("rxe0")).unwrap();
    assert!(row.contains("no PCI parent (software device)"), "{out}");
    let port = &json("rxe-no-pci-parent", &["ports", "--json"])["ports"][0];
    assert_eq!(port["netdev_speed_mbps"], 1000, "its netdev is a PCI NIC's");
    assert_eq!(port["netdev_driver"], "e1000");
}

#[test]
fn every_new_key_is_documented() {
    let mut keys = std::collections::BTreeSet::new();
    for tree in ["gen3-behind-gen4-bridge", "rxe-no-pci-parent"] {
        json_keys(&json(tree, &["devices", "--json"]), &mut keys);
        json_keys(&json(tree, &["ports", "--json"]), &mut keys);
    }
    let documented = documented_json_names();
    let missing: Vec<_> = keys.iter().filter(|k| !documented.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "undocumented in docs/json.md: {missing:?}"
    );
}

#[test]
fn check_pcie_fails_the_downgraded_card_with_both_figures() {
    let o = run("gen4-x8-downgraded", &["check", "--pcie"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let want = "mlx5_0: PCIe link x8 at 16.0 GT/s (Gen4) is narrower than its maximum x16 \
                (0000:3b:00.0)";
    assert!(stderr(&o).contains(want), "{}", stderr(&o));
    let row = stdout(&o);
    let row = row.lines().find(|l| l.starts_with(" pcie")).unwrap();
    assert!(row.ends_with("FAIL"), "{row}");
    // NHC's line and Prometheus say the same.
    let o = run(
        "gen4-x8-downgraded",
        &["check", "--pcie", "--format", "nhc"],
    );
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(stdout(&o), format!("ERROR: rdmadiag: {want}\n"));
    let o = run(
        "gen4-x8-downgraded",
        &["check", "--pcie", "--format", "prometheus"],
    );
    let p = stdout(&o);
    assert!(
        p.contains("rdmadiag_check_ok{check=\"pcie\",device=\"mlx5_0\",port=\"\"} 0\n"),
        "{p}"
    );
    assert!(
        p.contains("# TYPE rdmadiag_pcie_link_bytes_per_second gauge"),
        "{p}"
    );
    let o = run("gen4-x8-downgraded", &["check", "--pcie", "--json"]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = checks(&doc, "pcie")[0];
    assert_eq!(
        (c["ok"].clone(), c["skipped"].clone()),
        (false.into(), false.into())
    );
    assert_eq!(c["target"], "mlx5_0");
    assert_eq!(c["port"], Value::Null);
    // An x8 link accepted on purpose passes; one short of the generation does not.
    let o = run("gen4-x8-downgraded", &["check", "--expect-pcie", "gen4,x8"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = run("gen4-x8-downgraded", &["check", "--expect-pcie", "5,8"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("slower than the expected 32.0 GT/s (Gen5)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn check_pcie_passes_a_healthy_card_and_names_a_slow_bridge() {
    let o = run("gen4-x16", &["check", "--pcie"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let o = run("gen3-behind-gen4-bridge", &["check", "--pcie", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let actual = checks(&doc, "pcie")[0]["actual"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        actual.contains("x16 at 8.0 GT/s (Gen3) at bridge 0000:39:00.0")
            && actual.contains("the device's maximum 16.0 GT/s (Gen4)"),
        "{actual}"
    );
    let o = run(
        "gen3-behind-gen4-bridge",
        &["check", "--expect-pcie", "3,16"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn check_rules_on_a_device_with_no_pci_parent_are_skipped_not_passed() {
    let o = run(
        "rxe-no-pci-parent",
        &["check", "--pcie", "--expect-numa", "0", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["skipped"], 2, "{doc}");
    for name in ["pcie", "numa"] {
        let c = checks(&doc, name)[0];
        assert_eq!(c["skipped"], true, "{c}");
        assert_eq!(
            c["actual"],
            "does not apply: no PCI parent (software device)"
        );
    }
    let out = stdout(&run("rxe-no-pci-parent", &["check", "--pcie"]));
    let row = out.lines().find(|l| l.starts_with(" pcie")).unwrap();
    assert!(row.ends_with("skip"), "{out}");
    assert!(
        out.contains("all passed, 1 skipped (did not apply)"),
        "{out}"
    );
    let p = stdout(&run(
        "rxe-no-pci-parent",
        &["check", "--pcie", "--format", "prometheus"],
    ));
    assert!(!p.contains("check=\"pcie\""), "{p}");
    assert!(p.contains("rdmadiag_check_skipped_checks 1\n"), "{p}");
}

#[test]
fn check_numa_compares_the_node_and_its_cpus() {
    let o = run(
        "gen4-x16",
        &["check", "--expect-numa", "0", "--cpus", "0-3,32"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = run("gen4-x8-downgraded", &["check", "--expect-numa", "0"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("mlx5_0: NUMA node 1 (CPUs 16-31,48-63) is not node 0 (0000:3b:00.0)"),
        "{}",
        stderr(&o)
    );
    let o = run("gen4-x16", &["check", "--cpus", "14-17", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = checks(&doc, "numa")[0];
    assert_eq!(c["value"], 0.0);
    assert!(
        c["actual"]
            .as_str()
            .unwrap()
            .contains("node 0 (CPUs 0-15,32-47) does not hold CPUs 16-17"),
        "{c}"
    );
    assert_eq!(c["expected"], "a node holding CPUs 14-17");
}

#[test]
fn bad_placement_flags_are_one_line_and_exit_2() {
    for args in [
        &["check", "--expect-pcie", "4"][..],
        &["check", "--expect-pcie", "gen7,x16"],
        &["check", "--expect-pcie", "4,x3"],
        &["check", "--expect-numa", "-1"],
        &["check", "--cpus", "3-1"],
        &["check", "--cpus", "a"],
    ] {
        let o = run("gen4-x16", args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(
            stderr(&o).trim().lines().count(),
            1,
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn check_documents_its_new_keys() {
    let mut keys = std::collections::BTreeSet::new();
    let o = run("rxe-no-pci-parent", &["check", "--pcie", "--json"]);
    json_keys(&serde_json::from_slice(&o.stdout).unwrap(), &mut keys);
    let documented = documented_json_names();
    let missing: Vec<_> = keys.iter().filter(|k| !documented.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "undocumented in docs/json.md: {missing:?}"
    );
}
