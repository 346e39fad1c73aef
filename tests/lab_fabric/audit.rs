//! The configuration audit on the 4-guest fabric (issue 35): fab3's netdev raised to MTU 9000
//! before the run, so rxe0's active MTU there follows it to 4096 (Soft-RoCE takes 80 bytes of
//! headers off the netdev MTU and keeps the largest IB MTU that fits: 1500 gives 1024) while
//! fab1, fab2 and fab4 stay at 1024. The audit must name exactly fab3 and the field active MTU,
//! and fail the run (exit 3); the link verdict of the same run must not make a suspect of fab3:
//! every pair's path MTU is the smaller end's, 1024, so its links carry what the others' do.

use super::*;

/// The guest whose netdev MTU the test raises.
const JUMBO_HOST: &str = "fab3";

/// Run `script` as root on `host` through Slurm (no job holds the nodes between tests).
fn on(host: &str, script: &str) -> String {
    let out = bounded(SLURM_DEADLINE, "srun")
        .args([
            "--quiet", "-N1", "-n1", "-w", host, "--time=1", "bash", "-euc",
        ])
        .arg(script)
        .stdin(Stdio::null())
        .output()
        .expect("run srun");
    assert!(
        out.status.success(),
        "on {host}: {script:?} failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `host`'s eth0 (rxe0's netdev) at `mtu` for the life of a test; back at 1500 when dropped,
/// even by a failing assertion. Set to 1500 first: a previous test may have died with it raised.
struct NetdevMtu {
    host: &'static str,
}

impl NetdevMtu {
    fn raise(host: &'static str, mtu: u32) -> NetdevMtu {
        on(host, "ip link set dev eth0 mtu 1500");
        on(host, &format!("ip link set dev eth0 mtu {mtu}"));
        NetdevMtu { host }
    }
}

impl Drop for NetdevMtu {
    fn drop(&mut self) {
        let _ = bounded(SLURM_DEADLINE, "srun")
            .args(["--quiet", "-N1", "-n1", "-w", self.host, "--time=1"])
            .args(["ip", "link", "set", "dev", "eth0", "mtu", "1500"])
            .stdin(Stdio::null())
            .status();
    }
}

/// rxe0 port 1's active MTU on `host`, as `rdmadiag ports --json` there says.
fn active_mtu(host: &str) -> Option<u64> {
    let json = on(
        host,
        &format!("{} ports -d rxe0 -p 1 --json", sh_quote(BIN)),
    );
    let v: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    v["ports"][0]["active_mtu"]["mtu"].as_u64()
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn k_a_host_at_another_mtu_is_named_by_the_config_audit_and_not_by_the_link_verdict() {
    require_fabric();
    let _clean = Impaired::none();
    let _jumbo = NetdevMtu::raise(JUMBO_HOST, 9000);
    assert_eq!(
        active_mtu(JUMBO_HOST),
        Some(4096),
        "{JUMBO_HOST}'s rxe0 should follow eth0's MTU 9000 to an active MTU of 4096"
    );
    assert_eq!(active_mtu("fab1"), Some(1024), "fab1's rxe0 at the default");
    let run = fabric(Launch::Slurm, &args(&[]), None);
    let v = run.report();
    let summary = pair_summary(&v);
    let r0 = run.rank0();
    assert_eq!(
        r0.rc,
        Some(3),
        "a host at another active MTU: rank 0 should exit 3\n{summary}config: {}\nstderr: {}",
        v["config"],
        r0.stderr
    );
    for (i, r) in run.ranks.iter().enumerate() {
        assert_eq!(r.rc, Some(3), "rank {i} exit: {}", r.stderr);
    }
    assert_hosts(&v);
    assert_all_six_pairs(&v);
    for h in v["hosts"].as_array().unwrap() {
        let want = if h["host"] == JUMBO_HOST { 4096 } else { 1024 };
        assert_eq!(
            h["config"]["active_mtu"], want,
            "what {} told of its port: {}",
            h["host"], h["config"]
        );
    }
    // Exactly one finding, on exactly that host and that field, and it fails.
    let config = v["config"]
        .as_array()
        .unwrap_or_else(|| panic!("no config array: {v}"));
    assert_eq!(
        config.len(),
        1,
        "one configuration finding: {}",
        v["config"]
    );
    let f = &config[0];
    assert_eq!(f["field"], "mtu", "{f}");
    assert_eq!(f["kind"], "differs", "{f}");
    assert_eq!(f["severity"], "failure", "{f}");
    assert_eq!(
        f["groups"],
        serde_json::json!([{"value": "4096", "hosts": [JUMBO_HOST]}]),
        "{f}"
    );
    assert_eq!(
        f["majority"],
        serde_json::json!({"value": "1024", "hosts": 3}),
        "{f}"
    );
    assert_eq!((&f["reporting"], &f["unreported"]), (&4.into(), &0.into()));
    assert!(
        r0.stderr.contains("config: active MTU differs on fab3"),
        "rank 0's exit line should name the audit's finding: {}",
        r0.stderr
    );
    // The link verdict: its pairs run at the path MTU of the smaller end, 1024, like the
    // others: no suspect host, link or group with fab3 in it.
    assert!(
        !suspect_hosts(&v).iter().any(|h| h == JUMBO_HOST),
        "the verdict made a suspect of {JUMBO_HOST}\n{summary}{v}"
    );
    assert!(
        !suspect_links(&v)
            .iter()
            .any(|(a, b)| a == JUMBO_HOST || b == JUMBO_HOST),
        "the verdict made a suspect of a link of {JUMBO_HOST}\n{summary}{v}"
    );
    let groups = v["suspects"]["groups"].as_array().unwrap();
    assert!(
        !groups
            .iter()
            .flat_map(|g| g.as_array().unwrap())
            .any(|h| h == JUMBO_HOST),
        "the verdict put {JUMBO_HOST} in a suspect group\n{summary}{v}"
    );
    assert_counters_are_information(&v);
}
