//! rdma-core's ibv_rc_pingpong / ibv_ud_pingpong out-of-band exchange, byte for byte.
//!
//! Each side sends `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, GID as 32 hex digits) plus a NUL: 52
//! bytes. The client writes first, reads the server's message, then writes `"done\0"`.

use super::control::ControlChannel;
use crate::verbs::Gid;
use anyhow::{Result, bail};

/// Length of one exchange message, NUL included.
pub const MSG_LEN: usize = 52;
/// The client's final acknowledgement.
pub const DONE: &[u8; 5] = b"done\0";

/// One side's address as ibv_*_pingpong exchanges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbvDest {
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    pub gid: Gid,
}

pub fn format_dest(d: &IbvDest) -> [u8; MSG_LEN] {
    let text = format!(
        "{:04x}:{:06x}:{:06x}:{}",
        d.lid,
        d.qpn & 0xff_ffff,
        d.psn & 0xff_ffff,
        d.gid.to_hex()
    );
    let mut out = [0u8; MSG_LEN];
    out[..text.len()].copy_from_slice(text.as_bytes());
    out
}

pub fn parse_dest(msg: &[u8]) -> Result<IbvDest> {
    let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
    let text = std::str::from_utf8(&msg[..end])
        .map_err(|_| anyhow::anyhow!("the peer's address message is not text"))?;
    let bad = || anyhow::anyhow!("the peer sent {text:?}, not an ibv_rc_pingpong address");
    let mut parts = text.split(':');
    let mut field = |digits: usize| -> Result<&str> {
        let f = parts.next().ok_or_else(bad)?;
        if f.len() != digits || !f.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(f)
    };
    let lid = u16::from_str_radix(field(4)?, 16)?;
    let qpn = u32::from_str_radix(field(6)?, 16)?;
    let psn = u32::from_str_radix(field(6)?, 16)?;
    let g = field(32)?;
    let mut raw = [0u8; 16];
    for (i, b) in raw.iter_mut().enumerate() {
        *b = u8::from_str_radix(&g[2 * i..2 * i + 2], 16)?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(IbvDest {
        lid,
        qpn,
        psn,
        gid: Gid(raw),
    })
}

/// Client side: send ours, read theirs, acknowledge with "done".
pub fn client_exchange(ch: &mut ControlChannel, mine: &IbvDest) -> Result<IbvDest> {
    ch.write_all_by(&format_dest(mine), "our address")?;
    let mut theirs = [0u8; MSG_LEN];
    ch.read_exact_by(&mut theirs, "the ibv_rc_pingpong server's address")?;
    ch.write_all_by(DONE, "\"done\"")?;
    parse_dest(&theirs)
}

/// Server side, first half: read the client's address.
pub fn server_read(ch: &mut ControlChannel) -> Result<IbvDest> {
    let mut theirs = [0u8; MSG_LEN];
    ch.read_exact_by(&mut theirs, "the ibv_rc_pingpong client's address")?;
    parse_dest(&theirs)
}

/// Server side, second half (after our QP is connected): send ours, wait for "done".
pub fn server_finish(ch: &mut ControlChannel, mine: &IbvDest) -> Result<()> {
    ch.write_all_by(&format_dest(mine), "our address")?;
    let mut done = [0u8; 5];
    ch.read_exact_by(&mut done, "the client's \"done\"")?;
    if &done != DONE {
        bail!("the client sent {done:?} instead of \"done\"");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_matches_rdma_core() {
        let d = IbvDest {
            lid: 0,
            qpn: 0x11,
            psn: 0xabcdef,
            gid: "::ffff:10.77.0.1".parse().unwrap(),
        };
        let m = format_dest(&d);
        let text = std::str::from_utf8(&m[..51]).unwrap();
        assert_eq!(text, "0000:000011:abcdef:00000000000000000000ffff0a4d0001");
        assert_eq!(m[51], 0);
        assert_eq!(parse_dest(&m).unwrap(), d);
    }

    #[test]
    fn garbage_is_rejected_not_panicked_on() {
        for bad in [
            &b""[..],
            b"hello",
            b"0000:000011:abcdef",
            b"000g:000011:abcdef:00000000000000000000ffff0a4d0001",
            b"0000:000011:abcdef:00000000000000000000ffff0a4d00",
            b"0000:000011:abcdef:00000000000000000000ffff0a4d0001:x",
            &[0xff; 52],
        ] {
            assert!(parse_dest(bad).is_err(), "{bad:?}");
        }
    }
}
