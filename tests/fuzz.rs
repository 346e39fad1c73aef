//! Property tests ("fuzzing" on the stable toolchain) of every parser that reads untrusted or
//! hand-typed input: the control frames, the fabric wire and its handshake, the host list, the
//! units and thresholds, the launchers' environments, the sysfs and `scontrol` readers. None may
//! panic, and what parses must mean what it says. Each target also replays its committed corpus
//! (fuzz/corpus/<target>/); a crash found becomes a file there, and so a regression test.
//!
//! Bounded: a thousand cases per target (RDMADIAG_FUZZ_CASES=N for more, e.g. overnight);
//! the whole file takes a few seconds in a debug build.

use proptest::prelude::*;
use rdmadiag::connect::compat_ibv::{format_dest, parse_dest};
use rdmadiag::connect::control::{MAX_FRAME, check_length, decode, describe_foreign, encode};
use rdmadiag::fabric::auth::{self, Auth, Direction, Greeting, Proof};
use rdmadiag::fabric::hostlist;
use rdmadiag::fabric::launcher::{self, LaunchFlags, ThisHost};
use rdmadiag::fabric::protocol::{self, MAX_LINE, PairSide, ToCoordinator, ToRank};
use rdmadiag::{sysfs, units};
use std::path::Path;

fn cases() -> u32 {
    std::env::var("RDMADIAG_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The committed seeds of one target.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    out.sort();
    assert!(!out.is_empty(), "{} holds no seeds", dir.display());
    out
}

/// Bytes that look like the input more often than uniform noise would.
fn texty() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512),
        "[ -~]{0,200}".prop_map(String::into_bytes),
        r#"\{"[a-z_]{1,10}":("[a-z0-9]{0,10}"|[0-9]{1,5}|null|true)(,"[a-z_]{1,10}":[0-9]{1,3})?\}"#
            .prop_map(String::into_bytes),
    ]
}

fn control(data: &[u8]) {
    if data.len() >= 4 {
        let len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        if let Ok(n) = check_length(len) {
            assert!(n > 0 && n <= MAX_FRAME);
        }
    }
    if let Ok(msg) = decode(data)
        && let Ok(frame) = encode(&msg)
    {
        decode(&frame[4..]).expect("re-encoded message does not decode");
    }
    let _ = describe_foreign(data);
    let _ = describe_foreign(&data[..data.len().min(8)]);
    if let Ok(d) = parse_dest(data) {
        let back = parse_dest(&format_dest(&d)).expect("formatted address does not parse");
        assert_eq!(back, d);
    }
}

/// One line from a peer, as the coordinator and a rank read it.
fn fabric_line(data: &[u8]) {
    let mut r = std::io::Cursor::new(data);
    let mut buf = Vec::new();
    while let Ok(n) = protocol::read_line(&mut r, &mut buf) {
        if n == 0 {
            break;
        }
        assert!(buf.len() <= MAX_LINE);
        let _ = serde_json::from_slice::<ToCoordinator>(&buf);
        let _ = serde_json::from_slice::<ToRank>(&buf);
        let _ = serde_json::from_slice::<Greeting>(&buf);
        if let Ok(p) = serde_json::from_slice::<Proof>(&buf) {
            let key = Auth::key(b"fuzz-key-0123456789");
            let (_, nonce) = auth::challenge(&key).unwrap();
            // A proof from the wire never verifies without the key.
            assert!(auth::verify(&key, &nonce, &p).is_err(), "{p:?}");
        }
        for session in [None, Some([7u8; 32])] {
            let (_, mut open) = auth::channel(session, Direction::ToRank);
            let opened = open.open(&buf);
            if session.is_some() {
                assert!(opened.is_err(), "a line from nowhere opened");
            }
        }
    }
}

#[test]
fn control_corpus() {
    for seed in corpus("control") {
        control(&seed);
    }
}

#[test]
fn fabric_corpus() {
    for seed in corpus("fabric") {
        fabric_line(&seed);
    }
}

#[test]
fn hostlist_corpus() {
    for seed in corpus("hostlist") {
        let _ = hostlist::expand(&String::from_utf8_lossy(&seed));
    }
}

fn side() -> impl Strategy<Value = PairSide> {
    (
        proptest::option::of(any::<f64>()),
        proptest::option::of(0.0f64..1e6),
        proptest::option::of("[ -~]{0,40}"),
        proptest::collection::btree_map("[a-z_]{1,12}", any::<u64>(), 0..4),
    )
        .prop_map(|(bw, lat, error, counters)| PairSide {
            bw_gbps: bw.filter(|b| b.is_finite()),
            lat_us: lat,
            error,
            counters,
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn control_frames(data in texty()) {
        control(&data);
    }

    #[test]
    fn fabric_wire_lines(data in texty()) {
        fabric_line(&data);
    }

    /// Every sealed message opens once, in order, on the other end, and any change of one byte
    /// (or a replay) is refused.
    #[test]
    fn fabric_sealed_messages(
        session in any::<[u8; 32]>(),
        round in any::<u32>(),
        side in side(),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let (mut seal, _) = auth::channel(Some(session), Direction::ToCoordinator);
        let (_, mut open) = auth::channel(Some(session), Direction::ToRank);
        let msg = ToCoordinator::Done { round, side };
        let line = seal.seal(&msg).unwrap();
        let mut bad = line.clone();
        let i = flip.index(bad.len() - 1); // not the newline
        bad[i] ^= 1 << bit;
        prop_assert!(open.clone().open(&bad).is_err());
        // The JSON opened is the JSON sealed, and it reads as a message (floats are not
        // compared: serde_json without `float_roundtrip` may move one by an ulp).
        let json = open.open(&line).unwrap().to_vec();
        prop_assert_eq!(&json, &serde_json::to_vec(&msg).unwrap());
        let back: ToCoordinator = serde_json::from_slice(&json).unwrap();
        let same_round = matches!(back, ToCoordinator::Done { round: r, .. } if r == round);
        prop_assert!(same_round);
        prop_assert!(open.open(&line).is_err(), "replayed");
    }

    #[test]
    fn fabric_line_limit(len in 0usize..3 * MAX_LINE, newline in any::<bool>()) {
        let mut data = vec![b'a'; len];
        if newline {
            data.push(b'\n');
        }
        let mut buf = Vec::new();
        let got = protocol::read_line(&mut std::io::Cursor::new(&data), &mut buf);
        let line = len + usize::from(newline);
        if line <= MAX_LINE && (newline || len < MAX_LINE) {
            prop_assert_eq!(got.unwrap(), line);
        } else {
            prop_assert!(got.is_err());
        }
        prop_assert!(buf.len() <= MAX_LINE);
    }

    #[test]
    fn hostlists(list in r"[a-z0-9\[\],\- ]{0,40}") {
        if let Ok(names) = hostlist::expand(&list) {
            prop_assert!(!names.is_empty() && names.len() <= hostlist::MAX_HOSTS);
            prop_assert!(names.iter().all(|n| !n.contains([',', '[', ']'])));
        }
    }

    #[test]
    fn hostlist_ranges(prefix in "[a-z]{1,5}", lo in 0u32..500, n in 1u32..50, width in 1usize..5) {
        let hi = lo + n - 1;
        let list = format!("{prefix}[{lo:0width$}-{hi}]");
        let names = hostlist::expand(&list).unwrap();
        prop_assert_eq!(names.len() as u32, n);
        prop_assert_eq!(&names[0], &format!("{prefix}{lo:0width$}"));
    }

    #[test]
    fn units_and_thresholds(s in r"[ -~]{0,24}") {
        let _ = units::parse_size(&s);
        let _ = units::parse_msg_size(&s);
        let _ = units::parse_duration(&s);
        let _ = units::parse_duration_with_unit(&s);
        let _ = units::parse_mtu(&s);
        if let Ok(r) = units::parse_rate(&s) {
            prop_assert!(r.is_finite() && r >= 0.0, "{s}: {r}");
        }
        let _ = units::parse_rate_gbits(&s);
        let _ = units::parse_msg_rate(&s);
        let _ = units::parse_msg_rate_mpps(&s);
        if let Ok(p) = units::parse_percentile(&s) {
            prop_assert!((0.0..=100.0).contains(&p), "{s}: {p}");
        }
        let _ = rdmadiag::check::parse_target(&s);
    }

    #[test]
    fn unit_sizes(n in 0u64..100_000, unit in prop::sample::select(vec!["", "K", "M", "G", "k", "KiB", "MiB"])) {
        let s = format!("{n}{unit}");
        if let Ok(v) = units::parse_size(&s) {
            prop_assert!(v >= n, "{s} -> {v}");
        }
    }

    /// The launchers' variables as any environment may hold them: a usage error or a sane
    /// launch, never a panic; and the credential choice on top.
    #[test]
    fn launcher_environments(
        vars in proptest::collection::btree_map(
            prop::sample::select(vec![
                "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_STEP_NODELIST",
                "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID",
                "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_SIZE",
                "PMI_RANK", "PMI_SIZE", "RDMADIAG_COORDINATOR", "RDMADIAG_FABRIC_KEY",
            ]),
            prop_oneof![r"[0-9]{1,3}", r"[ -~]{0,20}", r"n[0-9]\[[0-9]-[0-9]\]"],
            0..8,
        ),
        hosts in proptest::option::of(r"[a-z0-9\[\],\-]{0,20}"),
        coordinator in proptest::option::of(r"[a-z0-9:.\[\]]{0,20}"),
        insecure in any::<bool>(),
    ) {
        let env = |k: &str| vars.get(k).cloned();
        let flags = LaunchFlags {
            hosts: hosts.as_deref(),
            coordinator: coordinator.as_deref(),
        };
        let me = ThisHost {
            hostname: "n1",
            is_local: &|h: &str| h == "n1",
        };
        if let Ok(l) = launcher::detect(&env, &flags, &me) {
            prop_assert!(l.size >= 2 && l.rank < l.size, "{l:?}");
            prop_assert!(l.coordinator.1 != 0);
            let a = auth::AuthFlags { key_file: None, insecure };
            let _ = auth::choose(&env, &a, &l);
        }
    }

    #[test]
    fn sysfs_and_scontrol_text(s in r"[ -~\n]{0,60}") {
        let _ = sysfs::leading_number(&s);
        let _ = sysfs::parse_number(&s);
        let _ = sysfs::parse_link_layer(&s);
        let _ = sysfs::parse_guid(&s);
        let _ = sysfs::parse_rate(&s);
        let _ = rdmadiag::check::slurm::parse_show_node(&s);
    }

    #[test]
    fn sysfs_guids(g in any::<u64>()) {
        let b = g.to_be_bytes();
        let text = format!(
            "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}\n",
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
        );
        prop_assert_eq!(sysfs::parse_guid(&text), Some(g));
    }
}
