use super::*;

pub(crate) fn sample() -> FabricReport {
    let host = |rank: u32, host: &str| HostInfo {
        rank,
        host: host.into(),
        hostname: host.into(),
        device: "rxe0".into(),
        port: 1,
        gid: "::ffff:10.0.0.1".into(),
        address: "10.0.0.1".into(),
        test_port: 40000,
        config: None,
    };
    let pair = |a: (u32, &str), b: (u32, &str), bw: f64, flagged: bool| PairResult {
        a: a.1.into(),
        b: b.1.into(),
        a_rank: a.0,
        b_rank: b.0,
        round: 1,
        bw_gbps: Some(bw),
        bw_gbps_reverse: Some(bw),
        lat_us: Some(10.0),
        counters: BTreeMap::new(),
        error: None,
        flagged,
        reason: flagged.then(|| "bandwidth 0.1 Gb/s, below 0.8 x the median".to_string()),
        retested: false,
        control: false,
        control_bw_gbps: None,
    };
    FabricReport {
        settings: FabricSettings {
            pattern: "all-pairs".into(),
            tests: vec!["bw".into(), "lat".into()],
            bw_size: 65536,
            bw_iterations: 100,
            lat_size: 2,
            lat_iterations: 100,
            min_bw_ratio: 0.8,
            max_lat_ratio: 1.5,
            expect_bw_gbps: None,
            expect_lat_us: None,
            timeout_s: 30.0,
            counter_check: true,
            tclass: 0,
            sl: 0,
            max_error_delta: None,
            require_same: vec![],
        },
        rounds: 3,
        duration_s: 1.0,
        hosts: vec![host(0, "a"), host(1, "b"), host(2, "c,\"x\"")],
        pairs: vec![
            pair((0, "a"), (1, "b"), 1.0, false),
            pair((0, "a"), (2, "c,\"x\""), 0.1, true),
        ],
        median_bw_gbps: Some(1.0),
        median_lat_us: Some(10.0),
        bw_spread: Some(0.05),
        lat_spread: Some(0.05),
        counter_fence: BTreeMap::new(),
        findings: vec![],
        limits: vec![],
        suspects: Suspects {
            hosts: vec!["c,\"x\"".into()],
            links: vec![],
            groups: vec![],
        },
        retests: RetestSummary::default(),
        suspect_notes: vec![],
        host_summary: vec![],
        missing: vec![],
        missing_reasons: vec![],
        refused: vec![],
        config: vec![],
    }
}

#[test]
fn text_marks_flagged_cells_and_names_suspects() {
    let t = fabric_text(&sample(), Style::plain());
    assert!(t.contains("0.100*"), "{t}");
    assert!(t.contains("1.000") && !t.contains("1.000*"), "{t}");
    assert!(t.contains("verdict: suspect host(s) c,\"x\""), "{t}");
}

#[test]
fn csv_has_one_row_per_pair_and_quotes_fields() {
    let c = crate::report::export::csv::fabric(&sample());
    let lines: Vec<&str> = c.lines().collect();
    assert_eq!(lines.len(), 3, "{c}");
    assert!(lines[2].starts_with("a,\"c,\"\"x\"\"\",1,0.1,"), "{c}");
}

#[test]
fn prometheus_lines_are_well_formed() {
    let p = crate::report::export::prometheus::fabric(&sample());
    assert!(
        p.contains(
            "rdmadiag_fabric_bandwidth_bytes_per_second{src=\"a\",dst=\"b\",round=\"1\"} 125000000\n"
        ),
        "{p}"
    );
    assert!(
        p.contains("rdmadiag_fabric_suspect_host{host=\"c,\\\"x\\\"\"} 1"),
        "{p}"
    );
    assert!(p.contains("rdmadiag_fabric_missing_ranks 0"), "{p}");
    for line in p.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
    // A figure that is not finite is written as the format spells it, and promtool passes it.
    let mut odd = sample();
    odd.pairs[0].bw_gbps = Some(f64::NAN);
    odd.pairs[0].lat_us = Some(f64::INFINITY);
    let p = crate::report::export::prometheus::fabric(&odd);
    assert!(p.contains("} NaN\n") && p.contains("} +Inf\n"), "{p}");
    // The configuration audit's families, a host name and a value that need escaping.
    use config::{ConfigFinding, Field, FindingKind, MajorityValue, Severity, ValueGroup};
    let finding = |field, severity, value: &str, host: &str| ConfigFinding {
        field,
        kind: FindingKind::Differs,
        severity,
        majority: Some(MajorityValue {
            value: "1024".into(),
            hosts: 2,
        }),
        groups: vec![ValueGroup {
            value: value.into(),
            hosts: vec![host.into()],
        }],
        reporting: 3,
        unreported: 0,
    };
    odd.config = vec![
        finding(Field::Mtu, Severity::Failure, "4096", "c,\"x\""),
        finding(Field::Firmware, Severity::Information, "fw \"2\"", "a"),
    ];
    let p = crate::report::export::prometheus::fabric(&odd);
    assert!(
        p.contains(
            "rdmadiag_fabric_config_host_differs{host=\"c,\\\"x\\\"\",field=\"mtu\",\
             kind=\"differs\",severity=\"failure\",value=\"4096\"} 1\n"
        ),
        "{p}"
    );
    assert!(
        p.contains(
            "rdmadiag_fabric_config_findings{field=\"firmware\",kind=\"differs\",\
             severity=\"information\"} 1\n"
        ),
        "{p}"
    );
    let complaints = crate::report::export::prometheus::tests::promtool_complaints(&p);
    assert!(complaints.trim().is_empty(), "{complaints}\n{p}");
}

#[test]
fn many_hosts_get_a_table_of_the_hosts_the_audit_names() {
    use config::{ConfigFinding, Field, FindingKind, MajorityValue, Severity, ValueGroup};
    let mut r = sample();
    let base = r.hosts[0].clone();
    r.hosts = (1..=40)
        .map(|i| HostInfo {
            rank: i - 1,
            host: format!("n{i:02}"),
            hostname: format!("n{i:02}"),
            ..base.clone()
        })
        .collect();
    r.suspects = Suspects::default();
    let odd: Vec<String> = (1..=25).map(|i| format!("n{i:02}")).collect();
    r.config = vec![ConfigFinding {
        field: Field::Firmware,
        kind: FindingKind::NoMajority,
        severity: Severity::Failure,
        majority: None,
        groups: vec![
            ValueGroup {
                value: "20.31".into(),
                hosts: odd,
            },
            ValueGroup {
                value: "20.39".into(),
                hosts: (26..=40).map(|i| format!("n{i:02}")).collect(),
            },
        ],
        reporting: 40,
        unreported: 0,
    }];
    let t = fabric_text(&r, Style::plain());
    assert!(
        t.contains("[firmware] no majority for firmware: 20.31 on n01, n02, "),
        "{t}"
    );
    let table: Vec<&str> = t
        .lines()
        .filter(|l| l.contains(" firmware  20.31 "))
        .collect();
    assert_eq!(table.len(), TEXT_MAX_ROWS, "{t}");
    assert!(t.contains("  ... and 20 more (all in --json)"), "{t}");
    assert!(
        t.contains("verdict: config: no majority for firmware"),
        "{t}"
    );
    // And one at another value among a majority: the majority in its own column.
    r.config[0].kind = FindingKind::Differs;
    r.config[0].majority = Some(MajorityValue {
        value: "20.39".into(),
        hosts: 15,
    });
    r.config[0].groups.truncate(1);
    r.config[0].groups[0].hosts.truncate(1);
    let t = fabric_text(&r, Style::plain());
    assert!(t.contains("20.39 (15 of 40)"), "{t}");
}

#[test]
fn text_says_how_many_retests_stalled() {
    let mut r = sample();
    r.suspect_notes.push(SuspectNote {
        kind: SuspectKind::Link,
        name: "a - b".into(),
        rule: Rule::BwLink,
        rules: vec![Rule::BwLink],
        direction: Some(Direction::Send),
        reason: "bw-link: a to b 0.7 x".into(),
        retest: Some("a - b 0.035 / 0.052 Gb/s, 1657.9 us (stalled: 2.76 x the reference latency, its bandwidth not counted): bw-link not decided".into()),
        retests: 2,
        confirmed: false,
        undecided: false,
        config: None,
    });
    r.retests = RetestSummary {
        budget_rounds: 4,
        rounds: 2,
        pairs: 2,
        undecided: 0,
        stalled: 0,
        ..RetestSummary::default()
    };
    let t = fabric_text(&r, Style::plain());
    assert!(
        t.contains("(retested until decided: 2 retest(s) in 2 of at most 4 rounds)\n"),
        "{t}"
    );
    r.retests.stalled = 1;
    let t = fabric_text(&r, Style::plain());
    assert!(
        t.contains(
            "(retested until decided: 2 retest(s) in 2 of at most 4 rounds; 1 stalled, their \
             bandwidth not counted)\n"
        ),
        "{t}"
    );
    (r.retests.controls, r.retests.rounds_without_controls) = (3, 1);
    let t = fabric_text(&r, Style::plain());
    assert!(
        t.contains(
            "(retested until decided: 2 retest(s) in 2 of at most 4 rounds; beside 3 control \
             pair test(s), 1 retest round(s) without one; 1 stalled, their bandwidth not \
             counted)\n"
        ),
        "{t}"
    );
}
