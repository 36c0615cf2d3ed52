//! The `requestState` the gateway hands a 2026-07-28 client between the rounds of a multi
//! round-trip request, sealed with HMAC-SHA256 under the gateway's key. The client holds it
//! and sends it back; a state it changed (or one sealed under another key) fails to open and
//! its request is refused.
//!
//! What it carries (JSON, readable by the client, which gave most of it): the gateway that
//! issued it and its number for the call and the round, the inputs of the round by the key
//! the client answers under (each as a fingerprint of the server's request), and the
//! answers the client gave in earlier rounds by fingerprint. With that, a gateway that
//! shares the key but not the call (another instance behind a load balancer) can run the
//! call again and answer the server's requests from the state instead of asking again.
//!
//! Text form: `v1.<payload JSON>.<mac as 64 hex digits>`.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The longest state the gateway opens; one that would be longer is sealed without the
/// earlier answers (then only the gateway holding the call can continue it).
pub(super) const MAX_STATE: usize = 64 * 1024;

/// HMAC-SHA256 of `message` under `key`.
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A key from a shared secret: SHA-256 of its bytes.
pub fn derive_key(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

/// A fingerprint of a server's request (its method and params): how an answer is matched to
/// the same request asked again by another run of the call.
pub(super) fn fingerprint(method: &str, params: &Value) -> String {
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update([0]);
    h.update(serde_json::to_vec(params).unwrap_or_default());
    hex(&h.finalize()[..16])
}

/// `payload` sealed under `key`.
pub(super) fn seal(key: &[u8], payload: &Value) -> String {
    let body = format!("v1.{payload}");
    let mac = hmac(key, body.as_bytes());
    format!("{body}.{}", hex(&mac))
}

/// The payload of `state`, when it was sealed under `key` and left as it was.
pub(super) fn open(key: &[u8], state: &str) -> Option<Value> {
    if state.len() > MAX_STATE + 128 {
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
    serde_json::from_str(body.strip_prefix("v1.")?).ok()
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
        let payload = serde_json::json!({ "c": 42, "r": 3, "a": { "x": { "action": "accept" } } });
        let state = seal(&key, &payload);
        assert_eq!(open(&key, &state), Some(payload));
        assert_eq!(open(&[8u8; 32], &state), None);
        assert_eq!(open(&key, &format!("{state}-TAMPERED")), None);
        assert_eq!(open(&key, &state.replace("42", "43")), None);
        assert_eq!(open(&key, ""), None);
        assert_eq!(open(&key, &"a".repeat(MAX_STATE * 2)), None);
    }

    #[test]
    fn fingerprints_tell_requests_apart() {
        let p = serde_json::json!({ "message": "name?" });
        assert_eq!(
            fingerprint("elicitation/create", &p),
            fingerprint("elicitation/create", &p)
        );
        assert_ne!(
            fingerprint("elicitation/create", &p),
            fingerprint("sampling/createMessage", &p)
        );
    }
}
