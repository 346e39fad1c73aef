//! Peers speaking other control-protocol versions are named, not misread.

use super::wire::{fake_server, greeting};
use super::{HOST, LIMIT, failed_cleanly};
use crate::common::*;
use crate::require_rxe0;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn other_protocol_versions_are_named() {
    require_rxe0();
    for (port, version) in [(19215u16, 0u32), (19216, 2)] {
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
            line.contains("version 1") && line.contains(&format!("version {version}")),
            "{line}"
        );
    }
    let fake = fake_server(19217, |mut s| {
        s.write_all(&greeting(2)).unwrap();
        std::thread::sleep(Duration::from_secs(1));
    });
    let client = spawn_rdmadiag(&["pingpong", HOST, "-p", "19217", "--timeout", "3s"]);
    let t = fake.accepted_at();
    let (line, _) = failed_cleanly(
        "server speaks version 2",
        client,
        LIMIT,
        t,
        "client of a version-2 server",
    );
    fake.join();
    assert!(
        line.contains("version 1")
            && line.contains("version 2")
            && line.contains("10.77.0.1:19217"),
        "{line}"
    );
}
