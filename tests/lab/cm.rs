//! Lab tests of rdma_cm on rxe0: connect by IP address, move data, disconnect; clear failures.

use crate::{DEV, require_rxe0};
use rdmadiag::verbs::{
    Access, CmEventKind, CmId, CmListener, Completion, CompletionQueue, Context, MemoryRegion,
    ProtectionDomain, QpCaps, QpType, QueuePair, SendOp, SendRequest, WcOpcode,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every wait in these tests: TCG is slow, but nothing may hang.
const LIMIT: Duration = Duration::from_secs(20);

/// What one end of a connection needs: made on the context its cm_id gives.
struct End {
    cq: Arc<CompletionQueue>,
    qp: QueuePair,
    mr: MemoryRegion,
}

impl End {
    fn new(ctx: &Arc<Context>) -> End {
        let pd = ProtectionDomain::new(ctx).expect("ibv_alloc_pd");
        let cq = CompletionQueue::new(ctx, 32, None).expect("ibv_create_cq");
        let caps = QpCaps {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let qp = QueuePair::new(&pd, &cq, &cq, QpType::Rc, caps).expect("ibv_create_qp");
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let mr = MemoryRegion::new(&pd, 4096, access).expect("ibv_reg_mr");
        End { cq, qp, mr }
    }
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// One completion from `cq`, or fail after `limit`.
fn one_completion(cq: &CompletionQueue, limit: Duration) -> Completion {
    let mut buf = [Completion::default(); 1];
    let n = cq
        .poll_until(&mut buf, Instant::now() + limit)
        .expect("ibv_poll_cq");
    assert_eq!(n, 1, "no completion within {limit:?}");
    buf[0]
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn cm_connects_by_ip_sends_and_disconnects() {
    require_rxe0();
    let server_addr = addr("10.77.0.1:20886");
    let listener = CmListener::bind(server_addr, 8).expect("rdma_bind_addr + rdma_listen");
    assert_eq!(listener.local_addr(), Some(server_addr));
    assert_eq!(listener.context().expect("listener's device").name(), DEV);
    let payload: Vec<u8> = (0..64u32).map(|i| (i * 7 + 3) as u8).collect();

    std::thread::scope(|s| {
        let server = s.spawn(|| {
            let req = listener.get_request(LIMIT).expect("CONNECT_REQUEST");
            eprintln!(
                "server: request from {:?} on port {}, {} bytes of private data, \
                 initiator_depth {} responder_resources {}",
                req.peer_addr(),
                req.port(),
                req.private_data().len(),
                req.initiator_depth(),
                req.responder_resources()
            );
            assert!(
                req.private_data().starts_with(b"rdmadiag-cm-client"),
                "{:?}",
                req.private_data()
            );
            assert_eq!(req.port(), 1);
            let peer = req.peer_addr().expect("peer address");
            assert_eq!(peer.ip(), server_addr.ip());
            let ctx = req.context().expect("request's device");
            assert_eq!(ctx.name(), DEV);
            let end = End::new(&ctx);
            req.init_qp(&end.qp)
                .expect("RESET->INIT via rdma_init_qp_attr");
            end.qp.post_recv(1, &end.mr, 0..1024).expect("post receive");
            // Tell the client where it may RDMA WRITE/READ: the access rights come from the CM.
            let mut hello = b"rdmadiag-cm-server".to_vec();
            hello.extend_from_slice(&end.mr.addr().to_le_bytes());
            hello.extend_from_slice(&end.mr.rkey().to_le_bytes());
            let conn = req
                .accept(&end.qp, &hello, LIMIT)
                .expect("rdma_accept + ESTABLISHED");
            assert!(conn.is_connected());

            let c = one_completion(&end.cq, LIMIT);
            assert!(c.status.is_success(), "server recv: {}", c.status);
            assert_eq!((c.wr_id, c.opcode, c.byte_len), (1, WcOpcode::Recv, 64));
            assert_eq!(&end.mr.as_slice()[..64], &payload[..], "received bytes");

            conn.wait_disconnected(LIMIT)
                .expect("client's disconnect arrives");
            assert_eq!(
                &end.mr.as_slice()[2048..2112],
                &payload[..],
                "RDMA WRITE landed"
            );
            conn.disconnect(LIMIT).expect("server disconnect");
            // Drop order: the id first, then the QP (its context keeps the id alive).
            drop(conn);
            drop(end);
        });

        let t0 = Instant::now();
        let id = CmId::resolve(server_addr, None, LIMIT).expect("resolve addr + route");
        eprintln!("client: resolved in {:?}", t0.elapsed());
        assert_eq!(id.peer_addr(), Some(server_addr));
        assert_eq!(id.port(), 1);
        let ctx = id.context().expect("resolved device");
        assert_eq!(ctx.name(), DEV);
        let mut end = End::new(&ctx);
        id.init_qp(&end.qp)
            .expect("RESET->INIT via rdma_init_qp_attr");
        end.qp
            .post_recv(7, &end.mr, 1024..2048)
            .expect("client posts a receive before connecting");
        let reply = id
            .connect(&end.qp, b"rdmadiag-cm-client", LIMIT)
            .expect("connect");
        eprintln!(
            "client: connected in {:?}, {} bytes of private data back",
            t0.elapsed(),
            reply.len()
        );
        assert!(reply.starts_with(b"rdmadiag-cm-server"), "{reply:?}");
        assert!(id.is_connected());

        // The active side completed with rdma_establish: does librdmacm still deliver
        // RDMA_CM_EVENT_ESTABLISHED here? (The code handles both.)
        let after = id
            .next_event(Duration::from_secs(2))
            .expect("rdma_get_cm_event");
        eprintln!("client: event after rdma_establish within 2s: {after:?}");
        assert!(
            after.is_none_or(|e| e.kind == CmEventKind::Established),
            "{after:?}"
        );

        end.mr.as_mut_slice()[..64].copy_from_slice(&payload);
        end.qp
            .post_send(&SendRequest {
                wr_id: 2,
                op: SendOp::Send,
                mr: &end.mr,
                range: 0..64,
                signaled: true,
                inline: false,
                ud: None,
            })
            .expect("post send");
        let c = one_completion(&end.cq, LIMIT);
        assert!(c.status.is_success(), "client send: {}", c.status);
        assert_eq!((c.wr_id, c.opcode), (2, WcOpcode::Send));

        // RDMA WRITE into the server's buffer, then READ it back: this needs the remote access
        // rights rdma_init_qp_attr grants once the CM exchange is done (INIT->INIT refresh).
        let remote_addr = u64::from_le_bytes(reply[18..26].try_into().unwrap());
        let rkey = u32::from_le_bytes(reply[26..30].try_into().unwrap());
        for (wr_id, op, range) in [
            (
                3,
                SendOp::Write {
                    remote_addr: remote_addr + 2048,
                    rkey,
                },
                0..64,
            ),
            (
                4,
                SendOp::Read {
                    remote_addr: remote_addr + 2048,
                    rkey,
                },
                3072..3136,
            ),
        ] {
            end.qp
                .post_send(&SendRequest {
                    wr_id,
                    op,
                    mr: &end.mr,
                    range,
                    signaled: true,
                    inline: false,
                    ud: None,
                })
                .expect("post RDMA");
            let c = one_completion(&end.cq, LIMIT);
            assert!(c.status.is_success(), "client {op:?}: {}", c.status);
            assert_eq!(c.wr_id, wr_id);
        }
        assert_eq!(
            &end.mr.as_slice()[3072..3136],
            &payload[..],
            "RDMA READ back"
        );

        id.disconnect(LIMIT).expect("client disconnect");
        eprintln!("client: disconnected after {:?}", t0.elapsed());
        server.join().expect("server thread");
    });
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn cm_connect_to_a_port_nobody_listens_on_fails_clearly() {
    require_rxe0();
    let t0 = Instant::now();
    let id = CmId::resolve(addr("10.77.0.1:20887"), None, LIMIT).expect("resolve");
    let end = End::new(&id.context().unwrap());
    let err = id
        .connect(&end.qp, b"anyone?", LIMIT)
        .expect_err("nobody listens on 20887");
    let msg = err.to_string();
    eprintln!("after {:?}: {msg}", t0.elapsed());
    assert!(
        msg.contains("RDMA_CM_EVENT_REJECTED") || msg.contains("RDMA_CM_EVENT_UNREACHABLE"),
        "{msg}"
    );
    assert!(msg.contains("10.77.0.1:20887"), "{msg}");
    assert!(msg.contains("status"), "the status is explained: {msg}");
    assert!(t0.elapsed() < LIMIT + Duration::from_secs(5));
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn cm_reject_and_timeouts_are_reported() {
    require_rxe0();
    let server_addr = addr("10.77.0.1:20888");
    let listener = CmListener::bind(server_addr, 8).expect("listen");

    // Nobody connects: the wait ends at its deadline, saying what it waited for and where.
    let t0 = Instant::now();
    let e = listener
        .get_request(Duration::from_secs(1))
        .err()
        .expect("no client");
    assert_eq!(
        e.to_string(),
        "timed out after 1s waiting for RDMA_CM_EVENT_CONNECT_REQUEST on 10.77.0.1:20888"
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());

    // The server application says no: the client sees REJECTED, reason 28, explained.
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            let req = listener.get_request(LIMIT).expect("CONNECT_REQUEST");
            req.reject(b"not today").expect("rdma_reject");
        });
        let id = CmId::resolve(server_addr, None, LIMIT).expect("resolve");
        let end = End::new(&id.context().unwrap());
        let err = id
            .connect(&end.qp, b"hello", LIMIT)
            .expect_err("the server rejects");
        let msg = err.to_string();
        eprintln!("{msg}");
        assert_eq!(
            err.event().map(|e| e.kind),
            Some(CmEventKind::Rejected { status: 28 }),
            "{msg}"
        );
        assert!(msg.contains("IB_CM_REJ_CONSUMER_DEFINED"), "{msg}");
        assert!(msg.contains("to 10.77.0.1:20888"), "{msg}");
        server.join().expect("server thread");
    });

    // A host that is not there (dummy0 answers no ARP): fails by the deadline, never hangs.
    let t0 = Instant::now();
    let short = Duration::from_secs(5);
    let ghost = addr("10.77.0.99:20888");
    let err = match CmId::resolve(ghost, None, short) {
        Err(e) => e,
        Ok(id) => {
            let end = End::new(&id.context().unwrap());
            id.connect(&end.qp, b"", short)
                .expect_err("nobody at 10.77.0.99")
        }
    };
    let msg = err.to_string();
    eprintln!("after {:?}: {msg}", t0.elapsed());
    assert!(msg.contains("10.77.0.99:20888"), "{msg}");
    assert!(
        t0.elapsed() < 2 * short + Duration::from_secs(5),
        "{:?}",
        t0.elapsed()
    );
}
