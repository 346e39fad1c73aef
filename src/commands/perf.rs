//! `rdmadiag bw`, `lat`, `write` and `read`: build the test, run a role, check thresholds.

use super::pingpong::session_options;
use crate::cli::{BwArgs, LatArgs, PerfCommon, XferArgs};
use crate::connect::control::{PerfSpec, TestSpec};
use crate::exit::{self, UsageError};
use crate::output;
use crate::perf::{Op, Progress};
use crate::render::{self, Style};
use crate::session::perf::{self as perf_session, PerfReport};
use crate::session::{self, SessionOptions};
use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// perftest's -a sweep: 2 B to 8 MiB.
fn sweep() -> Vec<u32> {
    (1..=23).map(|k| 1u32 << k).collect()
}

fn sizes(c: &PerfCommon, default: u32) -> Vec<u32> {
    if c.all {
        sweep()
    } else if !c.sizes.is_empty() {
        c.sizes.clone()
    } else {
        vec![c.size.unwrap_or(default)]
    }
}

/// What every bw/lat option set shares: sizes, iterations or duration, -I, --vs-tcp.
fn measured(c: &PerfCommon, default_size: u32, default_iterations: u64) -> PerfSpec {
    PerfSpec {
        inline_explicit: c.inline.is_some(),
        vs_tcp: c.vs_tcp,
        ..PerfSpec::one_at_a_time(
            c.op,
            sizes(c, default_size),
            c.iterations.unwrap_or(default_iterations),
            c.duration,
        )
    }
}

fn spec(test: &str, c: &PerfCommon, opts: &SessionOptions, perf: PerfSpec) -> TestSpec {
    TestSpec {
        test: test.into(),
        transport: c.transport,
        size: perf.sizes.iter().copied().max().unwrap_or(0),
        iterations: perf.iterations.unwrap_or(0),
        rx_depth: 0,
        events: false,
        mtu: opts.mtu,
        cm: opts.cm,
        perf: Some(perf),
    }
}

/// Which round the client is in: its message size and how many rounds have started.
#[derive(Default)]
struct Rounds {
    size: AtomicU32,
    started: AtomicUsize,
}

/// A live line on stderr for duration runs and sweeps: only on a terminal, never with --json.
struct Live {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Live {
    fn start(
        json: bool,
        progress: Arc<Progress>,
        round: Arc<Rounds>,
        rounds: usize,
        duration: Option<Duration>,
    ) -> Option<Live> {
        if json || !std::io::stderr().is_terminal() || (rounds < 2 && duration.is_none()) {
            return None;
        }
        let bar = match duration {
            Some(d) => ProgressBar::new((d.as_millis() as u64 * rounds as u64).max(1)),
            None => ProgressBar::new(rounds as u64),
        };
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let (mut last_bytes, mut last_t) = (0u64, Instant::now());
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let bytes = progress.bytes.load(Ordering::Relaxed);
                let now = Instant::now();
                let dt = now.duration_since(last_t).as_secs_f64().max(1e-3);
                let rate = bytes.saturating_sub(last_bytes) as f64 * 8.0 / dt / 1e9;
                (last_bytes, last_t) = (bytes, now);
                let size = round.size.load(Ordering::Relaxed);
                bar.set_message(format!("{size} B, {rate:.2} Gb/s"));
                match duration {
                    Some(_) => bar.set_position(start.elapsed().as_millis() as u64),
                    // Rounds finished: the one under way has started but not ended.
                    None => {
                        let done = round.started.load(Ordering::Relaxed).saturating_sub(1);
                        bar.set_position(done.min(rounds) as u64)
                    }
                }
            }
            bar.finish_and_clear();
        });
        Some(Live {
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Run a perf test in whichever role the options give. The client returns its report; a
/// server prints nothing on stdout (docs/json.md) and returns None.
fn run_roles(opts: &SessionOptions, spec: &TestSpec, json: bool) -> Result<Option<PerfReport>> {
    if opts.compat_ibv {
        return Err(UsageError("--compat ibv applies to pingpong only".into()).into());
    }
    if opts.cm && spec.transport != crate::connect::control::Transport::Rc {
        return Err(UsageError("--cm connects RC queue pairs only: use -c RC".into()).into());
    }
    let rounds = spec.perf.as_ref().map_or(1, |p| p.sizes.len());
    let duration = spec
        .perf
        .as_ref()
        .and_then(|p| p.duration_ms)
        .map(Duration::from_millis);
    let progress = Arc::new(Progress::default());
    let round = Arc::new(Rounds::default());
    let run_client = |o: &SessionOptions| {
        let _live = Live::start(json, progress.clone(), round.clone(), rounds, duration);
        let r = round.clone();
        perf_session::client(o, spec, &progress, &move |s| {
            r.size.store(s, Ordering::Relaxed);
            r.started.fetch_add(1, Ordering::Relaxed);
        })
    };
    if opts.loopback {
        Ok(Some(session::run_loopback(
            opts,
            session::serve_client,
            run_client,
        )?))
    } else if opts.host.is_some() {
        Ok(Some(run_client(opts)?))
    } else {
        session::run_server(opts, session::serve_client)?;
        Ok(None)
    }
}

fn check_common(c: &PerfCommon) -> Result<()> {
    if c.op != Op::Send && c.transport == crate::connect::control::Transport::Ud {
        return Err(UsageError(format!(
            "--op {} needs a connected transport: use -c RC or -c UC (UD carries SEND only)",
            c.op
        ))
        .into());
    }
    if c.op == Op::Read && c.transport == crate::connect::control::Transport::Uc {
        return Err(UsageError("--op read needs -c RC (UC has no RDMA READ)".into()).into());
    }
    Ok(())
}

pub fn run_bw(args: &BwArgs) -> Result<u8> {
    let c = &args.common;
    check_common(c)?;
    let opts = session_options(&c.connect)?;
    let default_iters = if c.op == Op::Write { 5000 } else { 1000 };
    let perf = PerfSpec {
        qps: args.qps,
        tx_depth: args.tx_depth,
        cq_mod: args.cq_mod.min(args.tx_depth),
        post_list: args.post_list.min(args.tx_depth),
        inline: c.inline.unwrap_or(0),
        bidirectional: args.bidirectional,
        ..measured(c, 65536, default_iters)
    };
    let spec = spec("bw", c, &opts, perf);
    perf_session::validate(&spec).map_err(UsageError)?;
    let Some(report) = run_roles(&opts, &spec, c.output.json)? else {
        return Ok(exit::OK);
    };
    emit(&report, c.output.json, |r| {
        render::bw_text(r, args.units, Style::detect())
    })?;
    if let Some(line) = args.expect_bw.and_then(|e| bw_shortfall(&report, e)) {
        eprintln!("rdmadiag: {line}");
        return Ok(exit::THRESHOLD);
    }
    Ok(exit::OK)
}

pub fn run_lat(args: &LatArgs) -> Result<u8> {
    let c = &args.common;
    check_common(c)?;
    let opts = session_options(&c.connect)?;
    let perf = PerfSpec {
        inline: c.inline.unwrap_or(236),
        ..measured(c, 2, 1000)
    };
    let spec = spec("lat", c, &opts, perf);
    perf_session::validate(&spec).map_err(UsageError)?;
    let Some(mut report) = run_roles(&opts, &spec, c.output.json)? else {
        return Ok(exit::OK);
    };
    if !args.histogram {
        for l in &mut report.lat {
            l.histogram.clear();
        }
    }
    emit(&report, c.output.json, |r| {
        render::lat_text(r, args.histogram, Style::detect())
    })?;
    let excess = args
        .expect_lat
        .and_then(|e| lat_excess(&report, e, args.expect_percentile));
    if let Some(line) = excess {
        eprintln!("rdmadiag: {line}");
        return Ok(exit::THRESHOLD);
    }
    Ok(exit::OK)
}

/// `rdmadiag write` / `rdmadiag read`: move a patterned buffer and verify every byte.
pub fn run_xfer(args: &XferArgs, op: Op) -> Result<u8> {
    let opts = session_options(&args.connect)?;
    let spec = TestSpec {
        test: op.to_string(),
        transport: crate::connect::control::Transport::Rc,
        size: args.size,
        iterations: args.iterations,
        rx_depth: 0,
        events: false,
        mtu: opts.mtu,
        cm: opts.cm,
        perf: Some(PerfSpec::one_at_a_time(
            op,
            vec![args.size],
            args.iterations,
            None,
        )),
    };
    perf_session::validate(&spec).map_err(UsageError)?;
    let Some(report) = run_roles(&opts, &spec, args.output.json)? else {
        return Ok(exit::OK);
    };
    emit(&report, args.output.json, |r| {
        render::xfer_text(r, Style::detect())
    })?;
    if let Some(m) = report.lat.iter().find_map(|l| l.mismatch) {
        bail!(
            "RDMA {} verification failed: {m}",
            op.to_string().to_uppercase()
        );
    }
    Ok(exit::OK)
}

fn emit(report: &PerfReport, json: bool, text: impl Fn(&PerfReport) -> String) -> Result<()> {
    if json {
        output::emit_json(report)
    } else {
        output::emit(&text(report))
    }
}

/// The first size whose average bandwidth is below `expect` (bits/s), as one line.
pub fn bw_shortfall(r: &PerfReport, expect_bps: f64) -> Option<String> {
    let want = expect_bps / 1e9;
    r.bw.iter().find(|b| b.bw_avg_gbps < want).map(|b| {
        format!(
            "bandwidth threshold not met: {} B averaged {:.2} Gb/s, expected at least {:.2} Gb/s \
             ({:.2} Gb/s or {:.0}% short)",
            b.size,
            b.bw_avg_gbps,
            want,
            want - b.bw_avg_gbps,
            (want - b.bw_avg_gbps) / want * 100.0
        )
    })
}

/// The first size whose latency at `percentile` exceeds `expect`, as one line.
pub fn lat_excess(r: &PerfReport, expect: Duration, percentile: f64) -> Option<String> {
    let want = expect.as_secs_f64() * 1e6;
    r.lat.iter().find_map(|l| {
        let s = &l.latency;
        let (name, got) = match percentile {
            p if p >= 99.99 => ("p99.99", s.p9999_us),
            p if p >= 99.9 => ("p99.9", s.p999_us),
            p if p >= 99.0 => ("p99", s.p99_us),
            p if p >= 90.0 => ("p90", s.p90_us),
            _ => ("median", s.median_us),
        };
        (got > want).then(|| {
            format!(
                "latency threshold not met: {} B {name} {:.2} us, expected at most {} \
                 ({:.2} us or {:.0}% over)",
                l.size,
                got,
                humantime::format_duration(expect),
                got - want,
                (got - want) / want * 100.0
            )
        })
    })
}
