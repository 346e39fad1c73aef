//! The command line: every subcommand and flag, defined once for parsing, man pages and completions.

use crate::connect::control::{self, DEFAULT_PORT};
use crate::units::{
    parse_duration, parse_duration_with_unit, parse_msg_rate, parse_msg_rate_mpps, parse_msg_size,
    parse_mtu, parse_rate, parse_rate_gbits,
};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::IpAddr;
use std::time::Duration;

mod fabric;
pub use fabric::{FabricArgs, FabricTest, PatternArg};

pub use crate::VERSION;

/// The subcommands' names (for messages that point at a subcommand's help).
pub const SUBCOMMANDS: &[&str] = &[
    "devices", "ports", "pingpong", "bw", "lat", "write", "read", "fabric",
];

/// Every exit code, in one line: the last line of every `--help` (rdmadiag(1) says it in full).
pub const EXIT_CODES_HELP: &str = "Exit status: 0 ok, 1 runtime failure, 2 usage error, 3 \
     threshold not met, 4 data not as sent, 130 interrupted (SIGINT), 143 stopped (SIGTERM).";

/// RDMA diagnostics on one verbs core: devices and ports, ping-pong, bandwidth and latency of
/// SEND, WRITE and READ, and data verification; JSON for scripts, exit codes for health checks.
#[derive(Debug, Parser)]
#[command(name = "rdmadiag", version = VERSION, propagate_version = true)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List RDMA devices: GUID, type, firmware, PCI id, ports and their state (read from sysfs).
    #[command(after_help = EXIT_CODES_HELP)]
    Devices(DevicesArgs),
    /// Show ports: state, link layer, speed, netdev and its MTU, and the GID table with types and IPs.
    #[command(after_help = EXIT_CODES_HELP)]
    Ports(PortsArgs),
    /// SEND/RECV ping-pong round trips (like ibv_rc_pingpong): server without HOST, client with.
    #[command(after_help = EXIT_CODES_HELP)]
    Pingpong(PingpongArgs),
    /// Bandwidth and message rate of SEND, RDMA WRITE or RDMA READ (like ib_*_bw).
    #[command(after_help = EXIT_CODES_HELP)]
    Bw(BwArgs),
    /// Latency of SEND, RDMA WRITE or RDMA READ, with percentiles (like ib_*_lat).
    #[command(after_help = EXIT_CODES_HELP)]
    Lat(LatArgs),
    /// Diagnose RDMA WRITE: write a patterned buffer into the peer and verify every byte.
    #[command(after_help = EXIT_CODES_HELP)]
    Write(XferArgs),
    /// Diagnose RDMA READ: read the peer's patterned buffer and verify every byte.
    #[command(after_help = EXIT_CODES_HELP)]
    Read(XferArgs),
    /// Test every link of a cluster in parallel rounds of pairs (bw both ways, lat), launched by
    /// srun, mpirun or --hosts, and name the slow or failing host or link.
    #[command(after_help = EXIT_CODES_HELP)]
    Fabric(FabricArgs),
}

impl Command {
    /// Whether the subcommand waits on a peer or over `ports --interval` (and so wants SIGINT and
    /// SIGTERM to unwind it cleanly); the others skip the signal thread's start-up cost.
    pub fn talks_to_a_peer(&self) -> bool {
        match self {
            Command::Devices(_) => false,
            Command::Ports(a) => a.interval.is_some(),
            _ => true,
        }
    }

    /// Whether the output is JSON (then a failure prints a JSON document too).
    pub fn json(&self) -> bool {
        match self {
            Command::Devices(a) => a.output.json,
            Command::Ports(a) => a.output.json,
            Command::Pingpong(a) => a.output.json,
            Command::Bw(a) => a.common.output.json,
            Command::Lat(a) => a.common.output.json,
            Command::Write(a) | Command::Read(a) => a.output.json,
            Command::Fabric(a) => a.output.json,
        }
    }
}

/// Peer tools rdmadiag can speak to on their own wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compat {
    /// rdma-core's ibv_rc_pingpong / ibv_ud_pingpong exchange (the peer then needs -g IDX).
    Ibv,
}

/// Connection options shared by every test subcommand (`-R` and `-m` are perftest's letters for
/// `--cm` and `--mtu`, accepted but not shown).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Connection")]
pub struct ConnectArgs {
    /// The server to connect to. Without it, this side is the server and serves one client.
    pub host: Option<String>,

    /// TCP port of the control connection.
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_PORT,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,

    /// Server: listen on this address only.
    #[arg(
        long,
        value_name = "ADDR",
        conflicts_with = "host",
        help_heading = "Server"
    )]
    pub bind: Option<IpAddr>,

    /// Server: keep serving, one client after another, whatever test each asks for; each client
    /// is logged on stderr (served, told busy, failed).
    #[arg(long, conflicts_with = "host", help_heading = "Server")]
    pub persist: bool,

    /// Run both ends in this process on one device: a self-test needing no peer.
    #[arg(long, conflicts_with_all = ["host", "persist", "bind"])]
    pub loopback: bool,

    /// Connect the queue pairs through rdma_cm (librdmacm) instead of exchanging them by hand.
    #[arg(long, short_alias = 'R')]
    pub cm: bool,

    /// Use this RDMA device (default: the one carrying the IP that reaches the peer).
    #[arg(short = 'd', long = "device", value_name = "DEV")]
    pub device: Option<String>,

    /// Use this port of the device (1-based).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT",
          value_parser = clap::value_parser!(u8).range(1..))]
    pub ib_port: Option<u8>,

    /// Use this GID index (default on RoCE: the RoCE v2 GID of the IP that reaches the peer).
    #[arg(short = 'x', long = "gid-index", value_name = "IDX")]
    pub gid_index: Option<u32>,

    /// Path MTU in bytes (default: the smaller active MTU of the two ports).
    #[arg(long, short_alias = 'm', value_name = "BYTES", value_parser = parse_mtu)]
    pub mtu: Option<u32>,

    /// Longest wait for anything from the peer (connect, each message, each completion); a bare
    /// number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Server: how long to wait for a client before giving up (not with --persist).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration,
          help_heading = "Server")]
    pub wait: Duration,

    /// Server: refuse tests whose messages are larger than this.
    #[arg(long = "max-size", value_name = "SIZE", default_value = "64M", value_parser = parse_msg_size,
          help_heading = "Server")]
    pub max_size: u32,

    /// Server: refuse tests that ask for more queue pairs than this.
    #[arg(long = "max-qps", value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=1024), help_heading = "Server")]
    pub max_qps: u32,

    /// Print the device, port, GID and MTU used on both ends (on stderr).
    #[arg(short = 'v', long, help_heading = "Output")]
    pub verbose: bool,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Test")]
pub struct PingpongArgs {
    /// Transport: reliable (RC), unreliable connected (UC) or unreliable datagram (UD).
    #[arg(
        short = 'c',
        long = "connection",
        value_enum,
        default_value = "RC",
        ignore_case = true,
        help_heading = "Test"
    )]
    pub transport: Transport,

    /// Message size in bytes; K, M and G are binary (4K = 4096).
    #[arg(short = 's', long = "size", value_name = "SIZE", default_value = "4096",
          value_parser = parse_msg_size, help_heading = "Test")]
    pub size: u32,

    /// Number of round trips.
    #[arg(short = 'n', long = "iters", value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000), help_heading = "Test")]
    pub iterations: u64,

    /// Receives kept posted.
    #[arg(long = "rx-depth", value_name = "N", default_value_t = 500,
          value_parser = clap::value_parser!(u32).range(1..=65536), help_heading = "Test")]
    pub rx_depth: u32,

    /// Sleep on completion events instead of busy polling.
    #[arg(short = 'e', long, help_heading = "Test")]
    pub events: bool,

    /// Read this host's port counters (sysfs counters/ and hw_counters/) before and after the
    /// test and show what changed; error counters are marked (client and --loopback only).
    #[arg(long, help_heading = "Output")]
    pub counters: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,

    /// Speak another tool's protocol instead of rdmadiag's.
    #[arg(
        long,
        value_enum,
        value_name = "TOOL",
        conflicts_with = "cm",
        help_heading = "Connection"
    )]
    pub compat: Option<Compat>,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// Output options shared by every subcommand.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Print one JSON document instead of tables (schema: rdmadiag-json(7)).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Show only this device (e.g. mlx5_0, rxe0).
    #[arg(short = 'd', long = "device", value_name = "DEV")]
    pub device: Option<String>,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct PortsArgs {
    /// Show only this device (e.g. mlx5_0, rxe0).
    #[arg(short = 'd', long = "device", value_name = "DEV")]
    pub device: Option<String>,

    /// Show only this port (1-based; -i as ibv_devinfo and the test commands).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT", short_alias = 'p', alias = "port",
          value_parser = clap::value_parser!(u8).range(1..))]
    pub port: Option<u8>,

    /// Add device limits and port details, the IB MTUs among them (at least what `ibv_devinfo -v`
    /// shows): this opens each device through libibverbs, where without -v only sysfs is read.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Add the port counters from sysfs (counters/ and hw_counters/); non-zero error counters
    /// are highlighted.
    #[arg(long)]
    pub counters: bool,

    /// With --counters: read them, wait this long (Ctrl-C ends the wait early), read them
    /// again and show what changed and the rate (e.g. 10s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "counters")]
    pub interval: Option<Duration>,

    #[command(flatten)]
    pub output: OutputArgs,
}

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
}

impl From<Op> for control::Op {
    fn from(o: Op) -> Self {
        match o {
            Op::Send => control::Op::Send,
            Op::Write => control::Op::Write,
            Op::Read => control::Op::Read,
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

    /// Transport: RC, UC (SEND and WRITE) or UD (SEND only).
    #[arg(
        short = 'c',
        long = "connection",
        value_enum,
        default_value = "RC",
        ignore_case = true,
        help_heading = "Test"
    )]
    pub transport: Transport,

    /// Message size; K, M and G are binary (64K = 65536). Default: 64K for bw, 2 for lat.
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

    #[command(flatten)]
    pub output: OutputArgs,
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

    /// RDMA READs in flight per QP (--op read). Default: the device's maximum, as perftest.
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
    /// outside the samples). READ always waits for each completion.
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
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
