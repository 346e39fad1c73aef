//! `rdmadiag ports`: state, link, MTU, speed, netdev and GID table of each port.

use crate::cli::PortsArgs;
use crate::exit;
use crate::inventory::{self, PortQuery};
use crate::output;
use crate::render::{self, Style};
use anyhow::Result;

pub fn run(args: &PortsArgs) -> Result<u8> {
    inventory::check_device_name(args.device.as_deref())?;
    let report = inventory::ports(
        args.device.as_deref(),
        args.port,
        PortQuery {
            verbose: args.verbose,
            counters: args.counters,
        },
    )?;
    if args.output.json {
        output::emit_json(&report)?;
    } else {
        output::emit(&render::ports_text(&report, Style::detect()))?;
    }
    Ok(exit::OK)
}
