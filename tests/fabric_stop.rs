//! A signal during a fabric run stops it at once: rank 0 waiting at the rendezvous for ranks
//! that never come, and a rank waiting for the coordinator's next word. Its own test binary,
//! since the stop flag is the process's.

use rdmadiag::exit::{self, STOP};
use rdmadiag::fabric::auth::Auth;
use rdmadiag::fabric::coordinator::Quiet;
use rdmadiag::fabric::launcher::{Launch, Launcher};
use rdmadiag::fabric::protocol::PairSide;
use rdmadiag::fabric::rank::{Identity, PairRunner, PairTest};
use rdmadiag::fabric::schedule::{Pattern, Schedule};
use rdmadiag::fabric::{FabricPlan, verdict::Thresholds};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

struct Idle;
impl PairRunner for Idle {
    fn identity(&self) -> anyhow::Result<Identity> {
        Ok(Identity {
            device: "stub0".into(),
            port: 1,
            gid: "::1".into(),
        })
    }
    fn run(&self, _: &PairTest) -> PairSide {
        PairSide::default()
    }
}

/// SIGTERM to rank 0 during the rendezvous (issue 31, attack 6: it ran on for 50 s and needed a
/// second signal): rank 0's coordinator and its own rank both give up within a second, with
/// the signal's exit code.
#[test]
fn sigterm_during_the_rendezvous_stops_rank_0_at_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let plan = FabricPlan {
        launch: Launch {
            launcher: Launcher::HostList,
            rank: 0,
            size: 3,
            coordinator: ("127.0.0.1".into(), port),
        },
        hostname: "stop0".into(),
        schedule: Schedule::new(Pattern::AllPairs, 3, 0),
        thresholds: Thresholds::default(),
        allow_missing: false,
        timeout: Duration::from_secs(60),
        pair_deadline: Duration::from_secs(60),
        auth: Auth::key(b"stop-test-key-0123456789"),
        bind: "127.0.0.1".parse().unwrap(),
        require_same: vec![],
    };
    let signal = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(1));
        exit::record_stop_signal(exit::SIGTERM);
        STOP.store(true, Ordering::SeqCst);
        Instant::now()
    });
    let r = rdmadiag::fabric::run(&plan, &Idle, &Quiet, &|_| {});
    let ended = Instant::now();
    let signalled = signal.join().unwrap();
    let e = match r {
        Ok(_) => panic!("a run stopped by SIGTERM ended well"),
        Err(e) => e,
    };
    assert_eq!(exit::code_for(&e), 143, "{e:#}");
    assert!(
        ended.duration_since(signalled) < Duration::from_secs(2),
        "rank 0 ran {:?} after SIGTERM",
        ended.duration_since(signalled)
    );
}
