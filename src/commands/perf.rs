//! `rdmadiag bw`, `lat`, `write` and `read`: build the test, run a role, check thresholds.

use super::{counters_before, counters_since, refuse_on_server, session_options};
use crate::cli::{BwArgs, ExpectSize, LatArgs, PerfCommon, XferArgs};
use crate::connect::control::{
    ATOMIC_SIZE, LAT_INLINE, PerfKind, PerfSpec, QpType, Test, TestSpec,
};
use crate::exit::{self, AfterReport, DataMismatch, UsageError};
use crate::perf::Op;
use crate::report::perf::PerfReport;
use crate::report::progress::{ProgressLine, Span, Watched};
use crate::report::thresholds::{self, Metric, Threshold};
use crate::report::{self, Style};
use crate::session::{Served, SessionOptions};
use crate::{Role, TestReport};
use anyhow::{Result, bail};
use std::sync::Arc;
use std::time::Duration;

/// perftest's -a sweep: 2 B to 8 MiB.
fn sweep() -> Vec<u32> {
    (1..=23).map(|k| 1u32 << k).collect()
}

fn sizes(c: &PerfCommon, default: u32) -> Vec<u32> {
    if c.op().is_atomic() {
        vec![ATOMIC_SIZE]
    } else if c.all {
        sweep()
    } else if !c.sizes.is_empty() {
        c.sizes.clone()
    } else {
        vec![c.size.unwrap_or(default)]
    }
}

/// Atomics move 8 bytes: any other size asked for (-s, --sizes, -a) is a usage error.
fn check_atomic_size(c: &PerfCommon) -> Result<()> {
    let op = c.op();
    let asked = c.size.into_iter().chain(c.sizes.iter().copied());
    if op.is_atomic()
        && let Some(bad) = c
            .all
            .then_some(0)
            .into_iter()
            .chain(asked)
            .find(|&s| s != ATOMIC_SIZE)
    {
        let what = if bad == 0 {
            "-a".into()
        } else {
            format!("size {bad}")
        };
        return Err(UsageError(format!(
            "atomics move {ATOMIC_SIZE} bytes: {what} cannot be used with --op {op}"
        ))
        .into());
    }
    Ok(())
}

/// What every bw/lat option set shares: sizes, iterations or duration, -I, --vs-tcp.
fn measured(c: &PerfCommon, default_size: u32, default_iterations: u64) -> PerfSpec {
    PerfSpec {
        inline_explicit: c.inline.is_some(),
        vs_tcp: c.vs_tcp,
        ..PerfSpec::one_at_a_time(
            c.op(),
            sizes(c, default_size),
            c.iterations.unwrap_or(default_iterations),
            c.duration,
        )
    }
}

fn spec(kind: PerfKind, c: &PerfCommon, perf: PerfSpec) -> TestSpec {
    TestSpec {
        link: c.connect.link(c.connection.transport.into()),
        test: Test::perf_of(kind, perf),
    }
}

/// Run a perf test in the role the options give, with a progress line on a terminal. The
/// client returns its report; a server prints nothing on stdout (docs/json.md) and returns None.
fn run_roles(
    opts: &SessionOptions,
    role: Role,
    spec: &TestSpec,
    json: bool,
    counters: bool,
) -> Result<Option<PerfReport>> {
    let before = counters_before(counters, opts, &role)?;
    let perf = spec.test.perf().map(|(_, p)| p);
    let rounds = perf.map_or(1, |p| p.sizes.len());
    let duration = perf.and_then(|p| p.duration_ms).map(Duration::from_millis);
    let watched = Arc::new(Watched::default());
    let span = match duration {
        Some(per_round) => Span::Timed { per_round, rounds },
        None => Span::Rounds(rounds),
    };
    let _line = ProgressLine::start(json, watched.clone(), span);
    match crate::run(spec, opts, role, watched.as_ref())? {
        TestReport::Perf(mut r) => {
            r.counter_deltas = counters_since(before.as_ref(), &r.local);
            Ok(Some(*r))
        }
        // A perftest client's figures, printed as perftest's server prints them.
        TestReport::Served(Served::Perftest(r)) => Ok(Some(*r)),
        TestReport::Served(_) => Ok(None),
        TestReport::Pingpong(_) => bail!("a perf test produced a ping-pong report"),
    }
}

/// The thresholds asked for, checked against the role and the sizes before anything runs: a
/// server measures nothing it could judge, and a size that is not run would pass unseen.
fn thresholds_for(
    asked: Vec<(Metric, f64, &str)>,
    scope: ExpectSize,
    role: &Role,
    sizes: &[u32],
) -> Result<Vec<Threshold>> {
    if let Some((_, _, flag)) = asked.first() {
        refuse_on_server(role, flag, "is checked where the figures are", "")?;
    }
    let size = match scope {
        ExpectSize::All => None,
        ExpectSize::Size(s) if asked.is_empty() => {
            return Err(UsageError(format!(
                "--expect-size {s} needs a threshold to apply to (--expect-bw, --expect-msgrate)"
            ))
            .into());
        }
        ExpectSize::Size(s) if !sizes.contains(&s) => {
            let run: Vec<String> = sizes.iter().map(u32::to_string).collect();
            return Err(UsageError(format!(
                "--expect-size {s} is not a size this run measures ({})",
                run.join(", ")
            ))
            .into());
        }
        ExpectSize::Size(s) => Some(s),
    };
    Ok(asked
        .into_iter()
        .map(|(metric, limit, _)| Threshold {
            metric,
            limit,
            size,
        })
        .collect())
}

/// Judge the report, put the verdicts in it, print it; exit 3 (and one line) when one failed.
fn judge_and_emit(
    mut report: PerfReport,
    checks: &[Threshold],
    json: bool,
    text: impl Fn(&PerfReport) -> String,
) -> Result<u8> {
    report.thresholds = thresholds::evaluate(&report, checks);
    emit(&report, json, text)?;
    if let Some(line) = thresholds::shortfall(&report.thresholds) {
        eprintln!("rdmadiag: {line}");
        return Ok(exit::THRESHOLD);
    }
    Ok(exit::OK)
}

pub fn run_bw(args: &BwArgs) -> Result<u8> {
    let c = &args.common;
    check_atomic_size(c)?;
    let (mut opts, role) = session_options(&c.connect)?;
    opts.compat = c.compat.map(Into::into);
    let mut asked = Vec::new();
    if let Some(bps) = args.bw_threshold() {
        asked.push((Metric::BwAvg, bps / 1e9, "--expect-bw"));
    }
    if let Some(pps) = args.msgrate_threshold() {
        asked.push((Metric::MsgRate, pps / 1e6, "--expect-msgrate"));
    }
    let checks = thresholds_for(asked, args.expect_size, &role, &sizes(c, 65536))?;
    let default_iters = if c.op() == Op::Write { 5000 } else { 1000 };
    let perf = PerfSpec {
        qps: args.qps,
        tx_depth: args.tx_depth,
        cq_mod: args.cq_mod.unwrap_or(100).min(args.tx_depth),
        cq_mod_explicit: args.cq_mod.is_some(),
        outstanding: args.outstanding,
        post_list: args.post_list.min(args.tx_depth),
        inline: c.inline.unwrap_or(0),
        bidirectional: args.bidirectional,
        ..measured(c, 65536, default_iters)
    };
    let spec = spec(PerfKind::Bw, c, perf);
    let Some(report) = run_roles(&opts, role, &spec, c.output.json, c.counters)? else {
        return Ok(exit::OK);
    };
    judge_and_emit(report, &checks, c.output.json, |r| {
        report::perf::bw_text(r, args.units.into(), Style::detect())
    })
}

pub fn run_lat(args: &LatArgs) -> Result<u8> {
    let c = &args.common;
    check_atomic_size(c)?;
    let (mut opts, role) = session_options(&c.connect)?;
    opts.compat = c.compat.map(Into::into);
    let asked: Vec<(Metric, f64, &str)> = args
        .expect_lat
        .map(|d| {
            (
                Metric::Latency(args.expect_percentile),
                d.as_secs_f64() * 1e6,
                "--expect-lat",
            )
        })
        .into_iter()
        .collect();
    let checks = thresholds_for(asked, args.expect_size, &role, &sizes(c, 2))?;
    let perf = PerfSpec {
        inline: c.inline.unwrap_or(LAT_INLINE),
        timing: args.timing.into(),
        ..measured(c, 2, 1000)
    };
    let spec = spec(PerfKind::Lat, c, perf);
    let Some(mut report) = run_roles(&opts, role, &spec, c.output.json, c.counters)? else {
        return Ok(exit::OK);
    };
    if !args.histogram {
        for l in &mut report.lat {
            l.histogram.clear();
        }
    }
    judge_and_emit(report, &checks, c.output.json, |r| {
        report::perf::lat_text(r, args.histogram, Style::detect())
    })
}

/// `rdmadiag write` / `rdmadiag read`: move a patterned buffer and verify every byte.
pub fn run_xfer(args: &XferArgs, op: Op) -> Result<u8> {
    let (opts, role) = session_options(&args.connect)?;
    let spec = TestSpec {
        link: args.connect.link(QpType::Rc),
        test: Test::Verify(PerfSpec::one_at_a_time(
            op,
            vec![args.size],
            args.iterations,
            None,
        )),
    };
    let Some(report) = run_roles(&opts, role, &spec, args.output.json, args.counters)? else {
        return Ok(exit::OK);
    };
    emit(&report, args.output.json, |r| {
        report::perf::xfer_text(r, Style::detect())
    })?;
    // The report is printed: it is the run's one document, the line says why it failed.
    let printed = || anyhow::Error::new(AfterReport("the report shows each transfer".into()));
    if let Some(m) = report.lat.iter().find_map(|l| l.mismatch) {
        return Err(printed().context(DataMismatch(format!(
            "RDMA {} verification failed: {m}",
            op.to_string().to_uppercase()
        ))));
    }
    // Fail closed: a run that did not verify every transfer does not pass.
    if let Some(l) = report
        .lat
        .iter()
        .find(|l| l.verified != Some(true) || l.transfers_checked != Some(args.iterations))
    {
        return Err(printed().context(format!(
            "RDMA {} verification incomplete: {} of {} transfers of {} bytes were checked",
            op.to_string().to_uppercase(),
            l.transfers_checked.unwrap_or(0),
            args.iterations,
            l.size
        )));
    }
    Ok(exit::OK)
}

fn emit(r: &PerfReport, json: bool, text: impl Fn(&PerfReport) -> String) -> Result<()> {
    if json {
        report::emit_json(r)
    } else {
        let mut out = text(r);
        if let Some(d) = &r.counter_deltas {
            out.push_str(&report::counters::test_counters_text(d, Style::detect()));
        }
        report::emit(&out)
    }
}
