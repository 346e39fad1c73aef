//! `pingpong`'s options.

use super::{Compat, ConnectArgs, OutputArgs, TransportArgs};
use crate::units::parse_msg_size;
use clap::Args;

#[derive(Debug, Args)]
#[command(next_help_heading = "Test")]
pub struct PingpongArgs {
    #[command(flatten)]
    pub connection: TransportArgs,

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
