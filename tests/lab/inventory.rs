//! Lab tests of devices, ports and the verbs core on rxe0.

use crate::common::*;
use crate::{DEV, require_rxe0};
use rdmadiag::verbs::{
    Access, Completion, CompletionChannel, CompletionQueue, DeviceList, GlobalRoute, PathAttr,
    ProtectionDomain, QpCaps, QpType, QueuePair, RemoteQp, RtrParams, RtsParams, SendOp,
    SendRequest, WcOpcode, default_gid_index,
};
use serde_json::Value;
use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

fn devinfo() -> DevinfoDevice {
    let o = Command::new("ibv_devinfo")
        .args(["-v", "-d", DEV])
        .output()
        .expect("run ibv_devinfo");
    assert!(o.status.success(), "ibv_devinfo failed");
    parse_devinfo(&String::from_utf8_lossy(&o.stdout))
        .remove(DEV)
        .expect("ibv_devinfo lists rxe0")
}

fn sysfs(rel: &str) -> String {
    fs::read_to_string(format!("/sys/class/infiniband/{DEV}/{rel}"))
        .unwrap_or_else(|e| panic!("read sysfs {rel}: {e}"))
        .trim()
        .to_string()
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn devices_json_agrees_with_ibv_devinfo() {
    require_rxe0();
    let doc = rdmadiag_json(&["devices", "--json"]);
    let devs = doc["devices"].as_array().expect("devices array");
    let d = devs.iter().find(|d| d["name"] == DEV).expect("rxe0 listed");
    let info = devinfo();
    let f = &info.fields;
    let mut checked = 0;
    for key in ["node_guid", "sys_image_guid"] {
        assert_eq!(d[key].as_str().unwrap(), f[key], "{key}");
        checked += 1;
    }
    assert_eq!(
        d["phys_port_cnt"].as_u64().unwrap(),
        devinfo_number(&f["phys_port_cnt"])
    );
    // The kernel's firmware string; rxe has none, where its libibverbs provider prints "0.0.0".
    let fw = d["fw_ver"].as_str().unwrap();
    assert_eq!(fw, sysfs("fw_ver"));
    assert!(fw.is_empty() || fw == f["fw_ver"], "{fw} / {}", f["fw_ver"]);
    // What only ibv_query_device tells comes with ports -v.
    let verbose = rdmadiag_json(&["ports", "-v", "-d", DEV, "--json"]);
    let v = &verbose["devices"][0];
    for key in ["vendor_id", "vendor_part_id", "hw_ver", "phys_port_cnt"] {
        assert_eq!(v[key].as_u64().unwrap(), devinfo_number(&f[key]), "{key}");
        checked += 1;
    }
    assert!(
        d.get("vendor_id").is_none(),
        "devices reads sysfs only: {d}"
    );
    assert!(f["transport"].starts_with(d["transport"].as_str().unwrap()));
    assert_eq!(d["node_type"], "ca");
    assert_eq!(d["port_summary"], "1/1 active");
    // ibv_devices prints the node GUID as 16 hex digits; sysfs as 4 groups.
    assert_eq!(d["node_guid"].as_str().unwrap(), sysfs("node_guid"));
    assert!(checked >= 6);
    eprintln!("devices: {checked} fields agree with ibv_devinfo -v");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn ports_json_agrees_with_ibv_devinfo_and_sysfs() {
    require_rxe0();
    let doc = rdmadiag_json(&["ports", "-v", "-d", DEV, "--json"]);
    let info = devinfo();

    // Device limits: every key both report must agree.
    let limits = doc["devices"][0]["limits"]
        .as_object()
        .expect("-v carries limits");
    let mut checked = 0;
    for (k, v) in &info.fields {
        let Some(ours) = limits.get(k) else { continue };
        match k.as_str() {
            "atomic_cap" => assert_eq!(
                format!("ATOMIC_{}", ours.as_str().unwrap().to_uppercase()),
                v.split_whitespace().next().unwrap(),
                "{k}"
            ),
            _ => assert_eq!(ours.as_u64().unwrap(), devinfo_number(v), "{k}: {v}"),
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} device limits compared");
    for must in ["max_qp", "max_qp_wr", "max_cqe", "max_mr_size", "max_sge"] {
        assert!(limits.contains_key(must), "{must}");
    }

    // Port 1.
    let p = &doc["ports"][0];
    let dp = &info.ports[&1];
    let f = &dp.fields;
    let mut pchecked = 0;
    let mut eq = |what: &str, a: u64, b: u64| {
        assert_eq!(a, b, "{what}");
        pchecked += 1;
    };
    let details = p["details"].as_object().expect("-v carries port details");
    for mtu in ["max_mtu", "active_mtu"] {
        eq(mtu, details[mtu].as_u64().unwrap(), devinfo_number(&f[mtu]));
    }
    eq(
        "sm_lid",
        p["sm_lid"].as_u64().unwrap(),
        devinfo_number(&f["sm_lid"]),
    );
    eq(
        "port_lid",
        p["lid"].as_u64().unwrap(),
        devinfo_number(&f["port_lid"]),
    );
    eq(
        "port_lmc",
        p["lmc"].as_u64().unwrap(),
        devinfo_number(&f["port_lmc"]),
    );
    for (k, v) in details {
        let Some(theirs) = f.get(k) else { continue };
        if k.ends_with("_mtu") {
            continue; // "4096 (5)": compared in bytes above
        }
        let raw = if theirs.contains('(') {
            devinfo_paren(theirs)
        } else {
            devinfo_number(theirs)
        };
        eq(k, v.as_u64().unwrap(), raw);
    }
    assert_eq!(
        format!("PORT_{}", p["state"].as_str().unwrap().to_uppercase()),
        f["state"].split_whitespace().next().unwrap()
    );
    assert_eq!(
        p["physical_state"].as_str().unwrap().to_uppercase(),
        f["phys_state"].split_whitespace().next().unwrap()
    );
    assert_eq!(p["link_layer"], f["link_layer"].as_str());
    assert_eq!(
        p["active_width"].as_str().unwrap(),
        f["active_width"].split_whitespace().next().unwrap()
    );
    let lane: f64 = f["active_speed"]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(p["speed_per_lane_gbps"].as_f64().unwrap(), lane);
    assert!(pchecked >= 15, "only {pchecked} port fields compared");

    // GIDs: same set as ibv_devinfo, with type, netdev and IP it cannot show.
    let gids = p["gids"].as_array().unwrap();
    assert_eq!(gids.len(), dp.gids.len(), "GID count");
    for g in gids {
        let idx = g["index"].as_u64().unwrap() as u32;
        let (their_gid, their_type) = &dp.gids[&idx];
        let a: std::net::Ipv6Addr = g["gid"].as_str().unwrap().parse().unwrap();
        let b: std::net::Ipv6Addr = their_gid.parse().unwrap();
        assert_eq!(a, b, "GID {idx}");
        assert_eq!(g["type"].as_str().unwrap(), their_type, "GID {idx} type");
        assert_eq!(g["type"], sysfs(&format!("ports/1/gid_attrs/types/{idx}")));
        assert_eq!(
            g["netdev"],
            sysfs(&format!("ports/1/gid_attrs/ndevs/{idx}"))
        );
    }
    let v4 = gids
        .iter()
        .find(|g| g["gid"] == "::ffff:10.77.0.1")
        .expect("the IPv4-mapped GID of dummy0");
    assert_eq!(v4["type"], "RoCE v2");
    assert_eq!(v4["netdev"], "dummy0");
    assert_eq!(v4["ip"], "10.77.0.1");
    assert_eq!(v4["default"], true);
    assert_eq!(p["default_gid_index"], v4["index"]);
    assert_eq!(p["netdev"], "dummy0");
    let mtu = fs::read_to_string("/sys/class/net/dummy0/mtu").unwrap();
    assert_eq!(p["netdev_mtu"].as_u64(), mtu.trim().parse().ok());
    assert_eq!(p["link_layer"], "Ethernet");
    assert_eq!(p["state"], "active");
    eprintln!(
        "ports: {checked} device limits, {pchecked} port fields and {} GIDs agree",
        gids.len()
    );
}

/// Every leaf where `a` and `b` differ, as "path: a != b" in `diffs`; returns the number of
/// leaves compared.
fn compare(a: &Value, b: &Value, path: &str, diffs: &mut Vec<String>) -> usize {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter()
                .map(|k| {
                    let (l, r) = (&x.get(k), &y.get(k));
                    match (l, r) {
                        (Some(l), Some(r)) => compare(l, r, &format!("{path}.{k}"), diffs),
                        _ => {
                            diffs.push(format!("{path}.{k}: {l:?} != {r:?}"));
                            1
                        }
                    }
                })
                .sum()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .map(|(i, (l, r))| compare(l, r, &format!("{path}[{i}]"), diffs))
            .sum(),
        _ => {
            if a != b {
                diffs.push(format!("{path}: {a} != {b}"));
            }
            1
        }
    }
}

/// Compare two reports field by field; fail listing every difference.
fn assert_same<T: serde::Serialize>(what: &str, sysfs: &T, verbs: &T, at_least: usize) {
    let (a, b) = (
        serde_json::to_value(sysfs).unwrap(),
        serde_json::to_value(verbs).unwrap(),
    );
    let mut diffs = Vec::new();
    let n = compare(&a, &b, what, &mut diffs);
    assert!(
        diffs.is_empty(),
        "sysfs and verbs disagree:\n{}",
        diffs.join("\n")
    );
    assert!(n >= at_least, "{what}: only {n} fields compared");
    eprintln!("{what}: {n} fields agree between sysfs and libibverbs");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn sysfs_and_verbs_agree_field_by_field() {
    require_rxe0();
    use rdmadiag::inventory::{self, PortQuery, Source};
    use rdmadiag::report::{Style, inventory as render};

    let sysfs_devs = inventory::devices(None, Source::Sysfs).expect("devices from sysfs");
    let verbs_devs = inventory::devices(None, Source::Verbs).expect("devices from verbs");
    assert!(sysfs_devs.iter().any(|d| d.name == DEV), "{sysfs_devs:?}");
    assert_same("devices", &sysfs_devs, &verbs_devs, 12);
    assert_eq!(sysfs_devs, verbs_devs);
    // What the command prints is the same table either way.
    let o = rdmadiag(&["devices"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        render::devices_table(&verbs_devs, Style::plain())
    );

    let q = |source| PortQuery {
        source,
        ..PortQuery::default()
    };
    let sysfs_ports = inventory::ports(None, None, q(Source::Sysfs)).expect("ports from sysfs");
    let verbs_ports = inventory::ports(None, None, q(Source::Verbs)).expect("ports from verbs");
    assert!(
        sysfs_ports.ports.iter().all(|p| !p.gids.is_empty()),
        "GIDs compared: {sysfs_ports:?}"
    );
    // The active MTU agrees in bytes; only how it was known differs (computed from the netdev,
    // or asked of the device).
    let mtus = |r: &rdmadiag::report::inventory::PortsReport| -> Vec<_> {
        r.ports
            .iter()
            .map(|p| p.active_mtu.map(|a| a.mtu))
            .collect()
    };
    assert_eq!(mtus(&sysfs_ports), mtus(&verbs_ports), "active MTUs");
    assert!(
        mtus(&sysfs_ports).iter().all(Option::is_some),
        "{sysfs_ports:?}"
    );
    // The binary's text is the sysfs report's, its MTU line included.
    let sysfs_text = render::ports_text(&sysfs_ports, Style::plain());
    let sysfs_ports = {
        let mut r = sysfs_ports;
        r.ports.iter_mut().for_each(|p| p.active_mtu = None);
        r
    };
    let unsourced = |mut r: rdmadiag::report::inventory::PortsReport| {
        r.ports.iter_mut().for_each(|p| p.active_mtu = None);
        r
    };
    let verbs_ports = unsourced(verbs_ports);
    assert_same("ports", &sysfs_ports, &verbs_ports, 25);
    let o = rdmadiag(&["ports"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), sysfs_text);

    // ports -v reads everything through the verbs: the same values, plus its details.
    let verbose = inventory::ports(
        None,
        None,
        PortQuery {
            verbose: true,
            ..PortQuery::default()
        },
    )
    .expect("ports -v");
    let mut stripped = unsourced(verbose.clone());
    stripped.ports.iter_mut().for_each(|p| p.details = None);
    let mut devs = std::mem::take(&mut stripped.devices);
    assert!(devs.iter().all(|d| d.details.is_some()), "{devs:?}");
    devs.iter_mut().for_each(|d| d.details = None);
    assert_same("ports -v", &sysfs_ports, &stripped, 25);
    assert_same("ports -v devices", &sysfs_devs, &devs, 12);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn devices_and_ports_load_no_verbs_provider() {
    require_rxe0();
    // The dynamic loader names every library it loads; a libibverbs provider (librxe-rdmav*.so)
    // is loaded only once libibverbs builds its device list.
    let loads = |args: &[&str]| {
        let o = rdmadiag_env(args, &[("LD_DEBUG", "files")]);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stderr(&o)
            .lines()
            .filter(|l| l.contains("file=") && l.contains("rdmav"))
            .count()
    };
    assert!(
        loads(&["ports", "-v"]) > 0,
        "the check sees a provider load"
    );
    for args in [
        &["devices"][..],
        &["ports"],
        &["ports", "--counters", "--json"],
    ] {
        assert_eq!(loads(args), 0, "{args:?} loaded a verbs provider");
    }
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn counters_come_from_sysfs() {
    require_rxe0();
    let doc = rdmadiag_json(&["ports", "--counters", "--json"]);
    let p = &doc["ports"][0];
    for group in ["counters", "hw_counters"] {
        let ours = p[group].as_object().expect(group);
        let dir = format!("/sys/class/infiniband/{DEV}/ports/1/{group}");
        let mut names: Vec<String> = fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n != "lifespan")
                    .filter(|n| {
                        fs::read_to_string(format!("{dir}/{n}"))
                            .is_ok_and(|s| s.trim().parse::<u64>().is_ok())
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        let mut keys: Vec<String> = ours.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, names, "{group}");
    }
    assert!(
        !p["hw_counters"].as_object().unwrap().is_empty(),
        "rxe exposes hw_counters"
    );
    // The error counters are named, and only counters the port has.
    let errors: Vec<&str> = p["error_counters"]
        .as_array()
        .expect("error_counters")
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for must in ["retry_exceeded_err", "rcvd_seq_err", "out_of_seq_request"] {
        assert!(errors.contains(&must), "{must} not in {errors:?}");
    }
    for traffic in ["sent_pkts", "rcvd_pkts", "ack_deferred"] {
        assert!(!errors.contains(&traffic), "{traffic} in {errors:?}");
    }
    for e in &errors {
        assert!(
            p["counters"].get(e).is_some() || p["hw_counters"].get(e).is_some(),
            "{e} is not one of the port's counters"
        );
    }
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn tables_show_what_ibv_devinfo_cannot() {
    require_rxe0();
    let o = rdmadiag(&["devices"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("rxe0") && out.contains("1/1 active"), "{out}");
    assert!(out.contains(&sysfs("node_guid")), "{out}");

    let o = rdmadiag(&["ports", "--counters", "-v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for must in [
        "::ffff:10.77.0.1",
        "RoCE v2",
        "dummy0",
        "10.77.0.1",
        "ACTIVE",
        "max_qp",
    ] {
        assert!(out.contains(must), "{must} missing in:\n{out}");
    }
    let marked = out
        .lines()
        .find(|l| l.contains("::ffff:10.77.0.1") && l.contains("dummy0"))
        .unwrap();
    assert!(
        marked.trim_start().starts_with('*'),
        "default GID marked: {marked}"
    );
    eprintln!("{out}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn unknown_names_list_what_exists() {
    require_rxe0();
    let o = rdmadiag(&["ports", "-d", "mlx5_9"]);
    assert_eq!(o.status.code(), Some(1));
    let line = one_error_line(&o);
    assert!(
        line.contains("mlx5_9") && line.contains("devices present: rxe0"),
        "{line}"
    );

    let o = rdmadiag(&["devices", "-d", "mlx5_9"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(one_error_line(&o).contains("devices present: rxe0"));

    let o = rdmadiag(&["ports", "-d", DEV, "-p", "2"]);
    assert_eq!(o.status.code(), Some(1));
    let line = one_error_line(&o);
    assert!(
        line.contains("no port 2") && line.contains("valid ports: 1"),
        "{line}"
    );
}

/// Drain `want` completions from `cq` or fail after `limit`.
fn wait_completions(cq: &CompletionQueue, want: usize, limit: Duration) -> Vec<Completion> {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [Completion::default(); 8];
    while got.len() < want {
        let n = cq.poll_until(&mut buf, deadline).expect("ibv_poll_cq");
        assert!(
            n > 0,
            "timed out waiting for completions: {} of {want}",
            got.len()
        );
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn verbs_core_moves_data_over_rc_loopback() {
    require_rxe0();
    let list = DeviceList::new().expect("device list");
    let ctx = list.find(DEV).expect("rxe0").open().expect("open rxe0");
    drop(list); // the context must stay usable without the list
    let pattr = ctx.query_port(1).unwrap();
    let gids = rdmadiag::device_access::gid_table(&ctx, 1, &pattr, 1).unwrap();
    let sgid = default_gid_index(&gids).expect("a RoCE GID");
    let gid = gids.iter().find(|g| g.index == sgid).unwrap().gid;

    let pd = ProtectionDomain::new(&ctx).unwrap();
    let channel = CompletionChannel::new(&ctx).unwrap();
    let send_cq = CompletionQueue::new(&ctx, 32, None).unwrap();
    let recv_cq = CompletionQueue::new(&ctx, 32, Some(&channel)).unwrap();
    let caps = QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let a = QueuePair::new(&pd, &send_cq, &recv_cq, QpType::Rc, caps).unwrap();
    let b = QueuePair::new(&pd, &send_cq, &recv_cq, QpType::Rc, caps).unwrap();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    for q in [&a, &b] {
        q.to_init(1, 0, access, 0).unwrap();
    }
    let path = PathAttr {
        port: 1,
        dlid: pattr.lid,
        sl: 0,
        grh: Some(GlobalRoute {
            dgid: gid,
            sgid_index: sgid as u8,
            hop_limit: 1,
            traffic_class: 0,
            flow_label: 0,
        }),
    };
    let rtr = RtrParams {
        path_mtu: pattr.active_mtu.unwrap(),
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
    };
    let rts = |psn| RtsParams {
        sq_psn: psn,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
    };
    a.to_rtr(
        &RemoteQp {
            qpn: b.qp_num(),
            psn: 0x222,
            path,
        },
        &rtr,
    )
    .unwrap();
    b.to_rtr(
        &RemoteQp {
            qpn: a.qp_num(),
            psn: 0x111,
            path,
        },
        &rtr,
    )
    .unwrap();
    a.to_rts(&rts(0x111)).unwrap();
    b.to_rts(&rts(0x222)).unwrap();

    let mut mr_a = rdmadiag::verbs::MemoryRegion::new(&pd, 8192, access).unwrap();
    let mut mr_b = rdmadiag::verbs::MemoryRegion::new(&pd, 8192, access).unwrap();
    assert_eq!(mr_a.addr() % 4096, 0, "page-aligned buffer");
    for (i, x) in mr_a.as_mut_slice().iter_mut().enumerate() {
        *x = (i * 7 + 3) as u8;
    }
    for (i, x) in mr_b.as_mut_slice()[4096..].iter_mut().enumerate() {
        *x = (i * 13 + 5) as u8;
    }
    let limit = Duration::from_secs(20);

    // SEND/RECV, woken through the completion channel.
    recv_cq.req_notify(false).unwrap();
    b.post_recv(1, &mr_b, 0..1024).unwrap();
    let send = |wr_id, op, range: std::ops::Range<usize>| SendRequest {
        wr_id,
        op,
        mr: &mr_a,
        range,
        signaled: true,
        inline: false,
        ud: None,
    };
    a.post_send(&send(2, SendOp::Send, 0..1024)).unwrap();
    assert!(recv_cq.wait_event(limit).unwrap(), "completion event");
    let r = wait_completions(&recv_cq, 1, limit);
    assert!(r[0].status.is_success(), "recv: {}", r[0].status);
    assert_eq!(
        (r[0].wr_id, r[0].opcode, r[0].byte_len),
        (1, WcOpcode::Recv, 1024)
    );
    let s = wait_completions(&send_cq, 1, limit);
    assert!(s[0].status.is_success() && s[0].wr_id == 2);
    assert_eq!(&mr_b.as_slice()[..1024], &mr_a.as_slice()[..1024]);

    // RDMA WRITE into b, RDMA READ back from b.
    let write = SendOp::Write {
        remote_addr: mr_b.addr() + 1024,
        rkey: mr_b.rkey(),
    };
    a.post_send(&send(3, write, 1024..3072)).unwrap();
    let c = wait_completions(&send_cq, 1, limit);
    assert!(c[0].status.is_success() && c[0].opcode == WcOpcode::RdmaWrite);
    assert_eq!(&mr_b.as_slice()[1024..3072], &mr_a.as_slice()[1024..3072]);

    let read = SendOp::Read {
        remote_addr: mr_b.addr() + 4096,
        rkey: mr_b.rkey(),
    };
    a.post_send(&send(4, read, 4096..8192)).unwrap();
    let c = wait_completions(&send_cq, 1, limit);
    assert!(c[0].status.is_success() && c[0].opcode == WcOpcode::RdmaRead);
    assert_eq!(&mr_a.as_slice()[4096..], &mr_b.as_slice()[4096..]);

    // Out-of-bounds local range is refused before it reaches the device.
    let e = a.post_send(&send(5, SendOp::Send, 8000..9000)).unwrap_err();
    assert!(
        e.to_string()
            .contains("outside the 8192-byte memory region"),
        "{e}"
    );

    // A bad rkey comes back as a remote access error, explained.
    let bad = SendOp::Write {
        remote_addr: mr_b.addr(),
        rkey: mr_b.rkey() ^ 0xdead00,
    };
    a.post_send(&send(6, bad, 0..64)).unwrap();
    let c = wait_completions(&send_cq, 1, limit);
    assert_eq!(
        c[0].status.name(),
        "IBV_WC_REM_ACCESS_ERR",
        "{}",
        c[0].status
    );
    assert!(c[0].status.likely_cause().contains("rkey"));
    // Drop order is the reverse of creation here, but Arcs make any order safe.
    drop(mr_a);
    drop(ctx);
    drop(a);
    drop(b);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn output_json_is_valid_for_every_combination() {
    require_rxe0();
    for args in [
        &["devices", "--json"][..],
        &["devices", "-d", DEV, "--json"],
        &["ports", "--json"],
        &["ports", "-p", "1", "--json"],
        &["ports", "-v", "--counters", "--json"],
    ] {
        let v: Value = rdmadiag_json(args);
        assert!(v.is_object(), "{args:?}");
    }
}

/// `ip link set dummy0 mtu N`, which must succeed.
fn set_dummy0_mtu(mtu: u32) {
    let st = Command::new("ip")
        .args(["link", "set", "dummy0", "mtu", &mtu.to_string()])
        .status()
        .expect("run ip");
    assert!(st.success(), "ip link set dummy0 mtu {mtu}");
}

/// Puts dummy0's MTU back however the test ends: the tests after it expect the lab's.
struct RestoreMtu(u32);

impl Drop for RestoreMtu {
    fn drop(&mut self) {
        set_dummy0_mtu(self.0);
    }
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn ports_shows_the_active_mtu_ibv_devinfo_shows_at_each_netdev_mtu() {
    require_rxe0();
    let before: u32 = fs::read_to_string("/sys/class/net/dummy0/mtu")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _restore = RestoreMtu(before);
    let mut seen = Vec::new();
    for mtu in [1500, 4200, 9000] {
        set_dummy0_mtu(mtu);
        let theirs = devinfo_number(&devinfo().ports[&1].fields["active_mtu"]);
        let doc = rdmadiag_json(&["ports", "-d", DEV, "--json"]);
        let p = &doc["ports"][0];
        assert_eq!(p["netdev_mtu"], mtu, "{p}");
        let a = &p["active_mtu"];
        assert_eq!(a["source"], "netdev", "sysfs alone, no device opened: {a}");
        assert_eq!(a["header_bytes"], 80, "rxe's rule: {a}");
        assert_eq!(a["mtu"].as_u64(), Some(theirs), "netdev MTU {mtu}: {a}");
        let verbose = rdmadiag_json(&["ports", "-v", "-d", DEV, "--json"]);
        let v = &verbose["ports"][0]["active_mtu"];
        assert_eq!(v["source"], "verbs", "{v}");
        assert_eq!(
            v["mtu"].as_u64(),
            Some(theirs),
            "-v at netdev MTU {mtu}: {v}"
        );
        seen.push(format!("netdev {mtu} -> {theirs}"));
    }
    assert_eq!(seen.len(), 3);
    eprintln!("active MTU as ibv_devinfo: {}", seen.join(", "));
}
