//! The typed test request: what a client asks a server to run. The link every test shares
//! (`LinkSpec`), then the test (`Test`), each variant carrying only its own parameters; serde
//! tags it on the wire (`kind`), so no test is dispatched by its name.

use super::test_qp::Qos;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use crate::verbs::QpType;

/// Everything the server needs to run a test: the client sends it, the server needs no flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSpec {
    /// How the QPs connect and what their packets carry: what every test shares.
    pub link: LinkSpec,
    /// Which test, with only the parameters that test has.
    pub test: Test,
}

/// What every test shares: the transport, the path MTU, the connection method and the priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSpec {
    pub transport: QpType,
    /// Path MTU forced by the client, bytes.
    pub mtu: Option<u32>,
    /// Connect the QPs through rdma_cm.
    pub cm: bool,
    /// RoCE GRH traffic class (`--tclass`); None: 0, or rdma_cm's default with `cm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tclass: Option<u8>,
    /// InfiniBand service level (`--sl`); None: 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sl: Option<u8>,
}

impl LinkSpec {
    /// `transport` at the port's MTU, through the TCP exchange, at the default priority.
    pub fn plain(transport: QpType) -> LinkSpec {
        LinkSpec {
            transport,
            mtu: None,
            cm: false,
            tclass: None,
            sl: None,
        }
    }

    /// This link with `p`'s traffic class and service level.
    pub fn with_priority(self, p: Priority) -> LinkSpec {
        LinkSpec {
            tclass: p.tclass,
            sl: p.sl,
            ..self
        }
    }

    /// The traffic class the packets carry, as reported: None when rdma_cm chose (its default
    /// ToS, `--cm` without `--tclass`).
    pub fn reported_tclass(&self) -> Option<u8> {
        self.tclass.or((!self.cm).then_some(0))
    }

    /// The service level, as reported: None when the path gave it (`--cm`).
    pub fn reported_sl(&self) -> Option<u8> {
        self.sl.or((!self.cm).then_some(0))
    }

    /// The priority both ends' QPs give their packets.
    pub fn qos(&self) -> Qos {
        Qos {
            traffic_class: self.tclass.unwrap_or(0),
            sl: self.sl.unwrap_or(0),
        }
    }
}

/// Which test a request runs, carrying only that test's parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Test {
    /// SEND/RECV round trips, as ibv_rc_pingpong.
    Pingpong(PingpongSpec),
    /// Bandwidth, as perftest's ib_*_bw.
    Bw(PerfSpec),
    /// Latency, as perftest's ib_*_lat.
    Lat(PerfSpec),
    /// The WRITE/READ data diagnostics (`rdmadiag write`, `rdmadiag read`): every byte checked.
    Verify(PerfSpec),
}

/// Which measurement a bw/lat/write/read test makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PerfKind {
    Bw,
    Lat,
    /// The WRITE/READ data diagnostics (`rdmadiag write`, `rdmadiag read`).
    Verify,
}

impl PerfKind {
    /// The test's name as the command line spells it.
    pub fn test_name(self, op: Op) -> TestName {
        match (self, op) {
            (PerfKind::Bw, _) => TestName::Bw,
            (PerfKind::Lat, _) => TestName::Lat,
            (PerfKind::Verify, Op::Read) => TestName::Read,
            (PerfKind::Verify, _) => TestName::Write,
        }
    }
}

/// A test's name as the command line (its subcommand) and the JSON reports (`test`) spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestName {
    Pingpong,
    Bw,
    Lat,
    Write,
    Read,
}

impl TestName {
    /// The WRITE/READ data diagnostics.
    pub fn is_diagnostic(self) -> bool {
        matches!(self, TestName::Write | TestName::Read)
    }
}

impl TestName {
    pub fn as_str(self) -> &'static str {
        match self {
            TestName::Pingpong => "pingpong",
            TestName::Bw => "bw",
            TestName::Lat => "lat",
            TestName::Write => "write",
            TestName::Read => "read",
        }
    }
}

impl PartialEq<&str> for TestName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for TestName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Test {
    /// The bw/lat/write/read test of `kind` with `perf`'s parameters.
    pub fn perf_of(kind: PerfKind, perf: PerfSpec) -> Test {
        match kind {
            PerfKind::Bw => Test::Bw(perf),
            PerfKind::Lat => Test::Lat(perf),
            PerfKind::Verify => Test::Verify(perf),
        }
    }

    /// A bw/lat/write/read test's kind and parameters; None for ping-pong.
    pub fn perf(&self) -> Option<(PerfKind, &PerfSpec)> {
        match self {
            Test::Pingpong(_) => None,
            Test::Bw(p) => Some((PerfKind::Bw, p)),
            Test::Lat(p) => Some((PerfKind::Lat, p)),
            Test::Verify(p) => Some((PerfKind::Verify, p)),
        }
    }

    /// A bw/lat/write/read test's parameters, to change; None for ping-pong.
    pub fn perf_mut(&mut self) -> Option<&mut PerfSpec> {
        match self {
            Test::Pingpong(_) => None,
            Test::Bw(p) | Test::Lat(p) | Test::Verify(p) => Some(p),
        }
    }

    /// The test's name as the command line spells it.
    pub fn name(&self) -> TestName {
        match self.perf() {
            None => TestName::Pingpong,
            Some((kind, p)) => kind.test_name(p.op),
        }
    }
}

/// Bytes sent inline by the latency tests unless `-I` says otherwise: perftest's default for
/// its ib_*_lat (the device may allow less; the QP is then made with what it allows).
pub const LAT_INLINE: u32 = 236;

/// What a ping-pong test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingpongSpec {
    pub size: u32,
    pub iterations: u64,
    pub rx_depth: u32,
    /// Sleep on completion events instead of busy polling.
    pub events: bool,
}

impl PingpongSpec {
    /// `iterations` round trips of `size` bytes, `rx_depth` receives posted, busy polling.
    pub fn polled(size: u32, iterations: u64, rx_depth: u32) -> PingpongSpec {
        PingpongSpec {
            size,
            iterations,
            rx_depth,
            events: false,
        }
    }
}

impl TestSpec {
    /// The one rule for which operation, transport and connection method go together, used by
    /// the command line (a usage error) and by a server (a refusal). The reason names the flag.
    pub fn check_combination(&self) -> Result<(), String> {
        let link = &self.link;
        if link.cm && link.sl.is_some() {
            return Err(
                "--sl needs the TCP exchange of endpoints: through rdma_cm (--cm) the \
                        service level comes from the path (the SA's on InfiniBand, the ToS's \
                        priority on RoCE); use --tclass for rdma_cm's ToS"
                    .into(),
            );
        }
        if link.cm && link.transport != QpType::Rc {
            return Err(format!(
                "rdma_cm (--cm) connects RC queue pairs only, not {}: use -c RC",
                link.transport
            ));
        }
        let Some((kind, p)) = self.test.perf() else {
            return Ok(());
        };
        if p.op.is_atomic() {
            return check_atomic(kind, p, link.transport);
        }
        if p.op != Op::Send && link.transport == QpType::Ud {
            return Err(format!(
                "RDMA {} (--op {}) needs a connected transport: use -c RC or -c UC (UD \
                 carries SEND only)",
                p.op.to_string().to_uppercase(),
                p.op
            ));
        }
        if p.op == Op::Read && link.transport == QpType::Uc {
            return Err("RDMA READ (--op read) needs -c RC (UC has no RDMA READ)".into());
        }
        if kind == PerfKind::Verify && p.op == Op::Send {
            return Err("the data diagnostics run RDMA WRITE or READ, not SEND".into());
        }
        Ok(())
    }
}

/// What an atomic test may ask: RC, bw or lat, 8 bytes, one direction.
fn check_atomic(kind: PerfKind, p: &PerfSpec, transport: QpType) -> Result<(), String> {
    if transport != QpType::Rc {
        return Err(format!(
            "atomics (--op {}) need -c RC ({transport} has no atomic operations)",
            p.op
        ));
    }
    if kind == PerfKind::Verify {
        return Err("the data diagnostics run RDMA WRITE or READ, not atomics".into());
    }
    if let Some(bad) = p.sizes.iter().find(|&&s| s != ATOMIC_SIZE) {
        return Err(format!(
            "atomics move {ATOMIC_SIZE} bytes: size {bad} (-s/--sizes/-a) cannot be used with \
             --op {}",
            p.op
        ));
    }
    if p.bidirectional {
        return Err(format!(
            "-b is not available with atomics (--op {}): the target is the server's",
            p.op
        ));
    }
    Ok(())
}

/// The priority a client asks for its test's packets (`--tclass`, `--sl`); None: the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Priority {
    pub tclass: Option<u8>,
    pub sl: Option<u8>,
}

/// What a bw/lat/write/read test runs (sent by the client; the server needs no flags).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfSpec {
    pub op: Op,
    /// One round per size, in order.
    pub sizes: Vec<u32>,
    /// Operations per QP and size; None in duration mode.
    pub iterations: Option<u64>,
    pub duration_ms: Option<u64>,
    pub qps: u32,
    pub tx_depth: u32,
    pub cq_mod: u32,
    /// The user asked for `cq_mod` (-Q): it then applies to large messages too.
    #[serde(default)]
    pub cq_mod_explicit: bool,
    pub post_list: u32,
    /// RDMA READs in flight per QP (-o); None: the device's maximum.
    #[serde(default)]
    pub outstanding: Option<u32>,
    /// How latency samples are taken (`lat --timing`).
    #[serde(default)]
    pub timing: LatTiming,
    /// Send messages up to this size inline.
    pub inline: u32,
    /// The user asked for `inline` (-I): more than the device allows is then an error, not a cap.
    #[serde(default)]
    pub inline_explicit: bool,
    pub bidirectional: bool,
    /// After the RDMA rounds, run the same sizes over a plain TCP connection.
    #[serde(default)]
    pub vs_tcp: bool,
}

impl PerfSpec {
    /// One QP, one request in flight, nothing inline: the shape of the latency tests and of the
    /// WRITE/READ diagnostics, which bandwidth tests widen. `duration` replaces `iterations`.
    pub fn one_at_a_time(
        op: Op,
        sizes: Vec<u32>,
        iterations: u64,
        duration: Option<Duration>,
    ) -> PerfSpec {
        PerfSpec {
            op,
            sizes,
            iterations: duration.is_none().then_some(iterations),
            duration_ms: duration.map(|d| d.as_millis().max(1) as u64),
            qps: 1,
            tx_depth: 1,
            cq_mod: 1,
            cq_mod_explicit: false,
            post_list: 1,
            outstanding: None,
            timing: LatTiming::default(),
            inline: 0,
            inline_explicit: false,
            bidirectional: false,
            vs_tcp: false,
        }
    }
}

/// The RDMA operation a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Send,
    Write,
    Read,
    /// 8-byte atomic fetch-and-add (+1 each) on the responder's target.
    #[serde(rename = "atomic-fadd")]
    AtomicFadd,
    /// 8-byte atomic compare-and-swap on the responder's target.
    #[serde(rename = "atomic-cswap")]
    AtomicCswap,
}

/// The bytes every atomic operation moves (and the only size an atomic test runs).
pub const ATOMIC_SIZE: u32 = 8;

impl Op {
    /// Fetch-and-add or compare-and-swap: 8 bytes, RC only, bounded like READs.
    pub fn is_atomic(self) -> bool {
        matches!(self, Op::AtomicFadd | Op::AtomicCswap)
    }

    /// The operation as the verbs name it, for messages ("RDMA READ", "atomic fetch-and-add").
    pub fn verbs_name(self) -> &'static str {
        match self {
            Op::Send => "SEND",
            Op::Write => "RDMA WRITE",
            Op::Read => "RDMA READ",
            Op::AtomicFadd => "atomic fetch-and-add",
            Op::AtomicCswap => "atomic compare-and-swap",
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Send => "send",
            Op::Write => "write",
            Op::Read => "read",
            Op::AtomicFadd => "atomic-fadd",
            Op::AtomicCswap => "atomic-cswap",
        })
    }
}

/// How a latency test takes its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LatTiming {
    /// As perftest's ib_*_lat: every operation is signalled and its completion is polled
    /// inside the sample.
    #[default]
    Perftest,
    /// A completion every 16th operation, reaped outside the samples: the wire and the peer,
    /// less this side's completion handling.
    Lean,
}

impl LatTiming {
    /// Signal (and wait for) every this many operations.
    pub fn signal_every(self) -> u64 {
        match self {
            LatTiming::Perftest => 1,
            LatTiming::Lean => 16,
        }
    }

    /// The policy in words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            LatTiming::Perftest => "every operation signalled, its completion polled in the sample",
            LatTiming::Lean => "a completion every 16th operation, reaped outside the samples",
        }
    }
}

impl std::fmt::Display for LatTiming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LatTiming::Perftest => "perftest",
            LatTiming::Lean => "lean",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the wire the test names itself ("kind") and carries only its own parameters; a
    /// request of a test this side does not know, or of a test missing its parameters, does
    /// not parse (the peer is told, nothing runs).
    #[test]
    fn the_request_is_tagged_by_its_test_and_carries_only_that_test_s_fields() {
        let pp = TestSpec {
            link: LinkSpec::plain(QpType::Rc),
            test: Test::Pingpong(PingpongSpec::polled(4096, 10, 64)),
        };
        let v = serde_json::to_value(&pp).unwrap();
        assert_eq!(v["test"]["kind"], "pingpong");
        assert!(v["test"].get("sizes").is_none() && v["test"].get("op").is_none());
        assert_eq!(serde_json::from_value::<TestSpec>(v).unwrap(), pp);
        let bw = TestSpec {
            link: LinkSpec::plain(QpType::Uc),
            test: Test::Bw(PerfSpec::one_at_a_time(Op::Write, vec![64], 5, None)),
        };
        let v = serde_json::to_value(&bw).unwrap();
        assert_eq!(v["test"]["kind"], "bw");
        assert!(v["test"].get("rx_depth").is_none());
        assert_eq!(serde_json::from_value::<TestSpec>(v).unwrap(), bw);
        let mut unknown = serde_json::to_value(&bw).unwrap();
        unknown["test"]["kind"] = "atomic".into();
        assert!(serde_json::from_value::<TestSpec>(unknown).is_err());
        let mut bare = serde_json::to_value(&pp).unwrap();
        bare["test"] = serde_json::json!({"kind": "lat"});
        assert!(serde_json::from_value::<TestSpec>(bare).is_err());
    }

    #[test]
    fn each_test_names_itself_as_the_command_line_does() {
        let perf = |op| PerfSpec::one_at_a_time(op, vec![2], 1, None);
        let name = |t: Test| t.name().to_string();
        assert_eq!(name(Test::Bw(perf(Op::Send))), "bw");
        assert_eq!(name(Test::Lat(perf(Op::Write))), "lat");
        assert_eq!(name(Test::Verify(perf(Op::Read))), "read");
        assert_eq!(
            name(Test::perf_of(PerfKind::Verify, perf(Op::Write))),
            "write"
        );
        assert!(Test::Verify(perf(Op::Read)).name().is_diagnostic());
        assert_eq!(
            serde_json::to_value(TestName::Pingpong).unwrap(),
            "pingpong"
        );
        assert!(Test::Bw(perf(Op::Send)).perf().is_some());
    }

    #[test]
    fn atomics_are_rc_bw_or_lat_of_8_bytes_named_with_a_dash_on_the_wire() {
        let atomic = |kind, op, transport, size| TestSpec {
            link: LinkSpec::plain(transport),
            test: Test::perf_of(kind, PerfSpec::one_at_a_time(op, vec![size], 5, None)),
        };
        for op in [Op::AtomicFadd, Op::AtomicCswap] {
            assert!(op.is_atomic());
            for kind in [PerfKind::Bw, PerfKind::Lat] {
                assert_eq!(atomic(kind, op, QpType::Rc, 8).check_combination(), Ok(()));
                for t in [QpType::Uc, QpType::Ud] {
                    let e = atomic(kind, op, t, 8).check_combination().unwrap_err();
                    assert!(e.contains("-c RC") && !e.contains('\n'), "{e}");
                }
                let e = atomic(kind, op, QpType::Rc, 64)
                    .check_combination()
                    .unwrap_err();
                assert!(e.contains("atomics move 8 bytes"), "{e}");
            }
            let e = atomic(PerfKind::Verify, op, QpType::Rc, 8)
                .check_combination()
                .unwrap_err();
            assert!(e.contains("not atomics"), "{e}");
            let mut b = atomic(PerfKind::Bw, op, QpType::Rc, 8);
            b.test.perf_mut().unwrap().bidirectional = true;
            assert!(b.check_combination().unwrap_err().contains("-b"));
        }
        assert!(
            ![Op::Send, Op::Write, Op::Read]
                .iter()
                .any(|o| o.is_atomic())
        );
        assert_eq!(serde_json::to_value(Op::AtomicFadd).unwrap(), "atomic-fadd");
        assert_eq!(
            serde_json::to_value(Op::AtomicCswap).unwrap(),
            "atomic-cswap"
        );
        assert_eq!(Op::AtomicCswap.to_string(), "atomic-cswap");
        let spec = atomic(PerfKind::Lat, Op::AtomicFadd, QpType::Rc, 8);
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["test"]["op"], "atomic-fadd");
        assert_eq!(serde_json::from_value::<TestSpec>(v).unwrap(), spec);
    }
}
