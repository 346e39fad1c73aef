//! The flags of `rdmadiag check`: targets, expectations, error counters, active tests, output
//! formats and Slurm.

use super::{OutputArgs, PriorityArgs};
use crate::check::{CpuList, PcieExpect, Target, parse_cpus, parse_pcie_expect, parse_target};
use crate::units::{
    parse_duration, parse_duration_with_unit, parse_rate, parse_rate_gbits, parse_size,
};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// The logical port states `--expect-state` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExpectState {
    Down,
    Init,
    Armed,
    Active,
}

impl From<ExpectState> for crate::check::ExpectedState {
    fn from(s: ExpectState) -> Self {
        match s {
            ExpectState::Down => Self::Down,
            ExpectState::Init => Self::Init,
            ExpectState::Armed => Self::Armed,
            ExpectState::Active => Self::Active,
        }
    }
}

/// The link layers `--expect-link-layer` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExpectLinkLayer {
    #[value(name = "infiniband")]
    InfiniBand,
    Ethernet,
}

impl From<ExpectLinkLayer> for crate::ib::LinkLayer {
    fn from(l: ExpectLinkLayer) -> Self {
        match l {
            ExpectLinkLayer::InfiniBand => Self::InfiniBand,
            ExpectLinkLayer::Ethernet => Self::Ethernet,
        }
    }
}

/// How the report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// A table: check, target, expected, actual, verdict.
    Text,
    /// One JSON document (rdmadiag-json(7)).
    Json,
    /// LBNL NHC's convention: nothing when all passed, else one `ERROR: rdmadiag: ...` line per
    /// failure.
    Nhc,
    /// Prometheus text exposition format (for node_exporter's textfile collector).
    Prometheus,
}

/// A width: 4X or 4 (lanes).
fn parse_width(s: &str) -> Result<u32, String> {
    let t = s.trim().trim_end_matches(['X', 'x']);
    match t.parse::<u32>() {
        Ok(n @ (1 | 2 | 4 | 8 | 12)) => Ok(n),
        _ => Err(format!("'{s}' is not a link width (1X, 2X, 4X, 8X or 12X)")),
    }
}

fn parse_mtu_bytes(s: &str) -> Result<u32, String> {
    let v = parse_size(s)?;
    u32::try_from(v).map_err(|_| format!("'{s}' is too large for an MTU"))
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Targets")]
pub struct CheckArgs {
    /// Check this device, or one port of it (mlx5_0, mlx5_0:1); repeat for more. Default:
    /// every port of every device.
    #[arg(id = "device", short = 'd', long = "device", value_name = "DEV[:PORT]", value_parser = parse_target,
          action = clap::ArgAction::Append)]
    pub targets: Vec<Target>,

    /// Each port's logical state. Default: active (and then also the physical state LinkUp).
    #[arg(long, value_enum, value_name = "STATE", help_heading = "Expectations")]
    pub expect_state: Option<ExpectState>,

    /// Each port's rate, exactly: 400Gb/s, or a bare number in Gb/s as NHC's check_hw_ib
    /// (--expect-rate 100).
    #[arg(long, value_name = "RATE", value_parser = parse_rate_gbits,
          help_heading = "Expectations")]
    pub expect_rate: Option<f64>,

    /// Each port's width: 1X, 2X, 4X, 8X or 12X.
    #[arg(long, value_name = "WIDTH", value_parser = parse_width, help_heading = "Expectations")]
    pub expect_width: Option<u32>,

    /// Each port's MTU in bytes: the netdev's on RoCE (e.g. 9000), the active IB MTU on
    /// InfiniBand (e.g. 4096; the device is opened through libibverbs to read it).
    #[arg(long, value_name = "BYTES", value_parser = parse_mtu_bytes,
          help_heading = "Expectations")]
    pub expect_mtu: Option<u32>,

    /// Each port's link layer.
    #[arg(
        long,
        value_enum,
        value_name = "LAYER",
        ignore_case = true,
        help_heading = "Expectations"
    )]
    pub expect_link_layer: Option<ExpectLinkLayer>,

    /// Each port has a usable RoCE v2 GID: one with an IPv4 or a routable IPv6 address.
    #[arg(long, help_heading = "Expectations")]
    pub expect_gid: bool,

    /// Each device's PCIe link, and every link on its path to the root port, runs at the
    /// device's maximum speed and width (sysfs max_link_speed, max_link_width): a card trained
    /// at x8 of x16, or behind a bridge at Gen3, fails, naming the link and both figures. A
    /// device with no PCI parent (Soft-RoCE) or no PCIe link attributes is skipped with a
    /// note ("does not apply"), neither passed nor failed.
    #[arg(long, help_heading = "Device placement")]
    pub pcie: bool,

    /// Like --pcie, but each device's slowest link on its path must reach this generation and
    /// width instead of the device's maximum (an x16 card in an x8 slot on purpose: 4,8):
    /// GEN,WIDTH as 4,16 or gen4,x16 (generations 1 to 6: 2.5, 5, 8, 16, 32, 64 GT/s).
    #[arg(long, value_name = "GEN,WIDTH", value_parser = parse_pcie_expect,
          help_heading = "Device placement")]
    pub expect_pcie: Option<PcieExpect>,

    /// Each device's NUMA node (sysfs numa_node of its PCI function; -1, no node, fails). A
    /// device with no PCI parent is skipped with a note.
    #[arg(long, value_name = "N", help_heading = "Device placement")]
    pub expect_numa: Option<u32>,

    /// Each device's NUMA node holds these CPUs (the job's, as taskset takes them: 0-15,32):
    /// compared with /sys/devices/system/node/nodeN/cpulist.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus, help_heading = "Device placement")]
    pub cpus: Option<CpuList>,

    /// Watch the error counters (counters/ and hw_counters/) for this long (e.g. 10s); with no
    /// --max-error-delta, any rise fails.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration,
          help_heading = "Error counters")]
    pub interval: Option<Duration>,

    /// How much each port's error counters may rise in all over --interval.
    #[arg(
        long,
        value_name = "N",
        requires = "interval",
        help_heading = "Error counters"
    )]
    pub max_error_delta: Option<u64>,

    /// A short loopback RDMA WRITE bandwidth test on each port (64 KiB messages, up to 1 s)
    /// must average at least this rate, with its unit (90Gb/s, 10GB/s).
    #[arg(long, value_name = "RATE", value_parser = parse_rate, help_heading = "Active tests")]
    pub loopback_bw: Option<f64>,

    /// A short loopback RDMA WRITE latency test on each port (2 B, 1000 samples) must have a
    /// median of at most this, with its unit (5us).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_with_unit,
          help_heading = "Active tests")]
    pub loopback_lat: Option<Duration>,

    /// Run --peer-bw and --peer-lat against this persistent rdmadiag server (`rdmadiag bw
    /// --persist` there; any test subcommand serves every test). PORT defaults to 18515.
    #[arg(long, value_name = "HOST[:PORT]", help_heading = "Active tests")]
    pub peer: Option<String>,

    /// The key of a --peer server started with one (as its --key-file; else RDMADIAG_KEY).
    #[arg(
        long,
        value_name = "FILE",
        requires = "peer",
        help_heading = "Active tests"
    )]
    pub key_file: Option<std::path::PathBuf>,

    /// RDMA WRITE bandwidth to --peer (64 KiB messages, up to 1 s) must average at least this.
    #[arg(long, value_name = "RATE", value_parser = parse_rate, requires = "peer",
          help_heading = "Active tests")]
    pub peer_bw: Option<f64>,

    /// RDMA WRITE latency to --peer (2 B, 1000 samples) must have a median of at most this.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_with_unit,
          requires = "peer", help_heading = "Active tests")]
    pub peer_lat: Option<Duration>,

    /// The active tests' packets' priority.
    #[command(flatten, next_help_heading = "Active tests")]
    pub priority: PriorityArgs,

    /// Bounds the whole run, every test and wait included (well inside Slurm's
    /// HealthCheckTimeout, 60 s by default); a bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// How to write the report.
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        conflicts_with = "json",
        help_heading = "Output"
    )]
    pub format: Option<CheckFormat>,

    /// Write the report to this file instead of standard output, atomically (a temporary
    /// file in the same directory, then renamed): node_exporter never reads half a file.
    #[arg(short = 'o', long, value_name = "FILE", help_heading = "Output")]
    pub output: Option<PathBuf>,

    /// On a failure, drain this Slurm node ($SLURMD_NODENAME) with the reason "rdmadiag:
    /// <first failure>"; when every check passes, resume it if (and only if) its reason starts
    /// with "rdmadiag:". Needs scontrol on PATH.
    #[arg(long, help_heading = "Slurm")]
    pub slurm_drain: bool,

    #[command(flatten)]
    pub output_args: OutputArgs,
}

impl CheckArgs {
    /// The format asked for (`--json` is `--format json`).
    pub fn format(&self) -> CheckFormat {
        match self.format {
            Some(f) => f,
            None if self.output_args.json => CheckFormat::Json,
            None => CheckFormat::Text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_mtus() {
        assert_eq!(parse_width("4X").unwrap(), 4);
        assert_eq!(parse_width("12x").unwrap(), 12);
        assert_eq!(parse_width("1").unwrap(), 1);
        assert!(parse_width("3X").is_err());
        assert_eq!(parse_mtu_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_mtu_bytes("4K").unwrap(), 4096);
    }
}
