//! Renders result structs as terminal tables or plain text; never touches a device.

use crate::connect::endpoint::Endpoint;
use crate::inventory::{DeviceInfo, PortInfo, PortsReport};
use crate::session::perf::PerfReport;
use crate::session::pingpong::PingpongReport;
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

fn endpoint_text(e: &Endpoint) -> String {
    if e.port == 0 {
        // What rdma-core's exchange tells: no device, port or GID index.
        return format!("{}  QPN 0x{:06x}  GID {}", e.device, e.qpn, e.gid);
    }
    format!(
        "{} port {}  QPN 0x{:06x}  GID[{}] {}{}{}",
        e.device,
        e.port,
        e.qpn,
        e.gid_index,
        e.gid,
        e.gid_type.map(|t| format!(" {t}")).unwrap_or_default(),
        e.netdev
            .as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default()
    )
}

/// `rdmadiag pingpong`: what ran where, round-trip latency, rate.
pub fn pingpong_text(r: &PingpongReport, style: Style) -> String {
    let mut out = format!(
        "pingpong {} {} B x {} round trips, path MTU {}{}\n",
        r.transport,
        r.size,
        r.iterations,
        r.path_mtu,
        r.compat
            .as_deref()
            .map(|c| format!(" (compat {c})"))
            .unwrap_or_default()
    );
    out.push_str(&format!("  local   {}\n", endpoint_text(&r.local)));
    out.push_str(&format!("  remote  {}\n", endpoint_text(&r.remote)));
    let l = &r.latency;
    let mut t = style.table(&[
        "round trip (us)",
        "min",
        "median",
        "mean",
        "stdev",
        "p99",
        "p99.9",
        "max",
    ]);
    let f = |v: f64| Cell::new(format!("{v:.2}"));
    t.add_row(vec![
        Cell::new(""),
        f(l.min_us),
        f(l.median_us),
        f(l.avg_us),
        f(l.stdev_us),
        f(l.p99_us),
        f(l.p999_us),
        f(l.max_us),
    ]);
    out.push_str(&finish(&t));
    out.push_str(&format!(
        "  {} round trips in {:.3} s: {:.0} round trips/s, {:.2} Mb/s\n",
        r.iterations, r.elapsed_s, r.round_trips_per_sec, r.bandwidth_mbps
    ));
    out
}

fn perf_header(r: &PerfReport) -> String {
    let what = if r.test == r.op.to_string() {
        format!("RDMA {} diagnostic", r.test.to_uppercase())
    } else {
        format!("{} {}", r.test, r.op)
    };
    let mut out = format!(
        "{} {}{}, {} QP(s), path MTU {}{}\n",
        what,
        r.transport,
        if r.bidirectional {
            " bidirectional"
        } else {
            ""
        },
        r.qps,
        r.path_mtu,
        r.duration_s
            .map(|d| format!(", {d} s per size"))
            .unwrap_or_default()
    );
    out.push_str(&format!("  local   {}\n", endpoint_text(&r.local)));
    out.push_str(&format!("  remote  {}\n", endpoint_text(&r.remote)));
    out
}

fn cpu_text(cpu: Option<f64>, elapsed: f64) -> String {
    match cpu {
        Some(c) if elapsed > 0.0 => format!("{c:.3} s ({:.0}%)", c / elapsed * 100.0),
        Some(c) => format!("{c:.3} s"),
        None => "-".into(),
    }
}

/// `--vs-tcp`: RDMA and TCP side by side per size, with the CPU each side spent.
fn vs_tcp_text(r: &PerfReport, style: Style) -> String {
    if r.tcp.is_empty() {
        return String::new();
    }
    let bw = !r.bw.is_empty();
    let (what, rdma_h, tcp_h) = if bw {
        ("higher is better", "RDMA Gb/s", "TCP Gb/s")
    } else {
        ("lower is better", "RDMA median us", "TCP median us")
    };
    let mut t = style.table(&[
        "#bytes",
        rdma_h,
        tcp_h,
        "RDMA/TCP",
        "CPU here RDMA",
        "CPU here TCP",
        "CPU peer RDMA",
        "CPU peer TCP",
    ]);
    for tr in &r.tcp {
        let (rdma, rdma_elapsed, cpu, peer_cpu) = if bw {
            let Some(b) = r.bw.iter().find(|b| b.size == tr.size) else {
                continue;
            };
            (b.bw_avg_gbps, b.elapsed_s, b.cpu_s, b.peer_cpu_s)
        } else {
            let Some(l) = r.lat.iter().find(|l| l.size == tr.size) else {
                continue;
            };
            let per_sample = if r.latency_measure.as_deref() == Some("half round trip") {
                2.0
            } else {
                1.0
            };
            let elapsed = l.latency.avg_us * per_sample * l.iterations as f64 / 1e6;
            (l.latency.median_us, elapsed, l.cpu_s, l.peer_cpu_s)
        };
        let tcp = if bw {
            tr.bw_avg_gbps.unwrap_or(0.0)
        } else {
            tr.latency.map_or(0.0, |l| l.median_us)
        };
        t.add_row(vec![
            Cell::new(tr.size),
            Cell::new(format!("{rdma:.2}")),
            Cell::new(format!("{tcp:.2}")),
            Cell::new(if tcp > 0.0 {
                format!("{:.2}", rdma / tcp)
            } else {
                "-".into()
            }),
            Cell::new(cpu_text(cpu, rdma_elapsed)),
            Cell::new(cpu_text(tr.cpu_s, tr.elapsed_s)),
            Cell::new(cpu_text(peer_cpu, rdma_elapsed)),
            Cell::new(cpu_text(tr.peer_cpu_s, tr.elapsed_s)),
        ]);
    }
    format!(
        "  RDMA against TCP on the same path ({what}):\n{}",
        finish(&t)
    )
}

/// `rdmadiag bw`: one row per size.
pub fn bw_text(r: &PerfReport, units: crate::units::Units, style: Style) -> String {
    let label = units.label();
    let conv = |gbps: f64| match units {
        crate::units::Units::Gbit => gbps,
        crate::units::Units::Mib => gbps * 1e9 / 8.0 / 1048576.0,
    };
    let peer_col = r.bw.iter().any(|b| b.peer.is_some());
    let peak = format!("BW peak [{label}]");
    let avg = format!("BW average [{label}]");
    let peer_avg = format!("peer avg [{label}]");
    let mut head = vec!["#bytes", "#iterations", &peak, &avg, "MsgRate [Mpps]"];
    if peer_col {
        head.push(&peer_avg);
    }
    let mut t = style.table(&head);
    for b in &r.bw {
        let mut row = vec![
            Cell::new(b.size),
            Cell::new(b.iterations),
            Cell::new(format!("{:.2}", conv(b.bw_peak_gbps))),
            Cell::new(format!("{:.2}", conv(b.bw_avg_gbps))),
            Cell::new(format!("{:.6}", b.msg_rate_mpps)),
        ];
        if peer_col {
            row.push(Cell::new(b.peer.as_ref().map_or("-".to_string(), |p| {
                format!("{:.2}", conv(p.bw_avg_gbps))
            })));
        }
        t.add_row(row);
    }
    let mut out = perf_header(r);
    out.push_str(&finish(&t));
    out.push_str(&vs_tcp_text(r, style));
    out
}

fn histogram_text(l: &crate::session::perf::LatResult) -> String {
    let max = l
        .histogram
        .iter()
        .map(|b| b.count)
        .max()
        .unwrap_or(0)
        .max(1);
    let mut out = format!("  distribution of {} B (us):\n", l.size);
    for b in &l.histogram {
        let bar = "#".repeat(((b.count * 50).div_ceil(max)) as usize);
        out.push_str(&format!("  <= {:>10.2} {:>9} {bar}\n", b.le_us, b.count));
    }
    out
}

/// `rdmadiag lat`: one row per size, every statistic from every sample.
pub fn lat_text(r: &PerfReport, histogram: bool, style: Style) -> String {
    let mut t = style.table(&[
        "#bytes",
        "#iterations",
        "min",
        "median",
        "avg",
        "stdev",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "max",
    ]);
    let f = |v: f64| Cell::new(format!("{v:.2}"));
    for l in &r.lat {
        let s = &l.latency;
        t.add_row(vec![
            Cell::new(l.size),
            Cell::new(l.iterations),
            f(s.min_us),
            f(s.median_us),
            f(s.avg_us),
            f(s.stdev_us),
            f(s.p90_us),
            f(s.p99_us),
            f(s.p999_us),
            f(s.p9999_us),
            f(s.max_us),
        ]);
    }
    let mut out = perf_header(r);
    out.push_str(&format!(
        "  latency in us, each sample a {}\n",
        r.latency_measure.as_deref().unwrap_or("round trip")
    ));
    out.push_str(&finish(&t));
    out.push_str(&vs_tcp_text(r, style));
    if histogram {
        for l in &r.lat {
            out.push_str(&histogram_text(l));
        }
    }
    out
}

/// `rdmadiag write` / `read`: what moved, how fast, and whether every byte arrived.
pub fn xfer_text(r: &PerfReport, style: Style) -> String {
    let mut t = style.table(&[
        "#bytes",
        "#iterations",
        "verified",
        "min us",
        "median us",
        "max us",
        "Gb/s",
    ]);
    for l in &r.lat {
        let ok = match (l.verified, &l.mismatch) {
            (_, Some(m)) => style.alert(m.to_string()),
            (Some(true), None) => Cell::new("every byte"),
            _ => Cell::new("-"),
        };
        t.add_row(vec![
            Cell::new(l.size),
            Cell::new(l.iterations),
            ok,
            Cell::new(format!("{:.2}", l.latency.min_us)),
            Cell::new(format!("{:.2}", l.latency.median_us)),
            Cell::new(format!("{:.2}", l.latency.max_us)),
            Cell::new(format!("{:.3}", l.bw_avg_gbps.unwrap_or(0.0))),
        ]);
    }
    let mut out = perf_header(r);
    out.push_str(&finish(&t));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{GidInfo, PortsReport};
    use crate::verbs::{GidType, LinkLayer, Mtu, NodeType, PhysState, PortState, Transport};

    fn port() -> PortInfo {
        PortInfo {
            device: "rxe0".into(),
            port: 1,
            state: PortState::Active,
            physical_state: PhysState::LinkUp,
            link_layer: LinkLayer::Ethernet,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            max_mtu: Some(Mtu(4096)),
            active_mtu: Some(Mtu(1024)),
            active_width: Some("4X".into()),
            active_speed: Some("EDR".into()),
            speed_per_lane_gbps: Some(25.0),
            rate_gbps: Some(100.0),
            netdev: Some("dummy0".into()),
            default_gid_index: Some(1),
            gids: vec![
                GidInfo {
                    index: 0,
                    gid: "fe80::1".parse().unwrap(),
                    gid_type: GidType::RoceV2,
                    netdev: Some("dummy0".into()),
                    ip: Some("fe80::1".into()),
                    default: false,
                },
                GidInfo {
                    index: 1,
                    gid: "::ffff:10.77.0.1".parse().unwrap(),
                    gid_type: GidType::RoceV2,
                    netdev: Some("dummy0".into()),
                    ip: Some("10.77.0.1".into()),
                    default: true,
                },
            ],
            pkeys: vec!["0xffff".into()],
            details: None,
            counters: Some(BTreeMap::from([
                ("port_rcv_errors".to_string(), 3),
                ("port_xmit_data".to_string(), 10),
            ])),
            hw_counters: None,
        }
    }

    #[test]
    fn plain_ports_text_has_gids_types_ips_and_marks() {
        let r = PortsReport {
            devices: vec![],
            ports: vec![port()],
        };
        let out = ports_text(&r, Style::plain());
        assert!(!out.contains('\u{1b}'), "no escape codes on a pipe");
        assert!(out.contains("ACTIVE (LINK_UP)"), "{out}");
        assert!(
            out.contains("4X EDR (25 Gb/s per lane) = 100 Gb/s"),
            "{out}"
        );
        assert!(out.contains("1024 active, 4096 max"), "{out}");
        let row = out
            .lines()
            .find(|l| l.contains("::ffff:10.77.0.1") && l.contains("dummy0"))
            .expect("GID row");
        assert!(row.trim_start().starts_with('*'), "{row}");
        assert!(
            row.contains("RoCE v2") && row.contains("10.77.0.1"),
            "{row}"
        );
        let bad = out.lines().find(|l| l.contains("port_rcv_errors")).unwrap();
        assert!(bad.contains("! error count"), "{bad}");
        let fine = out.lines().find(|l| l.contains("port_xmit_data")).unwrap();
        assert!(!fine.contains('!'), "{fine}");
        assert!(!out.contains("LID / SM LID"), "no LID row on Ethernet");
    }

    #[test]
    fn devices_table_one_row_per_device() {
        let d = DeviceInfo {
            name: "mlx5_0".into(),
            node_guid: "0c42:a103:0065:d4a6".into(),
            sys_image_guid: "0c42:a103:0065:d4a6".into(),
            node_type: NodeType::Ca,
            transport: Transport::InfiniBand,
            fw_ver: "20.31.1014".into(),
            hw_ver: 0,
            vendor_id: 0x02c9,
            vendor_part_id: 4123,
            board_id: Some("MT_0000000222".into()),
            phys_port_cnt: 2,
            ports_active: 1,
            port_summary: "1/2 active".into(),
            limits: None,
        };
        let out = devices_table(
            &[
                d.clone(),
                DeviceInfo {
                    name: "mlx5_1".into(),
                    ..d
                },
            ],
            Style::plain(),
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[0].contains("DEVICE") && lines[0].contains("NODE GUID"));
        assert!(lines[1].contains("0c42:a103:0065:d4a6") && lines[1].contains("0x02c9"));
        assert!(lines[1].contains("1/2 active") && lines[1].contains("20.31.1014"));
    }
}
