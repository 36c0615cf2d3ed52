//! The small encodings OAuth needs, written here so the core stays free of crates: base64
//! (standard for HTTP Basic credentials, URL-safe without padding for PKCE and `state`),
//! percent-encoding for query strings and form bodies, and the PKCE S256 challenge.

use sha2::{Digest, Sha256};

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64_with(alphabet: &[u8; 64], bytes: &[u8], pad: bool) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..4 {
            if i < chars {
                out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 with padding (RFC 4648 section 4).
pub fn base64_standard(bytes: &[u8]) -> String {
    base64_with(STANDARD, bytes, true)
}

/// URL-safe base64 without padding (RFC 4648 section 5), as PKCE and JWTs use it.
pub fn base64_url(bytes: &[u8]) -> String {
    base64_with(URL_SAFE, bytes, false)
}

/// Decodes URL-safe base64 without padding; `None` for anything else.
pub fn base64_url_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = URL_SAFE.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be padding zeros, and a lone sixth of a byte is not base64.
    (acc == 0 && bits < 6).then_some(out)
}

/// The PKCE S256 challenge of `verifier` (RFC 7636 section 4.2).
pub fn pkce_challenge(verifier: &str) -> String {
    base64_url(&Sha256::digest(verifier.as_bytes()))
}

/// Percent-encodes everything but the unreserved characters (RFC 3986 section 2.3).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `application/x-www-form-urlencoded`: also the query-string encoding used here.
pub fn form_encode(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Decodes one form or query component (`+` is a space, `%XX` a byte); `None` when the
/// escapes are malformed or the bytes are not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The pairs of a query string or form body, in order; malformed pairs are skipped.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64_standard(plain.as_bytes()), encoded);
            assert_eq!(base64_url(plain.as_bytes()), encoded.trim_end_matches('='));
        }
        assert_eq!(base64_url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn pkce_challenge_matches_rfc7636_appendix_b() {
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn form_round_trips_through_parse_query() {
        let body = form_encode(&[
            ("redirect_uri", "http://127.0.0.1:1/cb?x=1 2"),
            ("a", "é&="),
        ]);
        assert_eq!(
            parse_query(&body),
            vec![
                (
                    "redirect_uri".to_string(),
                    "http://127.0.0.1:1/cb?x=1 2".to_string()
                ),
                ("a".to_string(), "é&=".to_string())
            ]
        );
        assert_eq!(parse_query("a=%zz&b=1"), vec![("b".into(), "1".into())]);
    }
}
