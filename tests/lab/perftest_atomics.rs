//! Lab tests of atomics over perftest's wire: `rdmadiag bw`/`lat --compat perftest --op
//! atomic-*` against the guest's ib_atomic_bw and ib_atomic_lat servers, those perftest clients
//! against rdmadiag servers (no flag: told apart by their first bytes), and a server whose
//! buffer was disturbed (the `test-hooks` build's RDMADIAG_TEST_ATOMIC_TARGET) exiting 4 after
//! a perftest client's adds. perftest fills its targets with random bytes: our client's
//! verification starts from what it reads there. TCP ports 18752-18758.

use crate::common::*;
use crate::perftest::{HOST, LIMIT, against, agree, assert_stepped, serving};
use crate::require_rxe0;
use std::process::Output;

/// perftest's -A for each of our ops.
const OPS: [(&str, &str); 2] = [
    ("atomic-fadd", "FETCH_AND_ADD"),
    ("atomic-cswap", "CMP_AND_SWAP"),
];

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn atomics_against_ib_atomic_bw_and_ib_atomic_lat_servers() {
    require_rxe0();
    for (op, a) in OPS {
        // bw: ib_atomic_bw's server prints the report we send it.
        let (v, out) = against(
            "ib_atomic_bw",
            &["-A", a],
            "18752",
            &["--op", op, "-n", "200"],
        );
        assert_eq!(v["op"], op, "{v}");
        agree(&v, &out, 8, 200);
        // Stepped through the server's cycle buffer; every word it stepped through checked.
        assert_stepped(&v, 8);
        // lat: every returned value checked against the chain from perftest's random target.
        let (v, _) = against(
            "ib_atomic_lat",
            &["-A", a, "-n", "200"],
            "18753",
            &["--op", op, "-n", "200"],
        );
        assert_eq!(v["compat"], "perftest 6.06", "{v}");
        assert_eq!(v["lat"][0]["size"], 8, "{v}");
        assert_eq!(v["lat"][0]["iterations"], 200, "{v}");
        assert!(
            v["lat"][0]["median_us"].as_f64().is_some_and(|m| m > 0.0),
            "{v}"
        );
    }
}

/// Start `rdmadiag lat` with `server` flags (and `env`), run ib_atomic_lat against it.
fn atomic_lat_client(server: &[&str], env: &[(&str, &str)], a: &str) -> (Output, Output) {
    let mut ours = vec!["lat", "-p", "18755", "-n", "200"];
    ours.extend_from_slice(server);
    let srv = spawn_rdmadiag_env(&ours, env);
    wait_listening(18755, LIMIT);
    let c = wait_limit(
        spawn_cmd(
            "ib_atomic_lat",
            &["-d", crate::DEV, "-p", "18755", "-A", a, "-n", "200", HOST],
        ),
        LIMIT,
        "ib_atomic_lat client",
    );
    (c, wait_limit(srv, LIMIT, "rdmadiag lat server"))
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn perftest_atomic_clients_against_rdmadiag_servers() {
    require_rxe0();
    for (op, a) in OPS {
        // The server checks the sum of its buffer against the client's reported count.
        let (v, out) = serving(
            &["--op", op],
            "18754",
            "ib_atomic_bw",
            &["-A", a, "-n", "200"],
        );
        agree(&v, &out, 8, 200);
        let (c, s) = atomic_lat_client(&["--op", op], &[], a);
        assert!(s.status.success(), "{}\n{}", stderr(&s), stdout(&c));
        assert!(c.status.success(), "{}{}", stdout(&c), stderr(&c));
    }
}

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn a_disturbed_target_under_a_perftest_client_exits_4() {
    require_rxe0();
    let env = [("RDMADIAG_TEST_ATOMIC_TARGET", "1000")];
    // bw: 200 adds onto 1000 sum to 1200, where the client's report says 200.
    let srv = spawn_rdmadiag_env(&["bw", "-p", "18756", "--op", "atomic-fadd"], &env);
    wait_listening(18756, LIMIT);
    let c = wait_limit(
        spawn_cmd(
            "ib_atomic_bw",
            &[
                "-d",
                crate::DEV,
                "-p",
                "18756",
                "-A",
                "FETCH_AND_ADD",
                "-n",
                "200",
                HOST,
            ],
        ),
        LIMIT,
        "ib_atomic_bw client",
    );
    let s = wait_limit(srv, LIMIT, "rdmadiag bw server");
    assert!(c.status.success(), "{}{}", stdout(&c), stderr(&c));
    assert_eq!(s.status.code(), Some(4), "{}", stderr(&s));
    let line = one_error_line(&s);
    assert!(
        line.contains("summed to 1200") && line.contains("expected 200"),
        "{line}"
    );
    // lat compare-and-swap (0 for 0): the target must stay 0; it held 1000.
    let (c, s) = atomic_lat_client(&["--op", "atomic-cswap"], &env, "CMP_AND_SWAP");
    assert!(c.status.success(), "{}{}", stdout(&c), stderr(&c));
    assert_eq!(s.status.code(), Some(4), "{}", stderr(&s));
    let line = one_error_line(&s);
    assert!(
        line.contains("summed to 1000") && line.contains("expected 0"),
        "{line}"
    );
}
