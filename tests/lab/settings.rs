//! Lab tests that every setting shaping a figure is in the report, text and JSON: outstanding
//! READs (-o, the device maximum by default), the latency timing method and its signalling, and
//! pingpong's round trips run and asked for, and ibv_rc_pingpong's usec/iter.

use crate::common::*;
use crate::require_rxe0;
use serde_json::Value;
use std::process::{Command, Output};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn run(args: &[&str]) -> Output {
    wait_limit(
        spawn_rdmadiag(args),
        LIMIT,
        &format!("rdmadiag {}", args.join(" ")),
    )
}

fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(&o)))
}

/// READs rxe0 allows in flight per QP, from ibv_devinfo -v: the smaller of what a QP may
/// initiate and what it may answer (perftest's default depth).
fn device_max_rd_atom() -> u64 {
    let o = Command::new("ibv_devinfo")
        .args(["-v", "-d", "rxe0"])
        .output()
        .expect("ibv_devinfo");
    let devs = parse_devinfo(&String::from_utf8_lossy(&o.stdout));
    let f = &devs["rxe0"].fields;
    devinfo_number(&f["max_qp_rd_atom"]).min(devinfo_number(&f["max_qp_init_rd_atom"]))
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn every_setting_that_shapes_a_figure_is_shown() {
    require_rxe0();
    // READ depth: the device maximum unless -o says; shown in JSON and in the settings line.
    let max = device_max_rd_atom();
    assert!(max > 4, "rxe0 max_qp_rd_atom {max}");
    let v = json(&["bw", "--loopback", "--op", "read", "-n", "20", "--json"]);
    assert_eq!(v["outstanding_reads"], max, "default depth: {v}");
    let v = json(&[
        "bw",
        "--loopback",
        "--op",
        "read",
        "-o",
        "4",
        "-n",
        "20",
        "--json",
    ]);
    assert_eq!(v["outstanding_reads"], 4, "-o 4: {v}");
    let o = run(&["bw", "--loopback", "--op", "read", "-o", "4", "-n", "20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let settings = text
        .lines()
        .find(|l| l.trim_start().starts_with("settings"))
        .unwrap_or_else(|| panic!("no settings line: {text}"));
    for want in [
        "outstanding reads 4",
        "post list",
        "CQ moderation",
        "tx depth",
        "inline",
    ] {
        assert!(settings.contains(want), "{want:?} missing: {settings}");
    }
    let too_deep = (max + 1).to_string();
    let o = run(&[
        "bw",
        "--loopback",
        "--op",
        "read",
        "-o",
        &too_deep,
        "-n",
        "5",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "-o above the device: {}",
        stderr(&o)
    );
    assert!(
        one_error_line(&o).contains(&max.to_string()),
        "{}",
        stderr(&o)
    );
    // WRITE has no READ depth to show.
    let v = json(&["bw", "--loopback", "--op", "write", "-n", "20", "--json"]);
    assert!(v.get("outstanding_reads").is_none(), "{v}");

    // Latency: perftest's method by default, the lean one when asked, both named.
    let v = json(&["lat", "--loopback", "--op", "write", "-n", "20", "--json"]);
    assert_eq!(v["timing"], "perftest", "{v}");
    let perftest_signaling = v["signaling"].as_str().expect("signaling").to_string();
    assert!(perftest_signaling.contains("every operation"), "{v}");
    let v = json(&[
        "lat",
        "--loopback",
        "--op",
        "send",
        "-n",
        "40",
        "--timing",
        "lean",
        "--json",
    ]);
    assert_eq!(v["timing"], "lean", "{v}");
    assert_ne!(v["signaling"], perftest_signaling.as_str(), "{v}");
    assert_eq!(v["lat"][0]["iterations"], 40, "{v}");
    let o = run(&["lat", "--loopback", "--op", "write", "-n", "20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("timing perftest"),
        "text names the method: {}",
        stdout(&o)
    );
    // READ has one method (the data arrives with the completion): no timing, but its signalling.
    let v = json(&["lat", "--loopback", "--op", "read", "-n", "20", "--json"]);
    assert!(v.get("timing").is_none(), "{v}");
    assert!(
        v["signaling"].as_str().is_some_and(|s| !s.is_empty()),
        "{v}"
    );

    // pingpong: the round trips run, those asked for, and ibv's usec/iter, consistent.
    let v = json(&["pingpong", "--loopback", "-n", "30", "-s", "64", "--json"]);
    assert_eq!(v["iterations"], 30, "{v}");
    assert_eq!(v["requested_iterations"], 30, "{v}");
    let per_iter = v["usec_per_iter"].as_f64().expect("usec_per_iter");
    let elapsed = v["elapsed_s"].as_f64().expect("elapsed_s");
    assert!(
        (per_iter - elapsed * 1e6 / 30.0).abs() < 0.01 * per_iter,
        "usec_per_iter {per_iter} against elapsed {elapsed}: {v}"
    );
    assert!(
        per_iter >= v["min_us"].as_f64().unwrap(),
        "a mean is never below the minimum: {v}"
    );
    // The samples' clock is named, as lat's.
    assert!(
        matches!(
            v["clock"].as_str(),
            Some("tsc" | "cntvct" | "tsc_forced" | "monotonic")
        ),
        "{v}"
    );
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn the_traffic_class_and_service_level_are_in_every_report() {
    require_rxe0();
    for sub in ["bw", "lat", "pingpong"] {
        let v = json(&[sub, "--loopback", "-n", "20", "--json"]);
        assert_eq!(
            (&v["tclass"], &v["sl"]),
            (&0.into(), &0.into()),
            "{sub}: {v}"
        );
        let asked = [
            sub,
            "--loopback",
            "-n",
            "20",
            "--tclass",
            "0x68",
            "--sl",
            "2",
        ];
        let v = json(&[&asked[..], &["--json"]].concat());
        assert_eq!(
            (&v["tclass"], &v["sl"]),
            (&104.into(), &2.into()),
            "{sub}: {v}"
        );
        let o = run(&asked);
        assert!(o.status.success(), "{asked:?}: {}", stderr(&o));
        let text = stdout(&o);
        let settings = text
            .lines()
            .find(|l| l.trim_start().starts_with("settings"))
            .unwrap_or_else(|| panic!("{sub}: no settings line: {text}"));
        assert!(
            settings.contains("traffic class 104 (DSCP 26, ECN 0), SL 2"),
            "{sub}: {settings}"
        );
    }
    // rdma_cm: its ToS is the traffic class; the SL comes from the path.
    let v = json(&["bw", "--loopback", "--cm", "-n", "20", "--json"]);
    assert_eq!(
        (&v["tclass"], &v["sl"]),
        (&Value::Null, &Value::Null),
        "{v}"
    );
    let v = json(&[
        "bw",
        "--loopback",
        "--cm",
        "-n",
        "20",
        "--tclass",
        "104",
        "--json",
    ]);
    assert_eq!((&v["tclass"], &v["sl"]), (&104.into(), &Value::Null), "{v}");
    // Client and server: the server takes the client's priority, with no flag of its own.
    for cm in [&[][..], &["--cm"]] {
        let server = spawn_rdmadiag(&["bw", "-p", "18796", "--timeout", "20s", "--json"]);
        wait_listening(18796, LIMIT);
        let args = [
            &[
                "bw",
                "10.77.0.1",
                "-p",
                "18796",
                "-n",
                "20",
                "--tclass",
                "104",
                "--json",
            ][..],
            cm,
        ]
        .concat();
        let c = run(&args);
        let s = wait_limit(server, LIMIT, "bw server");
        assert!(c.status.success(), "{args:?}: {}", stderr(&c));
        assert!(s.status.success(), "server for {args:?}: {}", stderr(&s));
        let v: Value = serde_json::from_slice(&c.stdout).unwrap();
        assert_eq!(v["tclass"], 104, "{args:?}: {v}");
    }
}
