//! A peer killed mid-transfer, or its control connection cut during the result exchange.

use super::{HOST, LIMIT, check_failed, failed_cleanly, timed_wait};
use crate::common::*;
use crate::require_rxe0;
use crate::watch::{last_error_line, spawn_watched, wait_for_line};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// Kill the real server while the client runs (`needle` on the client's -v stderr = running).
/// Returns the client's error line.
pub(super) fn server_killed_mid_run(
    case: &str,
    port: u16,
    server_args: &[&str],
    client_args: &[&str],
) -> String {
    let mut server = spawn_rdmadiag(server_args);
    wait_listening(port, LIMIT);
    let (client, rx) = spawn_watched(client_args);
    let needle = if client_args[0] == "pingpong" {
        "running"
    } else {
        "connected"
    };
    wait_for_line(&rx, needle, Duration::from_secs(1));
    server.kill().unwrap();
    let _ = server.wait();
    let t = Instant::now();
    let (o, took) = timed_wait(client, Duration::from_secs(40), t, "client after the kill");
    let line = last_error_line(&rx);
    check_failed(case, &o, took, &line);
    assert!(line.contains(&format!("10.77.0.1:{port}")), "{line}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    line
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn server_killed_mid_transfer() {
    require_rxe0();
    server_killed_mid_run(
        "mid-transfer bw, server killed",
        19204,
        &["bw", "-p", "19204"],
        &[
            "bw",
            HOST,
            "-p",
            "19204",
            "-D",
            "20s",
            "--timeout",
            "3s",
            "-v",
        ],
    );
    let line = server_killed_mid_run(
        "mid-transfer pingpong, server killed",
        19205,
        &["pingpong", "-p", "19205"],
        &[
            "pingpong",
            HOST,
            "-p",
            "19205",
            "-n",
            "100000000",
            "--timeout",
            "3s",
            "-v",
        ],
    );
    // The client names the round trip it was waiting for and why it gave up.
    assert!(
        line.contains("round trip") && (line.contains("timed out") || line.contains("RETRY_EXC")),
        "{line}"
    );
}

/// Kill the client while it runs; the server must give up within its deadline naming the client.
pub(super) fn client_killed_mid_run(
    case: &str,
    port: u16,
    server_args: &[&str],
    client_args: &[&str],
) {
    let server = spawn_rdmadiag(server_args);
    wait_listening(port, LIMIT);
    let (mut client, rx) = spawn_watched(client_args);
    let needle = if client_args[0] == "pingpong" {
        "running"
    } else {
        "connected"
    };
    wait_for_line(&rx, needle, Duration::from_secs(1));
    client.kill().unwrap();
    let _ = client.wait();
    let t = Instant::now();
    let (line, took) = failed_cleanly(
        case,
        server,
        Duration::from_secs(40),
        t,
        "server after the kill",
    );
    assert!(line.contains("10.77.0.1:"), "names the client: {line}");
    assert!(!line.contains(&format!(":{port} ")), "{line}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn client_killed_mid_transfer() {
    require_rxe0();
    client_killed_mid_run(
        "mid-transfer pingpong, client killed",
        19206,
        &["pingpong", "-p", "19206", "--timeout", "3s"],
        &["pingpong", HOST, "-p", "19206", "-n", "100000000", "-v"],
    );
    client_killed_mid_run(
        "mid-transfer bw, client killed",
        19207,
        &["bw", "-p", "19207", "--timeout", "3s"],
        &["bw", HOST, "-p", "19207", "-D", "20s", "-v"],
    );
}

/// A control-channel proxy from `listen` to the real server on `upstream` that forwards every
/// frame except the first of type `cut_server` (server → client) or `cut_client` (client →
/// server): there it closes both connections, as if that peer died. Sends the cut's instant.
fn cutting_proxy(
    listen: u16,
    upstream: u16,
    cut_server: Option<&'static str>,
    cut_client: Option<&'static str>,
) -> Receiver<Instant> {
    let l = TcpListener::bind(("0.0.0.0", listen)).unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        let s = TcpStream::connect((HOST, upstream)).unwrap();
        let ends = [c.try_clone().unwrap(), s.try_clone().unwrap()];
        let pump = move |mut from: TcpStream,
                         mut to: TcpStream,
                         cut: Option<&'static str>,
                         ends: [TcpStream; 2],
                         tx: std::sync::mpsc::Sender<Instant>| {
            let mut g = [0u8; 12];
            if from.read_exact(&mut g).is_ok() && to.write_all(&g).is_ok() {
                loop {
                    let mut len = [0u8; 4];
                    if from.read_exact(&mut len).is_err() {
                        break;
                    }
                    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
                    if from.read_exact(&mut body).is_err() {
                        break;
                    }
                    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                    if cut.is_some_and(|c| v["type"] == c) {
                        let _ = tx.send(Instant::now());
                        break;
                    }
                    if to.write_all(&len).is_err() || to.write_all(&body).is_err() {
                        break;
                    }
                }
            }
            for e in &ends {
                let _ = e.shutdown(Shutdown::Both);
            }
        };
        let (c2, s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        let ends2 = [ends[0].try_clone().unwrap(), ends[1].try_clone().unwrap()];
        let tx2 = tx.clone();
        let a = std::thread::spawn(move || pump(c2, s2, cut_client, ends2, tx2));
        pump(s, c, cut_server, ends, tx);
        let _ = a.join();
    });
    rx
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn peer_gone_during_result_exchange() {
    require_rxe0();
    // The server dies instead of answering the client's results.
    let server = spawn_rdmadiag(&["pingpong", "-p", "19209", "--timeout", "3s"]);
    wait_listening(19209, LIMIT);
    let cut = cutting_proxy(19208, 19209, Some("finished"), None);
    let client = spawn_rdmadiag(&[
        "pingpong",
        HOST,
        "-p",
        "19208",
        "-n",
        "20",
        "--timeout",
        "3s",
    ]);
    let at = cut
        .recv_timeout(LIMIT)
        .expect("the run reached its results");
    let (line, took) = failed_cleanly(
        "result exchange, client role",
        client,
        LIMIT,
        at,
        "client without the final message",
    );
    let _ = wait_limit(server, LIMIT, "server");
    assert!(
        line.contains("final message") && line.contains("10.77.0.1:19208"),
        "{line}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");

    // The client dies instead of sending its results.
    let server = spawn_rdmadiag(&["pingpong", "-p", "19211", "--timeout", "3s"]);
    wait_listening(19211, LIMIT);
    let cut = cutting_proxy(19210, 19211, None, Some("finished"));
    let client = spawn_rdmadiag(&[
        "pingpong",
        HOST,
        "-p",
        "19210",
        "-n",
        "20",
        "--timeout",
        "3s",
    ]);
    let at = cut
        .recv_timeout(LIMIT)
        .expect("the run reached its results");
    let (line, took) = failed_cleanly(
        "result exchange, server role",
        server,
        LIMIT,
        at,
        "server without the client's results",
    );
    let c = wait_limit(client, LIMIT, "client");
    assert_eq!(c.status.code(), Some(1), "client: {}", stderr(&c));
    assert!(
        line.contains("results") && line.contains("10.77.0.1:"),
        "{line}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
