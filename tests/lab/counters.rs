//! Port counters across a test (`--counters`) and over `ports --counters --interval`, on rxe0.

use crate::common::*;
use crate::watch::{spawn_watched, wait_for_line, wait_until_sleeping};
use crate::{DEV, require_rxe0};
use serde_json::Value;
use std::fs;
use std::time::Duration;

/// rxe0's port 1 hw_counters as sysfs has them now.
fn sysfs_hw(name: &str) -> u64 {
    let p = format!("/sys/class/infiniband/{DEV}/ports/1/hw_counters/{name}");
    fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// The COUNTER_DELTA of hw_counters `name` in a COUNTER_DELTAS object.
fn hw<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|c| c["group"] == "hw_counters" && c["name"] == name)
        .unwrap_or_else(|| panic!("no hw_counters/{name} in {d}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// Every COUNTER_DELTA is whole and consistent, errors are flagged and summed. Returns the
/// number of error counters.
fn check_shape(d: &Value) -> usize {
    assert_eq!(d["device"], DEV, "{d}");
    assert_eq!(d["port"], 1, "{d}");
    let secs = d["elapsed_s"].as_f64().unwrap();
    assert!(secs > 0.0, "{d}");
    let deltas = d["deltas"].as_array().unwrap();
    assert!(!deltas.is_empty(), "{d}");
    let mut error_sum = 0;
    for c in deltas {
        let (before, after, delta) = (u(&c["before"]), u(&c["after"]), u(&c["delta"]));
        let reset = c["reset"].as_bool().expect("reset flag");
        assert_eq!(delta, if reset { after } else { after - before }, "{c}");
        let rate = c["rate_per_s"].as_f64().unwrap();
        assert!(
            (rate - delta as f64 / secs).abs() <= 1e-6 * rate.max(1.0),
            "{c}"
        );
        if c["error"].as_bool().expect("error flag") {
            error_sum += delta;
        }
    }
    assert_eq!(u(&d["error_delta"]), error_sum, "{d}");
    // rxe's retry and sequence counters count errors; its packet counters do not.
    assert_eq!(hw(d, "retry_exceeded_err")["error"], true);
    assert_eq!(hw(d, "rcvd_seq_err")["error"], true);
    assert_eq!(hw(d, "sent_pkts")["error"], false);
    assert_eq!(hw(d, "ack_deferred")["error"], false);
    deltas.iter().filter(|c| c["error"] == true).count()
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn counters_across_each_test_show_its_traffic() {
    require_rxe0();
    // bw: the packets counted cover at least the payload, and lie within what sysfs saw
    // around the whole command.
    let (sent0, rcvd0) = (sysfs_hw("sent_pkts"), sysfs_hw("rcvd_pkts"));
    let doc = rdmadiag_json(&["bw", "--loopback", "--counters", "-n", "200", "--json"]);
    let (sent1, rcvd1) = (sysfs_hw("sent_pkts"), sysfs_hw("rcvd_pkts"));
    let d = &doc["counter_deltas"];
    let flagged = check_shape(d);
    let b = &doc["bw"][0];
    let (size, iters, mtu) = (u(&b["size"]), u(&b["iterations"]), u(&doc["path_mtu"]));
    let payload_packets = iters * size.div_ceil(mtu);
    for (name, then, now) in [("sent_pkts", sent0, sent1), ("rcvd_pkts", rcvd0, rcvd1)] {
        let c = hw(d, name);
        assert!(
            u(&c["delta"]) >= payload_packets,
            "{name} moved {} for {iters} x {size} B at MTU {mtu}",
            c["delta"]
        );
        assert!(
            u(&c["before"]) >= then && u(&c["after"]) <= now,
            "{name}: {c}"
        );
    }
    eprintln!(
        "counters: bw moved sent_pkts by {} ({payload_packets} payload packets), error_delta {}",
        hw(d, "sent_pkts")["delta"],
        d["error_delta"]
    );

    // lat, write, read: one packet per operation at least.
    for (args, ops) in [
        (&["lat", "--loopback", "-n", "100"][..], 100),
        (&["write", "--loopback", "-n", "3", "-s", "4K"], 3),
        (&["read", "--loopback", "-n", "3", "-s", "4K"], 3),
        (&["pingpong", "--loopback", "-n", "50"], 100),
    ] {
        let doc = rdmadiag_json(&[args, &["--counters", "--json"]].concat());
        let d = &doc["counter_deltas"];
        check_shape(d);
        let sent = u(&hw(d, "sent_pkts")["delta"]);
        assert!(sent >= ops, "{args:?}: sent_pkts moved {sent}");
    }

    // Text: the counters that moved with their delta, and the error counters accounted for.
    let o = rdmadiag(&["pingpong", "--loopback", "-n", "50", "--counters"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("counters of {DEV} port 1")), "{out}");
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("sent_pkts"))
        .unwrap_or_else(|| panic!("no sent_pkts row:\n{out}"));
    assert!(row.contains("hw_counters"), "{row}");
    let errors = out
        .lines()
        .find(|l| l.contains("error counters"))
        .unwrap_or_else(|| panic!("no error counter line:\n{out}"));
    assert!(
        errors.contains(&format!("none of the {flagged} moved"))
            || errors.contains(&format!("of {flagged} error counters)")),
        "{errors} (rxe0 has {flagged} error counters)"
    );
    eprintln!("{out}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn an_interval_sees_the_traffic_of_a_test_running_meanwhile() {
    require_rxe0();
    let (bw, rx) = spawn_watched(&["bw", "--loopback", "-D", "6s", "-v"]);
    wait_for_line(&rx, "connected", Duration::from_millis(300));
    let doc = rdmadiag_json(&[
        "ports",
        "-d",
        DEV,
        "--counters",
        "--interval",
        "2s",
        "--json",
    ]);
    let o = wait_limit(bw, Duration::from_secs(60), "the background bw");
    assert!(o.status.success(), "background bw failed");
    let p = &doc["ports"][0];
    let d = &p["counter_deltas"];
    check_shape(d);
    assert!(d["elapsed_s"].as_f64().unwrap() >= 2.0, "{d}");
    for name in ["sent_pkts", "rcvd_pkts"] {
        let c = hw(d, name);
        assert!(u(&c["delta"]) > 0, "{name} did not move under bw: {c}");
        assert!(c["rate_per_s"].as_f64().unwrap() > 0.0, "{c}");
        assert_eq!(
            p["hw_counters"][name], c["after"],
            "the maps hold the second reading"
        );
    }
    let listed: Vec<&str> = p["error_counters"]
        .as_array()
        .expect("error_counters")
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let flagged: Vec<&str> = d["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["error"] == true)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed, flagged,
        "one rule for error_counters and the error flags"
    );
    eprintln!(
        "counters: 2 s of background bw moved sent_pkts by {} ({:.0}/s)",
        hw(d, "sent_pkts")["delta"],
        hw(d, "sent_pkts")["rate_per_s"].as_f64().unwrap()
    );
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn an_interval_marks_error_counters_that_rose_and_counters_reset() {
    require_rxe0();
    // ports reads sysfs only: a copy of rxe0's real tree, whose hw_counters this test replaces
    // with files it changes mid-interval.
    let root = std::env::temp_dir().join(format!("rdmadiag-lab-counters-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    copy_sysfs_tree(
        &std::path::Path::new("/sys/class/infiniband").join(DEV),
        &root.join(DEV),
    );
    let hw_dir = root.join(DEV).join("ports/1/hw_counters");
    let _ = fs::remove_dir_all(&hw_dir);
    fs::create_dir_all(&hw_dir).unwrap();
    let set = |name: &str, v: u64| fs::write(hw_dir.join(name), format!("{v}\n")).unwrap();
    set("sent_pkts", 500);
    set("retry_exceeded_err", 0);
    set("send_err", 2);
    let child = spawn_rdmadiag_env(
        &["ports", "-d", DEV, "--counters", "--interval", "3s"],
        &[("RDMADIAG_SYSFS_ROOT", root.to_str().unwrap())],
    );
    // Change the counters only once the first reading is taken: when rdmadiag sleeps.
    wait_until_sleeping(child.id());
    set("retry_exceeded_err", 3);
    set("sent_pkts", 20);
    let o = wait_limit(child, Duration::from_secs(60), "ports --interval");
    fs::remove_dir_all(&root).unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let row = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{out}"))
            .to_string()
    };
    assert!(
        row("retry_exceeded_err").contains("! error count rose"),
        "{out}"
    );
    assert!(row("send_err").contains("error count, unchanged"), "{out}");
    assert!(row("sent_pkts").contains("20 (reset)"), "{out}");
    assert!(!row("sent_pkts").contains('!'), "{out}");
    assert!(
        out.contains("! error counters moved: retry_exceeded_err +3 (3 in total"),
        "{out}"
    );
    eprintln!("{out}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_signal_cuts_an_interval_short_with_its_report_and_its_exit_code() {
    require_rxe0();
    for (signal, code, name) in [("-INT", 130, "SIGINT"), ("-TERM", 143, "SIGTERM")] {
        let child = spawn_rdmadiag(&[
            "ports",
            "-d",
            DEV,
            "--counters",
            "--interval",
            "45s",
            "--json",
        ]);
        wait_until_sleeping(child.id());
        let sent = std::time::Instant::now();
        let ok = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {signal}");
        let o = wait_limit(
            child,
            Duration::from_secs(30),
            "ports --interval after a signal",
        );
        assert!(
            sent.elapsed() < Duration::from_secs(10),
            "{name}: {:?}",
            sent.elapsed()
        );
        assert_eq!(o.status.code(), Some(code), "{name}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains(&format!("stopped by {name}")), "{line}");
        assert!(line.contains("45s interval ended after"), "{line}");
        // One document, the report over the time measured: no error document after it.
        let doc: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{name}: not one JSON document ({e}): {}", stdout(&o)));
        assert!(doc.get("error").is_none(), "{doc}");
        let d = &doc["ports"][0]["counter_deltas"];
        check_shape(d);
        let took = d["elapsed_s"].as_f64().unwrap();
        assert!(took > 0.0 && took < 30.0, "{name}: elapsed_s {took}");
        eprintln!(
            "counters: {name} ended the 45 s interval after {took:.2} s, exit {code}: {line}"
        );
    }
}

/// Copy a sysfs directory's readable files and subdirectories (not its symlinks, which lead out
/// of the tree and into loops) into `to`.
fn copy_sysfs_tree(from: &std::path::Path, to: &std::path::Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_sysfs_tree(&entry.path(), &target);
        } else if kind.is_file() {
            // Some attributes refuse reads (write-only files, empty GID slots): leave them out.
            if let Ok(text) = fs::read(entry.path()) {
                fs::write(&target, text).unwrap();
            }
        }
    }
}
