//! Who may use a test port: a key both ends hold, proven both ways over the control channel
//! before any test is set up. A persistent or one-shot server started with a key
//! (`RDMADIAG_KEY`, `--key-file`) serves only clients that hold it; a fabric rank's test port
//! serves only the peer the coordinator gave the same per-pair key. Also the HMAC-SHA256, hex
//! and random primitives the fabric's rendezvous shares.
//!
//! The exchange, after both hellos (each says whether it holds a key):
//! 1. server: `Challenge { nonce }` (16 random bytes);
//! 2. client: `Proof { nonce, mac }`, its own nonce and HMAC(key, "client" | both nonces);
//! 3. server: refuses a wrong MAC, else `Proof { mac }` = HMAC(key, "server" | both nonces), so
//!    the client knows the server holds the key too.

use anyhow::{Context as _, Result};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::Read as _;
use std::sync::Arc;

type HmacSha256 = Hmac<Sha256>;

/// What every MAC of the test-port exchange starts with, so that none is valid elsewhere.
const DOMAIN: &[u8] = b"rdmadiag-test-port-v1";
pub const NONCE_LEN: usize = 16;

fn hmac(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // HMAC takes a key of any length: this cannot fail.
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    for p in parts {
        m.update(&(p.len() as u64).to_be_bytes());
        m.update(p);
    }
    m
}

/// Whether `mac` is the tag of `parts` under `key` (compared in constant time).
pub fn verify_tag(key: &[u8], parts: &[&[u8]], mac: &[u8]) -> bool {
    hmac(key, parts).verify_slice(mac).is_ok()
}

/// HMAC-SHA256 of `parts` (each length-prefixed) under `key`.
pub fn tag(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    hmac(key, parts).finalize().into_bytes().into()
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Lowercase hex only, as [`to_hex`] writes it: one spelling per value, so no byte of a sealed
/// line can change without failing its MAC (tests/fuzz.rs found 'A' for 'a').
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let lower = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| lower(&b)) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// N bytes from the kernel's random source.
pub fn random<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom for a nonce")?;
    Ok(b)
}

/// A test-port key: cheap to clone, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct TestKey(Arc<[u8]>);

impl TestKey {
    pub fn new(bytes: &[u8]) -> TestKey {
        TestKey(bytes.into())
    }

    /// A fresh random key (the fabric's per-pair keys).
    pub fn random() -> Result<TestKey> {
        Ok(TestKey::new(&random::<32>()?))
    }

    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }

    pub fn from_hex(s: &str) -> Option<TestKey> {
        from_hex(s)
            .filter(|k| !k.is_empty())
            .map(|k| TestKey::new(&k))
    }

    /// The client's MAC over both nonces.
    pub fn client_mac(&self, server: &[u8], client: &[u8]) -> [u8; 32] {
        tag(&self.0, &[DOMAIN, b"client", server, client])
    }

    /// The server's MAC over both nonces.
    pub fn server_mac(&self, server: &[u8], client: &[u8]) -> [u8; 32] {
        tag(&self.0, &[DOMAIN, b"server", server, client])
    }

    pub fn verify_client(&self, server: &[u8], client: &[u8], mac: &[u8]) -> bool {
        verify_tag(&self.0, &[DOMAIN, b"client", server, client], mac)
    }

    pub fn verify_server(&self, server: &[u8], client: &[u8], mac: &[u8]) -> bool {
        verify_tag(&self.0, &[DOMAIN, b"server", server, client], mac)
    }
}

impl std::fmt::Debug for TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestKey(..)")
    }
}

/// A client that did not prove it holds the server's key (or sent nothing a client would):
/// a one-shot server with a key goes on waiting for its real client.
#[derive(Debug)]
pub struct Unauthenticated(pub String);

impl std::fmt::Display for Unauthenticated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unauthenticated {}

/// Whether `e` is, wraps or was given the context of an [`Unauthenticated`].
pub fn is_unauthenticated(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Unauthenticated>().is_some() || e.chain().any(|c| c.is::<Unauthenticated>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_bind_the_key_the_side_and_both_nonces() {
        let k = TestKey::new(b"0123456789abcdef");
        let (s, c) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let m = k.client_mac(&s, &c);
        assert!(k.verify_client(&s, &c, &m));
        assert!(
            !k.verify_server(&s, &c, &m),
            "a client MAC is no server MAC"
        );
        assert!(!k.verify_client(&c, &s, &m), "the nonces' order counts");
        assert!(!TestKey::new(b"another key 0123").verify_client(&s, &c, &m));
        assert_eq!(TestKey::from_hex(&k.to_hex()), Some(k.clone()));
        assert_eq!(TestKey::from_hex(""), None);
        assert_eq!(format!("{k:?}"), "TestKey(..)");
    }
}
