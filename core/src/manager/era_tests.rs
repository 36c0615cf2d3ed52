//! The protocol revision decided per attempt, driven through the manager's inputs: a stateless
//! server found by the probe, a legacy one (whatever error it answers), a silent one (the probe
//! times out), a version retry, a warm start that skips the probe (but not on a handshake the cache
//! remembered only after the attempt spoke and failed), a version refusal that stands at once when
//! the probe proved undeliverable (while any other error to `initialize` decides at once even with
//! the probe still out), and an input round whose state is echoed as written.

use super::*;
use crate::config::{ServerConfig, ServerSpec};
use crate::time::Instant;
use bytes::Bytes;
use serde_json::{json, Value};
use std::time::Duration;

pub(super) fn probing() -> ManagerOptions {
    let mut o = ManagerOptions::default();
    o.protocol.probe = true;
    o.client_version = "test".into();
    o
}

pub(super) fn drain(m: &mut Manager) -> Vec<Output> {
    std::iter::from_fn(|| m.poll_output()).collect()
}

/// The requests sent: (conn, id, method, params).
pub(super) fn sent(outs: &[Output]) -> Vec<(ConnId, u64, String, Value, FrameMeta)> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Send { conn, frame, meta } => {
                let v: Value = serde_json::from_slice(frame).unwrap();
                let id = v.get("id").and_then(Value::as_u64)?;
                let method = v.get("method")?.as_str()?.to_string();
                Some((*conn, id, method, v["params"].clone(), meta.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The notifications of `method` among `outs`: (connection, params).
pub(super) fn notified(outs: &[Output], method: &str) -> Vec<(ConnId, Value)> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Send { conn, frame, .. } => {
                let v: Value = serde_json::from_slice(frame).unwrap();
                (v.get("id").is_none() && v["method"] == method)
                    .then(|| (*conn, v["params"].clone()))
            }
            _ => None,
        })
        .collect()
}

pub(super) fn open(m: &mut Manager, at: u64) -> (ConnId, Vec<Output>) {
    let spec = ServerSpec::new("s", ServerConfig::stdio("srv", &[]));
    m.handle(
        Instant::from_millis(at),
        Input::Connect {
            request: RequestId(at),
            servers: vec![spec],
        },
    );
    let outs = drain(m);
    let conn = outs
        .iter()
        .find_map(|o| match o {
            Output::OpenTransport { conn, .. } => Some(*conn),
            _ => None,
        })
        .unwrap();
    m.handle(
        Instant::from_millis(at),
        Input::Transport {
            conn,
            event: TransportEvent::Opened,
        },
    );
    (conn, drain(m))
}

/// Connects server `s` at time zero without opening its transport: the attempt and the key
/// its cache entry is asked for under.
pub(super) fn connect_unopened(m: &mut Manager) -> (ConnId, CacheKey) {
    let spec = ServerSpec::new("s", ServerConfig::stdio("srv", &[]));
    m.handle(
        Instant::ZERO,
        Input::Connect {
            request: RequestId(1),
            servers: vec![spec],
        },
    );
    let outs = drain(m);
    let (conn, key) = outs.iter().fold((None, None), |(c, k), o| match o {
        Output::OpenTransport { conn, .. } => (Some(*conn), k),
        Output::LoadCache { key, .. } => (c, Some(key.clone())),
        _ => (c, k),
    });
    (conn.expect("opened"), key.expect("the cache is asked"))
}

/// Server `s` connected at time zero (not yet opened) with a 100 ms startup gate; its cache
/// answers `cached` at 1 ms, and the gate passes at 100 ms: shown from its cache while it
/// starts. The manager and the attempt.
pub(super) fn deferred_on_cache(
    o: ManagerOptions,
    cached: Vec<crate::tool::ToolDef>,
) -> (Manager, ConnId) {
    let o = ManagerOptions {
        gate: std::time::Duration::from_millis(100),
        ..o
    };
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, key) = connect_unopened(&mut m);
    cache_answers(&mut m, 1, key, cached, None);
    m.handle_timeout(Instant::from_millis(100));
    drain(&mut m);
    (m, conn)
}

/// The transport of attempt `conn` opened at `at` ms: what the manager sent on it.
pub(super) fn transport_opened(m: &mut Manager, at: u64, conn: ConnId) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::Transport {
            conn,
            event: TransportEvent::Opened,
        },
    );
    drain(m)
}

/// Closes `conn` as a process that exited (at `at` ms): what followed.
pub(super) fn closed(m: &mut Manager, at: u64, conn: ConnId) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exit 1".into(),
            },
        },
    );
    drain(m)
}

/// Closes `conn` as a process that exited (at `at` ms), then runs the reconnect that
/// follows: the new attempt, opened; when; and what its opening sent.
pub(super) fn lose_and_reconnect(
    m: &mut Manager,
    conn: ConnId,
    at: u64,
) -> (ConnId, Instant, Vec<Output>) {
    closed(m, at, conn);
    let at = m.poll_timeout().expect("a reconnect is due");
    m.handle_timeout(at);
    let conn = drain(m)
        .iter()
        .find_map(|o| match o {
            Output::OpenTransport { conn, .. } => Some(*conn),
            _ => None,
        })
        .expect("the reconnect opens a transport");
    m.handle(
        at,
        Input::Transport {
            conn,
            event: TransportEvent::Opened,
        },
    );
    (conn, at, drain(m))
}

/// The cache answers `key` (at `at` ms) with `tools` and `catalog`.
pub(super) fn cache_answers(
    m: &mut Manager,
    at: u64,
    key: CacheKey,
    tools: Vec<crate::tool::ToolDef>,
    catalog: Option<crate::catalog::Catalog>,
) {
    m.handle(
        Instant::from_millis(at),
        Input::CacheLoaded {
            server: "s".into(),
            key,
            tools: Some(tools),
            catalog,
        },
    );
    drain(m);
}

pub(super) fn answer(m: &mut Manager, at: u64, conn: ConnId, body: Value) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::Transport {
            conn,
            event: TransportEvent::Frame(Bytes::from(body.to_string())),
        },
    );
    drain(m)
}

pub(super) fn discover_ok(id: u64) -> Value {
    discover_with(id, json!({"tools": {}}))
}

/// A `server/discover` answer to request `id`, for a stateless server declaring `caps`.
pub(super) fn discover_with(id: u64, caps: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": caps, "serverInfo": {"name": "s", "version": "1"}}})
}

pub(super) fn has_full_meta(params: &Value) -> bool {
    let m = &params["_meta"];
    m["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        && m["io.modelcontextprotocol/clientCapabilities"].is_object()
        && m["io.modelcontextprotocol/clientInfo"]["name"] == "switchboard"
}

#[test]
fn a_discover_result_makes_the_attempt_stateless_and_every_request_carries_the_meta() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let reqs = sent(&outs);
    assert_eq!(reqs.len(), 1);
    let (_, id, method, params, meta) = &reqs[0];
    assert_eq!(method, "server/discover");
    assert!(has_full_meta(params), "{params}");
    assert_eq!(meta.protocol, Some("2026-07-28"));
    let outs = answer(&mut m, 5, conn, discover_ok(*id));
    let reqs = sent(&outs);
    assert_eq!(reqs[0].2, "tools/list");
    assert!(has_full_meta(&reqs[0].3));
    // No handshake notification in the stateless revision.
    assert!(!outs.iter().any(|o| matches!(o, Output::Send { meta, .. }
        if meta.method == Some("notifications/initialized"))));
    let outs = answer(
        &mut m,
        6,
        conn,
        json!({"jsonrpc": "2.0", "id": reqs[0].1, "result": {"tools": [
            {"name": "t", "inputSchema": {"type": "object", "properties": {
                "r": {"type": "string", "x-mcp-header": "Region"}}}},
            {"name": "bad", "inputSchema": {"type": "object", "properties": {
                "n": {"type": "number", "x-mcp-header": "N"}}}}]}}),
    );
    let state = m.server_state("s").unwrap();
    assert_eq!(state.era, Some(Era::Modern));
    // The word status listings print for it.
    assert_eq!(state.era.map(Era::as_str), Some("modern"));
    assert_eq!(m.counters().probes_modern, 1);
    assert_eq!(state.protocol_version.as_deref(), Some("2026-07-28"));
    assert_eq!(
        state.tool_count, 1,
        "the tool whose header cannot be mirrored is dropped"
    );
    assert_eq!(m.counters().tools_dropped_for_headers, 1);
    let stored = outs.iter().find_map(|o| match o {
        Output::StoreCache { catalog, .. } => catalog.handshake.clone(),
        _ => None,
    });
    assert_eq!(stored.map(|h| h.era), Some(Era::Modern));
    // A call mirrors its annotated argument and names the tool.
    m.handle(
        Instant::from_millis(7),
        Input::CallTool {
            call: CallId(1),
            tool: "mcp_s_t".into(),
            arguments: Some(json!({"r": "eu west"})),
            timeout: None,
            progress: false,
            meta: None,
        },
    );
    let reqs = sent(&drain(&mut m));
    let (_, _, method, params, meta) = &reqs[0];
    assert_eq!(method, "tools/call");
    assert!(has_full_meta(params));
    assert_eq!(meta.name.as_deref(), Some("t"));
    assert_eq!(
        meta.params,
        vec![("Region".to_string(), "eu west".to_string())]
    );
}

#[test]
fn any_error_to_the_probe_means_legacy_and_initialize_follows_on_the_same_connection() {
    for (code, message) in [
        (-32601, "Method not found"),
        (-32000, "Bad Request: Server not initialized"),
        (-32602, "Invalid params"),
        (-32603, "Internal error"),
    ] {
        let mut m = Manager::new(probing(), Instant::ZERO);
        let (conn, outs) = open(&mut m, 0);
        let id = sent(&outs)[0].1;
        let outs = answer(
            &mut m,
            1,
            conn,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
        let reqs = sent(&outs);
        assert_eq!(reqs[0].0, conn);
        assert_eq!(reqs[0].2, "initialize", "after {code}");
        assert!(reqs[0].3.get("_meta").is_none());
        assert_eq!(reqs[0].4.protocol, None);
        assert_eq!(m.counters().probes_legacy, 1);
    }
}

#[test]
fn refused_credentials_on_the_probe_end_the_attempt_as_needs_login_and_close_it() {
    // An HTTP server that wants a login refuses the probe before it refuses anything else:
    // falling back to `initialize` would only be refused again, so the attempt ends with
    // the typed `NeedsLogin`, and the transport (still open) is closed by the core.
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let id = sent(&outs)[0].1;
    m.handle(
        Instant::from_millis(1),
        Input::Transport {
            conn,
            event: TransportEvent::Unauthorized {
                id: Some(id),
                error: crate::auth::AuthError::NeedsLogin,
            },
        },
    );
    let outs = drain(&mut m);
    assert!(!sent(&outs).iter().any(|r| r.2 == "initialize"), "{outs:?}");
    assert!(
        outs.iter()
            .any(|o| matches!(o, Output::CloseTransport { conn: c, .. } if *c == conn)),
        "{outs:?}"
    );
    let err = m.server_state("s").unwrap().last_error.unwrap();
    assert_eq!(err.kind, ServerErrorKind::NeedsLogin);
    assert!(err.message.contains("switchboard login s"), "{err}");
    assert_eq!(m.counters().probes_legacy, 0);
}

fn initialize_ok(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}})
}

#[test]
fn a_silent_stdio_server_is_taken_for_legacy_once_the_probe_times_out() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let id = sent(&outs)[0].1;
    // Not before the probe timeout...
    m.handle_timeout(Instant::from_millis(1999));
    assert!(!sent(&drain(&mut m)).iter().any(|r| r.2 == "initialize"));
    // ...but at it: `initialize`, on the same connection.
    m.handle_timeout(Instant::ZERO + Duration::from_secs(2));
    let reqs = sent(&drain(&mut m));
    assert_eq!(reqs[0].0, conn);
    assert_eq!(reqs[0].2, "initialize");
    // Its answer decides: legacy.
    let outs = answer(&mut m, 2050, conn, initialize_ok(reqs[0].1));
    assert_eq!(sent(&outs)[0].2, "tools/list");
    assert_eq!(m.server_state("s").unwrap().era, Some(Era::Legacy));
    assert_eq!(Era::Legacy.as_str(), "legacy");
    // A late answer to the probe after that changes nothing: the revision was decided once.
    let outs = answer(&mut m, 2100, conn, discover_ok(id));
    assert!(sent(&outs).is_empty());
    assert_eq!(m.server_state("s").unwrap().era, Some(Era::Legacy));
    assert_eq!(m.counters().probe_timeouts, 1);
    assert_eq!(m.counters().probes_legacy, 1);
    assert_eq!(m.counters().late_discovers, 0);
}

#[test]
fn a_discover_result_after_the_probe_timed_out_waits_for_initialize_and_its_refusal_decides_stateless(
) {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)[0].1;
    m.handle_timeout(Instant::ZERO + Duration::from_secs(2));
    let init = sent(&drain(&mut m))[0].1;
    // A server slow to start answers the probe first (stdio answers in order): nothing is
    // decided yet, since it reads the `initialize` sent meanwhile next...
    let outs = answer(&mut m, 2500, conn, discover_ok(probe));
    assert!(sent(&outs).is_empty(), "{outs:?}");
    // ...and refuses it: a stateless-only server, found by its late answer.
    let refusal = json!({"jsonrpc": "2.0", "id": init, "error": {"code": -32022,
        "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"]}}});
    let outs = answer(&mut m, 2501, conn, refusal);
    let reqs = sent(&outs);
    assert_eq!(reqs[0].2, "tools/list");
    assert!(has_full_meta(&reqs[0].3), "{:?}", reqs[0].3);
    assert!(!outs.iter().any(|o| matches!(o, Output::Send { meta, .. }
        if meta.method == Some("notifications/initialized"))));
    let state = m.server_state("s").unwrap();
    assert_eq!(state.era, Some(Era::Modern));
    assert!(state.last_error.is_none(), "{:?}", state.last_error);
    let outs = answer(
        &mut m,
        2510,
        conn,
        json!({"jsonrpc": "2.0", "id": reqs[0].1, "result": {"tools": [{"name": "t"}]}}),
    );
    assert!(outs.iter().any(|o| matches!(o, Output::StoreCache { .. })));
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    let c = m.counters();
    assert_eq!(
        (
            c.late_discovers,
            c.probes_modern,
            c.probes_legacy,
            c.initialize_refusals_held
        ),
        (1, 1, 0, 1)
    );
}

#[test]
fn a_server_of_both_revisions_that_accepts_initialize_after_its_late_discover_result_is_legacy() {
    // A server that speaks both revisions and starts slowly reads the probe, then the
    // `initialize` sent after its timeout, and sets the connection up as a 2025 session:
    // stateless requests would be refused there, so the connection is legacy.
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)[0].1;
    m.handle_timeout(Instant::ZERO + Duration::from_secs(2));
    let init = sent(&drain(&mut m))[0].1;
    assert!(sent(&answer(&mut m, 2500, conn, discover_ok(probe))).is_empty());
    let ok = json!({"jsonrpc": "2.0", "id": init, "result": {"protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}}, "serverInfo": {"name": "both", "version": "1"}}});
    let outs = answer(&mut m, 2501, conn, ok);
    let reqs = sent(&outs);
    assert!(outs.iter().any(|o| matches!(o, Output::Send { meta, .. }
        if meta.method == Some("notifications/initialized"))));
    let list = reqs
        .iter()
        .find(|r| r.2 == "tools/list")
        .expect("tools/list sent");
    assert!(!has_full_meta(&list.3), "{:?}", list.3);
    assert_eq!(m.server_state("s").unwrap().era, Some(Era::Legacy));
    let c = m.counters();
    assert_eq!(
        (c.late_discovers, c.probes_modern, c.probes_legacy),
        (1, 0, 1)
    );
}

#[test]
fn a_version_refusal_of_initialize_before_the_late_discover_result_waits_for_it() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)[0].1;
    m.handle_timeout(Instant::ZERO + Duration::from_secs(2));
    let init = sent(&drain(&mut m))[0].1;
    // Out of order: the refusal first, then the discover answer.
    let refusal = json!({"jsonrpc": "2.0", "id": init, "error": {"code": -32022,
        "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"]}}});
    assert!(sent(&answer(&mut m, 2400, conn, refusal.clone())).is_empty());
    assert!(m.server_state("s").unwrap().last_error.is_none());
    let outs = answer(&mut m, 2500, conn, discover_ok(probe));
    assert_eq!(sent(&outs)[0].2, "tools/list");
    assert_eq!(m.server_state("s").unwrap().era, Some(Era::Modern));
    assert_eq!(m.counters().initialize_refusals_held, 1);
    // Had the probe's late answer been an error, the refusal would have stood.
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)[0].1;
    m.handle_timeout(Instant::ZERO + Duration::from_secs(2));
    let init = sent(&drain(&mut m))[0].1;
    let mut refusal = refusal;
    refusal["id"] = json!(init);
    answer(&mut m, 2400, conn, refusal);
    let late = json!({"jsonrpc": "2.0", "id": probe, "error": {"code": -32601,
        "message": "Method not found"}});
    answer(&mut m, 2500, conn, late);
    let err = m.server_state("s").unwrap().last_error.unwrap();
    assert_eq!(err.kind, ServerErrorKind::UnsupportedVersion);
}

#[test]
fn a_late_error_to_the_probe_leaves_the_decision_to_initialize() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)[0].1;
    m.handle_timeout(Instant::ZERO + Duration::from_secs(2));
    let init = sent(&drain(&mut m))[0].1;
    let late = json!({"jsonrpc": "2.0", "id": probe, "error": {"code": -32601,
        "message": "Method not found"}});
    assert!(sent(&answer(&mut m, 2500, conn, late)).is_empty());
    let outs = answer(&mut m, 2600, conn, initialize_ok(init));
    assert_eq!(sent(&outs)[0].2, "tools/list");
    assert_eq!(m.server_state("s").unwrap().era, Some(Era::Legacy));
    assert_eq!(m.counters().probes_legacy, 1);
}

#[test]
fn an_unsupported_version_error_naming_ours_asks_again_once() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let id = sent(&outs)[0].1;
    let refusal = |id| {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022,
        "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"]}}})
    };
    let outs = answer(&mut m, 1, conn, refusal(id));
    let reqs = sent(&outs);
    assert_eq!(reqs[0].2, "server/discover");
    assert_ne!(reqs[0].1, id);
    let outs = answer(&mut m, 2, conn, refusal(reqs[0].1));
    assert!(sent(&outs).is_empty());
    assert_eq!(
        m.server_state("s").unwrap().last_error.unwrap().kind,
        ServerErrorKind::UnsupportedVersion
    );
    assert_eq!(m.counters().probe_version_retries, 1);
    assert_eq!(m.counters().unsupported_versions, 1);
}

/// A warm start whose cache remembers `handshake` for server `s`: what its transport's
/// opening sent, and the manager.
fn warm_open(handshake: Handshake) -> (Manager, Vec<Output>) {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, key) = connect_unopened(&mut m);
    let catalog = crate::catalog::Catalog {
        handshake: Some(handshake),
        ..Default::default()
    };
    cache_answers(&mut m, 0, key, Vec::new(), Some(catalog));
    m.handle(
        Instant::ZERO,
        Input::Transport {
            conn,
            event: TransportEvent::Opened,
        },
    );
    let outs = drain(&mut m);
    (m, outs)
}

#[test]
fn a_warm_start_of_a_stateless_server_skips_the_probe() {
    let (m, outs) = warm_open(Handshake {
        era: Era::Modern,
        discover: Some(discover_ok(0)["result"].to_string()),
    });
    let reqs = sent(&outs);
    assert_eq!(reqs[0].2, "tools/list");
    assert!(has_full_meta(&reqs[0].3));
    assert_eq!(m.counters().probes_sent, 0);
    assert_eq!(m.counters().probes_skipped, 1);
}

#[test]
fn a_warm_start_of_a_legacy_server_skips_the_probe_and_initializes_at_once() {
    let (m, outs) = warm_open(Handshake {
        era: Era::Legacy,
        discover: None,
    });
    let reqs = sent(&outs);
    assert_eq!(reqs.len(), 1, "{outs:?}");
    assert_eq!(reqs[0].2, "initialize");
    assert_eq!(m.counters().probes_sent, 0);
    assert_eq!(m.counters().probes_skipped, 1);
}

#[test]
fn an_input_round_asks_the_embedder_then_retries_with_the_state_as_written() {
    let mut o = probing();
    o.client_features.elicitation_form = true;
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let id = sent(&outs)[0].1;
    let outs = answer(&mut m, 1, conn, discover_ok(id));
    let list = sent(&outs)[0].1;
    answer(
        &mut m,
        2,
        conn,
        json!({"jsonrpc": "2.0", "id": list, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}),
    );
    m.handle(
        Instant::from_millis(3),
        Input::CallTool {
            call: CallId(9),
            tool: "mcp_s_t".into(),
            arguments: Some(json!({"x": 1})),
            timeout: None,
            progress: false,
            meta: None,
        },
    );
    let first = sent(&drain(&mut m))[0].1;
    let state = r#""a\u00e9\/b""#;
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":{first},"result":{{"resultType":"input_required","inputRequests":{{"ok":{{"method":"elicitation/create","params":{{"message":"sure?","requestedSchema":{{"type":"object","properties":{{}}}}}}}},"roots":{{"method":"roots/list"}}}},"requestState":{state}}}}}"#
    );
    m.handle(
        Instant::from_millis(4),
        Input::Transport {
            conn,
            event: TransportEvent::Frame(Bytes::from(frame)),
        },
    );
    let outs = drain(&mut m);
    let key = outs
        .iter()
        .find_map(|o| match o {
            Output::Event(Event::PeerRequest { request, .. }) => Some(*request),
            _ => None,
        })
        .unwrap();
    assert!(
        sent(&outs).is_empty(),
        "nothing is retried before the input is in"
    );
    // Only the elicitation goes to the embedder; the client answers `roots/list` itself.
    assert_eq!(m.counters().peer_requests_forwarded, 1);
    m.handle(
        Instant::from_millis(5),
        Input::AnswerPeerRequest {
            request: key,
            answer: crate::protocol::PeerAnswer::Accept { content: None },
        },
    );
    let outs = drain(&mut m);
    let retry = outs
        .iter()
        .find_map(|o| match o {
            Output::Send { frame, .. } => Some(String::from_utf8(frame.to_vec()).unwrap()),
            _ => None,
        })
        .unwrap();
    assert!(
        retry.contains(&format!(r#""requestState":{state}"#)),
        "{retry}"
    );
    let v: Value = serde_json::from_str(&retry).unwrap();
    assert_ne!(v["id"].as_u64(), Some(first));
    assert_eq!(v["params"]["arguments"], json!({"x": 1}));
    assert_eq!(v["params"]["inputResponses"]["ok"]["action"], "accept");
    assert!(v["params"]["inputResponses"]["roots"]["roots"].is_array());
    assert!(has_full_meta(&v["params"]));
    assert_eq!(
        (
            m.counters().input_required_rounds,
            m.counters().input_retries
        ),
        (1, 1)
    );
}

#[test]
fn a_remembered_handshake_that_arrives_after_the_attempt_spoke_does_not_skip_the_next_probe() {
    let mut o = probing();
    o.reconnect.retry_startup_failures = true;
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, key) = connect_unopened(&mut m);
    let outs = transport_opened(&mut m, 1, conn);
    let probe = sent(&outs)[0].1;
    let refused = json!({"jsonrpc": "2.0", "id": probe,
        "error": {"code": -32601, "message": "Method not found"}});
    let init = super::legacy_tests::request_of(&answer(&mut m, 2, conn, refused), "initialize");
    answer(
        &mut m,
        3,
        conn,
        super::legacy_tests::initialize_ok(init, json!({"tools": {}})),
    );
    assert_eq!(m.server_state("s").unwrap().era, Some(Era::Legacy));
    // The attempt fails; only then does the cache answer, remembering a handshake. What this
    // attempt spoke may be what failed, so the next one probes again rather than trust it.
    closed(&mut m, 4, conn);
    let catalog = crate::catalog::Catalog {
        handshake: Some(Handshake {
            era: Era::Legacy,
            discover: None,
        }),
        ..Default::default()
    };
    cache_answers(&mut m, 5, key, Vec::new(), Some(catalog));
    let mut next = None;
    while next.is_none() {
        let at = m.poll_timeout().expect("a reconnect is due");
        m.handle_timeout(at);
        next = drain(&mut m).iter().find_map(|o| match o {
            Output::OpenTransport { conn, .. } => Some((*conn, at)),
            _ => None,
        });
    }
    let (conn, at) = next.unwrap();
    let outs = transport_opened(&mut m, at.as_millis(), conn);
    assert_eq!(sent(&outs)[0].2, "server/discover", "{outs:?}");
    let c = m.counters();
    assert_eq!((c.probes_sent, c.probes_skipped), (2, 0));
}

#[test]
fn a_version_refusal_after_the_late_probe_proved_undeliverable_stands_at_once() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)[0].1;
    m.handle_timeout(Instant::ZERO + Duration::from_secs(2));
    let init = sent(&drain(&mut m))[0].1;
    // The transport gives up on the probe: no late answer can come, so `initialize` alone
    // decides, and its refusal is not held for one.
    m.handle(
        Instant::from_millis(2100),
        Input::Transport {
            conn,
            event: TransportEvent::RequestFailed {
                id: probe,
                error: "HTTP 404".into(),
            },
        },
    );
    drain(&mut m);
    let refusal = json!({"jsonrpc": "2.0", "id": init, "error": {"code": -32022,
        "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"]}}});
    answer(&mut m, 2400, conn, refusal);
    let err = m
        .server_state("s")
        .unwrap()
        .last_error
        .expect("failed at once");
    assert_eq!(err.kind, ServerErrorKind::UnsupportedVersion);
    assert_eq!(m.counters().initialize_refusals_held, 0);
}

#[test]
fn an_initialize_error_other_than_a_version_refusal_while_the_probe_is_late_fails_at_once() {
    // Only a refusal of the version waits for the late probe's answer (a stateless-only
    // server may refuse `initialize`); any other error is the server's answer, now.
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, _) = open(&mut m, 0);
    m.handle_timeout(Instant::ZERO + Duration::from_secs(2));
    let init = sent(&drain(&mut m))[0].1;
    let failure = json!({"jsonrpc": "2.0", "id": init, "error": {"code": -32603,
        "message": "Internal error"}});
    answer(&mut m, 2400, conn, failure);
    let err = m
        .server_state("s")
        .unwrap()
        .last_error
        .expect("failed at once");
    assert_eq!(err.kind, ServerErrorKind::InitializeFailed);
    assert_eq!(m.counters().initialize_refusals_held, 0);
}
