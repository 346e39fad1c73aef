//! `rdmadiag ports`: state, link, MTU, speed, netdev and GID table of each port.

use crate::cli::PortsArgs;
use crate::exit;
use crate::inventory::{self, PortQuery};
use crate::report::{self, Style};
use anyhow::Result;

pub fn run(args: &PortsArgs) -> Result<u8> {
    inventory::check_device_name(args.device.as_deref())?;
    let ports = inventory::ports(
        args.device.as_deref(),
        args.port,
        PortQuery {
            verbose: args.verbose,
            counters: args.counters,
            source: inventory::Source::Sysfs,
        },
    )?;
    if args.output.json {
        report::emit_json(&ports)?;
    } else {
        report::emit(&report::inventory::ports_text(&ports, Style::detect()))?;
    }
    Ok(exit::OK)
}
