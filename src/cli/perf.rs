//! The options of `bw`, `lat`, `write` and `read`, and the engine types they map onto.

use super::{ConnectArgs, OutputArgs, PerfCompat, TransportArgs};
use crate::connect::control;
use crate::units::{
    parse_duration, parse_duration_with_unit, parse_msg_rate, parse_msg_rate_mpps, parse_msg_size,
    parse_rate, parse_rate_gbits,
};
use clap::{Args, ValueEnum};
use std::time::Duration;

/// The transport of the test QPs (the command line's spelling of [`control::QpType`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "UPPER")]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl From<Transport> for control::QpType {
    fn from(t: Transport) -> Self {
        match t {
            Transport::Rc => control::QpType::Rc,
            Transport::Uc => control::QpType::Uc,
            Transport::Ud => control::QpType::Ud,
        }
    }
}

/// The operation a test measures (the command line's spelling of [`control::Op`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Op {
    Send,
    Write,
    Read,
    /// 8-byte atomic fetch-and-add on the server's buffer (RC; checked: exit 4 if it differs).
    AtomicFadd,
    /// 8-byte atomic compare-and-swap on the server's buffer (RC; checked: exit 4 if it differs).
    AtomicCswap,
}

/// perftest's `-A` (ib_atomic_bw/lat): which atomic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PerftestAtomic {
    #[value(name = "FETCH_AND_ADD")]
    FetchAndAdd,
    #[value(name = "CMP_AND_SWAP")]
    CmpAndSwap,
}

impl From<Op> for control::Op {
    fn from(o: Op) -> Self {
        match o {
            Op::Send => control::Op::Send,
            Op::Write => control::Op::Write,
            Op::Read => control::Op::Read,
            Op::AtomicFadd => control::Op::AtomicFadd,
            Op::AtomicCswap => control::Op::AtomicCswap,
        }
    }
}

/// How latency samples are taken (the command line's spelling of [`control::LatTiming`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LatTiming {
    /// As perftest's ib_*_lat: every operation signalled, its completion polled in the sample.
    Perftest,
    /// A completion every 16th operation, reaped outside the samples.
    Lean,
}

impl From<LatTiming> for control::LatTiming {
    fn from(t: LatTiming) -> Self {
        match t {
            LatTiming::Perftest => control::LatTiming::Perftest,
            LatTiming::Lean => control::LatTiming::Lean,
        }
    }
}

/// Bandwidth units for tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Units {
    /// Gigabits per second (10^9 bits).
    Gbit,
    /// Mebibytes per second (2^20 bytes), as perftest prints by default.
    Mib,
}

impl From<Units> for crate::report::perf::BwUnit {
    fn from(u: Units) -> Self {
        match u {
            Units::Gbit => crate::report::perf::BwUnit::Gbit,
            Units::Mib => crate::report::perf::BwUnit::Mib,
        }
    }
}

/// What bw and lat share: the operation, transport, sizes, and how long to run.
#[derive(Debug, Args)]
#[command(next_help_heading = "Test")]
pub struct PerfCommon {
    /// The operation to measure.
    #[arg(
        long = "op",
        value_enum,
        default_value = "write",
        help_heading = "Test"
    )]
    pub op: Op,

    /// perftest's -A FETCH_AND_ADD|CMP_AND_SWAP: --op atomic-fadd or --op atomic-cswap.
    #[arg(
        short = 'A',
        long = "atomic_type",
        value_enum,
        value_name = "TYPE",
        conflicts_with = "op",
        hide = true
    )]
    pub perftest_atomic: Option<PerftestAtomic>,

    #[command(flatten)]
    pub connection: TransportArgs,

    /// Message size; K, M and G are binary (64K = 65536). Default: 64K for bw, 2 for lat, 8
    /// for atomics (which move 8 bytes, no other size).
    #[arg(short = 's', long = "size", value_name = "SIZE", value_parser = parse_msg_size,
          conflicts_with_all = ["all", "sizes"], help_heading = "Test")]
    pub size: Option<u32>,

    /// Sweep sizes 2 B to 8 MiB in powers of two.
    #[arg(
        short = 'a',
        long = "all",
        conflicts_with = "duration",
        help_heading = "Test"
    )]
    pub all: bool,

    /// Run these sizes, in order (comma-separated, e.g. 64,4K,64K).
    #[arg(long = "sizes", value_name = "LIST", value_delimiter = ',', value_parser = parse_msg_size, help_heading = "Test")]
    pub sizes: Vec<u32>,

    /// Operations per size (per QP). Default: 5000 for bw WRITE, else 1000.
    #[arg(short = 'n', long = "iters", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000_000),
          conflicts_with = "duration", help_heading = "Test")]
    pub iterations: Option<u64>,

    /// Run each size for this long instead of a number of operations (e.g. 10s, 2m; a bare
    /// number is seconds, as perftest's -D).
    #[arg(short = 'D', long = "duration", value_name = "DURATION", value_parser = parse_duration, help_heading = "Test")]
    pub duration: Option<Duration>,

    /// Also run the same sizes over a plain TCP connection between the same hosts and show
    /// both side by side, with the CPU time each side spent (like qperf's tcp_bw/tcp_lat).
    #[arg(long = "vs-tcp", help_heading = "Test")]
    pub vs_tcp: bool,

    /// Send messages up to this size inline (0: never); more than the device allows is an error.
    /// Default: 0 for bw; for lat 236, or less if the device allows less.
    #[arg(short = 'I', long = "inline", value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(0..=1_048_576), help_heading = "Test")]
    pub inline: Option<u32>,

    /// perftest's -F (do not fail on CPU frequency scaling): accepted, nothing to do.
    #[arg(short = 'F', long = "CPU-freq", hide = true)]
    pub perftest_cpu_freq: bool,

    /// perftest's --report_gbits: accepted, Gb/s is already the unit (see --units).
    #[arg(long = "report_gbits", hide = true)]
    pub perftest_report_gbits: bool,

    /// Read this host's port counters (sysfs counters/ and hw_counters/) before and after the
    /// test and show what changed; error counters are marked (client and --loopback only).
    #[arg(long, help_heading = "Output")]
    pub counters: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,

    /// Speak another tool's protocol instead of rdmadiag's: connect to its server (a one-shot
    /// server serves its clients without this flag; see COMPATIBILITY).
    #[arg(
        long,
        value_enum,
        value_name = "TOOL",
        conflicts_with_all = ["cm", "vs_tcp"],
        help_heading = "Connection"
    )]
    pub compat: Option<PerfCompat>,

    #[command(flatten)]
    pub output: OutputArgs,
}

impl PerfCommon {
    /// The operation asked for, by --op or perftest's -A.
    pub fn op(&self) -> control::Op {
        match self.perftest_atomic {
            Some(PerftestAtomic::FetchAndAdd) => control::Op::AtomicFadd,
            Some(PerftestAtomic::CmpAndSwap) => control::Op::AtomicCswap,
            None => self.op.into(),
        }
    }
}

/// Which sizes a threshold applies to (`--expect-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectSize {
    /// Every size run.
    All,
    /// One of the sizes run.
    Size(u32),
}

fn parse_expect_size(s: &str) -> Result<ExpectSize, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(ExpectSize::All);
    }
    parse_msg_size(s)
        .map(ExpectSize::Size)
        .map_err(|e| format!("{e}, or 'all'"))
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Test")]
pub struct BwArgs {
    #[command(flatten)]
    pub common: PerfCommon,

    /// Queue pairs to spread the operations over.
    #[arg(short = 'q', long = "qps", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1024), help_heading = "Test")]
    pub qps: u32,

    /// Operations in flight per QP.
    #[arg(short = 't', long = "tx-depth", value_name = "N", default_value_t = 128,
          value_parser = clap::value_parser!(u32).range(1..=32768), help_heading = "Test")]
    pub tx_depth: u32,

    /// Request a completion every N operations. Default: 100, and 1 for messages over 8 KiB
    /// (as perftest); given explicitly, N applies to every size.
    #[arg(short = 'Q', long = "cq-mod", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=32768), help_heading = "Test")]
    pub cq_mod: Option<u32>,

    /// Post this many operations per ibv_post_send call.
    #[arg(short = 'l', long = "post-list", value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=64), help_heading = "Test")]
    pub post_list: u32,

    /// RDMA READs or atomics in flight per QP (--op read, atomic-*). Default: the device's
    /// maximum, as perftest.
    #[arg(short = 'o', long = "outstanding", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=255), help_heading = "Test")]
    pub outstanding: Option<u32>,

    /// Measure both directions at once; the figures are their sum (as perftest), each
    /// direction is shown too.
    #[arg(short = 'b', long = "bidirectional", help_heading = "Test")]
    pub bidirectional: bool,

    /// Units of the bandwidth columns.
    #[arg(long, value_enum, default_value = "gbit", help_heading = "Output")]
    pub units: Units,

    /// Health check: exit 3 unless the average bandwidth is at least this rate, with its unit
    /// (90Gb/s, 10GB/s, 900MiB/s), at every size or the one --expect-size names.
    #[arg(long = "expect-bw", value_name = "RATE", value_parser = parse_rate,
          help_heading = "Thresholds")]
    pub expect_bw: Option<f64>,

    /// perftest's -w / --limit_bw: --expect-bw with a bare number in Gb/s.
    #[arg(short = 'w', long = "limit_bw", value_name = "GBPS", value_parser = parse_rate_gbits,
          conflicts_with = "expect_bw", hide = true)]
    pub perftest_limit_bw: Option<f64>,

    /// Health check: exit 3 unless the message rate is at least this (10Mpps, 500kpps), at
    /// every size or the one --expect-size names.
    #[arg(long = "expect-msgrate", value_name = "RATE", value_parser = parse_msg_rate,
          help_heading = "Thresholds")]
    pub expect_msgrate: Option<f64>,

    /// perftest's -y / --limit_msgrate: --expect-msgrate with a bare number in Mpps.
    #[arg(short = 'y', long = "limit_msgrate", value_name = "MPPS",
          value_parser = parse_msg_rate_mpps, conflicts_with = "expect_msgrate", hide = true)]
    pub perftest_limit_msgrate: Option<f64>,

    /// The size the thresholds apply to, or every size run.
    #[arg(long = "expect-size", value_name = "SIZE|all", default_value = "all",
          value_parser = parse_expect_size, help_heading = "Thresholds")]
    pub expect_size: ExpectSize,
}

impl BwArgs {
    /// The bandwidth threshold in bits/s, however it was given (--expect-bw or perftest's -w).
    pub fn bw_threshold(&self) -> Option<f64> {
        self.expect_bw.or(self.perftest_limit_bw)
    }

    /// The message-rate threshold in messages/s (--expect-msgrate or perftest's -y).
    pub fn msgrate_threshold(&self) -> Option<f64> {
        self.expect_msgrate.or(self.perftest_limit_msgrate)
    }
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Test")]
pub struct LatArgs {
    #[command(flatten)]
    pub common: PerfCommon,

    /// Draw the latency distribution.
    #[arg(long, help_heading = "Output")]
    pub histogram: bool,

    /// How samples are taken: perftest (every operation signalled and its completion polled
    /// inside the sample, as ib_*_lat) or lean (a completion every 16th operation, reaped
    /// outside the samples). READ and atomics always wait for each completion.
    #[arg(
        long = "timing",
        value_enum,
        value_name = "METHOD",
        default_value = "perftest",
        help_heading = "Test"
    )]
    pub timing: LatTiming,

    /// Health check: exit 3 unless the latency (median, or --expect-percentile) is at most
    /// this, with its unit (5us, 1ms), at every size or the one --expect-size names.
    #[arg(long = "expect-lat", value_name = "DURATION", value_parser = parse_duration_with_unit,
          help_heading = "Thresholds")]
    pub expect_lat: Option<Duration>,

    /// Which percentile --expect-lat applies to: 50, 90, 99, 99.9 or 99.99.
    #[arg(long = "expect-percentile", value_name = "P", default_value = "50",
          value_parser = crate::units::parse_percentile, requires = "expect_lat",
          help_heading = "Thresholds")]
    pub expect_percentile: f64,

    /// The size --expect-lat applies to, or every size run.
    #[arg(long = "expect-size", value_name = "SIZE|all", default_value = "all",
          value_parser = parse_expect_size, requires = "expect_lat", help_heading = "Thresholds")]
    pub expect_size: ExpectSize,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Test")]
pub struct XferArgs {
    /// Buffer size; K, M and G are binary.
    #[arg(short = 's', long = "size", value_name = "SIZE", default_value = "64K",
          value_parser = parse_msg_size, help_heading = "Test")]
    pub size: u32,

    /// How many times to move the buffer.
    #[arg(short = 'n', long = "iters", value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000), help_heading = "Test")]
    pub iterations: u64,

    /// Read this host's port counters (sysfs counters/ and hw_counters/) before and after the
    /// test and show what changed; error counters are marked (client and --loopback only).
    #[arg(long, help_heading = "Output")]
    pub counters: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use crate::connect::control::Op as WireOp;
    use clap::Parser;

    fn op_of(args: &[&str]) -> Result<WireOp, clap::Error> {
        let cli = Cli::try_parse_from(args)?;
        Ok(match cli.command {
            Command::Bw(a) => a.common.op(),
            Command::Lat(a) => a.common.op(),
            _ => unreachable!("a bw or lat command line"),
        })
    }

    #[test]
    fn atomics_parse_by_name_and_by_perftest_s_hidden_letter() {
        let op = |args: &[&str]| op_of(args).unwrap();
        assert_eq!(
            op(&["rdmadiag", "bw", "--op", "atomic-fadd", "h"]),
            WireOp::AtomicFadd
        );
        assert_eq!(
            op(&["rdmadiag", "lat", "--op", "atomic-cswap", "h"]),
            WireOp::AtomicCswap
        );
        assert_eq!(
            op(&["rdmadiag", "bw", "-A", "CMP_AND_SWAP", "h"]),
            WireOp::AtomicCswap
        );
        assert_eq!(
            op(&["rdmadiag", "lat", "-A", "FETCH_AND_ADD", "h"]),
            WireOp::AtomicFadd
        );
        assert_eq!(op(&["rdmadiag", "bw", "h"]), WireOp::Write);
        // -A names the operation: with another --op it is a usage error, as is a bad type.
        assert!(op_of(&["rdmadiag", "bw", "-A", "FETCH_AND_ADD", "--op", "read", "h"]).is_err());
        assert!(op_of(&["rdmadiag", "bw", "-A", "ADD", "h"]).is_err());
    }
}
