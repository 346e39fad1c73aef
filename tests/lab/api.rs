//! The library API on rxe0: one call per test, in this process, with typed results (what
//! `check` and `fabric` build on). No child process, no JSON parsing.

use crate::require_rxe0;
use rdmadiag::connect::control::{
    LinkSpec, Op, PerfKind, PerfSpec, PingpongSpec, QpType, Test, TestSpec,
};
use rdmadiag::connect::endpoint::PortChoice;
use rdmadiag::perf::{Observer, Progress, Unobserved};
use rdmadiag::session::{Served, SessionOptions};
use rdmadiag::{Role, TestReport};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

fn opts(port: u16) -> SessionOptions {
    let choice = PortChoice {
        device: Some(crate::DEV.into()),
        ..PortChoice::default()
    };
    SessionOptions {
        // A server waits for its client longer than any one wait of the test.
        wait: Duration::from_secs(30),
        ..SessionOptions::in_process(choice, port, Duration::from_secs(10))
    }
}

fn perf(kind: PerfKind, op: Op, sizes: Vec<u32>, n: u64) -> TestSpec {
    TestSpec {
        link: LinkSpec::plain(QpType::Rc),
        test: Test::perf_of(
            kind,
            PerfSpec {
                qps: 1,
                tx_depth: 128,
                cq_mod: 100,
                post_list: 16,
                ..PerfSpec::one_at_a_time(op, sizes, n, None)
            },
        ),
    }
}

/// Counts rounds and lends the engines its counters.
#[derive(Default)]
struct Counting {
    rounds: AtomicU32,
    progress: Progress,
}

impl Observer for Counting {
    fn progress(&self) -> Option<&Progress> {
        Some(&self.progress)
    }
    fn round_started(&self, _size: u32) {
        self.rounds.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn one_call_gives_a_typed_bandwidth_report() {
    require_rxe0();
    let watch = Counting::default();
    let spec = perf(PerfKind::Bw, Op::Write, vec![4096, 65536], 50);
    let r = match rdmadiag::run(&spec, &opts(0), Role::Loopback, &watch).expect("bw loopback") {
        TestReport::Perf(r) => r,
        other => panic!("expected a perf report, got {other:?}"),
    };
    assert_eq!(r.bw.len(), 2);
    assert_eq!((r.bw[0].size, r.bw[1].size), (4096, 65536));
    assert!(
        r.bw.iter()
            .all(|b| b.iterations == 50 && b.bw_avg_gbps > 0.0)
    );
    assert_eq!(r.bw[1].cq_mod, 1, "64 KiB: a completion each");
    assert_eq!(watch.rounds.load(Ordering::Relaxed), 2);
    let moved = watch.progress.bytes.load(Ordering::Relaxed);
    assert_eq!(
        moved,
        50 * 65536,
        "the last round's bytes, counted by the engine"
    );
    assert_eq!(r.local.device, crate::DEV);
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn server_and_client_in_one_process() {
    require_rxe0();
    let port = 18960;
    let server = std::thread::spawn(move || {
        rdmadiag::run(
            &perf(PerfKind::Verify, Op::Write, vec![8192], 20),
            &opts(port),
            Role::Server,
            &Unobserved,
        )
    });
    // The server's spec is ignored: it runs what the client asks for.
    let spec = perf(PerfKind::Verify, Op::Write, vec![8192], 20);
    let mut client = None;
    for _ in 0..100 {
        match rdmadiag::run(
            &spec,
            &opts(port),
            Role::Client {
                host: "10.77.0.1".into(),
            },
            &Unobserved,
        ) {
            Ok(r) => {
                client = Some(r);
                break;
            }
            Err(e) if format!("{e:#}").contains("refused") => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => panic!("client: {e:#}"),
        }
    }
    let Some(TestReport::Perf(r)) = client else {
        panic!("no perf report from the client");
    };
    let l = &r.lat[0];
    assert_eq!((l.verified, l.transfers_checked), (Some(true), Some(20)));
    match server.join().expect("server thread").expect("server") {
        TestReport::Served(Served::Perf(s)) => {
            assert_eq!(s.test, "write");
            assert_eq!(s.rounds, 1, "20 x 8 KiB fit one round of slots");
        }
        other => panic!("expected a served perf test, got {other:?}"),
    }
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn pingpong_and_latency_in_process() {
    require_rxe0();
    let pp = TestSpec {
        link: LinkSpec::plain(QpType::Rc),
        test: Test::Pingpong(PingpongSpec::polled(4096, 100, 500)),
    };
    match rdmadiag::run(&pp, &opts(0), Role::Loopback, &Unobserved).expect("pingpong") {
        TestReport::Pingpong(r) => {
            assert_eq!((r.iterations, r.requested_iterations), (100, 100));
            assert!(r.latency.median_us > 0.0 && r.usec_per_iter > 0.0);
        }
        other => panic!("expected a ping-pong report, got {other:?}"),
    }
    let spec = perf(PerfKind::Lat, Op::Send, vec![2], 100);
    match rdmadiag::run(&spec, &opts(0), Role::Loopback, &Unobserved).expect("lat") {
        TestReport::Perf(r) => {
            assert_eq!(r.lat[0].iterations, 100);
            assert_eq!(r.latency_measure.as_deref(), Some("half round trip"));
        }
        other => panic!("expected a perf report, got {other:?}"),
    }
}
