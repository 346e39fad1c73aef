//! Hostile messages against a persistent server, which logs them and keeps serving.

use super::wire::{
    endpoint, frame, frame_json, greet_as_peer, greeting, perf_spec, pingpong_spec, read_frame,
};
use super::{HOST, LIMIT};
use crate::common::*;
use crate::require_rxe0;
use rdmadiag::connect::control::PROTOCOL_VERSION;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// What a hostile client sends after connecting, and what the server should log about it.
struct Hostile {
    name: &'static str,
    /// Do the greeting and hello exchange first.
    greet: bool,
    bytes: Vec<u8>,
    /// The server must answer with a refuse frame.
    refused: bool,
    logged: &'static str,
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn persistent_server_survives_hostile_messages() {
    require_rxe0();
    // 10 s: the real client at the end sets up its QP between greeting and request, which under
    // TCG on a loaded host has taken longer than 2 s (the server then timed it out).
    let mut server = spawn_rdmadiag(&["pingpong", "--persist", "-p", "19218", "--timeout", "10s"]);
    wait_listening(19218, LIMIT);
    let request =
        |spec: Value| frame_json(&json!({"type": "request", "spec": spec, "endpoint": endpoint()}));
    let perf = |spec: Value, n: usize| {
        frame_json(&json!({"type": "perf_request", "spec": spec,
                           "endpoints": vec![endpoint(); n]}))
    };
    let mut truncated = frame(&[b' '; 200]);
    truncated.truncate(60);
    let mut huge_len = greeting(PROTOCOL_VERSION);
    huge_len.extend_from_slice(&u32::MAX.to_be_bytes());
    huge_len.extend_from_slice(b"{\"type\":\"hello\"");
    let cases = vec![
        Hostile {
            name: "truncated frame",
            greet: true,
            bytes: truncated,
            refused: false,
            logged: "closed the control connection",
        },
        Hostile {
            name: "length prefix 0xFFFFFFFF",
            greet: false,
            bytes: huge_len,
            refused: false,
            logged: "invalid control message length",
        },
        Hostile {
            name: "wrong magic",
            greet: false,
            bytes: b"RDMADIAX\0\0\0\x01".to_vec(),
            refused: false,
            logged: "not rdmadiag",
        },
        Hostile {
            name: "size 2^40",
            greet: true,
            bytes: request(pingpong_spec(json!(1u64 << 40), json!(20))),
            refused: false,
            logged: "malformed",
        },
        Hostile {
            name: "size 2^31",
            greet: true,
            bytes: request(pingpong_spec(json!(1u64 << 31), json!(20))),
            refused: true,
            logged: "limits",
        },
        Hostile {
            name: "10^6 QPs",
            greet: true,
            bytes: perf(perf_spec(json!(1_000_000), json!([65536]), json!(10)), 1),
            refused: true,
            logged: "QPs",
        },
        Hostile {
            name: "negative iterations",
            greet: true,
            bytes: request(pingpong_spec(json!(64), json!(-5))),
            refused: false,
            logged: "malformed",
        },
        Hostile {
            name: "zero iterations",
            greet: true,
            bytes: request(pingpong_spec(json!(64), json!(0))),
            refused: true,
            logged: "iterations",
        },
        Hostile {
            name: "zero size",
            greet: true,
            bytes: request(pingpong_spec(json!(0), json!(20))),
            refused: true,
            logged: "size",
        },
        Hostile {
            name: "zero QPs",
            greet: true,
            bytes: perf(perf_spec(json!(0), json!([65536]), json!(10)), 0),
            refused: true,
            logged: "refused",
        },
        Hostile {
            name: "no sizes",
            greet: true,
            bytes: perf(perf_spec(json!(1), json!([]), json!(10)), 1),
            refused: true,
            logged: "refused",
        },
        Hostile {
            name: "zero perf iterations",
            greet: true,
            bytes: perf(perf_spec(json!(1), json!([65536]), json!(0)), 1),
            refused: true,
            logged: "refused",
        },
        Hostile {
            name: "2 QPs, 1 endpoint",
            greet: true,
            bytes: perf(perf_spec(json!(2), json!([65536]), json!(10)), 1),
            refused: true,
            logged: "endpoints",
        },
        Hostile {
            name: "unknown message type",
            greet: true,
            bytes: frame(br#"{"type":"launch_missiles"}"#),
            refused: false,
            logged: "malformed",
        },
        Hostile {
            name: "round before any request",
            greet: true,
            bytes: frame_json(&json!({"type": "round", "size": 64})),
            refused: false,
            logged: "test request",
        },
        Hostile {
            name: "unknown test",
            greet: true,
            bytes: request(
                json!({"link": {"transport": "RC", "mtu": null, "cm": false},
                      "test": {"kind": "nonsense", "size": 64, "iterations": 20,
                               "rx_depth": 500, "events": false}}),
            ),
            refused: true,
            logged: "nonsense",
        },
    ];
    let mut peers = Vec::new();
    let mut problems = Vec::new();
    for c in &cases {
        let t = Instant::now();
        let mut s = TcpStream::connect((HOST, 19218)).unwrap();
        let me = s.local_addr().unwrap().to_string();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if c.greet {
            greet_as_peer(&mut s);
        }
        let _ = s.write_all(&c.bytes);
        let _ = s.shutdown(Shutdown::Write);
        // Everything the server answers, until it closes (or 10 s pass).
        let mut answers = Vec::new();
        if c.greet {
            while let Some(v) = read_frame(&mut s) {
                answers.push(v);
            }
        } else {
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        }
        let took = t.elapsed();
        eprintln!(
            "faults: hostile {}: answered {answers:?}; closed after {:.2}s",
            c.name,
            took.as_secs_f64()
        );
        if c.refused && !answers.iter().any(|a| a["type"] == "refuse") {
            problems.push(format!("{}: no refuse, got {answers:?}", c.name));
        }
        if took > Duration::from_secs(8) {
            problems.push(format!(
                "{}: the server held the connection {took:?}",
                c.name
            ));
        }
        peers.push((c, me));
    }
    let o = wait_limit(
        spawn_rdmadiag(&["pingpong", HOST, "-p", "19218", "-n", "20"]),
        LIMIT,
        "real client after the hostile ones",
    );
    if !o.status.success() {
        let _ = server.kill();
        let log = stderr(&server.wait_with_output().unwrap());
        panic!(
            "real client after the hostile ones: {}\nserver log:\n{log}",
            stderr(&o)
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        server.try_wait().unwrap().is_none(),
        "the server still runs"
    );
    server.kill().unwrap();
    let out = server.wait_with_output().unwrap();
    let log = stderr(&out);
    assert!(!log.contains("panicked"), "{log}");
    for (c, me) in &peers {
        // The last line naming the peer: its outcome (a "connected" line may come first).
        let line = log.lines().rev().find(|l| {
            l.contains(&format!("{me} "))
                || l.ends_with(me.as_str())
                || l.contains(&format!("{me}:"))
        });
        match line {
            Some(l) if l.contains(c.logged) => {}
            Some(l) => problems.push(format!("{}: logged {l:?}, wanted {:?}", c.name, c.logged)),
            None => problems.push(format!("{}: client {me} not logged", c.name)),
        }
    }
    assert!(log.contains("served"), "{log}");
    assert!(problems.is_empty(), "{problems:#?}\nserver log:\n{log}");
}
