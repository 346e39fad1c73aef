//! Lab tests of RDMA atomics (`bw`/`lat --op atomic-fadd|atomic-cswap`, perftest's -A): both
//! operations, bandwidth and latency, --loopback and a client with a separate server process,
//! text and JSON; and a responder whose target was disturbed (the `test-hooks` build's
//! RDMADIAG_TEST_ATOMIC_TARGET) caught with exit 4 and one line naming expected and found.
//!
//! Figures are checked for shape only (TCG makes timings meaningless); -n 200 keeps each run
//! short. Every process is bounded by `wait_limit`. TCP ports 18741-18759.

use crate::common::*;
use crate::perf::{json_of, pair, run_env};
use crate::require_rxe0;
use serde_json::Value;
use std::process::Output;

/// The responder's target starts at this value instead of 0 (test-hooks build only).
const DISTURB: &str = "RDMADIAG_TEST_ATOMIC_TARGET";
const OPS: [&str; 2] = ["atomic-fadd", "atomic-cswap"];

fn check_server_ok(s: &Output) {
    let err = stderr(s);
    assert!(s.status.success(), "server failed: {err}");
    assert!(!err.contains("panicked"), "server: {err}");
    assert!(s.stdout.is_empty(), "server stdout: {}", stdout(s));
}

/// What every atomic report carries: the op's name, RC, rxe0 both ends, 8 bytes, outstanding
/// atomics bounded by max_rd_atomic, nothing inline.
fn check_header(v: &Value, test: &str, op: &str) {
    assert_eq!(v["test"], test, "{v}");
    assert_eq!(v["op"], op, "{v}");
    assert_eq!(v["transport"], "RC", "{v}");
    for side in ["local", "remote"] {
        assert_eq!(v[side]["device"], "rxe0", "{side}: {v}");
    }
    let (o, max) = (&v["outstanding_reads"], &v["outstanding_max"]);
    assert!(
        o.as_u64()
            .is_some_and(|o| o >= 1 && max.as_u64().is_some_and(|m| o <= m)),
        "atomics in flight are bounded like READs, by the device: {v}"
    );
    assert_eq!(v["inline"], 0, "atomics are never inline: {v}");
}

fn check_bw(v: &Value, op: &str, iters: u64) {
    check_header(v, "bw", op);
    let bw = v["bw"].as_array().expect("bw[]");
    assert_eq!(bw.len(), 1, "{v}");
    let r = &bw[0];
    assert_eq!(r["size"], 8, "{r}");
    assert_eq!(r["iterations"], iters, "{r}");
    for k in ["bw_avg_gbps", "msg_rate_mpps", "elapsed_s"] {
        assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {r}");
    }
}

fn check_lat(v: &Value, op: &str, iters: u64) {
    check_header(v, "lat", op);
    assert_eq!(
        v["latency_measure"], "round trip",
        "atomic latency is a round trip, as READ's: {v}"
    );
    let lat = v["lat"].as_array().expect("lat[]");
    assert_eq!(lat.len(), 1, "{v}");
    let r = &lat[0];
    assert_eq!(r["size"], 8, "{r}");
    assert_eq!(r["iterations"], iters, "{r}");
    let (min, med, max) = (
        r["min_us"].as_f64().unwrap(),
        r["median_us"].as_f64().unwrap(),
        r["max_us"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= med && med <= max, "{r}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn atomics_bw_and_lat_loopback_text_and_json() {
    require_rxe0();
    for op in OPS {
        for test in ["bw", "lat"] {
            let args = [test, "--loopback", "--op", op, "-n", "200", "--json"];
            let v = json_of(&run_env(&args, &[]), &args.join(" "));
            if test == "bw" {
                check_bw(&v, op, 200);
            } else {
                check_lat(&v, op, 200);
            }
            // The table, for people: the op and its bound in the settings line.
            let o = run_env(&[test, "--loopback", "--op", op, "-n", "200"], &[]);
            assert!(o.status.success(), "{test} {op}: {}", stderr(&o));
            let text = stdout(&o);
            assert!(text.contains(op), "{text}");
            assert!(text.contains("outstanding atomics"), "{text}");
            assert!(text.contains("(device max "), "{text}");
        }
    }
    // perftest's -A names the same operations.
    let v = json_of(
        &run_env(
            &[
                "bw",
                "--loopback",
                "-A",
                "FETCH_AND_ADD",
                "-n",
                "200",
                "--json",
            ],
            &[],
        ),
        "bw -A FETCH_AND_ADD",
    );
    check_bw(&v, "atomic-fadd", 200);
    let v = json_of(
        &run_env(
            &[
                "lat",
                "--loopback",
                "-A",
                "CMP_AND_SWAP",
                "-n",
                "200",
                "--json",
            ],
            &[],
        ),
        "lat -A CMP_AND_SWAP",
    );
    check_lat(&v, "atomic-cswap", 200);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn atomics_bw_and_lat_client_and_server() {
    require_rxe0();
    let mut port = 18741;
    for op in OPS {
        for test in ["bw", "lat"] {
            let (c, s) = pair(
                test,
                &[test, "--op", op, "-n", "200", "--json"],
                port,
                &[],
                &[],
            );
            port += 1;
            let v = json_of(&c, &format!("client {test} {op}"));
            check_server_ok(&s);
            if test == "bw" {
                check_bw(&v, op, 200);
            } else {
                check_lat(&v, op, 200);
            }
        }
    }
    // Several QPs, each with its own target (their adds summed), and -o bounding the atomics.
    let (c, s) = pair(
        "bw",
        &[
            "bw",
            "--op",
            "atomic-fadd",
            "-q",
            "4",
            "-o",
            "1",
            "-n",
            "200",
            "--json",
        ],
        18745,
        &[],
        &[],
    );
    let v = json_of(&c, "client bw atomic-fadd -q 4 -o 1");
    check_server_ok(&s);
    check_bw(&v, "atomic-fadd", 800);
    assert_eq!(v["qps"], 4, "{v}");
    assert_eq!(v["outstanding_reads"], 1, "{v}");
    // Text through a server too.
    let (c, s) = pair(
        "lat",
        &["lat", "--op", "atomic-cswap", "-n", "200"],
        18746,
        &[],
        &[],
    );
    assert!(c.status.success(), "{}", stderr(&c));
    check_server_ok(&s);
    assert!(stdout(&c).contains("round trip"), "{}", stdout(&c));
}

/// A disturbed target: exit 4, one line naming what was expected and what was found.
fn check_disturbed(o: &Output, what: &str, expected: &str, found: &str) {
    assert_eq!(
        o.status.code(),
        Some(4),
        "{what} (the binary must be built with --features test-hooks, as scripts/test does): {}",
        stderr(o)
    );
    let line = one_error_line(o);
    assert!(
        line.contains(&format!("expected {expected}")) && line.contains(found),
        "{what}: {line}"
    );
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_disturbed_atomic_target_exits_4_naming_expected_and_found() {
    require_rxe0();
    let env = [(DISTURB, "1000")];
    // lat: the first operation returns 1000 where the chain expects 0 (both ops).
    for op in OPS {
        let o = run_env(&["lat", "--loopback", "--op", op, "-n", "200"], &env);
        check_disturbed(&o, &format!("lat {op}"), "0", "returned 1000");
    }
    // bw fetch-and-add: 200 adds onto 1000 leave 1200, where 200 are expected.
    let o = run_env(
        &["bw", "--loopback", "--op", "atomic-fadd", "-n", "200"],
        &env,
    );
    check_disturbed(&o, "bw atomic-fadd", "200", "held 1200");
    // bw compare-and-swap (0 for 0): every compare fails, the target stays 1000, 0 expected.
    let o = run_env(
        &["bw", "--loopback", "--op", "atomic-cswap", "-n", "200"],
        &env,
    );
    check_disturbed(&o, "bw atomic-cswap", "0", "held 1000");
    // Through a separate server, whose target is the disturbed one.
    for (test, port, expected, found) in [
        ("lat", 18750, "0", "returned 1000"),
        ("bw", 18751, "200", "held 1200"),
    ] {
        let (c, s) = pair(
            test,
            &[test, "--op", "atomic-fadd", "-n", "200"],
            port,
            &[],
            &env,
        );
        check_disturbed(&c, &format!("client {test}"), expected, found);
        assert!(!stderr(&s).contains("panicked"), "{}", stderr(&s));
    }
    // JSON: the failure is one document with exit code 4.
    let o = run_env(
        &[
            "lat",
            "--loopback",
            "--op",
            "atomic-cswap",
            "-n",
            "200",
            "--json",
        ],
        &env,
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("one JSON document ({e}): {}", stdout(&o)));
    assert_eq!(v["error"]["exit_code"], 4, "{v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("expected 0") && msg.contains("1000"), "{v}");
    // The control: the same runs without the hook pass.
    let o = run_env(
        &["bw", "--loopback", "--op", "atomic-cswap", "-n", "200"],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}
