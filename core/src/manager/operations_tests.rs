//! Operations (reads, prompts, completions) with more than one server, driven through the manager's
//! inputs: an operation that waits for its server is sent on that server's connection and no other,
//! a lost connection fails only its own server's operations, and a result of a type the client does
//! not know fails the operation as a protocol error; a cancelled operation tells its server, a page
//! of tasks comes back as one, and a subscription is acknowledged by its server's empty answer; a
//! URI no server lists is an unknown resource, and a completion for a template goes to the one
//! server that lists it; an operation the server did not declare fails as unsupported unsent, and
//! one the transport could not deliver fails as a transport error; an operation under the id of one
//! in flight is ignored, and a URI two servers list is ambiguous until a server is named.

use super::era_tests::{answer, drain, notified, sent};
use super::legacy_tests::initialize_ok;
use super::*;
use crate::catalog::{Operation, OperationOutcome, OperationResult};
use crate::config::{ServerConfig, ServerSpec};
use crate::time::Instant;
use serde_json::{json, Value};

/// Connects `names` at time zero and opens their transports: each one's attempt and the id of
/// the `initialize` sent on it, in the order given.
fn open_all(m: &mut Manager, names: &[&str]) -> Vec<(ConnId, u64)> {
    let servers = names
        .iter()
        .map(|n| ServerSpec::new(*n, ServerConfig::stdio("srv", &[])))
        .collect();
    m.handle(
        Instant::ZERO,
        Input::Connect {
            request: RequestId(1),
            servers,
        },
    );
    let opened: Vec<(String, ConnId)> = drain(m)
        .into_iter()
        .filter_map(|o| match o {
            Output::OpenTransport { conn, server, .. } => Some((server, conn)),
            _ => None,
        })
        .collect();
    names
        .iter()
        .map(|n| {
            let conn = opened.iter().find(|(s, _)| s == n).expect("opened").1;
            m.handle(
                Instant::ZERO,
                Input::Transport {
                    conn,
                    event: TransportEvent::Opened,
                },
            );
            let init = sent(&drain(m))
                .into_iter()
                .find(|r| r.2 == "initialize")
                .expect("initialize")
                .1;
            (conn, init)
        })
        .collect()
}

/// Initializes the attempt `conn` of `server` and answers every list it asks for (one
/// resource, `sim://<server>/a`, and one template, `sim://<server>/{x}`): everything that produced, lists answered or not.
fn connect(m: &mut Manager, at: u64, server: &str, attempt: (ConnId, u64)) -> Vec<Output> {
    connect_with(m, at, server, attempt, json!({"resources": {}}))
}

/// As [`connect`], with the server declaring `caps`.
fn connect_with(
    m: &mut Manager,
    at: u64,
    server: &str,
    (conn, init): (ConnId, u64),
    caps: Value,
) -> Vec<Output> {
    let mut all = answer(m, at, conn, initialize_ok(init, caps));
    let mut pending: Vec<_> = sent(&all).into_iter().filter(|r| r.0 == conn).collect();
    while let Some((_, id, method, _, _)) = pending.pop() {
        let result = match method.as_str() {
            "resources/list" => {
                json!({"resources": [{"uri": format!("sim://{server}/a"), "name": "a"}]})
            }
            "resources/templates/list" => json!({"resourceTemplates": [
                {"uriTemplate": format!("sim://{server}/{{x}}"), "name": "x"}]}),
            _ => continue,
        };
        let outs = answer(
            m,
            at,
            conn,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
        pending.extend(sent(&outs).into_iter().filter(|r| r.0 == conn));
        all.extend(outs);
    }
    assert_eq!(
        m.server_state(server).unwrap().status,
        ServerStatus::Connected
    );
    all
}

/// Asks server `server` to read `sim://<server>/a` as operation `call`.
fn read(m: &mut Manager, at: u64, call: u64, server: &str) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::Operation {
            call: CallId(call),
            op: Operation::ReadResource {
                uri: format!("sim://{server}/a"),
                server: Some(server.into()),
            },
            timeout: None,
        },
    );
    drain(m)
}

/// The `resources/read` requests among `outs`: (connection, request id).
fn reads(outs: &[Output]) -> Vec<(ConnId, u64)> {
    sent(outs)
        .into_iter()
        .filter(|r| r.2 == "resources/read")
        .map(|r| (r.0, r.1))
        .collect()
}

/// The outcome of operation `call` among `outs`, if it completed.
fn outcome(outs: &[Output], call: u64) -> Option<OperationOutcome> {
    outs.iter().find_map(|o| match o {
        Output::Event(Event::OperationCompleted { call: c, outcome }) if *c == CallId(call) => {
            Some(outcome.clone())
        }
        _ => None,
    })
}

fn read_ok(id: u64, uri: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"contents": [{"uri": uri, "text": "hi"}]}})
}

#[test]
fn an_operation_waiting_for_its_server_is_sent_on_that_servers_connection_only() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a", "b"]);
    // `b` is still initializing: the read waits for it.
    let outs = read(&mut m, 1, 7, "b");
    assert!(reads(&outs).is_empty() && outcome(&outs, 7).is_none());
    // `a` connecting first sends nothing of `b`'s.
    let outs = connect(&mut m, 2, "a", attempts[0]);
    assert_eq!(reads(&outs), vec![], "{outs:?}");
    assert_eq!(m.operations_in_flight(), vec![CallId(7)]);
    // `b` connecting sends it, on `b`'s connection.
    let outs = connect(&mut m, 3, "b", attempts[1]);
    let sent_reads = reads(&outs);
    assert_eq!(sent_reads.len(), 1, "{outs:?}");
    let (conn, id) = sent_reads[0];
    assert_eq!(conn, attempts[1].0);
    assert_eq!(m.counters().deferred_operations_sent, 1);
    let outs = answer(&mut m, 4, conn, read_ok(id, "sim://b/a"));
    assert!(
        matches!(
            outcome(&outs, 7),
            Some(OperationOutcome::Ok(OperationResult::Read(_)))
        ),
        "{outs:?}"
    );
    assert_eq!(m.counters().resources_read, 1);
}

#[test]
fn a_lost_connection_fails_only_the_operations_of_its_own_server() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a", "b"]);
    connect(&mut m, 1, "a", attempts[0]);
    connect(&mut m, 1, "b", attempts[1]);
    assert_eq!(reads(&read(&mut m, 2, 7, "a")).len(), 1);
    let b_read = reads(&read(&mut m, 2, 8, "b"));
    assert_eq!(b_read.len(), 1);
    m.handle(
        Instant::from_millis(3),
        Input::Transport {
            conn: attempts[0].0,
            event: TransportEvent::Closed {
                reason: "exit 1".into(),
            },
        },
    );
    let outs = drain(&mut m);
    assert!(
        matches!(outcome(&outs, 7), Some(OperationOutcome::Err(_))),
        "{outs:?}"
    );
    assert_eq!(outcome(&outs, 8), None, "b's read is not a's to fail");
    assert_eq!(m.operations_in_flight(), vec![CallId(8)]);
    let outs = answer(&mut m, 4, attempts[1].0, read_ok(b_read[0].1, "sim://b/a"));
    assert!(
        matches!(
            outcome(&outs, 8),
            Some(OperationOutcome::Ok(OperationResult::Read(_)))
        ),
        "{outs:?}"
    );
}

#[test]
fn an_operation_result_of_an_unknown_type_fails_it_as_a_protocol_error() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a"]);
    connect(&mut m, 1, "a", attempts[0]);
    let (conn, id) = reads(&read(&mut m, 2, 7, "a"))[0];
    let later = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "later",
        "contents": []}});
    let outs = answer(&mut m, 3, conn, later);
    assert!(
        matches!(
            outcome(&outs, 7),
            Some(OperationOutcome::Err(CallError::Protocol(_)))
        ),
        "{outs:?}"
    );
    assert_eq!(m.counters().unknown_result_types, 1);
    assert!(m.operations_in_flight().is_empty());
}

#[test]
fn a_cancelled_operation_completes_as_cancelled_and_tells_its_server_once() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a"]);
    connect(&mut m, 1, "a", attempts[0]);
    let (conn, id) = reads(&read(&mut m, 2, 7, "a"))[0];
    m.handle(
        Instant::from_millis(3),
        Input::CancelCall { call: CallId(7) },
    );
    let outs = drain(&mut m);
    assert_eq!(outcome(&outs, 7), Some(OperationOutcome::Cancelled));
    let cancels: Vec<_> = notified(&outs, "notifications/cancelled")
        .into_iter()
        .map(|(c, p)| (c, p["requestId"].clone()))
        .collect();
    assert_eq!(cancels, vec![(conn, json!(id))], "{outs:?}");
    assert_eq!(m.counters().operations_cancelled, 1);
    // Its late answer is dropped; cancelling it again is not an operation any more.
    let outs = answer(&mut m, 4, conn, read_ok(id, "sim://a/a"));
    assert_eq!(outcome(&outs, 7), None);
    m.handle(
        Instant::from_millis(5),
        Input::CancelCall { call: CallId(7) },
    );
    drain(&mut m);
    assert_eq!(m.counters().operations_cancelled, 1);
}

#[test]
fn a_page_of_tasks_comes_back_as_one_and_is_counted_as_a_task_page() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a"]);
    let caps = json!({"resources": {}, "tasks": {"list": {}}});
    connect_with(&mut m, 1, "a", attempts[0], caps);
    m.handle(
        Instant::from_millis(2),
        Input::Operation {
            call: CallId(9),
            op: Operation::ListTasks {
                server: "a".into(),
                cursor: None,
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    let (conn, id) = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "tasks/list")
        .map(|r| (r.0, r.1))
        .expect("tasks/list sent");
    let page = json!({"jsonrpc": "2.0", "id": id, "result": {"tasks": [{"taskId": "t1",
        "status": "working"}], "nextCursor": "n"}});
    let outs = answer(&mut m, 3, conn, page);
    match outcome(&outs, 9) {
        Some(OperationOutcome::Ok(OperationResult::Tasks(p))) => {
            assert_eq!((p.tasks.len(), p.next_cursor.as_deref()), (1, Some("n")));
        }
        other => panic!("{other:?}"),
    }
    let c = m.counters();
    assert_eq!((c.task_pages_listed, c.operations_acknowledged), (1, 0));
}

#[test]
fn a_subscription_is_sent_to_its_server_and_its_empty_answer_acknowledges_it() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a"]);
    let caps = json!({"resources": {"subscribe": true}});
    connect_with(&mut m, 1, "a", attempts[0], caps);
    m.handle(
        Instant::from_millis(2),
        Input::Operation {
            call: CallId(5),
            op: Operation::Subscribe {
                uri: "sim://a/a".into(),
                server: Some("a".into()),
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    let (conn, id, _, params, _) = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "resources/subscribe")
        .expect("resources/subscribe sent");
    assert_eq!(params["uri"], "sim://a/a");
    let outs = answer(
        &mut m,
        3,
        conn,
        json!({"jsonrpc": "2.0", "id": id, "result": {}}),
    );
    assert_eq!(
        outcome(&outs, 5),
        Some(OperationOutcome::Ok(OperationResult::Done {
            server: "a".into()
        }))
    );
    let c = m.counters();
    assert_eq!((c.operations_acknowledged, c.task_pages_listed), (1, 0));
}

#[test]
fn a_read_of_a_uri_no_server_lists_fails_as_an_unknown_resource() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a"]);
    connect(&mut m, 1, "a", attempts[0]);
    m.handle(
        Instant::from_millis(2),
        Input::Operation {
            call: CallId(6),
            op: Operation::ReadResource {
                uri: "sim://nobody/x".into(),
                server: None,
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    assert!(reads(&outs).is_empty());
    assert_eq!(
        outcome(&outs, 6),
        Some(OperationOutcome::Err(CallError::UnknownResource {
            uri: "sim://nobody/x".into()
        }))
    );
    assert_eq!(m.counters().ambiguous_uris, 0);
}

#[test]
fn a_completion_for_a_template_goes_to_the_one_server_that_lists_it() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a", "b"]);
    let caps = json!({"resources": {}, "completions": {}});
    connect_with(&mut m, 1, "a", attempts[0], caps.clone());
    connect_with(&mut m, 1, "b", attempts[1], caps);
    m.handle(
        Instant::from_millis(2),
        Input::Operation {
            call: CallId(7),
            op: Operation::Complete {
                reference: crate::catalog::CompletionRef::Resource {
                    uri: "sim://b/{x}".into(),
                    server: None,
                },
                argument: "x".into(),
                value: "1".into(),
                context: Default::default(),
            },
            timeout: None,
        },
    );
    let asked: Vec<(ConnId, u64)> = sent(&drain(&mut m))
        .into_iter()
        .filter(|r| r.2 == "completion/complete")
        .map(|r| (r.0, r.1))
        .collect();
    assert_eq!(
        asked.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![attempts[1].0]
    );
    let done = json!({"jsonrpc": "2.0", "id": asked[0].1,
        "result": {"completion": {"values": ["10", "11"]}}});
    let outs = answer(&mut m, 3, attempts[1].0, done);
    assert!(
        matches!(
            outcome(&outs, 7),
            Some(OperationOutcome::Ok(OperationResult::Completion(_)))
        ),
        "{outs:?}"
    );
    assert_eq!(m.counters().completions, 1);
}

#[test]
fn an_operation_a_server_did_not_declare_fails_as_unsupported_without_being_sent() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a"]);
    connect(&mut m, 1, "a", attempts[0]);
    m.handle(
        Instant::from_millis(2),
        Input::Operation {
            call: CallId(8),
            op: Operation::SetLogLevel {
                server: "a".into(),
                level: crate::catalog::LogLevel::Debug,
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    assert!(sent(&outs).is_empty(), "{outs:?}");
    assert_eq!(
        outcome(&outs, 8),
        Some(OperationOutcome::Err(CallError::Unsupported {
            server: "a".into(),
            method: "logging/setLevel".into(),
        }))
    );
}

#[test]
fn an_operation_the_transport_could_not_deliver_fails_as_a_transport_error() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a"]);
    connect(&mut m, 1, "a", attempts[0]);
    let (conn, id) = reads(&read(&mut m, 2, 9, "a"))[0];
    m.handle(
        Instant::from_millis(3),
        Input::Transport {
            conn,
            event: TransportEvent::RequestFailed {
                id,
                error: "connection reset".into(),
            },
        },
    );
    let outs = drain(&mut m);
    match outcome(&outs, 9) {
        Some(OperationOutcome::Err(CallError::Transport(e))) => {
            assert_eq!(e.kind, ServerErrorKind::RequestFailed);
        }
        other => panic!("{other:?} in {outs:?}"),
    }
    assert_eq!(m.server_state("a").unwrap().status, ServerStatus::Connected);
}

#[test]
fn an_operation_under_the_id_of_one_in_flight_is_ignored_and_the_first_completes() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a"]);
    connect(&mut m, 1, "a", attempts[0]);
    let first = reads(&read(&mut m, 2, 7, "a"));
    assert_eq!(first.len(), 1);
    // The same id again, while the first is out: not sent, not tracked, a warning.
    let outs = read(&mut m, 3, 7, "a");
    assert!(reads(&outs).is_empty(), "{outs:?}");
    assert!(
        outs.iter().any(|o| matches!(
            o,
            Output::Event(Event::Diagnostic {
                level: Level::Warn,
                ..
            })
        )),
        "{outs:?}"
    );
    assert_eq!(m.operations_in_flight(), vec![CallId(7)]);
    // The first one's answer completes it, once.
    let (conn, id) = first[0];
    let outs = answer(&mut m, 4, conn, read_ok(id, "sim://a/a"));
    assert!(matches!(
        outcome(&outs, 7),
        Some(OperationOutcome::Ok(OperationResult::Read(_)))
    ));
    assert!(m.operations_in_flight().is_empty());
}

#[test]
fn a_read_of_a_uri_two_servers_list_fails_as_ambiguous_naming_both() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let attempts = open_all(&mut m, &["a", "b"]);
    // Both servers list the same file; neither has templates.
    for (at, (conn, init)) in (1..).zip(attempts) {
        let outs = answer(
            &mut m,
            at,
            conn,
            initialize_ok(init, json!({"resources": {}})),
        );
        for (_, id, method, _, _) in sent(&outs).into_iter().filter(|r| r.0 == conn) {
            let result = match method.as_str() {
                "resources/list" => {
                    json!({"resources": [{"uri": "file:///shared.txt", "name": "shared"}]})
                }
                "resources/templates/list" => json!({"resourceTemplates": []}),
                _ => continue,
            };
            answer(
                &mut m,
                at,
                conn,
                json!({"jsonrpc": "2.0", "id": id, "result": result}),
            );
        }
    }
    assert_eq!(m.connections(), vec!["a", "b"]);
    m.handle(
        Instant::from_millis(5),
        Input::Operation {
            call: CallId(8),
            op: Operation::ReadResource {
                uri: "file:///shared.txt".into(),
                server: None,
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    assert!(reads(&outs).is_empty(), "sent to neither: {outs:?}");
    assert_eq!(
        outcome(&outs, 8),
        Some(OperationOutcome::Err(CallError::AmbiguousResource {
            uri: "file:///shared.txt".into(),
            servers: vec!["a".into(), "b".into()],
        }))
    );
    assert_eq!(m.counters().ambiguous_uris, 1);
    // Naming the server settles it.
    let outs = read(&mut m, 6, 9, "b");
    assert_eq!(reads(&outs).len(), 1);
}
