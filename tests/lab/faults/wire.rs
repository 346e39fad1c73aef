//! The wire toolkit: control frames built by hand, a fake rdmadiag peer, and a fake server.

use super::LIMIT;
use rdmadiag::connect::control::PROTOCOL_VERSION;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

pub(super) const MAGIC: &[u8; 8] = b"RDMADIAG";

/// Magic and protocol version, as a peer sends it first.
pub(super) fn greeting(version: u32) -> Vec<u8> {
    let mut g = MAGIC.to_vec();
    g.extend_from_slice(&version.to_be_bytes());
    g
}

/// A control frame: u32 BE length, then the bytes.
pub(super) fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

pub(super) fn frame_json(v: &Value) -> Vec<u8> {
    frame(v.to_string().as_bytes())
}

pub(super) fn hello() -> Vec<u8> {
    frame_json(&json!({"type": "hello", "software": "faults test peer"}))
}

/// Read one frame; None at end of stream or on any error (timeout included).
pub(super) fn read_frame(s: &mut TcpStream) -> Option<Value> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// Act as an rdmadiag peer through the greeting and hello exchange (either role).
pub(super) fn greet_as_peer(s: &mut TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&greeting(PROTOCOL_VERSION)).unwrap();
    let mut theirs = [0u8; 12];
    s.read_exact(&mut theirs).expect("rdmadiag's greeting");
    assert_eq!(&theirs[..8], MAGIC);
    s.write_all(&hello()).unwrap();
    let h = read_frame(s).expect("rdmadiag's hello");
    assert_eq!(h["type"], "hello", "{h}");
}

/// A plausible endpoint on rxe0 (the QP behind it does not exist).
pub(super) fn endpoint() -> Value {
    json!({
        "device": "rxe0", "port": 1, "link_layer": "Ethernet", "lid": 0, "qpn": 4660,
        "psn": 1, "gid": "::ffff:10.77.0.1", "gid_index": 1, "gid_type": "RoCE v2",
        "netdev": "dummy0", "active_mtu": 1024, "qkey": 286331153
    })
}

pub(super) fn pingpong_spec(size: Value, iterations: Value) -> Value {
    json!({
        "link": {"transport": "RC", "mtu": null, "cm": false},
        "test": {"kind": "pingpong", "size": size, "iterations": iterations, "rx_depth": 500,
                 "events": false}
    })
}

pub(super) fn perf_spec(qps: Value, sizes: Value, iterations: Value) -> Value {
    json!({
        "link": {"transport": "RC", "mtu": null, "cm": false},
        "test": {
            "kind": "bw", "op": "send", "sizes": sizes, "iterations": iterations,
            "duration_ms": null, "qps": qps, "tx_depth": 128, "cq_mod": 1, "post_list": 1,
            "inline": 0, "bidirectional": false
        }
    })
}

/// A fake server: its thread, and when it accepted its client (where a fault case's clock
/// starts, so that a slow process start on a loaded host is not counted against the client).
pub(super) struct FakeServer {
    thread: std::thread::JoinHandle<()>,
    accepted: Receiver<Instant>,
}

impl FakeServer {
    pub(super) fn accepted_at(&self) -> Instant {
        self.accepted
            .recv_timeout(LIMIT)
            .expect("the client connected to the fake server")
    }

    pub(super) fn join(self) {
        self.thread.join().unwrap()
    }
}

/// Listen on `port` now (so a client may connect at once) and hand the first connection to `f`.
pub(super) fn fake_server(port: u16, f: impl FnOnce(TcpStream) + Send + 'static) -> FakeServer {
    let l = TcpListener::bind(("0.0.0.0", port)).expect("bind the fake server");
    let (tx, accepted) = channel();
    let thread = std::thread::spawn(move || {
        let (s, _) = l.accept().expect("accept");
        let _ = tx.send(Instant::now());
        f(s)
    });
    FakeServer { thread, accepted }
}
