//! Untrusted bytes from a control-channel peer: the frame length check, the JSON decoder, the
//! foreign-greeting description, and the ibv_rc_pingpong address parser. None may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmadiag::connect::compat_ibv::{format_dest, parse_dest};
use rdmadiag::connect::control::{MAX_FRAME, check_length, decode, describe_foreign, encode};

fuzz_target!(|data: &[u8]| {
    // A frame: u32 big-endian length, then the body.
    if data.len() >= 4 {
        let len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        if let Ok(n) = check_length(len) {
            assert!(n > 0 && n <= MAX_FRAME);
        }
    }

    // The body alone. Whatever decodes must encode and decode again. (Not compared for equality:
    // serde_json without `float_roundtrip` may move a long float in a summary by one ulp.)
    if let Ok(msg) = decode(data) {
        if let Ok(frame) = encode(&msg) {
            decode(&frame[4..]).expect("re-encoded message does not decode");
        }
    }

    // The greeting: the first 8 bytes in practice, any length here.
    let _ = describe_foreign(data);
    let _ = describe_foreign(&data[..data.len().min(8)]);

    // The ibv_rc_pingpong exchange. Whatever parses must format back to a message that parses
    // to the same address.
    if let Ok(d) = parse_dest(data) {
        let back = parse_dest(&format_dest(&d)).expect("formatted address does not parse");
        assert_eq!(back, d);
    }
});
