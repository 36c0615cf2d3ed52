//! Signing `private_key_jwt` client assertions (RFC 7523) for the client-credentials grant:
//! the core builds the JWS signing input, this signs it with the key from the server's
//! config. ES256 and RS256, with `ring` (already the TLS stack's crypto provider, so no
//! second cryptography library) and PEM decoding from `rustls-pki-types`. Errors describe
//! the key's kind or the file's path, never its contents.

use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use std::io::Read;
use switchboard_core::auth::SigningAlgorithm;
use switchboard_core::config::PrivateKey;

/// The largest key file read.
const MAX_KEY_FILE: u64 = 64 * 1024;

fn pem_bytes(key: &PrivateKey) -> Result<Vec<u8>, String> {
    match key {
        PrivateKey::Pem(text) => Ok(text.as_bytes().to_vec()),
        PrivateKey::File(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| format!("cannot read the private key file {path}: {e}"))?;
            let mut bytes = Vec::new();
            file.take(MAX_KEY_FILE + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("cannot read the private key file {path}: {e}"))?;
            if bytes.len() as u64 > MAX_KEY_FILE {
                return Err(format!(
                    "the private key file {path} is larger than {MAX_KEY_FILE} bytes"
                ));
            }
            Ok(bytes)
        }
    }
}

fn decode(key: &PrivateKey) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = pem_bytes(key)?;
    PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|_| "the private key is not a PEM private key".to_string())
}

/// The algorithm `key` signs with: ES256 for a P-256 key, RS256 for an RSA key; `None` when
/// it cannot be read or is neither (signing then fails with the reason).
pub(super) fn algorithm_of(key: &PrivateKey) -> Option<SigningAlgorithm> {
    let rng = SystemRandom::new();
    match decode(key).ok()? {
        PrivateKeyDer::Pkcs1(_) => Some(SigningAlgorithm::RS256),
        PrivateKeyDer::Pkcs8(der) => {
            let der = der.secret_pkcs8_der();
            if EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng).is_ok() {
                Some(SigningAlgorithm::ES256)
            } else if RsaKeyPair::from_pkcs8(der).is_ok() {
                Some(SigningAlgorithm::RS256)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The signature of `input` with `key` under `algorithm` (ES256: the 64-byte `r || s` JWS
/// form; RS256: PKCS#1 v1.5).
pub(super) fn sign(
    key: &PrivateKey,
    algorithm: SigningAlgorithm,
    input: &[u8],
) -> Result<Vec<u8>, String> {
    let rng = SystemRandom::new();
    let der = decode(key)?;
    match (algorithm, &der) {
        (SigningAlgorithm::ES256, PrivateKeyDer::Pkcs8(der)) => {
            let pair = EcdsaKeyPair::from_pkcs8(
                &ECDSA_P256_SHA256_FIXED_SIGNING,
                der.secret_pkcs8_der(),
                &rng,
            )
            .map_err(|e| format!("ES256 needs a PKCS#8 P-256 key: {e}"))?;
            let sig = pair
                .sign(&rng, input)
                .map_err(|_| "ES256 signing failed".to_string())?;
            Ok(sig.as_ref().to_vec())
        }
        (SigningAlgorithm::ES256, PrivateKeyDer::Sec1(_)) => {
            Err("ES256 needs the key in PKCS#8 form (BEGIN PRIVATE KEY); convert it with `openssl pkcs8 -topk8 -nocrypt`".into())
        }
        (SigningAlgorithm::RS256, PrivateKeyDer::Pkcs8(_) | PrivateKeyDer::Pkcs1(_)) => {
            let pair = match &der {
                PrivateKeyDer::Pkcs8(d) => RsaKeyPair::from_pkcs8(d.secret_pkcs8_der()),
                PrivateKeyDer::Pkcs1(d) => RsaKeyPair::from_der(d.secret_pkcs1_der()),
                _ => unreachable!("matched above"),
            }
            .map_err(|e| format!("RS256 needs an RSA key: {e}"))?;
            let mut sig = vec![0; pair.public().modulus_len()];
            pair.sign(&RSA_PKCS1_SHA256, &rng, input, &mut sig)
                .map_err(|_| "RS256 signing failed".to_string())?;
            Ok(sig)
        }
        (alg, _) => Err(format!(
            "the private key is not a key {} can sign with",
            alg.as_str()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{
        KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256,
    };

    fn pem(label: &str, der: &[u8]) -> String {
        let b64 = switchboard_core::auth::encode::base64_standard(der);
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }

    #[test]
    fn es256_signatures_verify_with_the_public_key() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let key = PrivateKey::Pem(pem("PRIVATE KEY", pkcs8.as_ref()));
        assert_eq!(algorithm_of(&key), Some(SigningAlgorithm::ES256));
        let sig = sign(&key, SigningAlgorithm::ES256, b"header.claims").unwrap();
        assert_eq!(sig.len(), 64, "JWS ES256 is r || s");
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref())
            .verify(b"header.claims", &sig)
            .expect("a valid signature");
        // An EC key cannot sign RS256.
        assert!(sign(&key, SigningAlgorithm::RS256, b"x").is_err());
    }

    #[test]
    fn rs256_signatures_verify_with_the_public_key() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/auth/testdata/rsa.pem");
        let key = PrivateKey::File(path.display().to_string());
        assert_eq!(algorithm_of(&key), Some(SigningAlgorithm::RS256));
        let sig = sign(&key, SigningAlgorithm::RS256, b"header.claims").unwrap();
        let PrivateKeyDer::Pkcs8(der) = decode(&key).unwrap() else {
            panic!("PKCS#8")
        };
        let pair = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).unwrap();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, pair.public().as_ref())
            .verify(b"header.claims", &sig)
            .expect("a valid signature");
        assert!(sign(&key, SigningAlgorithm::ES256, b"x").is_err());
    }

    #[test]
    fn errors_never_quote_the_key() {
        let key = PrivateKey::Pem(
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n".into(),
        );
        let e = sign(&key, SigningAlgorithm::ES256, b"x").unwrap_err();
        assert!(!e.contains("c2VjcmV0"), "{e}");
        let e = sign(
            &PrivateKey::Pem("secret".into()),
            SigningAlgorithm::ES256,
            b"x",
        )
        .unwrap_err();
        assert!(!e.contains("secret"), "{e}");
    }
}
