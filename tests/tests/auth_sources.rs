//! Headers made by commands are made again when the server refuses them: a `!command` header
//! value (cached for the process) and Claude Code's `headersHelper` (run before the first
//! request) each run once more after a `401`, and the request goes out again with the fresh
//! value, instead of the stale one living for the life of the process.

use crate::http_edge::{streamable_handler, EdgeServer, Reply, Req, Streamable};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, CredentialFuture, CredentialProvider};

/// A server that accepts only requests whose `x-token` is `2`.
fn wants_second_token() -> EdgeServer {
    wants("x-token", "2")
}

/// A server that accepts only requests whose `header` is `value`.
fn wants(header: &'static str, value: &'static str) -> EdgeServer {
    let inner = streamable_handler(Arc::new(Mutex::new(Streamable::default())));
    EdgeServer::start(Arc::new(move |req: &Req| {
        if req.header(header) == Some(value) {
            inner(req)
        } else {
            Reply::Full {
                status: 401,
                headers: vec![("www-authenticate".into(), "Bearer".into())],
                body: b"stale token".to_vec(),
            }
        }
    }))
}

/// A command that prints how often it ran (a token that changes on every run).
fn counting(dir: &Path, file: &str) -> (PathBuf, String) {
    let counter = dir.join(file);
    let cmd = format!("echo x >> {0}; wc -l < {0} | tr -d ' '", counter.display());
    (counter, cmd)
}

fn runs(counter: &Path) -> usize {
    std::fs::read_to_string(counter)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchboard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_refused_command_header_runs_again_and_the_request_is_retried() {
    let server = wants_second_token();
    let dir = temp("cmd-header");
    let (counter, cmd) = counting(&dir, "n");
    smol::block_on(async {
        let mut config = ServerConfig::http(server.url());
        config.headers.insert("X-Token".into(), format!("!{cmd}"));
        let (sb, report) = Builder::servers(vec![ServerSpec::new("cmd", config)])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["cmd"], "{report:?}");
        assert_eq!(runs(&counter), 2, "once at connect, once after the 401");
        sb.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn headers_helper_output_becomes_headers_and_runs_again_after_a_401() {
    let server = wants_second_token();
    let dir = temp("helper");
    let (counter, cmd) = counting(&dir, "n");
    smol::block_on(async {
        let mut config = ServerConfig::http(server.url());
        // A static header of the same name is overridden by the helper's.
        config.headers.insert("X-Token".into(), "static".into());
        config.extra.insert(
            "headersHelper".into(),
            format!(r#"n=$({cmd}); printf '{{"X-Token": "%s"}}' "$n""#).into(),
        );
        let (sb, report) = Builder::servers(vec![ServerSpec::new("helper", config)])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["helper"], "{report:?}");
        assert_eq!(
            runs(&counter),
            2,
            "before the first request, then after the 401"
        );
        sb.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// Hands out `old` until asked again after a refusal, then `new`.
struct Rotating {
    asked_after_refusal: std::sync::atomic::AtomicUsize,
}

impl CredentialProvider for Rotating {
    fn bearer_token<'a>(
        &'a self,
        _server: &'a str,
        _auth: &'a serde_json::Value,
        refused: bool,
    ) -> CredentialFuture<'a> {
        Box::pin(async move {
            if refused {
                self.asked_after_refusal
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // A provider may take its time (a refresh round trip).
                smol::Timer::after(std::time::Duration::from_millis(10)).await;
                Ok(Some("new".to_string()))
            } else {
                Ok(Some("old".to_string()))
            }
        })
    }
}

#[test]
fn the_credential_provider_is_asked_again_after_a_401() {
    let server = wants("authorization", "Bearer new");
    let provider = Arc::new(Rotating {
        asked_after_refusal: Default::default(),
    });
    smol::block_on(async {
        let mut config = ServerConfig::http(server.url());
        config.auth = Some(serde_json::json!({"kind": "oauth"}));
        let (sb, report) = Builder::servers(vec![ServerSpec::new("prov", config)])
            .no_cache()
            .credential_provider(provider.clone())
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["prov"], "{report:?}");
        assert_eq!(
            provider
                .asked_after_refusal
                .load(std::sync::atomic::Ordering::SeqCst),
            1
        );
        sb.shutdown().await;
    });
}
