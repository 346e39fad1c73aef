//! Rank 0's listener out of descriptors (EMFILE): the failed accepts are counted and the
//! rendezvous goes on, so the ranks join once descriptors are free again. Its own test binary,
//! since the open-file limit and the descriptors filled are the process's.

use rdmadiag::fabric::auth::Auth;
use rdmadiag::fabric::coordinator::{CoordinatorConfig, Quiet, coordinate};
use rdmadiag::fabric::protocol::PairSide;
use rdmadiag::fabric::rank::{Identity, PairRunner, PairTest, RankConfig, run_rank};
use rdmadiag::fabric::schedule::{Pattern, Schedule};
use rdmadiag::fabric::verdict::Thresholds;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

const KEY: &[u8] = b"emfile-test-key-0123456789";

struct Even(u32);
impl PairRunner for Even {
    fn identity(&self) -> anyhow::Result<Identity> {
        Ok(Identity {
            device: "stub0".into(),
            port: 1,
            gid: format!("::ffff:127.0.0.{}", self.0 + 1),
        })
    }
    fn run(&self, t: &PairTest) -> PairSide {
        PairSide {
            bw_gbps: Some(10.0),
            lat_us: t.first.then_some(5.0),
            ..Default::default()
        }
    }
}

fn rank(rank: u32, port: u16) -> std::thread::JoinHandle<anyhow::Result<u8>> {
    std::thread::spawn(move || {
        let cfg = RankConfig {
            rank,
            size: 2,
            hostname: format!("sim{rank}"),
            coordinator: ("127.0.0.1".into(), port),
            connect_timeout: Duration::from_secs(30),
            wait_timeout: Duration::from_secs(60),
            auth: Auth::key(KEY),
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        run_rank(&cfg, &Even(rank), &l, &|_| {})
    })
}

#[test]
fn the_listener_survives_running_out_of_descriptors() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, 256.min(hard), hard).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cfg = CoordinatorConfig {
        size: 2,
        schedule: Schedule::new(Pattern::AllPairs, 2, 0),
        allow_missing: false,
        rendezvous_timeout: Duration::from_secs(30),
        round_timeout: Duration::from_secs(20),
        thresholds: Thresholds::default(),
        auth: Auth::key(KEY),
        require_same: vec![],
    };
    let coordinator = std::thread::spawn(move || coordinate(listener, &cfg, &Quiet));
    std::thread::sleep(Duration::from_millis(200));
    // Take every descriptor but one, connect with that one: the connection waits in the
    // listener's queue, and every accept of it fails with EMFILE.
    let mut filler = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        filler.push(f);
    }
    assert!(
        filler.len() > 100,
        "only {} descriptors filled",
        filler.len()
    );
    filler.pop();
    let stuck = TcpStream::connect(("127.0.0.1", port)).expect("a connection with the last file");
    std::thread::sleep(Duration::from_millis(500));
    drop(filler);
    let ranks = [rank(0, port), rank(1, port)];
    for r in ranks {
        assert_eq!(r.join().unwrap().unwrap(), 0);
    }
    let o = coordinator.join().unwrap().unwrap();
    drop(stuck);
    assert_eq!(o.exit_code, 0, "{:?}", o.missing_reasons);
    assert_eq!(o.pairs.len(), 1);
    // Out of descriptors, either the accept fails (usually, again and again until the filler
    // goes) or, when a descriptor came free meanwhile, taking the accepted connection (its
    // reader's clone) does: either way it is counted, and the run above still completed. (It
    // asked for two failed accepts once; under a loaded CI a descriptor freed elsewhere in the
    // process let the accept through and the clone fail once: seen at 25d1447.)
    let failed: Vec<_> = o
        .refused
        .iter()
        .filter(|r| {
            (r.reason.contains("could not accept") || r.reason.contains("could not be taken"))
                && r.reason.contains("Too many open")
        })
        .collect();
    assert!(
        failed.iter().map(|r| r.count).sum::<u64>() >= 1,
        "the failures for want of descriptors are counted: {:?}",
        o.refused
    );
}
