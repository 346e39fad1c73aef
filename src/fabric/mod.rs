//! `rdmadiag fabric`: test every link of a cluster in rounds of pairs, on an existing launcher
//! (Slurm, MPI or a host list); rank 0 coordinates, gathers and judges. Nothing here prints.

pub mod audit;
pub mod auth;
mod conn;
pub use conn::fit_descriptors;
pub mod coordinator;
pub mod hostlist;
pub mod launcher;
pub mod protocol;
pub mod rank;
pub mod runner;
pub mod schedule;
pub mod verdict;

use crate::report::fabric::{FabricReport, FabricSettings};
use anyhow::{Context as _, Result, anyhow};
use coordinator::{CoordinatorConfig, Outcome, Progress};
use launcher::Launch;
use rank::{PairRunner, RankConfig};
use schedule::Schedule;
use std::net::{IpAddr, TcpListener};
use std::time::Duration;

/// Everything one rank needs to take part.
#[derive(Debug, Clone)]
pub struct FabricPlan {
    pub launch: Launch,
    pub hostname: String,
    pub schedule: Schedule,
    pub thresholds: verdict::Thresholds,
    pub allow_missing: bool,
    /// The bound on joining (rendezvous) and on each wait of a pair test.
    pub timeout: Duration,
    /// The bound on one pair's tests.
    pub pair_deadline: Duration,
    /// How the ranks prove they belong to the run.
    pub auth: auth::Auth,
    /// The address rank 0's coordinator and every rank's test port listen on.
    pub bind: IpAddr,
    /// `--require-same`: configuration fields whose difference fails the run.
    pub require_same: Vec<crate::report::fabric::config::Field>,
}

impl FabricPlan {
    /// How long every rank has to finish one round.
    pub fn round_timeout(&self) -> Duration {
        self.pair_deadline + Duration::from_secs(10)
    }
}

/// What this rank's part ended with: the run's exit code, and on rank 0 the whole outcome.
pub struct RankEnd {
    pub exit_code: u8,
    pub outcome: Option<Outcome>,
    /// Rank 0's own part failed although the coordinator finished (its pairs say how).
    pub rank_error: Option<anyhow::Error>,
}

/// Take part in the run: rank 0 also coordinates (on a thread, listening on the coordinator's
/// port on `plan.bind`, every address by default).
pub fn run(
    plan: &FabricPlan,
    runner: &dyn PairRunner,
    progress: &dyn Progress,
    log: &dyn Fn(&str),
) -> Result<RankEnd> {
    let l = &plan.launch;
    let test_listener = TcpListener::bind((plan.bind, 0))
        .with_context(|| format!("binding this rank's test port on {}", plan.bind))?;
    let rank_cfg = RankConfig {
        rank: l.rank,
        size: l.size,
        hostname: plan.hostname.clone(),
        coordinator: l.coordinator.clone(),
        connect_timeout: plan.timeout,
        wait_timeout: plan.round_timeout() + plan.timeout + Duration::from_secs(30),
        auth: plan.auth.clone(),
    };
    if l.rank != 0 {
        let code = rank::run_rank(&rank_cfg, runner, &test_listener, log)?;
        return Ok(RankEnd {
            exit_code: code,
            outcome: None,
            rank_error: None,
        });
    }
    let port = l.coordinator.1;
    let listener = TcpListener::bind((plan.bind, port)).map_err(|e| {
        anyhow!("rank 0 cannot listen for the other ranks on {}:{port}: {e} (another run, or --coordinator HOST:PORT with a free port, or --bind)", plan.bind)
    })?;
    let cfg = CoordinatorConfig {
        size: l.size,
        schedule: plan.schedule.clone(),
        allow_missing: plan.allow_missing,
        rendezvous_timeout: plan.timeout,
        round_timeout: plan.round_timeout(),
        thresholds: plan.thresholds,
        auth: plan.auth.clone(),
        require_same: plan.require_same.clone(),
    };
    std::thread::scope(|s| {
        let coordinating = s.spawn(|| coordinator::coordinate(listener, &cfg, progress));
        let mine = rank::run_rank(&rank_cfg, runner, &test_listener, log);
        let outcome = coordinating
            .join()
            .map_err(|_| anyhow!("the fabric coordinator thread panicked"))??;
        Ok(RankEnd {
            exit_code: outcome.exit_code,
            outcome: Some(outcome),
            rank_error: mine.err(),
        })
    })
}

/// Rank 0's report of the run.
pub fn report(outcome: Outcome, settings: FabricSettings, duration: Duration) -> FabricReport {
    let names: Vec<String> = outcome.hosts.iter().map(|h| h.host.clone()).collect();
    let host_summary = verdict::host_summary(&names, &outcome.pairs, &outcome.reference);
    FabricReport {
        settings,
        rounds: outcome.rounds,
        duration_s: duration.as_secs_f64(),
        hosts: outcome.hosts,
        pairs: outcome.pairs,
        median_bw_gbps: outcome.reference.bw_gbps,
        median_lat_us: outcome.reference.lat_us,
        bw_spread: outcome.reference.bw_spread,
        lat_spread: outcome.reference.lat_spread,
        counter_fence: outcome.reference.counter_fence,
        findings: outcome.findings,
        limits: outcome.limits,
        suspects: outcome.suspects,
        suspect_notes: outcome.notes,
        retests: outcome.retests,
        host_summary,
        missing: outcome.missing,
        missing_reasons: outcome.missing_reasons,
        refused: outcome.refused,
        config: outcome.config,
    }
}
