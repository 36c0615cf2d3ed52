//! Real servers of the stateless revision (MCP 2026-07-28): a server written with the
//! TypeScript SDK v2 (`@modelcontextprotocol/server`, pinned in tests/peers/package.json;
//! tests/peers/ts_v2_server.mjs) that rejects clients of the 2025 revisions, and one written
//! with the Python SDK (`mcp`, pinned in tests/peers/requirements.txt;
//! tests/peers/py_modern_server.py), which speaks both, each over stdio and Streamable HTTP.
//! The library must probe, speak 2026-07-28, and answer an input round with its elicitation
//! handler. Gated on `SWITCHBOARD_PEERS=1`.

use crate::demo_server::peers_enabled;
use crate::support::repo_root;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::core::protocol::PeerRequestKind;
use switchboard::{
    form_defaults, Builder, ElicitationHandler, Era, PeerAnswer, PeerFuture, PeerRequest,
};

fn node() -> String {
    repo_root()
        .join("tests/peers/node_modules/node/bin/node")
        .to_string_lossy()
        .into_owned()
}

fn script() -> String {
    let s = repo_root().join("tests/peers/ts_v2_server.mjs");
    let sdk = repo_root().join("tests/peers/node_modules/@modelcontextprotocol/server");
    assert!(
        sdk.exists(),
        "{} is missing: run ./scripts/install-peers.sh",
        sdk.display()
    );
    s.to_string_lossy().into_owned()
}

/// Accepts every form with its defaults.
struct Defaults;

impl ElicitationHandler for Defaults {
    fn elicit(&self, request: PeerRequest) -> PeerFuture {
        let answer = match &request.kind {
            PeerRequestKind::ElicitForm {
                requested_schema, ..
            } => PeerAnswer::Accept {
                content: Some(form_defaults(requested_schema)),
            },
            _ => PeerAnswer::Decline,
        };
        Box::pin(async move { answer })
    }
}

fn check_modern(spec: ServerSpec) {
    check_modern_answering(spec, r#"answer: accept {"sure":true}"#);
}

/// Connect, check the revision, call `echo`, then `confirm`, whose input round the handler
/// answers (`confirmed`: what the server says it got).
fn check_modern_answering(spec: ServerSpec, confirmed: &str) {
    check_modern_probing(spec, confirmed, None);
}

/// As [`check_modern_answering`], with the probe's wait set to `probe_timeout`.
fn check_modern_probing(spec: ServerSpec, confirmed: &str, probe_timeout: Option<Duration>) {
    smol::block_on(async {
        let name = spec.name.clone();
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            .elicitation_handler(Arc::new(Defaults))
            .manager_options(move |o| {
                if let Some(t) = probe_timeout {
                    o.protocol.probe_timeout = t;
                }
            })
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec![name.clone()], "{report:?}");
        let state = sb.server_state(&name).unwrap();
        assert_eq!(state.protocol_version.as_deref(), Some("2026-07-28"));
        assert_eq!(state.era, Some(Era::Modern));
        let echo = format!("mcp_{}_echo", name.replace('-', "_"));
        let r = sb.call(&echo, json!({"text": "stateless"})).await.unwrap();
        assert_eq!(r.render_text(), "stateless");
        // The server asks for a confirmation in an input round; the handler accepts the
        // form's defaults and the retry carries them.
        let confirm = format!("mcp_{}_confirm", name.replace('-', "_"));
        let r = sb.call(&confirm, json!({})).await.unwrap();
        assert_eq!(r.render_text(), confirmed);
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn ts_sdk_v2_server_rejecting_legacy_clients_connects_over_stdio_with_2026_07_28() {
    if !peers_enabled("ts_sdk_v2_stdio") {
        return;
    }
    let script = script();
    check_modern(ServerSpec::new(
        "v2-stdio",
        ServerConfig::stdio(node(), &[&script, "--reject-legacy"]),
    ));
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn ts_sdk_v2_server_rejecting_legacy_clients_connects_over_streamable_http_with_2026_07_28() {
    if !peers_enabled("ts_sdk_v2_http") {
        return;
    }
    let mut child = Command::new(node())
        .args([&script(), "--http", "--reject-legacy"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    let outcome = std::panic::catch_unwind(|| {
        check_modern(ServerSpec::new("v2-http", ServerConfig::http(url)));
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn ts_sdk_v2_server_that_serves_legacy_clients_too_is_spoken_to_in_2026_07_28() {
    if !peers_enabled("ts_sdk_v2_stdio_both") {
        return;
    }
    let script = script();
    check_modern(ServerSpec::new(
        "v2-both",
        ServerConfig::stdio(node(), &[&script]),
    ));
}

fn python_modern(args: &[&str]) -> (String, Vec<String>) {
    let python = repo_root().join("tests/peers/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/install-peers.sh",
        python.display()
    );
    let script = repo_root().join("tests/peers/py_modern_server.py");
    let mut argv = vec![script.to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| a.to_string()));
    (python.to_string_lossy().into_owned(), argv)
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn python_sdk_server_is_spoken_to_in_2026_07_28_over_stdio() {
    if !peers_enabled("py_modern_stdio") {
        return;
    }
    let (python, argv) = python_modern(&[]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    check_modern_answering(
        ServerSpec::new("py-stdio", ServerConfig::stdio(python, &argv)),
        "sure: true",
    );
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn python_sdk_server_is_spoken_to_in_2026_07_28_over_streamable_http() {
    if !peers_enabled("py_modern_http") {
        return;
    }
    let port = crate::http_peers::free_port();
    let (python, argv) = python_modern(&["--port", &port.to_string()]);
    let mut cmd = Command::new(python);
    cmd.args(&argv);
    let peer = crate::http_peers::PeerProcess::spawn(cmd, port);
    let url = format!("http://127.0.0.1:{}/mcp", peer.port);
    check_modern_answering(
        ServerSpec::new("py-http", ServerConfig::http(url)),
        "sure: true",
    );
}

/// A server slow to start answers the probe after its timeout (forced here: 1 ms), once the
/// client has sent `initialize`; a stdio server answers in order, so the `DiscoverResult`
/// comes first and decides the revision, and the refusal (or acceptance) of `initialize`
/// that follows changes nothing.
#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn stateless_stdio_servers_answering_the_probe_after_its_timeout_are_spoken_to_in_2026_07_28() {
    if !peers_enabled("late_discover_stdio") {
        return;
    }
    let late = Some(Duration::from_millis(1));
    let script = script();
    check_modern_probing(
        ServerSpec::new(
            "v2-late",
            ServerConfig::stdio(node(), &[&script, "--reject-legacy"]),
        ),
        r#"answer: accept {"sure":true}"#,
        late,
    );
    let (python, argv) = python_modern(&[]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    check_modern_probing(
        ServerSpec::new("py-late", ServerConfig::stdio(python, &argv)),
        "sure: true",
        late,
    );
}

/// Start the TypeScript SDK v2 server over HTTP with `args`; its URL and process.
fn ts_v2_http(args: &[&str]) -> (String, std::process::Child) {
    let mut argv = vec![
        script(),
        "--http".to_string(),
        "--reject-legacy".to_string(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    let mut child = Command::new(node())
        .args(&argv)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (url, child)
}

/// Two starts of the library with one disk cache against a server whose tool lists say they
/// stay fresh for `ttl_ms`: how many `tools/list` requests the server received.
fn lists_over_two_starts(ttl_ms: u64) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("methods.log");
    let ttl = ttl_ms.to_string();
    let (url, mut child) = ts_v2_http(&["--cache-ttl-ms", &ttl, "--log", &log.to_string_lossy()]);
    let cache = dir.path().join("cache");
    let outcome = std::panic::catch_unwind(|| {
        for _ in 0..2 {
            smol::block_on(async {
                let spec = ServerSpec::new("v2-hints", ServerConfig::http(url.clone()));
                let (sb, report) = Builder::servers(vec![spec])
                    .cache_dir(cache.clone())
                    .start()
                    .await
                    .unwrap();
                assert_eq!(report.connected, vec!["v2-hints"], "{report:?}");
                assert_eq!(sb.server_state("v2-hints").unwrap().era, Some(Era::Modern));
                let r = sb
                    .call("mcp_v2_hints_echo", json!({"text": "cached"}))
                    .await
                    .unwrap();
                assert_eq!(r.render_text(), "cached");
                sb.shutdown().await;
            });
        }
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    text.lines().filter(|m| *m == "tools/list").count()
}

/// The SDK's cache hints govern the disk cache: with a live TTL the second start is ready
/// from the first one's lists without asking for them; with `ttlMs: 0` it lists again.
#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn ts_sdk_v2_cache_hints_let_a_warm_start_skip_listing_only_while_fresh() {
    if !peers_enabled("ts_sdk_v2_cache_hints") {
        return;
    }
    assert_eq!(lists_over_two_starts(600_000), 1);
    assert_eq!(lists_over_two_starts(0), 2);
}
