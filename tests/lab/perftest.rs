//! Lab tests of perftest's wire: `rdmadiag bw --compat perftest` against the guest's real
//! perftest servers (Debian's perftest, internal version 6.06).

use crate::common::*;
use crate::require_rxe0;
use serde_json::Value;
use std::time::Duration;

pub(crate) const LIMIT: Duration = Duration::from_secs(90);
pub(crate) const HOST: &str = "10.77.0.1";

/// perftest's result line for `size`: (iterations, peak, average) in its MB/s.
pub(crate) fn perftest_line(out: &str, size: u64) -> Option<(u64, f64, f64)> {
    out.lines().find_map(|l| {
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() < 5 || t[0].parse::<u64>().ok()? != size {
            return None;
        }
        Some((t[1].parse().ok()?, t[2].parse().ok()?, t[3].parse().ok()?))
    })
}

/// The rdmadiag subcommand that stands in for a perftest tool: lat for ib_*_lat, else bw.
fn subcommand_for(tool: &str) -> &'static str {
    if tool.ends_with("_lat") { "lat" } else { "bw" }
}

/// Run `server` (an ib_*_bw or ib_*_lat with its arguments) and our client (bw or lat to
/// match) against it; both must succeed.
pub(crate) fn against(
    server: &str,
    server_args: &[&str],
    port: &str,
    client: &[&str],
) -> (Value, String) {
    let mut args = vec!["-d", crate::DEV, "-p", port];
    args.extend_from_slice(server_args);
    let srv = spawn_cmd(server, &args);
    wait_listening(port.parse().unwrap(), LIMIT);
    let mut ours = vec![
        subcommand_for(server),
        HOST,
        "-p",
        port,
        "--compat",
        "perftest",
        "--json",
    ];
    ours.extend_from_slice(client);
    let c = wait_limit(spawn_rdmadiag(&ours), LIMIT, "rdmadiag client");
    let s = wait_limit(srv, LIMIT, server);
    assert!(
        c.status.success(),
        "rdmadiag: {}\n{server}: {}{}",
        stderr(&c),
        stdout(&s),
        stderr(&s)
    );
    assert!(s.status.success(), "{server}: {}{}", stdout(&s), stderr(&s));
    (serde_json::from_slice(&c.stdout).unwrap(), stdout(&s))
}

/// Our figures and what the perftest server printed of them (it prints the client's report):
/// the same size and iterations, the same average within print rounding.
pub(crate) fn agree(v: &Value, server_out: &str, size: u64, iters: u64) {
    assert_eq!(v["compat"], "perftest 6.06", "{v}");
    let b = &v["bw"][0];
    assert_eq!(b["size"], size, "{v}");
    assert_eq!(b["iterations"], iters, "{v}");
    let ours = b["bw_avg_gbps"].as_f64().unwrap() * 1e9 / 8.0 / 1048576.0;
    assert!(ours > 0.0, "{v}");
    let (n, _, theirs) = perftest_line(server_out, size)
        .unwrap_or_else(|| panic!("no result line for {size} in:\n{server_out}"));
    assert_eq!(n, iters, "{server_out}");
    let ratio = theirs / ours;
    eprintln!("perftest printed {theirs:.2} MB/s, rdmadiag {ours:.2}: ratio {ratio:.4}");
    // perftest prints MB/s to 2 decimals: within 1 %, or within its rounding.
    assert!(
        (theirs - ours).abs() <= (0.01 * ours).max(0.0051),
        "{theirs} vs {ours}\n{server_out}"
    );
    // The message rate, which perftest prints to 6 decimals (what small atomics are about).
    let theirs = server_out
        .lines()
        .find_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            (t.len() >= 5 && t[0].parse::<u64>().ok()? == size).then(|| t[4].parse::<f64>().ok())?
        })
        .unwrap_or_else(|| panic!("no message rate for {size} in:\n{server_out}"));
    let ours = b["msg_rate_mpps"].as_f64().unwrap();
    eprintln!("message rate: perftest {theirs:.6} Mpps, rdmadiag {ours:.6}");
    assert!(
        (theirs - ours).abs() <= (0.01 * ours).max(0.000_001_1),
        "{theirs} vs {ours} Mpps\n{server_out}"
    );
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn bw_client_against_ib_write_bw_and_ib_read_bw() {
    require_rxe0();
    // WRITE over two QPs (the per-QP key rounds), then READ.
    let (v, out) = against(
        "ib_write_bw",
        &["-s", "65536", "-q", "2"],
        "18721",
        &["--op", "write", "-s", "64K", "-q", "2", "-n", "100"],
    );
    agree(&v, &out, 65536, 200);
    assert_eq!(v["qps"], 2);
    let (v, out) = against(
        "ib_read_bw",
        &["-s", "65536"],
        "18722",
        &["--op", "read", "-s", "64K", "-n", "100"],
    );
    agree(&v, &out, 65536, 100);
    assert!(
        v["outstanding_reads"].as_u64().is_some_and(|o| o >= 1),
        "{v}"
    );
    // 64 KiB is past half the cycle buffer (a page): one address, as perftest's client.
    assert!(v["bw"][0]["address_steps"].is_null(), "{v}");
    // A small WRITE steps through the server's cycle buffer a cache line at a time.
    let (v, out) = against(
        "ib_write_bw",
        &["-s", "64"],
        "18729",
        &["--op", "write", "-s", "64", "-n", "1000", "-l", "1"],
    );
    agree(&v, &out, 64, 1000);
    assert_stepped(&v, 64);
}

/// The run's first bw entry stepped its addresses by `size` rounded up to a cache line,
/// through a cycle buffer (a page: at least 4 KiB) of more than one position.
pub(crate) fn assert_stepped(v: &Value, size: u64) {
    let steps = &v["bw"][0]["address_steps"];
    let stride = steps["stride_bytes"].as_u64().unwrap_or(0);
    let positions = steps["positions"].as_u64().unwrap_or(0);
    assert!(stride >= size && stride.is_multiple_of(64), "{v}");
    assert!(positions >= 2 && stride * positions >= 4096, "{v}");
    let settings = format!("{} B x {}", stride, positions);
    eprintln!("addresses stepped: {settings}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_size_past_the_perftest_servers_is_named() {
    require_rxe0();
    let srv = spawn_cmd(
        "ib_write_bw",
        &["-d", crate::DEV, "-p", "18723", "-s", "4096"],
    );
    wait_listening(18723, LIMIT);
    let c = wait_limit(
        spawn_rdmadiag(&[
            "bw", HOST, "-p", "18723", "--compat", "perftest", "-s", "64K", "-n", "20",
        ]),
        LIMIT,
        "rdmadiag client",
    );
    let s = wait_limit(srv, LIMIT, "ib_write_bw");
    assert_eq!(c.status.code(), Some(1), "{}", stderr(&c));
    let line = one_error_line(&c);
    assert!(line.contains("-s 65536"), "{line}");
    assert!(
        !s.status.success(),
        "ib_write_bw cannot have passed: {}",
        stdout(&s)
    );
}

/// Run a perftest client against an rdmadiag server started with `server`; both must succeed.
/// Returns the server's JSON and the client's output.
pub(crate) fn serving(
    server: &[&str],
    port: &str,
    client: &str,
    client_args: &[&str],
) -> (Value, String) {
    let mut ours = vec![subcommand_for(client), "-p", port, "--json"];
    ours.extend_from_slice(server);
    let srv = spawn_rdmadiag(&ours);
    wait_listening(port.parse().unwrap(), LIMIT);
    let mut args = vec!["-d", crate::DEV, "-p", port];
    args.extend_from_slice(client_args);
    args.push(HOST);
    let c = wait_limit(spawn_cmd(client, &args), LIMIT, client);
    let s = wait_limit(srv, LIMIT, "rdmadiag server");
    assert!(
        s.status.success(),
        "rdmadiag: {}\n{client}: {}{}",
        stderr(&s),
        stdout(&c),
        stderr(&c)
    );
    assert!(c.status.success(), "{client}: {}{}", stdout(&c), stderr(&c));
    (serde_json::from_slice(&s.stdout).unwrap(), stdout(&c))
}

/// perftest clients against one rdmadiag bw server at its defaults (RC WRITE, 64 KiB), then
/// READ and two QPs: the server prints the client's figures, as perftest's server does.
#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn perftest_clients_against_an_rdmadiag_bw_server() {
    require_rxe0();
    let (v, out) = serving(&[], "18724", "ib_write_bw", &["-n", "200"]);
    agree(&v, &out, 65536, 200);
    let (v, out) = serving(
        &["--op", "read", "-s", "4K"],
        "18725",
        "ib_read_bw",
        &["-s", "4096", "-n", "100"],
    );
    agree(&v, &out, 4096, 100);
    let (v, out) = serving(
        &["-q", "2"],
        "18726",
        "ib_write_bw",
        &["-q", "2", "-n", "100"],
    );
    assert_eq!(v["qps"], 2, "{v}");
    let n = perftest_line(&out, 65536).expect("a result line").0;
    agree(&v, &out, 65536, n);
}

/// What the server's flags do not match is one line naming the flag; the server never hangs.
#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_perftest_client_unlike_the_servers_flags_is_named() {
    require_rxe0();
    for (server, client, client_args, words) in [
        (&["bw"][..], "ib_read_bw", &["-n", "20"][..], "--op write"),
        (&["bw"], "ib_write_bw", &["-q", "2", "-n", "20"], "-q 1"),
        (
            &["lat", "--op", "send", "-c", "UC"],
            "ib_send_lat",
            &["-n", "20"],
            "UC SEND",
        ),
    ] {
        let mut ours = server.to_vec();
        ours.extend_from_slice(&["-p", "18727"]);
        let srv = spawn_rdmadiag(&ours);
        wait_listening(18727, LIMIT);
        let mut args = vec!["-d", crate::DEV, "-p", "18727"];
        args.extend_from_slice(client_args);
        args.push(HOST);
        let c = wait_limit(spawn_cmd(client, &args), LIMIT, client);
        let s = wait_limit(srv, LIMIT, "rdmadiag server");
        assert!(!c.status.success(), "{client}: {}", stdout(&c));
        assert_eq!(s.status.code(), Some(1), "{client}: {}", stderr(&s));
        let line = one_error_line(&s);
        eprintln!("{client} against rdmadiag {server:?}: {line}");
        assert!(line.contains(words), "{client}: {line}");
    }
}

/// A server with a key serves no perftest client (perftest cannot prove a key): it says so in
/// its log, goes on waiting for a client that can, and still serves one.
#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_keyed_server_refuses_perftest_clients_and_serves_its_own() {
    use std::os::unix::fs::PermissionsExt as _;
    require_rxe0();
    let key = std::env::temp_dir().join(format!("rdmadiag-pt-key.{}", std::process::id()));
    std::fs::write(&key, "3f1c9a7e5b2d4068a1e3c5f7092b4d6e\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let key = key.to_str().unwrap();
    let srv = spawn_rdmadiag(&["bw", "-p", "18728", "--key-file", key, "-v"]);
    wait_listening(18728, LIMIT);
    let c = wait_limit(
        spawn_cmd(
            "ib_write_bw",
            &["-d", crate::DEV, "-p", "18728", "-n", "20", HOST],
        ),
        LIMIT,
        "ib_write_bw",
    );
    assert!(
        !c.status.success(),
        "ib_write_bw was served: {}",
        stdout(&c)
    );
    let ours = wait_limit(
        spawn_rdmadiag(&[
            "bw",
            HOST,
            "-p",
            "18728",
            "--key-file",
            key,
            "-n",
            "20",
            "--json",
        ]),
        LIMIT,
        "rdmadiag client with the key",
    );
    let s = wait_limit(srv, LIMIT, "rdmadiag server");
    assert!(
        ours.status.success(),
        "{}\nserver: {}",
        stderr(&ours),
        stderr(&s)
    );
    assert!(s.status.success(), "{}", stderr(&s));
    let log = stderr(&s);
    assert!(
        log.contains("a perftest client, which cannot prove"),
        "{log}"
    );
}

/// perftest's latency line for `size`: (iterations, t_typical), its median in µs.
fn perftest_lat_line(out: &str, size: u64) -> Option<(u64, f64)> {
    out.lines().find_map(|l| {
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() < 7 || t[0].parse::<u64>().ok()? != size {
            return None;
        }
        Some((t[1].parse().ok()?, t[4].parse().ok()?))
    })
}

/// Our median and perftest's t_typical, after checking what both say they ran.
fn lat_medians(v: &Value, out: &str, size: u64, iters: u64) -> (f64, f64) {
    assert_eq!(v["compat"], "perftest 6.06", "{v}");
    let l = &v["lat"][0];
    assert_eq!(l["size"], size, "{v}");
    assert_eq!(l["iterations"], iters, "{v}");
    let ours = l["median_us"].as_f64().unwrap();
    assert!(
        ours.is_finite() && ours > 0.0,
        "rdmadiag's median is {ours}: {v}"
    );
    let (n, theirs) =
        perftest_lat_line(out, size).unwrap_or_else(|| panic!("no latency line in:\n{out}"));
    assert_eq!(n, iters, "{out}");
    (ours, theirs)
}

/// Run one latency pairing (`run` takes the TCP port) and check our median beside perftest's
/// t_typical: both time the same ping-pong, from each end. perftest turns cycles into
/// microseconds by a CPU rate it measures at start; under TCG that rate once came out 0 and
/// every figure of its line read `inf` (rdmadiag's own was as usual). A pairing whose perftest
/// figure is not finite runs once more on `ports.1`, and fails naming perftest's clock if it is
/// not finite again.
pub(crate) fn lat_pairing(
    ports: (&str, &str),
    size: u64,
    iters: u64,
    run: impl Fn(&str) -> (Value, String),
) -> Value {
    let mut last = String::new();
    for port in [ports.0, ports.1] {
        let (v, out) = run(port);
        let (ours, theirs) = lat_medians(&v, &out, size, iters);
        if theirs.is_finite() {
            let ratio = ours / theirs;
            eprintln!("median: rdmadiag {ours:.2} us, perftest {theirs:.2} us: ratio {ratio:.2}");
            // The guest's noise is wide.
            assert!((0.5..2.0).contains(&ratio), "{ours} vs {theirs}\n{out}");
            return v;
        }
        eprintln!("perftest's median read {theirs} (its cycles-to-time rate) on port {port}");
        last = out;
    }
    panic!(
        "perftest printed a median that is not finite in two runs: its clock (the CPU rate it \
         turns cycles into microseconds by) is not usable in this guest\n{last}"
    )
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn lat_against_ib_write_lat_and_ib_read_lat_both_roles() {
    require_rxe0();
    // rdmadiag client, perftest servers.
    lat_pairing(("18731", "18742"), 2, 200, |port| {
        against(
            "ib_write_lat",
            &["-s", "2", "-n", "200"],
            port,
            &["-s", "2", "-n", "200"],
        )
    });
    let (v, _) = against(
        "ib_read_lat",
        &["-s", "64", "-n", "100"],
        "18732",
        &["--op", "read", "-s", "64", "-n", "100"],
    );
    assert_eq!(v["lat"][0]["iterations"], 100, "{v}");
    assert_eq!(v["compat"], "perftest 6.06", "{v}");

    // perftest clients, rdmadiag servers (no --compat: told apart by the first bytes).
    lat_pairing(("18733", "18743"), 2, 200, |port| {
        serving(
            &["-s", "2", "-n", "200"],
            port,
            "ib_write_lat",
            &["-s", "2", "-n", "200"],
        )
    });

    // A READ latency server measures nothing and prints nothing (perftest's neither).
    let srv = spawn_rdmadiag(&[
        "lat", "-p", "18734", "--op", "read", "-s", "64", "-n", "100",
    ]);
    wait_listening(18734, LIMIT);
    let c = wait_limit(
        spawn_cmd(
            "ib_read_lat",
            &[
                "-d",
                crate::DEV,
                "-p",
                "18734",
                "-s",
                "64",
                "-n",
                "100",
                HOST,
            ],
        ),
        LIMIT,
        "ib_read_lat client",
    );
    let s = wait_limit(srv, LIMIT, "rdmadiag lat server");
    assert!(s.status.success(), "{}\n{}", stderr(&s), stdout(&c));
    assert!(c.status.success(), "{}{}", stdout(&c), stderr(&c));
    assert!(
        perftest_lat_line(&stdout(&c), 64).is_some(),
        "{}",
        stdout(&c)
    );
    assert!(
        stdout(&s).is_empty(),
        "a READ server measures nothing: {}",
        stdout(&s)
    );

    // Iterations that differ: perftest would wait forever; this side names both settings.
    let srv = spawn_rdmadiag(&[
        "lat",
        "-p",
        "18735",
        "-s",
        "2",
        "-n",
        "300",
        "--timeout",
        "3s",
    ]);
    wait_listening(18735, LIMIT);
    let c = wait_limit(
        spawn_cmd(
            "ib_write_lat",
            &[
                "-d",
                crate::DEV,
                "-p",
                "18735",
                "-s",
                "2",
                "-n",
                "200",
                HOST,
            ],
        ),
        LIMIT,
        "ib_write_lat client",
    );
    let s = wait_limit(srv, LIMIT, "rdmadiag lat server");
    assert!(c.status.success(), "{}{}", stdout(&c), stderr(&c));
    assert_eq!(s.status.code(), Some(1), "{}", stderr(&s));
    let line = one_error_line(&s);
    eprintln!("ib_write_lat -n 200 against rdmadiag lat -n 300: {line}");
    assert!(
        line.contains("-n") && line.contains("iteration 201"),
        "{line}"
    );
}

/// ib_send_bw both ways: each side prints what it measured (no reports are swapped), the
/// sender's and the receiver's average agree within the guest's noise.
#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn send_bw_against_ib_send_bw_both_roles() {
    require_rxe0();
    let compare = |v: &Value, out: &str, who: &str| {
        assert_eq!(v["compat"], "perftest 6.06", "{v}");
        let b = &v["bw"][0];
        assert_eq!(b["size"], 65536, "{v}");
        assert_eq!(b["iterations"], 200, "{v}");
        let ours = b["bw_avg_gbps"].as_f64().unwrap() * 1e9 / 8.0 / 1048576.0;
        let (n, _, theirs) =
            perftest_line(out, 65536).unwrap_or_else(|| panic!("no result line in:\n{out}"));
        assert_eq!(n, 200, "{out}");
        let ratio = ours / theirs;
        eprintln!("{who}: rdmadiag {ours:.2} MB/s, perftest {theirs:.2} MB/s: ratio {ratio:.3}");
        assert!((0.5..2.0).contains(&ratio), "{ours} vs {theirs}\n{out}");
    };
    let (v, out) = against(
        "ib_send_bw",
        &["-s", "65536", "-n", "200"],
        "18736",
        &["--op", "send", "-s", "64K", "-n", "200"],
    );
    compare(&v, &out, "rdmadiag sends, ib_send_bw receives");
    let (v, out) = serving(
        &["--op", "send", "-n", "200"],
        "18737",
        "ib_send_bw",
        &["-n", "200"],
    );
    compare(&v, &out, "ib_send_bw sends, rdmadiag receives");
}
