//! Cache hints of a stateless server (`ttlMs`, `cacheScope`) driven through the manager's
//! inputs: a live TTL lets a reconnect or a warm start skip listing until it expires, a missing
//! one lists at once, a change announced makes the lists stale, and a private entry is never
//! used under other credentials.

use super::era_tests::{
    cache_answers, connect_unopened, discover_ok, discover_with, drain, open, probing, sent,
};
use super::*;
use crate::catalog::Catalog;
use crate::protocol::CacheScope;
use crate::time::Instant;
use bytes::Bytes;
use serde_json::{json, Value};

fn answer(m: &mut Manager, at: u64, conn: ConnId, body: Value) -> Vec<Output> {
    super::era_tests::answer(m, at, conn, body)
}

fn tools_page(id: u64, hints: Value) -> Value {
    let mut result = json!({"tools": [{"name": "t"}]});
    if let (Value::Object(r), Value::Object(h)) = (&mut result, hints) {
        r.extend(h);
    }
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn stored_catalog(outs: &[Output]) -> Option<Catalog> {
    outs.iter().find_map(|o| match o {
        Output::StoreCache { catalog, .. } => Some(catalog.clone()),
        _ => None,
    })
}

/// Connect, discover, list with `hints`: what the cache was asked to store.
fn connect_listed(m: &mut Manager, hints: Value) -> (ConnId, Catalog) {
    let (conn, outs) = open(m, 0);
    let probe = sent(&outs)[0].1;
    let outs = answer(m, 5, conn, discover_ok(probe));
    let list = sent(&outs)[0].1;
    let outs = answer(m, 10, conn, tools_page(list, hints));
    (conn, stored_catalog(&outs).expect("stored"))
}

/// The connection ends by itself; the reconnect that follows opens. Its first outputs.
fn reconnect(m: &mut Manager, conn: ConnId, at: u64) -> (ConnId, Vec<Output>) {
    reconnect_finding(m, conn, at, discover_ok)
}

/// [`reconnect`], the server answering the probe with `discover(id)`.
fn reconnect_finding(
    m: &mut Manager,
    conn: ConnId,
    at: u64,
    discover: impl Fn(u64) -> Value,
) -> (ConnId, Vec<Output>) {
    m.handle(
        Instant::from_millis(at),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exited".into(),
            },
        },
    );
    drain(m);
    let mut t = at;
    loop {
        t += 50;
        assert!(t < at + 120_000, "no reconnect");
        m.handle_timeout(Instant::from_millis(t));
        let outs = drain(m);
        if let Some(next) = outs.iter().find_map(|o| match o {
            Output::OpenTransport { conn, .. } => Some(*conn),
            _ => None,
        }) {
            m.handle(
                Instant::from_millis(t),
                Input::Transport {
                    conn: next,
                    event: TransportEvent::Opened,
                },
            );
            // A failed connection forgets its revision: the reconnect probes.
            let probe = sent(&drain(m))
                .into_iter()
                .find(|r| r.2 == "server/discover");
            let probe = probe.expect("a probe").1;
            return (next, answer(m, t + 1, next, discover(probe)));
        }
    }
}

fn methods(outs: &[Output]) -> Vec<String> {
    sent(outs).into_iter().map(|r| r.2).collect()
}

#[test]
fn a_live_ttl_lets_a_reconnect_skip_listing_until_it_expires() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, stored) = connect_listed(&mut m, json!({"ttlMs": 60_000, "cacheScope": "public"}));
    let f = stored.freshness.expect("a fresh entry");
    assert_eq!(
        (f.ttl_ms, f.scope, f.identity),
        (60_000, CacheScope::Public, None)
    );
    let (conn2, outs) = reconnect(&mut m, conn, 1_000);
    // Once the server is found again, declaring what it did: no list, ready from what it
    // listed.
    let asked = methods(&outs);
    assert!(!asked.iter().any(|x| x == "tools/list"), "{asked:?}");
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    assert_eq!(m.tools().len(), 1);
    assert!(!m.tools()[0].deferred);
    assert_eq!(m.counters().lists_skipped_fresh, 1);
    // Stored again with what is left of the hint, not a new one.
    let left = stored_catalog(&outs)
        .and_then(|c| c.freshness)
        .map(|f| f.ttl_ms);
    assert!(left.is_some_and(|ms| ms < 60_000), "{left:?}");
    // When it expires (60 s after the page came, at 10 ms), the list is asked again.
    m.handle_timeout(Instant::from_millis(60_009));
    assert!(!methods(&drain(&mut m)).contains(&"tools/list".to_string()));
    m.handle_timeout(Instant::from_millis(60_010));
    let relisted = sent(&drain(&mut m));
    assert!(
        relisted.iter().any(|r| r.0 == conn2 && r.2 == "tools/list"),
        "{relisted:?}"
    );
    assert_eq!(m.counters().lists_expired_relisted, 1);
}

#[test]
fn a_missing_or_zero_ttl_lists_again_at_once() {
    for hints in [json!({}), json!({"ttlMs": 0, "cacheScope": "public"})] {
        let mut m = Manager::new(probing(), Instant::ZERO);
        let (conn, stored) = connect_listed(&mut m, hints);
        assert_eq!(stored.freshness, None);
        let (_, outs) = reconnect(&mut m, conn, 1_000);
        assert!(methods(&outs).contains(&"tools/list".to_string()));
        assert_eq!(m.counters().lists_skipped_fresh, 0);
    }
}

/// A discover answer declaring `tools.listChanged`.
fn discover_announcing(id: u64) -> Value {
    discover_with(id, json!({"tools": {"listChanged": true}}))
}

#[test]
fn a_change_the_server_announces_makes_fresh_lists_stale() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let outs = answer(&mut m, 5, conn, discover_announcing(sent(&outs)[0].1));
    let list = sent(&outs)[0].1;
    answer(&mut m, 10, conn, tools_page(list, json!({"ttlMs": 60_000})));
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    let outs = answer(&mut m, 20, conn, changed);
    // The re-list it causes fails to come back before the connection ends...
    assert!(methods(&outs).contains(&"tools/list".to_string()));
    // ...so the reconnect lists: what the cache holds predates the change (the server
    // declares what it declared when the lists were made, so only their staleness says so).
    let (_, outs) = reconnect_finding(&mut m, conn, 30, discover_announcing);
    assert!(methods(&outs).contains(&"tools/list".to_string()));
    assert_eq!(m.counters().lists_skipped_fresh, 0);
}

/// A new manager (a warm start) whose cache answers `catalog` for server `s`; the outputs of
/// its open.
fn warm_start(catalog: Catalog) -> (Manager, Vec<Output>) {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, key) = connect_unopened(&mut m);
    let tools = vec![crate::tool::ToolDef::named("t")];
    cache_answers(&mut m, 1, key, tools, Some(catalog));
    m.handle(
        Instant::from_millis(2),
        Input::Transport {
            conn,
            event: TransportEvent::Opened,
        },
    );
    let outs = drain(&mut m);
    (m, outs)
}

#[test]
fn a_fresh_private_entry_serves_a_warm_start_under_the_same_credentials_only() {
    // What a first run stored.
    let mut first = Manager::new(probing(), Instant::ZERO);
    let (_, stored) = connect_listed(
        &mut first,
        json!({"ttlMs": 600_000, "cacheScope": "private"}),
    );
    let f = stored.freshness.clone().expect("fresh");
    assert_eq!(f.scope, CacheScope::Private);
    // Bound to the fingerprint of the resolved config (16 bytes of its SHA-256, in hex),
    // never to an empty one every config would share.
    let identity = f.identity.clone().unwrap_or_default();
    assert_eq!(identity.len(), 32, "{identity:?}");
    assert!(
        identity.bytes().all(|b| b.is_ascii_hexdigit()),
        "{identity}"
    );
    // A warm start under the same config: ready at once, no probe, no list.
    let (m, outs) = warm_start(stored.clone());
    assert!(methods(&outs).is_empty(), "{:?}", methods(&outs));
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    assert_eq!(m.counters().cache_fresh_loaded, 1);
    // The same entry written under other credentials: a miss, never shown, and the server
    // is probed and listed as if nothing were cached.
    let mut foreign = stored;
    if let Some(f) = foreign.freshness.as_mut() {
        f.identity = Some("0123456789abcdef0123456789abcdef".into());
    }
    let (mut m, outs) = warm_start(foreign);
    assert_eq!(methods(&outs), vec!["server/discover".to_string()]);
    m.handle_timeout(Instant::from_millis(300));
    assert!(m.tools().is_empty());
    assert_eq!(m.counters().cache_private_refused, 1);
    // An expired one still serves the gate (deferred), and the server is listed at once.
    let mut expired = first_run_public();
    if let Some(f) = expired.freshness.as_mut() {
        f.ttl_ms = 0;
    }
    let (mut m, outs) = warm_start(expired);
    assert_eq!(methods(&outs), vec!["tools/list".to_string()]);
    m.handle_timeout(Instant::from_millis(300));
    assert!(m.tools()[0].deferred);
}

fn first_run_public() -> Catalog {
    let mut first = Manager::new(probing(), Instant::ZERO);
    connect_listed(
        &mut first,
        json!({"ttlMs": 600_000, "cacheScope": "public"}),
    )
    .1
}

#[test]
fn every_page_counts_the_earliest_expiry_and_the_narrowest_scope_win() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)[0].1;
    let outs = answer(&mut m, 5, conn, discover_ok(probe));
    let list = sent(&outs)[0].1;
    let page1 = json!({"jsonrpc": "2.0", "id": list, "result": {"tools": [{"name": "a"}],
        "nextCursor": "c", "ttlMs": 5_000, "cacheScope": "public"}});
    let outs = answer(&mut m, 10, conn, page1);
    let next = sent(&outs)[0].1;
    let page2 = json!({"jsonrpc": "2.0", "id": next, "result": {"tools": [{"name": "b"}],
        "ttlMs": 90_000, "cacheScope": "private"}});
    let frame = Bytes::from(page2.to_string());
    m.handle(
        Instant::from_millis(20),
        Input::Transport {
            conn,
            event: TransportEvent::Frame(frame),
        },
    );
    let f = stored_catalog(&drain(&mut m))
        .and_then(|c| c.freshness)
        .expect("fresh");
    // 5 s from the first page (at 10 ms), counted from the store (at 20 ms).
    assert_eq!(f.ttl_ms, 4_990);
    assert_eq!(f.scope, CacheScope::Private);
}

#[test]
fn lists_whose_freshness_ends_at_the_warm_starts_instant_are_listed_again() {
    // The cache loads at 1 ms, the transport opens at 2 ms: an entry fresh for 1 ms more
    // has expired by then (freshness is "until", not "through"), one fresh for 2 ms has not.
    let mut ending = first_run_public();
    if let Some(f) = ending.freshness.as_mut() {
        f.ttl_ms = 1;
    }
    let (m, outs) = warm_start(ending);
    assert_eq!(methods(&outs), vec!["tools/list".to_string()]);
    assert_eq!(m.counters().lists_skipped_fresh, 0);
    assert_ne!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    let mut still = first_run_public();
    if let Some(f) = still.freshness.as_mut() {
        f.ttl_ms = 2;
    }
    let (m, outs) = warm_start(still);
    assert!(methods(&outs).is_empty(), "{:?}", methods(&outs));
    assert_eq!(m.counters().lists_skipped_fresh, 1);
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
}

#[test]
fn fresh_lists_are_asked_again_when_the_shell_wakes_after_they_expired() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, _) = connect_listed(&mut m, json!({"ttlMs": 60_000, "cacheScope": "public"}));
    let (conn2, _) = reconnect(&mut m, conn, 1_000);
    assert_eq!(m.counters().lists_skipped_fresh, 1);
    // Expiry is at 60,010 ms; a loaded machine wakes the driver half a second late. What is
    // overdue is acted on all the same.
    m.handle_timeout(Instant::from_millis(60_500));
    let relisted = sent(&drain(&mut m));
    assert!(
        relisted.iter().any(|r| r.0 == conn2 && r.2 == "tools/list"),
        "{relisted:?}"
    );
    assert_eq!(m.counters().lists_expired_relisted, 1);
    // Nothing is left armed for the expiry that was acted on.
    assert!(m
        .poll_timeout()
        .is_none_or(|t| t > Instant::from_millis(60_500)));
}

#[test]
fn a_prompt_list_counts_toward_the_freshness_beside_the_tool_list() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)[0].1;
    let discover = discover_with(probe, json!({"tools": {}, "prompts": {}}));
    let outs = answer(&mut m, 5, conn, discover);
    let id_of = |outs: &[Output], method: &str| {
        sent(outs)
            .into_iter()
            .find(|r| r.2 == method)
            .map(|r| r.1)
            .unwrap_or_else(|| panic!("no {method}"))
    };
    let (tools, prompts) = (id_of(&outs, "tools/list"), id_of(&outs, "prompts/list"));
    let prompts_page = json!({"jsonrpc": "2.0", "id": prompts, "result": {
        "prompts": [{"name": "p"}], "ttlMs": 30_000, "cacheScope": "public"}});
    answer(&mut m, 10, conn, prompts_page);
    let tools_page = json!({"jsonrpc": "2.0", "id": tools, "result": {
        "tools": [{"name": "t"}], "ttlMs": 60_000, "cacheScope": "public"}});
    let outs = answer(&mut m, 10, conn, tools_page);
    let f = stored_catalog(&outs)
        .and_then(|c| c.freshness)
        .expect("every declared list had a hint");
    // The prompt list's 30 s, the earlier of the two.
    assert_eq!(f.ttl_ms, 30_000);
}

#[test]
fn a_warm_start_from_fresh_lists_shows_the_cached_resources_as_live() {
    // A first run of a server with tools and resources, every list fresh for ten minutes.
    let mut first = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut first, 0);
    let probe = sent(&outs)[0].1;
    let discover = discover_with(probe, json!({"tools": {}, "resources": {}}));
    let mut pending = sent(&answer(&mut first, 5, conn, discover));
    let mut stored = None;
    while let Some((_, id, method, _, _)) = pending.pop() {
        let mut result = match method.as_str() {
            "tools/list" => json!({"tools": [{"name": "t"}]}),
            "resources/list" => json!({"resources": [{"uri": "file:///a", "name": "a"}]}),
            "resources/templates/list" => json!({"resourceTemplates": []}),
            other => panic!("unexpected {other}"),
        };
        result["ttlMs"] = json!(600_000);
        result["cacheScope"] = json!("public");
        let outs = answer(
            &mut first,
            10,
            conn,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
        pending.extend(sent(&outs));
        stored = stored_catalog(&outs).or(stored);
    }
    let stored = stored.expect("stored");
    assert!(stored.freshness.is_some(), "every list had a hint");
    // The warm start goes ready from it: no list, and the resource is live, not deferred.
    let (m, outs) = warm_start(stored);
    assert!(methods(&outs).is_empty(), "{:?}", methods(&outs));
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    let shown: Vec<(String, bool)> = m
        .resources()
        .into_iter()
        .map(|r| (r.def.uri, r.deferred))
        .collect();
    assert_eq!(shown, vec![("file:///a".to_string(), false)]);
}
