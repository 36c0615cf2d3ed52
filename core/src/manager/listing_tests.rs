//! A connected server's tool list listed again, driven through the manager's inputs: each
//! refresh is answered by the first list fetched after it was asked, a repeated cursor ends a
//! list as failed, and a call whose tool left the list while it ran is still checked against
//! the definition it was made against (or passed unchecked, with a warning, when its schema
//! cannot be used); a renewed HTTP session lists the tools again.

use super::era_tests::{answer, deferred_on_cache, drain, open, transport_opened};
use super::legacy_tests::{
    call, call_outcome, connected, initialize_ok, request_id, request_of, tools, NeedsOk,
};
use super::*;
use crate::time::Instant;
use serde_json::{json, Value};

fn refresh(m: &mut Manager, at: u64, request: u64) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::RefreshTools {
            request: RequestId(request),
            server: "s".into(),
        },
    );
    drain(m)
}

/// The requests whose refresh completed among `outs`, with whether it succeeded.
fn refreshed(outs: &[Output]) -> Vec<(u64, bool)> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Event(Event::RefreshCompleted {
                request, result, ..
            }) => Some((request.0, result.is_ok())),
            _ => None,
        })
        .collect()
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

#[test]
fn a_refresh_asked_while_one_runs_is_answered_by_the_list_after_it() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([tool("t")]),
    );
    let first = request_of(&refresh(&mut m, 10, 1), "tools/list");
    // Asked while the first re-list is out: that list may predate what it wants to see.
    let outs = refresh(&mut m, 11, 2);
    assert_eq!(request_id(&outs, "tools/list"), None, "one list at a time");
    assert_eq!(m.counters().refreshes_queued, 1);
    let outs = answer(&mut m, 12, conn, tools(first, json!([tool("t")])));
    assert_eq!(refreshed(&outs), vec![(1, true)], "{outs:?}");
    let second = request_of(&outs, "tools/list");
    let outs = answer(
        &mut m,
        13,
        conn,
        tools(second, json!([tool("t"), tool("u")])),
    );
    assert_eq!(refreshed(&outs), vec![(2, true)], "{outs:?}");
    assert_eq!(m.tool_count(), 2);
    assert_eq!(m.counters().list_changed_applied, 2);
}

#[test]
fn a_repeated_cursor_fails_the_list_and_keeps_the_previous_tools() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([tool("t")]),
    );
    let page = |id: u64, name: &str| {
        json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [tool(name)],
            "nextCursor": "c"}})
    };
    let id = request_of(&refresh(&mut m, 10, 1), "tools/list");
    let outs = answer(&mut m, 11, conn, page(id, "u"));
    let id = request_of(&outs, "tools/list");
    // The server hands out the cursor it gave before: a loop, not a list.
    let outs = answer(&mut m, 12, conn, page(id, "v"));
    assert_eq!(request_id(&outs, "tools/list"), None, "{outs:?}");
    assert_eq!(refreshed(&outs), vec![(1, false)], "{outs:?}");
    let why = outs.iter().find_map(|o| match o {
        Output::Event(Event::RefreshCompleted { result: Err(e), .. }) => Some(e.to_string()),
        _ => None,
    });
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("repeated cursor \"c\"")),
        "{why:?}"
    );
    assert_eq!(m.counters().repeated_cursors, 1);
    let names: Vec<String> = m.tools().into_iter().map(|t| t.qualified_name).collect();
    assert_eq!(names, vec!["mcp_s_t"]);
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
}

#[test]
fn a_call_whose_tool_left_the_list_while_it_ran_is_checked_against_its_definition() {
    let o = ManagerOptions {
        output_validator: Some(crate::schema::SharedValidator::new(NeedsOk)),
        ..ManagerOptions::default()
    };
    let with_schema = json!({"name": "t", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"}});
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([with_schema, tool("z")]));
    let call_id = request_of(&call(&mut m, 10, 1, None), "tools/call");
    // The list changes under the call: `t` is gone.
    let list = request_of(&refresh(&mut m, 11, 1), "tools/list");
    answer(&mut m, 12, conn, tools(list, json!([tool("z")])));
    assert!(m.tools().iter().all(|t| t.qualified_name != "mcp_s_t"));
    let result = json!({"content": [], "structuredContent": {"ok": false}});
    let outs = answer(
        &mut m,
        13,
        conn,
        json!({"jsonrpc": "2.0", "id": call_id, "result": result}),
    );
    assert!(
        matches!(
            call_outcome(&outs),
            Some(CallOutcome::Err(CallError::OutputSchema { .. }))
        ),
        "{outs:?}"
    );
    assert_eq!(m.counters().output_schema_refused, 1);
    // A new call by its old name is told the tool is gone from a server still running.
    let outs = call(&mut m, 14, 2, None);
    assert!(
        matches!(
            call_outcome(&outs),
            Some(CallOutcome::Err(CallError::RetiredTool { .. }))
        ),
        "{outs:?}"
    );
    assert_eq!(m.counters().calls_to_retired_tools, 1);
}

#[test]
fn a_refresh_of_an_unknown_server_is_refused_naming_it() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let outs = refresh(&mut m, 0, 4);
    let error = outs
        .iter()
        .find_map(|o| match o {
            Output::Event(Event::RequestFailed { request, error }) if request.0 == 4 => {
                Some(error.clone())
            }
            _ => None,
        })
        .expect("refused");
    assert_eq!(error, RequestError::UnknownServer("s".into()));
    assert_eq!(error.to_string(), "no server named \"s\"");
}

/// A checker that can compile no schema.
struct Unusable;

impl crate::schema::OutputValidator for Unusable {
    fn compile(
        &self,
        _: &crate::tool::RawJson,
    ) -> Result<std::sync::Arc<dyn crate::schema::CompiledSchema>, String> {
        Err("unsupported draft".into())
    }
}

#[test]
fn a_listed_output_schema_that_cannot_be_used_leaves_results_unchecked_with_a_warning() {
    let o = ManagerOptions {
        output_validator: Some(crate::schema::SharedValidator::new(Unusable)),
        ..ManagerOptions::default()
    };
    let with_schema = json!({"name": "t", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"}});
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([with_schema]));
    let id = request_of(&call(&mut m, 10, 1, None), "tools/call");
    let result = json!({"content": [], "structuredContent": {"anything": 1}});
    let outs = answer(
        &mut m,
        11,
        conn,
        json!({"jsonrpc": "2.0", "id": id, "result": result}),
    );
    assert!(
        matches!(call_outcome(&outs), Some(CallOutcome::Ok(_))),
        "{outs:?}"
    );
    assert!(
        outs.iter()
            .any(|o| matches!(o, Output::Event(Event::Diagnostic {
            level: Level::Warn, message, ..
        }) if message.contains("unsupported draft"))),
        "{outs:?}"
    );
    let c = m.counters();
    assert_eq!(
        (
            c.output_schema_unusable,
            c.output_schema_passed,
            c.output_schema_refused
        ),
        (1, 0, 0)
    );
}

#[test]
fn a_refresh_of_a_connecting_server_is_answered_by_its_first_list() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let init = request_of(&outs, "initialize");
    // Asked while the server initializes: no list of its own, the first one answers it.
    assert!(refreshed(&refresh(&mut m, 1, 7)).is_empty());
    assert_eq!(m.counters().refreshes_of_connecting, 1);
    let outs = answer(&mut m, 2, conn, initialize_ok(init, json!({"tools": {}})));
    let list = request_of(&outs, "tools/list");
    let outs = answer(&mut m, 3, conn, tools(list, json!([tool("t")])));
    assert_eq!(refreshed(&outs), vec![(7, true)], "{outs:?}");
    assert_eq!(request_id(&outs, "tools/list"), None, "one list, not two");
}

#[test]
fn a_call_made_against_a_cached_definition_is_checked_against_the_one_it_was_sent_with() {
    let o = ManagerOptions {
        output_validator: Some(crate::schema::SharedValidator::new(NeedsOk)),
        ..ManagerOptions::default()
    };
    // The cache remembers `t` without an output schema; the server now lists it with one.
    let (mut m, conn) = deferred_on_cache(o, vec![crate::tool::ToolDef::named("t")]);
    assert_eq!(m.counters().deferred_servers_at_gate, 1);
    assert!(request_id(&call(&mut m, 101, 1, None), "tools/call").is_none());
    let init = request_of(&transport_opened(&mut m, 102, conn), "initialize");
    let outs = answer(&mut m, 103, conn, initialize_ok(init, json!({"tools": {}})));
    let with_schema = json!({"name": "t", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"}});
    let listed = json!([with_schema, tool("z")]);
    let outs = answer(
        &mut m,
        104,
        conn,
        tools(request_of(&outs, "tools/list"), listed),
    );
    let id = request_of(&outs, "tools/call");
    // And then drops it while the call runs: the definition it was sent against still holds.
    let list = request_of(&refresh(&mut m, 105, 2), "tools/list");
    answer(&mut m, 106, conn, tools(list, json!([tool("z")])));
    let result = json!({"content": [], "structuredContent": {"ok": false}});
    let outs = answer(
        &mut m,
        107,
        conn,
        json!({"jsonrpc": "2.0", "id": id, "result": result}),
    );
    assert!(
        matches!(
            call_outcome(&outs),
            Some(CallOutcome::Err(CallError::OutputSchema { .. }))
        ),
        "{outs:?}"
    );
}

#[test]
fn a_renewed_http_session_is_announced_and_the_tools_are_listed_again() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([tool("t")]),
    );
    m.handle(
        Instant::from_millis(10),
        Input::Transport {
            conn,
            event: TransportEvent::SessionRenewed,
        },
    );
    let outs = drain(&mut m);
    assert!(
        outs.iter()
            .any(|o| matches!(o, Output::Event(Event::SessionRenewed { server }) if server == "s")),
        "{outs:?}"
    );
    let list = request_of(&outs, "tools/list");
    let outs = answer(&mut m, 11, conn, tools(list, json!([tool("t"), tool("u")])));
    assert_eq!(m.tool_count(), 2, "{outs:?}");
    assert_eq!(m.counters().sessions_renewed, 1);
}
