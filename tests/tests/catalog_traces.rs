//! Scripted traces of resources, resource templates, prompts and the operations on them:
//! readiness waits for every declared list, a failing secondary list keeps the server's
//! tools, `list_changed` re-lists one slice (coalesced), a deferred read waits for its
//! server, an ambiguous URI is a typed error, and every operation completes exactly once.

use crate::script::*;
use crate::support::with_snapshots;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use switchboard_core::catalog::{
    Catalog, CompletionRef, LogLevel, Operation, OperationOutcome, OperationResult, ResourceDef,
};
use switchboard_core::manager::{CallError, CallId, Event, Input, Level, Output, ServerStatus};

fn catalog_init(list_changed: bool) -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": list_changed},
            "prompts": {"listChanged": list_changed},
            "completions": {},
            "logging": {},
        },
        "serverInfo": {"name": "scripted", "version": "1.0"},
        "instructions": "Use the greet prompt."
    })
}

fn resources_json(uris: &[&str], next: Option<&str>) -> Value {
    let list: Vec<Value> = uris
        .iter()
        .map(|u| json!({"uri": u, "name": u.rsplit('/').next().unwrap_or(u)}))
        .collect();
    match next {
        Some(c) => json!({"resources": list, "nextCursor": c}),
        None => json!({"resources": list}),
    }
}

fn templates_json() -> Value {
    json!({"resourceTemplates": [{"uriTemplate": "file:///{path}", "name": "file"}]})
}

fn prompts_json(names: &[&str]) -> Value {
    json!({"prompts": names.iter().map(|n| json!({
        "name": n, "arguments": [{"name": "who", "required": true}]
    })).collect::<Vec<_>>()})
}

/// Open, initialize with the catalog capabilities, and answer every first list.
fn catalog_ready(s: &mut Script, ms: u64, server: &str, uris: &[&str], prompts: &[&str]) {
    s.opened(ms, server);
    s.reply(ms, server, "initialize", catalog_init(true));
    s.reply(ms, server, "tools/list", tools_json(&["echo"]));
    s.reply(ms, server, "resources/list", resources_json(uris, None));
    s.reply(ms, server, "resources/templates/list", templates_json());
    s.reply(ms, server, "prompts/list", prompts_json(prompts));
}

fn op(s: &mut Script, ms: u64, call: u64, op: Operation) {
    s.at(
        ms,
        Input::Operation {
            call: CallId(call),
            op,
            timeout: None,
        },
    );
}

fn read(uri: &str, server: Option<&str>) -> Operation {
    Operation::ReadResource {
        uri: uri.into(),
        server: server.map(str::to_string),
    }
}

/// Every completion of operation `call`.
fn op_outcomes(s: &Script, call: u64) -> Vec<&OperationOutcome> {
    s.events()
        .filter_map(|e| match e {
            Event::OperationCompleted { call: c, outcome } if c.0 == call => Some(outcome),
            _ => None,
        })
        .collect()
}

fn op_result(s: &Script, call: u64) -> &OperationResult {
    match op_outcomes(s, call)[..] {
        [OperationOutcome::Ok(r)] => r,
        ref other => panic!("operation {call} did not succeed exactly once: {other:?}"),
    }
}

fn op_error(s: &Script, call: u64) -> &CallError {
    match op_outcomes(s, call)[..] {
        [OperationOutcome::Err(e)] => e,
        ref other => panic!("operation {call} did not fail exactly once: {other:?}"),
    }
}

fn sent_methods(s: &Script, from: usize) -> Vec<&'static str> {
    s.outputs[from..]
        .iter()
        .filter_map(|o| match o {
            Output::Send { meta, .. } => meta.method,
            _ => None,
        })
        .collect()
}

#[test]
fn the_server_is_ready_once_every_declared_list_has_its_last_page() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.opened(5, "a");
    let before = s.outputs.len();
    s.reply(10, "a", "initialize", catalog_init(false));
    // The first pages of every declared list go out together.
    let sent = sent_methods(&s, before);
    for m in [
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    ] {
        assert!(sent.contains(&m), "{m} not sent with the others: {sent:?}");
    }
    s.reply(20, "a", "tools/list", tools_json(&["echo"]));
    assert_eq!(
        s.m.status("a"),
        ServerStatus::Connecting,
        "ready before its lists"
    );
    s.reply(
        30,
        "a",
        "resources/list",
        resources_json(&["file:///one"], Some("p2")),
    );
    s.reply(
        40,
        "a",
        "resources/list",
        resources_json(&["file:///two"], None),
    );
    s.reply(50, "a", "resources/templates/list", templates_json());
    assert_eq!(s.m.status("a"), ServerStatus::Connecting);
    s.reply(60, "a", "prompts/list", prompts_json(&["greet"]));
    assert_eq!(s.m.status("a"), ServerStatus::Connected);

    let uris: Vec<String> = s.m.resources().into_iter().map(|r| r.def.uri).collect();
    assert_eq!(uris, ["file:///one", "file:///two"]);
    assert_eq!(s.m.resource_templates().len(), 1);
    let prompts: Vec<String> =
        s.m.prompts()
            .into_iter()
            .map(|p| p.qualified_name)
            .collect();
    assert_eq!(prompts, ["mcp_a_greet"]);
    let state = s.m.server_state("a").unwrap();
    assert_eq!(state.instructions.as_deref(), Some("Use the greet prompt."));
    let caps = state.capabilities.unwrap();
    assert!(caps.resources && caps.resources_subscribe && caps.prompts && caps.completions);
    // The cache keeps the catalog beside the tools.
    let stored = s.outputs.iter().find_map(|o| match o {
        Output::StoreCache { catalog, .. } => Some(catalog.clone()),
        _ => None,
    });
    let stored = stored.expect("a StoreCache");
    assert_eq!(stored.resources.len(), 2);
    assert_eq!(stored.prompts.len(), 1);
    with_snapshots(|| insta::assert_snapshot!("catalog_ready_after_every_list", s.finish()));
}

#[test]
fn a_failing_secondary_list_keeps_the_tools_and_says_why() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.opened(5, "a");
    s.reply(10, "a", "initialize", catalog_init(false));
    s.reply(20, "a", "tools/list", tools_json(&["echo"]));
    s.reply_error(30, "a", "resources/list", -32603, "broken");
    s.reply(40, "a", "resources/templates/list", templates_json());
    // The prompt list never answers: its page times out, bounded by the request timeout.
    assert_eq!(s.m.status("a"), ServerStatus::Connecting);
    s.advance_to(60_000);
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    assert_eq!(s.tool_names(), ["mcp_a_echo"]);
    assert!(s.m.resources().is_empty());
    assert!(s.m.prompts().is_empty());
    assert_eq!(s.m.resource_templates().len(), 1);
    let warnings: Vec<&String> = s
        .events()
        .filter_map(|e| match e {
            Event::Diagnostic {
                level: Level::Warn,
                message,
                ..
            } => Some(message),
            _ => None,
        })
        .collect();
    assert!(warnings.iter().any(|m| m.contains("resources/list")));
    assert!(warnings
        .iter()
        .any(|m| m.contains("prompts/list timed out")));
    assert_eq!(s.m.counters().catalog_lists_failed, 2);
}

#[test]
fn list_changed_relists_only_that_slice_coalescing_a_burst() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    catalog_ready(&mut s, 10, "a", &["file:///a1"], &["greet"]);
    catalog_ready(&mut s, 10, "b", &["file:///b1"], &[]);
    let conn_a = s.conn("a");
    let before = s.outputs.len();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"});
    s.frame_on(100, conn_a, note.clone());
    s.frame_on(101, conn_a, note.clone());
    s.frame_on(102, conn_a, note);
    let sent = sent_methods(&s, before);
    assert_eq!(sent, ["resources/list", "resources/templates/list"]);
    s.reply(
        110,
        "a",
        "resources/list",
        resources_json(&["file:///a2"], None),
    );
    s.reply(110, "a", "resources/templates/list", templates_json());
    // One more list for the burst, not two.
    let sent = sent_methods(&s, before);
    assert_eq!(
        sent,
        [
            "resources/list",
            "resources/templates/list",
            "resources/list",
            "resources/templates/list"
        ]
    );
    s.reply(
        120,
        "a",
        "resources/list",
        resources_json(&["file:///a3"], None),
    );
    s.reply(120, "a", "resources/templates/list", templates_json());
    let uris: Vec<(String, String)> =
        s.m.resources()
            .into_iter()
            .map(|r| (r.server, r.def.uri))
            .collect();
    assert_eq!(
        uris,
        [
            ("a".to_string(), "file:///a3".to_string()),
            ("b".to_string(), "file:///b1".to_string())
        ]
    );
    let changed = s
        .events()
        .filter(|e| matches!(e, Event::ResourcesChanged { servers } if servers == &["a"]))
        .count();
    assert_eq!(changed, 4, "one announcement per list applied");
    // Prompts were not listed again.
    assert_eq!(s.m.prompts().len(), 1);
}

/// An observer that keeps what the catalog getters showed may skip reading them while
/// `catalog_generation()` stays put: so it must move whenever they change.
#[test]
fn the_catalog_generation_moves_whenever_the_catalog_view_changes() {
    let mut s = Script::new();
    let shown = |s: &Script| {
        (
            s.m.resources(),
            s.m.resource_templates(),
            s.m.prompts(),
            s.m.catalog_generation(),
        )
    };
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    let empty = shown(&s);
    catalog_ready(&mut s, 10, "a", &["file:///a1"], &["greet"]);
    let ready = shown(&s);
    assert_eq!(ready.0.len(), 1);
    assert_ne!(ready.3, empty.3, "the first lists were shown");
    // A shown prompt's qualified name routes back to its server and raw name.
    assert_eq!(s.m.resolve_prompt("mcp_a_greet"), Some(("a", "greet")));
    assert_eq!(s.m.resolve_prompt("mcp_a_nothing"), None);
    // A second server's catalog shows beside the first.
    catalog_ready(&mut s, 20, "b", &["file:///b1"], &["greet"]);
    let both = shown(&s);
    assert_eq!(both.0.len(), 2);
    assert_ne!(both.3, ready.3, "b's lists were shown");
    // A re-list of one slice.
    let conn_a = s.conn("a");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
    s.frame_on(100, conn_a, note);
    let asked = shown(&s);
    s.reply(110, "a", "prompts/list", prompts_json(&["greet", "bye"]));
    let relisted = shown(&s);
    assert_ne!(relisted.2, asked.2);
    assert_ne!(relisted.3, asked.3, "a's prompts were listed again");
    // A re-list of resources.
    let note = json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"});
    s.frame_on(200, conn_a, note);
    s.reply(
        210,
        "a",
        "resources/list",
        resources_json(&["file:///a2"], None),
    );
    let resources = shown(&s);
    assert_ne!(resources.0, relisted.0);
    assert_ne!(resources.3, relisted.3, "a's resources were listed again");
    // Disconnecting withdraws its slice.
    s.disconnect(300, "a");
    let gone = shown(&s);
    assert_eq!(gone.0.len(), 1);
    assert_ne!(gone.3, resources.3, "a's catalog was withdrawn");
    s.disconnect_all(400);
    let none = shown(&s);
    assert!(none.0.is_empty() && none.1.is_empty() && none.2.is_empty());
    assert_ne!(none.3, gone.3, "b's catalog was withdrawn");
}

#[test]
fn a_deferred_read_waits_for_its_server_then_goes_out() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    let key = s
        .outputs
        .iter()
        .find_map(|o| match o {
            Output::LoadCache { key, .. } => Some(key.clone()),
            _ => None,
        })
        .unwrap();
    let catalog = Catalog {
        resources: vec![ResourceDef {
            uri: "file:///cached".into(),
            name: "cached".into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            annotations: None,
        }],
        ..Catalog::default()
    };
    s.at(
        1,
        Input::CacheLoaded {
            server: "a".into(),
            key,
            tools: Some(tools(&["echo"])),
            catalog: Some(catalog),
        },
    );
    s.advance_to(300);
    let view = s.m.resources();
    assert_eq!(view.len(), 1);
    assert!(view[0].deferred, "served from the cache at the gate");
    let before = s.outputs.len();
    op(&mut s, 310, 7, read("file:///cached", None));
    assert!(sent_methods(&s, before).is_empty(), "waits for its server");
    assert!(op_outcomes(&s, 7).is_empty());
    catalog_ready(&mut s, 400, "a", &["file:///cached"], &[]);
    s.reply(
        410,
        "a",
        "resources/read",
        json!({"contents": [{"uri": "file:///cached", "text": "hello"}]}),
    );
    match op_result(&s, 7) {
        OperationResult::Read(r) => {
            assert_eq!(r.server, "a");
            assert_eq!(r.contents[0].text.as_deref(), Some("hello"));
        }
        other => panic!("not a read: {other:?}"),
    }
    assert_eq!(s.m.counters().deferred_operations_sent, 1);
    assert!(!s.m.resources()[0].deferred);
}

#[test]
fn a_deferred_read_times_out_saying_it_was_waiting() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    let key = s
        .outputs
        .iter()
        .find_map(|o| match o {
            Output::LoadCache { key, .. } => Some(key.clone()),
            _ => None,
        })
        .unwrap();
    let catalog = Catalog {
        prompts: vec![switchboard_core::catalog::PromptDef {
            name: "greet".into(),
            title: None,
            description: None,
            arguments: vec![],
        }],
        ..Catalog::default()
    };
    s.at(
        1,
        Input::CacheLoaded {
            server: "a".into(),
            key,
            tools: Some(tools(&["echo"])),
            catalog: Some(catalog),
        },
    );
    s.advance_to(300);
    s.at(
        310,
        Input::Operation {
            call: CallId(3),
            op: Operation::GetPrompt {
                name: "mcp_a_greet".into(),
                arguments: BTreeMap::new(),
            },
            timeout: Some(ms(1000)),
        },
    );
    s.advance_to(2000);
    match op_error(&s, 3) {
        CallError::OperationTimeout {
            method,
            waiting_for,
            ..
        } => {
            assert_eq!(method, "prompts/get");
            assert_eq!(waiting_for.as_deref(), Some("a"));
        }
        other => panic!("not a timeout: {other:?}"),
    }
}

#[test]
fn an_ambiguous_uri_is_a_typed_error_and_naming_the_server_resolves_it() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    catalog_ready(&mut s, 10, "a", &["file:///same"], &[]);
    catalog_ready(&mut s, 10, "b", &["file:///same"], &[]);
    op(&mut s, 20, 1, read("file:///same", None));
    match op_error(&s, 1) {
        CallError::AmbiguousResource { uri, servers } => {
            assert_eq!(uri, "file:///same");
            assert_eq!(servers, &["a", "b"]);
        }
        other => panic!("not ambiguous: {other:?}"),
    }
    op(&mut s, 30, 2, read("file:///nowhere", None));
    assert!(matches!(op_error(&s, 2), CallError::UnknownResource { .. }));
    op(&mut s, 40, 3, read("file:///same", Some("b")));
    s.reply(
        50,
        "b",
        "resources/read",
        json!({"contents": [{"uri": "file:///same", "blob": "AAAA"}]}),
    );
    match op_result(&s, 3) {
        OperationResult::Read(r) => assert_eq!(r.server, "b"),
        other => panic!("not a read: {other:?}"),
    }
    assert_eq!(s.m.counters().ambiguous_uris, 1);
}

#[test]
fn prompts_completion_subscriptions_and_log_levels_complete_exactly_once() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    catalog_ready(&mut s, 10, "a", &["file:///r"], &["greet"]);
    let args = BTreeMap::from([("who".to_string(), "ada".to_string())]);
    op(
        &mut s,
        20,
        1,
        Operation::GetPrompt {
            name: "mcp_a_greet".into(),
            arguments: args,
        },
    );
    // The raw name goes to the server, with the arguments.
    let frame = s
        .outputs
        .iter()
        .rev()
        .find_map(|o| match o {
            Output::Send { frame, meta, .. } if meta.method == Some("prompts/get") => {
                Some(serde_json::from_slice::<Value>(frame).unwrap())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(
        frame["params"],
        json!({"name": "greet", "arguments": {"who": "ada"}})
    );
    s.reply(
        30,
        "a",
        "prompts/get",
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi ada"}}]}),
    );
    match op_result(&s, 1) {
        OperationResult::Prompt(p) => assert_eq!(p.messages[0].role, "user"),
        other => panic!("not a prompt: {other:?}"),
    }
    op(
        &mut s,
        40,
        2,
        Operation::Complete {
            reference: CompletionRef::Prompt {
                name: "mcp_a_greet".into(),
            },
            argument: "who".into(),
            value: "a".into(),
            context: BTreeMap::new(),
        },
    );
    s.reply(
        50,
        "a",
        "completion/complete",
        json!({"completion": {"values": ["ada", "alan"], "hasMore": false}}),
    );
    match op_result(&s, 2) {
        OperationResult::Completion(c) => assert_eq!(c.values, ["ada", "alan"]),
        other => panic!("not a completion: {other:?}"),
    }
    op(
        &mut s,
        60,
        3,
        Operation::Subscribe {
            uri: "file:///r".into(),
            server: None,
        },
    );
    s.reply(70, "a", "resources/subscribe", json!({}));
    assert!(matches!(op_result(&s, 3), OperationResult::Done { server } if server == "a"));
    let conn = s.conn("a");
    s.frame_on(
        80,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///r"}}),
    );
    assert!(s.events().any(|e| matches!(
        e,
        Event::ResourceUpdated { server, uri } if server == "a" && uri == "file:///r"
    )));
    op(
        &mut s,
        90,
        4,
        Operation::SetLogLevel {
            server: "a".into(),
            level: LogLevel::Warning,
        },
    );
    s.reply_error(95, "a", "logging/setLevel", -32602, "no such level");
    assert!(matches!(
        op_error(&s, 4),
        CallError::Rpc { code: -32602, .. }
    ));
    // Cancel one in flight: it completes once, as cancelled, and the server is told.
    op(&mut s, 100, 5, read("file:///r", None));
    s.at(100, Input::CancelCall { call: CallId(5) });
    assert!(matches!(
        op_outcomes(&s, 5)[..],
        [OperationOutcome::Cancelled]
    ));
    // A late answer to it changes nothing.
    let cancelled = s.count(|o| {
        matches!(o, Output::Send { meta, .. } if meta.method == Some("notifications/cancelled"))
    });
    assert_eq!(cancelled, 1);
    // An unknown prompt, and a server that does not exist.
    op(
        &mut s,
        110,
        6,
        Operation::GetPrompt {
            name: "mcp_a_nope".into(),
            arguments: BTreeMap::new(),
        },
    );
    assert!(matches!(op_error(&s, 6), CallError::UnknownPrompt { .. }));
    op(
        &mut s,
        120,
        8,
        Operation::SetLogLevel {
            server: "zzz".into(),
            level: LogLevel::Debug,
        },
    );
    assert!(matches!(op_error(&s, 8), CallError::UnknownServer { .. }));
    assert!(s.m.operations_in_flight().is_empty());
    with_snapshots(|| insta::assert_snapshot!("catalog_operations_complete_once", s.finish()));
}

#[test]
fn operations_on_a_lost_connection_fail_and_undeclared_ones_are_refused() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.opened(5, "a");
    // Only tools and resources (no subscribe, completions, logging).
    s.reply(
        10,
        "a",
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}, "resources": {}}}),
    );
    s.reply(20, "a", "tools/list", tools_json(&["echo"]));
    s.reply(
        20,
        "a",
        "resources/list",
        resources_json(&["file:///r"], None),
    );
    s.reply(20, "a", "resources/templates/list", templates_json());
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    op(
        &mut s,
        30,
        1,
        Operation::Subscribe {
            uri: "file:///r".into(),
            server: None,
        },
    );
    assert!(matches!(op_error(&s, 1), CallError::Unsupported { .. }));
    op(&mut s, 40, 2, read("file:///r", None));
    let conn = s.conn("a");
    s.at(
        50,
        Input::Transport {
            conn,
            event: switchboard_core::manager::TransportEvent::Closed {
                reason: "gone".into(),
            },
        },
    );
    assert!(matches!(op_error(&s, 2), CallError::Transport(_)));
}

/// Every frame sent to `server`'s connection, as JSON.
fn sent_json(s: &Script, server: &str) -> Vec<Value> {
    let conn = s.conn(server);
    s.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Send { conn: c, frame, .. } if *c == conn => serde_json::from_slice(frame).ok(),
            _ => None,
        })
        .collect()
}

/// `tasks/list` pages: the request goes to the named server with the cursor it was given,
/// each task comes back byte for byte with the next cursor, and a server that did not
/// declare `tasks.list` is refused without a request.
#[test]
fn task_lists_are_paged_by_the_callers_cursor_and_undeclared_ones_refused() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    for server in ["a", "b"] {
        s.opened(5, server);
    }
    s.reply(
        10,
        "a",
        "initialize",
        json!({"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "tasks": {"list": {}, "requests": {"tools": {"call": {}}}}}}),
    );
    s.reply(
        10,
        "b",
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}}),
    );
    s.reply(20, "a", "tools/list", tools_json(&["echo"]));
    s.reply(20, "b", "tools/list", tools_json(&["echo"]));
    let list = |cursor: Option<&str>| Operation::ListTasks {
        server: "a".into(),
        cursor: cursor.map(str::to_string),
    };
    op(&mut s, 30, 1, list(None));
    let task = r#"{"taskId":"t-1","status":"working","pollInterval":500}"#;
    s.reply(
        35,
        "a",
        "tasks/list",
        json!({"tasks": [serde_json::from_str::<Value>(task).unwrap()], "nextCursor": "page-2"}),
    );
    let OperationResult::Tasks(page) = op_result(&s, 1) else {
        panic!("{:?}", op_result(&s, 1));
    };
    assert_eq!(page.server, "a");
    assert_eq!(page.tasks.len(), 1);
    // Kept as the server's raw JSON (the script re-serializes what it sends, so compare values).
    let kept: Value = serde_json::from_str(page.tasks[0].get()).unwrap();
    assert_eq!(kept, serde_json::from_str::<Value>(task).unwrap());
    assert_eq!(page.next_cursor.as_deref(), Some("page-2"));
    op(&mut s, 40, 2, list(Some("page-2")));
    assert!(
        sent_json(&s, "a")
            .iter()
            .any(|f| f["method"] == "tasks/list" && f["params"]["cursor"] == "page-2"),
        "the second page was asked with the first page's cursor"
    );
    s.reply(45, "a", "tasks/list", json!({"tasks": []}));
    let OperationResult::Tasks(last) = op_result(&s, 2) else {
        panic!("{:?}", op_result(&s, 2));
    };
    assert!(last.tasks.is_empty() && last.next_cursor.is_none());
    op(
        &mut s,
        50,
        3,
        Operation::ListTasks {
            server: "b".into(),
            cursor: None,
        },
    );
    assert!(matches!(op_error(&s, 3), CallError::Unsupported { .. }));
    assert!(!sent_json(&s, "b")
        .iter()
        .any(|f| f["method"] == "tasks/list"));
}
