//! Every key of every subcommand's real JSON output is documented in docs/json.md.

use crate::common::*;
use crate::require_rxe0;
use std::collections::BTreeSet;

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn every_json_key_is_documented() {
    require_rxe0();
    let documented = documented_json_names();
    let runs: &[&[&str]] = &[
        &["devices", "--json"],
        &["ports", "-v", "--counters", "--json"],
        &["ports", "--counters", "--interval", "1s", "--json"],
        &["pingpong", "--loopback", "-n", "20", "--counters", "--json"],
        &[
            "bw",
            "--loopback",
            "--op",
            "send",
            "-b",
            "-n",
            "50",
            "-s",
            "4K",
            "--vs-tcp",
            "--counters",
            "--expect-bw",
            "1Mb/s",
            "--json",
        ],
        &[
            "lat",
            "--loopback",
            "-n",
            "50",
            "--histogram",
            "--vs-tcp",
            "--expect-lat",
            "10s",
            "--json",
        ],
        &["write", "--loopback", "-n", "3", "-s", "4K", "--json"],
        &["read", "--loopback", "-n", "3", "-s", "4K", "--json"],
        &[
            "check",
            "--interval",
            "1s",
            "--expect-gid",
            "--loopback-bw",
            "1Mb/s",
            "--loopback-lat",
            "10s",
            "--json",
        ],
    ];
    let mut undocumented = Vec::new();
    for args in runs {
        let v = rdmadiag_json(args);
        let mut keys = BTreeSet::new();
        json_keys(&v, &mut keys);
        assert!(keys.len() > 5, "{args:?} printed too little: {v}");
        for k in keys.difference(&documented) {
            undocumented.push(format!("{} -> {k}", args[0]));
        }
    }
    assert!(
        undocumented.is_empty(),
        "fields missing from docs/json.md: {undocumented:?}"
    );
}
