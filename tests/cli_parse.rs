//! The command line as an operator from perftest and ibv_devinfo types it: parsed with the real
//! clap definition (no binary run), checking what each habit turns into.

use clap::Parser;
use rdmadiag::cli::{Cli, Command, ExpectSize};
use std::time::Duration;

fn parse(args: &[&str]) -> Command {
    let mut all = vec!["rdmadiag"];
    all.extend_from_slice(args);
    Cli::try_parse_from(&all)
        .unwrap_or_else(|e| panic!("{args:?} does not parse: {e}"))
        .command
}

fn usage_error(args: &[&str]) -> String {
    let mut all = vec!["rdmadiag"];
    all.extend_from_slice(args);
    let e = Cli::try_parse_from(&all).expect_err(&format!("{args:?} parsed"));
    assert_eq!(e.exit_code(), 2, "{args:?}");
    e.to_string()
}

#[test]
fn a_bare_duration_is_seconds_as_perftest() {
    for (d, want) in [("10", 10), ("2", 2), ("10s", 10), ("1m", 60)] {
        let Command::Bw(b) = parse(&["bw", "10.0.0.1", "-D", d]) else {
            panic!()
        };
        assert_eq!(b.common.duration, Some(Duration::from_secs(want)), "-D {d}");
    }
    let Command::Lat(l) = parse(&["lat", "10.0.0.1", "-D", "3", "--timeout", "5"]) else {
        panic!()
    };
    assert_eq!(l.common.duration, Some(Duration::from_secs(3)));
    assert_eq!(l.common.connect.timeout, Duration::from_secs(5));
    assert!(usage_error(&["bw", "-D", "0"]).contains("longer than zero"));
    assert!(usage_error(&["bw", "-D", "soon"]).contains("not a duration"));
}

#[test]
fn perftest_letters_mean_what_they_mean_there() {
    let Command::Bw(b) = parse(&[
        "bw",
        "10.0.0.1",
        "-R",
        "-F",
        "-m",
        "2048",
        "--report_gbits",
        "-w",
        "90",
        "-y",
        "2.5",
    ]) else {
        panic!()
    };
    assert!(b.common.connect.cm, "-R is --cm");
    assert_eq!(b.common.connect.mtu, Some(2048), "-m is --mtu");
    assert!(b.common.perftest_cpu_freq && b.common.perftest_report_gbits);
    assert_eq!(b.bw_threshold(), Some(90e9), "-w 90 is 90 Gb/s");
    assert_eq!(b.msgrate_threshold(), Some(2.5e6), "-y 2.5 is 2.5 Mpps");
    let Command::Bw(b) = parse(&["bw", "10.0.0.1", "--expect-bw", "10GB/s"]) else {
        panic!()
    };
    assert_eq!(b.bw_threshold(), Some(80e9));
    assert_eq!(b.expect_size, ExpectSize::All);
    let Command::Bw(b) = parse(&[
        "bw",
        "10.0.0.1",
        "--expect-msgrate",
        "500kpps",
        "--expect-size",
        "64",
    ]) else {
        panic!()
    };
    assert_eq!(b.msgrate_threshold(), Some(500e3));
    assert_eq!(b.expect_size, ExpectSize::Size(64));
    for sub in ["pingpong", "lat", "write", "read"] {
        match parse(&[sub, "10.0.0.1", "-R", "-m", "1024"]) {
            Command::Pingpong(a) => assert!(a.connect.cm && a.connect.mtu == Some(1024)),
            Command::Lat(a) => assert!(a.common.connect.cm && a.common.connect.mtu == Some(1024)),
            Command::Write(a) | Command::Read(a) => {
                assert!(a.connect.cm && a.connect.mtu == Some(1024))
            }
            other => panic!("{other:?}"),
        }
    }
    // -w and --expect-bw are one threshold: both is a mistake.
    usage_error(&["bw", "10.0.0.1", "-w", "90", "--expect-bw", "90Gb/s"]);
    // The threshold letters are bw's: lat has no bandwidth to bound.
    usage_error(&["lat", "10.0.0.1", "-w", "90"]);
}

#[test]
fn parses_ports_flags() {
    // -i as ibv_devinfo; -p, what ports took before, still works (hidden).
    for flag in ["-i", "-p", "--ib-port", "--port"] {
        let Command::Ports(p) = parse(&["ports", "-d", "rxe0", flag, "1", "-v", "--json"]) else {
            panic!("expected ports")
        };
        assert_eq!(p.filter.device.as_deref(), Some("rxe0"));
        assert_eq!(p.port, Some(1), "{flag}");
        assert!(p.verbose && p.output.json && !p.counters);
    }
}

#[test]
fn rejects_bad_ports_as_usage_errors() {
    for flag in ["-i", "-p"] {
        for bad in ["0", "-1", "256", "x", ""] {
            usage_error(&["ports", flag, bad]);
        }
    }
}

#[test]
fn ports_interval_needs_counters_and_wants_the_signals_handled() {
    let c = parse(&["ports", "--counters", "--interval", "2s"]);
    assert!(
        c.talks_to_a_peer(),
        "an interval wants SIGINT/SIGTERM handled"
    );
    let Command::Ports(p) = c else {
        panic!("expected ports")
    };
    assert_eq!(p.interval, Some(Duration::from_secs(2)));
    usage_error(&["ports", "--interval", "2s"]);
    assert!(!parse(&["ports", "--counters"]).talks_to_a_peer());
}

#[test]
fn every_test_takes_counters() {
    for sub in ["pingpong", "bw", "lat", "write", "read"] {
        let on = match parse(&[sub, "--loopback", "--counters"]) {
            Command::Pingpong(a) => a.counters,
            Command::Bw(a) => a.common.counters,
            Command::Lat(a) => a.common.counters,
            Command::Write(a) | Command::Read(a) => a.counters,
            _ => unreachable!(),
        };
        assert!(on, "{sub} --counters");
    }
}

#[test]
fn compat_is_pingpongs_alone() {
    let Command::Pingpong(p) = parse(&["pingpong", "10.0.0.1", "--compat", "ibv"]) else {
        panic!()
    };
    assert!(p.compat.is_some());
    for sub in ["bw", "lat", "write", "read"] {
        let e = usage_error(&[sub, "10.0.0.1", "--compat", "ibv"]);
        assert!(e.contains("--compat"), "{sub}: {e}");
    }
    usage_error(&["pingpong", "10.0.0.1", "--compat", "ibv", "-R"]);
}

#[test]
fn thresholds_need_their_units() {
    for (args, names) in [
        (
            &["bw", "h", "--expect-bw", "90"][..],
            &["90Gb/s", "90GB/s", "90MiB/s"][..],
        ),
        (&["bw", "h", "--expect-msgrate", "10"], &["10Mpps"]),
        (&["lat", "h", "--expect-lat", "5"], &["5us"]),
    ] {
        let e = usage_error(args);
        for n in names {
            assert!(e.contains(n), "{args:?}: {e}");
        }
    }
}

#[test]
fn traffic_class_and_service_level_on_every_data_path_subcommand_and_the_active_tests() {
    let priority = |c: Command| match c {
        Command::Pingpong(a) => a.connect.priority,
        Command::Bw(a) => a.common.connect.priority,
        Command::Lat(a) => a.common.connect.priority,
        Command::Write(a) | Command::Read(a) => a.connect.priority,
        Command::Check(a) => a.priority,
        Command::Fabric(a) => a.priority,
        other => panic!("{other:?}"),
    };
    for sub in ["pingpong", "bw", "lat", "write", "read"] {
        let p = priority(parse(&[sub, "10.0.0.1", "--tclass", "0x68", "--sl", "3"]));
        assert_eq!((p.tclass, p.sl), (Some(104), Some(3)), "{sub}");
        let p = priority(parse(&[sub, "10.0.0.1"]));
        assert_eq!((p.tclass, p.sl), (None, None), "{sub}");
        assert!(usage_error(&[sub, "10.0.0.1", "--tclass", "256"]).contains("0-255"));
        assert!(usage_error(&[sub, "10.0.0.1", "--tclass=-1"]).contains("traffic class"));
        assert!(usage_error(&[sub, "10.0.0.1", "--sl", "16"]).contains("0..=15"));
    }
    let p = priority(parse(&[
        "check",
        "--loopback-bw",
        "1Gb/s",
        "--tclass",
        "255",
        "--sl",
        "15",
    ]));
    assert_eq!((p.tclass, p.sl), (Some(255), Some(15)));
    let p = priority(parse(&["fabric", "--tclass", "104", "--sl", "0"]));
    assert_eq!((p.tclass, p.sl), (Some(104), Some(0)));
    assert!(usage_error(&["check", "--loopback-bw", "1Gb/s", "--sl", "16"]).contains("0..=15"));
    assert!(usage_error(&["fabric", "--tclass", "300"]).contains("0-255"));
}
