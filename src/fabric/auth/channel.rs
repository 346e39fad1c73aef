//! A connection's channel once both ends share a session key: every line is `MAC JSON`, the
//! MAC being HMAC-SHA256(session, domain | direction | sequence | JSON), one counter per
//! direction, so a forged, altered, replayed, reordered or reflected line is refused.

use super::DOMAIN;
pub(super) use crate::connect::key::{tag, verify_tag};

pub use crate::connect::key::{from_hex, to_hex};
use serde::Serialize;
use std::io::Write;

/// Which way a line goes (part of every MAC, so a line cannot be reflected back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ToRank,
    ToCoordinator,
}

impl Direction {
    fn byte(self) -> &'static [u8] {
        match self {
            Direction::ToRank => b"to-rank",
            Direction::ToCoordinator => b"to-coordinator",
        }
    }
}

/// Seals the lines one side sends: `MAC JSON`, or bare JSON without a session (--insecure).
#[derive(Clone)]
pub struct Sealer {
    key: Option<[u8; 32]>,
    dir: Direction,
    seq: u64,
}

/// Opens the lines one side receives, in order.
#[derive(Clone)]
pub struct Opener {
    key: Option<[u8; 32]>,
    dir: Direction,
    seq: u64,
}

/// Both halves of a connection's channel, as seen from one end.
pub fn channel(session: Option<[u8; 32]>, sends: Direction) -> (Sealer, Opener) {
    let receives = match sends {
        Direction::ToRank => Direction::ToCoordinator,
        Direction::ToCoordinator => Direction::ToRank,
    };
    (
        Sealer {
            key: session,
            dir: sends,
            seq: 0,
        },
        Opener {
            key: session,
            dir: receives,
            seq: 0,
        },
    )
}

impl Sealer {
    /// One message as a line, newline included.
    pub fn seal<T: Serialize>(&mut self, msg: &T) -> std::io::Result<Vec<u8>> {
        let json = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
        let mut line = Vec::with_capacity(json.len() + 66);
        if let Some(key) = &self.key {
            let t = tag(
                key,
                &[DOMAIN, self.dir.byte(), &self.seq.to_be_bytes(), &json],
            );
            line.extend_from_slice(to_hex(&t).as_bytes());
            line.push(b' ');
        }
        self.seq += 1;
        line.extend_from_slice(&json);
        line.push(b'\n');
        Ok(line)
    }

    /// Seal and write one message.
    pub fn send<T: Serialize>(&mut self, w: &mut impl Write, msg: &T) -> std::io::Result<()> {
        let line = self.seal(msg)?;
        w.write_all(&line)
    }
}

/// Why a received line was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// No MAC where one is required.
    Unsealed,
    /// The MAC does not match: forged, altered, replayed or out of order.
    BadMac,
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OpenError::Unsealed => "a line without its MAC (not from an authenticated peer)",
            OpenError::BadMac => {
                "a line whose MAC does not match (forged, altered, replayed or out of order)"
            }
        })
    }
}

impl Opener {
    /// Check one line (without its newline) and return its JSON.
    pub fn open<'l>(&mut self, line: &'l [u8]) -> std::result::Result<&'l [u8], OpenError> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(key) = &self.key else {
            self.seq += 1;
            return Ok(line);
        };
        let Some(sp) = line.iter().position(|b| *b == b' ') else {
            return Err(OpenError::Unsealed);
        };
        let (mac, json) = (&line[..sp], &line[sp + 1..]);
        let Some(mac) = std::str::from_utf8(mac).ok().and_then(from_hex) else {
            return Err(OpenError::Unsealed);
        };
        if !verify_tag(
            key,
            &[DOMAIN, self.dir.byte(), &self.seq.to_be_bytes(), json],
            &mac,
        ) {
            return Err(OpenError::BadMac);
        }
        self.seq += 1;
        Ok(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        assert_eq!(
            from_hex(&to_hex(&[0, 1, 254, 255])).unwrap(),
            [0, 1, 254, 255]
        );
        assert!(from_hex("abc").is_none() && from_hex("zz").is_none() && from_hex("é1").is_none());
        assert!(
            from_hex("AB").is_none() && from_hex("+1").is_none(),
            "one spelling per value"
        );
    }
}
