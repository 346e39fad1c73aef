//! The options of `devices` and `ports`.

use super::{DeviceFilterArgs, OutputArgs};
use crate::units::parse_duration;
use clap::Args;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct DevicesArgs {
    #[command(flatten)]
    pub filter: DeviceFilterArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct PortsArgs {
    #[command(flatten)]
    pub filter: DeviceFilterArgs,

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
