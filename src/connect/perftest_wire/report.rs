//! The bw report the client and server swap after a bandwidth run (`xchg_bw_reports`).
//!
//! Five rounds, each its own message: size (`unsigned long`, 8 bytes), iterations (a u64 when
//! both sides are ≥ 5.33, else a u32), then peak, average and message rate as doubles. Every
//! value goes big-endian: `hton_long`/`hton_64` are `bswap_64` on a little-endian host, and
//! `hton_double` (`bswap_double`) reverses the double's 8 bytes, so the wire holds the IEEE-754
//! bits most significant byte first, which is `f64::to_be_bytes` (and on a big-endian host
//! both macros are the identity: the same bytes). Checked in `src/perftest_communication.c`
//! and `.h` at 6.29 and 6.06.
//!
//! Units are the sender's `report_fmt`: MB/s is 2^20 bytes/s (`0x100000`), Gb/s 10^9 bits/s,
//! i.e. 1.25e8 bytes/s (`format_factor` in `perftest_parameters.c`); the message rate is in
//! millions of messages per second. A peer run with `--report_per_port` adds four more rounds
//! (per-port average and rate), which this module does not speak.
//!
//! The figures are carried as sent: perftest can compute an infinite or NaN peak (a zero
//! cycle delta), so decoding judges only the length.

use super::Version;
use anyhow::{Result, bail};

/// One side's bw figures, as perftest sends them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BwReport {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations counted (over all QPs).
    pub iters: u64,
    /// Peak bandwidth, in the sender's unit.
    pub bw_peak: f64,
    /// Average bandwidth, in the sender's unit.
    pub bw_avg: f64,
    /// Average message rate, in Mpps.
    pub msg_rate: f64,
}

impl BwReport {
    /// The total length both ways, for `common` (see [`Version::common`]): 40, or 36 before 5.33.
    pub fn wire_len(common: Version) -> usize {
        32 + common.report_iters_len()
    }

    /// The five messages in order, one round each. An iteration count over u32 cannot go to
    /// a peer before 5.33.
    pub fn messages(&self, common: Version) -> Result<[Vec<u8>; 5]> {
        let iters = if common.report_iters_len() == 8 {
            self.iters.to_be_bytes().to_vec()
        } else {
            let Ok(narrow) = u32::try_from(self.iters) else {
                bail!(
                    "perftest {common} reads the iteration count as a u32; {} does not fit",
                    self.iters
                );
            };
            narrow.to_be_bytes().to_vec()
        };
        Ok([
            self.size.to_be_bytes().to_vec(),
            iters,
            self.bw_peak.to_be_bytes().to_vec(),
            self.bw_avg.to_be_bytes().to_vec(),
            self.msg_rate.to_be_bytes().to_vec(),
        ])
    }

    /// The five messages as one run of [`BwReport::wire_len`] bytes.
    pub fn encode(&self, common: Version) -> Result<Vec<u8>> {
        Ok(self.messages(common)?.concat())
    }

    /// The peer's five messages, concatenated.
    pub fn decode(msg: &[u8], common: Version) -> Result<BwReport> {
        let want = BwReport::wire_len(common);
        if msg.len() != want {
            bail!(
                "perftest {common}'s bw report is {want} bytes; the peer's is {}",
                msg.len()
            );
        }
        let n = common.report_iters_len();
        let u64_at = |at: usize| u64::from_be_bytes(msg[at..at + 8].try_into().expect("8 bytes"));
        let f64_at = |at: usize| f64::from_bits(u64_at(at));
        let iters = if n == 8 {
            u64_at(8)
        } else {
            u64::from(u32::from_be_bytes(msg[8..12].try_into().expect("4 bytes")))
        };
        Ok(BwReport {
            size: u64_at(0),
            iters,
            bw_peak: f64_at(8 + n),
            bw_avg: f64_at(16 + n),
            msg_rate: f64_at(24 + n),
        })
    }
}
