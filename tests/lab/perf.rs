//! Lab tests of bw, lat, write and read: every operation in every role (loopback, and a client
//! with a separate server process over TCP control), the JSON of each, data verification proven
//! with transfers that never arrived, -a sweeps end to end, health thresholds and invalid
//! combinations.
//!
//! Figures are checked for shape and consistency only (positive, ordered, one result per size),
//! never against a speed: TCG makes every timing meaningless. Iteration counts stay small so the
//! whole file runs in a few minutes under TCG; every process is bounded by `wait_limit`.

use crate::common::*;
use crate::require_rxe0;
use serde_json::Value;
use std::process::Output;
use std::time::{Duration, Instant};

/// Longest any one process may take (each normally takes 1-5 s under TCG).
const LIMIT: Duration = Duration::from_secs(60);
const HOST: &str = "10.77.0.1";
/// The GID rdmadiag picks by default on rxe0: RoCE v2, IPv4-mapped.
const GID: &str = "::ffff:10.77.0.1";
/// The client leaves transfer N (1-based) of a write/read diagnostic unposted.
const DROP: &str = "RDMADIAG_TEST_DROP_TRANSFER";

/// Run rdmadiag with extra environment, bounded by LIMIT.
pub(crate) fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let t = Instant::now();
    let what = format!("rdmadiag {}", args.join(" "));
    let o = wait_limit(spawn_rdmadiag_env(args, env), LIMIT, &what);
    eprintln!("{:>6.2?}  {what}", t.elapsed()); // shown with --nocapture: where the time goes
    o
}

fn run(args: &[&str]) -> Output {
    run_env(args, &[])
}

/// Require exit 0 and parse stdout as one JSON document.
pub(crate) fn json_of(o: &Output, what: &str) -> Value {
    assert!(
        o.status.success(),
        "{what} failed ({:?}): {}",
        o.status.code(),
        stderr(o)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{what}: invalid JSON ({e}): {}", stdout(o)))
}

/// `SUBCOMMAND --loopback ARGS... --json`, which must succeed.
fn loopback(args: &[&str]) -> Value {
    let mut a = vec![args[0], "--loopback"];
    a.extend_from_slice(&args[1..]);
    a.push("--json");
    json_of(&run(&a), &a.join(" "))
}

/// A server process (`server_sub -p PORT --json`, no other flags: it runs what the client asks)
/// and a client (`args[0] HOST -p PORT args[1..]`), each with its own environment.
/// Returns (client, server) once both ended.
pub(crate) fn pair(
    server_sub: &str,
    args: &[&str],
    port: u16,
    client_env: &[(&str, &str)],
    server_env: &[(&str, &str)],
) -> (Output, Output) {
    pair_within(LIMIT, server_sub, args, port, client_env, server_env)
}

/// [`pair`] with its own bound, for the few cases that move hundreds of megabytes under TCG.
fn pair_within(
    limit: Duration,
    server_sub: &str,
    args: &[&str],
    port: u16,
    client_env: &[(&str, &str)],
    server_env: &[(&str, &str)],
) -> (Output, Output) {
    let t = Instant::now();
    let p = port.to_string();
    let server = spawn_rdmadiag_env(
        &[server_sub, "-p", &p, "--wait", "60s", "--json"],
        server_env,
    );
    wait_listening(port, LIMIT);
    let mut c = vec![args[0], HOST, "-p", &p];
    c.extend_from_slice(&args[1..]);
    let what = format!("client rdmadiag {}", c.join(" "));
    let client = wait_limit(spawn_rdmadiag_env(&c, client_env), limit, &what);
    let server = wait_limit(
        server,
        limit,
        &format!("{server_sub} server on port {port}"),
    );
    eprintln!("{:>6.2?}  {what} (+ {server_sub} server)", t.elapsed());
    (client, server)
}

/// Client and server both succeed; returns the client's JSON report. `args` must hold `--json`.
fn client_server(args: &[&str], port: u16) -> Value {
    let (c, s) = pair(args[0], args, port, &[], &[]);
    let v = json_of(&c, &format!("client {args:?}"));
    check_server(&s);
    v
}

/// The server of a successful run exits 0, and prints nothing on stdout: the client prints the
/// report (docs/json.md), even with --json.
fn check_server(s: &Output) {
    let err = stderr(s);
    assert!(s.status.success(), "server failed: {err}");
    assert!(!err.contains("panicked"), "server: {err}");
    assert!(s.stdout.is_empty(), "server stdout: {}", stdout(s));
}

fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} is not a number in {v}"))
}

/// What every bw/lat/write/read report carries: both endpoints on rxe0 with the default GID.
fn check_header(v: &Value, test: &str, op: &str, transport: &str) {
    assert_eq!(v["test"], test, "{v}");
    assert_eq!(v["op"], op, "{v}");
    assert_eq!(v["transport"], transport, "{v}");
    for side in ["local", "remote"] {
        let e = &v[side];
        assert_eq!(e["device"], "rxe0", "{side}: {e}");
        assert_eq!(e["port"], 1, "{side}: {e}");
        assert_eq!(e["gid"], GID, "{side}: GID picked automatically: {e}");
        assert_eq!(e["gid_type"], "RoCE v2", "{side}: {e}");
        assert_eq!(e["netdev"], "dummy0", "{side}: {e}");
        assert!(e["qpn"].as_u64().is_some_and(|q| q > 0), "{side}: {e}");
    }
    assert_ne!(v["local"]["qpn"], v["remote"]["qpn"], "two distinct QPs");
    assert!(v["path_mtu"].as_u64().is_some_and(|m| m >= 256), "{v}");
    assert!(
        v["rdmadiag_version"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    for k in ["qps", "tx_depth", "cq_mod", "post_list", "inline"] {
        assert!(v[k].as_u64().is_some(), "{k} in {v}");
    }
    assert!(v["bidirectional"].is_boolean(), "{v}");
}

/// One size's bandwidth figures: `iters` exact when given, else at least one operation.
fn check_bw_result(r: &Value, size: u64, iters: Option<u64>) {
    assert_eq!(r["size"], size, "{r}");
    let n = r["iterations"].as_u64().expect("iterations");
    match iters {
        Some(want) => assert_eq!(n, want, "{r}"),
        None => assert!(n > 0, "{r}"),
    }
    let (peak, avg, rate) = (
        num(r, "bw_peak_gbps"),
        num(r, "bw_avg_gbps"),
        num(r, "msg_rate_mpps"),
    );
    assert!(peak > 0.0 && avg > 0.0 && rate > 0.0, "{r}");
    // No relation between peak and average is asserted: peak comes from real completion
    // times (unit-tested in src/perf/bw.rs), and nothing clamps one to the other.
    assert!(num(r, "elapsed_s") > 0.0, "{r}");
}

/// Without -Q, sizes above 8 KiB get a completion each (as perftest), others the default 100
/// (never more than the send queue depth).
fn check_cq_mod(v: &Value) {
    let depth = v["tx_depth"].as_u64().unwrap();
    for r in v["bw"].as_array().unwrap() {
        let size = r["size"].as_u64().unwrap();
        let want = if size > 8192 && v["transport"] != "UD" {
            1
        } else {
            100.min(depth)
        };
        assert_eq!(r["cq_mod"], want, "{r}");
    }
}

/// A bw report: one result per size in `sizes`, in order. `iters` is the operations expected
/// per size (all QPs together), None in duration mode.
fn check_bw(v: &Value, op: &str, transport: &str, sizes: &[u64], iters: Option<u64>) {
    check_header(v, "bw", op, transport);
    assert!(v.get("latency_measure").is_none_or(Value::is_null), "{v}");
    let bw = v["bw"].as_array().expect("bw[]");
    let got: Vec<u64> = bw.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(got, sizes, "one result per size, in order");
    for (r, &size) in bw.iter().zip(sizes) {
        if v["bidirectional"] == true {
            // The figures are the sum of both directions; each direction is there too.
            check_bw_result(r, size, iters.map(|n| 2 * n));
            let (f, b) = (&r["forward"], &r["reverse"]);
            check_bw_result(&json_with_size(f, size), size, iters);
            check_bw_result(&json_with_size(b, size), size, iters);
            let sum = num(f, "bw_avg_gbps") + num(b, "bw_avg_gbps");
            assert!(
                (num(r, "bw_avg_gbps") - sum).abs() <= 1e-9 * sum.max(1.0),
                "{r}"
            );
            continue;
        }
        check_bw_result(r, size, iters);
        if op == "send" && transport == "RC" {
            // The receiver's own figure: on RC it got every message.
            let peer = &r["peer"];
            assert!(peer.is_object(), "SEND reports the receiver: {r}");
            check_bw_result(peer, size, iters);
        } else if op != "send" && v["bidirectional"] == false {
            // One-sided: the target's CPU takes no part and measures nothing.
            assert!(r.get("peer").is_none_or(Value::is_null), "{r}");
        }
    }
}

/// One direction's figures carry no size of their own: give them the round's.
fn json_with_size(d: &Value, size: u64) -> Value {
    assert!(d.is_object(), "a direction of a -b round: {d}");
    let mut d = d.clone();
    d["size"] = size.into();
    d
}

/// A latency result: statistics ordered, samples counted.
fn check_lat_result(r: &Value, size: u64, iters: Option<u64>) {
    assert_eq!(r["size"], size, "{r}");
    let n = r["iterations"].as_u64().expect("iterations");
    match iters {
        Some(want) => assert_eq!(n, want, "{r}"),
        None => assert!(n > 0, "{r}"),
    }
    let samples = r["samples"].as_u64().expect("samples");
    assert!(samples > 0 && samples <= n, "{r}");
    let order = [
        "min_us",
        "median_us",
        "p90_us",
        "p99_us",
        "p999_us",
        "p9999_us",
        "max_us",
    ];
    let vals: Vec<f64> = order.iter().map(|k| num(r, k)).collect();
    assert!(vals[0] > 0.0, "{r}");
    for (w, k) in vals.windows(2).zip(order.windows(2)) {
        assert!(w[0] <= w[1], "{} > {}: {r}", k[0], k[1]);
    }
    let (avg, stdev) = (num(r, "avg_us"), num(r, "stdev_us"));
    assert!(
        vals[0] <= avg && avg <= vals[6],
        "avg outside min..max: {r}"
    );
    assert!(stdev >= 0.0, "{r}");
}

fn measure(op: &str) -> &'static str {
    if op == "read" {
        "round trip"
    } else {
        "half round trip"
    }
}

fn check_lat(v: &Value, op: &str, sizes: &[u64], iters: Option<u64>) {
    check_header(v, "lat", op, "RC");
    assert_eq!(v["latency_measure"], measure(op), "{v}");
    assert!(
        matches!(
            v["clock"].as_str(),
            Some("tsc" | "cntvct" | "tsc_forced" | "monotonic")
        ),
        "the samples' clock is named: {v}"
    );
    let lat = v["lat"].as_array().expect("lat[]");
    let got: Vec<u64> = lat.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(got, sizes, "one result per size, in order");
    for (r, &size) in lat.iter().zip(sizes) {
        check_lat_result(r, size, iters);
        assert!(
            r.get("histogram").is_none(),
            "histogram only when asked: {r}"
        );
    }
}

/// A successful write/read diagnostic: every byte verified.
fn check_xfer(v: &Value, op: &str, size: u64, iters: u64) {
    check_header(v, op, op, "RC");
    assert_eq!(v["latency_measure"], "round trip", "{v}");
    let lat = v["lat"].as_array().expect("lat[]");
    assert_eq!(lat.len(), 1, "{v}");
    let r = &lat[0];
    check_lat_result(r, size, Some(iters));
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["transfers_checked"], iters, "every transfer checked: {r}");
    assert!(r.get("mismatch").is_none_or(Value::is_null), "{r}");
    assert!(num(r, "bw_avg_gbps") > 0.0, "{r}");
}

/// A diagnostic whose client left transfer `lost` unposted: exit 4 (data not as sent), one line
/// naming the operation and the transfer, and the same in the JSON report.
fn check_lost(o: &Output, op: &str, lost: u64) {
    assert_eq!(
        o.status.code(),
        Some(4),
        "{op} (the binary must be built with --features test-hooks, as scripts/test does): {}",
        stderr(o)
    );
    let line = one_error_line(o);
    assert!(
        line.contains(&op.to_uppercase())
            && line.contains(&format!("transfer {lost} did not arrive as sent")),
        "{line}"
    );
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{op}: the report still comes out ({e}): {}", stdout(o)));
    let r = &v["lat"][0];
    assert_eq!(r["verified"], false, "{r}");
    let m = &r["mismatch"];
    assert_eq!(m["transfer"], lost, "{m}");
    assert_eq!(
        m["actual"], 0,
        "nothing landed: the slot stayed zeroed: {m}"
    );
    assert!(m["bad_bytes"].as_u64().unwrap() > 0, "{m}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn bw_loopback_every_op() {
    require_rxe0();
    for op in ["send", "write", "read"] {
        let v = loopback(&["bw", "--op", op, "-s", "64K", "-n", "200"]);
        check_bw(&v, op, "RC", &[65536], Some(200));
        assert_eq!(v["qps"], 1);
        assert_eq!(v["bidirectional"], false);
        assert!(v["duration_s"].is_null(), "{v}");
    }
    // The table, for people.
    let o = run(&["bw", "--loopback", "-n", "50"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("65536"), "{}", stdout(&o));
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn bw_client_and_server_every_op() {
    require_rxe0();
    for (op, port) in [("send", 18900), ("write", 18901), ("read", 18902)] {
        let v = client_server(
            &["bw", "--op", op, "-s", "64K", "-n", "200", "--json"],
            port,
        );
        check_bw(&v, op, "RC", &[65536], Some(200));
    }
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn bw_qps_bidirectional_and_transports() {
    require_rxe0();
    // Two QPs: -n counts per QP, the result counts all of them.
    let v = loopback(&["bw", "-q", "2", "-s", "64K", "-n", "100"]);
    check_bw(&v, "write", "RC", &[65536], Some(200));
    assert_eq!(v["qps"], 2);
    let v = client_server(
        &[
            "bw", "--op", "read", "-q", "2", "-s", "16K", "-n", "100", "--json",
        ],
        18903,
    );
    check_bw(&v, "read", "RC", &[16384], Some(200));
    assert_eq!(v["qps"], 2);

    // Both directions at once: the reverse direction is the peer's figure.
    for (op, port) in [("write", 18904), ("send", 18905)] {
        let v = client_server(
            &["bw", "--op", op, "-b", "-s", "64K", "-n", "100", "--json"],
            port,
        );
        assert_eq!(v["bidirectional"], true);
        check_bw(&v, op, "RC", &[65536], Some(100));
    }
    let v = loopback(&["bw", "-b", "--op", "read", "-s", "64K", "-n", "100"]);
    check_bw(&v, "read", "RC", &[65536], Some(100));

    // UC WRITE: every operation completes on the sender.
    let v = loopback(&["bw", "-c", "UC", "--op", "write", "-s", "64K", "-n", "200"]);
    check_bw(&v, "write", "UC", &[65536], Some(200));

    // UD SEND: the receiver reports what arrived (datagrams may be dropped).
    let v = loopback(&["bw", "-c", "ud", "--op", "send", "-s", "1K", "-n", "200"]);
    check_bw(&v, "send", "UD", &[1024], Some(200));
    let peer = &v["bw"][0]["peer"];
    check_bw_result(peer, 1024, None);
    assert!(peer["iterations"].as_u64().unwrap() <= 200, "{peer}");
    let v = client_server(
        &[
            "bw", "-c", "UD", "--op", "send", "-s", "512", "-n", "200", "--json",
        ],
        18906,
    );
    check_bw(&v, "send", "UD", &[512], Some(200));
    check_bw_result(&v["bw"][0]["peer"], 512, None);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn bw_duration_and_sweep() {
    require_rxe0();
    let v = loopback(&["bw", "-D", "1s", "-s", "64K"]);
    check_bw(&v, "write", "RC", &[65536], None);
    assert_eq!(v["duration_s"], 1.0, "{v}");
    let v = client_server(
        &["bw", "--op", "send", "-D", "1s", "-s", "16K", "--json"],
        18907,
    );
    check_bw(&v, "send", "RC", &[16384], None);
    assert!(v["bw"][0]["peer"].is_object(), "{v}");

    // A sweep: one result per size, in the order given (not sorted).
    let v = loopback(&["bw", "--sizes", "4K,1K,64K", "-n", "100"]);
    check_bw(&v, "write", "RC", &[4096, 1024, 65536], Some(100));
    let v = loopback(&["bw", "--op", "send", "--sizes", "64,64K,1K", "-n", "100"]);
    check_bw(&v, "send", "RC", &[64, 65536, 1024], Some(100));
    let v = client_server(
        &[
            "bw", "--op", "read", "--sizes", "2,4K,32K", "-n", "100", "--json",
        ],
        18908,
    );
    check_bw(&v, "read", "RC", &[2, 4096, 32768], Some(100));

    // -a runs end to end in sweeps_with_a_complete_for_every_op; its conflict with -D:
    let o = run(&["bw", "--loopback", "-a", "-D", "1s"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    one_error_line(&o);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn lat_loopback_every_op() {
    require_rxe0();
    for op in ["send", "write", "read"] {
        let v = loopback(&["lat", "--op", op, "-n", "200"]);
        check_lat(&v, op, &[2], Some(200));
        assert_eq!(v["qps"], 1);
    }
    // A sweep, and the histogram.
    let v = loopback(&["lat", "--sizes", "2,1K,8K", "-n", "100"]);
    check_lat(&v, "write", &[2, 1024, 8192], Some(100));
    for op in ["write", "read"] {
        let v = loopback(&["lat", "--op", op, "-n", "200", "--histogram"]);
        let r = &v["lat"][0];
        check_lat_result(r, 2, Some(200));
        let h = r["histogram"].as_array().expect("lat[].histogram");
        assert!(!h.is_empty(), "{r}");
        let mut last = 0.0;
        let mut total = 0;
        for b in h {
            let le = num(b, "le_us");
            assert!(le >= last, "buckets ascend: {h:?}");
            last = le;
            total += b["count"].as_u64().expect("count");
        }
        assert_eq!(total, r["samples"].as_u64().unwrap(), "every sample drawn");
    }
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn lat_client_and_server_every_op() {
    require_rxe0();
    for (op, port) in [("send", 18910), ("write", 18911), ("read", 18912)] {
        let v = client_server(&["lat", "--op", op, "-n", "200", "--json"], port);
        check_lat(&v, op, &[2], Some(200));
    }
    // A size again, after another: each round starts from a cleared landing zone (on its own
    // page past the source), or the earlier round's stop mark, copied along with the larger
    // round's source, would end the responder's round at once and leave the client waiting.
    let sizes = [
        "lat",
        "--sizes",
        "64,1000,64",
        "-n",
        "50",
        "--timeout",
        "5s",
        "--json",
    ];
    let v = client_server(&sizes, 18913);
    check_lat(&v, "write", &[64, 1000, 64], Some(50));
    // The counter can be set aside for the monotonic clock; the report says which was read.
    let o = run_env(
        &["lat", "--loopback", "-n", "200", "--json"],
        &[("RDMADIAG_CLOCK", "monotonic")],
    );
    let v = json_of(&o, "lat with RDMADIAG_CLOCK=monotonic");
    check_lat(&v, "write", &[2], Some(200));
    assert_eq!(v["clock"], "monotonic", "{v}");
    let v = loopback(&["lat", "-n", "200"]);
    eprintln!("the lab's latency clock: {}", v["clock"]);
    // The TSC can be asked for where the CPU does not list it as invariant (the lab's TCG
    // guest): still calibrated, and the report says it was forced.
    if cfg!(target_arch = "x86_64") {
        let o = run_env(
            &["lat", "--loopback", "-n", "200", "--json"],
            &[("RDMADIAG_CLOCK", "tsc")],
        );
        let v = json_of(&o, "lat with RDMADIAG_CLOCK=tsc");
        check_lat(&v, "write", &[2], Some(200));
        assert!(
            matches!(v["clock"].as_str(), Some("tsc" | "tsc_forced")),
            "{v}"
        );
    }
}

/// A one-sided round longer than the server's patience: while only the client works (READ: the
/// server waits for the round's end on its control channel), the client's heartbeat keeps the
/// server's channel alive, and the round ends well. The round (5 s) outlasts both the server's
/// timeout (1 s) and the silence it allows a beating client (three of its slowest beats, 3 s):
/// without the heartbeat the server gives up. The client's beats come every second (its own
/// timeout's quarter, at most 1 s), as often as the server's timeout: they must not need to
/// be on time.
#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_one_sided_round_outlasts_the_servers_timeout() {
    require_rxe0();
    let port = 18915u16;
    let p = port.to_string();
    let server = spawn_rdmadiag_env(
        &[
            "lat",
            "-p",
            &p,
            "--wait",
            "60s",
            "--timeout",
            "1s",
            "--json",
        ],
        &[],
    );
    wait_listening(port, LIMIT);
    let args = ["lat", HOST, "-p", &p, "--op", "read", "-D", "5s", "--json"];
    let client = wait_limit(spawn_rdmadiag_env(&args, &[]), LIMIT, "lat --op read -D 5s");
    let server = wait_limit(server, LIMIT, "lat server with --timeout 1s");
    let v = json_of(
        &client,
        "lat --op read -D 5s against a server with --timeout 1s",
    );
    check_lat(&v, "read", &[2], None);
    check_server(&server);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn lat_duration_keeps_percentiles() {
    require_rxe0();
    for op in ["send", "read"] {
        let v = loopback(&["lat", "--op", op, "-D", "1s"]);
        check_lat(&v, op, &[2], None);
        assert_eq!(v["duration_s"], 1.0, "{v}");
    }
    let v = client_server(&["lat", "--op", "write", "-D", "1s", "--json"], 18914);
    check_lat(&v, "write", &[2], None);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn write_and_read_diagnostics_verify_every_byte() {
    require_rxe0();
    for op in ["write", "read"] {
        let v = loopback(&[op, "-s", "64K", "-n", "5"]);
        check_xfer(&v, op, 65536, 5);
        let v = loopback(&[op, "-s", "1000", "-n", "20"]);
        check_xfer(&v, op, 1000, 20);
    }
    for (op, port) in [("write", 18920), ("read", 18921)] {
        let v = client_server(&[op, "-s", "64K", "-n", "5", "--json"], port);
        check_xfer(&v, op, 65536, 5);
    }
    // Any server serves any test: a `bw` server answers a READ diagnostic.
    let (c, s) = pair(
        "bw",
        &["read", "-s", "4K", "-n", "5", "--json"],
        18922,
        &[],
        &[],
    );
    let v = json_of(&c, "read client of a bw server");
    check_xfer(&v, "read", 4096, 5);
    check_server(&s);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn transfers_that_never_arrived_are_caught() {
    require_rxe0();
    // READ: the client verifies each slot it read into (zeroed before the round).
    let o = run_env(
        &["read", "--loopback", "-s", "64K", "-n", "3", "--json"],
        &[(DROP, "2")],
    );
    check_lost(&o, "read", 2);
    let (c, s) = pair(
        "read",
        &["read", "-s", "4K", "-n", "20", "--json"],
        18923,
        &[(DROP, "20")],
        &[],
    );
    check_lost(&c, "read", 20);
    assert!(!stderr(&s).contains("panicked"), "{}", stderr(&s));
    // WRITE: the server verifies every slot of each round; client and server both exit 4.
    let (c, s) = pair(
        "write",
        &["write", "-s", "64K", "-n", "3", "--json"],
        18924,
        &[(DROP, "1")],
        &[],
    );
    check_lost(&c, "write", 1);
    assert_eq!(s.status.code(), Some(4), "server: {}", stderr(&s));
    assert!(!stderr(&s).contains("panicked"), "{}", stderr(&s));
    // 8 MiB transfers: two slots per round, so three transfers take two rounds; the lost
    // one is in the second round (every round is checked, not just the last transfer).
    let o = run_env(
        &["write", "--loopback", "-s", "8M", "-n", "3", "--json"],
        &[(DROP, "3")],
    );
    check_lost(&o, "write", 3);
    let v = loopback(&["write", "-s", "8M", "-n", "3"]);
    check_xfer(&v, "write", 8 << 20, 3);
    // The control: the same runs with nothing dropped pass.
    let v = loopback(&["read", "-s", "64K", "-n", "3"]);
    check_xfer(&v, "read", 65536, 3);
}

/// perftest's -a sweep, end to end: 2 B to 8 MiB, every op, bw and lat, both roles.
#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn sweeps_with_a_complete_for_every_op() {
    require_rxe0();
    let all: Vec<u64> = (1..=23).map(|k| 1u64 << k).collect();
    for (op, port) in [("write", 18930), ("send", 18931), ("read", 18932)] {
        let v = loopback(&["bw", "--op", op, "-a", "-n", "5"]);
        check_bw(&v, op, "RC", &all, Some(5));
        check_cq_mod(&v);
        // A server registers an 8 MiB buffer before it answers: under TCG on a loaded host
        // that has taken over the default 10 s.
        let v = client_server(
            &[
                "lat",
                "--op",
                op,
                "-a",
                "-n",
                "5",
                "--timeout",
                "30s",
                "--json",
            ],
            port,
        );
        check_lat(&v, op, &all, Some(5));
    }
    for (op, port) in [("write", 18933), ("send", 18934)] {
        let v = client_server(
            &[
                "bw",
                "--op",
                op,
                "-a",
                "-n",
                "5",
                "--timeout",
                "30s",
                "--json",
            ],
            port,
        );
        check_bw(&v, op, "RC", &all, Some(5));
    }
    for op in ["write", "send", "read"] {
        let v = loopback(&["lat", "--op", op, "-a", "-n", "5"]);
        check_lat(&v, op, &all, Some(5));
    }
    // The same 23 sizes spelled out, in one process, with fewer iterations than the requested
    // CQ moderation (this stalled before moderation turned off above 8 KiB: 20 x 8 MiB take
    // over the 10 s no-progress bound at the lab's speed; -n 50 took 47 s here on a loaded host).
    let list: Vec<String> = all.iter().map(u64::to_string).collect();
    let v = loopback(&[
        "bw",
        "--op",
        "write",
        "--sizes",
        &list.join(","),
        "-n",
        "20",
    ]);
    check_bw(&v, "write", "RC", &all, Some(20));
    check_cq_mod(&v);
    // The case that used to stall: -n 50 is under the default CQ moderation of 100, so
    // with moderation on every size the first completion came after 50 x 8 MiB. The sizes on
    // both sides of the 8 KiB boundary and the 8 MiB one: the whole -a list at -n 50 moves
    // 800 MB, about a minute at the lab's speed, which the -n 5 sweeps above already cover.
    let sizes = [2u64, 8192, 16384, 8 << 20];
    let list: Vec<String> = sizes.iter().map(u64::to_string).collect();
    let args = [
        "bw",
        "--op",
        "read",
        "--sizes",
        &list.join(","),
        "-n",
        "50",
        "--timeout",
        "30s",
        "--json",
    ];
    let (c, s) = pair_within(Duration::from_secs(150), "bw", &args, 18935, &[], &[]);
    let v = json_of(&c, &format!("client {args:?}"));
    check_server(&s);
    check_bw(&v, "read", "RC", &sizes, Some(50));
    check_cq_mod(&v);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn thresholds_exit_3_with_one_line() {
    require_rxe0();
    let o = run(&[
        "bw",
        "--loopback",
        "-n",
        "200",
        "--expect-bw",
        "1000Gb/s",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let line = one_error_line(&o);
    assert!(
        line.contains("bandwidth") && line.contains("1000") && line.contains("short"),
        "{line}"
    );
    // The report still comes out in full.
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON despite the shortfall");
    check_bw(&v, "write", "RC", &[65536], Some(200));

    let o = run(&["bw", "--loopback", "-n", "200", "--expect-bw", "1Mb/s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let o = run(&[
        "lat",
        "--loopback",
        "-n",
        "200",
        "--expect-lat",
        "1ns",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let line = one_error_line(&o);
    assert!(
        line.contains("latency") && line.contains("median") && line.contains("over"),
        "{line}"
    );
    check_lat(
        &serde_json::from_slice(&o.stdout).expect("JSON despite the excess"),
        "write",
        &[2],
        Some(200),
    );

    let o = run(&[
        "lat",
        "--loopback",
        "-n",
        "200",
        "--expect-lat",
        "10s",
        "--expect-percentile",
        "99",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&[
        "lat",
        "--loopback",
        "--op",
        "read",
        "-n",
        "200",
        "--expect-lat",
        "1ns",
        "--expect-percentile",
        "99.9",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(one_error_line(&o).contains("p99.9"), "{}", stderr(&o));
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn invalid_combinations_are_usage_errors() {
    require_rxe0();
    let cases: [(&[&str], &str); 26] = [
        (&["bw", "--op", "read", "-c", "UD"][..], "UD"),
        (&["bw", "--op", "write", "-c", "UD"], "UD"),
        (&["bw", "--op", "read", "-c", "UC"], "UC"),
        (&["lat", "--op", "read", "-c", "UD"], "UD"),
        (&["lat", "--op", "write", "-c", "UD"], "UD"),
        (&["lat", "--op", "read", "-c", "UC"], "UC"),
        (&["bw", "-D", "1s", "-a"], "--all"),
        (&["lat", "-a", "-D", "1s"], "--all"),
        (&["bw", "-D", "0s"], "duration"),
        (&["bw", "-s", "0"], "size"),
        (&["bw", "-s", "5G"], "5G"),
        (&["bw", "-s", "2G"], "size"),
        (&["lat", "--sizes", "64,0"], "size"),
        (&["write", "-s", "0"], "size"),
        (&["read", "-s", "5G"], "5G"),
        (&["bw", "-n", "0"], "iters"),
        (&["lat", "-n", "0"], "iters"),
        (&["read", "-n", "0"], "iters"),
        (&["bw", "-q", "0"], "qps"),
        (&["bw", "-q", "5000"], "qps"),
        (
            &["lat", "--expect-percentile", "75", "--expect-lat", "5us"],
            "75",
        ),
        // Should name --expect-lat; rdmadiag's one-line clap error drops the name (see report).
        (&["lat", "--expect-percentile", "99"], "required"),
        (&["bw", "-I", "99999999"], "inline"),
        (&["bw", "-I", "2000", "-n", "10"], "inline"),
        (&["bw", "--expect-bw", "fast"], "fast"),
        (
            &["bw", "--op", "send", "-c", "UD", "-s", "4K", "-n", "10"],
            "MTU",
        ),
    ];
    // All at once: each is refused before (or right after) opening the device, and starting a
    // process is what costs time under TCG.
    let running: Vec<_> = cases
        .iter()
        .map(|(args, needle)| {
            let mut a = vec![args[0], "--loopback"];
            a.extend_from_slice(&args[1..]);
            let child = spawn_rdmadiag(&a);
            (a, *needle, child)
        })
        .collect();
    for (a, needle, child) in running {
        let o = wait_limit(child, LIMIT, &format!("rdmadiag {a:?}"));
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        let line = one_error_line(&o);
        assert!(line.contains(needle), "{a:?}: {line}");
        assert!(o.stdout.is_empty(), "{a:?}: {}", stdout(&o));
    }
}

/// A peer that stops answering mid-run (SIGSTOP: its process is alive, its receives run out)
/// is caught by the no-progress watchdog within the timeout, and the line tells the truth
/// about what was posted and what completed.
#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_stalled_peer_is_caught_with_true_counts() {
    require_rxe0();
    let mut server = spawn_rdmadiag(&["bw", "-p", "18936", "--wait", "60s"]);
    wait_listening(18936, LIMIT);
    let (client, rx) = crate::watch::spawn_watched(&[
        "bw",
        HOST,
        "-p",
        "18936",
        "--op",
        "send",
        "-s",
        "64K",
        "-D",
        "60s",
        "--timeout",
        "3s",
        "-v",
    ]);
    crate::watch::wait_for_line(&rx, "connected", Duration::from_secs(2));
    let pid = server.id().to_string();
    let stop = std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .expect("kill -STOP");
    assert!(stop.success());
    let stopped = Instant::now();
    let c = wait_limit(client, LIMIT, "client of a stopped server");
    let took = stopped.elapsed();
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(c.status.code(), Some(1));
    let line = crate::watch::last_error_line(&rx);
    assert!(line.contains("no progress for 3s"), "{line}");
    // "N posted, M known complete ..., K received so far" with N > 0: never "0 sent".
    let posted: u64 = line
        .split(" posted")
        .next()
        .and_then(|head| head.rsplit(['(', ' ']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no posted count in: {line}"));
    assert!(posted > 0, "{line}");
    assert!(line.contains("known complete"), "{line}");
    assert!(
        took < Duration::from_secs(3 + 10),
        "caught {took:?} after the peer stopped (timeout 3 s): {line}"
    );
}

/// The rkeys of the MRs that process `pid` holds on rxe0 now, from the kernel's resource
/// tracking (`rdma resource show mr`, which names the thread that registered each: any of the
/// process's threads counts).
fn live_rkeys(pid: u32) -> Vec<u64> {
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    listed_mrs()
        .into_iter()
        .filter(|(tid, _)| threads.contains(tid))
        .map(|(_, rkey)| rkey)
        .collect()
}

/// Every MR the kernel lists on the guest's devices: (thread id, rkey).
fn listed_mrs() -> Vec<(String, u64)> {
    let o = std::process::Command::new("rdma")
        .args(["resource", "show", "mr"])
        .output()
        .expect("run rdma resource show mr");
    assert!(o.status.success(), "rdma resource show mr: {}", stderr(&o));
    stdout(&o)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let after = |k: &str| w.iter().position(|x| *x == k).and_then(|i| w.get(i + 1));
            let rkey = u64::from_str_radix(after("rkey")?.trim_start_matches("0x"), 16).ok()?;
            Some((after("pid")?.to_string(), rkey))
        })
        .collect()
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn an_rkey_handed_out_for_one_test_is_gone_once_the_test_ends() {
    require_rxe0();
    // A persistent RDMA WRITE server hands each client the rkey of a buffer made for that test.
    // While the test runs the kernel lists that MR for the server's pid; once the test has
    // ended it is deregistered: the rkey a client learned then reaches nothing, and the device
    // refuses any WRITE that names it.
    let port = "18741";
    let mut server = spawn_rdmadiag(&["bw", "--op", "write", "--persist", "-p", port]);
    wait_listening(18741, LIMIT);
    let pid = server.id();
    assert!(
        live_rkeys(pid).is_empty(),
        "the idle server holds an MR already"
    );
    for round in 1..=2 {
        let client = spawn_rdmadiag(&[
            "bw", "--op", "write", HOST, "-p", port, "-s", "4K", "-D", "4s", "--json",
        ]);
        // Look while the test runs (it moves data for 4 s, after a set-up of about 1 s).
        let t = Instant::now();
        let mut during = Vec::new();
        while t.elapsed() < Duration::from_secs(4) && during.is_empty() {
            std::thread::sleep(Duration::from_millis(250));
            during = live_rkeys(pid);
        }
        let o = wait_limit(client, LIMIT, "bw write client");
        assert!(o.status.success(), "client {round}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).expect("client JSON");
        let rkey = v["remote"]["memory"]["rkey"]
            .as_u64()
            .unwrap_or_else(|| panic!("no remote.memory.rkey in the client's report: {v}"));
        assert!(
            during.contains(&rkey),
            "test {round}: the server's MRs during the test were {during:x?}, not the rkey \
             {rkey:#x} its client was given"
        );
        // The server ends its half of the test when the client has its results.
        let t = Instant::now();
        let mut after = live_rkeys(pid);
        while t.elapsed() < Duration::from_secs(10) && !after.is_empty() {
            std::thread::sleep(Duration::from_millis(250));
            after = live_rkeys(pid);
        }
        assert!(
            after.is_empty(),
            "test {round} ended but the server still holds MRs {after:x?} (rkey {rkey:#x})"
        );
        let anywhere: Vec<(String, u64)> =
            listed_mrs().into_iter().filter(|m| m.1 == rkey).collect();
        assert!(
            anywhere.is_empty(),
            "rkey {rkey:#x} is still registered after its test: {anywhere:?}"
        );
    }
    assert!(
        server.try_wait().unwrap().is_none(),
        "the persistent server exited"
    );
    server.kill().unwrap();
    let _ = server.wait();
}
