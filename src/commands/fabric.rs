//! `rdmadiag fabric`: find this rank's place, take part in the run, and on rank 0 judge and
//! print the report (text or JSON) and write the CSV and Prometheus files.

use crate::cli::{FabricArgs, FabricTest, PatternArg};
use crate::exit::{self, UsageError};
use crate::fabric::auth::{self, AuthFlags};
use crate::fabric::coordinator::Progress;
use crate::fabric::launcher::{self, LaunchFlags, ThisHost};
use crate::fabric::runner::{PairSettings, VerbsRunner};
use crate::fabric::schedule::{Pattern, Schedule};
use crate::fabric::{self, FabricPlan, verdict};
use crate::report::export::{self, Format};
use crate::report::fabric::config::{Field, Severity};
use crate::report::fabric::{FabricReport, FabricSettings};
use crate::report::{self, Style};
use anyhow::{Context as _, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

/// The latency test's message size (as `rdmadiag lat`'s default).
const LAT_SIZE: u32 = 2;

pub fn run(args: &FabricArgs) -> Result<u8> {
    let require_same = match args.require_same.as_deref() {
        Some(list) => {
            Field::parse_list(list).map_err(|e| UsageError(format!("--require-same: {e}")))?
        }
        None => Vec::new(),
    };
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let flags = LaunchFlags {
        hosts: args.hosts.as_deref(),
        coordinator: args.coordinator.as_deref(),
    };
    let env = |k: &str| std::env::var(k).ok();
    let me = ThisHost {
        hostname: &hostname,
        is_local: &launcher::is_local_address,
    };
    let launch = launcher::detect(&env, &flags, &me)?;
    for (flag, r) in [
        ("--min-bw-ratio", args.min_bw_ratio),
        ("--max-lat-ratio", args.max_lat_ratio),
    ] {
        if !(r.is_finite() && r > 0.0) {
            return Err(UsageError(format!("{flag} must be a number above 0, not {r}")).into());
        }
    }
    let auth = auth::choose(
        &env,
        &AuthFlags {
            key_file: args.security.key_file.as_deref(),
            insecure: args.security.insecure,
        },
        &launch,
    )?;
    if launch.rank == 0 && auth.scheme() == auth::Scheme::Insecure {
        eprintln!(
            "rdmadiag: fabric: --insecure: anyone who reaches port {} may join this run and forge its results",
            launch.coordinator.1
        );
    }
    let settings = PairSettings {
        bw: args.tests.contains(&FabricTest::Bw),
        lat: args.tests.contains(&FabricTest::Lat),
        bw_size: args.size,
        bw_iterations: args.iterations,
        lat_size: LAT_SIZE,
        lat_iterations: args.iterations,
        timeout: args.timeout,
        choice: args.port_choice.choice(),
        priority: args.priority.into(),
    };
    let pattern = match args.pattern {
        PatternArg::AllPairs => Pattern::AllPairs,
        PatternArg::Ring => Pattern::Ring,
        PatternArg::Quick => Pattern::Quick,
    };
    let plan = FabricPlan {
        schedule: Schedule::new(pattern, launch.size, args.seed),
        thresholds: verdict::Thresholds {
            min_bw_ratio: args.min_bw_ratio,
            max_lat_ratio: args.max_lat_ratio,
            expect_bw_gbps: args.expect_bw.map(|bps| bps / 1e9),
            expect_lat_us: args.expect_lat.map(|d| d.as_secs_f64() * 1e6),
            counters: !args.no_counter_check,
            max_error_delta: args.max_error_delta,
            retest_rounds: if args.no_retest {
                0
            } else {
                args.retest_rounds
            },
        },
        allow_missing: args.allow_missing,
        timeout: args.timeout,
        pair_deadline: settings.pair_deadline(),
        launch,
        hostname,
        auth,
        bind: args
            .security
            .bind
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
        require_same,
    };
    let rank = plan.launch.rank;
    let verbose = args.verbose;
    let log = move |line: &str| {
        if verbose {
            eprintln!("rdmadiag: rank {rank}: {line}");
        }
    };
    if rank == 0 {
        fabric::fit_descriptors(plan.launch.size)?;
    }
    let started = Instant::now();
    let progress = Rounds::new(args.output.json, &settings, &plan);
    let ran = VerbsRunner::new(settings.clone())
        .with_context(|| format!("rank {rank} has no RDMA port to test with"))
        .and_then(|runner| fabric::run(&plan, &runner, &progress, &log));
    progress.finish();
    let end = match ran {
        Ok(end) => end,
        // Only rank 0 speaks on stdout: another rank's failure is its one line on stderr.
        Err(e) if rank != 0 => {
            eprintln!("rdmadiag: rank {rank}: {e:#}");
            return Ok(exit::code_for(&e));
        }
        Err(e) => return Err(e),
    };
    let Some(outcome) = end.outcome else {
        return Ok(end.exit_code);
    };
    if let Some(e) = &end.rank_error {
        eprintln!("rdmadiag: rank 0's own tests: {e:#}");
    }
    let report = fabric::report(
        outcome,
        FabricSettings {
            require_same: plan.require_same.clone(),
            ..fabric_settings(args, &settings, pattern)
        },
        started.elapsed(),
    );
    let cx = export::Context::now(Style::detect());
    let stdout = if args.output.json {
        Format::Json
    } else {
        Format::Text
    };
    report::emit(&export::render(&report, stdout, &cx)?)?;
    for (path, format) in [
        (&args.csv, Format::Csv),
        (&args.prometheus, Format::Prometheus),
    ] {
        if let Some(path) = path {
            write_atomically(path, &export::render(&report, format, &cx)?)?;
        }
    }
    say_why(&report, end.exit_code);
    Ok(end.exit_code)
}

fn fabric_settings(args: &FabricArgs, s: &PairSettings, pattern: Pattern) -> FabricSettings {
    let mut tests = Vec::new();
    if s.bw {
        tests.push("bw".to_string());
    }
    if s.lat {
        tests.push("lat".to_string());
    }
    FabricSettings {
        pattern: serde_json::to_value(pattern)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        tests,
        bw_size: s.bw_size,
        bw_iterations: s.bw_iterations,
        lat_size: s.lat_size,
        lat_iterations: s.lat_iterations,
        min_bw_ratio: args.min_bw_ratio,
        max_lat_ratio: args.max_lat_ratio,
        expect_bw_gbps: args.expect_bw.map(|b| b / 1e9),
        expect_lat_us: args.expect_lat.map(|d| d.as_secs_f64() * 1e6),
        timeout_s: args.timeout.as_secs_f64(),
        counter_check: !args.no_counter_check,
        max_error_delta: args.max_error_delta,
        tclass: s.priority.tclass.unwrap_or(0),
        sl: s.priority.sl.unwrap_or(0),
        require_same: Vec::new(),
    }
}

/// The exit code's reason, one line on stderr.
fn say_why(r: &FabricReport, code: u8) {
    if code == exit::OK {
        return;
    }
    let mut parts = Vec::new();
    if !r.missing.is_empty() {
        parts.push(format!("missing {}", r.missing.join(", ")));
    }
    if !r.suspects.hosts.is_empty() {
        parts.push(format!("suspect host(s) {}", r.suspects.hosts.join(", ")));
    }
    if !r.suspects.links.is_empty() {
        let l: Vec<String> = r
            .suspects
            .links
            .iter()
            .map(|[a, b]| format!("{a} - {b}"))
            .collect();
        parts.push(format!("suspect link(s) {}", l.join(", ")));
    }
    let config: Vec<String> = r
        .config
        .iter()
        .filter(|f| f.severity == Severity::Failure)
        .map(|f| f.short())
        .collect();
    if !config.is_empty() {
        parts.push(format!("config: {}", config.join("; ")));
    }
    if parts.is_empty() {
        parts.push("flagged pairs".into());
    }
    let partial = if code == exit::FAILURE {
        " (partial results)"
    } else {
        ""
    };
    eprintln!("rdmadiag: fabric: {}{partial}", parts.join("; "));
}

/// Write `text` to `path` through a temporary file in the same directory and a rename, so a
/// reader (node_exporter's textfile collector) never sees half a file.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| {
        let _ = std::fs::remove_file(&tmp);
        format!("renaming {} to {}", tmp.display(), path.display())
    })
}

/// Rank 0's plan line (stderr) and its bar over rounds (a terminal only).
struct Rounds {
    rank0: bool,
    json: bool,
    estimate_per_round: Duration,
    launcher: String,
    settings: String,
    bar: std::sync::Mutex<Option<ProgressBar>>,
}

impl Rounds {
    fn new(json: bool, s: &PairSettings, plan: &FabricPlan) -> Rounds {
        // A rough guess: per test a connection set-up and the data at 1 GB/s.
        let bytes = s.bw_size as f64 * s.bw_iterations as f64;
        // Saturating: -s and -n at their limits make an estimate of centuries, not a panic.
        let per_test = |secs: f64| Duration::try_from_secs_f64(0.5 + secs).unwrap_or(Duration::MAX);
        let mut per_round = Duration::ZERO;
        let mut what = Vec::new();
        if s.bw {
            per_round = per_round.saturating_add(per_test(bytes / 1e9).saturating_mul(2));
            what.push(format!(
                "bw {} B x {} both ways",
                s.bw_size, s.bw_iterations
            ));
        }
        if s.lat {
            per_round = per_round.saturating_add(per_test(s.lat_iterations as f64 * 20e-6));
            what.push(format!("lat {} B x {}", s.lat_size, s.lat_iterations));
        }
        Rounds {
            rank0: plan.launch.rank == 0,
            json,
            estimate_per_round: per_round,
            launcher: format!("{} ranks from {}", plan.launch.size, plan.launch.launcher),
            settings: what.join(", "),
            bar: Default::default(),
        }
    }

    fn finish(&self) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            b.finish_and_clear();
        }
    }
}

impl Progress for Rounds {
    fn plan(&self, pairs: usize, rounds: usize) {
        if !self.rank0 {
            return;
        }
        let about = humantime::format_duration(Duration::from_secs(
            self.estimate_per_round
                .saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX))
                .as_secs()
                .max(1),
        ));
        eprintln!(
            "rdmadiag: fabric: {}: {pairs} pairs in {rounds} rounds, about {about} ({})",
            self.launcher, self.settings
        );
        if !self.json && std::io::stderr().is_terminal() {
            let bar =
                ProgressBar::with_draw_target(Some(rounds as u64), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("round {pos}/{len} {wide_bar} {elapsed}")
            {
                bar.set_style(style);
            }
            *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar);
        }
    }

    fn refused(&self, why: &str) {
        eprintln!("rdmadiag: fabric: rank 0 refused {why}");
    }

    fn round_done(&self, done: usize, total: usize) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            b.set_length(total as u64);
            b.set_position(done as u64);
        }
    }
}
