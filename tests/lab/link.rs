//! The lab's dummy0 link under rxe0: cut it, bring it back however a test ends, and keep
//! round trips running across it meanwhile.

use crate::watch::{spawn_watched, wait_for_line};
use std::process::{Child, Command};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

const PORT_DIR: &str = "/sys/class/infiniband/rxe0/ports/1";

/// `ip link set dummy0 STATE`, which must succeed.
pub fn ip_link(state: &str) {
    let st = Command::new("ip")
        .args(["link", "set", "dummy0", state])
        .status()
        .expect("run ip");
    assert!(st.success(), "ip link set dummy0 {state}");
}

/// Brings dummy0 back up however the test ends, and waits until rxe0 is ACTIVE with its
/// IPv4 GID again (what the next test needs).
pub struct LinkUp;

impl Drop for LinkUp {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "set", "dummy0", "up"])
            .status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            let active = std::fs::read_to_string(format!("{PORT_DIR}/state"))
                .is_ok_and(|s| s.contains("ACTIVE"));
            let gid = (0..4).any(|i| {
                std::fs::read_to_string(format!("{PORT_DIR}/gids/{i}"))
                    .is_ok_and(|g| g.trim().ends_with("ffff:0a4d:0001"))
            });
            if active && gid {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("lab: rxe0 not ACTIVE with its GID 30 s after dummy0 came back up");
    }
}

/// A loopback pingpong of endless round trips (`-v`, `--timeout 3s`), returned once both QPs are
/// connected and round trips are under way (its "running" line): cutting the link earlier hits
/// QP set-up instead.
pub fn endless_loopback_traffic() -> (Child, Receiver<String>) {
    let (child, rx) = spawn_watched(&[
        "pingpong",
        "--loopback",
        "-n",
        "100000000",
        "--timeout",
        "3s",
        "-v",
    ]);
    wait_for_line(&rx, "running", Duration::from_secs(1));
    (child, rx)
}
