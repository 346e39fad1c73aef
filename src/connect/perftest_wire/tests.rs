//! The bytes of perftest's exchange, written out literally (the expected strings and layouts
//! were produced independently of this code: Python's printf-style formatting of perftest's
//! formats, `struct.pack` of its layouts).

use super::*;
use crate::ib::Gid;

/// Bytes from hex digits (spaces ignored), for literal expectations.
fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn v(text: &str) -> Version {
    text.parse().unwrap()
}

fn padded(text: &[u8]) -> [u8; VERSION_LEN] {
    let mut m = [0u8; VERSION_LEN];
    m[..text.len()].copy_from_slice(text);
    m
}

#[test]
fn the_version_message_is_nul_padded_ascii() {
    assert_eq!(
        &Version::new(6, 6).encode(),
        b"6.06\0\0\0\0\0\0\0\0\0\0\0\0"
    );
    assert_eq!(
        &Version::new(5, 70).encode(),
        b"5.70\0\0\0\0\0\0\0\0\0\0\0\0"
    );
    for text in ["6.06", "5.70", "6.28", "6.29", "10.01"] {
        let m = Version::decode(&padded(text.as_bytes())).unwrap();
        assert_eq!(m.to_string(), text);
        assert_eq!(Version::decode(&m.encode()).unwrap(), m);
    }
    // What follows the NUL is ignored; so are a suffix and digits past the hundredths.
    let mut m = padded(b"6.06");
    m[10] = b'x';
    assert_eq!(Version::decode(&m).unwrap(), Version::new(6, 6));
    assert_eq!(v("6.06-mlnx"), Version::new(6, 6));
    assert_eq!(v("5.705"), Version::new(5, 70));
    // As atof reads it: "5.1" is 5.10, and "5.9" is above "5.10".
    assert_eq!(v("5.1"), Version::new(5, 10));
    assert!(v("5.9") > v("5.10"));
    assert!(v("6.06") > v("5.70") && v("6.28") > v("6.27") && v("10.0") > v("9.99"));
}

#[test]
fn a_garbage_version_is_refused_saying_what_came() {
    for bad in [
        &b""[..],
        b"hello",
        b"6",
        b"6.",
        b".06",
        b"x.06",
        b"6.x6",
        b"1234.5",
        b"-6.06",
        b"6 .06",
        b"6.06 ",
        b"\xff.06",
    ] {
        let err = Version::decode(&padded(bad)).unwrap_err().to_string();
        assert!(err.contains("the peer"), "{bad:?}: {err}");
    }
    let err = Version::decode(&padded(b"hello")).unwrap_err().to_string();
    assert!(err.contains("\"hello\""), "{err}");
    for len in [0, 15, 17, 59] {
        let err = Version::decode(&vec![b'6'; len]).unwrap_err().to_string();
        assert!(err.contains(&format!("is {len}")), "{err}");
    }
    assert!(Version::decode(&[0xff; VERSION_LEN]).is_err());
}

#[test]
fn the_versions_gate_each_step() {
    assert_eq!(Version::common(v("6.29"), v("6.06")), v("6.06"));
    assert_eq!(Version::common(v("5.70"), v("6.28")), v("5.70"));

    assert!(v("5.70").check_accepted().is_ok());
    assert!(v("6.29").check_accepted().is_ok());
    let err = v("5.69").check_accepted().unwrap_err().to_string();
    assert!(err.contains("5.69") && err.contains("5.70"), "{err}");

    assert!(!v("5.31").exchanges_sys_data());
    assert!(v("5.32").exchanges_sys_data() && v("6.06").exchanges_sys_data());

    assert_eq!(v("5.09").mtu_message_len(), None);
    assert_eq!(v("5.1").mtu_message_len(), Some(4));
    assert_eq!(v("5.30").mtu_message_len(), Some(4));
    assert_eq!(v("5.31").mtu_message_len(), Some(2));
    assert_eq!(v("6.06").mtu_message_len(), Some(2));

    assert_eq!(v("5.32").report_iters_len(), 4);
    assert_eq!(v("5.33").report_iters_len(), 8);
    assert_eq!(v("6.06").report_iters_len(), 8);

    assert!(!v("6.27").negotiates() && !v("6.06").negotiates());
    assert!(v("6.28").negotiates() && v("6.29").negotiates());
    assert!(!Version::common(v("6.29"), v("6.27")).negotiates());
}

#[test]
fn system_data_is_two_big_endian_ints() {
    let ours = SysData {
        cycle_buffer: 4096,
        cache_line_size: 64,
    };
    assert_eq!(ours.encode(), [0, 0, 0x10, 0, 0, 0, 0, 0x40]);
    assert_eq!(ours.messages(), [[0, 0, 0x10, 0], [0, 0, 0, 0x40]]);
    assert_eq!(SysData::decode(&ours.encode()).unwrap(), ours);
    let theirs = SysData::decode(&[0, 1, 0, 0, 0, 0, 0, 0x20]).unwrap();
    assert_eq!(
        theirs,
        SysData {
            cycle_buffer: 65536,
            cache_line_size: 32
        }
    );
    assert_eq!(
        ours.merge(theirs),
        SysData {
            cycle_buffer: 65536,
            cache_line_size: 64
        }
    );
    for bad in [&[0u8; 7][..], &[0; 9], &[]] {
        assert!(SysData::decode(bad).is_err());
    }
    let err = SysData::decode(&[0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 64])
        .unwrap_err()
        .to_string();
    assert!(err.contains("cycle_buffer is -5"), "{err}");
    let err = SysData::decode(&[0, 0, 16, 0, 0, 0, 0, 0])
        .unwrap_err()
        .to_string();
    assert!(err.contains("cache_line_size is 0"), "{err}");
}

#[test]
fn the_mtu_message_is_a_digit_and_a_nul() {
    assert_eq!(encode_mtu(Mtu(1024), 2).unwrap(), b"3\0");
    assert_eq!(encode_mtu(Mtu(4096), 2).unwrap(), b"5\0");
    assert_eq!(encode_mtu(Mtu(256), 4).unwrap(), b"1\0\0\0");
    assert!(encode_mtu(Mtu(1500), 2).is_err());
    assert!(encode_mtu(Mtu(1024), 3).is_err());
    let good: [(&[u8], u32); 6] = [
        (b"1\0", 256),
        (b"2\0", 512),
        (b"3\0", 1024),
        (b"4\0", 2048),
        (b"5\0", 4096),
        // An old peer's 4 bytes: what follows the NUL is its buffer's leftovers.
        (b"4\0\xaa\x55", 2048),
    ];
    for (msg, mtu) in good {
        assert_eq!(decode_mtu(msg).unwrap(), Mtu(mtu), "{msg:?}");
    }
    for bad in [
        &b"0\0"[..],
        b"6\0",
        b"9\0",
        b"a\0",
        b"33",
        b"3\x01",
        b"\0\0",
        b"",
        b"3",
        b"3\0\0",
        b"3\0\0\0\0",
    ] {
        assert!(decode_mtu(bad).is_err(), "{bad:?}");
    }
    let err = decode_mtu(b"7\0").unwrap_err().to_string();
    assert!(err.contains("\"7\\0\""), "{err}");
}

fn key(gid: Option<Gid>) -> PerftestKey {
    PerftestKey {
        lid: 0x1,
        out_reads: 0x10,
        qpn: 0x123456,
        psn: 0xabcdef,
        rkey: 0xdeadbeef,
        vaddr: 0x7f12_3456_7000,
        gid,
        srqn: 0,
    }
}

const KEY: &[u8; KEY_LEN] = b"0001:0010:123456:abcdef:deadbeef:00007f1234567000:00000000\0";
const KEY_GID: &[u8; KEY_LEN_GID] = b"0001:0010:123456:abcdef:deadbeef:00007f1234567000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:01:0000002a:\0";

fn roce_gid() -> Gid {
    "::ffff:10.77.0.1".parse().unwrap()
}

#[test]
fn the_key_message_without_gid_is_perftests_59_bytes() {
    let k = key(None);
    assert_eq!(k.encode(), KEY);
    assert_eq!(k.wire_len(), 59);
    assert_eq!(PerftestKey::decode(KEY).unwrap(), k);
    // qpn and psn go out as their 24 bits.
    let wide = PerftestKey {
        qpn: 0x0112_3456,
        psn: 0xffab_cdef,
        ..k
    };
    assert_eq!(wide.encode(), KEY);
    let max = PerftestKey {
        lid: 0xffff,
        out_reads: 0xffff,
        qpn: 0xff_ffff,
        psn: 0xff_ffff,
        rkey: u32::MAX,
        vaddr: u64::MAX,
        gid: None,
        srqn: u32::MAX,
    };
    assert_eq!(PerftestKey::decode(&max.encode()).unwrap(), max);
    // sscanf takes either case.
    let upper: Vec<u8> = KEY.to_ascii_uppercase();
    assert_eq!(PerftestKey::decode(&upper).unwrap(), k);
}

#[test]
fn the_key_message_with_gid_is_perftests_108_bytes() {
    let k = PerftestKey {
        srqn: 0x2a,
        ..key(Some(roce_gid()))
    };
    assert_eq!(k.encode(), KEY_GID);
    assert_eq!(k.wire_len(), 108);
    // The separators: a ':' after every GID byte, and one after srqn before the NUL.
    for i in 0..16 {
        assert_eq!(KEY_GID[52 + 3 * i], b':');
    }
    assert_eq!(&KEY_GID[98..108], b"0000002a:\0");
    assert_eq!(PerftestKey::decode(KEY_GID).unwrap(), k);
}

#[test]
fn a_bad_key_message_names_the_bad_field() {
    let cases: [(&[u8], usize, u8, &str); 10] = [
        (KEY, 0, b'g', "lid"),
        (KEY, 4, b'-', "after lid"),
        (KEY, 8, b' ', "out_reads"),
        (KEY, 10, b'x', "qpn"),
        (KEY, 22, b':', "psn"),
        (KEY, 24, 0, "rkey"),
        (KEY, 48, b'z', "vaddr"),
        (KEY, 57, b':', "srqn"),
        (KEY_GID, 59, b'q', "GID byte 3"),
        (KEY_GID, 106, 0, "after srqn"),
    ];
    for (good, at, byte, field) in cases {
        let mut bad = good.to_vec();
        bad[at] = byte;
        let err = PerftestKey::decode(&bad).unwrap_err().to_string();
        assert!(err.contains(field), "byte {at} = {byte:?}: {err}");
    }
    for (good, at) in [(&KEY[..], 58), (&KEY_GID[..], 107)] {
        let mut bad = good.to_vec();
        bad[at] = b'0';
        let err = PerftestKey::decode(&bad).unwrap_err().to_string();
        assert!(err.contains("NUL"), "{err}");
    }
    for len in [0, 1, 58, 60, 107, 109, 125] {
        let err = PerftestKey::decode(&vec![b'0'; len])
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("is {len}")), "{err}");
    }
}

#[test]
fn no_corrupted_key_message_panics() {
    for good in [&KEY[..], &KEY_GID[..]] {
        for at in 0..good.len() {
            for byte in [0, b':', b'0', b'f', b'G', 0x80, 0xff] {
                let mut m = good.to_vec();
                m[at] = byte;
                // Either a key or an error; a key only where the byte is still a hex digit
                // in a hex field.
                if let Ok(k) = PerftestKey::decode(&m) {
                    assert!(byte.is_ascii_hexdigit() || m == good, "byte {at} = {byte}");
                    assert_eq!(k.gid.is_some(), good.len() == KEY_LEN_GID);
                }
            }
        }
        for byte in [0, b':', 0xff] {
            assert!(PerftestKey::decode(&vec![byte; good.len()]).is_err());
        }
    }
}

fn report() -> BwReport {
    BwReport {
        size: 65536,
        iters: 5000,
        bw_peak: 1234.5,
        bw_avg: 1000.25,
        msg_rate: 0.5,
    }
}

#[test]
fn the_bw_report_is_big_endian_integers_and_doubles() {
    let r = report();
    let bytes = r.encode(v("6.06")).unwrap();
    assert_eq!(
        bytes,
        unhex(
            "0000000000010000 0000000000001388 40934a0000000000 408f420000000000 \
             3fe0000000000000"
        )
    );
    assert_eq!(BwReport::wire_len(v("6.06")), 40);
    let lens = message_lens(&r, v("5.70"));
    assert_eq!(lens, [8, 8, 8, 8, 8]);
    assert_eq!(BwReport::decode(&bytes, v("6.06")).unwrap(), r);

    // Before 5.33 the iteration count is a u32.
    let old = r.encode(v("5.32")).unwrap();
    assert_eq!(
        old,
        unhex("0000000000010000 00001388 40934a0000000000 408f420000000000 3fe0000000000000")
    );
    let lens = message_lens(&r, v("5.32"));
    assert_eq!(lens, [8, 4, 8, 8, 8]);
    assert_eq!(BwReport::decode(&old, v("5.32")).unwrap(), r);
    let huge = BwReport {
        iters: 1 << 32,
        ..r
    };
    assert!(huge.encode(v("5.32")).is_err());
    assert!(huge.encode(v("5.33")).is_ok());

    for len in [0, 36, 39, 41] {
        let err = BwReport::decode(&vec![0; len], v("6.06"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("is {len}")), "{err}");
    }
    assert!(BwReport::decode(&bytes, v("5.32")).is_err());
    assert_eq!(ReportFmt::MBps.bytes_per_sec(), 1_048_576.0);
    assert_eq!(ReportFmt::Gbps.bytes_per_sec(), 125_000_000.0);
}

/// `ib_write_bw -s 65536 -n 5000 --report_gbits` would differ only in report_fmt.
fn write_bw() -> Negotiation {
    Negotiation {
        test_method: TestMethod::Regular,
        connection_type: ConnectionType::Rc,
        verb: Verb::Write,
        tst: TestKind::Bw,
        atomic_type: AtomicType::FetchAndAdd,
        test_type: Limit::Iterations,
        report_fmt: ReportFmt::MBps,
        size: 65536,
        iters: 5000,
        aes_xts: false,
        num_of_qps: 1,
        duration: 5,
        use_rdma_cm: false,
        use_write_with_imm: false,
        no_enhanced_reorder: true,
        sig_offload: false,
        data_validation: false,
        max_qp_rd_atom: 16,
        mlx5dv_comp_mask: Some(0x0102_0304_0506_0708),
    }
}

#[test]
fn the_negotiation_struct_lies_at_perftests_offsets() {
    let n = write_bw();
    let bytes = n.encode();
    assert_eq!(bytes.len(), NEGOTIATION_LEN);
    // 0..80, from struct.pack(">7i4xQQ8i", ...) of the same values.
    assert_eq!(
        bytes[..80],
        unhex(
            "00000000 00000000 00000002 00000001 00000001 00000000 00000001 00000000 \
             0000000000010000 0000000000001388 \
             00000000 00000001 00000005 00000000 00000000 00000001 00000000 00000000"
        )[..]
    );
    // Field by field, where perftest's struct puts it.
    assert_eq!(bytes[8..12], [0, 0, 0, 2], "verb WRITE at 8");
    assert_eq!(bytes[24..28], [0, 0, 0, 1], "report_fmt MBS at 24");
    assert_eq!(bytes[28..32], [0; 4], "padding at 28");
    assert_eq!(bytes[32..40], [0, 0, 0, 0, 0, 1, 0, 0], "size at 32");
    assert_eq!(bytes[40..48], [0, 0, 0, 0, 0, 0, 0x13, 0x88], "iters at 40");
    assert_eq!(bytes[52..56], [0, 0, 0, 1], "num_of_qps at 52");
    assert_eq!(bytes[56..60], [0, 0, 0, 5], "duration at 56");
    assert_eq!(bytes[68..72], [0, 0, 0, 1], "no_enhanced_reorder at 68");
    // The device attributes: host-endian, max_qp_rd_atom at 80 + 144, the rest zero.
    assert_eq!(MAX_QP_RD_ATOM_AT, 224);
    assert_eq!(bytes[224..228], 16i32.to_ne_bytes());
    assert!(
        bytes[80..224]
            .iter()
            .chain(&bytes[228..312])
            .all(|&b| b == 0)
    );
    assert_eq!(
        bytes[312..],
        [1, 2, 3, 4, 5, 6, 7, 8],
        "mlx5dv_comp_mask at 312"
    );
    assert_eq!(Negotiation::decode(&bytes).unwrap(), n);

    let plain = Negotiation {
        mlx5dv_comp_mask: None,
        data_validation: true,
        ..n
    };
    let bytes = plain.encode();
    assert_eq!(bytes.len(), NEGOTIATION_LEN_NO_MLX5DV);
    assert_eq!(bytes[76..80], [0, 0, 0, 1], "data_validation at 76");
    assert_eq!(Negotiation::decode(&bytes).unwrap(), plain);
}

/// The device-attribute offsets against rdma-core's struct as rdma-sys binds it.
#[test]
fn the_device_attributes_are_rdma_cores_struct() {
    assert_eq!(
        std::mem::size_of::<rdma_sys::ibv_device_attr>(),
        DEVICE_ATTR_LEN
    );
    assert_eq!(
        DEVICE_ATTR_AT + std::mem::offset_of!(rdma_sys::ibv_device_attr, max_qp_rd_atom),
        MAX_QP_RD_ATOM_AT
    );
    assert_eq!(DEVICE_ATTR_AT + DEVICE_ATTR_LEN, NEGOTIATION_LEN_NO_MLX5DV);
    assert_eq!(MLX5DV_COMP_MASK_AT + 8, NEGOTIATION_LEN);
}

#[test]
fn a_bad_negotiation_is_refused_naming_the_field() {
    let good = write_bw().encode();
    for (at, value, field) in [
        (0, 3, "test_method"),
        (4, 9, "connection_type"),
        (8, 6, "verb"),
        (12, 4, "tst"),
        (16, 2, "atomicType"),
        (20, 2, "test_type"),
        (24, 2, "report_fmt"),
        (48, 2, "aes_xts"),
        (60, -1, "use_rdma_cm"),
        (76, 7, "data_validation"),
    ] {
        let mut bad = good.clone();
        bad[at..at + 4].copy_from_slice(&i32::to_be_bytes(value));
        let err = Negotiation::decode(&bad).unwrap_err().to_string();
        assert!(
            err.contains(field) && err.contains(&value.to_string()),
            "{err}"
        );
    }
    for len in [0, 311, 313, 319, 321] {
        let err = Negotiation::decode(&vec![0; len]).unwrap_err().to_string();
        assert!(err.contains(&format!("is {len}")), "{err}");
    }
    assert!(Negotiation::decode(&[0xff; NEGOTIATION_LEN]).is_err());
    // All zeros is a valid struct: RUN_REGULAR, RC, SEND, LAT, ...
    let zero = Negotiation::decode(&[0; NEGOTIATION_LEN_NO_MLX5DV]).unwrap();
    assert_eq!((zero.verb, zero.tst), (Verb::Send, TestKind::Lat));
}

#[test]
fn mismatches_name_each_setting_with_both_values() {
    let ours = write_bw();
    assert!(mismatches(&ours, &ours).is_empty());
    // What perftest does not compare: the device and the mask.
    let other_device = Negotiation {
        max_qp_rd_atom: 1,
        mlx5dv_comp_mask: None,
        ..ours
    };
    assert!(mismatches(&ours, &other_device).is_empty());
    let theirs = Negotiation {
        connection_type: ConnectionType::Ud,
        verb: Verb::Read,
        size: 1024,
        num_of_qps: 4,
        data_validation: true,
        ..ours
    };
    assert_eq!(
        mismatches(&ours, &theirs),
        [
            "connection_type mismatch: ours RC, the perftest peer's UD",
            "verb mismatch: ours WRITE, the perftest peer's READ",
            "size mismatch: ours 65536, the perftest peer's 1024",
            "num_of_qps mismatch: ours 1, the perftest peer's 4",
            "data_validation mismatch: ours OFF, the perftest peer's ON",
        ]
    );
}

#[test]
fn the_peers_device_lowers_our_outstanding_reads() {
    let peer = write_bw();
    assert_eq!(peer.clamp_out_reads(128), 16);
    assert_eq!(peer.clamp_out_reads(8), 8);
    let dc = Negotiation {
        connection_type: ConnectionType::Dc,
        ..peer
    };
    assert_eq!(dc.clamp_out_reads(128), 128);
}

/// The lengths of the messages `r` is sent in to a peer of version `common`.
fn message_lens(r: &BwReport, common: Version) -> Vec<usize> {
    r.messages(common).unwrap().iter().map(Vec::len).collect()
}
