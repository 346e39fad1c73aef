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
        &["ports", "-i", "0"],
        &["ports", "-i", "x"],
        &["ports", "-i", "300"],
        &["ports", "--no-such-flag"],
        &["devices", "-d"],
        &["devices", "extra"],
        // Durations past every clock's limit once panicked (issue 31).
        &["check", "--timeout", "18446744073709551615s"],
        &["check", "--timeout", "18446744073709551615"],
        &["bw", "--timeout", "2049638230412172402s", "127.0.0.1"],
        &["pingpong", "--wait", "1000000000d"],
        // What perftest's wire does not carry (yet) is refused before any connection.
        &["bw", "--compat", "perftest"],
        &["bw", "--compat", "perftest", "-b", "127.0.0.1"],
        &["bw", "--compat", "perftest", "--cm", "127.0.0.1"],
        &[
            "bw",
            "--compat",
            "perftest",
            "--op",
            "send",
            "-c",
            "UC",
            "127.0.0.1",
        ],
        &[
            "bw",
            "--compat",
            "perftest",
            "--op",
            "send",
            "-D",
            "2",
            "127.0.0.1",
        ],
        &["bw", "--compat", "perftest", "-c", "UD", "127.0.0.1"],
        &["bw", "--compat", "perftest", "--loopback"],
        &[
            "lat",
            "--compat",
            "perftest",
            "--op",
            "send",
            "-c",
            "UC",
            "127.0.0.1",
        ],
        &["lat", "--compat", "perftest", "-a", "127.0.0.1"],
        &["lat", "--compat", "perftest", "-D", "2", "127.0.0.1"],
        &["write", "--compat", "perftest", "127.0.0.1"],
        &["bw", "--compat", "ibv", "127.0.0.1"],
        &["pingpong", "--compat", "perftest", "127.0.0.1"],
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
    for flag in [
        "--device",
        "-i, --ib-port",
        "--verbose",
        "--counters",
        "--json",
    ] {
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
        assert!(
            line.contains("--counters") && line.contains("server's HOST"),
            "{line}"
        );
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

#[test]
fn help_groups_flags_names_exit_codes_and_hides_other_tools_letters() {
    let o = rdmadiag(&["bw", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    let at = |heading: &str| {
        help.find(&format!("\n{heading}:\n"))
            .unwrap_or_else(|| panic!("no {heading} heading in bw --help:\n{help}"))
    };
    // Each flag under its heading: the heading is the last one before it.
    for (flag, heading) in [
        ("--op <OP>", "Test"),
        ("--qps <N>", "Test"),
        ("--port <PORT>", "Connection"),
        ("--cm", "Connection"),
        ("--compat <TOOL>", "Connection"),
        ("--persist", "Server"),
        ("--max-qps <N>", "Server"),
        ("--json", "Output"),
        ("--units <UNITS>", "Output"),
        ("--counters", "Output"),
        ("--expect-bw <RATE>", "Thresholds"),
        ("--expect-msgrate <RATE>", "Thresholds"),
        ("--expect-size <SIZE|all>", "Thresholds"),
    ] {
        let pos = help
            .find(flag)
            .unwrap_or_else(|| panic!("{flag} not in help"));
        let last = ["Test", "Connection", "Server", "Output", "Thresholds"]
            .into_iter()
            .filter(|h| at(h) < pos)
            .max_by_key(|h| at(h));
        assert_eq!(last, Some(heading), "{flag}");
    }
    for hidden in [
        "  -R",
        "  -F",
        "  -w",
        "  -y",
        "  -m",
        "report_gbits",
        "limit_bw",
    ] {
        assert!(!help.contains(hidden), "bw --help shows {hidden}");
    }
    for sub in rdmadiag::cli::SUBCOMMANDS {
        let help = stdout(&rdmadiag(&[sub, "--help"]));
        for code in [
            "0 ok",
            "1 runtime",
            "2 usage",
            "3 threshold",
            "4 data",
            "130",
            "143",
        ] {
            assert!(
                help.contains(code),
                "{sub} --help does not say exit code {code}"
            );
        }
    }
}

#[test]
fn atomics_of_another_size_or_transport_are_usage_errors_before_any_wait() {
    for (args, needle) in [
        (
            &["bw", "10.0.0.1", "--op", "atomic-fadd", "-s", "64"][..],
            "atomics move 8 bytes",
        ),
        (
            &["lat", "10.0.0.1", "-A", "CMP_AND_SWAP", "--sizes", "8,16"],
            "size 16",
        ),
        (&["bw", "10.0.0.1", "--op", "atomic-cswap", "-a"], "-a"),
        (
            &["bw", "10.0.0.1", "--op", "atomic-fadd", "-c", "UC"],
            "-c RC",
        ),
        (
            &["lat", "10.0.0.1", "-A", "FETCH_AND_ADD", "-c", "UD"],
            "-c RC",
        ),
        (&["bw", "10.0.0.1", "--op", "atomic-fadd", "-b"], "-b"),
        (
            // perftest's atomic latency, as its others: -n iterations, not -D.
            &[
                "lat",
                "10.0.0.1",
                "-A",
                "FETCH_AND_ADD",
                "--compat",
                "perftest",
                "-D",
                "2",
            ],
            "not -D",
        ),
    ] {
        let o = rdmadiag(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains(needle), "{args:?}: {line}");
    }
}

#[test]
fn thresholds_that_cannot_be_judged_are_usage_errors() {
    // Each is refused before any device is opened: the same on a host without RDMA.
    for (args, needle) in [
        (&["bw", "10.0.0.1", "--expect-bw", "90"][..], "90Gb/s"),
        (&["bw", "10.0.0.1", "--expect-bw", "90"], "MiB/s"),
        (&["bw", "10.0.0.1", "--expect-msgrate", "10"], "10Mpps"),
        (&["lat", "10.0.0.1", "--expect-lat", "5"], "5us"),
        (&["bw", "--expect-bw", "90Gb/s"], "HOST"),
        (&["bw", "-w", "90"], "HOST"),
        (&["lat", "--persist", "--expect-lat", "5us"], "HOST"),
        (
            &[
                "bw",
                "10.0.0.1",
                "--sizes",
                "64K",
                "--expect-bw",
                "1Gb/s",
                "--expect-size",
                "4K",
            ],
            "not a size this run measures",
        ),
        (
            &["bw", "10.0.0.1", "--expect-size", "64K"],
            "needs a threshold",
        ),
        (&["lat", "10.0.0.1", "--expect-size", "2"], "--expect-lat"),
        (&["bw", "10.0.0.1", "--compat", "ibv"], "--compat"),
        (&["pingpong", "10.0.0.1", "--compat", "ibv", "--cm"], "--cm"),
    ] {
        let o = rdmadiag(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains(needle), "{args:?}: {line}");
    }
}

#[test]
fn a_failure_with_json_is_one_document_saying_where_it_failed() {
    // Nothing listens on this port: the client fails connecting, before any device is opened.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = port.to_string();
    let o = rdmadiag(&["bw", "127.0.0.1", "-p", &p, "--timeout", "2s", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let line = one_error_line(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("one JSON document ({e}): {}", stdout(&o)));
    assert_eq!(v["error"]["phase"], "connect", "{v}");
    assert_eq!(v["error"]["peer"], format!("127.0.0.1:{port}"), "{v}");
    assert_eq!(v["error"]["exit_code"], 1);
    assert!(
        line.ends_with(v["error"]["message"].as_str().unwrap()),
        "{line}"
    );
    assert!(v["schema_version"].is_u64() && v["host"].is_string(), "{v}");
    let mut keys = std::collections::BTreeSet::new();
    json_keys(&v, &mut keys);
    let documented = documented_json_names();
    let undocumented: Vec<_> = keys.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/json.md: {undocumented:?}"
    );

    // A "server" that answers with garbage: the client gets as far as the handshake.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        use std::io::Write;
        let (mut s, _) = l.accept().unwrap();
        let _ = s.write_all(b"HTTP/1.0 400 nope\r\n\r\n");
    });
    let p = port.to_string();
    let o = rdmadiag(&[
        "pingpong",
        "127.0.0.1",
        "-p",
        &p,
        "--timeout",
        "2s",
        "--json",
    ]);
    fake.join().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    one_error_line(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["phase"], "handshake", "{v}");
    assert_eq!(v["error"]["peer"], format!("127.0.0.1:{port}"), "{v}");

    // A usage error has no phase and no peer: nothing had started.
    let o = rdmadiag(&["bw", "10.0.0.1", "--expect-bw", "90", "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["error"]["phase"].is_null() && v["error"]["peer"].is_null(),
        "{v}"
    );
}

#[test]
fn sigterm_and_sigint_stop_a_waiting_client_with_their_own_codes() {
    for (signal, code, name) in [("-TERM", 143, "SIGTERM"), ("-INT", 130, "SIGINT")] {
        // A "server" that accepts and says nothing: the client waits for its greeting.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        let child = spawn_rdmadiag(&["bw", "127.0.0.1", "-p", &port, "--timeout", "60s", "--json"]);
        let (_peer, _) = l.accept().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let sent = std::time::Instant::now();
        let kill = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let o = wait_limit(
            child,
            std::time::Duration::from_secs(5),
            "a signalled client",
        );
        assert!(
            sent.elapsed() < std::time::Duration::from_secs(3),
            "{name} took {:?}",
            sent.elapsed()
        );
        assert_eq!(o.status.code(), Some(code), "{name}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains(&format!("stopped by {name}")), "{line}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["error"]["exit_code"], code, "{v}");
        assert_eq!(v["error"]["phase"], "handshake", "{v}");
    }
}

#[test]
fn a_server_without_rdma_fails_at_once_without_listening() {
    let root = fake_sysfs("noserver", false, &[]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    for args in [
        &["bw", "-p", &port][..],
        &["lat", "-p", &port, "--persist"],
        &["pingpong", "-p", &port, "--compat", "ibv"],
        &["write", "-p", &port, "--json"],
    ] {
        let t = std::time::Instant::now();
        let o = run_with_sysfs(&root, args);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{args:?} took {:?}",
            t.elapsed()
        );
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(
            line.contains("not listening") && line.contains("no RDMA support"),
            "{args:?}: {line}"
        );
        if args.contains(&"--json") {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["error"]["phase"], "listen", "{v}");
        }
    }
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_priority_out_of_range_or_on_the_wrong_side_is_a_usage_error_before_any_wait() {
    for (args, says) in [
        (&["bw", "10.0.0.1", "--tclass", "256"][..], "0-255"),
        (&["lat", "10.0.0.1", "--sl", "16"], "0..=15"),
        (&["pingpong", "10.0.0.1", "--cm", "--sl", "1"], "rdma_cm"),
        (&["bw", "--tclass", "104"], "client's to choose"),
        (&["read", "--sl", "1"], "client's to choose"),
        (&["check", "--tclass", "104"], "active tests"),
    ] {
        let t = std::time::Instant::now();
        let o = rdmadiag(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains(says), "{args:?}: {line}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{args:?} waited"
        );
    }
}
