//! One way to bring up a test's QPs on both ends: the control channel's endpoint exchange, or
//! rdma_cm with the endpoints exchanged after it, returning the connected QPs and their peers.

use super::control::{ControlChannel, Message, QpType, TestSpec};
use super::endpoint::{Endpoint, LocalPort, PortChoice, choose_port, cm_address, local_port_on};
use super::test_qp::TestQp;
use crate::verbs::{CmConnParams, CmId, CmListener};
use anyhow::{Result, anyhow, bail};
use std::net::SocketAddr;
use std::time::Duration;

/// A test's QPs, connected. Fields drop in order: the QPs go before the rdma_cm ids they were
/// connected through, so no caller has to order the drops itself.
pub struct Connected {
    pub qps: Vec<TestQp>,
    /// With rdma_cm, one id per QP; empty otherwise.
    pub ids: Vec<CmId>,
    /// The peer's endpoints, one per QP, in the same order.
    pub remotes: Vec<Endpoint>,
}

/// Which messages carry the endpoints: a ping-pong's single endpoint, or a perf test's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Pingpong,
    Perf,
}

impl Wire {
    fn request(self, spec: &TestSpec, mut endpoints: Vec<Endpoint>) -> Result<Message> {
        Ok(match self {
            Wire::Perf => Message::PerfRequest {
                spec: spec.clone(),
                endpoints,
            },
            Wire::Pingpong => Message::Request {
                spec: spec.clone(),
                endpoint: endpoints
                    .pop()
                    .ok_or_else(|| anyhow!("no endpoint to send"))?,
            },
        })
    }

    fn accept(self, mut endpoints: Vec<Endpoint>) -> Result<Message> {
        Ok(match self {
            Wire::Perf => Message::PerfAccept { endpoints },
            Wire::Pingpong => Message::Accept {
                endpoint: endpoints
                    .pop()
                    .ok_or_else(|| anyhow!("no endpoint to send"))?,
            },
        })
    }
}

/// How one side makes each of its QPs ready to be connected (size, access, receives posted).
pub trait QpRecipe {
    fn make(&self, local: &LocalPort) -> Result<TestQp>;
    /// A check once the QP is connected (e.g. a UD message must fit the path MTU).
    fn connected(&self, _tq: &TestQp) -> Result<()> {
        Ok(())
    }
}

/// What both ends need to establish a test's QPs.
pub struct Plan<'a> {
    pub spec: &'a TestSpec,
    pub wire: Wire,
    /// QPs to connect.
    pub n: usize,
    pub recipe: &'a dyn QpRecipe,
    pub choice: &'a PortChoice,
    /// rdma_cm's port: the control connection's port number.
    pub cm_port: u16,
    pub timeout: Duration,
}

fn cm_params(tq: &TestQp) -> CmConnParams {
    CmConnParams {
        responder_resources: tq.rd_atomic,
        initiator_depth: tq.rd_atomic,
        ..CmConnParams::default()
    }
}

/// The peer's endpoints from an accept (or its refusal), exactly `n` of them.
fn accepted(ch: &mut ControlChannel, n: usize, what: &str) -> Result<Vec<Endpoint>> {
    let peer = ch.peer().to_string();
    let endpoints = match ch.recv(what)? {
        Message::PerfAccept { endpoints } => endpoints,
        Message::Accept { endpoint } => vec![endpoint],
        Message::Refuse { reason } => {
            return Err(crate::connect::control::refusal(&peer, "the test", &reason));
        }
        _ => bail!("{peer} sent an unexpected message instead of {what}"),
    };
    if endpoints.len() != n {
        bail!("{peer} answered with {} QPs for our {n}", endpoints.len());
    }
    Ok(endpoints)
}

/// The client's side: request the test, then connect `plan.n` QPs to the server's.
pub fn client(ch: &mut ControlChannel, plan: &Plan) -> Result<Connected> {
    let local_ip = ch.stream().local_addr()?.ip();
    if plan.spec.link.cm {
        return cm_client(ch, plan);
    }
    let local = choose_port(plan.choice, Some(local_ip))?;
    let mut qps = (0..plan.n)
        .map(|_| plan.recipe.make(&local))
        .collect::<Result<Vec<_>>>()?;
    let mine = qps.iter().map(TestQp::endpoint).collect();
    ch.send(&plan.wire.request(plan.spec, mine)?)?;
    let remotes = accepted(ch, plan.n, "the server's answer to our request")?;
    for (tq, r) in qps.iter_mut().zip(&remotes) {
        if let Err(e) = tq
            .connect(r, plan.spec.link.mtu, plan.spec.link.qos())
            .and_then(|_| plan.recipe.connected(tq))
        {
            return Err(ch.fail(e));
        }
    }
    Ok(Connected {
        qps,
        ids: Vec::new(),
        remotes,
    })
}

/// Client over rdma_cm: request (placeholders), the server listens, one rdma_cm connection per
/// QP, then both sides exchange their real endpoints (with buffers for one-sided tests).
fn cm_client(ch: &mut ControlChannel, plan: &Plan) -> Result<Connected> {
    let local_ip = ch.stream().local_addr()?.ip();
    let peer_ip = ch.stream().peer_addr()?.ip();
    let placeholder = choose_port(plan.choice, Some(local_ip))?.endpoint(0, 0, 0);
    ch.send(&plan.wire.request(plan.spec, vec![placeholder; plan.n])?)?;
    let listening = accepted(ch, plan.n, "the server's answer to our request")?;
    let dst = SocketAddr::new(cm_address(&listening[0], peer_ip), plan.cm_port);
    let (mut ids, mut qps) = (Vec::new(), Vec::new());
    for _ in 0..plan.n {
        let id = CmId::resolve_with_tos(dst, None, plan.spec.link.tclass, plan.timeout)?;
        let local = local_port_on(
            id.context()?,
            id.port(),
            plan.choice.gid_index,
            Some(local_ip),
        )?;
        let mut tq = plan.recipe.make(&local)?;
        id.connect_with(&tq.qp, &[], cm_params(&tq), plan.timeout)?;
        tq.path_mtu = Some(tq.local.active_mtu());
        plan.recipe.connected(&tq)?;
        // Pushed in this order, dropped (on error) QPs first: `Connected` keeps that order.
        qps.push(tq);
        ids.push(id);
    }
    let mine = Connected {
        qps,
        ids,
        remotes: Vec::new(),
    };
    ch.send(
        &plan
            .wire
            .accept(mine.qps.iter().map(TestQp::endpoint).collect())?,
    )?;
    let remotes = accepted(
        ch,
        plan.n,
        "the server's endpoints after the rdma_cm connections",
    )?;
    Ok(Connected { remotes, ..mine })
}

/// The server's side: make and connect one QP per client endpoint, then answer with ours.
/// A failure before the answer is told to the client as a refusal.
pub fn server(ch: &mut ControlChannel, plan: &Plan, client_eps: &[Endpoint]) -> Result<Connected> {
    if client_eps.len() != plan.n {
        return Err(ch.refuse(format!("{} endpoints for {} QPs", client_eps.len(), plan.n)));
    }
    let local_ip = ch.stream().local_addr()?.ip();
    if plan.spec.link.cm {
        return cm_server(ch, plan);
    }
    let setup = (|| -> Result<Vec<TestQp>> {
        let local = choose_port(plan.choice, Some(local_ip))?;
        let mut qps = (0..plan.n)
            .map(|_| plan.recipe.make(&local))
            .collect::<Result<Vec<_>>>()?;
        for (tq, r) in qps.iter_mut().zip(client_eps) {
            tq.connect(r, plan.spec.link.mtu, plan.spec.link.qos())?;
            plan.recipe.connected(tq)?;
        }
        Ok(qps)
    })();
    let qps = match setup {
        Ok(q) => q,
        Err(e) => return Err(ch.refuse(format!("{e:#}"))),
    };
    ch.send(
        &plan
            .wire
            .accept(qps.iter().map(TestQp::endpoint).collect())?,
    )?;
    Ok(Connected {
        qps,
        ids: Vec::new(),
        remotes: client_eps.to_vec(),
    })
}

/// Server over rdma_cm: listen on the RDMA address, accept one connection per client QP, then
/// exchange the real endpoints (the client's first).
fn cm_server(ch: &mut ControlChannel, plan: &Plan) -> Result<Connected> {
    if plan.spec.link.transport != QpType::Rc {
        return Err(ch.refuse(format!(
            "rdma_cm connects RC queue pairs only (asked for {})",
            plan.spec.link.transport
        )));
    }
    let local_ip = ch.stream().local_addr()?.ip();
    let listening = (|| -> Result<(Endpoint, CmListener)> {
        let here = choose_port(plan.choice, Some(local_ip))?.endpoint(0, 0, 0);
        let addr = SocketAddr::new(cm_address(&here, local_ip), plan.cm_port);
        let listener = CmListener::bind(addr, plan.n as i32)
            .map_err(|e| anyhow!("listening for rdma_cm connections on {addr}: {e}"))?;
        Ok((here, listener))
    })();
    let (here, listener) = match listening {
        Ok(l) => l,
        Err(e) => return Err(ch.refuse(format!("{e:#}"))),
    };
    ch.send(&plan.wire.accept(vec![here; plan.n])?)?;
    let (mut ids, mut qps) = (Vec::new(), Vec::new());
    for _ in 0..plan.n {
        let req = listener.get_request(plan.timeout)?;
        let local = local_port_on(
            req.context()?,
            req.port(),
            plan.choice.gid_index,
            Some(local_ip),
        )?;
        let mut tq = plan.recipe.make(&local)?;
        let params = cm_params(&tq);
        let id = req.accept_with(&tq.qp, &[], params, plan.timeout)?;
        tq.path_mtu = Some(tq.local.active_mtu());
        qps.push(tq);
        ids.push(id);
    }
    let mine = Connected {
        qps,
        ids,
        remotes: Vec::new(),
    };
    let remotes = accepted(
        ch,
        plan.n,
        "the client's endpoints after the rdma_cm connections",
    )?;
    ch.send(
        &plan
            .wire
            .accept(mine.qps.iter().map(TestQp::endpoint).collect())?,
    )?;
    Ok(Connected { remotes, ..mine })
}
