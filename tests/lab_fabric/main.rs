//! Fabric lab tests: `rdmadiag fabric` across the 4 guests of `scripts/lab --hosts 4` (real Slurm).
//!
//! Each test is `#[ignore = "lab-fabric: ..."]` on the host and fails loudly (never skips) outside
//! fab1 of a 4-guest lab. scripts/test builds this binary on the host and runs it with `--ignored
//! --test-threads=1` in ONE 4-guest lab. Every rank runs through a small shell wrapper that keeps
//! its exit status, stdout and stderr in a directory all guests see (the lab's guests share this
//! machine's /tmp), so rank 0's report and every rank's status can be checked separately.
//! Every run is `rdmadiag fabric --json` at its defaults (64 KiB bandwidth, 2-byte latency, the
//! verdict's default ratios and counter rule): what a new user runs. Impairments
//! (scripts/lib/lab-impair) are 10 Mb/s: a fifth of what an unimpaired pair moves here on a
//! quiet machine (0.046-0.096 Gb/s a direction under TCG) and still a third or less while a busy
//! loop holds one of the machine's two cores (the healthy pairs then fall to 0.03-0.05 Gb/s,
//! while a 30 Mb/s impairment, 0.03 Gb/s, no longer stands out: 0.55-0.67 x, measured). The
//! verdict judges single directions, and the lab's own noise puts a healthy direction as low as
//! 0.52 x its run's median (tests/data/fabric-lab-noise.json), so a fault must be below that to
//! be a fault the lab can prove every time: a degraded host or link at the gross floor. The
//! tests assert classifications, never figures.
//!
//! Measured in this lab: rxe0 under TCG retransmits in every pair, impaired or not
//! (completer_retry_err and duplicate_request +1..+13 a pair: 4 single-vCPU guests on 2 host
//! cores miss the QPs' ACK timeout now and then). The verdict must report that once, as
//! fabric-wide information, not as suspects.

mod audit;
mod hostile;
mod tclass;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rdmadiag");
const HOSTS: [&str; 4] = ["fab1", "fab2", "fab3", "fab4"];
/// The impairments' rate (a tc rate): a fifth of an unimpaired pair's bandwidth, a third under load.
const SLOW: &str = "10mbit";
/// The one-way impairments' rate: about a sixth of an unimpaired direction, well below the noise.
const SLOW_ONE_WAY: &str = "10mbit";
/// The most a whole `srun` of the fabric may take before the test calls it a hang.
const RUN_DEADLINE: Duration = Duration::from_secs(240);

/// Fail loudly unless this is fab1 of a 4-guest lab with Slurm's 4 nodes up.
fn require_fabric() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_eq!(
        host.trim(),
        "fab1",
        "not fab1 of a fabric lab: this test must run inside `scripts/lab --hosts 4` (scripts/test does that)"
    );
    assert!(
        Path::new("/sys/class/infiniband/rxe0").exists(),
        "no rxe0 on fab1: this test must run inside `scripts/lab --hosts 4`"
    );
    let out = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%N %T"])
        .output()
        .expect("run sinfo: Slurm must be on PATH inside `scripts/lab --hosts 4`");
    let text = String::from_utf8_lossy(&out.stdout);
    let idle: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, state)| state.trim() == "idle")
        .map(|(n, _)| n)
        .collect();
    let want: BTreeSet<&str> = HOSTS.into_iter().collect();
    assert_eq!(
        idle, want,
        "Slurm's idle nodes are not fab1..fab4 (sinfo: {text:?}): this test needs `scripts/lab --hosts 4`"
    );
}

/// How long a command that reaches other guests through Slurm (`srun -w`, lab-impair) may take:
/// srun waits as long as Slurm cannot reach a node (a guest whose NIC stalled), and neither a test
/// nor its cleanup may hang on that.
const SLURM_DEADLINE: &str = "90";

/// `timeout -k 5 SECS PROGRAM`: PROGRAM ended after SECS seconds (exit 124), killed 5 s later.
fn bounded(secs: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", secs]).arg(program);
    cmd
}

/// scripts/lib/lab-impair ARGS, bounded by [`SLURM_DEADLINE`].
fn impair_command(args: &[&str]) -> Command {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/lib/lab-impair");
    let mut cmd = bounded(SLURM_DEADLINE, tool);
    cmd.args(args);
    cmd
}

/// scripts/lib/lab-impair, run on fab1.
fn impair(args: &[&str]) {
    let out = impair_command(args)
        .output()
        .unwrap_or_else(|e| panic!("run lab-impair {args:?}: {e}"));
    assert!(
        out.status.success(),
        "lab-impair {args:?} failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An impairment for the life of a test: cleared when made (a previous test may have died with
/// one in place) and, when one was set, when dropped, even by a failing assertion.
struct Impaired {
    set: bool,
}

impl Impaired {
    fn new(args: &[&str]) -> Impaired {
        impair(&["clear"]);
        impair(args);
        Impaired { set: true }
    }
    fn none() -> Impaired {
        impair(&["clear"]);
        Impaired { set: false }
    }
}

impl Drop for Impaired {
    fn drop(&mut self) {
        if self.set {
            let _ = impair_command(&["clear"]).status();
        }
    }
}

/// One rank's outcome, as its wrapper recorded it.
#[derive(Debug)]
struct Rank {
    /// Exit status of rdmadiag (128 + signal when killed); None when the wrapper never wrote one.
    rc: Option<i32>,
    stdout: String,
    stderr: String,
}

/// One `srun` of the fabric.
struct FabricRun {
    ranks: Vec<Rank>,
    elapsed: Duration,
    /// Whether the killer of the wrapper's `kill_rank` fired (the rank was still running).
    killed: bool,
    dir: PathBuf,
}

impl FabricRun {
    fn rank0(&self) -> &Rank {
        &self.ranks[0]
    }
    /// Rank 0's `--json` document.
    fn report(&self) -> Value {
        let r = self.rank0();
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
            panic!(
                "rank 0 printed no JSON document ({e}); exit {:?}\nstdout: {}\nstderr: {}\n{}",
                r.rc,
                r.stdout,
                r.stderr,
                self.others()
            )
        })
    }
    /// What the other ranks said, for failure messages.
    fn others(&self) -> String {
        let mut s = String::new();
        for (i, r) in self.ranks.iter().enumerate().skip(1) {
            s += &format!(
                "rank {i}: exit {:?}, stderr: {}\n",
                r.rc,
                r.stderr.trim_end()
            );
        }
        s
    }
}

impl Drop for FabricRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Quote for a POSIX shell.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// How the ranks are started.
#[derive(Clone, Copy)]
enum Launch {
    /// Plain `srun`: ranks from SLURM_*.
    Slurm,
    /// `srun` only as a way to start a process on each guest: every SLURM_*/PMI*/OMPI_* variable is
    /// removed before rdmadiag starts, so it must find its rank from `--hosts` and its hostname.
    NoLauncherEnv,
    /// Plain `srun`, this rank starting 10 s after the others (the rendezvous stays open).
    SlurmLate(u32),
    /// The same, 25 s after (run with a --timeout above that): room for an intruder's six
    /// attempts when the lab stalls (one took 3.6 s once, and the rendezvous closed after one).
    SlurmVeryLate(u32),
}

/// The key of the runs without a launcher (under srun the ranks use munge).
const KEY: &str = "lab-fabric-key-0123456789abcdef";

/// Run `rdmadiag fabric ARGS --json` on fab1..fab4 (one task each) and collect every rank.
/// `kill_rank`: that rank is killed with SIGKILL once it holds a QP of its own (a pair test has
/// started) and one more second has passed.
fn fabric(launch: Launch, args: &[&str], kill_rank: Option<u32>) -> FabricRun {
    let dir = std::env::temp_dir().join(format!(
        "rdmadiag-lab-fabric.{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).expect("make the ranks' output directory");
    let mut cmd_line = sh_quote(BIN) + " fabric";
    for a in args.iter().chain(["--json"].iter()) {
        cmd_line += " ";
        cmd_line += &sh_quote(a);
    }
    let unset = match launch {
        Launch::Slurm => String::new(),
        Launch::SlurmLate(r) => format!("[ \"$r\" = {r} ] && sleep 10\n"),
        Launch::SlurmVeryLate(r) => format!("[ \"$r\" = {r} ] && sleep 25\n"),
        Launch::NoLauncherEnv => format!(
            "for v in $(compgen -e); do case $v in SLURM_*|SRUN_*|PMI_*|PMIX_*|OMPI_*) unset \"$v\";; esac; done\n\
             export RDMADIAG_FABRIC_KEY={KEY}\n"
        ),
    };
    let killer = match kill_rank {
        None => String::new(),
        Some(k) => format!(
            "if [ \"$r\" = {k} ]; then\n\
             ( for i in $(seq 1 1200); do rdma resource show qp 2>/dev/null | grep -q rdmadiag && break; sleep 0.1; done\n\
               sleep 1; kill -KILL $pid 2>/dev/null && echo killed >\"$d/killed\" ) &\n\
             fi\n"
        ),
    };
    // Each task: remember the rank, optionally drop the launcher's variables, run rdmadiag in the
    // background (so a killer can find its pid), record its status.
    let script = format!(
        "r=$SLURM_PROCID; d={dir}\n{unset}{cmd_line} >\"$d/out.$r\" 2>\"$d/err.$r\" &\npid=$!\n{killer}wait $pid; echo $? >\"$d/rc.$r\"\nwait\n",
        dir = sh_quote(&dir.to_string_lossy()),
    );
    let start = Instant::now();
    let mut child = Command::new("srun")
        .args([
            "-N4",
            "-n4",
            "--ntasks-per-node=1",
            "--kill-on-bad-exit=0",
            "bash",
            "-c",
            &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start srun");
    loop {
        if child.try_wait().expect("wait for srun").is_some() {
            break;
        }
        if start.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let _ = bounded("30", "scancel").arg("--user=root").status();
            panic!(
                "the fabric run hung: srun still running after {RUN_DEADLINE:?} (args {args:?}); outputs in {}",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().expect("srun output");
    let elapsed = start.elapsed();
    let read = |name: String| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let ranks: Vec<Rank> = (0..4)
        .map(|r| Rank {
            rc: read(format!("rc.{r}")).trim().parse().ok(),
            stdout: read(format!("out.{r}")),
            stderr: read(format!("err.{r}")),
        })
        .collect();
    let killed = dir.join("killed").exists();
    eprintln!(
        "fabric {args:?}: {:.1} s, exits {:?}",
        elapsed.as_secs_f64(),
        ranks.iter().map(|r| r.rc).collect::<Vec<_>>()
    );
    assert!(
        out.status.success(),
        "srun itself failed ({:?}): {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    FabricRun {
        ranks,
        elapsed,
        killed,
        dir,
    }
}

/// The arguments: the defaults plus `extra` (launch and wait bounds only, never the verdict's).
fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    extra.to_vec()
}

fn suspect_groups(v: &Value) -> usize {
    v["suspects"]["groups"]
        .as_array()
        .unwrap_or_else(|| panic!("no suspects.groups array: {v}"))
        .len()
}

/// The rules of each suspect note (its first, then all), by its name.
fn note_rules(v: &Value) -> Vec<(String, String)> {
    // Every rule that charged a suspect, not only its first (`rule`): a slow link whose drops
    // also raised its counters is charged by `counters` first and `bw-link` too.
    v["suspect_notes"]
        .as_array()
        .unwrap_or_else(|| panic!("no suspect_notes array: {v}"))
        .iter()
        .flat_map(|n| {
            let name = n["name"].as_str().unwrap_or("?").to_string();
            let first = std::iter::once(n["rule"].as_str().unwrap_or("?"));
            let all = n["rules"].as_array().into_iter().flatten();
            first
                .chain(all.filter_map(|r| r.as_str()))
                .map(move |r| (name.clone(), r.to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// No finding fails the run, and every counter that rose on half the scheduled pairs or more is
/// named in a fabric-wide information finding (rxe's retransmits), not in a suspect.
fn assert_counters_are_information(v: &Value) {
    let findings = v["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings array: {v}"));
    assert!(
        findings.iter().all(|f| f["fails"] == Value::Bool(false)),
        "a failing fabric-wide finding: {findings:?}"
    );
    let pairs = first_results(v);
    let mut rose: std::collections::BTreeMap<String, usize> = Default::default();
    for p in &pairs {
        let mut names = BTreeSet::new();
        if let Some(hosts) = p["counters"].as_object() {
            for c in hosts.values().filter_map(Value::as_object) {
                names.extend(c.keys().cloned());
            }
        }
        for n in names {
            *rose.entry(n).or_default() += 1;
        }
    }
    for (name, n) in rose.iter().filter(|(_, n)| 2 * **n >= pairs.len()) {
        assert!(
            findings.iter().any(|f| f["rule"] == "counters"
                && f["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(name.as_str()))),
            "{name} rose on {n} of {} pairs but no counters finding names it: {findings:?}",
            pairs.len()
        );
    }
}

/// The unordered pair {a, b} of a JSON pair or link.
fn unordered(a: &Value, b: &Value) -> (String, String) {
    let (a, b) = (
        a.as_str().expect("host name").to_string(),
        b.as_str().expect("host name").to_string(),
    );
    if a <= b { (a, b) } else { (b, a) }
}

fn pair_key(p: &Value) -> (String, String) {
    unordered(&p["a"], &p["b"])
}

fn suspect_hosts(v: &Value) -> Vec<String> {
    let mut h: Vec<String> = v["suspects"]["hosts"]
        .as_array()
        .unwrap_or_else(|| panic!("no suspects.hosts array: {v}"))
        .iter()
        .map(|h| h.as_str().expect("suspect host name").to_string())
        .collect();
    h.sort();
    h
}

fn suspect_links(v: &Value) -> Vec<(String, String)> {
    let mut l: Vec<(String, String)> = v["suspects"]["links"]
        .as_array()
        .unwrap_or_else(|| panic!("no suspects.links array: {v}"))
        .iter()
        .map(|l| unordered(&l[0], &l[1]))
        .collect();
    l.sort();
    l
}

/// The first-round result of every unordered pair (retests are extra entries).
fn first_results(v: &Value) -> Vec<&Value> {
    let pairs = v["pairs"]
        .as_array()
        .unwrap_or_else(|| panic!("no pairs array: {v}"));
    let mut seen = BTreeSet::new();
    pairs
        .iter()
        .filter(|p| p["retested"] != Value::Bool(true))
        .filter(|p| seen.insert(pair_key(p)))
        .collect()
}

/// Every one of the 6 unordered pairs of fab1..fab4 occurs (first results).
fn assert_all_six_pairs(v: &Value) {
    let got: BTreeSet<(String, String)> = first_results(v).into_iter().map(pair_key).collect();
    let mut want = BTreeSet::new();
    for (i, a) in HOSTS.iter().enumerate() {
        for b in &HOSTS[i + 1..] {
            want.insert((a.to_string(), b.to_string()));
        }
    }
    assert_eq!(got, want, "not every pair of fab1..fab4 was tested: {v}");
}

/// The hosts of the report are fab1..fab4 as ranks 0..3, on rxe0.
fn assert_hosts(v: &Value) {
    let hosts = v["hosts"]
        .as_array()
        .unwrap_or_else(|| panic!("no hosts array: {v}"));
    let mut got: Vec<(u64, String)> = hosts
        .iter()
        .map(|h| {
            assert_eq!(h["device"], "rxe0", "host entry not on rxe0: {h}");
            (
                h["rank"].as_u64().expect("rank"),
                h["host"].as_str().expect("host").to_string(),
            )
        })
        .collect();
    got.sort();
    let want: Vec<(u64, String)> = HOSTS
        .iter()
        .enumerate()
        .map(|(i, h)| (i as u64, h.to_string()))
        .collect();
    assert_eq!(got, want, "ranks are not fab1..fab4 in order: {v}");
}

/// Other ranks print nothing on stdout (rank 0 reports).
fn assert_others_quiet(run: &FabricRun) {
    for (i, r) in run.ranks.iter().enumerate().skip(1) {
        assert!(
            r.stdout.trim().is_empty(),
            "rank {i} printed on stdout: {}",
            r.stdout
        );
    }
}

/// Each first-round pair's figures, then the suspects, each suspect note (its rules' figures and
/// what its retests measured) and the retests (what a failed assertion needs).
fn pair_summary(v: &Value) -> String {
    first_results(v)
        .iter()
        .map(|p| {
            format!(
                "{}-{} bw {} / {} lat {} flagged {} ({})\n",
                p["a"],
                p["b"],
                p["bw_gbps"],
                p["bw_gbps_reverse"],
                p["lat_us"],
                p["flagged"],
                p["reason"]
            )
        })
        .chain(std::iter::once(format!("suspects: {}\n", v["suspects"])))
        .chain(
            v["suspect_notes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|n| {
                    format!(
                        "note {} ({}, confirmed {}, undecided {}): {} | retests: {}\n",
                        n["name"],
                        n["rule"],
                        n["confirmed"],
                        n["undecided"],
                        n["reason"],
                        n["retest"]
                    )
                }),
        )
        .chain(std::iter::once(format!("retests: {}\n", v["retests"])))
        .collect()
}

/// A run of the healthy fabric, once more when the first named a suspect (rank 0 exit 3 with
/// all six pairs measured and no rank missing): the lab's noise makes a false suspect now and
/// then (CI of 3ffdf64, in a_: fab3 -> fab2 at 0.67 x of the reference, latencies of 175 us
/// to 4.1 ms, the guests in their 4 ms tick state, the link confirmed on its retests; CI of
/// c72debb, in e_: fab1 - fab2 at 0.107 / 0.111 Gb/s against 0.104-0.139 on the other pairs,
/// every latency about 4 ms). The second run is the one the test judges: two in a row with a
/// suspect fail it. Returns the run judged and its report (rank 0's JSON, read once).
fn healthy_fabric(launch: Launch, args: &[&str]) -> (FabricRun, Value) {
    let (run, v, ()) = healthy_fabric_by(|| (fabric(launch, args, None), ()));
    (run, v)
}

/// [`healthy_fabric`]'s rule for a run that brings something along (the hostile tests'
/// intruders): `attempt` runs the fabric with it and returns the run and what it gathered; a
/// second attempt, everything in it started afresh, is made and judged when the first named a
/// suspect with all six pairs measured and no rank missing.
fn healthy_fabric_by<T>(mut attempt: impl FnMut() -> (FabricRun, T)) -> (FabricRun, Value, T) {
    let (first, gathered) = attempt();
    let v = first.report();
    let noisy = first.rank0().rc == Some(3)
        && v["missing"] == serde_json::json!([])
        && first_results(&v).len() == 6;
    if !noisy {
        return (first, v, gathered);
    }
    eprintln!(
        "a suspect in a healthy fabric (the lab's noise?); one more run must be clean:\n{}",
        pair_summary(&v)
    );
    let (run, gathered) = attempt();
    let v = run.report();
    (run, v, gathered)
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn a_healthy_fabric_has_six_pairs_and_no_suspects() {
    require_fabric();
    let _clean = Impaired::none();
    let (run, v) = healthy_fabric(Launch::Slurm, &args(&[]));
    assert_eq!(
        run.rank0().rc,
        Some(0),
        "healthy fabric: rank 0 should exit 0\n{}stderr: {}",
        pair_summary(&v),
        run.rank0().stderr
    );
    assert_hosts(&v);
    assert_all_six_pairs(&v);
    assert_counters_are_information(&v);
    for p in first_results(&v) {
        assert!(
            p["bw_gbps"].as_f64().is_some_and(|b| b > 0.0),
            "pair without bandwidth: {p}"
        );
        assert!(
            p["lat_us"].as_f64().is_some_and(|l| l > 0.0),
            "pair without latency: {p}"
        );
    }
    assert!(suspect_hosts(&v).is_empty(), "suspect hosts: {v}");
    assert!(suspect_links(&v).is_empty(), "suspect links: {v}");
    assert_eq!(suspect_groups(&v), 0, "suspect groups: {v}");
    assert_eq!(v["missing"], serde_json::json!([]), "missing ranks: {v}");
    // Four guests set up alike: the configuration audit finds nothing to say.
    assert_eq!(
        v["config"],
        serde_json::json!([]),
        "configuration findings: {v}"
    );
    assert!(
        v["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["config"].is_object()),
        "every rank tells its port's configuration: {v}"
    );
    assert_others_quiet(&run);
    for (i, r) in run.ranks.iter().enumerate() {
        assert_eq!(r.rc, Some(0), "rank {i} exit: {}", r.stderr);
    }
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn b_a_slow_nic_makes_its_host_the_suspect() {
    require_fabric();
    let _slow = Impaired::new(&["host-rate", "fab3", SLOW]);
    let run = fabric(Launch::Slurm, &args(&[]), None);
    let v = run.report();
    let summary = pair_summary(&v);
    assert_eq!(
        run.rank0().rc,
        Some(3),
        "slow NIC on fab3: rank 0 should exit 3\n{summary}stderr: {}",
        run.rank0().stderr
    );
    assert_all_six_pairs(&v);
    assert_eq!(
        suspect_hosts(&v),
        ["fab3"],
        "fab3's NIC is slow, it alone should be the suspect host\n{summary}{v}"
    );
    assert!(
        suspect_links(&v).is_empty() && suspect_groups(&v) == 0,
        "a slow NIC is neither a bad link nor a group\n{summary}{v}"
    );
    let rules = note_rules(&v);
    assert!(
        rules
            .iter()
            .any(|(n, r)| n == "fab3" && ["bw-host", "bw-send", "bw-recv"].contains(&r.as_str())),
        "fab3 should be a suspect by a bandwidth host rule: {rules:?}"
    );
    assert_counters_are_information(&v);
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn c_a_slow_link_is_the_suspect_link_not_a_host() {
    require_fabric();
    let _slow = Impaired::new(&["link", "fab2", "fab4", SLOW]);
    let run = fabric(Launch::Slurm, &args(&[]), None);
    let v = run.report();
    let summary = pair_summary(&v);
    assert_eq!(
        run.rank0().rc,
        Some(3),
        "slow link fab2-fab4: rank 0 should exit 3\n{summary}stderr: {}",
        run.rank0().stderr
    );
    assert_all_six_pairs(&v);
    assert_eq!(
        suspect_links(&v),
        [("fab2".to_string(), "fab4".to_string())],
        "only fab2<->fab4 is slow: it should be the one suspect link\n{summary}{v}"
    );
    assert!(
        suspect_hosts(&v).is_empty() && suspect_groups(&v) == 0,
        "a slow link makes neither of its hosts a suspect\n{summary}{v}"
    );
    let rules = note_rules(&v);
    assert!(
        rules.iter().any(|(_, r)| r == "bw-link"),
        "the link should be a suspect by the bw-link rule: {rules:?}"
    );
    assert_counters_are_information(&v);
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn d_a_rank_killed_mid_run_is_named_and_nothing_hangs() {
    require_fabric();
    let _clean = Impaired::none();
    let run = fabric(Launch::Slurm, &args(&["--timeout", "30s"]), Some(3));
    assert!(
        run.killed,
        "rank 3 (fab4) ended before it could be killed mid-run (exit {:?}): {}",
        run.ranks[3].rc, run.ranks[3].stderr
    );
    assert_eq!(
        run.ranks[3].rc,
        Some(137),
        "rank 3 should have died of SIGKILL"
    );
    let v = run.report();
    let summary = pair_summary(&v);
    let rc0 = run.rank0().rc;
    assert!(
        matches!(rc0, Some(1) | Some(3)),
        "a dead rank must make rank 0 exit non-zero (1 or 3), got {rc0:?}\n{summary}stderr: {}",
        run.rank0().stderr
    );
    // fab4 is named: in "missing", or in the reason or error of a failed pair of its.
    let missing: Vec<&str> = v["missing"]
        .as_array()
        .unwrap_or_else(|| panic!("no missing array: {v}"))
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let named_in_pairs = v["pairs"].as_array().is_some_and(|ps| {
        ps.iter().any(|p| {
            (p["a"] == "fab4" || p["b"] == "fab4")
                && ["reason", "error"]
                    .iter()
                    .any(|k| p[*k].as_str().is_some_and(|r| r.contains("fab4")))
        })
    });
    assert!(
        missing.contains(&"fab4") || named_in_pairs,
        "the killed rank (fab4) is named nowhere\n{summary}{v}"
    );
    assert!(
        !missing.iter().any(|m| *m != "fab4"),
        "only fab4 died, missing: {missing:?}"
    );
    // Partial results: some pair without fab4 has a bandwidth.
    let partial = v["pairs"].as_array().is_some_and(|ps| {
        ps.iter()
            .any(|p| p["a"] != "fab4" && p["b"] != "fab4" && p["bw_gbps"].as_f64().is_some())
    });
    assert!(
        partial,
        "no results for the pairs without fab4\n{summary}{v}"
    );
    // Bounded: the deadlines (30 s each) ended it, well before the test's own hang deadline.
    assert!(
        run.elapsed < Duration::from_secs(180),
        "took {:?} after a rank died",
        run.elapsed
    );
    for i in 1..3 {
        assert!(
            run.ranks[i].rc.is_some(),
            "rank {i} left no exit status: {}",
            run.ranks[i].stderr
        );
    }
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn e_hosts_list_without_a_launcher_finds_ranks_by_hostname() {
    require_fabric();
    let _clean = Impaired::none();
    let (run, v) = healthy_fabric(Launch::NoLauncherEnv, &args(&["--hosts", "fab[1-4]"]));
    assert_eq!(
        run.rank0().rc,
        Some(0),
        "--hosts fab[1-4]: rank 0 should exit 0\n{}stderr: {}",
        pair_summary(&v),
        run.rank0().stderr
    );
    assert_hosts(&v);
    assert_all_six_pairs(&v);
    assert!(
        suspect_hosts(&v).is_empty() && suspect_links(&v).is_empty() && suspect_groups(&v) == 0,
        "{v}"
    );
    assert_counters_are_information(&v);
    assert_others_quiet(&run);
}

/// The run the intruders tried to disturb: every rank exit 0, all four hosts and six pairs, no
/// suspect, nobody missing (the healthy fabric's verdict).
fn assert_healthy_despite_intruders(run: &FabricRun, v: &Value) {
    let err = &run.rank0().stderr;
    assert_eq!(run.rank0().rc, Some(0), "{}{err}", pair_summary(v));
    for (i, r) in run.ranks.iter().enumerate() {
        assert_eq!(r.rc, Some(0), "rank {i} exit: {}", r.stderr);
    }
    assert_hosts(v);
    assert_all_six_pairs(v);
    assert!(
        suspect_hosts(v).is_empty() && suspect_links(v).is_empty(),
        "{v}"
    );
    assert_eq!(v["missing"], serde_json::json!([]), "{v}");
}

/// What an intruder on fab1 got from rank 0's coordinator during the rendezvous.
fn intrude(deadline: Duration) -> Vec<String> {
    use rdmadiag::fabric::auth::{self, Greeting, Proof};

    use rdmadiag::fabric::protocol::{self, Hello, ToCoordinator, ToRank};
    use std::io::{BufReader, Read, Write};
    use std::net::TcpStream;
    let start = Instant::now();
    let dial = || loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", 18600)) {
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            return Some(s);
        }
        if start.elapsed() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let answer = |s: &TcpStream| -> String {
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut buf = Vec::new();
        match auth::read_plain::<ToRank>(&mut r, &mut buf) {
            Ok(ToRank::Abort { reason }) => format!("abort: {reason}"),
            Ok(m) => format!("accepted?! {m:?}"),
            Err(e) => format!("closed: {e:#}"),
        }
    };
    let greet = |s: &TcpStream| -> Greeting {
        let mut r = BufReader::new(s.try_clone().unwrap());
        auth::read_plain(&mut r, &mut Vec::new()).expect("a challenge")
    };
    // The job's id, for attack 5: the job runs before rank 0 listens.
    let mut job = String::new();
    while job.is_empty() && start.elapsed() < deadline {
        job = Command::new("squeue")
            .args(["-h", "-t", "R", "-o", "%i"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        std::thread::sleep(Duration::from_millis(100));
    }
    // 5 (tried first, while rank 3 is still to come): a genuine munge
    // credential of the job's uid, made on fab1 outside the job, naming the job's step and
    // rank 3 (fab4's, which starts late): rank 0 believes a rank only from its node.
    let Some(mut s) = dial() else {
        return vec!["the coordinator never listened".into()];
    };
    let g = greet(&s);
    let outsider = auth::Auth::Munge(auth::MungeJob {
        job: job.clone(),
        step: "0".into(),
        uid: 0,
        socket: None,
        layout: None,
    });
    let tried = Instant::now();
    let munged = match auth::prove(&outsider, 3, &g) {
        Ok((proof, _)) => {
            protocol::send(&mut s, &proof).unwrap();
            let a = answer(&s);
            format!("job {job} rank 3 from fab1 ({:?}): {a}", tried.elapsed())
        }
        Err(e) => format!("no credential made for job {job}: {e:#}"),
    };
    let mut got = Vec::new();
    // 1: no credential, claiming rank 1.
    let Some(mut s) = dial() else {
        got.extend([munged, "the rendezvous closed early".into()]);
        return got;
    };
    let g = greet(&s);
    got.push(format!("challenge: {g:?}"));
    protocol::send(&mut s, &Proof::Insecure).unwrap();
    got.push(answer(&s));
    // 2: a shared key rank 0 does not have.
    let Some(mut s) = dial() else {
        got.extend([munged, "the rendezvous closed early".into()]);
        return got;
    };
    let _ = greet(&s);
    protocol::send(&mut s, &auth::mismatch(&auth::Auth::key(b"x"))).unwrap();
    got.push(answer(&s));
    // 3: the old, unauthenticated protocol: a hello claiming rank 1.
    let Some(mut s) = dial() else {
        got.extend([munged, "the rendezvous closed early".into()]);
        return got;
    };
    let _ = greet(&s);
    let hello = ToCoordinator::Hello(Hello {
        rank: 1,
        size: 4,
        hostname: "intruder".into(),
        device: "rxe0".into(),
        port: 1,
        gid: "::1".into(),
        address: None,
        test_port: 9,
        config: None,
    });
    protocol::send(&mut s, &hello).unwrap();
    got.push(answer(&s));
    // 4: an endless line.
    let Some(mut s) = dial() else {
        got.extend([munged, "the rendezvous closed early".into()]);
        return got;
    };
    let _ = greet(&s);
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0usize;
    while sent < 16 << 20 && s.write_all(&chunk).is_ok() {
        sent += chunk.len();
    }
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    got.push(format!(
        "endless line: closed after {sent} bytes sent: {}",
        String::from_utf8_lossy(&rest).trim()
    ));
    got.push(munged);
    got
}

/// The TCP ports rank 0's rdmadiag on this host (fab1) listens on besides the coordinator's:
/// its test port.
fn rank0_test_ports() -> Vec<u16> {
    let out = Command::new("ss").args(["-ltnpH"]).output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("\"rdmadiag\""))
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|a| a.rsplit(':').next()?.parse::<u16>().ok())
        .filter(|p| *p != 18600)
        .collect()
}

/// An intruder on fab1 that, until `stop`, greets rank 0's test port without a key every
/// 300 ms (issue 31, attack 3: it used to be served as rank 0's peer): what each try got. The
/// port is looked up (`ss`) until found, then kept: a process started every few hundred
/// milliseconds would load fab1's one vCPU during the pair tests.
fn intrude_on_the_test_port(stop: &std::sync::atomic::AtomicBool) -> Vec<String> {
    use rdmadiag::connect::control::ControlChannel;
    use std::net::TcpStream;
    let mut got = Vec::new();
    let mut ports = Vec::new();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if ports.is_empty() {
            ports = rank0_test_ports();
        }
        for &port in &ports {
            let Ok(s) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            let r = ControlChannel::new(s, Duration::from_secs(2))
                .and_then(|mut ch| ch.greet_as_client(None));
            got.push(match r {
                Ok(software) => format!("served?! by {software}"),
                Err(e) => format!("refused: {e:#}"),
            });
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    got
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn f_intruders_without_the_jobs_credential_are_refused_and_the_verdict_is_unchanged() {
    require_fabric();
    let _clean = Impaired::none();
    // The intruders come again, afresh, if the lab's noise makes the first run's verdict a
    // false suspect.
    let (run, v, (got, on_port)) = healthy_fabric_by(|| {
        let intruder = std::thread::spawn(|| intrude(Duration::from_secs(90)));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop_port = stop.clone();
        let port_intruder = std::thread::spawn(move || intrude_on_the_test_port(&stop_port));
        let run = fabric(Launch::SlurmVeryLate(3), &args(&["--timeout", "60s"]), None);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let on_port = port_intruder.join().unwrap();
        (run, (intruder.join().unwrap(), on_port))
    });
    let all = got.join("\n");
    eprintln!("intruder:\n{all}");
    assert!(
        got.len() == 6
            && got[0].contains("Munge")
            && got[1].contains("no key configured on that rank")
            && got[1].contains("munge")
            && got[2].contains("offers a shared key")
            && got[3].contains("unreadable line")
            && !got[4].contains("16777216 bytes sent")
            && got[5].contains("abort")
            && got[5].contains("was made on fab1")
            && got[5].contains("but rank 3 of job")
            && got[5].contains("runs on fab4"),
        "every intruder refused, and told why:\n{all}"
    );
    assert!(!all.contains("accepted?!"), "{all}");
    let port_all = on_port.join("\n");
    eprintln!("test-port intruder ({} tries):\n{port_all}", on_port.len());
    assert!(
        !on_port.is_empty() && !port_all.contains("served?!"),
        "rank 0's test port serves only the pair's key holder:\n{port_all}"
    );
    let on_test_port: u64 = v["refused"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|r| {
                    r["reason"]
                        .as_str()
                        .is_some_and(|w| w.contains("'s test port"))
                })
                .map(|r| r["count"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0);
    assert!(
        on_test_port >= 1,
        "the clients rank 0's test port refused are in the report: {}",
        v["refused"]
    );
    let err = &run.rank0().stderr;
    assert!(
        err.contains("rank 0 refused a connection from 127.0.0.1"),
        "rank 0 names the refusals: {err}"
    );
    assert!(err.contains("longer than 65536 bytes"), "{err}");
    assert_healthy_despite_intruders(&run, &v);
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn g_a_one_way_slow_link_is_the_suspect_link() {
    require_fabric();
    let _slow = Impaired::new(&["link", "--one-way", "fab2", "fab4", SLOW_ONE_WAY]);
    // The slow link must be named in every run: a fault is never passed. A false suspect beside
    // it, made by the lab's noise, gets one more run, which must be exact (CI of b1f4c51:
    // fab1 - fab3 was retested at 0.90 x and 0.51 x of the reference, the second with a 1.7 ms
    // latency, a stalled guest, and confirmed; the verdict cannot tell that from a link at
    // half speed).
    for attempt in 0..2 {
        let run = fabric(Launch::Slurm, &args(&[]), None);
        let v = run.report();
        let summary = pair_summary(&v);
        assert_eq!(
            run.rank0().rc,
            Some(3),
            "fab2 -> fab4 slow: rank 0 should exit 3\n{summary}stderr: {}",
            run.rank0().stderr
        );
        assert_all_six_pairs(&v);
        let links = suspect_links(&v);
        assert!(
            links.contains(&("fab2".to_string(), "fab4".to_string())),
            "fab2 -> fab4 is slow: the link fab2 - fab4 must be a suspect\n{summary}{v}"
        );
        let exact = links.len() == 1 && suspect_hosts(&v).is_empty() && suspect_groups(&v) == 0;
        if !exact && attempt == 0 {
            eprintln!(
                "a suspect beside fab2 - fab4 (the lab's noise?); one more run must be exact:\n\
                 {summary}suspects: {}",
                v["suspects"]
            );
            continue;
        }
        // Exactly one entry: a link slow in one direction is one suspect, not one a direction.
        assert_eq!(
            links,
            [("fab2".to_string(), "fab4".to_string())],
            "only fab2 -> fab4 is slow: fab2 - fab4 should be the one suspect link, once\n{summary}{v}"
        );
        assert!(
            suspect_hosts(&v).is_empty() && suspect_groups(&v) == 0,
            "a link slow one way makes neither of its hosts a suspect\n{summary}{v}"
        );
        let rules = note_rules(&v);
        assert!(
            rules
                .iter()
                .any(|(n, r)| n.contains("fab2") && n.contains("fab4") && r.starts_with("bw-")),
            "the link fab2 - fab4 should be a suspect by a bandwidth rule: {rules:?}\n{summary}{v}"
        );
        assert_counters_are_information(&v);
        return;
    }
}

#[test]
#[ignore = "lab-fabric: needs scripts/lab --hosts 4"]
fn h_a_host_slow_only_sending_is_the_suspect_host() {
    require_fabric();
    let _slow = Impaired::new(&["host-rate", "--egress-only", "fab3", SLOW_ONE_WAY]);
    let run = fabric(Launch::Slurm, &args(&[]), None);
    let v = run.report();
    let summary = pair_summary(&v);
    assert_eq!(
        run.rank0().rc,
        Some(3),
        "fab3 slow sending: rank 0 should exit 3\n{summary}stderr: {}",
        run.rank0().stderr
    );
    assert_all_six_pairs(&v);
    assert_eq!(
        suspect_hosts(&v),
        ["fab3"],
        "all fab3 sends is slow: it alone should be the suspect host\n{summary}{v}"
    );
    assert!(
        suspect_links(&v).is_empty() && suspect_groups(&v) == 0,
        "a host slow sending is neither a bad link nor a group\n{summary}{v}"
    );
    let rules = note_rules(&v);
    assert!(
        rules.iter().any(|(n, r)| n == "fab3" && r == "bw-send"),
        "fab3 should be a suspect by the bw-send rule (it only sends slowly): {rules:?}"
    );
    assert_counters_are_information(&v);
}
