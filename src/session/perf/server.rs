//! The server of a perf test: accept the request, connect its QPs, then play its part in each
//! round the client starts until the client says it is finished.

use super::qps::PerfQps;
use super::rounds::{RoundContext, RoundOutcome, RoundPlan, prepare_round, run_round};
use super::vs_tcp::tcp_server_round;
use super::{Kind, validate, verify_slots};
use crate::connect::control::{
    ControlChannel, Message, Op, RoundSummary, TestName, TestSpec, Verification,
};
use crate::connect::endpoint::Endpoint;
use crate::connect::establish::{self, Connected};
use crate::connect::heartbeat;
use crate::exit::DataMismatch;
use crate::perf::{Progress, Pulse, Side, verify};
use crate::session::phase::{self, QP_SETUP, RESULT_EXCHANGE, TRANSFER};
use crate::session::{SessionOptions, status};
use anyhow::{Result, bail};

/// What a perf server did for its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfServed {
    /// The test the client asked for (`bw`, `lat`, `write` or `read`).
    pub test: TestName,
    /// RDMA rounds run (one per size; the diagnostics run several per size).
    pub rounds: u64,
}

/// The server: answer one client's bw/lat/write/read request.
pub fn serve(
    ch: &mut ControlChannel,
    opts: &SessionOptions,
    spec: &TestSpec,
    client_eps: &[Endpoint],
) -> Result<PerfServed> {
    let peer = ch.peer().to_string();
    let (kind, p) = match validate(spec) {
        Ok(v) => v,
        Err(reason) => return Err(ch.refuse(reason)),
    };
    let recipe = PerfQps {
        spec,
        kind,
        p: &p,
        side: Side::Responder,
        min_buffer: 0,
    };
    let plan = recipe.plan(opts);
    // Owns the QPs and the rdma_cm ids, and drops them in that order.
    phase::enter(QP_SETUP, None);
    let mut conn = establish::server(ch, &plan, client_eps)?;
    let Connected { qps, remotes, .. } = &mut conn;
    let progress = Progress::default();
    let cx = RoundContext::new((kind, spec, &p), Side::Responder, opts.timeout, &peer);
    let mut rounds = 0;
    // A failed verification ends this side non-zero too, after the protocol is finished.
    let mut failed: Option<String> = None;
    loop {
        match ch.recv_patient("the next round")? {
            Message::Round { size, batch } => {
                if !p.sizes.contains(&size) {
                    bail!("{peer} asked for a round of {size} bytes it did not announce");
                }
                let plan = RoundPlan { size, batch };
                if kind == Kind::Verify {
                    let slots = verify_slots(size, p.iterations.unwrap_or(1));
                    match batch {
                        Some(b) if b.count >= 1 && b.count <= slots => {}
                        _ => bail!(
                            "{peer} asked for a diagnostic round of {} transfers; this run \
                             has room for 1..={slots}",
                            batch.map_or(0, |b| b.count)
                        ),
                    }
                }
                phase::enter(TRANSFER, None);
                prepare_round(qps, kind, &p, plan, true);
                ch.send(&Message::RoundReady)?;
                let (mine, cpu) = crate::cpu::measure(|| {
                    run_round(qps, remotes, &cx, plan, &progress, &mut Pulse::none())
                });
                let mine = match mine {
                    Ok(m) => m,
                    Err(e) if e.is::<crate::exit::Interrupted>() => {
                        let what = format!("the round of {size} bytes with {peer}");
                        return Err(ch.fail(e.context(what)));
                    }
                    Err(e) => return Err(ch.fail(e)),
                };
                phase::enter(RESULT_EXCHANGE, None);
                // The client beats while it works on (a one-sided round).
                match heartbeat::recv_beating(ch, "the client's round result")? {
                    Message::RoundDone { .. } => {}
                    _ => bail!("{peer} ended the round with an unexpected message"),
                }
                let mut reply = RoundSummary {
                    cpu_s: cpu,
                    ..RoundSummary::default()
                };
                match (mine, batch) {
                    (Some(RoundOutcome::Bw(b)), _) => reply.bw = Some(b.figures()),
                    (None, Some(b)) if kind == Kind::Verify && p.op == Op::Write => {
                        // Every slot of the round holds its own transfer's pattern, or not.
                        let span = b.count as usize * size as usize;
                        let m = verify::verify_slots(
                            &qps[0].mr.as_slice()[..span],
                            size,
                            b.first,
                            b.count,
                        );
                        if let Some(m) = m {
                            status(opts, &format!("round of {size} bytes: {m}"));
                            failed.get_or_insert(format!(
                                "RDMA WRITE verification of {size}-byte transfers from {peer} \
                                 failed: {m}"
                            ));
                        }
                        reply.verification = Some(Verification {
                            verified: m.is_none(),
                            checked: b.count,
                            mismatch: m,
                        });
                    }
                    _ => {}
                }
                ch.send(&Message::RoundDone { summary: reply })?;
                rounds += 1;
            }
            Message::TcpRound { size } => {
                phase::enter(TRANSFER, None);
                tcp_server_round(ch, kind, &p, size, opts)?;
            }
            Message::Finished { .. } => {
                ch.send(&Message::Finished { summary: None })?;
                if let Some(f) = failed {
                    return Err(DataMismatch(f).into());
                }
                return Ok(PerfServed {
                    test: spec.test.name(),
                    rounds,
                });
            }
            _ => bail!("{peer} sent an unexpected message between rounds"),
        }
    }
}
