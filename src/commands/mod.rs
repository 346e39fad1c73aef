//! One module per subcommand: parse options, call the core, hand the result to a renderer.

mod devices;
pub mod perf;
pub mod pingpong;
mod ports;

use crate::cli::{Cli, Command};
use anyhow::Result;

/// Run the parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Devices(args) => devices::run(&args),
        Command::Ports(args) => ports::run(&args),
        Command::Pingpong(args) => pingpong::run(&args),
        Command::Bw(args) => perf::run_bw(&args),
        Command::Lat(args) => perf::run_lat(&args),
        Command::Write(args) => perf::run_xfer(&args, crate::perf::Op::Write),
        Command::Read(args) => perf::run_xfer(&args, crate::perf::Op::Read),
    }
}
