//! The library API on a host: `rdmadiag::run` returns typed errors without printing, and the
//! exit code a command line would use follows from the error's kind.

use rdmadiag::connect::control::{LinkSpec, Op, PerfSpec, QpType, Test, TestSpec};
use rdmadiag::connect::endpoint::PortChoice;
use rdmadiag::perf::Unobserved;
use rdmadiag::session::SessionOptions;
use rdmadiag::{Role, exit};
use std::time::{Duration, Instant};

fn opts() -> SessionOptions {
    SessionOptions::in_process(PortChoice::default(), 0, Duration::from_secs(2))
}

fn bw_spec(op: Op, transport: QpType) -> TestSpec {
    TestSpec {
        link: LinkSpec::plain(transport),
        test: Test::Bw(PerfSpec::one_at_a_time(op, vec![65536], 10, None)),
    }
}

#[test]
fn a_bad_combination_is_a_usage_error_before_anything_runs() {
    let e = rdmadiag::run(
        &bw_spec(Op::Read, QpType::Uc),
        &opts(),
        Role::Loopback,
        &Unobserved,
    )
    .unwrap_err();
    assert_eq!(exit::code_for(&e), exit::USAGE, "{e:#}");
    assert!(format!("{e}").contains("-c RC"), "{e}");
    let mut cm = bw_spec(Op::Write, QpType::Ud);
    cm.link.cm = true;
    let e = rdmadiag::run(&cm, &opts(), Role::Loopback, &Unobserved).unwrap_err();
    assert_eq!(exit::code_for(&e), exit::USAGE, "{e:#}");
}

#[test]
fn a_client_of_nobody_fails_at_once_naming_the_address() {
    // Port 1 on loopback: nothing listens there.
    let o = SessionOptions { port: 1, ..opts() };
    let t = Instant::now();
    let e = rdmadiag::run(
        &bw_spec(Op::Write, QpType::Rc),
        &o,
        Role::Client {
            host: "127.0.0.1".into(),
        },
        &Unobserved,
    )
    .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5));
    let text = format!("{e:#}");
    assert!(text.contains("127.0.0.1:1"), "{text}");
    assert_eq!(exit::code_for(&e), exit::FAILURE);
}
