//! Peers speaking other control-protocol versions are named, not misread.

use super::wire::{fake_server, greeting};
use super::{HOST, LIMIT, failed_cleanly};
use crate::common::*;
use crate::require_rxe0;
use rdmadiag::connect::control::PROTOCOL_VERSION;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn other_protocol_versions_are_named() {
    require_rxe0();
    let (ours, newer) = (PROTOCOL_VERSION, PROTOCOL_VERSION + 1);
    for (port, version) in [(19215u16, 0u32), (19216, newer)] {
        let server = spawn_rdmadiag(&["pingpong", "-p", &port.to_string(), "--timeout", "3s"]);
        wait_listening(port, LIMIT);
        let mut peer = TcpStream::connect((HOST, port)).unwrap();
        peer.write_all(&greeting(version)).unwrap();
        let t = Instant::now();
        let (line, _) = failed_cleanly(
            &format!("peer speaks version {version}"),
            server,
            LIMIT,
            t,
            "server facing another version",
        );
        drop(peer);
        assert!(
            line.contains(&format!("version {ours}"))
                && line.contains(&format!("version {version}")),
            "{line}"
        );
    }
    let fake = fake_server(19217, move |mut s| {
        s.write_all(&greeting(newer)).unwrap();
        std::thread::sleep(Duration::from_secs(1));
    });
    let client = spawn_rdmadiag(&["pingpong", HOST, "-p", "19217", "--timeout", "3s"]);
    let t = fake.accepted_at();
    let (line, _) = failed_cleanly(
        "server speaks a newer version",
        client,
        LIMIT,
        t,
        "client of a newer server",
    );
    fake.join();
    assert!(
        line.contains(&format!("version {ours}"))
            && line.contains(&format!("version {newer}"))
            && line.contains("10.77.0.1:19217"),
        "{line}"
    );
}
