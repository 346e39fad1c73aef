//! What a fabric run found (hosts, pairs, suspects, missing ranks) and how it reads: the host x
//! host matrices, the per-host summary, CSV rows and Prometheus metrics.

use super::{Style, finish};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One rank as it reported at the rendezvous.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub rank: u32,
    /// The name the report uses: the hostname, or `hostname/rank` when ranks share a hostname
    /// (several ranks on one machine) so each row stays its own.
    pub host: String,
    /// The kernel's hostname.
    pub hostname: String,
    pub device: String,
    pub port: u8,
    pub gid: String,
    /// The address peers reach its test port on.
    pub address: String,
    pub test_port: u16,
    /// What it said of its port for the configuration audit; None when it could not tell (or
    /// runs an rdmadiag older than the audit).
    #[serde(default)]
    pub config: Option<config::PortConfig>,
}

/// One pair's results (a is the lower rank). `bw_gbps` is a to b, `bw_gbps_reverse` b to a,
/// `lat_us` the median half round trip; None when that test was not run or failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    pub a: String,
    pub b: String,
    pub a_rank: u32,
    pub b_rank: u32,
    /// The round it ran in (1-based; retests follow the schedule's rounds).
    pub round: u32,
    pub bw_gbps: Option<f64>,
    pub bw_gbps_reverse: Option<f64>,
    pub lat_us: Option<f64>,
    /// Each host's error counter deltas over the pair's tests (counters that moved only).
    pub counters: BTreeMap<String, BTreeMap<String, u64>>,
    /// Why a test of the pair failed, if one did.
    pub error: Option<String>,
    pub flagged: bool,
    /// Why it is flagged: a sentence.
    pub reason: Option<String>,
    /// This entry is a retest of a suspect (run after the schedule, against a host that passed).
    pub retested: bool,
    /// A control pair (retested too): a pair the schedule measured healthy, run beside a retest
    /// round's retests so that round has the schedule's load; its bandwidth is their yardstick.
    /// Judged by no rule, never a suspect.
    #[serde(default)]
    pub control: bool,
    /// A retest's yardstick from its own round: the median bandwidth of the round's control
    /// pairs (both ways, without a failure or a stall), Gb/s; its figures are judged against it
    /// where it is above the reference beyond the noise. None: a scheduled pair, a control, or
    /// no control beside it (judged against the reference).
    #[serde(default)]
    pub control_bw_gbps: Option<f64>,
}

impl PairResult {
    /// The slower direction's bandwidth, when both (or one) were measured.
    pub fn bw_min(&self) -> Option<f64> {
        match (self.bw_gbps, self.bw_gbps_reverse) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Whether `host` is one of the pair.
    pub fn has(&self, host: &str) -> bool {
        self.a == host || self.b == host
    }
}

/// What the verdict singled out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Suspects {
    pub hosts: Vec<String>,
    pub links: Vec<[String; 2]>,
    /// Hosts fast among themselves and slow to the rest (a switch, an uplink), one list each.
    #[serde(default)]
    pub groups: Vec<Vec<String>>,
}

impl Suspects {
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.links.is_empty() && self.groups.is_empty()
    }
}

/// A rule of the verdict (in JSON and text by its kebab-case name: `bw-link`, `counters`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    Failure,
    Counters,
    ExpectBw,
    ExpectLat,
    BwHost,
    BwSend,
    BwRecv,
    BwGroup,
    BwLink,
    LatHost,
    LatLink,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Failure => "failure",
            Rule::Counters => "counters",
            Rule::ExpectBw => "expect-bw",
            Rule::ExpectLat => "expect-lat",
            Rule::BwHost => "bw-host",
            Rule::BwSend => "bw-send",
            Rule::BwRecv => "bw-recv",
            Rule::BwGroup => "bw-group",
            Rule::BwLink => "bw-link",
            Rule::LatHost => "lat-host",
            Rule::LatLink => "lat-link",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a suspect is: one host, one link between two, or a group of hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuspectKind {
    Host,
    Link,
    Group,
}

impl std::fmt::Display for SuspectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SuspectKind::Host => "host",
            SuspectKind::Link => "link",
            SuspectKind::Group => "group",
        })
    }
}

/// Which way a suspect is slow. A host: what it sends, what it receives, or both. A link
/// `[a, b]`: `send` is a to b, `receive` b to a.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Send,
    Receive,
    Both,
}

impl Direction {
    /// The union of two directions.
    pub fn and(self, other: Direction) -> Direction {
        if self == other { self } else { Direction::Both }
    }
}

/// A finding about the fabric as a whole: a rule that flagged most pairs, or error counters
/// that rose on most of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule: failure, counters, expect-bw, expect-lat.
    pub rule: Rule,
    /// It fails the run (exit 3); false: information only.
    pub fails: bool,
    /// Pairs it covers.
    pub pairs: u32,
    pub text: String,
}

/// Why a suspect is one, and what its retests said: one note per host, link or group, with
/// every rule that charged it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuspectNote {
    /// "host", "link" or "group".
    pub kind: SuspectKind,
    /// The host, the link as "a - b", or the group's hosts.
    pub name: String,
    /// The rule that decided: the first that its retests confirmed, else the first that
    /// charged it.
    pub rule: Rule,
    /// Every rule that charged it.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Which way it is slow (bandwidth rules only).
    #[serde(default)]
    pub direction: Option<Direction>,
    /// Each rule's figures, a sentence each, joined.
    pub reason: String,
    /// What the retests found: None when none could be run.
    pub retest: Option<String>,
    /// Retest pair tests run for it.
    #[serde(default)]
    pub retests: u32,
    /// Still a suspect after its retests (a retest reproduced the fault, or none could run).
    pub confirmed: bool,
    /// The retest budget ran out before the figures could decide (not a suspect; said).
    #[serde(default)]
    pub undecided: bool,
    /// A host's failing configuration findings, the likely cause of its slowness: "its config
    /// differs: active MTU 4096 against 1024 on 3 of 4". None for links, groups, and hosts the
    /// audit does not name.
    #[serde(default)]
    pub config: Option<String>,
}

/// What the retests cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RetestSummary {
    /// The budget: retest rounds at most (`--retest-rounds`; 0 with `--no-retest`).
    pub budget_rounds: u32,
    /// Retest rounds run.
    pub rounds: u32,
    /// Retest pair tests run (all rounds).
    pub pairs: u32,
    /// Suspects still undecided when the budget ran out.
    pub undecided: u32,
    /// Retest pair tests whose latency said a host stalled (their bandwidth counted neither way).
    #[serde(default)]
    pub stalled: u32,
    /// Control pair tests run beside the retests (not counted in `pairs`): pairs the schedule
    /// measured healthy, so a retest round has a scheduled round's load.
    #[serde(default)]
    pub controls: u32,
    /// Retest rounds (as run at once: a retest round's pairs are packed so no host runs two)
    /// where no control pair could run (every other host a suspect or busy): their retests
    /// are judged against the reference alone.
    #[serde(default)]
    pub rounds_without_controls: u32,
}

/// One host's pairs at a glance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    pub host: String,
    pub pairs: u32,
    pub flagged: u32,
    pub median_bw_gbps: Option<f64>,
    pub median_lat_us: Option<f64>,
    /// Its median bandwidth over the reference.
    #[serde(default)]
    pub bw_ratio: Option<f64>,
    /// Its median latency over the reference.
    #[serde(default)]
    pub lat_ratio: Option<f64>,
}

/// What the pairs were run with, and what they were judged against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricSettings {
    pub pattern: String,
    pub tests: Vec<String>,
    pub bw_size: u32,
    pub bw_iterations: u64,
    pub lat_size: u32,
    pub lat_iterations: u64,
    pub min_bw_ratio: f64,
    pub max_lat_ratio: f64,
    pub expect_bw_gbps: Option<f64>,
    pub expect_lat_us: Option<f64>,
    pub timeout_s: f64,
    /// Error counters are judged (off with --no-counter-check).
    pub counter_check: bool,
    /// --max-error-delta: the counter rise a pair may show (None: judged against the run's pairs).
    #[serde(default)]
    pub max_error_delta: Option<u64>,
    /// `--tclass`, `--sl`: the pair tests' RoCE traffic class and InfiniBand service level.
    #[serde(default)]
    pub tclass: u8,
    #[serde(default)]
    pub sl: u8,
    /// `--require-same`: the configuration fields whose difference fails the run besides those
    /// that change the data path.
    #[serde(default)]
    pub require_same: Vec<config::Field>,
}

/// A whole fabric run, as rank 0 reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricReport {
    pub settings: FabricSettings,
    pub rounds: u32,
    pub duration_s: f64,
    pub hosts: Vec<HostInfo>,
    pub pairs: Vec<PairResult>,
    /// The references the ratios are taken against: the median of the hosts' median figures
    /// (scheduled pairs only).
    pub median_bw_gbps: Option<f64>,
    pub median_lat_us: Option<f64>,
    /// The run's noise: the figures' spread around their hosts' medians (0.05 is 5 %).
    #[serde(default)]
    pub bw_spread: Option<f64>,
    #[serde(default)]
    pub lat_spread: Option<f64>,
    /// Each error counter's fence: a pair is flagged when its rise is above it.
    #[serde(default)]
    pub counter_fence: BTreeMap<String, u64>,
    /// Fabric-wide findings.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// What the verdict could not judge (too few hosts), a sentence each.
    #[serde(default)]
    pub limits: Vec<String>,
    pub suspects: Suspects,
    pub suspect_notes: Vec<SuspectNote>,
    /// What the retests cost.
    #[serde(default)]
    pub retests: RetestSummary,
    pub host_summary: Vec<HostSummary>,
    /// Ranks that did not join, or left mid-run, by host name (or "rank N" when never seen).
    pub missing: Vec<String>,
    /// What happened to each missing rank, a sentence each.
    pub missing_reasons: Vec<String>,
    /// Connections refused at the rendezvous, by address and reason: what did not prove it
    /// belongs to the run, or came when too many were waiting; and clients a rank's test port
    /// refused (without the pair's key), the reason naming that host's test port.
    #[serde(default)]
    pub refused: Vec<RefusedConnections>,
    /// The configuration audit: the fields whose value differs between the hosts (failures
    /// first).
    #[serde(default)]
    pub config: Vec<config::ConfigFinding>,
}

/// Connections refused at the rendezvous or at a rank's test port from one address for one
/// reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedConnections {
    /// The peer's IP address ("-" when the listener itself failed to accept).
    pub address: String,
    pub reason: String,
    pub count: u64,
}

/// The most distinct (address, reason) entries kept; beyond them refusals are counted in one.
pub const MAX_REFUSAL_ENTRIES: usize = 64;

impl RefusedConnections {
    /// Count one refusal in `list` (by address and reason, in the order first seen; past
    /// [`MAX_REFUSAL_ENTRIES`] kinds, in one entry for the rest). True when it is the first of
    /// its kind.
    pub fn count_in(list: &mut Vec<RefusedConnections>, address: String, reason: String) -> bool {
        let (address, reason) = if list.len() >= MAX_REFUSAL_ENTRIES
            && !list
                .iter()
                .any(|r| r.address == address && r.reason == reason)
        {
            ("-".into(), "other refusals (too many kinds to list)".into())
        } else {
            (address, reason)
        };
        if let Some(r) = list
            .iter_mut()
            .find(|r| r.address == address && r.reason == reason)
        {
            r.count += 1;
            return false;
        }
        list.push(RefusedConnections {
            address,
            reason,
            count: 1,
        });
        true
    }
}

/// Whether a verdict fails the run: a suspect, a failing fabric-wide finding, or a scheduled
/// pair that failed (a missing rank is the caller's to add).
pub fn verdict_fails(suspects: &Suspects, findings: &[Finding], pairs: &[PairResult]) -> bool {
    !suspects.is_empty()
        || findings.iter().any(|f| f.fails)
        || pairs.iter().any(|p| !p.retested && p.error.is_some())
}

impl FabricReport {
    /// Whether anything fails the run: what [`verdict_fails`] says, a missing rank, or a
    /// failing configuration finding.
    pub fn anything_flagged(&self) -> bool {
        !self.missing.is_empty()
            || verdict_fails(&self.suspects, &self.findings, &self.pairs)
            || self.config_fails()
    }

    /// Whether a configuration finding fails the run.
    pub fn config_fails(&self) -> bool {
        self.config
            .iter()
            .any(|f| f.severity == config::Severity::Failure)
    }
}

pub mod config;
mod text;
pub use text::{MATRIX_MAX_HOSTS, TEXT_MAX_ROWS, fabric_text};

#[cfg(test)]
pub(crate) mod tests;
