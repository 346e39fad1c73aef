//! Renders result structs as terminal tables or plain text; never touches a device.

use crate::inventory::{DeviceInfo, PortInfo, PortsReport};
use crate::sysfs::is_error_counter;
use comfy_table::presets::{NOTHING, UTF8_FULL_CONDENSED};
use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table};
use std::collections::BTreeMap;
use std::io::IsTerminal;

/// How output should look: boxes and colour on a terminal, plain columns on a pipe.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub tty: bool,
    pub color: bool,
}

impl Style {
    /// Decide from stdout and the environment (NO_COLOR, TERM=dumb).
    pub fn detect() -> Self {
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
            || std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Style {
            tty,
            color: tty && !no_color,
        }
    }

    /// Plain text, no colour: what pipes and tests get.
    pub fn plain() -> Self {
        Style {
            tty: false,
            color: false,
        }
    }

    fn table(&self, header: &[&str]) -> Table {
        let mut t = Table::new();
        if self.tty {
            t.load_style(UTF8_FULL_CONDENSED)
                .set_content_arrangement(ContentArrangement::Dynamic);
        } else {
            t.load_style(NOTHING).force_no_tty();
        }
        if !header.is_empty() {
            t.set_header(header.iter().map(|h| self.bold(h)));
        }
        t
    }

    fn bold(&self, s: &str) -> Cell {
        let c = Cell::new(s);
        if self.color {
            c.add_attribute(Attribute::Bold)
        } else {
            c
        }
    }

    fn alert(&self, s: String) -> Cell {
        let c = Cell::new(s);
        if self.color {
            c.fg(Color::Red).add_attribute(Attribute::Bold)
        } else {
            c
        }
    }
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Trim table lines: comfy-table pads the last column even in the plain preset.
fn finish(t: &Table) -> String {
    let mut s: String = t
        .to_string()
        .lines()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n");
    s.push('\n');
    s
}

/// `rdmadiag devices`: one row per device.
pub fn devices_table(devs: &[DeviceInfo], style: Style) -> String {
    let mut t = style.table(&[
        "DEVICE",
        "NODE GUID",
        "TYPE",
        "TRANSPORT",
        "FIRMWARE",
        "VENDOR",
        "PART",
        "PORTS",
    ]);
    for d in devs {
        t.add_row(vec![
            Cell::new(&d.name),
            Cell::new(&d.node_guid),
            Cell::new(d.node_type),
            Cell::new(d.transport),
            Cell::new(if d.fw_ver.is_empty() { "-" } else { &d.fw_ver }),
            Cell::new(format!("0x{:04x}", d.vendor_id)),
            Cell::new(d.vendor_part_id),
            if d.ports_active < d.phys_port_cnt {
                style.alert(d.port_summary.clone())
            } else {
                Cell::new(&d.port_summary)
            },
        ]);
    }
    finish(&t)
}

fn speed_text(p: &PortInfo) -> String {
    match (
        &p.active_width,
        &p.active_speed,
        p.speed_per_lane_gbps,
        p.rate_gbps,
    ) {
        (Some(w), Some(s), Some(lane), Some(rate)) => {
            format!("{w} {s} ({lane} Gb/s per lane) = {rate} Gb/s")
        }
        _ => "unknown".to_string(),
    }
}

fn port_block(p: &PortInfo, style: Style) -> String {
    let mut out = String::new();
    let state = format!("{} ({})", p.state, p.physical_state);
    let mut kv = style.table(&[]);
    let head = format!("{} port {}", p.device, p.port);
    kv.add_row(vec![
        style.bold(&head),
        if p.state.is_active() {
            Cell::new(state)
        } else {
            style.alert(state)
        },
    ]);
    kv.add_row(vec![Cell::new("link layer"), Cell::new(p.link_layer)]);
    kv.add_row(vec![Cell::new("netdev"), Cell::new(opt(&p.netdev))]);
    kv.add_row(vec![
        Cell::new("MTU"),
        Cell::new(format!(
            "{} active, {} max",
            opt(&p.active_mtu),
            opt(&p.max_mtu)
        )),
    ]);
    kv.add_row(vec![Cell::new("speed"), Cell::new(speed_text(p))]);
    if p.link_layer == crate::verbs::LinkLayer::InfiniBand {
        kv.add_row(vec![
            Cell::new("LID / SM LID / LMC"),
            Cell::new(format!("0x{:04x} / 0x{:04x} / {}", p.lid, p.sm_lid, p.lmc)),
        ]);
    }
    let default = p
        .default_gid_index
        .and_then(|i| p.gids.iter().find(|g| g.index == i))
        .map_or_else(
            || "none".to_string(),
            |g| format!("{} ({}, {})", g.index, g.gid, g.gid_type),
        );
    kv.add_row(vec![Cell::new("default GID"), Cell::new(default)]);
    kv.add_row(vec![
        Cell::new("P_Keys"),
        Cell::new(if p.pkeys.is_empty() {
            "-".to_string()
        } else {
            p.pkeys.join(" ")
        }),
    ]);
    if let Some(d) = &p.details {
        for (k, v) in [
            ("max_msg_sz", format!("0x{:x}", d.max_msg_sz)),
            ("port_cap_flags", format!("0x{:08x}", d.port_cap_flags)),
            ("port_cap_flags2", format!("0x{:04x}", d.port_cap_flags2)),
            ("max_vl_num", d.max_vl_num.to_string()),
            ("bad_pkey_cntr", format!("0x{:x}", d.bad_pkey_cntr)),
            ("qkey_viol_cntr", format!("0x{:x}", d.qkey_viol_cntr)),
            ("sm_sl", d.sm_sl.to_string()),
            ("pkey_tbl_len", d.pkey_tbl_len.to_string()),
            ("gid_tbl_len", d.gid_tbl_len.to_string()),
            ("subnet_timeout", d.subnet_timeout.to_string()),
            ("init_type_reply", d.init_type_reply.to_string()),
        ] {
            kv.add_row(vec![Cell::new(k), Cell::new(v)]);
        }
    }
    out.push_str(&finish(&kv));

    let mut g = style.table(&["", "INDEX", "GID", "TYPE", "NETDEV", "IP"]);
    for e in &p.gids {
        g.add_row(vec![
            Cell::new(if e.default { "*" } else { "" }),
            Cell::new(e.index),
            Cell::new(e.gid),
            Cell::new(e.gid_type),
            Cell::new(opt(&e.netdev)),
            Cell::new(opt(&e.ip)),
        ]);
    }
    if p.gids.is_empty() {
        out.push_str("  (no valid GIDs)\n");
    } else {
        out.push_str(&finish(&g));
        out.push_str("  * the GID rdmadiag uses by default\n");
    }
    for (title, counters) in [("counters", &p.counters), ("hw_counters", &p.hw_counters)] {
        if let Some(c) = counters {
            out.push_str(&counter_table(title, c, style));
        }
    }
    out
}

fn counter_table(title: &str, c: &BTreeMap<String, u64>, style: Style) -> String {
    if c.is_empty() {
        return format!("  ({title}: none exposed by this device)\n");
    }
    let mut t = style.table(&[&title.to_uppercase(), "VALUE", ""]);
    for (name, v) in c {
        let bad = *v != 0 && is_error_counter(name);
        if bad {
            t.add_row(vec![
                style.alert(name.clone()),
                style.alert(v.to_string()),
                style.alert("! error count".to_string()),
            ]);
        } else {
            t.add_row(vec![Cell::new(name), Cell::new(v), Cell::new("")]);
        }
    }
    finish(&t)
}

fn limits_block(d: &DeviceInfo, style: Style) -> String {
    let Some(l) = &d.limits else {
        return String::new();
    };
    let mut t = style.table(&[]);
    t.add_row(vec![
        style.bold(&format!("{} device", d.name)),
        Cell::new(format!(
            "fw {}, hw_ver 0x{:x}, sys_image_guid {}, board_id {}",
            if d.fw_ver.is_empty() { "-" } else { &d.fw_ver },
            d.hw_ver,
            d.sys_image_guid,
            opt(&d.board_id)
        )),
    ]);
    let value = serde_json::to_value(l).unwrap_or_default();
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            let text = match (k.as_str(), v) {
                ("max_mr_size" | "page_size_cap" | "device_cap_flags", v) => {
                    v.as_u64().map_or(v.to_string(), |n| format!("0x{n:x}"))
                }
                ("atomic_cap", _) => l.atomic_cap.to_string(),
                (_, v) => v.to_string(),
            };
            t.add_row(vec![Cell::new(k), Cell::new(text)]);
        }
    }
    finish(&t)
}

/// `rdmadiag ports`: a block per port, device limits first when verbose.
pub fn ports_text(r: &PortsReport, style: Style) -> String {
    let mut out = String::new();
    for d in &r.devices {
        out.push_str(&limits_block(d, style));
        out.push('\n');
    }
    for (i, p) in r.ports.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&port_block(p, style));
    }
    out
}
