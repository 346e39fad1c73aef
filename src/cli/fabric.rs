//! `rdmadiag fabric`'s flags: the launch, the pattern, the pair tests, the verdict's thresholds
//! and the outputs.

use super::{OutputArgs, PortChoiceArgs, PriorityArgs};
use crate::units::{parse_duration, parse_duration_with_unit, parse_msg_size, parse_rate};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// How the pairs are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatternArg {
    /// Every pair once, in N-1 rounds (N with a bye when N is odd).
    AllPairs,
    /// Each host with the next one.
    Ring,
    /// A few random perfect matchings, then suspects retested.
    Quick,
}

/// One pair test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FabricTest {
    /// RDMA WRITE bandwidth, both directions.
    Bw,
    /// RDMA WRITE latency (median half round trip).
    Lat,
}

#[derive(Debug, Args)]
pub struct FabricArgs {
    /// Every host of the run, in Slurm hostlist syntax (node[01-04,07]): each rank finds its
    /// position by hostname or local address. Without it the rank comes from Slurm, Open MPI,
    /// PMIx or Hydra.
    #[arg(long, value_name = "HOSTLIST", help_heading = "Launch")]
    pub hosts: Option<String>,

    /// Rank 0's host (and port, default 18600), where every rank meets: required under
    /// mpirun (or set RDMADIAG_COORDINATOR); by default the first host of Slurm's list or
    /// --hosts.
    #[arg(long, value_name = "HOST[:PORT]", help_heading = "Launch")]
    pub coordinator: Option<String>,

    /// Which pairs test each other.
    #[arg(long, value_enum, default_value = "all-pairs", help_heading = "Test")]
    pub pattern: PatternArg,

    /// The tests each pair runs, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "bw,lat",
        help_heading = "Test"
    )]
    pub tests: Vec<FabricTest>,

    /// The bandwidth test's message size.
    #[arg(short = 's', long = "size", value_name = "SIZE", default_value = "64K",
          value_parser = parse_msg_size, help_heading = "Test")]
    pub size: u32,

    /// Iterations of each test (bandwidth messages, latency round trips).
    #[arg(short = 'n', long = "iters", value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..), help_heading = "Test")]
    pub iterations: u64,

    #[command(flatten, next_help_heading = "Test")]
    pub port_choice: PortChoiceArgs,

    /// Every pair test's packets' priority.
    #[command(flatten, next_help_heading = "Test")]
    pub priority: PriorityArgs,

    /// Seed of --pattern quick's matchings (the same on every rank).
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = "Test")]
    pub seed: u64,

    /// A host, link or group is slow when its bandwidth is below this fraction of the
    /// reference (the median of the hosts' median bandwidths) and beyond the run's noise.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.9,
        help_heading = "Thresholds"
    )]
    pub min_bw_ratio: f64,

    /// A host or link is slow when its latency is above this multiple of the reference (the
    /// median of the hosts' median latencies) and beyond the run's noise.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 1.5,
        help_heading = "Thresholds"
    )]
    pub max_lat_ratio: f64,

    /// Also flag a pair whose bandwidth (either direction) is below this rate (10Gb/s, 1GB/s).
    #[arg(long = "expect-bw", value_name = "RATE", value_parser = parse_rate,
          help_heading = "Thresholds")]
    pub expect_bw: Option<f64>,

    /// Also flag a pair whose latency is above this (5us, 1ms).
    #[arg(long = "expect-lat", value_name = "DURATION", value_parser = parse_duration_with_unit,
          help_heading = "Thresholds")]
    pub expect_lat: Option<Duration>,

    /// Do not judge the error counters (they are still read and reported).
    #[arg(long, help_heading = "Thresholds")]
    pub no_counter_check: bool,

    /// Flag a pair whose error counter rose by more than N (default: a rise above what the
    /// run's own pairs show, Q3 + 3 x max(IQR, Q3, 1)).
    #[arg(
        long = "max-error-delta",
        value_name = "N",
        help_heading = "Thresholds"
    )]
    pub max_error_delta: Option<u64>,

    /// Also fail the run (exit 3) when these configuration fields differ between the hosts,
    /// comma-separated: firmware, driver, kernel, rdma-core, rdmadiag, numa (active MTU, rate,
    /// width, link layer, GID type and a PCIe link below its maximum fail by default; every
    /// difference is reported).
    #[arg(long, value_name = "FIELD,...", help_heading = "Thresholds")]
    pub require_same: Option<String>,

    /// Go on without ranks missing at the rendezvous (they are named, and the run exits 3).
    #[arg(long, help_heading = "Launch")]
    pub allow_missing: bool,

    /// Do not retest suspects against hosts that passed (every suspect stays one).
    #[arg(long, help_heading = "Test")]
    pub no_retest: bool,

    /// Retest rounds at most: a suspect is retested round after round until its figures decide
    /// (a fault reproduced stays, a retest at the ratio clears it); still undecided after N
    /// rounds, it is reported as undecided, not as a suspect.
    #[arg(long, value_name = "N", default_value_t = crate::fabric::verdict::RETEST_ROUNDS,
          value_parser = clap::value_parser!(u32).range(1..=32), help_heading = "Test")]
    pub retest_rounds: u32,

    /// The bound on each wait: joining the coordinator, each wait of a pair test for its peer;
    /// a round may last a few times this. A bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration,
          help_heading = "Launch")]
    pub timeout: Duration,

    /// Write one CSV row per pair to FILE (rank 0).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub csv: Option<PathBuf>,

    /// Write Prometheus metrics to FILE, atomically (for node_exporter's textfile collector).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub prometheus: Option<PathBuf>,

    /// Other ranks print a line per round on stderr; rank 0 adds status lines.
    #[arg(short = 'v', long, help_heading = "Output")]
    pub verbose: bool,

    #[command(flatten)]
    pub security: FabricSecurityArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// Who may join the run, and where its servers listen.
#[derive(Debug, Args)]
pub struct FabricSecurityArgs {
    /// Read the run's shared key from FILE (at least 16 bytes, mode 600; the same file on
    /// every rank). Only ranks that prove the run's credential join: this key, else
    /// RDMADIAG_FABRIC_KEY, else under srun a munge credential of the same uid and job step,
    /// made on the node that runs the rank it claims; with none of them the run refuses to
    /// start. Every later message is HMAC-signed (SECURITY in the man page).
    #[arg(long, value_name = "FILE", help_heading = "Security")]
    pub key_file: Option<PathBuf>,

    /// Run without any credential: ANYONE who can reach rank 0's port during the rendezvous can
    /// join the run, claim a rank and report forged figures.
    #[arg(long, help_heading = "Security")]
    pub insecure: bool,

    /// Listen on this local address only (rank 0's coordinator and every rank's test port);
    /// default: every address, as perftest.
    #[arg(long, value_name = "ADDR", help_heading = "Security")]
    pub bind: Option<std::net::IpAddr>,
}

/// `fabric --help`'s and the man page's description: what the command does, then the verdict's
/// rules with their defaults, and what they cannot see.
pub const FABRIC_ABOUT: &str = "\
Test every link of a cluster in parallel rounds of pairs (bw both ways, lat), launched by srun, \
mpirun or --hosts, and name the slow or failing host, link or group.

The verdict (on the scheduled pairs; a pair with a missing rank judges no one):

Reference and noise. Each host's score is the median of its own figures (bandwidth both ways; \
latency). The reference is the median of the hosts' scores, taken again without the hosts already \
beyond the ratio, so fewer than half the hosts cannot move it. The noise is the spread of each \
host's figures around its own median, pooled over the hosts, widened to its tail from 40 \
figures up, and never taken below 10 %. A figure stands out when it is beyond the ratio and \
beyond the noise: at least 4 standard errors of a median of that many figures, more with many \
tests (a 1 % chance over all of them).

bw-host, bw-send, bw-recv: a host whose score (or one direction's) is below --min-bw-ratio \
(default 0.9) x the reference and stands out. Found worst first; each next host is judged on \
its pairs with hosts not found yet, so a slow host does not make its partners look slow. Needs \
4 hosts, and 4 figures a host (5 for one direction). The rule says the direction: bw-send (it \
sends slowly) when what it receives is less than half as far below, bw-recv the reverse, \
bw-host both ways. A host with most of its pairs, two or more, slow in the direction it sends \
(receives), each beyond the noise or gross, is one bw-send (bw-recv) suspect, not that many \
links; those links are held and judged if its retests clear it.

bw-group: slow hosts that are faster among themselves than to the rest, beyond the noise: a \
switch, an uplink or a partition, reported once instead of host by host.

bw-link: each direction of a pair judged on its own, whatever its reverse does (a bad \
transmit lane, a dirty optic at one end): a direction below the ratio and beyond the noise, or \
at half the reference or below (the gross floor: no noise level hides it), or below the ratio \
where the retests can still decide; and a pair slow both ways by less (its two directions' \
geometric mean). A pair with a suspect host at one end is held (its bandwidth and its \
counters or failure alike: a slow NIC's queue drops make retransmits): judged only if that \
host's retests clear it.

lat-host, lat-link: the same for latency above --max-lat-ratio (default 1.5) x the reference. \
Their retests too: retests whose median is at the ratio or below clear it; it stays a suspect \
when two retests were at 3 x the reference or more (a stall reaches that once, a slow link \
every time), or when every retest is above the ratio and the retests alone stand out beyond the \
noise over two of them at least. One retest above the ratio is no longer enough: the lab's \
healthy latencies reach 1.62 x, and a stall on the scheduled test made a charge that one such \
retest confirmed.

counters: a pair whose error counter rose above what the run's own pairs show, Q3 + 3 x \
max(IQR, Q3, 1) over the pairs (or above --max-error-delta N). A counter that rose on half the \
pairs or more is one line of fabric-wide information (Soft-RoCE retransmits on every pair).

failure, counters, expect-bw, expect-lat: a host with most of its pairs (two or more) flagged \
by the rule is a suspect host, a lone flagged pair a suspect link; when most pairs are flagged \
by one rule (4 hosts or more) it is one failing fabric-wide finding instead of every host.

One suspect, one entry: the rules that charge the same host, link or group make one suspect, \
with every rule and reason under it.

Retests, round after round (--retest-rounds, default 4): each suspect runs again (a host against \
a host that passed, the next one each round; where every host is involved, over the least \
slow of its own links, never its slowest while another is left; a link again; a group's first \
member against a host outside it) until it is decided. Retests whose median is at the ratio \
clear it (a passing slowdown, a busy host). It stays a suspect when a direction was at half the reference or below twice (the \
schedule and a retest, or two retests), or when every retest is below the ratio and the \
retests alone stand out beyond the noise over two of them at least (one outlier is not a \
fault); a retest that failed keeps it too. A fault the retests reproduce is never cleared. A \
retest whose latency is 2 x the reference or more (and above --max-lat-ratio) ran while a host \
stalled (a paused guest, a host starved of CPU): its bandwidth counts neither way and the \
suspect is retested again; with stalled retests alone when the rounds run out, it is judged as \
one that could not be retested. \
Still undecided when the rounds run out, it is reported as undecided (not a suspect). The \
links a host held until the last round (cleared then, or undecided) get one more round of \
their own. A suspect that could not be retested (no host passed, --no-retest) stays one, \
unless all that charged it was a small deficit within the noise. Links confirmed slow the \
same way at one host on most of its pairs (two or more) are that host: one bw-send, bw-recv \
or bw-host suspect. The report says how many retests were run.

Configuration audit: every rank sends, with its hello, what it knows of the port it tests with \
(firmware, driver, kernel, rdma-core and rdmadiag versions, link layer, rate, width, active MTU, \
GID type, PCIe link, NUMA node); rank 0 takes the value most hosts have for each field and names \
the hosts that differ, or says no value has a majority. A difference that changes the data path \
(active MTU, rate, width, link layer, GID type, a PCIe link below its device's maximum) fails the \
run (exit 3) even when every link measures well (the path MTU falls to the smaller end's for every \
pair the host joins); firmware, driver, kernel, rdma-core, rdmadiag and NUMA node are reported, \
and fail with --require-same. A suspect host that a failing difference names gets it as its \
likely cause, in its note and the verdict line.

What it cannot see: with 2 or 3 hosts the ratio rules are off (which end of a slow pair is slow \
cannot be told; the output says so): use --expect-bw and --expect-lat. A fault shared by more \
than half the hosts becomes the reference: only --expect-bw/--expect-lat see it. A slowdown \
within the noise or above the ratio; and with --pattern ring or quick, the pairs not scheduled \
(a group needs pairs inside it).";
