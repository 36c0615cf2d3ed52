//! Refused credentials, decided in the core: the transport reports which frame the server
//! refused (`TransportEvent::Unauthorized`) and stays open; the core ends the attempt (and
//! closes the transport) when the handshake was refused, when nothing can be sent until a
//! person logs in, or when the refused frame was no request, and otherwise fails that request
//! alone.

use super::era_tests::{answer, drain, open, sent};
use super::*;
use crate::auth::AuthError;
use crate::time::Instant;
use serde_json::json;

/// The `initialize`-based handshake at once (no probe).
fn legacy() -> ManagerOptions {
    ManagerOptions {
        client_version: "test".into(),
        ..ManagerOptions::default()
    }
}

fn refuse(
    m: &mut Manager,
    at: u64,
    conn: ConnId,
    id: Option<u64>,
    error: AuthError,
) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::Transport {
            conn,
            event: TransportEvent::Unauthorized { id, error },
        },
    );
    drain(m)
}

fn closes(outs: &[Output], conn: ConnId) -> bool {
    outs.iter()
        .any(|o| matches!(o, Output::CloseTransport { conn: c } if *c == conn))
}

fn rejected() -> AuthError {
    AuthError::Rejected {
        status: 403,
        attempts: 1,
    }
}

/// Server `s` connected over the `initialize` handshake, with one tool `t`.
fn connected() -> (Manager, ConnId) {
    let mut m = Manager::new(legacy(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let init = sent(&outs)[0].1;
    let outs = answer(
        &mut m,
        1,
        conn,
        json!({"jsonrpc": "2.0", "id": init, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}}),
    );
    let list = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "tools/list")
        .expect("tools/list")
        .1;
    answer(
        &mut m,
        2,
        conn,
        json!({"jsonrpc": "2.0", "id": list, "result": {"tools": [
            {"name": "t", "inputSchema": {"type": "object"}}]}}),
    );
    assert_eq!(m.connections(), vec!["s"]);
    (m, conn)
}

/// Calls `mcp_s_t` as call 1; the id of its `tools/call`.
fn call(m: &mut Manager) -> u64 {
    m.handle(
        Instant::from_millis(3),
        Input::CallTool {
            call: CallId(1),
            tool: "mcp_s_t".into(),
            arguments: None,
            timeout: None,
            progress: false,
            meta: None,
        },
    );
    sent(&drain(m))
        .into_iter()
        .find(|r| r.2 == "tools/call")
        .expect("tools/call")
        .1
}

fn call_outcome(outs: &[Output]) -> Option<CallOutcome> {
    outs.iter().find_map(|o| match o {
        Output::Event(Event::CallCompleted { outcome, .. }) => Some(outcome.clone()),
        _ => None,
    })
}

#[test]
fn a_refused_initialize_ends_the_attempt_and_the_core_closes_the_transport() {
    let mut m = Manager::new(legacy(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let (_, id, method, _, _) = sent(&outs).remove(0);
    assert_eq!(method, "initialize");
    let outs = refuse(&mut m, 1, conn, Some(id), rejected());
    assert!(closes(&outs, conn), "{outs:?}");
    let err = m.server_state("s").unwrap().last_error.unwrap();
    assert_eq!(err.kind, ServerErrorKind::Unauthorized, "{err}");
    assert!(err.message.contains("authorization failed"), "{err}");
    assert_eq!(m.counters().refusals_ended_attempt, 1);
    assert_eq!(m.counters().refusals_failed_request, 0);
}

#[test]
fn a_refused_step_up_fails_that_call_alone_and_the_connection_goes_on() {
    let (mut m, conn) = connected();
    let id = call(&mut m);
    let outs = refuse(&mut m, 4, conn, Some(id), rejected());
    assert!(!closes(&outs, conn), "{outs:?}");
    match call_outcome(&outs) {
        Some(CallOutcome::Err(CallError::Transport(e))) => {
            assert_eq!(e.kind, ServerErrorKind::RequestFailed, "{e}");
            assert!(e.message.contains("authorization failed"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m.connections(), vec!["s"]);
    assert!(m.server_state("s").unwrap().last_error.is_none());
    assert_eq!(m.counters().refusals_failed_request, 1);
    assert_eq!(m.counters().refusals_ended_attempt, 0);
}

#[test]
fn needs_login_on_a_call_ends_the_attempt_whatever_the_request() {
    let (mut m, conn) = connected();
    let id = call(&mut m);
    let outs = refuse(&mut m, 4, conn, Some(id), AuthError::NeedsLogin);
    assert!(closes(&outs, conn), "{outs:?}");
    assert!(
        matches!(call_outcome(&outs), Some(CallOutcome::Err(_))),
        "{outs:?}"
    );
    let err = m.server_state("s").unwrap().last_error.unwrap();
    assert_eq!(err.kind, ServerErrorKind::NeedsLogin, "{err}");
    assert!(err.message.contains("switchboard login s"), "{err}");
    assert!(m.connections().is_empty());
    let c = m.counters();
    // The refused call was in flight: counted as a request the transport failed.
    assert_eq!(
        (c.refusals_ended_attempt, c.requests_failed_by_transport),
        (1, 1)
    );
}

#[test]
fn needs_login_ends_the_attempt_even_for_a_request_the_core_gave_up_on() {
    let (mut m, conn) = connected();
    // An id the connection no longer waits for: a step-up refusal of it changes nothing...
    let outs = refuse(&mut m, 4, conn, Some(999), rejected());
    assert!(!closes(&outs, conn), "{outs:?}");
    assert_eq!(m.connections(), vec!["s"]);
    // ...but a login is about the server, not the request.
    let outs = refuse(&mut m, 5, conn, Some(999), AuthError::NeedsLogin);
    assert!(closes(&outs, conn), "{outs:?}");
    assert!(m.connections().is_empty());
    assert_eq!(m.counters().requests_failed_by_transport, 0);
}

#[test]
fn a_refused_notification_ends_the_attempt() {
    let (mut m, conn) = connected();
    let outs = refuse(&mut m, 4, conn, None, rejected());
    assert!(closes(&outs, conn), "{outs:?}");
    let err = m.server_state("s").unwrap().last_error.unwrap();
    assert_eq!(err.kind, ServerErrorKind::Unauthorized, "{err}");
}

#[test]
fn a_refusal_for_an_attempt_that_ended_is_stale() {
    let (mut m, conn) = connected();
    refuse(&mut m, 4, conn, None, rejected());
    let before = m.counters().stale_events;
    let outs = refuse(&mut m, 5, conn, None, AuthError::NeedsLogin);
    assert!(!closes(&outs, conn), "{outs:?}");
    assert_eq!(m.counters().stale_events, before + 1);
    assert_eq!(m.counters().refusals_ended_attempt, 1);
}
