//! The real pair runner: bw both ways and lat between the two ranks of a pair, in-process
//! through the library API (this rank serves on its bound test port or dials the peer's), with
//! the port's error counters read before and after.

use super::protocol::{MAX_REFUSED_PER_PAIR, PairSide, RefusedClient};
use super::rank::{Identity, PairRunner, PairTest};
use crate::connect::control::{LAT_INLINE, LinkSpec, PerfSpec, Priority, QpType, Test, TestSpec};
use crate::connect::endpoint::PortChoice;
use crate::counters::Before;
use crate::perf::{Op, Unobserved};
use crate::report::fabric::config::PortConfig;
use crate::session::{RefusalSink, SessionOptions};
use crate::{Role, TestReport};
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The tests a pair runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairTestKind {
    Bw,
    Lat,
}

/// What each pair runs, and the bound on each of its waits.
#[derive(Debug, Clone)]
pub struct PairSettings {
    pub bw: bool,
    pub lat: bool,
    pub bw_size: u32,
    pub bw_iterations: u64,
    pub lat_size: u32,
    pub lat_iterations: u64,
    /// Each test's longest wait for the peer (connect, each message, each completion, and the
    /// server's wait for its client).
    pub timeout: Duration,
    pub choice: PortChoice,
    /// `--tclass`, `--sl`: every pair test's packets' priority.
    pub priority: Priority,
}

impl PairSettings {
    /// The tests in the order both ends run them: (test, whether a is the client).
    fn steps(&self) -> Vec<(PairTestKind, bool)> {
        let mut v = Vec::new();
        if self.bw {
            v.push((PairTestKind::Bw, true));
            v.push((PairTestKind::Bw, false));
        }
        if self.lat {
            v.push((PairTestKind::Lat, true));
        }
        v
    }

    /// How long one pair may take at most: every test bounded by a few of its waits.
    pub fn pair_deadline(&self) -> Duration {
        self.timeout
            .saturating_mul((3 * self.steps().len() as u32).max(1))
    }

    fn spec(&self, kind: PairTestKind) -> TestSpec {
        let test = match kind {
            PairTestKind::Bw => Test::Bw(PerfSpec {
                tx_depth: 128,
                cq_mod: 100,
                ..PerfSpec::one_at_a_time(Op::Write, vec![self.bw_size], self.bw_iterations, None)
            }),
            PairTestKind::Lat => Test::Lat(PerfSpec {
                inline: LAT_INLINE,
                ..PerfSpec::one_at_a_time(Op::Write, vec![self.lat_size], self.lat_iterations, None)
            }),
        };
        TestSpec {
            link: LinkSpec::plain(QpType::Rc).with_priority(self.priority),
            test,
        }
    }
}

/// Runs each pair's tests on this host's RDMA port.
pub struct VerbsRunner {
    pub settings: PairSettings,
    pub identity: Identity,
    /// What this rank says of its port for the configuration audit.
    pub config: Option<PortConfig>,
}

impl VerbsRunner {
    /// Pick this host's port (the named device, port and GID, or the first active one).
    pub fn new(settings: PairSettings) -> Result<VerbsRunner> {
        let port = crate::connect::endpoint::choose_port(&settings.choice, None)?;
        let identity = Identity {
            device: port.ctx.name().to_string(),
            port: port.port,
            gid: port
                .gid
                .as_ref()
                .map(|g| g.gid.to_string())
                .unwrap_or_default(),
        };
        // After the device was opened, so that libibverbs is mapped and tells rdma-core's
        // release.
        let config = super::audit::gather(
            &identity.device,
            identity.port,
            port.gid.as_ref().map(|g| &g.gid),
        );
        Ok(VerbsRunner {
            settings,
            identity,
            config,
        })
    }

    fn options(&self) -> SessionOptions {
        let s = &self.settings;
        let choice = PortChoice {
            device: Some(self.identity.device.clone()),
            port: Some(self.identity.port),
            gid_index: s.choice.gid_index,
        };
        SessionOptions::in_process(choice, 0, s.timeout)
    }

    /// One test of the pair, this side's part; Some(figure) when this side is the client.
    fn step(
        &self,
        t: &PairTest,
        kind: PairTestKind,
        a_is_client: bool,
        refusals: &RefusalSink,
    ) -> Result<Option<f64>> {
        let client = a_is_client == t.first;
        let opts = SessionOptions {
            key: t.key.clone(),
            refusals: refusals.clone(),
            ..self.options()
        };
        if !client {
            crate::serve_on(t.listener, &opts)?;
            return Ok(None);
        }
        let opts = SessionOptions {
            port: t.peer.test_port,
            ..opts
        };
        let role = Role::Client {
            host: t.peer.address.clone(),
        };
        let TestReport::Perf(r) = crate::run(&self.settings.spec(kind), &opts, role, &Unobserved)?
        else {
            bail!("the {kind:?} test produced no perf report");
        };
        Ok(match kind {
            PairTestKind::Bw => r.bw.first().map(|b| b.bw_avg_gbps),
            PairTestKind::Lat => r.lat.first().map(|l| l.latency.median_us),
        })
    }
}

impl PairRunner for VerbsRunner {
    fn identity(&self) -> Result<Identity> {
        Ok(self.identity.clone())
    }

    fn config(&self) -> Option<PortConfig> {
        self.config.clone()
    }

    fn run(&self, t: &PairTest) -> PairSide {
        let id = &self.identity;
        let root = crate::sysfs::class_root();
        let before = Before::read(&root, Some(&id.device), Some(id.port));
        let mut side = PairSide::default();
        let mut errors = Vec::new();
        // Clients this rank's test port refuses during the pair, for rank 0's report.
        let refused = Arc::new(Mutex::new(Vec::new()));
        let kept = refused.clone();
        let refusals = RefusalSink::new(move |address, why| {
            let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
            if kept.len() < MAX_REFUSED_PER_PAIR {
                kept.push(RefusedClient {
                    address: address.to_string(),
                    reason: why.chars().take(200).collect(),
                });
            }
        });
        for (kind, a_is_client) in self.settings.steps() {
            let name = match (kind, a_is_client == t.first) {
                (PairTestKind::Bw, true) => format!("bw to {}", t.peer.host),
                (PairTestKind::Bw, false) => format!("bw from {}", t.peer.host),
                (PairTestKind::Lat, _) => format!("lat with {}", t.peer.host),
            };
            match self.step(t, kind, a_is_client, &refusals) {
                Ok(Some(v)) if kind == PairTestKind::Bw => side.bw_gbps = Some(v),
                Ok(Some(v)) => side.lat_us = Some(v),
                Ok(None) => {}
                Err(e) => errors.push(format!("{name} failed: {e:#}")),
            }
        }
        if let Some(d) = before.since(&id.device, id.port) {
            side.counters = d
                .errors()
                .map(|c| (c.name.clone(), c.delta))
                .collect::<BTreeMap<_, _>>();
        }
        side.error = (!errors.is_empty()).then(|| errors.join("; "));
        side.refused = std::mem::take(&mut *refused.lock().unwrap_or_else(|p| p.into_inner()));
        side
    }
}
