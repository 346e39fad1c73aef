//! The per-QP key message perftest's handshakes exchange (`ethernet_write_keys` and
//! `ethernet_read_keys`), as text, in two forms that both sides must agree on:
//!
//! - without GID, `KEY_PRINT_FMT` = `"%04x:%04x:%06x:%06x:%08x:%016llx:%08x"`: lid, out_reads,
//!   qpn, psn, rkey, vaddr, srqn, and the NUL: 59 bytes (`KEY_MSG_SIZE`);
//! - with GID (always on RoCE; on IB with `-x`), `KEY_PRINT_FMT_GID`: the same up to vaddr and
//!   its ':', then the 16 raw GID bytes each as `"%02x:"`, then srqn and one more ':' before
//!   the NUL: 108 bytes (`KEY_MSG_SIZE_GID`). That trailing ':' is not decoration: the reader
//!   finds the end of srqn with `strpbrk(":")`, so a message without it would not parse.
//!
//! Checked in `src/perftest_communication.h` and `.c` at perftest's head (6.29) and at tag
//! v4.5-0.17 (6.06): the formats, the sizes, and that the reader skips "xx:" after the last GID
//! byte before srqn. The data-validation forms (`KEY_PRINT_FMT_DV`, 76 and 125 bytes, with a
//! tail-markers address after vaddr; perftest ≥ 6.29 with `--data_validation`) are not spoken.
//!
//! Offsets, without GID: lid 0..4, out_reads 5..9, qpn 10..16, psn 17..23, rkey 24..32,
//! vaddr 33..49, srqn 50..58, NUL 58; a ':' after every field but srqn. With GID: GID byte i at
//! 50 + 3i, srqn 98..106, ':' 106, NUL 107.

use crate::ib::Gid;
use anyhow::{Result, bail};

/// The key message without GID, NUL included.
pub const KEY_LEN: usize = 59;
/// The key message with GID, NUL included.
pub const KEY_LEN_GID: usize = 108;

/// One QP's address and remote buffer, as perftest exchanges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerftestKey {
    pub lid: u16,
    /// The outstanding RDMA reads/atomics this side initiates (the peer's `max_dest_rd_atomic`).
    pub out_reads: u16,
    /// 24 bits.
    pub qpn: u32,
    /// 24 bits.
    pub psn: u32,
    pub rkey: u32,
    pub vaddr: u64,
    /// `Some` selects the 108-byte form.
    pub gid: Option<Gid>,
    /// The SRQ number (XRC and DC only; 0 for RC).
    pub srqn: u32,
}

/// The fields before the GID: (name, hex digits).
const HEAD: [(&str, usize); 6] = [
    ("lid", 4),
    ("out_reads", 4),
    ("qpn", 6),
    ("psn", 6),
    ("rkey", 8),
    ("vaddr", 16),
];

impl PerftestKey {
    /// The message's length in the form this key selects.
    pub fn wire_len(&self) -> usize {
        if self.gid.is_some() {
            KEY_LEN_GID
        } else {
            KEY_LEN
        }
    }

    /// The message, exactly [`KEY_LEN`] or [`KEY_LEN_GID`] bytes; qpn and psn are masked to
    /// their 24 bits.
    pub fn encode(&self) -> Vec<u8> {
        let mut text = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.vaddr
        );
        match self.gid {
            Some(gid) => {
                for b in gid.0 {
                    text.push_str(&format!("{b:02x}:"));
                }
                text.push_str(&format!("{:08x}:", self.srqn));
            }
            None => text.push_str(&format!("{:08x}", self.srqn)),
        }
        let mut out = text.into_bytes();
        out.push(0);
        debug_assert_eq!(out.len(), self.wire_len());
        out
    }

    /// The peer's message; its length says the form (59 without GID, 108 with). Every field
    /// must be exactly its width in hex digits, every separator a ':', the last byte a NUL.
    pub fn decode(msg: &[u8]) -> Result<PerftestKey> {
        let with_gid = match msg.len() {
            KEY_LEN => false,
            KEY_LEN_GID => true,
            n => bail!(
                "perftest's key message is {KEY_LEN} bytes ({KEY_LEN_GID} with a GID); \
                 the peer's is {n}"
            ),
        };
        let mut r = Reader { msg, at: 0 };
        let mut head = [0u64; 6];
        for (v, (name, digits)) in head.iter_mut().zip(HEAD) {
            *v = r.hex(name, digits)?;
            r.colon(name)?;
        }
        let [lid, out_reads, qpn, psn, rkey, vaddr] = head;
        let gid = if with_gid {
            let mut raw = [0u8; 16];
            for (i, b) in raw.iter_mut().enumerate() {
                let name = format!("GID byte {i}");
                *b = r.hex(&name, 2)? as u8;
                r.colon(&name)?;
            }
            Some(Gid(raw))
        } else {
            None
        };
        let srqn = r.hex("srqn", 8)? as u32;
        if with_gid {
            r.colon("srqn")?;
        }
        if msg[r.at] != 0 {
            bail!(
                "perftest's key message ends in a NUL; the peer's byte {} is {:?}",
                r.at,
                char::from(msg[r.at])
            );
        }
        Ok(PerftestKey {
            lid: lid as u16,
            out_reads: out_reads as u16,
            // Six hex digits: 24 bits by construction.
            qpn: qpn as u32,
            psn: psn as u32,
            rkey: rkey as u32,
            vaddr,
            gid,
            srqn,
        })
    }
}

/// A cursor over a key message whose length is already checked.
struct Reader<'a> {
    msg: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// `digits` hex digits (either case, as sscanf takes them) naming `name`.
    fn hex(&mut self, name: &str, digits: usize) -> Result<u64> {
        let field = &self.msg[self.at..self.at + digits];
        if !field.iter().all(u8::is_ascii_hexdigit) {
            bail!(
                "the peer's key message: {name} (bytes {}..{}) is {:?}, not {digits} hex digits",
                self.at,
                self.at + digits,
                String::from_utf8_lossy(field)
            );
        }
        self.at += digits;
        let text = std::str::from_utf8(field).expect("hex digits are ASCII");
        Ok(u64::from_str_radix(text, 16).expect("at most 16 hex digits fit a u64"))
    }

    fn colon(&mut self, after: &str) -> Result<()> {
        let b = self.msg[self.at];
        if b != b':' {
            bail!(
                "the peer's key message: byte {} after {after} is {:?}, not ':'",
                self.at,
                char::from(b)
            );
        }
        self.at += 1;
        Ok(())
    }
}
