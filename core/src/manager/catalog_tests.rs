//! The resources and prompts a server of the initialize-based revisions lists, driven through
//! the manager's inputs: a list longer than the page bound ends empty with a warning, and one
//! past the item bound fails (one at it is kept); an item that cannot be read is skipped with
//! a warning; a changed prompt list is announced as prompts (not resources) having changed and
//! listed once more if it changes while listed, and one re-listed while the server still lists
//! its tools is shown once the server is ready, not before; a cache that answers after the
//! startup gate shows its catalog at once, and a prompt asked for from it is sent once its
//! server lists it live; a changed list is stored in the cache; a tools-only server leaves the
//! catalog generation alone, and a server down for good takes its resources out and moves it.

use super::era_tests::{
    answer, cache_answers, closed, connect_unopened, drain, lose_and_reconnect, open,
};
use super::legacy_tests::{initialize_ok, request_id, request_of};
use super::*;
use crate::time::Instant;
use serde_json::{json, Value};
use std::time::Duration;

fn ok(id: u64, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn announced(outs: &[Output]) -> (usize, usize) {
    let count = |f: fn(&Event) -> bool| {
        outs.iter()
            .filter(|o| matches!(o, Output::Event(e) if f(e)))
            .count()
    };
    (
        count(|e| matches!(e, Event::ResourcesChanged { .. })),
        count(|e| matches!(e, Event::PromptsChanged { .. })),
    )
}

/// Opens server `s`, which declares resources, and answers its (empty) template list: the
/// attempt and the id of its first `resources/list`, still unanswered.
fn resources_server(m: &mut Manager) -> (ConnId, u64) {
    let (conn, outs) = open(m, 0);
    let init = request_of(&outs, "initialize");
    let outs = answer(m, 1, conn, initialize_ok(init, json!({"resources": {}})));
    let templates = request_of(&outs, "resources/templates/list");
    answer(m, 1, conn, ok(templates, json!({"resourceTemplates": []})));
    (conn, request_of(&outs, "resources/list"))
}

#[test]
fn a_resource_list_longer_than_the_page_bound_ends_empty_with_a_warning() {
    let o = ManagerOptions {
        max_tool_pages: 2,
        ..ManagerOptions::default()
    };
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, list) = resources_server(&mut m);
    let mut id = list;
    let mut warned = Vec::new();
    for page in 1..=2 {
        let result = json!({"resources": [{"uri": format!("file:///{page}"), "name": "r"}],
            "nextCursor": format!("c{page}")});
        let outs = answer(&mut m, 2, conn, ok(id, result));
        match request_id(&outs, "resources/list") {
            Some(next) => {
                assert_eq!(page, 1, "a third page is not asked for");
                id = next;
            }
            None => {
                assert_eq!(page, 2, "the second page is asked for");
                warned.extend(warnings(&outs));
            }
        }
    }
    assert!(
        warned.iter().any(|w| w.contains("more than 2 pages")),
        "{warned:?}"
    );
    assert!(m.resources().is_empty());
    let c = m.counters();
    assert_eq!(
        (
            c.catalog_lists_failed,
            c.resource_pages_requested,
            c.template_pages_requested
        ),
        (1, 2, 1)
    );
    // The server itself is fine: only that list is empty.
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
}

#[test]
fn a_changed_prompt_list_is_announced_as_prompts_changed() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let init = request_of(&outs, "initialize");
    let caps = json!({"prompts": {"listChanged": true}});
    let outs = answer(&mut m, 1, conn, initialize_ok(init, caps));
    let list = request_of(&outs, "prompts/list");
    answer(
        &mut m,
        2,
        conn,
        ok(list, json!({"prompts": [{"name": "a"}]})),
    );
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
    let outs = answer(&mut m, 3, conn, changed);
    let list = request_of(&outs, "prompts/list");
    let outs = answer(
        &mut m,
        4,
        conn,
        ok(list, json!({"prompts": [{"name": "a"}, {"name": "b"}]})),
    );
    assert_eq!(announced(&outs), (0, 1), "{outs:?}");
    assert_eq!(m.prompts().len(), 2);
    // The cache learns the new list, so a warm start shows it.
    let stored = outs.iter().find_map(|o| match o {
        Output::StoreCache { catalog, .. } => Some(catalog.prompts.len()),
        _ => None,
    });
    assert_eq!(stored, Some(2), "{outs:?}");
    // One page asked at the start and one after the change.
    assert_eq!(m.counters().prompt_pages_requested, 2);
    drain(&mut m);
}

#[test]
fn a_server_that_no_longer_declares_resources_after_a_reconnect_shows_none() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, list) = resources_server(&mut m);
    let r = json!({"resources": [{"uri": "file:///a", "name": "a"}]});
    answer(&mut m, 2, conn, ok(list, r));
    assert_eq!(m.resources().len(), 1);
    let (conn, at, outs) = lose_and_reconnect(&mut m, conn, 3);
    let init = request_of(&outs, "initialize");
    // The restarted server offers tools only now.
    let outs = answer(
        &mut m,
        at.as_millis() + 1,
        conn,
        initialize_ok(init, json!({"tools": {}})),
    );
    let tools = request_of(&outs, "tools/list");
    let outs = answer(
        &mut m,
        at.as_millis() + 2,
        conn,
        ok(tools, json!({"tools": []})),
    );
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    assert_eq!(m.resources(), vec![], "{outs:?}");
    // Resources changed; prompts, which it never offered, did not.
    assert_eq!(announced(&outs), (1, 0), "{outs:?}");
}

#[test]
fn a_cache_that_answers_after_the_gate_shows_its_catalog_and_moves_the_generation() {
    let o = ManagerOptions {
        gate: Duration::from_millis(100),
        ..ManagerOptions::default()
    };
    let mut m = Manager::new(o, Instant::ZERO);
    let (_, key) = connect_unopened(&mut m);
    // The gate passes before the cache answers: the server is deferred with nothing to show.
    m.handle_timeout(Instant::from_millis(100));
    drain(&mut m);
    assert!(m.resources().is_empty());
    assert_eq!(m.counters().gates_by_timer, 1);
    let before = m.catalog_generation();
    let catalog = crate::catalog::Catalog {
        resources: vec![serde_json::from_value(json!({"uri": "file:///a", "name": "a"})).unwrap()],
        ..Default::default()
    };
    cache_answers(
        &mut m,
        150,
        key,
        vec![crate::tool::ToolDef::named("t")],
        Some(catalog),
    );
    let shown: Vec<(String, bool)> = m
        .resources()
        .into_iter()
        .map(|r| (r.def.uri, r.deferred))
        .collect();
    assert_eq!(shown, vec![("file:///a".to_string(), true)]);
    assert_ne!(m.catalog_generation(), before);
}

/// The warnings among `outs`.
fn warnings(outs: &[Output]) -> Vec<String> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Event(Event::Diagnostic {
                level: Level::Warn,
                message,
                ..
            }) => Some(message.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_resource_without_a_uri_is_skipped_with_a_warning_and_the_rest_is_kept() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, list) = resources_server(&mut m);
    let r = json!({"resources": [{"name": "broken"}, {"uri": "file:///a", "name": "a"}]});
    let outs = answer(&mut m, 2, conn, ok(list, r));
    let w = warnings(&outs);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("resources/list"), "{w:?}");
    assert_eq!(m.resources().len(), 1);
}

#[test]
fn a_prompt_list_change_heard_while_it_is_listed_lists_it_once_more() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let init = request_of(&outs, "initialize");
    let caps = json!({"prompts": {"listChanged": true}});
    let outs = answer(&mut m, 1, conn, initialize_ok(init, caps));
    let first = request_of(&outs, "prompts/list");
    answer(
        &mut m,
        2,
        conn,
        ok(first, json!({"prompts": [{"name": "a"}]})),
    );
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
    let list = request_of(&answer(&mut m, 3, conn, changed.clone()), "prompts/list");
    // Changed again while that list is out: it may predate the change, so one more follows.
    assert_eq!(
        request_id(&answer(&mut m, 4, conn, changed), "prompts/list"),
        None
    );
    let outs = answer(
        &mut m,
        5,
        conn,
        ok(list, json!({"prompts": [{"name": "a"}]})),
    );
    let again = request_of(&outs, "prompts/list");
    answer(
        &mut m,
        6,
        conn,
        ok(again, json!({"prompts": [{"name": "a"}, {"name": "b"}]})),
    );
    assert_eq!(m.prompts().len(), 2);
    assert_eq!(m.counters().catalog_relists_coalesced, 1);
}

#[test]
fn a_prompt_list_changed_before_the_tools_are_listed_is_shown_once_the_server_is_ready() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let init = request_of(&outs, "initialize");
    let caps = json!({"tools": {}, "prompts": {"listChanged": true}});
    let outs = answer(&mut m, 1, conn, initialize_ok(init, caps));
    let tools = request_of(&outs, "tools/list");
    let first = request_of(&outs, "prompts/list");
    answer(
        &mut m,
        2,
        conn,
        ok(first, json!({"prompts": [{"name": "a"}]})),
    );
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
    let list = request_of(&answer(&mut m, 3, conn, changed), "prompts/list");
    // Listed again while the server is still listing its tools: nothing is announced or
    // stored for a server that is not ready.
    let outs = answer(
        &mut m,
        4,
        conn,
        ok(list, json!({"prompts": [{"name": "a"}, {"name": "b"}]})),
    );
    assert_eq!(announced(&outs), (0, 0), "{outs:?}");
    assert!(
        !outs.iter().any(|o| matches!(o, Output::StoreCache { .. })),
        "{outs:?}"
    );
    let outs = answer(&mut m, 5, conn, ok(tools, json!({"tools": []})));
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    assert_eq!(m.prompts().len(), 2, "{outs:?}");
}

#[test]
fn a_list_past_the_item_bound_in_a_single_page_fails_and_one_at_the_bound_is_kept() {
    for (items, kept) in [
        (MAX_CATALOG_ITEMS + 1, 0),
        (MAX_CATALOG_ITEMS, MAX_CATALOG_ITEMS),
    ] {
        let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
        let (conn, list) = resources_server(&mut m);
        let resources: Vec<Value> = (0..items)
            .map(|i| json!({"uri": format!("file:///{i}"), "name": "r"}))
            .collect();
        let outs = answer(&mut m, 2, conn, ok(list, json!({ "resources": resources })));
        assert_eq!(m.resources().len(), kept);
        let bound = format!("more than {MAX_CATALOG_ITEMS} items");
        let warned = warnings(&outs).iter().any(|w| w.contains(&bound));
        assert_eq!(warned, kept == 0, "{items} items");
        assert_eq!(m.counters().catalog_lists_failed, u64::from(kept == 0));
    }
}

#[test]
fn a_tools_only_server_coming_and_going_leaves_the_catalog_generation_alone() {
    // An embedder re-reads resources and prompts when the generation moves: a server with
    // nothing of them must not make it re-read for nothing.
    let (mut m, conn) = super::legacy_tests::connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t"}]),
    );
    assert_eq!(m.catalog_generation(), 0);
    lose_and_reconnect(&mut m, conn, 3);
    assert_eq!(
        m.server_state("s").unwrap().status,
        ServerStatus::Connecting
    );
    assert_eq!(m.catalog_generation(), 0);
}

#[test]
fn a_server_down_for_good_takes_its_resources_out_and_moves_the_generation() {
    let o = ManagerOptions {
        reconnect: ReconnectPolicy::never(),
        ..ManagerOptions::default()
    };
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, list) = resources_server(&mut m);
    let r = json!({"resources": [{"uri": "file:///a", "name": "a"}]});
    answer(&mut m, 2, conn, ok(list, r));
    assert_eq!(m.resources().len(), 1);
    let before = m.catalog_generation();
    closed(&mut m, 3, conn);
    assert!(m.resources().is_empty());
    assert_ne!(m.catalog_generation(), before);
}

#[test]
fn a_prompt_asked_for_from_the_cache_is_sent_once_its_server_lists_it_live() {
    let o = ManagerOptions {
        gate: Duration::from_millis(100),
        ..ManagerOptions::default()
    };
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, key) = connect_unopened(&mut m);
    let catalog = crate::catalog::Catalog {
        prompts: vec![serde_json::from_value(json!({"name": "p"})).unwrap()],
        ..Default::default()
    };
    cache_answers(&mut m, 1, key, Vec::new(), Some(catalog));
    m.handle_timeout(Instant::from_millis(100));
    drain(&mut m);
    assert_eq!(m.prompts().len(), 1);
    m.handle(
        Instant::from_millis(101),
        Input::Operation {
            call: CallId(3),
            op: crate::catalog::Operation::GetPrompt {
                name: "mcp_s_p".into(),
                arguments: Default::default(),
            },
            timeout: None,
        },
    );
    drain(&mut m);
    let outs = super::era_tests::transport_opened(&mut m, 102, conn);
    let init = request_of(&outs, "initialize");
    let outs = answer(
        &mut m,
        103,
        conn,
        initialize_ok(init, json!({"prompts": {}})),
    );
    let list = request_of(&outs, "prompts/list");
    let outs = answer(
        &mut m,
        104,
        conn,
        ok(list, json!({"prompts": [{"name": "p"}]})),
    );
    let get = request_id(&outs, "prompts/get").expect("sent once listed");
    let outs = answer(&mut m, 105, conn, ok(get, json!({"messages": []})));
    assert!(
        outs.iter().any(|o| matches!(o,
            Output::Event(Event::OperationCompleted { call: CallId(3), outcome })
                if matches!(outcome, crate::catalog::OperationOutcome::Ok(_)))),
        "{outs:?}"
    );
    assert_eq!(m.counters().prompts_got, 1);
}
