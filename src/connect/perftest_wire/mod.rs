//! perftest's out-of-band TCP exchange (`ib_write_bw` and friends), byte for byte: the message
//! formats as pure values, and [`PerftestPeer`], the conversation over a live connection (used
//! by `bw --compat perftest`). Nothing here touches a device.
//!
//! Learnt from the public source, linux-rdma/perftest, at its 6.29 head and at tag v4.5-0.17
//! (internal version 6.06, Debian 12's): `src/perftest_communication.c` (`exchange_versions`,
//! `check_version_compatibility`, `check_sys_data`, `check_mtu`, `ethernet_write_keys`,
//! `ethernet_read_keys`, `ctx_hand_shake`, `ctx_xchg_data_ethernet`, `negotiate_params`,
//! `xchg_bw_reports`), `src/perftest_communication.h` (`KEY_PRINT_FMT*`, `KEY_MSG_SIZE*`, the
//! `hton_*` macros), `src/perftest_parameters.h` (`struct perftest_parameters_negotiate`, the
//! enums) and `src/perftest_parameters.c` (`compare`, `compare_ibv_device`, the unit factors).
//!
//! Every message is one `ctx_xchg_data` round in lock step: the client writes then reads, the
//! server reads then writes, each side the same number of bytes, each read a single `read()` of
//! exactly that size. So each message here is meant for one `write()`. In order:
//! 1. the version, [`Version`] (16 bytes);
//! 2. the system data, [`SysData`] (two rounds of 4 bytes), if both sides are ≥ 5.32;
//! 3. the MTU, [`encode_mtu`] (2 bytes, 4 before 5.31), if both are ≥ 5.1;
//! 4. the parameter negotiation, [`Negotiation`] (320 or 312 bytes), if both are ≥ 6.28;
//! 5. per QP, the key message, [`PerftestKey`] (59 or 108 bytes), and again at each handshake;
//! 6. after a bw run, the report, [`BwReport`] (five rounds).
//!
//! Each side gates a step on the *other's* version and sizes the message by it, and an older
//! perftest has no code for what came after it; so a step happens, in one size, exactly when the
//! older of the two versions has it: the gates below are asked of [`Version::common`]. One
//! exception: perftest 6.28 as released (26.01) negotiates whatever the other side's version
//! (the gate on it came after, within 6.28), so whoever speaks to a 6.28 peer must itself claim
//! 6.28 or newer, and the gate then agrees.
//!
//! perftest compares versions with `atof` (as a `float` in `check_mtu` and `xchg_bw_reports`,
//! where an exact "5.1", "5.31" or "5.33" reads as just below itself). Here a version is its
//! digits, compared exactly; the two differ only for peers older than 5.70, which perftest and
//! this module refuse.

mod exchange;
mod key;
mod negotiate;
mod report;

pub use exchange::{CLAIMED, DONE, Lead, PerftestPeer};
pub use key::{KEY_LEN, KEY_LEN_GID, PerftestKey};
pub use negotiate::{
    AtomicType, ConnectionType, DEVICE_ATTR_AT, DEVICE_ATTR_LEN, Limit, MAX_QP_RD_ATOM_AT,
    MLX5DV_COMP_MASK_AT, NEGOTIATION_LEN, NEGOTIATION_LEN_NO_MLX5DV, Negotiation, ReportFmt,
    TestKind, TestMethod, Verb, mismatches,
};
pub use report::BwReport;

use crate::ib::Mtu;
use anyhow::{Result, bail};
use std::fmt;

/// Length of the version message: a NUL-padded ASCII string (perftest's `MAX_VERSION`).
pub const VERSION_LEN: usize = 16;

/// A perftest internal version (its `AC_INIT`, printed by `ib_write_bw --version`), as `atof`
/// reads it: `minor` is in hundredths, so "5.1" is 5.10 and "6.06" is 6.06.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u16,
    pub minor: u16,
}

impl Version {
    /// The oldest peer a current perftest talks to (`check_version_compatibility`).
    pub const OLDEST_ACCEPTED: Version = Version::new(5, 70);
    /// The MTU message exists from 5.1 (`check_mtu`).
    pub const MTU_MESSAGE_SINCE: Version = Version::new(5, 10);
    /// The MTU message is 2 bytes from 5.31, 4 bytes (an `int`'s worth) before.
    pub const SHORT_MTU_MESSAGE_SINCE: Version = Version::new(5, 31);
    /// cycle_buffer and cache_line_size are exchanged from 5.32 (`check_sys_data`).
    pub const SYS_DATA_SINCE: Version = Version::new(5, 32);
    /// The bw report's iteration count is a u64 from 5.33, a u32 before (`xchg_bw_reports`).
    pub const WIDE_REPORT_ITERS_SINCE: Version = Version::new(5, 33);
    /// The binary parameter negotiation exists from 6.28 (`negotiate_params`).
    pub const NEGOTIATION_SINCE: Version = Version::new(6, 28);

    pub const fn new(major: u16, minor: u16) -> Version {
        Version { major, minor }
    }

    /// What both sides speak: the older of the two.
    pub fn common(ours: Version, theirs: Version) -> Version {
        ours.min(theirs)
    }

    /// The 16-byte message: the text, NUL-padded.
    pub fn encode(self) -> [u8; VERSION_LEN] {
        let text = self.to_string();
        let mut out = [0u8; VERSION_LEN];
        out[..text.len()].copy_from_slice(text.as_bytes());
        out
    }

    /// The peer's 16-byte message. The text ends at the first NUL (what follows is ignored, as
    /// perftest's string functions ignore it); it must start with digits, a dot and digits.
    /// Fraction digits past the hundredths and a non-digit suffix ("6.06-mlnx") are ignored,
    /// as `atof` would, since perftest's gates never need more than hundredths.
    pub fn decode(msg: &[u8]) -> Result<Version> {
        if msg.len() != VERSION_LEN {
            bail!(
                "perftest's version message is {VERSION_LEN} bytes; the peer's is {}",
                msg.len()
            );
        }
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = &msg[..end];
        if !text.iter().all(|b| b.is_ascii_graphic()) {
            bail!(
                "the peer's version message is not text: {:?}",
                String::from_utf8_lossy(text)
            );
        }
        // Printable ASCII, so one char a byte.
        let text = std::str::from_utf8(text).expect("ASCII is UTF-8");
        text.parse()
    }

    /// The peer is too old for perftest, and so for us: one line naming both versions.
    pub fn check_accepted(self) -> Result<()> {
        if self < Version::OLDEST_ACCEPTED {
            bail!(
                "the peer runs perftest {self}; perftest and rdmadiag speak to {} or newer",
                Version::OLDEST_ACCEPTED
            );
        }
        Ok(())
    }

    /// Whether the system data (cycle_buffer, cache_line_size) is exchanged. Ask the common
    /// version.
    pub fn exchanges_sys_data(self) -> bool {
        self >= Version::SYS_DATA_SINCE
    }

    /// The MTU message's length, if there is one: 2, or 4 before 5.31. Ask the common version.
    pub fn mtu_message_len(self) -> Option<usize> {
        if self < Version::MTU_MESSAGE_SINCE {
            None
        } else if self < Version::SHORT_MTU_MESSAGE_SINCE {
            Some(4)
        } else {
            Some(2)
        }
    }

    /// The bw report's iteration count in bytes: 8, or 4 before 5.33. Ask the common version.
    pub fn report_iters_len(self) -> usize {
        if self >= Version::WIDE_REPORT_ITERS_SINCE {
            8
        } else {
            4
        }
    }

    /// Whether the binary parameter negotiation runs. Ask the common version.
    pub fn negotiates(self) -> bool {
        self >= Version::NEGOTIATION_SINCE
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.major, self.minor)
    }
}

impl std::str::FromStr for Version {
    type Err = anyhow::Error;
    fn from_str(text: &str) -> Result<Version> {
        let bad =
            || anyhow::anyhow!("the peer sent {text:?}, not a perftest version such as \"6.06\"");
        let (major, rest) = text.split_once('.').ok_or_else(bad)?;
        let minor_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let fraction = &rest[..minor_len];
        if major.is_empty()
            || major.len() > 3
            || !major.bytes().all(|b| b.is_ascii_digit())
            || fraction.is_empty()
        {
            return Err(bad());
        }
        let major: u16 = major.parse().map_err(|_| bad())?;
        // Hundredths: "5.1" is 5.10, "5.705" is 5.70.
        let digit = |i: usize| {
            fraction
                .as_bytes()
                .get(i)
                .map_or(0, |d| u16::from(d - b'0'))
        };
        Ok(Version::new(major, digit(0) * 10 + digit(1)))
    }
}

/// Whether `bytes`, the start of what a peer sent first, look like perftest's version message:
/// digits, a dot, digits, then only NULs (e.g. "6.06\0\0\0\0").
pub fn looks_like_version(bytes: &[u8]) -> bool {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes[end..].iter().all(|&b| b == 0)
        && std::str::from_utf8(&bytes[..end])
            .ok()
            .and_then(|t| t.split_once('.'))
            .is_some_and(|(major, minor)| {
                let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                digits(major) && digits(minor)
            })
}

/// Length of the system-data exchange: two big-endian int32, each its own round.
pub const SYS_DATA_LEN: usize = 8;

/// The system data (perftest ≥ 5.32): each side keeps the larger of each value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysData {
    /// The buffer each QP cycles through (the page size, unless raised).
    pub cycle_buffer: u32,
    pub cache_line_size: u32,
}

impl SysData {
    /// The two messages, in order, each one round: cycle_buffer, then cache_line_size.
    pub fn messages(self) -> [[u8; 4]; 2] {
        [
            self.cycle_buffer.to_be_bytes(),
            self.cache_line_size.to_be_bytes(),
        ]
    }

    /// Both messages as one 8-byte run.
    pub fn encode(self) -> [u8; SYS_DATA_LEN] {
        let [a, b] = self.messages();
        let mut out = [0u8; SYS_DATA_LEN];
        out[..4].copy_from_slice(&a);
        out[4..].copy_from_slice(&b);
        out
    }

    /// The peer's 8 bytes (its two messages in order). Values perftest holds as `int` must be
    /// positive.
    pub fn decode(msg: &[u8]) -> Result<SysData> {
        if msg.len() != SYS_DATA_LEN {
            bail!(
                "perftest's system data is {SYS_DATA_LEN} bytes; the peer's is {}",
                msg.len()
            );
        }
        let field = |at: usize, name: &str| -> Result<u32> {
            let v = i32::from_be_bytes(msg[at..at + 4].try_into().expect("4 bytes"));
            if v <= 0 {
                bail!("the peer's {name} is {v}, not a size");
            }
            Ok(v as u32)
        };
        Ok(SysData {
            cycle_buffer: field(0, "cycle_buffer")?,
            cache_line_size: field(4, "cache_line_size")?,
        })
    }

    /// What both sides use: the larger of each.
    pub fn merge(self, theirs: SysData) -> SysData {
        SysData {
            cycle_buffer: self.cycle_buffer.max(theirs.cycle_buffer),
            cache_line_size: self.cache_line_size.max(theirs.cache_line_size),
        }
    }
}

/// The MTU message: the `enum ibv_mtu` value (1 = 256 … 5 = 4096) as one ASCII digit and a NUL;
/// `len` is [`Version::mtu_message_len`] (2, or 4 for peers before 5.31, padded with NULs).
/// Both sides then use the smaller MTU.
pub fn encode_mtu(mtu: Mtu, len: usize) -> Result<Vec<u8>> {
    let Some(raw) = mtu.to_raw() else {
        bail!("perftest exchanges an IB MTU (256 to 4096), not {mtu}");
    };
    if len != 2 && len != 4 {
        bail!("perftest's MTU message is 2 or 4 bytes, not {len}");
    }
    let mut out = vec![0u8; len];
    out[0] = b'0' + raw as u8;
    Ok(out)
}

/// The peer's MTU message (2 or 4 bytes). Bytes after the NUL of the 4-byte form are whatever
/// was in the old peer's buffer, and are ignored.
pub fn decode_mtu(msg: &[u8]) -> Result<Mtu> {
    if msg.len() != 2 && msg.len() != 4 {
        bail!(
            "perftest's MTU message is 2 or 4 bytes; the peer's is {}",
            msg.len()
        );
    }
    let mtu = match msg[0] {
        d @ b'1'..=b'5' => Mtu::from_raw(u32::from(d - b'0')),
        _ => None,
    };
    match (mtu, msg[1]) {
        (Some(mtu), 0) => Ok(mtu),
        _ => bail!(
            "the peer's MTU message is {:?}, not a digit 1 to 5 (256 to 4096) and a NUL",
            String::from_utf8_lossy(&msg[..2])
        ),
    }
}

#[cfg(test)]
mod tests;
