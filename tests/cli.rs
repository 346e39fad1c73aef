//! Host tests of the binary: usage errors, the no-device paths, rendering without a device.

mod common;
use common::*;
use std::fs;
use std::path::{Path, PathBuf};

/// A fake sysfs for libibverbs (SYSFS_PATH) and for rdmadiag (RDMADIAG_SYSFS_ROOT).
fn fake_sysfs(name: &str, uverbs: bool, devices: &[&str]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("rdmadiag-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("class")).unwrap();
    if uverbs {
        fs::create_dir_all(root.join("class/infiniband_verbs")).unwrap();
        fs::write(root.join("class/infiniband_verbs/abi_version"), "6\n").unwrap();
        fs::create_dir_all(root.join("class/infiniband")).unwrap();
    }
    for d in devices {
        fs::create_dir_all(root.join("class/infiniband").join(d)).unwrap();
    }
    root
}

fn run_with_sysfs(root: &Path, args: &[&str]) -> std::process::Output {
    let sys = root.to_str().unwrap();
    let class = root.join("class/infiniband");
    rdmadiag_env(
        args,
        &[
            ("SYSFS_PATH", sys),
            ("RDMADIAG_SYSFS_ROOT", class.to_str().unwrap()),
        ],
    )
}

#[test]
fn no_rdma_in_kernel_is_one_line_and_exit_1() {
    let root = fake_sysfs("nokernel", false, &[]);
    for cmd in [&["devices"][..], &["ports"], &["devices", "--json"]] {
        let o = run_with_sysfs(&root, cmd);
        assert_eq!(o.status.code(), Some(1), "{cmd:?}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains("no RDMA support"), "{line}");
        assert!(
            line.contains("rdma link add rxe0 type rxe netdev"),
            "{line}"
        );
        if cmd.contains(&"--json") {
            // A script still gets one document: the error, in the common envelope.
            let v: serde_json::Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|e| panic!("{cmd:?}: one JSON document ({e}): {}", stdout(&o)));
            assert_eq!(v["error"]["exit_code"], 1, "{v}");
            let m = v["error"]["message"].as_str().unwrap_or_default();
            assert!(line.ends_with(m), "the same message: {m} / {line}");
            assert!(
                v["schema_version"].is_u64() && v["timestamp"].is_string(),
                "{v}"
            );
        } else {
            assert!(o.stdout.is_empty(), "nothing on stdout: {}", stdout(&o));
        }
    }
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn no_device_present_is_told_apart() {
    let root = fake_sysfs("nodev", true, &[]);
    let o = run_with_sysfs(&root, &["devices"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let line = one_error_line(&o);
    assert!(line.contains("no RDMA device present"), "{line}");
    assert!(!line.contains("no RDMA support"), "{line}");
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    for args in [
        &["bogus"][..],
        &["ports", "-p", "0"],
        &["ports", "-p", "x"],
        &["ports", "-p", "300"],
        &["ports", "--no-such-flag"],
        &["devices", "-d"],
        &["devices", "extra"],
    ] {
        let o = rdmadiag(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        one_error_line(&o);
    }
    let o = rdmadiag(&["devices", "-d", " "]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(one_error_line(&o).contains("device name"));
}

#[test]
fn help_and_version_exit_0() {
    let o = rdmadiag(&["--version"]);
    assert_eq!(o.status.code(), Some(0));
    let v = stdout(&o);
    assert!(v.starts_with("rdmadiag "), "{v}");
    assert!(v.contains('('), "version carries the git revision: {v}");
    let o = rdmadiag(&["ports", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    for flag in ["--device", "--port", "--verbose", "--counters", "--json"] {
        assert!(stdout(&o).contains(flag), "{flag} in help");
    }
}

#[test]
fn counters_misuse_is_a_usage_error_before_any_wait() {
    // A server would otherwise sit waiting for a client before saying anything.
    for sub in ["pingpong", "bw", "lat", "write", "read"] {
        let t = std::time::Instant::now();
        let o = rdmadiag(&[sub, "--counters", "--wait", "30s"]);
        assert_eq!(o.status.code(), Some(2), "{sub}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains("--counters is for the client"), "{line}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{sub} waited"
        );
    }
    for args in [
        &["ports", "--interval", "2s"][..],
        &["ports", "--counters", "--interval", "0s"],
        &["ports", "--counters", "--interval", "soon"],
    ] {
        let o = rdmadiag(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        one_error_line(&o);
    }
}
