//! `rdmadiag fabric`'s flags: the launch, the pattern, the pair tests, the verdict's thresholds
//! and the outputs.

use super::{OutputArgs, PriorityArgs};
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

    /// Use this RDMA device (default: the first with an active port).
    #[arg(
        short = 'd',
        long = "device",
        value_name = "DEV",
        help_heading = "Test"
    )]
    pub device: Option<String>,

    /// Use this port of the device (1-based).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT",
          value_parser = clap::value_parser!(u8).range(1..), help_heading = "Test")]
    pub ib_port: Option<u8>,

    /// Use this GID index.
    #[arg(
        short = 'x',
        long = "gid-index",
        value_name = "IDX",
        help_heading = "Test"
    )]
    pub gid_index: Option<u32>,

    /// Every pair test's packets' priority.
    #[command(flatten, next_help_heading = "Test")]
    pub priority: PriorityArgs,

    /// Seed of --pattern quick's matchings (the same on every rank).
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = "Test")]
    pub seed: u64,

    /// Flag a pair whose bandwidth is below this fraction of the fabric's median.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.8,
        help_heading = "Thresholds"
    )]
    pub min_bw_ratio: f64,

    /// Flag a pair whose latency is above this multiple of the fabric's median.
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

    /// Do not flag a pair because its error counters rose (they are still read and reported):
    /// for a fabric whose links retransmit as a matter of course, such as Soft-RoCE under load.
    #[arg(long, help_heading = "Thresholds")]
    pub no_counter_check: bool,

    /// Go on without ranks missing at the rendezvous (they are named, and the run exits 3).
    #[arg(long, help_heading = "Launch")]
    pub allow_missing: bool,

    /// Do not retest suspects against hosts that passed.
    #[arg(long, help_heading = "Test")]
    pub no_retest: bool,

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
    pub output: OutputArgs,
}
