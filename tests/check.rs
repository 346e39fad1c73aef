//! Host tests of `rdmadiag check` on a fake sysfs tree (it reads sysfs only unless a test is
//! asked for), with a fake `scontrol` on PATH that logs its arguments and keeps the node's state.

mod common;
use common::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn write(path: PathBuf, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, format!("{text}\n")).unwrap();
}

/// A Soft-RoCE port (rxe0:1, 2.5 Gb/s 1X SDR, ACTIVE) and, with `mlx`, a two-port InfiniBand
/// HCA whose port 2 is DOWN.
fn fake_tree(name: &str, mlx: bool) -> PathBuf {
    let root = std::env::temp_dir().join(format!("rdmadiag-check-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let class = root.join("class/infiniband");
    let dev = |d: &str| {
        let at = class.join(d);
        write(at.join("node_guid"), "5009:5fff:fe18:7007");
        write(at.join("sys_image_guid"), "5009:5fff:fe18:7007");
        write(at.join("node_type"), "1: CA");
        write(at.join("fw_ver"), "");
        at
    };
    let port = |dev: &Path, n: u8, attrs: &[(&str, &str)]| {
        let p = dev.join("ports").join(n.to_string());
        for (name, text) in attrs {
            write(p.join(name), text);
        }
    };
    let rxe = dev("rxe0");
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
            ("gids/0", "fe80:0000:0000:0000:5009:5fff:fe18:7007"),
            ("gids/1", "0000:0000:0000:0000:0000:ffff:0a4d:0001"),
            ("gid_attrs/types/0", "RoCE v2"),
            ("gid_attrs/types/1", "RoCE v2"),
            ("gid_attrs/ndevs/0", "dummy0"),
            ("gid_attrs/ndevs/1", "dummy0"),
            ("hw_counters/sent_pkts", "100"),
            ("hw_counters/retry_exceeded_err", "0"),
            ("hw_counters/link_downed", "0"),
        ],
    );
    write(root.join("class/net/dummy0/mtu"), "1500");
    if mlx {
        let mlx = dev("mlx5_0");
        for (n, state, phys) in [(1, "4: ACTIVE", "5: LinkUp"), (2, "1: DOWN", "3: Disabled")] {
            port(
                &mlx,
                n,
                &[
                    ("state", state),
                    ("phys_state", phys),
                    ("link_layer", "InfiniBand"),
                    ("rate", "100 Gb/sec (4X EDR)"),
                    ("lid", "0x1a"),
                    ("sm_lid", "0x1"),
                    ("lid_mask_count", "0"),
                    ("gids/0", "fe80:0000:0000:0000:0c42:a103:0065:d4a6"),
                ],
            );
        }
    }
    // libibverbs gets an RDMA core with no device: a verbs path would fail.
    write(root.join("class/infiniband_verbs/abi_version"), "6");
    root
}

fn env_for(root: &Path) -> Vec<(String, String)> {
    vec![
        (
            "SYSFS_PATH".into(),
            root.join("libibverbs-sees-nothing").display().to_string(),
        ),
        (
            "RDMADIAG_SYSFS_ROOT".into(),
            root.join("class/infiniband").display().to_string(),
        ),
    ]
}

fn run_with(root: &Path, args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut env = env_for(root);
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    rdmadiag_env(&all, &env)
}

fn run(root: &Path, args: &[&str]) -> Output {
    run_with(root, args, &[])
}

fn doc(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn a_healthy_port_passes_in_every_format() {
    let root = fake_tree("healthy", false);
    let o = run(&root, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = stdout(&o);
    let row = t.lines().find(|l| l.starts_with(" state")).expect(&t);
    assert!(
        row.contains("rxe0:1") && row.contains("ACTIVE") && row.ends_with("ok"),
        "{t}"
    );
    assert!(t.contains("2 checks in") && t.contains("all passed"), "{t}");
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));

    let o = run(
        &root,
        &["--format", "nhc", "--expect-gid", "--expect-rate", "2.5"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        o.stdout.is_empty() && o.stderr.is_empty(),
        "NHC prints nothing on success"
    );

    let v = doc(&run(
        &root,
        &["--json", "--expect-width", "1X", "--expect-mtu", "1500"],
    ));
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["passed"], true);
    assert_eq!(v["failed"], 0);
    assert_eq!(v["timeout_s"], 30.0);
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["state", "phys_state", "width", "mtu"]);
    assert_eq!(checks(&v, "state")[0]["value"], 4.0);
    // Every key is documented in docs/json.md.
    let documented = documented_json_names();
    let mut keys = std::collections::BTreeSet::new();
    json_keys(&v, &mut keys);
    let missing: Vec<&String> = keys.difference(&documented).collect();
    assert!(missing.is_empty(), "undocumented: {missing:?}");
    let _ = fs::remove_dir_all(root);
}

#[test]
fn a_wrong_rate_or_a_down_port_fails_with_what_was_found() {
    let root = fake_tree("failing", true);
    let o = run(&root, &["-d", "rxe0", "--expect-rate", "100"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let line = one_error_line(&o);
    assert!(
        line.contains("rxe0:1: rate 2.5 Gb/s (1X SDR), expected 100 Gb/s"),
        "{line}"
    );
    let v = doc(&run(
        &root,
        &["-d", "rxe0:1", "--expect-rate", "400Gb/s", "--json"],
    ));
    let rate = checks(&v, "rate")[0];
    assert_eq!(rate["ok"], false);
    assert_eq!(rate["expected"], "400 Gb/s");
    assert_eq!(rate["value"], 2.5e9 / 8.0);

    // Every port by default: mlx5_0 port 2 is DOWN.
    let o = run(&root, &["--format", "nhc"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(o.stderr.is_empty(), "nhc says it on stdout: {}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "ERROR: rdmadiag: mlx5_0:2: state DOWN, expected ACTIVE\n\
         ERROR: rdmadiag: mlx5_0:2: phys_state DISABLED, expected LINK_UP\n"
    );
    // A device that is not there is a finding, not an error of the tool.
    let o = run(&root, &["-d", "mlx5_9", "-d", "rxe0:2", "--format", "nhc"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        stdout(&o),
        "ERROR: rdmadiag: mlx5_9: no such device (devices: mlx5_0, rxe0)\n\
         ERROR: rdmadiag: rxe0:2: no such port (rxe0 has 1)\n"
    );
    let _ = fs::remove_dir_all(root);
}

#[test]
fn an_error_counter_that_rises_during_the_interval_is_named() {
    let root = fake_tree("errors", false);
    let counter = root.join("class/infiniband/rxe0/ports/1/hw_counters/retry_exceeded_err");
    let sent = root.join("class/infiniband/rxe0/ports/1/hw_counters/sent_pkts");
    let env = env_for(&root);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let child = spawn_rdmadiag_env(
        &[
            "check",
            "--interval",
            "2s",
            "--max-error-delta",
            "0",
            "--json",
        ],
        &env,
    );
    std::thread::sleep(Duration::from_millis(700));
    fs::write(&counter, "3\n").unwrap();
    fs::write(&sent, "5000\n").unwrap();
    let o = wait_limit(child, Duration::from_secs(20), "check --interval");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v = doc(&o);
    let c = checks(&v, "error_counters")[0];
    assert_eq!(c["ok"], false);
    assert_eq!(c["value"], 3.0);
    let actual = c["actual"].as_str().unwrap();
    assert!(actual.contains("retry_exceeded_err +3"), "{actual}");
    assert!(
        !actual.contains("sent_pkts"),
        "traffic is no error: {actual}"
    );
    // Allowed to rise by 3 over the interval: passes.
    let o = run(&root, &["--interval", "1s", "--max-error-delta", "3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = fs::remove_dir_all(root);
}

#[test]
fn prometheus_goes_to_a_file_written_atomically() {
    let root = fake_tree("prom", true);
    let dir = root.join("textfile");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rdmadiag.prom");
    fs::write(&file, "stale\n").unwrap();
    let o = run(
        &root,
        &[
            "--format",
            "prometheus",
            "--expect-rate",
            "100",
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "the report went to the file");
    let p = fs::read_to_string(&file).unwrap();
    for want in [
        "# TYPE rdmadiag_check_ok gauge",
        "rdmadiag_check_ok{check=\"state\",device=\"mlx5_0\",port=\"2\"} 0",
        "rdmadiag_check_ok{check=\"rate\",device=\"mlx5_0\",port=\"1\"} 1",
        "rdmadiag_check_ok{check=\"rate\",device=\"rxe0\",port=\"1\"} 0",
        "rdmadiag_port_rate_bytes_per_second{device=\"mlx5_0\",port=\"1\"} 12500000000",
        "rdmadiag_port_state{device=\"mlx5_0\",port=\"2\"} 1",
        "rdmadiag_check_passed 0",
        "rdmadiag_check_failed_checks 3",
    ] {
        assert!(p.lines().any(|l| l == want), "{want} missing from:\n{p}");
    }
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["rdmadiag.prom"], "no temporary file left");
    // A directory that does not exist: the check could not report, exit 1.
    let o = run(&root, &["-o", root.join("nope/x.prom").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(one_error_line(&o).contains("cannot write"));
    let _ = fs::remove_dir_all(root);
}

#[test]
fn usage_errors_exit_2() {
    let root = fake_tree("usage", false);
    for (args, says) in [
        (&["--interval", "40s"][..], "does not fit in --timeout"),
        (&["--max-error-delta", "1"][..], "--interval"),
        (&["--peer", "10.0.0.2"][..], "--peer needs a test"),
        (&["--peer-bw", "10Gb/s"][..], "--peer"),
        (&["--loopback-bw", "10"][..], "no unit"),
        (&["--expect-width", "3X"][..], "not a link width"),
        (&["-d", "rxe0:0"][..], "not a port number"),
        (&["--json", "--format", "nhc"][..], "cannot be used with"),
    ] {
        let o = run(&root, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains(says), "{args:?}: {line}");
    }
    let _ = fs::remove_dir_all(root);
}

/// A fake scontrol: logs each call's arguments, answers `show node` from a state file and
/// changes it on `update` as slurmctld would.
fn fake_scontrol(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let script = r#"#!/bin/bash
echo "$*" >>"$FAKE_SLURM/log"
state=$(cat "$FAKE_SLURM/state"); reason=$(cat "$FAKE_SLURM/reason" 2>/dev/null)
case "$1 $2" in
  "show node")
    echo "NodeName=$3 Arch=x86_64 CoresPerSocket=1"
    echo "   State=$state ThreadsPerCore=1 TmpDisk=0 Weight=1"
    [ -n "$reason" ] && echo "   Reason=$reason [root@2026-12-03T12:00:00]"
    exit 0 ;;
  "update NodeName="*)
    case "$3" in
      State=DRAIN) echo "IDLE+DRAIN" >"$FAKE_SLURM/state"; echo "${4#Reason=}" >"$FAKE_SLURM/reason" ;;
      State=RESUME) echo "IDLE" >"$FAKE_SLURM/state"; rm -f "$FAKE_SLURM/reason" ;;
    esac
    exit 0 ;;
esac
echo "fake scontrol: unexpected: $*" >&2; exit 1
"#;
    let path = dir.join("scontrol");
    fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn slurm_drain_drains_resumes_its_own_and_leaves_an_operators_drain() {
    let root = fake_tree("slurm", false);
    let slurm = root.join("slurm");
    fake_scontrol(&slurm.join("bin"));
    let set = |state: &str, reason: Option<&str>| {
        fs::write(slurm.join("state"), format!("{state}\n")).unwrap();
        match reason {
            Some(r) => fs::write(slurm.join("reason"), format!("{r}\n")).unwrap(),
            None => {
                let _ = fs::remove_file(slurm.join("reason"));
            }
        }
        let _ = fs::remove_file(slurm.join("log"));
    };
    let log = || fs::read_to_string(slurm.join("log")).unwrap_or_default();
    let path = format!(
        "{}:{}",
        slurm.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let env = [
        ("PATH", path.as_str()),
        ("SLURMD_NODENAME", "lab1"),
        ("FAKE_SLURM", slurm.to_str().unwrap()),
    ];

    // A failure drains, with the first failure as the reason.
    set("IDLE", None);
    let o = run_with(
        &root,
        &["--slurm-drain", "--expect-rate", "100", "--json"],
        &env,
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let reason = "rdmadiag: rxe0:1: rate 2.5 Gb/s (1X SDR), expected 100 Gb/s";
    assert_eq!(
        log(),
        format!("show node lab1\nupdate NodeName=lab1 State=DRAIN Reason={reason}\n")
    );
    let v = doc(&o);
    assert_eq!(v["slurm"]["action"], "drain");
    assert_eq!(v["slurm"]["reason"], reason);

    // A pass resumes rdmadiag's own drain (the state the drain above left).
    let _ = fs::remove_file(slurm.join("log"));
    let o = run_with(&root, &["--slurm-drain"], &env);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(log(), "show node lab1\nupdate NodeName=lab1 State=RESUME\n");
    assert!(stdout(&o).contains("slurm: node lab1: every check passed: resumed"));

    // An operator's drain is neither undone by a pass nor replaced by a failure.
    for args in [
        &["--slurm-drain"][..],
        &["--slurm-drain", "--expect-rate", "100"][..],
    ] {
        set("IDLE+DRAIN", Some("bad DIMM, ticket 42"));
        let o = run_with(&root, args, &env);
        assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
        assert_eq!(log(), "show node lab1\n", "{args:?}: only looked");
        assert!(stdout(&o).contains("bad DIMM"), "{}", stdout(&o));
    }

    // Not drained and passing: nothing to do.
    set("IDLE", None);
    let o = run_with(&root, &["--slurm-drain"], &env);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(log(), "show node lab1\n");

    // Without SLURMD_NODENAME, or without scontrol: the check cannot run (exit 1), one line.
    let o = run_with(&root, &["--slurm-drain"], &[("SLURMD_NODENAME", "")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(one_error_line(&o).contains("SLURMD_NODENAME"));
    let o = run_with(
        &root,
        &["--slurm-drain"],
        &[("SLURMD_NODENAME", "lab1"), ("PATH", "/nonexistent")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(one_error_line(&o).contains("scontrol on PATH"));

    // scontrol failing: the report is printed, then exit 1 with what scontrol said.
    set("IDLE", None);
    fs::write(slurm.join("state"), "").unwrap();
    let o = run_with(&root, &["--slurm-drain"], &env);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("state"), "the report came first");
    assert!(
        one_error_line(&o).contains("printed no State="),
        "{}",
        stderr(&o)
    );
    let _ = fs::remove_dir_all(root);
}

#[test]
fn a_test_that_cannot_run_is_a_failed_check_naming_why() {
    // libibverbs sees no device here: the peer test fails before any connection.
    let root = fake_tree("peer", false);
    let o = run(
        &root,
        &[
            "-d",
            "rxe0:1",
            "--peer",
            "127.0.0.1:9",
            "--peer-bw",
            "1Gb/s",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v = doc(&o);
    let c = checks(&v, "peer_bw")[0];
    assert_eq!(c["ok"], false);
    assert_eq!(c["peer"], "127.0.0.1:9");
    assert_eq!(
        c["target"], "rxe0:1",
        "the one -d target is the port tested"
    );
    assert!(
        c["actual"].as_str().unwrap().starts_with("test failed: "),
        "{c}"
    );
    assert!(
        c["settings"].as_str().unwrap().contains("to 127.0.0.1:9"),
        "{c}"
    );
    assert!(c["value"].is_null());
    let _ = fs::remove_dir_all(root);
}
