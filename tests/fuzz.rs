//! Property tests ("fuzzing" on the stable toolchain) of every parser that reads untrusted or
//! hand-typed input: the control frames, perftest's out-of-band messages, the fabric wire and its handshake, the host list, the
//! units and thresholds, the launchers' environments, the sysfs and `scontrol` readers, what
//! `unmunge` prints for a rank's credential, key files. None may panic, and what parses must mean
//! what it says. Each target also replays its committed corpus (fuzz/corpus/<target>/); a crash
//! found becomes a file there, and so a regression test.
//!
//! Every property can fail: proofs and sealed lines are forged well formed (noise never reaches
//! a MAC check), with the genuine article as the control (a check that refuses everything fails
//! it too), and host lists are built from their structure and compared with a reference
//! expansion.
//!
//! Bounded: a thousand cases per target, a fifth as many key files (RDMADIAG_FUZZ_CASES=N for
//! more, e.g. overnight); the whole file takes a few seconds in a debug build.

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestRunner;
use rdmadiag::connect::compat_ibv::{format_dest, parse_dest};
use rdmadiag::connect::control::{MAX_FRAME, check_length, decode, describe_foreign, encode};
use rdmadiag::connect::perftest_wire::{
    self as perftest, BwReport, KEY_LEN, KEY_LEN_GID, NEGOTIATION_LEN, NEGOTIATION_LEN_NO_MLX5DV,
    Negotiation, PerftestKey, SysData, Version,
};
use rdmadiag::exit::UsageError;
use rdmadiag::fabric::auth::{
    self, Auth, Direction, Greeting, MungeJob, OpenError, Proof, StepLayout,
};
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
            ..PairSide::default()
        })
}

/// A key of the length keys have.
fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 16..48)
}

fn hex(bytes: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<u8>(), bytes).prop_map(|b| auth::to_hex(&b))
}

/// `hex` with the digit at `at` replaced by another (so still well formed, and different).
fn other_hex_digit(hex: &str, at: Index, digit: Index) -> String {
    let i = at.index(hex.len());
    let others: Vec<char> = "0123456789abcdef"
        .chars()
        .filter(|&c| c != hex.as_bytes()[i] as char)
        .collect();
    let mut out = hex.to_string();
    out.replace_range(i..=i, &others[digit.index(others.len())].to_string());
    out
}

/// Proofs as a client without the key can make them: of every scheme, mostly well formed (a
/// 32-digit nonce and a 64-digit MAC, a credential that starts as munge's do).
fn wire_proof() -> impl Strategy<Value = Proof> {
    prop_oneof![
        4 => (hex(16), hex(32)).prop_map(|(nonce, mac)| Proof::Key { nonce, mac }),
        1 => ("[0-9a-fA-F]{0,40}", "[0-9a-fA-F]{0,80}")
            .prop_map(|(nonce, mac)| Proof::Key { nonce, mac }),
        2 => "MUNGE:[A-Za-z0-9+/]{20,120}={0,2}:"
            .prop_map(|credential| Proof::Munge { credential }),
        1 => Just(Proof::Insecure),
    ]
}

/// Lines as a peer may send them: bytes, proofs, and sealed lines of other channels.
fn wire() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => texty(),
        1 => wire_proof().prop_map(|p| {
            let mut line = serde_json::to_vec(&p).unwrap();
            line.push(b'\n');
            line
        }),
        1 => (any::<[u8; 32]>(), 0u32..3, any::<u32>()).prop_map(|(session, before, round)| {
            let (mut seal, _) = auth::channel(Some(session), Direction::ToCoordinator);
            for i in 0..before {
                seal.seal(&i).unwrap();
            }
            seal.seal(&serde_json::json!({"msg": "done", "round": round})).unwrap()
        }),
    ]
}

/// One part of a bracket group: a number or a range, the low bound zero-padded to `width`.
#[derive(Debug, Clone)]
struct Part {
    low: u64,
    width: usize,
    high: Option<(u64, usize)>,
}

/// A host list item by its structure: literal text and a bracket group, up to twice, then a tail.
#[derive(Debug, Clone)]
struct HostItem {
    groups: Vec<(String, Vec<Part>)>,
    tail: String,
}

impl HostItem {
    fn text(&self) -> String {
        let mut s = String::new();
        for (literal, parts) in &self.groups {
            let parts: Vec<String> = parts
                .iter()
                .map(|p| {
                    let low = format!("{:0w$}", p.low, w = p.width);
                    match p.high {
                        Some((high, w)) => format!("{low}-{high:0w$}"),
                        None => low,
                    }
                })
                .collect();
            s += &format!("{literal}[{}]", parts.join(","));
        }
        s + &self.tail
    }
}

fn host_item() -> impl Strategy<Value = HostItem> {
    let digits = |n: u64| n.to_string().len();
    let part = (
        0u64..1200,
        prop_oneof![3 => Just(0usize), 1 => 1usize..3],
        proptest::option::of((0u64..6, 0usize..3)),
    )
        .prop_map(move |(low, pad, high)| Part {
            low,
            width: digits(low) + pad,
            high: high.map(|(span, pad)| (low + span, digits(low + span) + pad)),
        });
    let group = ("[a-z.-]{0,2}", proptest::collection::vec(part, 1..4));
    (
        "[a-z][a-z0-9.-]{0,4}",
        proptest::collection::vec(group, 0..3),
        "[a-z0-9.-]{0,3}",
    )
        .prop_map(|(prefix, mut groups, suffix)| {
            if let Some((literal, _)) = groups.first_mut() {
                *literal = prefix;
                HostItem {
                    groups,
                    tail: suffix,
                }
            } else {
                HostItem {
                    groups,
                    tail: prefix + &suffix,
                }
            }
        })
}

/// The names of a list, by the rules of `src/fabric/hostlist.rs`: each number zero-padded to the
/// digits of its range's low bound, the groups of an item as a product, the last fastest.
fn reference_expand(items: &[HostItem]) -> Vec<String> {
    let mut out = Vec::new();
    for item in items {
        let mut names = vec![String::new()];
        for (literal, parts) in &item.groups {
            let mut next = Vec::new();
            for name in &names {
                for p in parts {
                    let high = p.high.map_or(p.low, |(h, _)| h);
                    for n in p.low..=high {
                        next.push(format!("{name}{literal}{n:0w$}", w = p.width));
                    }
                }
            }
            names = next;
        }
        out.extend(names.into_iter().map(|n| n + &item.tail));
    }
    out
}

/// The job, uid and challenge the corpus's seeds (fuzz/corpus/unmunge/) were made for.
const SEED_NONCE: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

fn seed_job(layout: Option<StepLayout>) -> MungeJob {
    MungeJob {
        job: "4242".into(),
        step: "0".into(),
        uid: 0,
        // Never reached: no test here runs unmunge.
        socket: Some("/nonexistent/munge.socket".into()),
        layout,
    }
}

/// A step of `nodes` nodes 10.78.0.1... (addresses, so that checking a host resolves no name)
/// running `tasks` ranks each, in blocks.
fn ip_layout(nodes: u32, tasks: u32) -> StepLayout {
    let env = |k: &str| match k {
        "SLURM_STEP_NODELIST" => Some(format!("10.78.0.[1-{nodes}]")),
        "SLURM_STEP_TASKS_PER_NODE" => Some(format!("{tasks}(x{nodes})")),
        _ => None,
    };
    StepLayout::from_env(&env).unwrap()
}

/// What unmunge prints for a credential of this protocol.
#[derive(Debug, Clone)]
struct Credential {
    status: String,
    host: String,
    user: Option<String>,
    uid: u32,
    job: String,
    step: String,
    rank: u32,
    nonce: [u8; 16],
    session: [u8; 32],
    /// Whether rank 0 knows the step's layout ([`ip_layout`] of `nodes` and `tasks`).
    layout: bool,
    nodes: u32,
    tasks: u32,
}

impl Credential {
    fn text(&self) -> String {
        let uid = match &self.user {
            Some(u) => format!("{u} ({})", self.uid),
            None => self.uid.to_string(),
        };
        format!(
            "STATUS:          {}\nENCODE_HOST:     {}\nUID:             {uid}\n\n\
             rdmadiag-fabric-v1\njob={}\nstep={}\nrank={}\nnonce={}\nsession={}\n",
            self.status,
            self.host,
            self.job,
            self.step,
            self.rank,
            auth::to_hex(&self.nonce),
            auth::to_hex(&self.session)
        )
    }

    /// The text of this credential changed by `f`.
    fn with(&self, f: impl FnOnce(&mut Credential)) -> String {
        let mut c = self.clone();
        f(&mut c);
        c.text()
    }
}

fn credential() -> impl Strategy<Value = Credential> {
    (
        (
            "[0-9]{1,8}",
            "[0-9]{1,3}",
            any::<u32>(),
            proptest::option::of("[a-z]{1,8}"),
        ),
        (any::<[u8; 16]>(), any::<[u8; 32]>(), any::<bool>()),
        (1u32..6, 1u32..5, any::<Index>(), "[a-z]{1,6}[0-9]{0,2}"),
    )
        .prop_map(
            |((job, step, uid, user), (nonce, session, layout), (nodes, tasks, rank, name))| {
                let rank = rank.index((nodes * tasks) as usize) as u32;
                // Under a layout, made on the node the block placement gives the rank.
                let node = rank / tasks + 1;
                let host = if layout {
                    format!("fab{node} (10.78.0.{node})")
                } else {
                    format!("{name} (10.78.0.{node})")
                };
                Credential {
                    status: "Success (0)".into(),
                    host,
                    user,
                    uid,
                    job,
                    step,
                    rank,
                    nonce,
                    session,
                    layout,
                    nodes,
                    tasks,
                }
            },
        )
}

/// Text as unmunge's output might be: noise, and the lines of a real one reordered, dropped,
/// doubled or changed.
fn unmunge_noise() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        r"(STATUS|UID|ENCODE_HOST|GID): {0,10}[ -~]{0,20}",
        r"(job|step|rank|nonce|session)=[0-9a-f]{0,70}",
        Just("rdmadiag-fabric-v1".to_string()),
        Just(String::new()),
        r"[ -~]{0,30}",
    ];
    let seed = credential().prop_map(|c| {
        Credential {
            job: "4242".into(),
            step: "0".into(),
            uid: 0,
            nonce: SEED_NONCE,
            ..c
        }
        .text()
    });
    prop_oneof![
        texty().prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        proptest::collection::vec(line.clone(), 0..12).prop_map(|l| l.join("\n")),
        (seed, any::<Index>(), 0u8..3, line).prop_map(|(text, at, how, line)| {
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let i = at.index(lines.len());
            match how {
                0 => lines[i] = line,
                1 => lines.insert(i, line),
                _ => {
                    lines.remove(i);
                }
            }
            lines.join("\n")
        }),
    ]
}

/// What a key file may hold: nothing, blanks, bytes, keys with and without line ends, and
/// sizes about the limit.
fn key_file_content() -> impl Strategy<Value = Vec<u8>> {
    let end = || prop::sample::select(vec!["", "\n", "\r\n", "\n\n", "\r", " \n"]);
    prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..80),
        r"[ \t\r\n]{0,40}".prop_map(String::into_bytes),
        ("[0-9a-f]{0,80}", end()).prop_map(|(k, e)| (k + e).into_bytes()),
        ("[ -~]{10,30}", end()).prop_map(|(k, e)| (k + e).into_bytes()),
        (
            auth::MAX_KEY_FILE as usize - 4..auth::MAX_KEY_FILE as usize + 3,
            any::<u8>(),
            end()
        )
            .prop_map(|(n, seed, e)| {
                let mut k: Vec<u8> = (0..n)
                    .map(|i| b"0123456789abcdef"[(i * 7 + usize::from(seed)) % 16])
                    .collect();
                k.extend_from_slice(e.as_bytes());
                k
            }),
    ]
}

/// A private key file of any content: the key it holds (line ends dropped) when that is a key
/// [`auth::check_key`] takes and the file is within [`auth::MAX_KEY_FILE`], else a usage error.
#[test]
fn key_files() {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let dir = std::env::temp_dir().join(format!("rdmadiag-fuzz-key.{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = dir.join("key");
    let mut runner = TestRunner::new(ProptestConfig {
        cases: (cases() / 5).max(1),
        ..config()
    });
    let result = runner.run(&key_file_content(), |content| {
        let _ = std::fs::remove_file(&path);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, &content).unwrap();
        drop(f);
        let mut key = content.clone();
        while key.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            key.pop();
        }
        let fits = content.len() as u64 <= auth::MAX_KEY_FILE;
        let good = fits && auth::check_key(&key, "k", "").is_ok();
        match auth::read_key_file(&path) {
            Ok(k) => {
                prop_assert!(good, "took {} bytes", content.len());
                prop_assert_eq!(k, key);
            }
            Err(e) => {
                prop_assert!(!good, "refused a key of {} bytes: {}", content.len(), e);
                prop_assert!(e.is::<UsageError>(), "{e:#}");
            }
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    result.unwrap();
}

/// The seeds, as unmunge printed them: none panics, none is taken when unmunge failed, and the
/// real output for the seeds' job is.
#[test]
fn unmunge_corpus() {
    let mut taken = 0;
    for seed in corpus("unmunge") {
        let text = String::from_utf8_lossy(&seed);
        for layout in [None, Some(ip_layout(2, 2))] {
            if let Ok(v) = auth::check_unmunged(&seed_job(layout), &SEED_NONCE, true, &text) {
                assert!(v.rank.is_some() && v.session.is_some(), "{text}");
                taken += 1;
            }
        }
        assert!(auth::check_unmunged(&seed_job(None), &SEED_NONCE, false, &text).is_err());
    }
    assert!(
        taken >= 2,
        "no seed of fuzz/corpus/unmunge/ is a good credential"
    );
}

/// What a perftest peer might send: its messages' own lengths more often than not, bytes drawn
/// from the key messages' alphabet (hex digits, ':', NUL) or from anywhere.
fn perftest_message() -> impl Strategy<Value = Vec<u8>> {
    let lens = prop_oneof![
        Just(perftest::VERSION_LEN),
        Just(8usize),
        Just(2usize),
        Just(4usize),
        Just(KEY_LEN),
        Just(KEY_LEN_GID),
        Just(36usize),
        Just(40usize),
        Just(NEGOTIATION_LEN_NO_MLX5DV),
        Just(NEGOTIATION_LEN),
        0usize..400,
    ];
    let byte = prop_oneof![
        3 => prop::sample::select(b"0123456789abcdefABCDEF:.\0".to_vec()),
        1 => any::<u8>(),
    ];
    lens.prop_flat_map(move |n| prop::collection::vec(byte.clone(), n))
}

/// Every perftest decoder on `data`: no panic, and whatever decodes encodes to what decodes to
/// the same value again (a parsed message means what it says).
fn perftest_messages(data: &[u8]) {
    if let Ok(v) = Version::decode(data) {
        assert_eq!(Version::decode(&v.encode()).unwrap(), v, "{data:?}");
    }
    if let Ok(s) = SysData::decode(data) {
        assert_eq!(SysData::decode(&s.encode()).unwrap(), s, "{data:?}");
    }
    if let Ok(m) = perftest::decode_mtu(data) {
        let again = perftest::encode_mtu(m, data.len()).unwrap();
        assert_eq!(perftest::decode_mtu(&again).unwrap(), m, "{data:?}");
    }
    if let Ok(k) = PerftestKey::decode(data) {
        let again = k.encode();
        assert_eq!(again.len(), data.len(), "{data:?}");
        assert_eq!(PerftestKey::decode(&again).unwrap(), k, "{data:?}");
    }
    for common in [Version::new(5, 70), Version::new(6, 6), Version::new(5, 0)] {
        if let Ok(r) = BwReport::decode(data, common) {
            let again = r.encode(common).unwrap();
            let r2 = BwReport::decode(&again, common).unwrap();
            // NaN is not equal to itself: compare the bits.
            assert_eq!(format!("{r2:?}"), format!("{r:?}"), "{data:?}");
        }
    }
    if let Ok(n) = Negotiation::decode(data) {
        let again: Negotiation = Negotiation::decode(&n.encode()).unwrap();
        assert_eq!(again, n, "{data:?}");
        assert!(perftest::mismatches(&n, &again).is_empty());
    }
}

#[test]
fn perftest_messages_have_a_control() {
    // The property can fail: real messages decode (a decoder refusing all would pass it).
    let key = PerftestKey {
        lid: 1,
        out_reads: 16,
        qpn: 0x123456,
        psn: 0xabcdef,
        rkey: 0x1000,
        vaddr: 0x7f00_0000_0000,
        gid: None,
        srqn: 0,
    };
    assert!(PerftestKey::decode(&key.encode()).is_ok());
    assert!(Version::decode(&Version::new(6, 6).encode()).is_ok());
    perftest_messages(&key.encode());
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn perftest_wire_messages(data in perftest_message()) {
        perftest_messages(&data);
    }

    #[test]
    fn control_frames(data in texty()) {
        control(&data);
    }

    #[test]
    fn fabric_wire_lines(data in wire()) {
        fabric_line(&data);
    }

    /// A proof made without the key, however well formed, never verifies against a fresh
    /// challenge; under `--insecure` only the insecure proof is taken, and under munge a proof of
    /// another scheme never is.
    #[test]
    fn proofs_from_the_wire_never_verify(proof in wire_proof(), key in key()) {
        let key = Auth::key(&key);
        let (_, nonce) = auth::challenge(&key).unwrap();
        prop_assert!(auth::verify(&key, &nonce, &proof).is_err(), "{proof:?}");
        let insecure = auth::verify(&Auth::Insecure, &nonce, &proof);
        prop_assert_eq!(insecure.is_ok(), proof == Proof::Insecure, "{:?}", proof);
        // (A munge credential would be checked by unmunge: see the unmunge_* properties.)
        if !matches!(proof, Proof::Munge { .. }) {
            let munge = Auth::Munge(seed_job(None));
            prop_assert!(auth::verify(&munge, &nonce, &proof).is_err(), "{proof:?}");
        }
    }

    /// The control for the one above (a verifier that refuses everything passes it): a genuine
    /// proof verifies, with the rank's session key; one hex digit of its nonce or MAC changed,
    /// the same proof against a fresh challenge (a replay), or another key, and it does not.
    #[test]
    fn genuine_proofs_verify_and_altered_ones_do_not(
        key in key(),
        in_mac in any::<bool>(),
        at in any::<Index>(),
        digit in any::<Index>(),
    ) {
        let auth = Auth::key(&key);
        let (greeting, nonce) = auth::challenge(&auth).unwrap();
        let (proof, session) = auth::prove(&auth, 1, &greeting).unwrap();
        let v = auth::verify(&auth, &nonce, &proof);
        prop_assert!(v.is_ok(), "{:?}", v);
        prop_assert!(session.is_some());
        prop_assert_eq!(v.unwrap().session, session);
        let Proof::Key { nonce: rn, mac } = proof.clone() else {
            panic!("a key proves with a key proof: {proof:?}")
        };
        let altered = if in_mac {
            Proof::Key { nonce: rn, mac: other_hex_digit(&mac, at, digit) }
        } else {
            Proof::Key { nonce: other_hex_digit(&rn, at, digit), mac }
        };
        prop_assert!(auth::verify(&auth, &nonce, &altered).is_err(), "{altered:?}");
        let (_, fresh) = auth::challenge(&auth).unwrap();
        prop_assert!(auth::verify(&auth, &fresh, &proof).is_err(), "replayed");
        let mut other = key.clone();
        let i = at.index(other.len());
        other[i] ^= 1;
        prop_assert!(auth::verify(&Auth::key(&other), &nonce, &proof).is_err(), "another key");
    }

    /// Well-formed sealed lines (`MAC JSON`) that this channel did not send at this point never
    /// open, and are refused by the MAC (not as unsealed): sealed under another session key, one
    /// MAC digit or JSON bit changed, sent the other way, or out of order. The genuine line then
    /// opens, to the JSON sealed.
    #[test]
    fn sealed_lines_from_elsewhere_never_open(
        session in any::<[u8; 32]>(),
        other in any::<[u8; 32]>(),
        before in 0usize..3,
        round in any::<u32>(),
        side in side(),
        how in 0u8..5,
        at in any::<Index>(),
        digit in any::<Index>(),
        bit in 0u8..8,
    ) {
        prop_assume!(session != other);
        let msg = ToCoordinator::Done { round, side };
        let (mut seal, _) = auth::channel(Some(session), Direction::ToCoordinator);
        let (_, mut open) = auth::channel(Some(session), Direction::ToRank);
        let (mut elsewhere, _) = auth::channel(Some(other), Direction::ToCoordinator);
        let (mut reflected, _) = auth::channel(Some(session), Direction::ToRank);
        for i in 0..before {
            let line = seal.seal(&i).unwrap();
            let json = i.to_string();
            prop_assert_eq!(open.open(&line), Ok(json.as_bytes()));
            elsewhere.seal(&i).unwrap();
            reflected.seal(&i).unwrap();
        }
        let genuine = seal.seal(&msg).unwrap();
        let forged = match how {
            0 => elsewhere.seal(&msg).unwrap(),
            1 => {
                let text = String::from_utf8(genuine.clone()).unwrap();
                let (mac, json) = text.split_once(' ').unwrap();
                format!("{} {json}", other_hex_digit(mac, at, digit)).into_bytes()
            }
            2 => {
                let mut line = genuine.clone();
                let i = 65 + at.index(line.len() - 66); // within the JSON, not the newline
                line[i] ^= 1 << bit;
                line
            }
            3 => reflected.seal(&msg).unwrap(),
            // The next line, before this one.
            _ => seal.clone().seal(&msg).unwrap(),
        };
        prop_assert_eq!(open.clone().open(&forged), Err(OpenError::BadMac), "way {}", how);
        fabric_line(&forged);
        let json = serde_json::to_vec(&msg).unwrap();
        prop_assert_eq!(open.open(&genuine), Ok(&json[..]));
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

    /// Any text: no panic, and the names of a list that expands are a list of themselves.
    #[test]
    fn hostlists(list in r"[a-z0-9\[\],\- ]{0,40}") {
        if let Ok(names) = hostlist::expand(&list) {
            prop_assert!(!names.is_empty() && names.len() <= hostlist::MAX_HOSTS);
            prop_assert!(names.iter().all(|n| !n.contains([',', '[', ']'])));
            prop_assert_eq!(hostlist::expand(&names.join(",")).unwrap(), names);
        }
    }

    /// Lists built from their structure expand to exactly the names [`reference_expand`] makes.
    #[test]
    fn hostlists_as_the_rules_say(
        items in proptest::collection::vec(host_item(), 1..4),
        sep in prop::sample::select(vec![",", ", "]),
    ) {
        let list = items.iter().map(HostItem::text).collect::<Vec<_>>().join(sep);
        let got = hostlist::expand(&list);
        prop_assert!(got.is_ok(), "{}: {:?}", list, got);
        prop_assert_eq!(got.unwrap(), reference_expand(&items), "{}", list);
    }

    /// Any text as unmunge's output: no panic; a refusal whenever unmunge failed; and what is
    /// taken names a rank and a session.
    #[test]
    fn unmunge_output_of_any_form(
        text in unmunge_noise(),
        success in any::<bool>(),
        layout in any::<bool>(),
    ) {
        let job = seed_job(layout.then(|| ip_layout(4, 2)));
        match auth::check_unmunged(&job, &SEED_NONCE, success, &text) {
            Ok(v) => {
                prop_assert!(success, "taken although unmunge failed");
                prop_assert!(v.rank.is_some() && v.session.is_some(), "{v:?}");
            }
            // A refusal is one line (rank 0 reports it, with the address it came from).
            Err(e) => {
                let e = e.to_string();
                prop_assert!(!e.is_empty() && !e.contains('\n'), "{}", e);
            }
        }
    }

    /// A credential's decoded text for this job and challenge verifies, to its rank and session
    /// key; with the job, the step, the nonce, the uid, the domain, the rank, the host (under a
    /// layout) or unmunge's status wrong, or the session key not a key, it is refused; another
    /// session key is that key.
    #[test]
    fn unmunge_output_checked(
        c in credential(),
        at in any::<Index>(),
        digit in any::<Index>(),
        junk in "[g-zA-F ]",
    ) {
        let job = MungeJob {
            job: c.job.clone(),
            step: c.step.clone(),
            uid: c.uid,
            ..seed_job(c.layout.then(|| ip_layout(c.nodes, c.tasks)))
        };
        let check = |nonce: &[u8; 16], success: bool, text: &str| {
            auth::check_unmunged(&job, nonce, success, text)
        };
        let good = check(&c.nonce, true, &c.text());
        prop_assert!(good.is_ok(), "{}: {:?}", c.text(), good);
        let v = good.unwrap();
        prop_assert_eq!(v.rank, Some(c.rank));
        prop_assert_eq!(v.session, Some(c.session));

        let session = auth::to_hex(&c.session);
        let i = at.index(session.len());
        let mut not_hex = session.clone();
        not_hex.replace_range(i..=i, &junk);
        let mut wrong_nonce = c.nonce;
        wrong_nonce[at.index(16)] ^= 1 << (digit.index(8));
        let bad: Vec<(&str, String)> = vec![
            ("job", c.with(|c| c.job.push('0'))),
            ("step", c.with(|c| c.step.push('1'))),
            ("nonce", c.with(|c| c.nonce = wrong_nonce)),
            ("uid", c.with(|c| c.uid = c.uid.wrapping_add(1 + digit.index(1000) as u32))),
            ("domain", c.text().replacen("rdmadiag-fabric-v1", "rdmadiag-fabric-v2", 1)),
            ("rank", c.text().replacen(&format!("rank={}", c.rank), "rank=r", 1)),
            ("session not hex", c.text().replacen(&session, &not_hex, 1)),
            ("session cut", c.text().replacen(&session, &session[..session.len() - 2], 1)),
            ("session longer", c.text().replacen(&session, &format!("{session}00"), 1)),
            ("no UID", c.text().replacen("UID:", "GID:", 1)),
            ("no payload", c.text().replacen("\n\n", "\n", 1)),
        ];
        for (what, text) in &bad {
            prop_assert!(check(&c.nonce, true, text).is_err(), "{} changed: {}", what, text);
        }
        prop_assert!(check(&wrong_nonce, true, &c.text()).is_err(), "another challenge");
        let replayed = c.text().replacen("Success (0)", "Replayed credential (17)", 1);
        prop_assert!(check(&c.nonce, false, &replayed).is_err(), "unmunge failed");
        prop_assert!(check(&c.nonce, false, &c.text()).is_err(), "unmunge failed, said success");
        if c.layout {
            let node = c.rank / c.tasks + 1;
            if c.nodes > 1 {
                let elsewhere = 1 + (node + digit.index(c.nodes as usize - 1) as u32) % c.nodes;
                let o = c.with(|c| c.host = format!("fab{elsewhere} (10.78.0.{elsewhere})"));
                prop_assert!(check(&c.nonce, true, &o).is_err(), "made on another node: {}", o);
            }
            let unknown = c.with(|c| c.host = "??? (0.0.0.0)".into());
            prop_assert!(check(&c.nonce, true, &unknown).is_err(), "made nowhere");
        }
        let other = other_hex_digit(&session, at, digit);
        let v = check(&c.nonce, true, &c.text().replacen(&session, &other, 1));
        prop_assert!(v.is_ok(), "{:?}", v);
        prop_assert_eq!(v.unwrap().session.map(|s| auth::to_hex(&s)), Some(other));
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
