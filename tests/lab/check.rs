//! `rdmadiag check` on rxe0 with real components: the port's state when dummy0 goes down, the
//! error counters when the link is cut mid-traffic, loopback and peer tests, promtool and a real
//! node_exporter reading the Prometheus file, and a real slurmctld/slurmd draining this node.

use crate::common::*;
use crate::link::{LinkUp, endless_loopback_traffic, ip_link};
use crate::require_rxe0;
use crate::watch::wait_until_sleeping;
use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const PORT_DIR: &str = "/sys/class/infiniband/rxe0/ports/1";
/// Longest a check run may take here (TCG): its own --timeout is 30 s.
const CHECK_LIMIT: Duration = Duration::from_secs(60);

fn check(args: &[&str]) -> Output {
    check_env(args, &[])
}

fn check_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec!["check", "-d", crate::DEV];
    all.extend_from_slice(args);
    let mut c = Command::new(BIN);
    c.args(&all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    wait_limit(
        c.spawn().expect("spawn rdmadiag"),
        CHECK_LIMIT,
        "rdmadiag check",
    )
}

fn doc(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn named<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {v}"))
}

fn sysfs(name: &str) -> String {
    std::fs::read_to_string(Path::new(PORT_DIR).join(name))
        .unwrap_or_else(|e| panic!("{PORT_DIR}/{name}: {e}"))
        .trim()
        .to_string()
}

/// rxe0's hw_counters now.
fn hw_counters() -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(Path::new(PORT_DIR).join("hw_counters")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(v) = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            out.insert(name, v);
        }
    }
    out
}

/// The port's rate as sysfs says it ("2.5 Gb/sec (1X SDR)"), in check's words: "2.5 Gb/s".
fn sysfs_rate() -> (f64, String) {
    let rate = sysfs("rate");
    let gbps: f64 = rate.split_whitespace().next().unwrap().parse().unwrap();
    (gbps, format!("{gbps} Gb/s"))
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_healthy_port_passes_and_a_wrong_rate_fails_naming_the_actual() {
    require_rxe0();
    let netdev_mtu = std::fs::read_to_string("/sys/class/net/dummy0/mtu").unwrap();
    let (gbps, rate_words) = sysfs_rate();
    let o = check(&[
        "--expect-gid",
        "--expect-link-layer",
        "ethernet",
        "--expect-mtu",
        netdev_mtu.trim(),
        "--expect-rate",
        &format!("{gbps}Gb/s"),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let v = doc(&o);
    assert_eq!(v["passed"], true, "{v}");
    for name in ["state", "phys_state", "rate", "mtu", "link_layer", "gid"] {
        assert_eq!(named(&v, name)["ok"], true, "{name}: {v}");
    }
    let documented = documented_json_names();
    let mut keys = std::collections::BTreeSet::new();
    json_keys(&v, &mut keys);
    let missing: Vec<&String> = keys.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "undocumented in docs/json.md: {missing:?}"
    );

    let o = check(&["--expect-rate", "100"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let line = one_error_line(&o);
    assert!(line.contains(&format!("rate {rate_words}")), "{line}");
    assert!(line.contains("expected 100 Gb/s"), "{line}");
    let row = stdout(&o);
    let row = row
        .lines()
        .find(|l| l.contains(" rate "))
        .unwrap_or_default();
    assert!(row.contains(&rate_words) && row.ends_with("FAIL"), "{row}");
    eprintln!("check: --expect-rate 100 failed as it should: {line}");
}

#[test]
#[ignore = "lab: needs rxe0 and its dummy0 link; run by scripts/test inside the Soft-RoCE lab"]
fn dummy0_down_fails_the_state_check_and_up_passes_again() {
    require_rxe0();
    let restore = LinkUp;
    ip_link("down");
    let t = Instant::now();
    while sysfs("state").contains("ACTIVE") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "rxe0 stayed ACTIVE with dummy0 down"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = check(&["--format", "nhc"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let nhc = stdout(&o);
    let first = nhc.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("ERROR: rdmadiag: rxe0:1: state "),
        "{nhc}"
    );
    assert!(first.ends_with("expected ACTIVE"), "{nhc}");
    assert!(!first.contains("state ACTIVE"), "{nhc}");
    drop(restore);
    let o = check(&["--format", "nhc"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "after the link came back: {}",
        stdout(&o)
    );
    assert!(o.stdout.is_empty());
    eprintln!("check: dummy0 down: {first}; up again: passes");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn active_tests_name_their_figures_and_settings() {
    require_rxe0();
    // A floor rxe cannot reach under emulation (nor on any host: 2.5 Gb/s SDR 1X).
    let o = check(&[
        "--loopback-bw",
        "400Gb/s",
        "--loopback-lat",
        "10ns",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v = doc(&o);
    let bw = named(&v, "loopback_bw");
    assert_eq!(bw["ok"], false, "{bw}");
    let bytes_per_s = bw["value"].as_f64().expect("a measured figure");
    assert!(bytes_per_s > 0.0 && bytes_per_s * 8.0 < 400e9, "{bw}");
    let actual = bw["actual"].as_str().unwrap();
    assert!(
        actual.ends_with(" Gb/s") && !actual.contains("failed"),
        "{bw}"
    );
    assert!(bw["settings"].as_str().unwrap().contains("64 KiB"), "{bw}");
    let lat = named(&v, "loopback_lat");
    assert_eq!(lat["ok"], false, "{lat}");
    assert!(lat["value"].as_f64().unwrap() > 10e-9, "{lat}");
    let line = one_error_line(&o);
    assert!(line.contains(&format!("loopback_bw {actual}")), "{line}");

    // Floors it does reach pass, and the text says how the tests ran.
    let o = check(&["--loopback-bw", "1Mb/s", "--loopback-lat", "10s"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("loopback_bw: RDMA WRITE loopback, 64 KiB"),
        "{text}"
    );
    assert!(
        text.contains("loopback_lat: RDMA WRITE loopback, 2 B"),
        "{text}"
    );

    // Against a persistent server (here on the same port, through its IP).
    let port = 18600;
    let mut server = spawn_rdmadiag(&["bw", "--persist", "-p", &port.to_string()]);
    wait_listening(port, Duration::from_secs(20));
    let peer = format!("10.77.0.1:{port}");
    let o = check(&[
        "--peer",
        &peer,
        "--peer-bw",
        "1Mb/s",
        "--peer-lat",
        "10s",
        "--json",
    ]);
    let low = check(&["--peer", &peer, "--peer-bw", "400Gb/s"]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let v = doc(&o);
    let pbw = named(&v, "peer_bw");
    assert_eq!(pbw["peer"], peer.as_str());
    assert_eq!(
        pbw["target"], "rxe0:1",
        "the one -d target is the port tested"
    );
    assert!(named(&v, "peer_lat")["value"].as_f64().unwrap() > 0.0);
    assert_eq!(low.status.code(), Some(3), "{}", stderr(&low));
    eprintln!(
        "check: loopback {actual}, median {} s; peer {}",
        lat["value"], pbw["actual"]
    );
}

#[test]
#[ignore = "lab: needs rxe0 and its dummy0 link; run by scripts/test inside the Soft-RoCE lab"]
fn a_link_cut_mid_traffic_fails_the_error_counters_naming_the_one_that_rose() {
    require_rxe0();
    let restore = LinkUp;
    let (mut traffic, _rx) = endless_loopback_traffic();
    let before = hw_counters();
    let run = spawn_rdmadiag(&[
        "check",
        "-d",
        crate::DEV,
        "--max-error-delta",
        "0",
        "--interval",
        "3s",
        "--json",
    ]);
    // Cut the link once the check has taken its first reading and sleeps in its interval (a
    // fixed delay cut it before the first reading on a loaded CI host), and bring it back well
    // before the interval ends.
    wait_until_sleeping(run.id());
    std::thread::sleep(Duration::from_millis(200));
    ip_link("down");
    std::thread::sleep(Duration::from_millis(1000));
    ip_link("up");
    let o = wait_limit(run, CHECK_LIMIT, "check --interval 3s");
    let after = hw_counters();
    let _ = traffic.kill();
    let _ = traffic.wait();
    drop(restore);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    let v = doc(&o);
    let c = named(&v, "error_counters");
    assert_eq!(c["ok"], false, "{c}");
    let actual = c["actual"].as_str().unwrap();
    // Each "NAME +N" named rose by at least N between this test's own readings.
    let rose: Vec<(&str, u64)> = actual
        .split([':', ','])
        .filter_map(|part| {
            let (name, n) = part.trim().split_once(" +")?;
            Some((name.trim(), n.split_whitespace().next()?.parse().ok()?))
        })
        .collect();
    assert!(!rose.is_empty(), "no counter named: {actual}");
    for (name, n) in &rose {
        let delta = after[*name].saturating_sub(before[*name]);
        assert!(delta >= *n, "{name}: check says +{n}, sysfs +{delta}");
    }
    assert_eq!(
        c["value"].as_f64().unwrap() as u64,
        rose.iter().map(|(_, n)| n).sum::<u64>()
    );
    eprintln!("check: link cut mid-traffic: {actual}");
}

/// A TCP port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET /metrics from node_exporter over plain TCP.
fn scrape(port: u16) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect node_exporter");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).expect("read /metrics");
    body
}

#[test]
#[ignore = "lab: needs rxe0, promtool and prometheus-node-exporter; run by scripts/test in the lab"]
fn prometheus_output_passes_promtool_and_node_exporter_serves_it() {
    require_rxe0();
    let dir = PathBuf::from(format!("/run/rdmadiag-check-prom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rdmadiag.prom");
    let o = check(&[
        "--format",
        "prometheus",
        "--output",
        file.to_str().unwrap(),
        "--interval",
        "1s",
        "--loopback-bw",
        "1Mb/s",
        "--expect-rate",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(3), "the rate fails: {}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/setup installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let lint = wait_limit(promtool, Duration::from_secs(30), "promtool check metrics");
    assert!(
        lint.status.success(),
        "promtool: {}{}\n{text}",
        stdout(&lint),
        stderr(&lint)
    );

    let port = free_port();
    let exporter = Command::new("prometheus-node-exporter")
        .args([
            &format!("--collector.textfile.directory={}", dir.display()),
            &format!("--web.listen-address=127.0.0.1:{port}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus-node-exporter (scripts/setup installs it)");
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _exporter = Stop(exporter);
    wait_listening(port, Duration::from_secs(30));
    let metrics = scrape(port);
    let _ = std::fs::remove_dir_all(&dir);
    for want in [
        "rdmadiag_check_ok{check=\"state\",device=\"rxe0\",port=\"1\"} 1",
        "rdmadiag_check_ok{check=\"rate\",device=\"rxe0\",port=\"1\"} 0",
        "rdmadiag_check_ok{check=\"error_counters\",device=\"rxe0\",port=\"1\"} 1",
        "rdmadiag_check_passed 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == want),
            "{want} not scraped:\n{metrics}"
        );
    }
    let bw = metrics
        .lines()
        .find(|l| l.starts_with("rdmadiag_loopback_bandwidth_bytes_per_second{"))
        .unwrap_or_else(|| panic!("no loopback bandwidth scraped:\n{metrics}"));
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("node_textfile_scrape_error") && l.ends_with(" 0")),
        "the textfile collector had an error:\n{metrics}"
    );
    eprintln!("check: node_exporter on port {port} serves {bw}");
}

#[test]
#[ignore = "lab: needs rxe0, slurm-wlm and munge; run by scripts/test inside the Soft-RoCE lab"]
fn slurm_drain_against_a_real_slurmctld() {
    require_rxe0();
    let up = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/lab/slurm/slurm-up");
    let started = Command::new("bash").arg(up).output().expect("run slurm-up");
    assert!(
        started.status.success(),
        "slurm-up: {}{}",
        stdout(&started),
        stderr(&started)
    );
    let conf = stdout(&started)
        .lines()
        .find_map(|l| l.strip_prefix("SLURM_CONF=").map(String::from))
        .expect("slurm-up names its SLURM_CONF");
    let node = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let env = [
        ("SLURM_CONF", conf.as_str()),
        ("SLURMD_NODENAME", node.as_str()),
    ];
    let scontrol = |args: &[&str]| {
        let o = Command::new("scontrol")
            .args(args)
            .env("SLURM_CONF", &conf)
            .output()
            .unwrap();
        assert!(o.status.success(), "scontrol {args:?}: {}", stderr(&o));
    };
    // The node's State= and Reason= (without Slurm's "[user@time]").
    let show = || {
        let o = Command::new("scontrol")
            .args(["show", "node", &node])
            .env("SLURM_CONF", &conf)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stdout(&o);
        let state = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("State="))
            .unwrap()
            .to_string();
        let reason = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Reason="))
            .map(|r| r.rsplit_once(" [").map_or(r, |(r, _)| r).to_string())
            .unwrap_or_default();
        (state, reason)
    };
    let (state, _) = show();
    assert!(!state.contains("DRAIN"), "{state}");

    // A failing check drains the node with the rdmadiag reason.
    let o = check_env(&["--slurm-drain", "--expect-rate", "100"], &env);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    let (state, reason) = show();
    assert!(state.contains("DRAIN"), "{state}");
    assert!(reason.starts_with("rdmadiag: rxe0:1: rate "), "{reason}");

    // A passing one resumes it.
    let o = check_env(&["--slurm-drain", "--json"], &env);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(doc(&o)["slurm"]["action"], "resume");
    let (state, reason) = show();
    assert!(
        !state.contains("DRAIN") && reason.is_empty(),
        "{state} {reason}"
    );

    // Drained by hand with another reason: neither a pass nor a failure touches it.
    scontrol(&[
        "update",
        &format!("NodeName={node}"),
        "State=DRAIN",
        "Reason=bad DIMM",
    ]);
    for args in [
        &["--slurm-drain"][..],
        &["--slurm-drain", "--expect-rate", "100"][..],
    ] {
        let o = check_env(args, &env);
        assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
        let (state, reason) = show();
        assert!(state.contains("DRAIN"), "{args:?}: {state}");
        assert_eq!(reason, "bad DIMM", "{args:?}");
    }
    scontrol(&["update", &format!("NodeName={node}"), "State=RESUME"]);
    eprintln!("check: slurm node {node}: drained, resumed, and an operator's drain left alone");
}
