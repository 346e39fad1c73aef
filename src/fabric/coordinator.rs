//! Rank 0's coordinator: the TCP rendezvous, one barrier per round, the gather of each pair's
//! results, the retests of suspects and the verdict. Every wait has a deadline; a rank that
//! does not join, dies or overruns a round is named and the run goes on without it.
//! The messages it exchanges with the ranks are in [`super::protocol`]; who may join, in
//! [`super::auth`]. A connection costs it a bounded amount: at most `size` + [`SLACK`]
//! connections waiting to join, each with one deadline for its credential and hello in all,
//! lines of at most [`super::protocol::MAX_LINE`] bytes (see [`super::conn`]).

use super::audit;
use super::auth::Auth;
use super::conn::{self, Conn, Event, Rendezvous};
use super::protocol::{PairSide, Peer, ToCoordinator, ToRank};
use super::schedule::{Pair, Schedule};
use super::verdict::{self, Thresholds};
use crate::connect::key::TestKey;
use crate::report::fabric::config::{ConfigFinding, Field, Severity};
use crate::report::fabric::{
    Finding, HostInfo, PairResult, RefusedConnections, RetestSummary, SuspectKind, SuspectNote,
    Suspects,
};
use anyhow::{Context as _, Result, bail};

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How the coordinator runs.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    pub size: u32,
    pub schedule: Schedule,
    pub allow_missing: bool,
    /// How long the ranks have to join.
    pub rendezvous_timeout: Duration,
    /// How long every rank has to finish a round.
    pub round_timeout: Duration,
    /// What pairs are judged against, the retest budget included.
    pub thresholds: Thresholds,
    /// Who may join.
    pub auth: Auth,
    /// The configuration fields whose difference fails the run besides those that change the
    /// data path (`--require-same`).
    pub require_same: Vec<Field>,
}

/// What rank 0 shows while the rounds run.
pub trait Progress: Sync {
    /// Before the first round: the plan.
    fn plan(&self, _pairs: usize, _rounds: usize) {}
    /// After each round (`done` of `total`, retests included once planned).
    fn round_done(&self, _done: usize, _total: usize) {}
    /// A connection was refused at the rendezvous (who, and what failed).
    fn refused(&self, _why: &str) {}
}

/// Shows nothing.
pub struct Quiet;
impl Progress for Quiet {}

/// The run as the coordinator saw it.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub hosts: Vec<HostInfo>,
    pub pairs: Vec<PairResult>,
    pub rounds: u32,
    pub reference: verdict::Reference,
    pub findings: Vec<Finding>,
    pub limits: Vec<String>,
    pub suspects: Suspects,
    pub notes: Vec<SuspectNote>,
    pub retests: RetestSummary,
    /// Names of ranks missing at the end (host names, or "rank N" for one that never joined).
    pub missing: Vec<String>,
    pub missing_reasons: Vec<String>,
    /// Connections refused at the rendezvous, then clients refused by the ranks' test ports,
    /// by address and reason.
    pub refused: Vec<RefusedConnections>,
    /// The configuration audit's findings over the ranks' hellos.
    pub config: Vec<ConfigFinding>,
    /// The run's exit code: 1 a rank went missing (without --allow-missing), 3 something is
    /// flagged (the verdict, or a failing configuration finding), 0 nothing.
    pub exit_code: u8,
}

/// How often a wait looks whether a signal asked the run to stop.
const STOP_POLL: Duration = Duration::from_millis(200);

/// The coordinator's state across rounds.
struct Run<'a> {
    cfg: &'a CoordinatorConfig,
    conns: BTreeMap<usize, Conn>,
    rx: mpsc::Receiver<(usize, Event)>,
    /// rank -> connection, while the rank is live.
    live: BTreeMap<u32, usize>,
    hosts: BTreeMap<u32, HostInfo>,
    /// rank -> why it is missing.
    gone: BTreeMap<u32, String>,
    /// Refused at the rendezvous, then by the ranks' test ports.
    refused: Vec<RefusedConnections>,
}

impl Run<'_> {
    fn conn_rank(&self, id: usize) -> Option<u32> {
        self.live.iter().find(|(_, c)| **c == id).map(|(r, _)| *r)
    }

    fn label(&self, rank: u32) -> String {
        self.hosts
            .get(&rank)
            .map_or_else(|| format!("rank {rank}"), |h| h.host.clone())
    }

    fn lose(&mut self, rank: u32, why: String) {
        // Dropping its connection shuts it down.
        if let Some(id) = self.live.remove(&rank) {
            self.conns.remove(&id);
        }
        self.gone.entry(rank).or_insert(why);
    }

    fn tell(&mut self, rank: u32, msg: &ToRank) {
        let Some(&id) = self.live.get(&rank) else {
            return;
        };
        let sent = match self.conns.get_mut(&id) {
            Some(Conn {
                sealer: Some(sealer),
                writer,
                ..
            }) => sealer.send(writer, msg),
            _ => Err(std::io::Error::other("it has not joined")),
        };
        if let Err(e) = sent {
            let why = format!(
                "rank {rank} ({}) could not be sent to: {e}",
                self.label(rank)
            );
            self.lose(rank, why);
        }
    }

    /// One round: tell every live rank its peer (or its bye), wait for all of them, merge.
    fn round(&mut self, round: u32, pairs: &[Pair], retested: bool) -> Result<Vec<PairResult>> {
        let mut results = Vec::new();
        let mut peer_of: BTreeMap<u32, (u32, bool, String)> = BTreeMap::new();
        for &(a, b) in pairs {
            let dead: Vec<u32> = [a, b]
                .into_iter()
                .filter(|r| !self.live.contains_key(r))
                .collect();
            if dead.is_empty() {
                let key = TestKey::random()
                    .context("making a pair's test-port key")?
                    .to_hex();
                peer_of.insert(a, (b, true, key.clone()));
                peer_of.insert(b, (a, false, key));
                continue;
            }
            let why: Vec<String> = dead
                .iter()
                .map(|r| format!("rank {r} ({}) is missing", self.label(*r)))
                .collect();
            results.push(self.merge(round, (a, b), None, None, retested, Some(why.join("; "))));
        }
        let ranks: Vec<u32> = self.live.keys().copied().collect();
        for r in &ranks {
            let msg = ToRank::Round {
                round,
                peer: peer_of.get(r).map(|(p, _, _)| {
                    let h = &self.hosts[p];
                    Peer {
                        rank: *p,
                        host: h.host.clone(),
                        address: h.address.clone(),
                        test_port: h.test_port,
                    }
                }),
                first: peer_of.get(r).is_some_and(|(_, first, _)| *first),
                pair_key: peer_of.get(r).map(|(_, _, key)| key.clone()),
            };
            self.tell(*r, &msg);
        }
        let deadline = Instant::now() + self.cfg.round_timeout;
        let mut sides: BTreeMap<u32, PairSide> = BTreeMap::new();
        while sides.len() < self.live.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.check_stop(round)?;
            let Ok((id, ev)) = self.rx.recv_timeout(left.min(STOP_POLL)) else {
                continue;
            };
            let Some(rank) = self.conn_rank(id) else {
                continue;
            };
            match ev {
                Event::Msg(ToCoordinator::Done { round: r, mut side }) if r == round => {
                    let host = self.label(rank);
                    for c in std::mem::take(&mut side.refused) {
                        let reason = format!("on {host}'s test port: {}", c.reason);
                        RefusedConnections::count_in(&mut self.refused, c.address, reason);
                    }
                    sides.insert(rank, side);
                }
                Event::Msg(_) | Event::Joined(_) | Event::Refused(_) => {}
                Event::Closed(why) => {
                    let msg = format!(
                        "rank {rank} ({}) left in round {round}: {why}",
                        self.label(rank)
                    );
                    self.lose(rank, msg);
                }
            }
        }
        let late: Vec<u32> = self
            .live
            .keys()
            .copied()
            .filter(|r| !sides.contains_key(r))
            .collect();
        for r in late {
            let msg = format!(
                "rank {r} ({}) did not finish round {round} within {}",
                self.label(r),
                humantime::format_duration(self.cfg.round_timeout)
            );
            self.lose(r, msg);
        }
        for &(a, b) in pairs {
            if !peer_of.contains_key(&a) {
                continue; // recorded above
            }
            let (sa, sb) = (sides.remove(&a), sides.remove(&b));
            let why = [(a, &sa), (b, &sb)]
                .iter()
                .filter(|(_, s)| s.is_none())
                .map(|(r, _)| {
                    self.gone
                        .get(r)
                        .cloned()
                        .unwrap_or_else(|| format!("rank {r} sent nothing"))
                })
                .collect::<Vec<_>>();
            let why = (!why.is_empty()).then(|| why.join("; "));
            results.push(self.merge(round, (a, b), sa, sb, retested, why));
        }
        Ok(results)
    }

    /// After SIGINT or SIGTERM: tell every rank the run is over, and stop.
    fn check_stop(&mut self, round: u32) -> Result<()> {
        if !crate::exit::STOP.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let reason = format!("rank 0 was stopped in round {round}");
        for r in self.live.keys().copied().collect::<Vec<_>>() {
            self.tell(
                r,
                &ToRank::Abort {
                    reason: reason.clone(),
                },
            );
        }
        Err(anyhow::Error::new(crate::exit::Interrupted).context(reason))
    }

    fn merge(
        &self,
        round: u32,
        (a, b): Pair,
        sa: Option<PairSide>,
        sb: Option<PairSide>,
        retested: bool,
        missing: Option<String>,
    ) -> PairResult {
        let (la, lb) = (self.label(a), self.label(b));
        let mut errors: Vec<String> = missing.into_iter().collect();
        let mut counters = BTreeMap::new();
        for (l, s) in [(&la, &sa), (&lb, &sb)] {
            if let Some(s) = s {
                if let Some(e) = &s.error {
                    errors.push(format!("{l}: {e}"));
                }
                counters.insert(l.clone(), s.counters.clone());
            }
        }
        counters.retain(|_, m: &mut BTreeMap<String, u64>| !m.is_empty());
        PairResult {
            a: la,
            b: lb,
            a_rank: a,
            b_rank: b,
            round,
            bw_gbps: sa.as_ref().and_then(|s| s.bw_gbps),
            bw_gbps_reverse: sb.as_ref().and_then(|s| s.bw_gbps),
            lat_us: sa.as_ref().and_then(|s| s.lat_us),
            counters,
            error: (!errors.is_empty()).then(|| errors.join("; ")),
            flagged: false,
            reason: None,
            retested,
            control: false,
            control_bw_gbps: None,
        }
    }
}

/// The names ranks go by in the report: the hostname, or `hostname/rank` for ranks sharing one.
pub fn labels(hostnames: &[(u32, String)]) -> BTreeMap<u32, String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, h) in hostnames {
        *count.entry(h).or_default() += 1;
    }
    hostnames
        .iter()
        .map(|(r, h)| {
            let l = if count[h.as_str()] > 1 {
                format!("{h}/{r}")
            } else {
                h.clone()
            };
            (*r, l)
        })
        .collect()
}

/// Run the coordinator on `listener` until the verdict; every rank (rank 0 included) connects
/// to it. Fails when ranks are missing at the rendezvous without `allow_missing`.
pub fn coordinate(
    listener: TcpListener,
    cfg: &CoordinatorConfig,
    progress: &dyn Progress,
) -> Result<Outcome> {
    listener
        .set_nonblocking(true)
        .context("making the coordinator's listener non-blocking")?;
    let (tx, rx) = mpsc::channel();
    let mut run = Run {
        cfg,
        conns: BTreeMap::new(),
        rx,
        live: BTreeMap::new(),
        hosts: BTreeMap::new(),
        gone: BTreeMap::new(),
        refused: Vec::new(),
    };
    let Rendezvous {
        conns,
        hellos,
        bound,
        refused,
    } = conn::rendezvous(
        listener,
        &conn::Expected {
            size: cfg.size,
            auth: &cfg.auth,
            timeout: cfg.rendezvous_timeout,
            shown: &|why| progress.refused(why),
        },
        &run.rx,
        tx,
    )?;
    run.conns = conns;
    run.refused = refused;
    // A rank on the coordinator's own host that dialled a loopback name gets the address the
    // other hosts reached the coordinator on.
    let outside = bound
        .values()
        .filter_map(|id| run.conns.get(id).and_then(|c| c.local))
        .find(|ip| !ip.is_loopback());
    let names: Vec<(u32, String)> = hellos
        .iter()
        .map(|(r, h)| (*r, h.hostname.clone()))
        .collect();
    let labels = labels(&names);
    for (r, h) in &hellos {
        let id = bound[r];
        let seen = run.conns.get(&id).and_then(|c| c.peer);
        let address = match (&h.address, seen) {
            (Some(a), _) => a.clone(),
            (None, Some(ip)) if ip.is_loopback() && outside.is_some() => {
                outside.unwrap().to_string()
            }
            (None, Some(ip)) => ip.to_string(),
            (None, None) => h.hostname.clone(),
        };
        run.hosts.insert(
            *r,
            HostInfo {
                rank: *r,
                host: labels[r].clone(),
                hostname: h.hostname.clone(),
                device: h.device.clone(),
                port: h.port,
                gid: h.gid.clone(),
                address,
                test_port: h.test_port,
                config: h.config.clone().map(|c| c.bounded()),
            },
        );
        run.live.insert(*r, id);
    }
    let absent: Vec<u32> = (0..cfg.size).filter(|r| !hellos.contains_key(r)).collect();
    let kept_out = kept_out(&run.refused);
    for r in &absent {
        run.gone.insert(
            *r,
            format!(
                "rank {r} did not join within {}{kept_out}",
                humantime::format_duration(cfg.rendezvous_timeout)
            ),
        );
    }
    if !absent.is_empty() && (!cfg.allow_missing || run.live.len() < 2) {
        let list: Vec<String> = absent.iter().map(u32::to_string).collect();
        let reason = format!(
            "{} of {} ranks missing at the rendezvous after {} (rank {}){}",
            absent.len(),
            cfg.size,
            humantime::format_duration(cfg.rendezvous_timeout),
            list.join(", "),
            if cfg.allow_missing {
                ": fewer than 2 ranks joined"
            } else {
                ": start them, or pass --allow-missing to test without them"
            }
        );
        let reason = format!("{reason}{kept_out}");
        for r in run.live.keys().copied().collect::<Vec<_>>() {
            run.tell(
                r,
                &ToRank::Abort {
                    reason: reason.clone(),
                },
            );
        }
        bail!(reason);
    }

    let total = cfg.schedule.rounds();
    progress.plan(cfg.schedule.pairs(), total);
    let mut pairs = Vec::new();
    for r in 0..total {
        pairs.extend(run.round(r as u32 + 1, &cfg.schedule.round(r), false)?);
        progress.round_done(r + 1, total);
    }

    let missing_names: BTreeSet<String> = run.gone.keys().map(|r| run.label(*r)).collect();
    let ranks: Vec<(u32, String)> = run
        .hosts
        .iter()
        .map(|(r, h)| (*r, h.host.clone()))
        .collect();
    let mut rounds = total as u32;
    let v = verdict::judge(
        &mut pairs,
        &ranks,
        &missing_names,
        &cfg.thresholds,
        // One retest round at a time, its retests and controls at once (the verdict plans it).
        |planned| {
            rounds += 1;
            let out = run.round(rounds, &planned.pairs(), true)?;
            progress.round_done(rounds as usize, rounds as usize);
            Ok::<_, anyhow::Error>(out)
        },
    )?;

    let missing: Vec<String> = run.gone.keys().map(|r| run.label(*r)).collect();
    let missing_reasons: Vec<String> = run.gone.values().cloned().collect();
    let configs: Vec<(String, _)> = run
        .hosts
        .values()
        .filter_map(|h| Some((h.host.clone(), h.config.clone()?)))
        .collect();
    let config = audit::audit(&configs, &cfg.require_same);
    let mut exit_code = v.exit_code(&pairs, missing.len(), cfg.allow_missing);
    let mut notes = v.notes;
    for n in notes.iter_mut().filter(|n| n.kind == SuspectKind::Host) {
        n.config = audit::cause(&config, &n.name);
    }
    if exit_code == crate::exit::OK && config.iter().any(|f| f.severity == Severity::Failure) {
        exit_code = crate::exit::THRESHOLD;
    }
    for r in run.live.keys().copied().collect::<Vec<_>>() {
        run.tell(r, &ToRank::Finish { exit_code });
    }
    for c in run.conns.values() {
        let _ = c.writer.shutdown(std::net::Shutdown::Write);
    }
    Ok(Outcome {
        hosts: run.hosts.into_values().collect(),
        pairs,
        rounds,
        reference: v.reference,
        findings: v.findings,
        limits: v.limits,
        suspects: v.suspects,
        notes,
        retests: v.retests,
        missing,
        missing_reasons,
        refused: run.refused,
        config,
        exit_code,
    })
}

/// What a missing rank's reason adds when connections were refused at the rendezvous: the rank
/// may have been kept out by them, not be down.
fn kept_out(refused: &[RefusedConnections]) -> String {
    let count: u64 = refused.iter().map(|r| r.count).sum();
    if count == 0 {
        return String::new();
    }
    // Each address once, in the order first refused (entries are per address and reason).
    let mut from: Vec<&str> = Vec::new();
    for r in refused {
        if !from.contains(&r.address.as_str()) {
            from.push(&r.address);
        }
    }
    let shown = from.iter().take(3).copied().collect::<Vec<_>>().join(", ");
    let more = if from.len() > 3 { ", ..." } else { "" };
    format!(
        " ({count} connection(s) were refused meanwhile, from {shown}{more}: it may have been \
         kept out by them rather than be down; see refused)"
    )
}
