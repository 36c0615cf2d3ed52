//! The TLS client configuration every HTTPS connection shares: ring, HTTP/1.1 by ALPN, and
//! two sets of trusted roots.
//!
//! - Mozilla's roots, bundled (`webpki-roots`): a machine without a readable trust store
//!   still reaches public servers.
//! - The platform's trust store (`rustls-native-certs`): private CAs and TLS-inspecting
//!   proxies that the machine's administrator installed. On Linux that is the distribution's
//!   bundle (`/etc/ssl/certs` and its siblings), or exactly what `SSL_CERT_FILE` /
//!   `SSL_CERT_DIR` name when they are set, as OpenSSL-based tools do; macOS's keychain and
//!   Windows's store elsewhere.
//!
//! `rustls-native-certs` rather than `rustls-platform-verifier`: the latter replaces the
//! certificate verifier (on Linux it reads the same files), which would make the bundled
//! roots a second verifier to combine by hand; the native-certs loader only adds roots to
//! one `RootCertStore`, and it honours `SSL_CERT_FILE`, which makes the behaviour testable
//! offline. Both are maintained by the rustls project.
//!
//! The store is built once per process, on the first HTTPS connection.

use futures_rustls::rustls;
use rustls::pki_types::CertificateDer;
use std::sync::{Arc, OnceLock};

/// The shared client config (built on first use).
pub(super) fn config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let native = rustls_native_certs::load_native_certs();
            for e in &native.errors {
                tracing::debug!(target: "switchboard::http", "reading the platform's trust store: {e}");
            }
            let (roots, stats) = root_store(native.certs);
            tracing::debug!(target: "switchboard::http", bundled = stats.bundled, platform = stats.platform, ignored = stats.ignored, "TLS roots");
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        })
        .clone()
}

/// How many roots came from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RootStats {
    /// Mozilla's, bundled.
    pub bundled: usize,
    /// The platform's, accepted.
    pub platform: usize,
    /// The platform's that are not usable trust anchors (skipped, never fatal).
    pub ignored: usize,
}

/// The bundled roots plus the platform's `certs`.
pub(super) fn root_store(
    certs: Vec<CertificateDer<'static>>,
) -> (rustls::RootCertStore, RootStats) {
    let mut roots =
        rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let bundled = roots.len();
    let (platform, ignored) = roots.add_parsable_certificates(certs);
    (
        roots,
        RootStats {
            bundled,
            platform,
            ignored,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_roots_are_added_beside_the_bundled_ones_and_junk_is_skipped() {
        let (_, none) = root_store(Vec::new());
        assert!(none.bundled > 100, "{none:?}");
        assert_eq!((none.platform, none.ignored), (0, 0));
        let junk = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00]);
        let (store, stats) = root_store(vec![junk]);
        assert_eq!(stats.ignored, 1);
        assert_eq!(store.len(), none.bundled);
    }
}
