//! bench/lib/states.py, which the bench reports use to split rounds by the lab guest's two
//! states: it must find two states where there are two, count each tool's rounds in each, and
//! find none in one noisy state.

use std::process::Command;

/// Run `code` with bench/lib on the path; its stdout.
fn python(code: &str) -> String {
    let out = Command::new("python3")
        .env(
            "PYTHONPATH",
            concat!(env!("CARGO_MANIFEST_DIR"), "/bench/lib"),
        )
        .args(["-c", code])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// 16 rounds of each tool's lat WRITE medians (us) from one lab run (2026-12-07): rdmadiag 4
/// rounds in the slow state, ib_write_lat 6.
#[test]
fn two_states_are_found_and_counted() {
    let got = python(
        "from states import state_split\n\
         ours = [9.02, 8.85, 11.74, 12.68, 9.04, 13.99, 8.54, 8.36, 8.72, 9.42, 8.46, 12.50, 8.78, 8.54, 8.46, 8.62]\n\
         theirs = [8.74, 8.58, 8.84, 14.18, 12.14, 10.09, 8.35, 8.57, 14.19, 11.02, 12.12, 8.97, 8.91, 8.45, 8.71, 12.54]\n\
         cut, (of, os_), (tf, ts) = state_split(ours, theirs)\n\
         print(round(cut, 1), len(of), len(os_), len(tf), len(ts))",
    );
    assert_eq!(got, "10.5 12 4 10 6");
}

/// One state with the guest's usual few-percent noise: no split.
#[test]
fn one_noisy_state_is_not_split() {
    let got = python(
        "from states import state_split\n\
         ours = [9.0, 9.3, 8.8, 9.1, 9.6, 8.9, 9.2, 9.4, 8.7, 9.0]\n\
         theirs = [9.1, 8.9, 9.5, 9.0, 8.8, 9.3, 9.2, 8.6, 9.4, 9.1]\n\
         print(state_split(ours, theirs))",
    );
    assert_eq!(got, "None");
}
