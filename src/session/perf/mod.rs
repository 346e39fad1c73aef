//! Both halves of bw, lat, write and read tests: what a request may ask, the QPs it needs,
//! the rounds (one per size), the client, the server and the `--vs-tcp` comparison.

mod client;
mod perftest;
mod perftest_lat;
mod qps;
mod rounds;
mod server;
mod vs_tcp;

pub use client::client;
pub use perftest::{perftest_client, perftest_serve};
pub use server::{PerfServed, serve};

use crate::connect::control::{PerfSpec, TestSpec};

/// Largest message a test may use (perftest's sweep tops out at 8 MiB; this leaves room).
pub const MAX_SIZE: u32 = 1 << 30;
/// Most QPs one test may ask for.
pub const MAX_QPS: u32 = 1024;
/// Receives kept posted per QP in SEND tests.
const RX_DEPTH: u32 = 512;
/// The WRITE/READ diagnostics give every transfer of a round its own slot; a round's slots
/// span at most this many bytes (one transfer's size if that is larger).
const VERIFY_SPAN: u64 = 16 << 20;

/// Slots per diagnostic round: as many transfers as fit in [`VERIFY_SPAN`], at most all of them.
pub fn verify_slots(size: u32, iterations: u64) -> u64 {
    (VERIFY_SPAN / size.max(1) as u64).clamp(1, iterations.max(1))
}

/// Which measurement a test makes.
pub use crate::connect::control::PerfKind as Kind;

/// Check a spec against this side's limits; the reason is told to the client.
pub fn validate(spec: &TestSpec) -> Result<(Kind, PerfSpec), String> {
    let (kind, p) = spec
        .test
        .perf()
        .map(|(kind, p)| (kind, p.clone()))
        .ok_or_else(|| {
            format!(
                "a {} test is not a bw/lat/write/read test",
                spec.test.name()
            )
        })?;
    spec.check_combination()?;
    if p.sizes.is_empty() {
        return Err("no message size given".into());
    }
    if let Some(&bad) = p.sizes.iter().find(|&&s| s == 0 || s > MAX_SIZE) {
        return Err(format!(
            "message size {bad} (-s/--sizes) is outside 1..={MAX_SIZE}"
        ));
    }
    if p.iterations == Some(0) {
        return Err("iterations must be at least 1".into());
    }
    if p.iterations.is_none() && p.duration_ms.is_none_or(|d| d == 0) {
        return Err("neither iterations nor a duration given".into());
    }
    if p.qps == 0 || p.qps > MAX_QPS {
        return Err(format!("{} QPs is outside 1..={MAX_QPS}", p.qps));
    }
    if p.tx_depth == 0 || p.tx_depth > 1 << 15 {
        return Err(format!("tx depth {} is outside 1..=32768", p.tx_depth));
    }
    if p.cq_mod == 0 {
        return Err("CQ moderation must be at least 1".into());
    }
    if p.outstanding == Some(0) {
        return Err("outstanding reads must be at least 1".into());
    }
    Ok((kind, p))
}

fn max_size(p: &PerfSpec) -> usize {
    p.sizes.iter().copied().max().unwrap_or(1) as usize
}

fn gbps(bytes_per_sec: f64) -> f64 {
    bytes_per_sec * 8.0 / 1e9
}

#[cfg(test)]
mod tests {
    use super::qps::shape;
    use super::*;
    use crate::connect::control::{LatTiming, LinkSpec, Op, PingpongSpec, QpType, Test};
    use crate::perf::Side;
    use crate::verbs::Access;

    fn spec(kind: Kind, op: Op, transport: QpType) -> TestSpec {
        TestSpec {
            link: LinkSpec::plain(transport),
            test: Test::perf_of(
                kind,
                PerfSpec {
                    op,
                    sizes: vec![65536],
                    iterations: Some(1000),
                    duration_ms: None,
                    qps: 1,
                    tx_depth: 128,
                    cq_mod: 100,
                    cq_mod_explicit: false,
                    post_list: 16,
                    outstanding: None,
                    timing: LatTiming::Perftest,
                    inline: 0,
                    inline_explicit: false,
                    bidirectional: false,
                    vs_tcp: false,
                },
            ),
        }
    }

    fn perf(s: &mut TestSpec) -> &mut PerfSpec {
        s.test.perf_mut().unwrap()
    }

    #[test]
    fn invalid_combinations_are_refused() {
        assert!(validate(&spec(Kind::Bw, Op::Write, QpType::Rc)).is_ok());
        assert!(validate(&spec(Kind::Bw, Op::Send, QpType::Ud)).is_ok());
        let e = validate(&spec(Kind::Bw, Op::Read, QpType::Ud)).unwrap_err();
        assert!(e.contains("UD"), "{e}");
        assert!(validate(&spec(Kind::Lat, Op::Read, QpType::Uc)).is_err());
        assert!(validate(&spec(Kind::Verify, Op::Send, QpType::Rc)).is_err());
        let pingpong = TestSpec {
            link: LinkSpec::plain(QpType::Rc),
            test: Test::Pingpong(PingpongSpec::polled(1, 1, 1)),
        };
        assert!(validate(&pingpong).is_err());
        let mut s = spec(Kind::Bw, Op::Write, QpType::Uc);
        s.link.cm = true;
        assert!(validate(&s).unwrap_err().contains("RC"));
        let mut s = spec(Kind::Bw, Op::Write, QpType::Rc);
        perf(&mut s).sizes = vec![0];
        assert!(validate(&s).is_err());
        perf(&mut s).sizes = vec![MAX_SIZE + 1];
        assert!(validate(&s).is_err());
        let mut s = spec(Kind::Bw, Op::Write, QpType::Rc);
        perf(&mut s).qps = 1_000_000;
        assert!(validate(&s).unwrap_err().contains("QPs"));
        let mut s = spec(Kind::Bw, Op::Write, QpType::Rc);
        perf(&mut s).iterations = None;
        assert!(validate(&s).is_err(), "neither iterations nor duration");
    }

    #[test]
    fn least_privilege_access() {
        let s = spec(Kind::Bw, Op::Write, QpType::Rc);
        let p = s.test.perf().unwrap().1.clone();
        let server = shape(&s, Kind::Bw, &p, Side::Responder, 256).access;
        let client = shape(&s, Kind::Bw, &p, Side::Initiator, 256).access;
        assert!(server.contains(Access::REMOTE_WRITE) && !server.contains(Access::REMOTE_READ));
        assert!(!client.contains(Access::REMOTE_WRITE) && !client.contains(Access::REMOTE_READ));
        let s = spec(Kind::Bw, Op::Read, QpType::Rc);
        let p = s.test.perf().unwrap().1.clone();
        let server = shape(&s, Kind::Bw, &p, Side::Responder, 256).access;
        assert!(server.contains(Access::REMOTE_READ) && !server.contains(Access::REMOTE_WRITE));
        let s = spec(Kind::Bw, Op::Send, QpType::Rc);
        let p = s.test.perf().unwrap().1.clone();
        let server = shape(&s, Kind::Bw, &p, Side::Responder, 256).access;
        assert_eq!(server, Access::LOCAL_WRITE);
        for op in [Op::AtomicFadd, Op::AtomicCswap] {
            let s = spec(Kind::Bw, op, QpType::Rc);
            let p = s.test.perf().unwrap().1.clone();
            let server = shape(&s, Kind::Bw, &p, Side::Responder, 256).access;
            let client = shape(&s, Kind::Lat, &p, Side::Initiator, 256).access;
            assert_eq!(server, Access::LOCAL_WRITE | Access::REMOTE_ATOMIC);
            assert_eq!(client, Access::LOCAL_WRITE, "the results land locally");
            // Atomics in flight are bounded like READs (-o, else the device's maximum).
            assert_eq!(
                shape(&s, Kind::Bw, &p, Side::Initiator, 256).rd_atomic,
                u8::MAX
            );
        }
    }

    /// Every op, kind and side: REMOTE_WRITE only where the peer WRITEs into this buffer,
    /// REMOTE_READ only where it READs it, and REMOTE_ATOMIC only on the atomic target (the
    /// responder's buffer of an atomic test).
    #[test]
    fn access_flags_per_op_are_least_privilege() {
        let ops = [
            Op::Send,
            Op::Write,
            Op::Read,
            Op::AtomicFadd,
            Op::AtomicCswap,
        ];
        for op in ops {
            for kind in [Kind::Bw, Kind::Lat, Kind::Verify] {
                for side in [Side::Initiator, Side::Responder] {
                    let server = side == Side::Responder;
                    for bidirectional in [false, true] {
                        let s = spec(Kind::Bw, op, QpType::Rc);
                        let mut p = s.test.perf().unwrap().1.clone();
                        p.bidirectional = bidirectional;
                        let a = shape(&s, kind, &p, side, 256).access;
                        let what = format!("{op:?} {kind:?} server={server} bidir={bidirectional}");
                        assert!(a.contains(Access::LOCAL_WRITE), "{what}");
                        assert_eq!(
                            a.contains(Access::REMOTE_ATOMIC),
                            op.is_atomic() && server,
                            "{what}: atomic"
                        );
                        if a.contains(Access::REMOTE_WRITE) {
                            assert!(op == Op::Write, "{what}: remote write");
                            assert!(server || bidirectional || kind == Kind::Lat, "{what}");
                        }
                        if a.contains(Access::REMOTE_READ) {
                            assert!(op == Op::Read && (server || bidirectional), "{what}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_device_without_atomics_is_named_before_any_qp() {
        use super::qps::atomics_supported;
        use crate::verbs::AtomicCap;
        let e = atomics_supported(Op::AtomicFadd, "mlx9_0", AtomicCap::None).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("mlx9_0") && e.contains("ATOMIC_NONE"), "{e}");
        assert!(!e.contains('\n'));
        assert!(atomics_supported(Op::AtomicCswap, "rxe0", AtomicCap::Hca).is_ok());
        assert!(atomics_supported(Op::Write, "mlx9_0", AtomicCap::None).is_ok());
    }

    #[test]
    fn diagnostic_rounds_hold_up_to_16_mib_of_slots() {
        assert_eq!(verify_slots(4096, 100), 100);
        assert_eq!(verify_slots(8 << 20, 3), 2);
        assert_eq!(verify_slots(64 << 20, 3), 1);
        assert_eq!(verify_slots(1, 0), 1);
    }
}
