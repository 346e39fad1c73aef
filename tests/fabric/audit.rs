//! The configuration audit through the coordinator: ranks that send their port's configuration
//! with their hello, one host unlike the others, `--require-same`, the join with a slow host,
//! and what the report says of it in text, JSON and Prometheus.

use super::*;
use rdmadiag::ib::{GidType, LinkLayer, Mtu};
use rdmadiag::report::Style;
use rdmadiag::report::export::prometheus;
use rdmadiag::report::fabric::config::{Field, FindingKind, PortConfig, Severity};
use rdmadiag::report::fabric::{FabricReport, FabricSettings, fabric_text};

/// A stub rank that also tells its port's configuration.
pub(super) struct Configured {
    pub stub: Stub,
    pub config: Option<PortConfig>,
}

impl PairRunner for Configured {
    fn identity(&self) -> anyhow::Result<Identity> {
        self.stub.identity()
    }
    fn run(&self, t: &PairTest) -> PairSide {
        self.stub.run(t)
    }
    fn config(&self) -> Option<PortConfig> {
        self.config.clone()
    }
}

/// A Soft-RoCE port at the lab's defaults: active MTU 1024, RoCE v2, no PCI parent.
pub(super) fn rxe() -> PortConfig {
    PortConfig {
        firmware: None,
        driver: Some("virtio_net".into()),
        kernel: Some("6.1.0-18-amd64".into()),
        rdma_core: Some("44.0".into()),
        rdmadiag: Some("0.1.0".into()),
        link_layer: Some(LinkLayer::Ethernet),
        rate_gbps: Some(10.0),
        width: Some("1X".into()),
        active_mtu: Some(Mtu(1024)),
        gid_type: Some(GidType::RoceV2),
        pcie: None,
        numa_node: None,
    }
}

/// `n` ranks at even bandwidth (or `bw`), each with `config(rank)`.
fn run(
    cfg: CoordinatorConfig,
    bw: fn(u32, u32) -> f64,
    config: impl Fn(u32) -> PortConfig,
) -> (Outcome, Vec<anyhow::Result<u8>>) {
    let n = cfg.size;
    let sim = simulate(cfg, n, |rank| Configured {
        stub: Stub {
            rank,
            bw,
            stall: None,
        },
        config: Some(config(rank)),
    });
    (sim.outcome.unwrap(), sim.codes)
}

pub(super) fn settings() -> FabricSettings {
    FabricSettings {
        pattern: "all-pairs".into(),
        tests: vec!["bw".into(), "lat".into()],
        bw_size: 65536,
        bw_iterations: 100,
        lat_size: 2,
        lat_iterations: 100,
        min_bw_ratio: 0.9,
        max_lat_ratio: 1.5,
        expect_bw_gbps: None,
        expect_lat_us: None,
        timeout_s: 30.0,
        counter_check: true,
        max_error_delta: None,
        tclass: 0,
        sl: 0,
        require_same: vec![],
    }
}

fn report(o: Outcome) -> FabricReport {
    rdmadiag::fabric::report(o, settings(), Duration::from_secs(1))
}

fn all_exit(codes: &[anyhow::Result<u8>], code: u8) {
    let got: Vec<_> = codes
        .iter()
        .map(|c| c.as_ref().map_err(|e| e.to_string()))
        .collect();
    assert!(got.iter().all(|c| *c == Ok(&code)), "{got:?}");
}

/// Issue 35's case on the wire: one host at active MTU 4096 among three at 1024 is named with
/// the field, fails the run (every rank exits 3) and makes no suspect of the link verdict.
#[test]
fn one_host_at_another_mtu_is_named_and_fails_the_run() {
    let (o, codes) = run(config(4, Duration::from_secs(20)), even, |rank| {
        let mut c = rxe();
        if rank == 2 {
            c.active_mtu = Some(Mtu(4096));
        }
        c
    });
    assert_eq!(o.config.len(), 1, "{:?}", o.config);
    let f = &o.config[0];
    assert_eq!(
        (f.field, f.kind, f.severity),
        (Field::Mtu, FindingKind::Differs, Severity::Failure)
    );
    assert_eq!(f.groups.len(), 1);
    assert_eq!(f.groups[0].hosts, ["sim2"]);
    assert_eq!(f.groups[0].value, "4096");
    assert_eq!(f.majority.as_ref().unwrap().value, "1024");
    assert!(o.suspects.is_empty(), "{:?}", o.suspects);
    assert_eq!(o.exit_code, 3);
    all_exit(&codes, 3);
    assert!(o.hosts.iter().all(|h| h.config.is_some()));

    let r = report(o);
    assert!(r.anything_flagged());
    let text = fabric_text(&r, Style::plain());
    assert!(
        text.contains("[mtu] active MTU 4096 on sim2; 1024 on 3 of 4\n"),
        "{text}"
    );
    assert!(
        text.contains("verdict: config: active MTU differs on sim2\n"),
        "{text}"
    );
    let v = serde_json::to_value(&r).unwrap();
    let c = &v["config"][0];
    assert_eq!(c["field"], "mtu");
    assert_eq!(c["kind"], "differs");
    assert_eq!(c["severity"], "failure");
    assert_eq!(c["groups"][0]["hosts"][0], "sim2");
    assert_eq!(c["majority"]["value"], "1024");
    assert_eq!(c["majority"]["hosts"], 3);
    assert_eq!(v["hosts"][2]["config"]["active_mtu"], 4096);
    let prom = prometheus::fabric(&r);
    assert!(
        prom.contains(
            "\nrdmadiag_fabric_config_findings{field=\"mtu\",kind=\"differs\",severity=\"failure\"} 1\n"
        ),
        "{prom}"
    );
    assert!(
        prom.contains(
            "\nrdmadiag_fabric_config_host_differs{host=\"sim2\",field=\"mtu\",kind=\"differs\",\
             severity=\"failure\",value=\"4096\"} 1\n"
        ),
        "{prom}"
    );
}

/// Firmware is information by default (exit 0, still reported); `--require-same firmware`
/// makes the same difference fail.
#[test]
fn another_firmware_fails_only_when_required_the_same() {
    let fw = |rank: u32| {
        let mut c = rxe();
        c.firmware = Some(
            if rank == 1 {
                "20.31.1014"
            } else {
                "20.39.1002"
            }
            .into(),
        );
        c
    };
    let (o, codes) = run(config(4, Duration::from_secs(20)), even, fw);
    assert_eq!(o.config.len(), 1, "{:?}", o.config);
    assert_eq!(o.config[0].field, Field::Firmware);
    assert_eq!(o.config[0].severity, Severity::Information);
    assert_eq!(o.exit_code, 0);
    all_exit(&codes, 0);
    let r = report(o);
    assert!(!r.anything_flagged());
    let text = fabric_text(&r, Style::plain());
    assert!(
        text.contains("[firmware] firmware 20.31.1014 on sim1; 20.39.1002 on 3 of 4 (information)"),
        "{text}"
    );
    assert!(text.contains("verdict: no suspects\n"), "{text}");
    let prom = prometheus::fabric(&r);
    assert!(
        prom.contains("field=\"firmware\",kind=\"differs\",severity=\"information\"} 1\n"),
        "{prom}"
    );

    let cfg = CoordinatorConfig {
        require_same: vec![Field::Firmware],
        ..config(4, Duration::from_secs(20))
    };
    let (o, codes) = run(cfg, even, fw);
    assert_eq!(o.config[0].severity, Severity::Failure);
    assert_eq!(o.exit_code, 3);
    all_exit(&codes, 3);
}

/// A slow host whose configuration differs is one suspect with its cause, in the suspect's
/// note and in the verdict line; every host agreeing on its configuration says so.
#[test]
fn a_slow_host_with_another_mtu_is_one_suspect_with_its_cause() {
    fn slow_two(a: u32, b: u32) -> f64 {
        if a == 2 || b == 2 { 1.0 } else { 10.0 }
    }
    let (o, codes) = run(config(5, Duration::from_secs(20)), slow_two, |rank| {
        let mut c = rxe();
        if rank == 2 {
            c.active_mtu = Some(Mtu(4096));
        }
        c
    });
    assert_eq!(o.suspects.hosts, ["sim2"]);
    let note = o.notes.iter().find(|n| n.name == "sim2").unwrap();
    assert_eq!(
        note.config.as_deref(),
        Some("its config differs: active MTU 4096 against 1024 on 4 of 5")
    );
    all_exit(&codes, 3);
    let r = report(o);
    let text = fabric_text(&r, Style::plain());
    assert!(
        text.contains(
            "verdict: suspect host(s) sim2 (its config differs: active MTU 4096 against 1024 on \
             4 of 5)\n"
        ),
        "{text}"
    );
    let v = serde_json::to_value(&r).unwrap();
    assert!(
        v["suspect_notes"][0]["config"]
            .as_str()
            .unwrap()
            .contains("4096")
    );

    let (o, _) = run(config(4, Duration::from_secs(20)), even, |_| rxe());
    assert!(o.config.is_empty() && o.exit_code == 0);
    let text = fabric_text(&report(o), Style::plain());
    assert!(
        text.contains("configuration: the same on all 4 hosts that told it"),
        "{text}"
    );
}
