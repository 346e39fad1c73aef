//! `rdmadiag ports`: state, link, speed, netdev and GID table of each port, and counters.

use crate::cli::PortsArgs;
use crate::counters::{self, CounterDeltas, Snapshot};
use crate::exit::{self, AfterReport, Interrupted, STOP};
use crate::inventory::{self, PortQuery};
use crate::report::inventory::PortsReport;
use crate::report::{self, Style};
use crate::sysfs;
use anyhow::Result;
use std::time::Duration;

pub fn run(args: &PortsArgs) -> Result<u8> {
    inventory::check_device_name(args.filter.device.as_deref())?;
    let mut ports = inventory::ports(
        args.filter.device.as_deref(),
        args.port,
        PortQuery {
            verbose: args.verbose,
            counters: args.counters,
            source: inventory::Source::Sysfs,
        },
    )?;
    let stopped = match args.interval {
        Some(interval) => over_interval(&mut ports, interval),
        None => false,
    };
    if args.output.json {
        report::emit_json(&ports)?;
    } else {
        report::emit(&report::inventory::ports_text(&ports, Style::detect()))?;
    }
    if stopped {
        // The report over the time measured is printed: the signal still sets the exit code.
        let took = ports
            .ports
            .iter()
            .find_map(|p| p.counter_deltas.as_ref())
            .map_or(0.0, |d| d.elapsed_s);
        let interval = humantime::format_duration(args.interval.unwrap_or_default());
        return Err(anyhow::Error::new(Interrupted).context(AfterReport(format!(
            "the {interval} interval ended after {took:.2} s: the changes shown are over the \
             time measured"
        ))));
    }
    Ok(exit::OK)
}

/// Read every port's counters, wait `interval` (SIGINT or SIGTERM ends it early), read them again: each
/// port gets its deltas, and its counter maps hold the second reading. True when interrupted.
fn over_interval(ports: &mut PortsReport, interval: Duration) -> bool {
    let root = sysfs::class_root();
    let before: Vec<Snapshot> = ports
        .ports
        .iter()
        .map(|p| Snapshot::read(&root, &p.device, p.port))
        .collect();
    let stopped = counters::wait_interval(interval, &STOP);
    for (p, then) in ports.ports.iter_mut().zip(&before) {
        let now = Snapshot::read(&root, &p.device, p.port);
        p.counter_deltas = Some(CounterDeltas::between(then, &now));
        p.error_counters = Some(now.error_names());
        p.counters = Some(now.counters);
        p.hw_counters = Some(now.hw_counters);
    }
    stopped
}
