//! Patterned buffers for the WRITE/READ diagnostics, and byte-by-byte verification.

use serde::{Deserialize, Serialize};

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

/// The first byte that differs from the pattern, and how many do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    pub offset: u64,
    pub expected: u8,
    pub actual: u8,
    pub bad_bytes: u64,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "data mismatch at offset {}: expected 0x{:02x}, found 0x{:02x} ({} bad byte{})",
            self.offset,
            self.expected,
            self.actual,
            self.bad_bytes,
            if self.bad_bytes == 1 { "" } else { "s" }
        )
    }
}

pub fn verify(buf: &[u8], seed: u64) -> Option<Mismatch> {
    let mut first: Option<Mismatch> = None;
    let mut bad = 0u64;
    for (i, &b) in buf.iter().enumerate() {
        let want = pattern_byte(seed, i);
        if b != want {
            bad += 1;
            first.get_or_insert(Mismatch {
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

/// Test-only hook: `RDMADIAG_TEST_CORRUPT_OFFSET=N` flips byte N of a received buffer before it
/// is verified, so the lab can prove that a mismatch is caught. Never set it in real use.
pub fn corrupt_for_test(buf: &mut [u8]) {
    let off = std::env::var("RDMADIAG_TEST_CORRUPT_OFFSET")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(b) = off.and_then(|o| buf.get_mut(o)) {
        *b ^= 0xff;
    }
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
}
