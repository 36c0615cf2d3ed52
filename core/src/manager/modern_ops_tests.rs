//! Operations on a stateless server. Input rounds on reads and prompts: a server that answers
//! `resources/read` or `prompts/get` with an `InputRequiredResult` gets the inputs and its state
//! back as written, a missing handler fails the request with a typed error, and the request's own
//! deadline bounds every round; a read or a tool call takes at most `MAX_INPUT_ROUNDS` of them. A
//! log level rides in every request's `_meta` instead of `logging/setLevel`. Changes are heard on a
//! `subscriptions/listen` stream, asked again when it ends, and resource subscriptions are changes
//! of its filter.

use super::era_tests::{answer, drain, has_full_meta, lose_and_reconnect, open, probing, sent};
use super::legacy_tests::call_outcome;
use super::*;
use crate::catalog::{Operation, OperationOutcome, OperationResult};
use crate::protocol::{PeerAnswer, PeerRequestKind};
use crate::time::Instant;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// [`probing`] with one root of the manager's own, `file:///configured`.
fn probing_with_roots() -> ManagerOptions {
    let mut o = probing();
    o.roots = vec![crate::protocol::Root {
        uri: "file:///configured".into(),
        name: None,
    }];
    o
}

/// A stateless server with tools, resources and prompts, connected and listed.
fn connected(o: ManagerOptions) -> (Manager, ConnId) {
    let caps = json!({"tools": {}, "resources": {}, "prompts": {}, "logging": {}});
    let (m, conn, _) = connected_with(o, caps);
    (m, conn)
}

/// Connected with these capabilities; also the `subscriptions/listen` request, if one went
/// out (its id and params).
pub(super) fn connected_with(
    o: ManagerOptions,
    caps: Value,
) -> (Manager, ConnId, Option<(u64, Value)>) {
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let id = sent(&outs)[0].1;
    let discover = json!({"jsonrpc": "2.0", "id": id, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": caps, "serverInfo": {"name": "s", "version": "1"}}});
    let outs = answer(&mut m, 1, conn, discover);
    let (_, listen) = answer_lists(&mut m, 2, conn, outs);
    (m, conn, listen)
}

/// Answer every listing `outs` asks for, and those that follow, until none is left: what
/// the answers produced, and the `subscriptions/listen` request, if one went out.
fn answer_lists(
    m: &mut Manager,
    at: u64,
    conn: ConnId,
    outs: Vec<Output>,
) -> (Vec<Output>, Option<(u64, Value)>) {
    let mut pending = sent(&outs);
    let mut all = outs;
    let mut listen = None;
    while let Some((_, id, method, params, _)) = pending.pop() {
        let result = match method.as_str() {
            "subscriptions/listen" => {
                listen = Some((id, params));
                continue;
            }
            // A reconnect may probe again: the same server answers.
            "server/discover" => json!({
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "resources": {}, "prompts": {}, "logging": {}},
                "serverInfo": {"name": "s", "version": "1"}}),
            "tools/list" => json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
            "resources/list" => json!({"resources": [{"uri": "sim://s/a", "name": "a"}]}),
            "resources/templates/list" => json!({"resourceTemplates": []}),
            "prompts/list" => json!({"prompts": [{"name": "p"}]}),
            other => panic!("unexpected {other}"),
        };
        let more = answer(
            m,
            at,
            conn,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
        pending.extend(sent(&more));
        all.extend(more);
    }
    (all, listen)
}

fn input_required(id: u64, requests: &str, state: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{{requests}}},"requestState":{state}}}}}"#
    ))
}

const ELICIT: &str = r#""ok":{"method":"elicitation/create","params":{"message":"sure?","requestedSchema":{"type":"object","properties":{}}}}"#;

pub(super) fn frame(m: &mut Manager, at: u64, conn: ConnId, frame: Bytes) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::Transport {
            conn,
            event: TransportEvent::Frame(frame),
        },
    );
    drain(m)
}

fn completed(outs: &[Output]) -> Option<OperationOutcome> {
    outs.iter().find_map(|o| match o {
        Output::Event(Event::OperationCompleted { outcome, .. }) => Some(outcome.clone()),
        _ => None,
    })
}

fn read(m: &mut Manager, at: u64, timeout: Option<Duration>) -> (u64, Vec<Output>) {
    m.handle(
        Instant::from_millis(at),
        Input::Operation {
            call: CallId(7),
            op: Operation::ReadResource {
                uri: "sim://s/a".into(),
                server: Some("s".into()),
            },
            timeout,
        },
    );
    let outs = drain(m);
    let id = sent(&outs)
        .iter()
        .find(|r| r.2 == "resources/read")
        .map(|r| r.1)
        .expect("the read is sent");
    (id, outs)
}

#[test]
fn a_read_that_asks_for_input_is_retried_with_the_answers_and_the_state_as_written() {
    let mut o = probing();
    o.client_features.elicitation_form = true;
    let (mut m, conn) = connected(o);
    let (first, outs) = read(&mut m, 10, None);
    // A stateless request names what it reads (`Mcp-Name`), and so does its retry.
    let name_of = |outs: &[Output]| {
        sent(outs)
            .into_iter()
            .find(|r| r.2 == "resources/read")
            .and_then(|r| r.4.name)
    };
    assert_eq!(name_of(&outs).as_deref(), Some("sim://s/a"));
    let state = r#"{"k":"a\u00e9\/b", "n":1}"#;
    let requests = format!(r#"{ELICIT},"where":{{"method":"roots/list"}}"#);
    let outs = frame(&mut m, 11, conn, input_required(first, &requests, state));
    assert!(
        sent(&outs).is_empty(),
        "nothing is retried before the input"
    );
    assert!(completed(&outs).is_none());
    let key = outs
        .iter()
        .find_map(|o| match o {
            Output::Event(Event::PeerRequest { request, .. }) => Some(*request),
            _ => None,
        })
        .expect("the embedder is asked");
    m.handle(
        Instant::from_millis(12),
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
        .expect("the read is sent again");
    assert_eq!(name_of(&outs).as_deref(), Some("sim://s/a"));
    assert!(
        retry.contains(&format!(r#""requestState":{state}"#)),
        "{retry}"
    );
    let v: Value = serde_json::from_str(&retry).unwrap();
    assert_eq!(v["method"], "resources/read");
    let second = v["id"].as_u64().unwrap();
    assert_ne!(second, first);
    assert_eq!(v["params"]["uri"], "sim://s/a");
    assert_eq!(v["params"]["inputResponses"]["ok"]["action"], "accept");
    assert!(v["params"]["inputResponses"]["where"]["roots"].is_array());
    assert!(has_full_meta(&v["params"]));
    let done = json!({"jsonrpc": "2.0", "id": second, "result": {
        "resultType": "complete", "contents": [{"uri": "sim://s/a", "text": "hi"}]}});
    let outs = answer(&mut m, 13, conn, done);
    match completed(&outs) {
        Some(OperationOutcome::Ok(OperationResult::Read(r))) => {
            assert_eq!(r.contents.len(), 1)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m.counters().input_retries, 1);
}

#[test]
fn with_roots_inputs_for_the_embedder_a_roots_input_is_asked_under_the_servers_key() {
    let mut o = probing();
    o.client_features.elicitation_form = true;
    o.roots_inputs = RootsInputs::Embedder;
    let (mut m, conn) = connected(o);
    let (first, outs) = read(&mut m, 10, None);
    let params = &sent(&outs)
        .into_iter()
        .find(|r| r.2 == "resources/read")
        .unwrap()
        .3;
    assert!(
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["roots"].is_object(),
        "the roots capability is declared: {params}"
    );
    let requests = format!(r#"{ELICIT},"where":{{"method":"roots/list"}}"#);
    let outs = frame(&mut m, 11, conn, input_required(first, &requests, "1"));
    // Both inputs go to the embedder, each with the server's key for it.
    let asked: Vec<(PeerRequestKey, PeerRequestKind, Option<RoundInput>)> = outs
        .iter()
        .filter_map(|o| match o {
            Output::Event(Event::PeerRequest {
                request,
                kind,
                input,
                ..
            }) => Some((*request, kind.clone(), input.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    let roots = asked
        .iter()
        .find(|(_, k, _)| *k == PeerRequestKind::Roots)
        .expect("the roots are asked of the embedder");
    let of = |key: &str| {
        Some(RoundInput {
            key: key.into(),
            of: 2,
        })
    };
    assert_eq!(roots.2, of("where"));
    let form = asked
        .iter()
        .find(|(_, k, _)| k.is_elicitation())
        .expect("the elicitation is asked");
    assert_eq!(form.2, of("ok"));
    m.handle(
        Instant::from_millis(12),
        Input::AnswerPeerRequest {
            request: form.0,
            answer: PeerAnswer::Accept { content: None },
        },
    );
    assert!(sent(&drain(&mut m)).is_empty(), "the roots are still out");
    m.handle(
        Instant::from_millis(13),
        Input::AnswerPeerRequest {
            request: roots.0,
            answer: PeerAnswer::Result {
                result: json!({"roots": [{"uri": "file:///downstream"}]}),
            },
        },
    );
    let retry = sent(&drain(&mut m))
        .into_iter()
        .find(|r| r.2 == "resources/read")
        .expect("the read is sent again");
    let responses = &retry.3["inputResponses"];
    assert_eq!(responses["where"]["roots"][0]["uri"], "file:///downstream");
    assert_eq!(responses["ok"]["action"], "accept");
}

#[test]
fn by_default_a_roots_input_is_answered_from_the_managers_roots_without_the_embedder() {
    let (mut m, conn) = connected(probing_with_roots());
    let (first, _) = read(&mut m, 10, None);
    let outs = frame(
        &mut m,
        11,
        conn,
        input_required(first, r#""where":{"method":"roots/list"}"#, "1"),
    );
    assert!(!outs
        .iter()
        .any(|o| matches!(o, Output::Event(Event::PeerRequest { .. }))));
    let retry = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "resources/read")
        .expect("retried at once");
    assert_eq!(
        retry.3["inputResponses"]["where"]["roots"][0]["uri"],
        "file:///configured"
    );
}

#[test]
fn a_prompt_that_asks_for_an_input_without_a_handler_fails_with_a_typed_error() {
    let (mut m, conn) = connected(probing());
    m.handle(
        Instant::from_millis(10),
        Input::Operation {
            call: CallId(8),
            op: Operation::GetPrompt {
                name: "mcp_s_p".into(),
                arguments: BTreeMap::new(),
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    let req = sent(&outs);
    let (first, header) = req
        .iter()
        .find(|r| r.2 == "prompts/get")
        .map(|r| (r.1, r.4.name.clone()))
        .expect("the prompt is asked");
    // `Mcp-Name` names the prompt as its server knows it.
    assert_eq!(header.as_deref(), Some("p"));
    let outs = frame(&mut m, 11, conn, input_required(first, ELICIT, r#""s""#));
    match completed(&outs) {
        Some(OperationOutcome::Err(CallError::InputUnavailable { method, .. })) => {
            assert_eq!(method, "elicitation/create")
        }
        other => panic!("{other:?}"),
    }
    assert!(sent(&outs).is_empty(), "no retry without the input");
    assert_eq!(m.counters().inputs_unavailable, 1);
}

#[test]
fn the_reads_deadline_bounds_its_input_rounds() {
    let mut o = probing();
    o.client_features.elicitation_form = true;
    o.peer_request_timeout = Duration::from_secs(600);
    let (mut m, conn) = connected(o);
    let (first, _) = read(&mut m, 10, Some(Duration::from_secs(5)));
    let outs = frame(&mut m, 11, conn, input_required(first, ELICIT, r#""s""#));
    assert!(completed(&outs).is_none());
    m.handle_timeout(Instant::from_millis(5_010));
    let outs = drain(&mut m);
    assert!(
        matches!(
            completed(&outs),
            Some(OperationOutcome::Err(CallError::OperationTimeout { .. }))
        ),
        "{outs:?}"
    );
    assert!(
        outs.iter()
            .any(|o| matches!(o, Output::Event(Event::PeerRequestWithdrawn { .. }))),
        "the input still asked is withdrawn"
    );
    assert!(m.operations_in_flight().is_empty());
    assert_eq!(m.counters().operation_timeouts, 1);
}

#[test]
fn a_log_level_on_a_stateless_server_rides_in_every_requests_meta() {
    let (mut m, conn) = connected(probing());
    m.handle(
        Instant::from_millis(10),
        Input::Operation {
            call: CallId(3),
            op: Operation::SetLogLevel {
                server: "s".into(),
                level: crate::catalog::LogLevel::Warning,
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    assert!(sent(&outs).is_empty(), "no logging/setLevel: {outs:?}");
    assert!(matches!(
        completed(&outs),
        Some(OperationOutcome::Ok(OperationResult::Done { .. }))
    ));
    let (_, outs) = read(&mut m, 11, None);
    let r = sent(&outs);
    let params = &r.iter().find(|r| r.2 == "resources/read").unwrap().3;
    assert_eq!(
        params["_meta"]["io.modelcontextprotocol/logLevel"], "warning",
        "{params}"
    );
    assert!(has_full_meta(params));
    assert_eq!(m.counters().log_levels_per_request, 1);
    let _ = conn;
}

pub(super) const LISTING_CAPS: &str =
    r#"{"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}}"#;

pub(super) fn stream_frame(sub: u64, method: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","method":"{method}","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":{sub}}}}}}}"#
    ))
}

#[test]
fn a_stateless_connection_listens_and_asks_again_when_the_stream_ends() {
    let caps: Value = serde_json::from_str(LISTING_CAPS).unwrap();
    let (mut m, conn, listen) = connected_with(probing(), caps);
    let (sub, params) = listen.expect("a stream is asked for once the server is ready");
    assert_eq!(params["notifications"]["toolsListChanged"], true);
    assert_eq!(params["notifications"]["resourcesListChanged"], true);
    assert!(params["notifications"].get("promptsListChanged").is_none());
    // Nothing is subscribed yet: the filter names no resources (not an empty list).
    assert!(params["notifications"]
        .get("resourceSubscriptions")
        .is_none());
    assert!(has_full_meta(&params));
    frame(
        &mut m,
        10,
        conn,
        stream_frame(sub, "notifications/subscriptions/acknowledged"),
    );
    // A change announced on the stream is listed again.
    let outs = frame(
        &mut m,
        11,
        conn,
        stream_frame(sub, "notifications/tools/list_changed"),
    );
    assert!(sent(&outs).iter().any(|r| r.2 == "tools/list"), "{outs:?}");
    // The server ends the stream: asked again on the ladder's first rung, not at once.
    let end = json!({"jsonrpc": "2.0", "id": sub, "result": {"resultType": "complete"}});
    let outs = answer(&mut m, 20, conn, end);
    assert!(!sent(&outs).iter().any(|r| r.2 == "subscriptions/listen"));
    m.handle_timeout(Instant::from_millis(519));
    let early = sent(&drain(&mut m));
    assert!(
        !early.iter().any(|r| r.2 == "subscriptions/listen"),
        "{early:?}"
    );
    m.handle_timeout(Instant::from_millis(520));
    let again = sent(&drain(&mut m));
    let sub2 = again
        .iter()
        .find(|r| r.2 == "subscriptions/listen")
        .expect("the stream is asked again")
        .1;
    assert_ne!(sub2, sub);
    // Its acknowledgement lists again what a closed stream may have missed.
    let outs = frame(
        &mut m,
        530,
        conn,
        stream_frame(sub2, "notifications/subscriptions/acknowledged"),
    );
    let relisted: Vec<String> = sent(&outs).into_iter().map(|r| r.2).collect();
    assert!(
        relisted.contains(&"resources/list".to_string()),
        "{relisted:?}"
    );
    assert_eq!(m.counters().listens_resent, 1);
    assert_eq!(m.counters().lists_refetched_after_stream, 1);
}

#[test]
fn a_subscription_on_a_stateless_server_changes_the_streams_filter() {
    let caps: Value = serde_json::from_str(LISTING_CAPS).unwrap();
    let (mut m, _, listen) = connected_with(probing(), caps);
    let (sub, _) = listen.unwrap();
    m.handle(
        Instant::from_millis(10),
        Input::Operation {
            call: CallId(4),
            op: Operation::Subscribe {
                uri: "sim://s/a".into(),
                server: Some("s".into()),
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    let frames: Vec<Value> = outs
        .iter()
        .filter_map(|o| match o {
            Output::Send { frame, .. } => serde_json::from_slice(frame).ok(),
            _ => None,
        })
        .collect();
    assert!(
        frames.iter().all(|f| f["method"] != "resources/subscribe"),
        "{frames:?}"
    );
    assert!(frames
        .iter()
        .any(|f| f["method"] == "notifications/cancelled" && f["params"]["requestId"] == sub));
    let listen = frames
        .iter()
        .find(|f| f["method"] == "subscriptions/listen")
        .expect("the stream is asked again with the new filter");
    assert_eq!(
        listen["params"]["notifications"]["resourceSubscriptions"],
        json!(["sim://s/a"])
    );
    assert!(matches!(
        completed(&outs),
        Some(OperationOutcome::Ok(OperationResult::Done { .. }))
    ));
}

#[test]
fn a_refused_stream_is_not_asked_again() {
    let caps: Value = serde_json::from_str(LISTING_CAPS).unwrap();
    let (mut m, conn, listen) = connected_with(probing(), caps);
    let (sub, _) = listen.unwrap();
    let refused = json!({"jsonrpc": "2.0", "id": sub,
        "error": {"code": -32601, "message": "Method not found"}});
    answer(&mut m, 10, conn, refused);
    assert_eq!(m.counters().listens_refused, 1);
    m.handle_timeout(Instant::from_millis(60_000));
    let later = sent(&drain(&mut m));
    assert!(
        !later.iter().any(|r| r.2 == "subscriptions/listen"),
        "{later:?}"
    );
}

#[test]
fn each_first_list_of_the_catalog_is_applied_once() {
    let (m, _) = connected(probing());
    let c = m.counters();
    assert_eq!(
        (
            c.resource_lists_applied,
            c.template_lists_applied,
            c.prompt_lists_applied
        ),
        (1, 1, 1)
    );
    assert_eq!(m.resources().len(), 1);
    assert_eq!(m.prompts().len(), 1);
    assert_eq!(m.resolve_prompt("mcp_s_p"), Some(("s", "p")));
    assert_eq!(m.resolve_prompt("mcp_s_q"), None);
}

#[test]
fn a_lost_connection_leaves_the_last_listed_catalog_shown_deferred() {
    let (mut m, conn) = connected(probing());
    m.handle(
        Instant::from_millis(10),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exit 1".into(),
            },
        },
    );
    drain(&mut m);
    assert_eq!(m.server_state("s").unwrap().phase, Phase::Backoff);
    let resources = m.resources();
    assert_eq!(resources.len(), 1, "{resources:?}");
    assert_eq!(resources[0].def.uri, "sim://s/a");
    assert!(resources[0].deferred);
    let prompts = m.prompts();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert!(prompts[0].deferred);
}

#[test]
fn an_unanswered_catalog_list_is_cancelled_and_counted_as_a_request_timeout() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let id = sent(&outs)[0].1;
    let discover = json!({"jsonrpc": "2.0", "id": id, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "resources": {}},
        "serverInfo": {"name": "s", "version": "1"}}});
    let reqs = sent(&answer(&mut m, 1, conn, discover));
    let find = |method: &str| reqs.iter().find(|r| r.2 == method).map(|r| r.1).unwrap();
    let tools = find("tools/list");
    let lists = [find("resources/list"), find("resources/templates/list")];
    answer(
        &mut m,
        2,
        conn,
        json!({"jsonrpc": "2.0", "id": tools, "result": {"tools": [{"name": "t"}]}}),
    );
    m.handle_timeout(Instant::from_millis(1) + Duration::from_secs(30));
    let outs = drain(&mut m);
    let cancelled: Vec<u64> = outs
        .iter()
        .filter_map(|o| match o {
            Output::Send { meta, .. } => match meta.kind {
                FrameKind::Notification { cancels } => cancels,
                _ => None,
            },
            _ => None,
        })
        .collect();
    // Each list unanswered is cancelled once and counted once.
    assert_eq!(cancelled, lists);
    assert_eq!(m.counters().request_timeouts, 2);
    assert_eq!(m.counters().resource_lists_applied, 0);
}

#[test]
fn a_catalog_list_that_repeats_a_cursor_ends_there() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let id = sent(&outs)[0].1;
    let discover = json!({"jsonrpc": "2.0", "id": id, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": {"resources": {}}, "serverInfo": {"name": "s", "version": "1"}}});
    let outs = answer(&mut m, 1, conn, discover);
    let page = |m: &mut Manager, id: u64, uri: &str| {
        let result = json!({"resources": [{"uri": uri, "name": uri}], "nextCursor": "c"});
        let outs = answer(
            m,
            2,
            conn,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
        sent(&outs)
            .into_iter()
            .filter(|r| r.2 == "resources/list")
            .collect::<Vec<_>>()
    };
    let first = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "resources/list")
        .unwrap()
        .1;
    let next = page(&mut m, first, "sim://s/a");
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].3["cursor"], "c");
    // The same cursor again: the list fails instead of asking for it a second time.
    assert!(page(&mut m, next[0].1, "sim://s/b").is_empty());
    assert_eq!(m.counters().repeated_cursors, 1);
    assert_eq!(m.counters().resource_lists_applied, 0);
}

#[test]
fn a_reconnect_outside_a_round_announces_the_catalog_once_it_is_live_again() {
    let (mut m, conn) = connected(probing());
    let (conn, at, outs) = lose_and_reconnect(&mut m, conn, 10);
    let (outs, _) = answer_lists(&mut m, at.as_millis(), conn, outs);
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    let count = |f: fn(&Event) -> bool| {
        outs.iter()
            .filter(|o| matches!(o, Output::Event(e) if f(e)))
            .count()
    };
    assert_eq!(count(|e| matches!(e, Event::ResourcesChanged { .. })), 1);
    assert_eq!(count(|e| matches!(e, Event::PromptsChanged { .. })), 1);
    assert!(!m.prompts()[0].deferred);
}

/// The first `PeerRequest` among `outs`: its key.
pub(super) fn asked(outs: &[Output]) -> PeerRequestKey {
    outs.iter()
        .find_map(|o| match o {
            Output::Event(Event::PeerRequest { request, .. }) => Some(*request),
            _ => None,
        })
        .expect("the embedder is asked")
}

#[test]
fn an_input_the_embedder_cannot_give_fails_the_read_that_asked_for_it() {
    let mut o = probing();
    o.client_features.elicitation_form = true;
    let (mut m, conn) = connected(o);
    let (first, _) = read(&mut m, 10, None);
    let outs = frame(&mut m, 11, conn, input_required(first, ELICIT, r#""s""#));
    assert_eq!(m.counters().input_required_rounds, 1);
    m.handle(
        Instant::from_millis(12),
        Input::AnswerPeerRequest {
            request: asked(&outs),
            answer: PeerAnswer::Error {
                code: -32603,
                message: "no form to show".into(),
            },
        },
    );
    let outs = drain(&mut m);
    match completed(&outs) {
        Some(OperationOutcome::Err(CallError::InputUnavailable { method, .. })) => {
            assert_eq!(method, "elicitation/create")
        }
        other => panic!("{other:?}"),
    }
    assert!(sent(&outs).is_empty(), "no retry without the input");
    assert!(m.operations_in_flight().is_empty());
    assert_eq!(m.counters().inputs_unavailable, 1);
    assert_eq!(m.counters().input_retries, 0);
}

#[test]
fn an_input_left_unanswered_fails_the_tool_call_that_asked_for_it() {
    let mut o = probing();
    o.client_features.elicitation_form = true;
    o.peer_request_timeout = Duration::from_secs(2);
    let (mut m, conn) = connected(o);
    m.handle(
        Instant::from_millis(10),
        Input::CallTool {
            call: CallId(4),
            tool: "mcp_s_t".into(),
            arguments: None,
            timeout: Some(Duration::from_secs(600)),
            progress: false,
            meta: None,
        },
    );
    let first = sent(&drain(&mut m))
        .into_iter()
        .find(|r| r.2 == "tools/call")
        .expect("the call is sent")
        .1;
    let outs = frame(&mut m, 11, conn, input_required(first, ELICIT, "1"));
    asked(&outs);
    assert_eq!(m.counters().input_required_rounds, 1);
    // The embedder never answers: after `peer_request_timeout` the call fails, long before
    // its own deadline, and the input is withdrawn.
    m.handle_timeout(Instant::from_millis(2_011));
    let outs = drain(&mut m);
    let outcome = outs.iter().find_map(|o| match o {
        Output::Event(Event::CallCompleted { call, outcome }) => Some((*call, outcome.clone())),
        _ => None,
    });
    match outcome {
        Some((CallId(4), CallOutcome::Err(CallError::InputUnavailable { method, .. }))) => {
            assert_eq!(method, "elicitation/create")
        }
        other => panic!("{other:?}"),
    }
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Event(Event::PeerRequestWithdrawn { .. }))));
    assert!(m.calls_in_flight().is_empty());
    assert_eq!(m.counters().inputs_unavailable, 1);
}

/// Asks (at 10 ms, as operation 5) for completions of the argument `city` of prompt `p`,
/// given `Pa`: what that produced.
fn complete_city(m: &mut Manager) -> Vec<Output> {
    m.handle(
        Instant::from_millis(10),
        Input::Operation {
            call: CallId(5),
            op: Operation::Complete {
                reference: crate::catalog::CompletionRef::Prompt {
                    name: "mcp_s_p".into(),
                },
                argument: "city".into(),
                value: "Pa".into(),
                context: BTreeMap::new(),
            },
            timeout: None,
        },
    );
    drain(m)
}

#[test]
fn a_completion_answers_with_its_values_and_is_counted_as_one() {
    let caps = json!({"tools": {}, "prompts": {}, "completions": {}});
    let (mut m, conn, _) = connected_with(probing(), caps);
    let (_, id, _, params, _) = sent(&complete_city(&mut m))
        .into_iter()
        .find(|r| r.2 == "completion/complete")
        .expect("the completion is asked");
    assert_eq!(params["ref"], json!({"type": "ref/prompt", "name": "p"}));
    assert_eq!(params["argument"], json!({"name": "city", "value": "Pa"}));
    let done = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete",
        "completion": {"values": ["Paris", "Pau"], "total": 2, "hasMore": false}}});
    match completed(&answer(&mut m, 11, conn, done)) {
        Some(OperationOutcome::Ok(OperationResult::Completion(c))) => {
            assert_eq!(c.values, vec!["Paris".to_string(), "Pau".to_string()]);
            assert_eq!(c.total, Some(2));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        (
            m.counters().completions,
            m.counters().operations_acknowledged
        ),
        (1, 0)
    );
}

#[test]
fn a_completion_that_asks_for_input_fails_as_input_unavailable() {
    let caps = json!({"tools": {}, "prompts": {}, "completions": {}});
    let (mut m, conn, _) = connected_with(probing(), caps);
    let id = sent(&complete_city(&mut m))
        .into_iter()
        .find(|r| r.2 == "completion/complete")
        .expect("the completion is asked")
        .1;
    let outs = frame(&mut m, 11, conn, input_required(id, ELICIT, r#""s""#));
    match completed(&outs) {
        Some(OperationOutcome::Err(CallError::InputUnavailable { method, .. })) => {
            assert_eq!(method, "completion/complete")
        }
        other => panic!("{other:?}"),
    }
    assert!(sent(&outs).is_empty(), "not asked again");
    assert_eq!(m.counters().inputs_unavailable, 1);
}

#[test]
fn a_read_may_take_as_many_input_rounds_as_the_bound_and_fails_past_it() {
    let (mut m, conn) = connected(probing_with_roots());
    let (mut id, _) = read(&mut m, 10, None);
    let roots = r#""where":{"method":"roots/list"}"#;
    // Every round is answered from the manager's roots and the read asked again...
    for round in 1..=super::mrtr::MAX_INPUT_ROUNDS {
        let outs = frame(&mut m, 11, conn, input_required(id, roots, "1"));
        assert!(completed(&outs).is_none(), "round {round}: {outs:?}");
        id = sent(&outs)
            .into_iter()
            .find(|r| r.2 == "resources/read")
            .unwrap_or_else(|| panic!("round {round} is answered"))
            .1;
    }
    // ...up to the bound: one more fails it.
    let outs = frame(&mut m, 12, conn, input_required(id, roots, "1"));
    assert!(
        matches!(
            completed(&outs),
            Some(OperationOutcome::Err(CallError::Protocol(_)))
        ),
        "{outs:?}"
    );
    assert!(m.operations_in_flight().is_empty());
}

#[test]
fn a_tool_call_may_take_as_many_input_rounds_as_the_bound_and_fails_past_it() {
    let (mut m, conn) = connected(probing_with_roots());
    m.handle(
        Instant::from_millis(10),
        Input::CallTool {
            call: CallId(6),
            tool: "mcp_s_t".into(),
            arguments: None,
            timeout: None,
            progress: false,
            meta: None,
        },
    );
    let call_id = |outs: &[Output]| sent(outs).into_iter().find(|r| r.2 == "tools/call");
    let mut id = call_id(&drain(&mut m)).expect("the call is sent").1;
    let roots = r#""where":{"method":"roots/list"}"#;
    // Every round is answered from the manager's roots and the call sent again...
    for round in 1..=super::mrtr::MAX_INPUT_ROUNDS {
        let outs = frame(&mut m, 11, conn, input_required(id, roots, "1"));
        assert!(call_outcome(&outs).is_none(), "round {round}: {outs:?}");
        id = call_id(&outs)
            .unwrap_or_else(|| panic!("round {round} is answered"))
            .1;
    }
    // ...up to the bound: one more fails it, as a protocol violation of the server's.
    let outs = frame(&mut m, 12, conn, input_required(id, roots, "1"));
    match call_outcome(&outs) {
        Some(CallOutcome::Err(CallError::Protocol(_))) => {}
        other => panic!("{other:?}"),
    }
    assert!(call_id(&outs).is_none(), "not sent again");
    assert!(m.calls_in_flight().is_empty());
}
