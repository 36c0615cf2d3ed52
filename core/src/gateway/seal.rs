//! The `requestState` the gateway hands a 2026-07-28 client between the rounds of a multi
//! round-trip request: which of its requests the state belongs to and which round, sealed
//! with HMAC-SHA256 under the gateway's key. The client holds it and sends it back; a state
//! it changed (or one minted under another key) fails to open and its request is refused.
//!
//! Text form: `v1.<request>.<round>.<mac as 64 hex digits>`. The numbers are not secret
//! (they name a request of this gateway's and its round); the MAC makes them unforgeable.

use sha2::{Digest, Sha256};

/// What a sealed state names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sealed {
    /// The gateway's number for the request (its call id).
    pub request: u64,
    /// The round it was handed out in.
    pub round: u64,
}

const BLOCK: usize = 64;

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The state for `sealed`, under `key`.
pub(super) fn seal(key: &[u8], sealed: Sealed) -> String {
    let body = format!("v1.{}.{}", sealed.request, sealed.round);
    let mac = hmac(key, body.as_bytes());
    format!("{body}.{}", hex(&mac))
}

/// What `state` names, when it was sealed under `key` and left as it was.
pub(super) fn open(key: &[u8], state: &str) -> Option<Sealed> {
    // Bounded: a state is never longer than two numbers and a MAC.
    if state.len() > 128 {
        return None;
    }
    let (body, mac) = state.rsplit_once('.')?;
    let expected = hex(&hmac(key, body.as_bytes()));
    // Compared in time independent of where they differ.
    let same = mac.len() == expected.len()
        && mac
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if !same {
        return None;
    }
    let mut parts = body.split('.');
    if parts.next() != Some("v1") {
        return None;
    }
    let request = parts.next()?.parse().ok()?;
    let round = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some(Sealed { request, round })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_test_vector() {
        // RFC 4231, test case 2.
        let mac = hmac(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_state_opens_only_as_sealed_and_under_its_key() {
        let key = [7u8; 32];
        let s = Sealed {
            request: 42,
            round: 3,
        };
        let state = seal(&key, s);
        assert_eq!(open(&key, &state), Some(s));
        assert_eq!(open(&[8u8; 32], &state), None);
        assert_eq!(open(&key, &format!("{state}-TAMPERED")), None);
        assert_eq!(open(&key, &state.replace("v1.42.", "v1.43.")), None);
        assert_eq!(open(&key, ""), None);
        assert_eq!(open(&key, &"a".repeat(1000)), None);
    }
}
