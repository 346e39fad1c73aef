//! Lab tests of ib_send_lat over perftest's wire: `rdmadiag lat --op send --compat perftest`
//! against the guest's ib_send_lat server, and ib_send_lat's client against an rdmadiag lat
//! server (no flag). Both time the same SEND ping-pong from its two ends. TCP ports 18738-18739.

use crate::perftest::{against, lat_agrees, serving};
use crate::require_rxe0;

#[test]
#[ignore = "lab: needs rxe0; run by scripts/test inside the Soft-RoCE lab"]
fn send_lat_against_ib_send_lat_both_roles() {
    require_rxe0();
    let (v, out) = against(
        "ib_send_lat",
        &["-s", "2", "-n", "200"],
        "18738",
        &["--op", "send", "-s", "2", "-n", "200"],
    );
    assert_eq!(v["op"], "send", "{v}");
    assert_eq!(v["lat"][0]["iterations"], 200, "{v}");
    lat_agrees(&v, &out, 2, 200);
    let (v, out) = serving(
        &["--op", "send", "-s", "2", "-n", "200"],
        "18739",
        "ib_send_lat",
        &["-s", "2", "-n", "200"],
    );
    lat_agrees(&v, &out, 2, 200);
}
