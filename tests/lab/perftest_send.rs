//! Lab tests of ib_send_lat over perftest's wire: `rdmadiag lat --op send --compat perftest`
//! against the guest's ib_send_lat server, and ib_send_lat's client against an rdmadiag lat
//! server (no flag). Both time the same SEND ping-pong from its two ends. TCP ports 18738-18739 (a rerun: 18744, 18747).

use crate::perftest::{against, lat_pairing, serving};
use crate::require_rxe0;

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn send_lat_against_ib_send_lat_both_roles() {
    require_rxe0();
    let v = lat_pairing(("18738", "18744"), 2, 200, |port| {
        against(
            "ib_send_lat",
            &["-s", "2", "-n", "200"],
            port,
            &["--op", "send", "-s", "2", "-n", "200"],
        )
    });
    assert_eq!(v["op"], "send", "{v}");
    lat_pairing(("18739", "18747"), 2, 200, |port| {
        serving(
            &["--op", "send", "-s", "2", "-n", "200"],
            port,
            "ib_send_lat",
            &["-s", "2", "-n", "200"],
        )
    });
}
