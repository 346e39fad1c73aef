//! The command line: every subcommand and flag, defined once for parsing, man pages and completions.
//!
//! One file per family of subcommands; this one holds the top level and the options they share.

mod check;
mod fabric;
mod inventory;
mod perf;
mod pingpong;

pub use check::{CheckArgs, CheckFormat, ExpectLinkLayer, ExpectState};
pub use fabric::{FabricArgs, FabricTest, PatternArg};
pub use inventory::{DevicesArgs, PortsArgs};
pub use perf::{
    BwArgs, ExpectSize, LatArgs, LatTiming, Op, PerfCommon, Transport, Units, XferArgs,
};
pub use pingpong::PingpongArgs;

use crate::connect::control::{DEFAULT_PORT, LinkSpec, QpType};
use crate::units::{parse_duration, parse_msg_size, parse_mtu, parse_tclass};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::IpAddr;
use std::time::Duration;

pub use crate::VERSION;

/// The subcommands' names (for messages that point at a subcommand's help).
pub const SUBCOMMANDS: &[&str] = &[
    "devices", "ports", "pingpong", "bw", "lat", "write", "read", "check", "fabric",
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
    /// List RDMA devices: GUID, type, firmware, PCI id, PCIe link, NUMA node, ports and their
    /// state (read from sysfs).
    ///
    /// The PCIe column is the link the device trained at ("Gen4 x16"), with its maximum when it
    /// runs below it ("Gen4 x8 (max Gen4 x16)"), and the bridge that holds it back when a link
    /// above it, up to the root port, is slower ("path Gen3 x16 (0000:39:00.0)"): what `lspci
    /// -vv` shows as LnkSta and LnkCap for the device and each bridge. A device with no PCI
    /// parent (Soft-RoCE, siw) says "no PCI parent (software device)". The JSON has every link
    /// of the path, the local CPU list and the driver; `ports -v` shows them too.
    #[command(after_help = EXIT_CODES_HELP)]
    Devices(DevicesArgs),
    /// Show ports: state, link layer, speed, active IB MTU, netdev (its driver, speed and MTU),
    /// and the GID table with types and IPs; with -v, each device's limits, PCIe link and path,
    /// NUMA node, local CPUs and driver.
    ///
    /// The active MTU is ibv_devinfo's active_mtu. On RoCE it is computed from the netdev MTU as
    /// the kernel does, without opening the device: the largest IB MTU (256 … 4096) that fits the
    /// netdev MTU less the RoCE headers, 80 bytes on Soft-RoCE (rxe; never below 256), 96 on
    /// other drivers (ib_core's rule, as mlx4 and mlx5 use; -v asks the device itself). So a
    /// netdev MTU of 1500 gives 1024, and 4200 or 9000 give 4096. On InfiniBand and iWARP only
    /// the device knows it: those ports' devices are opened for it.
    #[command(after_help = EXIT_CODES_HELP)]
    Ports(PortsArgs),
    /// SEND/RECV ping-pong round trips (like ibv_rc_pingpong): server without HOST, client with.
    #[command(after_help = EXIT_CODES_HELP)]
    Pingpong(PingpongArgs),
    /// Bandwidth and message rate of SEND, RDMA WRITE, RDMA READ or atomics (like ib_*_bw).
    #[command(after_help = EXIT_CODES_HELP)]
    Bw(BwArgs),
    /// Latency of SEND, RDMA WRITE, RDMA READ or atomics, with percentiles (like ib_*_lat).
    #[command(after_help = EXIT_CODES_HELP)]
    Lat(LatArgs),
    /// Diagnose RDMA WRITE: write a patterned buffer into the peer and verify every byte.
    #[command(after_help = EXIT_CODES_HELP)]
    Write(XferArgs),
    /// Diagnose RDMA READ: read the peer's patterned buffer and verify every byte.
    #[command(after_help = EXIT_CODES_HELP)]
    Read(XferArgs),
    /// Node health check: ports up at the expected rate, PCIe links at full speed and width, NICs
    /// on the right NUMA node, error counters still, short loopback and peer tests; table, NHC
    /// lines, JSON or Prometheus; can drain a Slurm node.
    ///
    /// Each rule asked for is a check with what was expected and what was found; exit 3 when
    /// one fails. The PCIe and NUMA rules (--pcie, --expect-pcie, --expect-numa, --cpus) judge
    /// each device once (target DEV): --pcie compares the slowest link on the device's path to
    /// the root port (its own, or a bridge's above it) with the device's maximum, and a failure
    /// names that link and both figures ("PCIe link x8 at 16.0 GT/s (Gen4) is narrower than its
    /// maximum x16 (0000:3b:00.0)"). On a device with no PCI parent (Soft-RoCE, siw) these rules
    /// do not apply: the check is reported as skipped ("does not apply: no PCI parent (software
    /// device)", verdict skip, `skipped` in JSON), neither passed nor failed, and NHC prints
    /// nothing for it.
    #[command(after_help = EXIT_CODES_HELP)]
    Check(CheckArgs),
    /// Test every link of a cluster in parallel rounds of pairs (bw both ways, lat), launched by
    /// srun, mpirun or --hosts, and name the slow or failing host, link or group.
    #[command(after_help = EXIT_CODES_HELP, long_about = fabric::FABRIC_ABOUT)]
    Fabric(FabricArgs),
}

impl Command {
    /// Whether the subcommand waits on a peer or over `ports --interval` (and so wants SIGINT and
    /// SIGTERM to unwind it cleanly); the others keep the signals' default action.
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
            Command::Check(a) => a.format() == CheckFormat::Json,
            Command::Fabric(a) => a.output.json,
        }
    }
}

/// Peer tools pingpong can speak to on their own wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compat {
    /// rdma-core's ibv_rc_pingpong / ibv_ud_pingpong exchange (the peer then needs -g IDX).
    Ibv,
}

impl From<Compat> for crate::session::Compat {
    fn from(c: Compat) -> Self {
        match c {
            Compat::Ibv => crate::session::Compat::Ibv,
        }
    }
}

/// Peer tools bw and lat can speak to on their own wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PerfCompat {
    /// perftest's exchange: connect to an ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat or
    /// ib_read_lat server (RC or UC WRITE, RC READ, RC SEND for bw).
    Perftest,
}

impl From<PerfCompat> for crate::session::Compat {
    fn from(c: PerfCompat) -> Self {
        match c {
            PerfCompat::Perftest => crate::session::Compat::Perftest,
        }
    }
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

    /// The test-port key, from FILE (at least 16 bytes, mode 600; else RDMADIAG_KEY): a server
    /// with a key serves only clients that prove they hold it, and proves it holds it too; a
    /// client proves it to a server that asks. Without a key a server serves whoever connects.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "loopback",
        help_heading = "Security"
    )]
    pub key_file: Option<std::path::PathBuf>,

    /// Connect the queue pairs through rdma_cm (librdmacm) instead of exchanging them by hand.
    #[arg(long, short_alias = 'R')]
    pub cm: bool,

    #[command(flatten)]
    pub port_choice: PortChoiceArgs,

    /// Path MTU in bytes (default: the smaller active MTU of the two ports).
    #[arg(long, short_alias = 'm', value_name = "BYTES", value_parser = parse_mtu)]
    pub mtu: Option<u32>,

    #[command(flatten)]
    pub priority: PriorityArgs,

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

/// The priority of a test's packets: every data-path subcommand's, and check's and fabric's
/// active tests'.
#[derive(Debug, Clone, Copy, Args)]
pub struct PriorityArgs {
    /// RoCE traffic class of the test's packets, 0-255 (0x prefix for hex): the GRH traffic
    /// class, which RoCE v2 carries as the IP TOS byte, so the DSCP is its top 6 bits (DSCP 26
    /// is --tclass 104) and the ECN its low 2. With --cm it is rdma_cm's ToS. Default 0.
    #[arg(long, value_name = "N", value_parser = parse_tclass)]
    pub tclass: Option<u8>,

    /// InfiniBand service level of the test's packets, 0-15 (not with --cm, where the path
    /// gives it). Default 0.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=15))]
    pub sl: Option<u8>,
}

impl ConnectArgs {
    /// The link a test asks for over `transport`: `--mtu`, `--cm`, `--tclass`, `--sl`.
    pub fn link(&self, transport: QpType) -> LinkSpec {
        LinkSpec {
            transport,
            mtu: self.mtu,
            cm: self.cm,
            tclass: self.priority.tclass,
            sl: self.priority.sl,
        }
    }
}

impl From<PriorityArgs> for crate::connect::control::Priority {
    fn from(p: PriorityArgs) -> Self {
        crate::connect::control::Priority {
            tclass: p.tclass,
            sl: p.sl,
        }
    }
}

/// Which RDMA port a test runs on: the same `-d`, `-i`, `-x` on every subcommand that runs one
/// (the test subcommands and `fabric`), declared once here.
#[derive(Debug, Clone, Args)]
pub struct PortChoiceArgs {
    /// Use this RDMA device (default: a client, the one carrying the IP that reaches the peer;
    /// a server, --loopback and fabric, the first with an active port).
    #[arg(short = 'd', long = "device", value_name = "DEV")]
    pub device: Option<String>,

    /// Use this port of the device (1-based).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT",
          value_parser = clap::value_parser!(u8).range(1..))]
    pub ib_port: Option<u8>,

    /// Use this GID index (default on RoCE: the RoCE v2 GID of the IP that reaches the peer).
    #[arg(short = 'x', long = "gid-index", value_name = "IDX")]
    pub gid_index: Option<u32>,
}

impl PortChoiceArgs {
    /// The port these flags choose.
    pub fn choice(&self) -> crate::connect::endpoint::PortChoice {
        crate::connect::endpoint::PortChoice {
            device: self.device.clone(),
            port: self.ib_port,
            gid_index: self.gid_index,
        }
    }
}

/// `-c`: the transport of a test (`pingpong` and the perf tests).
#[derive(Debug, Clone, Args)]
pub struct TransportArgs {
    /// Transport: reliable connected (RC), unreliable connected (UC: SEND and WRITE) or
    /// unreliable datagram (UD: SEND only).
    #[arg(
        short = 'c',
        long = "connection",
        value_enum,
        default_value = "RC",
        ignore_case = true,
        help_heading = "Test"
    )]
    pub transport: Transport,
}

/// `-d`: show only one device (`devices`, `ports`).
#[derive(Debug, Clone, Args)]
pub struct DeviceFilterArgs {
    /// Show only this device (e.g. mlx5_0, rxe0).
    #[arg(short = 'd', long = "device", value_name = "DEV")]
    pub device: Option<String>,
}

/// Output options shared by every subcommand.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Print one JSON document instead of tables (schema: rdmadiag-json(7)).
    #[arg(long)]
    pub json: bool,
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
