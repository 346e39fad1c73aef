//! `rdmadiag check`: build the plan from the flags, run it, drain or resume Slurm, render.

use crate::check::output::write_atomically;
use crate::check::slurm::Slurm;
use crate::check::{ErrorWatch, Expectations, PcieRule, Peer, PlaceRules, Plan};
use crate::cli::{CheckArgs, CheckFormat};
use crate::exit::{self, AfterReport, UsageError};
use crate::report::check::{CheckReport, first_failure};
use crate::report::export::{self, Format};
use crate::report::{self, Style};
use anyhow::Result;

fn plan(a: &CheckArgs) -> Result<Plan> {
    let peer = match &a.peer {
        Some(p) => {
            let (host, port) = Peer::parse_address(p).map_err(UsageError)?;
            Some(Peer {
                host,
                port,
                bw: a.peer_bw,
                lat: a.peer_lat,
                key: super::test_key(a.key_file.as_deref(), &|k| std::env::var(k).ok())?,
            })
        }
        None => None,
    };
    Ok(Plan {
        targets: a.targets.clone(),
        expect: Expectations {
            state: a.expect_state.map(Into::into),
            rate: a.expect_rate,
            width: a.expect_width,
            mtu: a.expect_mtu,
            link_layer: a.expect_link_layer.map(Into::into),
            gid: a.expect_gid,
        },
        place: PlaceRules {
            pcie: match (a.expect_pcie, a.pcie) {
                (Some(e), _) => Some(PcieRule::AtLeast(e)),
                (None, true) => Some(PcieRule::AtMaximum),
                (None, false) => None,
            },
            numa: a.expect_numa,
            cpus: a.cpus.clone(),
        },
        errors: a.interval.map(|interval| ErrorWatch {
            interval,
            max_delta: a.max_error_delta.unwrap_or(0),
        }),
        loopback_bw: a.loopback_bw,
        loopback_lat: a.loopback_lat,
        peer,
        priority: a.priority.into(),
        timeout: a.timeout,
    })
}

fn render(r: &CheckReport, format: CheckFormat, style: Style) -> Result<String> {
    let format = match format {
        CheckFormat::Text => Format::Text,
        CheckFormat::Json => Format::Json,
        CheckFormat::Nhc => Format::Nhc,
        CheckFormat::Prometheus => Format::Prometheus,
    };
    export::render(r, format, &export::Context::now(style))
}

pub fn run(args: &CheckArgs) -> Result<u8> {
    let plan = plan(args)?;
    plan.validate()?;
    // Before anything is checked: a drain that could not be done must not wait for the tests.
    let slurm = if args.slurm_drain {
        Some(Slurm::from_env()?)
    } else {
        None
    };
    let mut report = crate::check::run(&plan)?;
    let mut slurm_error = None;
    if let Some(s) = &slurm {
        match s.apply(&report) {
            Ok(outcome) => report.slurm = Some(outcome),
            Err(e) => slurm_error = Some(e),
        }
    }
    let format = args.format();
    match &args.output {
        Some(path) => write_atomically(path, &render(&report, format, Style::plain())?)?,
        None => report::emit(&render(&report, format, Style::detect())?)?,
    }
    if let Some(e) = slurm_error {
        let verdict = if report.passed { "passed" } else { "failed" };
        return Err(e.context(AfterReport(format!(
            "the checks {verdict}, but --slurm-drain could not update the node"
        ))));
    }
    if let Some(first) = first_failure(&report) {
        // NHC's format already said it on stdout, where NHC-style callers read.
        if format != CheckFormat::Nhc || args.output.is_some() {
            eprintln!(
                "rdmadiag: {} of {} checks failed: {first}",
                report.failed,
                report.checks.len()
            );
        }
        return Ok(exit::THRESHOLD);
    }
    Ok(exit::OK)
}
