//! A peer killed during the handshake or the QP set-up, in either role.

use super::wire::{
    MAGIC, endpoint, fake_server, frame_json, greet_as_peer, pingpong_spec, read_frame,
};
use super::{HOST, LIMIT, failed_cleanly};
use crate::common::*;
use crate::require_rxe0;
use serde_json::json;
use std::io::Write;
use std::net::TcpStream;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn peer_gone_during_handshake_server_role() {
    require_rxe0();
    let server = spawn_rdmadiag(&["pingpong", "-p", "19200", "--timeout", "3s"]);
    wait_listening(19200, LIMIT);
    let mut peer = TcpStream::connect((HOST, 19200)).unwrap();
    let me = peer.local_addr().unwrap().to_string();
    peer.write_all(&MAGIC[..4]).unwrap();
    drop(peer);
    let t = Instant::now();
    let (line, took) = failed_cleanly(
        "handshake, server role",
        server,
        LIMIT,
        t,
        "server after its peer vanished",
    );
    assert!(line.contains("greeting") && line.contains(&me), "{line}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn peer_gone_during_handshake_client_role() {
    require_rxe0();
    let fake = fake_server(19201, |mut s| {
        s.write_all(&MAGIC[..4]).unwrap();
    });
    let client = spawn_rdmadiag(&["pingpong", HOST, "-p", "19201", "--timeout", "3s"]);
    let t = fake.accepted_at();
    let (line, took) = failed_cleanly(
        "handshake, client role",
        client,
        LIMIT,
        t,
        "client of a server that vanished mid-greeting",
    );
    fake.join();
    assert!(
        line.contains("greeting") && line.contains("10.77.0.1:19201"),
        "{line}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn peer_gone_during_qp_setup_client_role() {
    require_rxe0();
    let (tx, rx) = channel();
    let fake = fake_server(19202, move |mut s| {
        greet_as_peer(&mut s);
        let req = read_frame(&mut s).expect("the client's request");
        assert_eq!(req["type"], "request", "{req}");
        drop(s);
        tx.send(Instant::now()).unwrap();
    });
    let client = spawn_rdmadiag(&["pingpong", HOST, "-p", "19202", "--timeout", "3s"]);
    let killed = rx
        .recv_timeout(LIMIT)
        .expect("the fake server got a request");
    let (line, took) = failed_cleanly(
        "QP setup, client role",
        client,
        LIMIT,
        killed,
        "client after the server vanished",
    );
    fake.join();
    assert!(
        line.contains("answer to our request") && line.contains("10.77.0.1:19202"),
        "{line}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn peer_gone_during_qp_setup_server_role() {
    require_rxe0();
    let server = spawn_rdmadiag(&["pingpong", "-p", "19203", "--timeout", "3s"]);
    wait_listening(19203, LIMIT);
    let mut peer = TcpStream::connect((HOST, 19203)).unwrap();
    let me = peer.local_addr().unwrap().to_string();
    greet_as_peer(&mut peer);
    let req = json!({"type": "request", "spec": pingpong_spec(json!(64), json!(20)),
                     "endpoint": endpoint()});
    peer.write_all(&frame_json(&req)).unwrap();
    drop(peer);
    let t = Instant::now();
    let (line, took) = failed_cleanly(
        "QP setup, server role",
        server,
        LIMIT,
        t,
        "server after its client vanished",
    );
    assert!(line.contains(&me), "names the client: {line}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
}
