//! `rdmadiag devices`: one row per RDMA device.

use crate::cli::DevicesArgs;
use crate::exit;
use crate::inventory;
use crate::report::{self, Style};
use anyhow::Result;
use serde::Serialize;

/// The JSON document of `devices --json`.
#[derive(Serialize)]
struct DevicesDoc<'a> {
    devices: &'a [report::inventory::DeviceInfo],
}

pub fn run(args: &DevicesArgs) -> Result<u8> {
    inventory::check_device_name(args.filter.device.as_deref())?;
    let devs = inventory::devices(args.filter.device.as_deref(), inventory::Source::Sysfs)?;
    if args.output.json {
        report::emit_json(&DevicesDoc { devices: &devs })?;
    } else {
        report::emit(&report::inventory::devices_table(&devs, Style::detect()))?;
    }
    Ok(exit::OK)
}
