//! Watch a running rdmadiag's stderr line by line: wait for a -v status line, then read its last.

use crate::common::spawn_rdmadiag;
use std::io::BufRead;
use std::process::Child;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How long to wait for an expected status line.
const WATCH_LIMIT: Duration = Duration::from_secs(60);

/// Start rdmadiag with stderr read line by line on a thread (for -v progress lines).
pub fn spawn_watched(args: &[&str]) -> (Child, Receiver<String>) {
    let mut c = spawn_rdmadiag(args);
    let err = c.stderr.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (c, rx)
}

/// Wait until a stderr line containing `needle` arrives, then let the run go on for `settle`.
pub fn wait_for_line(rx: &Receiver<String>, needle: &str, settle: Duration) -> Vec<String> {
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(WATCH_LIMIT.saturating_sub(start.elapsed()))
            .unwrap_or_else(|_| panic!("no '{needle}' line; saw {seen:?}"));
        let hit = line.contains(needle);
        seen.push(line);
        if hit {
            break;
        }
    }
    std::thread::sleep(settle);
    seen
}

/// The last stderr line of a watched run, checked like one_error_line (no panic, our prefix).
/// Call it once the process has exited: it reads until the reader thread sees end of file.
pub fn last_error_line(rx: &Receiver<String>) -> String {
    let start = Instant::now();
    let mut lines = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(5).saturating_sub(start.elapsed())) {
            Ok(line) => lines.push(line),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("stderr still open 5 s after exit: {lines:?}"),
        }
    }
    assert!(!lines.iter().any(|l| l.contains("panicked")), "{lines:?}");
    let last = lines
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .cloned()
        .unwrap_or_default();
    assert!(last.starts_with("rdmadiag: "), "{lines:?}");
    last
}

/// Wait until process `pid`'s main thread sleeps in nanosleep or clock_nanosleep (x86-64
/// syscalls 35 and 230): `ports --interval` and `check --interval` sleep nowhere else (the
/// wait of their interval, after the first reading).
pub fn wait_until_sleeping(pid: u32) {
    let start = std::time::Instant::now();
    loop {
        let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if matches!(call.split_whitespace().next(), Some("35" | "230")) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "rdmadiag {pid} never slept: /proc/{pid}/syscall reads {call:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
