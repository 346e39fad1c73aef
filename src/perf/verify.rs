//! Patterned buffers for the WRITE/READ diagnostics, and byte-by-byte verification.

/// The byte at `offset` of the pattern for `seed`: differs between offsets and between seeds.
pub fn pattern_byte(seed: u64, offset: usize) -> u8 {
    let x = (offset as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(seed.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    (x >> 56) as u8 ^ (offset as u8)
}

pub fn fill(buf: &mut [u8], seed: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(seed, i);
    }
}

/// The pattern seed of transfer `iteration` (0-based) of `size`-byte transfers: every transfer
/// of a run carries different bytes, so one that never arrives cannot pass for another.
pub fn seed(size: u32, iteration: u64) -> u64 {
    ((size as u64) << 40) ^ (iteration + 1)
}

pub use crate::connect::control::Mismatch;

/// The first byte of `buf` that differs from the pattern of `seed`, and how many do (the
/// transfer number is the caller's to fill in).
pub fn verify(buf: &[u8], seed: u64) -> Option<Mismatch> {
    let mut first: Option<Mismatch> = None;
    let mut bad = 0u64;
    for (i, &b) in buf.iter().enumerate() {
        let want = pattern_byte(seed, i);
        if b != want {
            bad += 1;
            first.get_or_insert(Mismatch {
                transfer: 0,
                offset: i as u64,
                expected: want,
                actual: b,
                bad_bytes: 0,
            });
        }
    }
    first.map(|m| Mismatch {
        bad_bytes: bad,
        ..m
    })
}

/// Verify `count` slots of `size` bytes, slot j holding transfer `first + j`: the first
/// transfer that did not arrive as sent, if any.
pub fn verify_slots(buf: &[u8], size: u32, first: u64, count: u64) -> Option<Mismatch> {
    (0..count).find_map(|j| {
        let at = j as usize * size as usize;
        let slot = buf.get(at..at + size as usize)?;
        verify(slot, seed(size, first + j)).map(|m| Mismatch {
            transfer: first + j + 1,
            ..m
        })
    })
}

/// Fill `count` slots of `size` bytes with the patterns of transfers `first..first + count`.
pub fn fill_slots(buf: &mut [u8], size: u32, first: u64, count: u64) {
    for j in 0..count {
        let at = j as usize * size as usize;
        if let Some(slot) = buf.get_mut(at..at + size as usize) {
            fill(slot, seed(size, first + j));
        }
    }
}

/// Test-only hook, compiled only with the `test-hooks` feature (the lab's build):
/// `RDMADIAG_TEST_DROP_TRANSFER=N` makes the client leave transfer N (1-based) unposted, as if
/// it were lost on the way, so the lab can prove that data that never arrived is reported.
#[cfg(feature = "test-hooks")]
pub fn drop_for_test() -> Option<u64> {
    std::env::var("RDMADIAG_TEST_DROP_TRANSFER")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .and_then(|n| n.checked_sub(1))
}

/// Without the `test-hooks` feature (every shipped build) nothing is ever dropped.
#[cfg(not(feature = "test-hooks"))]
pub fn drop_for_test() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_verify_and_mismatches_are_located() {
        let mut b = vec![0u8; 4096];
        fill(&mut b, 7);
        assert_eq!(verify(&b, 7), None);
        assert!(verify(&b, 8).is_some(), "another seed is another pattern");
        b[1000] ^= 0x5a;
        b[3000] ^= 0x01;
        let m = verify(&b, 7).unwrap();
        assert_eq!((m.offset, m.bad_bytes), (1000, 2));
        assert_eq!(m.expected, pattern_byte(7, 1000));
        assert_eq!(m.actual, pattern_byte(7, 1000) ^ 0x5a);
        assert!(m.to_string().contains("offset 1000"));
        let distinct: std::collections::HashSet<u8> =
            (0..256).map(|i| pattern_byte(1, i)).collect();
        assert!(
            distinct.len() > 100,
            "the pattern is not trivially periodic"
        );
    }

    #[test]
    fn every_transfer_has_its_own_pattern_and_a_missing_one_is_named() {
        let (size, count) = (64u32, 8u64);
        let mut b = vec![0u8; (size as u64 * count) as usize];
        fill_slots(&mut b, size, 100, count);
        assert_eq!(verify_slots(&b, size, 100, count), None);
        // Slot 3 still holds transfer 99's bytes (a stale transfer), or nothing at all.
        let stale = b.clone();
        fill(&mut b[3 * 64..4 * 64], seed(size, 99));
        assert_eq!(verify_slots(&b, size, 100, count).unwrap().transfer, 104);
        let mut never = stale;
        never[5 * 64..6 * 64].fill(0);
        let m = verify_slots(&never, size, 100, count).unwrap();
        assert_eq!(m.transfer, 106);
        assert!(m.to_string().contains("transfer 106 did not arrive"), "{m}");
        assert_ne!(seed(64, 1), seed(64, 2));
        assert_ne!(seed(64, 1), seed(65, 1));
    }
}
