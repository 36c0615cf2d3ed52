//! The config hash: the tool cache's key. It is taken over the config as written, before
//! expansion, so a secret that changes behind a `${VAR}` does not discard the cache, while any
//! edit to the entry itself does.

use super::ServerConfig;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The stable hash of an *unresolved* config: SHA-256 (hex) of its key-sorted JSON
/// serialization. Identical on every run and machine; the tool cache's key.
pub fn config_hash(config: &ServerConfig) -> String {
    // serde_json's `Map` is a BTreeMap (no `preserve_order`), so going through `Value` sorts
    // every object's keys, including nested `auth` and unknown fields.
    let value = serde_json::to_value(config).unwrap_or(Value::Null);
    let bytes = serde_json::to_vec(&value).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}
