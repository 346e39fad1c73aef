//! The command line: every subcommand and flag, defined once for parsing, man pages and completions.

use clap::{Args, Parser, Subcommand};

/// Version string: the crate version plus the git revision it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("RDMADIAG_GIT_REV"),
    ")"
);

/// RDMA diagnostics: devices, ports, and (soon) latency and bandwidth tests, on one verbs core.
#[derive(Debug, Parser)]
#[command(name = "rdmadiag", version = VERSION, propagate_version = true)]
#[command(after_help = "Exit status: 0 ok, 1 runtime failure, 2 usage error, 3 threshold not met.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List RDMA devices: GUID, type, firmware, vendor, ports and their state.
    Devices(DevicesArgs),
    /// Show ports: state, link layer, MTU, speed, netdev and the GID table with types and IPs.
    Ports(PortsArgs),
}

/// Output options shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Print one JSON document instead of tables (schema: docs/json.md).
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

    /// Show only this port (1-based, as ibv_devinfo numbers them).
    #[arg(short = 'p', long = "port", value_name = "PORT",
          value_parser = clap::value_parser!(u8).range(1..))]
    pub port: Option<u8>,

    /// Add device limits and port details (at least what `ibv_devinfo -v` shows).
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Add the port counters from sysfs (counters/ and hw_counters/); non-zero error counters
    /// are highlighted.
    #[arg(long)]
    pub counters: bool,

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

    #[test]
    fn parses_ports_flags() {
        let c = Cli::try_parse_from(["rdmadiag", "ports", "-d", "rxe0", "-p", "1", "-v", "--json"])
            .unwrap();
        let Command::Ports(p) = c.command else {
            panic!("expected ports")
        };
        assert_eq!(p.device.as_deref(), Some("rxe0"));
        assert_eq!(p.port, Some(1));
        assert!(p.verbose && p.output.json && !p.counters);
    }

    #[test]
    fn rejects_bad_ports_as_usage_errors() {
        for bad in ["0", "-1", "256", "x", ""] {
            let e = Cli::try_parse_from(["rdmadiag", "ports", "-p", bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "port {bad:?}");
        }
    }
}
