//! Simulated resources, resource templates and prompts (servers with `catalog`): their
//! lists, derived from the server's current tool set, answered in one or two pages, or
//! failing (an error, or no answer until the manager gives up on it); list changes announced
//! with the tools'; reads, prompt gets, completions and subscriptions with faults of their
//! own; and the embedder's operations, each completing exactly once.
//!
//! The world remembers, per attempt, what each list the manager received last said (what
//! the manager must show once nothing is in flight): the invariant
//! `CatalogSettlesToServerLists` compares it with the manager's views.

use super::os::Proc;
use super::received::{self, Received};
use super::server::{PageKey, Tag};
use super::{answers, World};
use crate::invariants::SettledCatalog;
use crate::observe::{Observer, View};
use crate::scenario::Scenario;
use crate::verdict::Invariant;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use switchboard_core::catalog::{CompletionRef, LogLevel, Operation, OperationOutcome};
use switchboard_core::manager::{CallError, CallId, ConnId, Input, ServerStatus};

/// Resources, templates, prompts: the order of the per-kind arrays.
const KINDS: [(&str, &str); 3] = [
    ("resources/list", "resources"),
    ("resources/templates/list", "resourceTemplates"),
    ("prompts/list", "prompts"),
];

/// A URI every catalog server lists: reading it without naming a server is ambiguous as soon
/// as two of them are connected.
pub(super) const SHARED_URI: &str = "sim://shared/readme";

/// How a list page answer went, when it reaches the manager.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PageOutcome {
    More,
    Final,
    Failed,
}

#[derive(Debug, Clone)]
struct Pending {
    kind: usize,
    items: Vec<String>,
    outcome: PageOutcome,
}

/// One attempt's catalog, as the simulated server keeps it.
#[derive(Debug, Clone, Default)]
pub(crate) struct CatalogProc {
    /// Its lists follow the tools' alternative set.
    alt: bool,
    /// List requests whose answer has not reached the manager (nor been cancelled).
    open: BTreeMap<u64, Pending>,
    /// Items of the listing under way, per kind, as delivered.
    acc: [Vec<String>; 3],
    /// What the last list of each kind that ended told the manager (its view must say it).
    pub(super) applied: [Vec<String>; 3],
    /// A listing of this kind has begun on this attempt.
    begun: [bool; 3],
    /// A list of this kind told the manager what it has on this attempt (an attempt ready
    /// from fresh cached lists shows an earlier attempt's until one does).
    known: [bool; 3],
    /// The listing under way is the attempt's first of its kind.
    first: [bool; 3],
    /// How the listing under way behaves: `None` healthy in one page, else a fault.
    fault: [Option<u64>; 3],
    /// `list_changed` notifications sent and not yet delivered.
    pub(super) changed_in_flight: u32,
    /// Bumped at every write to `applied`: while it (and the attempt) stay the same, so do
    /// the lists the manager's view must match.
    pub(super) applied_gen: u64,
}

impl CatalogProc {
    /// A list of its catalog was asked for on this attempt.
    pub(super) fn asked(&self) -> bool {
        self.begun.iter().any(|b| *b)
    }

    /// Nothing of the catalog is in flight: the manager's view must match `applied`.
    pub(super) fn settled(&self) -> bool {
        self.open.is_empty() && self.changed_in_flight == 0
    }
}

/// The capabilities a catalog server adds to `initialize`.
pub(super) fn add_capabilities(caps: &mut Value) {
    if let Some(c) = caps.as_object_mut() {
        c.insert(
            "resources".into(),
            json!({"subscribe": true, "listChanged": true}),
        );
        c.insert("prompts".into(), json!({"listChanged": true}));
        c.insert("completions".into(), json!({}));
    }
    // It lists its tasks too (beside the task requests a task-running server declares).
    caps["tasks"]["list"] = json!({});
}

/// Item `item` of list `kind`, as [`World::item_json`] builds it.
fn write_item(b: &mut Vec<u8>, kind: usize, item: &str) {
    let mut o = answers::Obj::new(b);
    match kind {
        0 => {
            let name = item.rsplit('/').next().unwrap_or(item);
            o.val("name", name).val("uri", item);
        }
        1 => {
            o.val("name", "by-name").val("uriTemplate", item);
        }
        _ => {
            o.raw("arguments", br#"[{"name":"who","required":false}]"#)
                .val("name", item);
        }
    }
    o.end();
}

/// The methods a catalog server answers besides tools.
pub(super) fn handles(method: &str) -> bool {
    matches!(
        method,
        "resources/list"
            | "resources/templates/list"
            | "prompts/list"
            | "resources/read"
            | "prompts/get"
            | "completion/complete"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "tasks/list"
    )
}

impl World<'_> {
    /// The items of list `kind` of server `i` now (by URI, template or prompt name): a pure
    /// function of the scenario, written once per run and copied from then on (builds with
    /// debug assertions write them again and compare).
    fn catalog_items(&mut self, i: usize, alt: bool, kind: usize) -> Vec<String> {
        let slot = i * 6 + usize::from(alt) * 3 + kind;
        let items = match &self.catalog_items[slot] {
            Some(items) => items.clone(),
            None => {
                let items = self.write_catalog_items(i, alt, kind);
                self.catalog_items[slot] = Some(items.clone());
                items
            }
        };
        debug_assert_eq!(items, self.write_catalog_items(i, alt, kind));
        items
    }

    /// `catalog_items`, written out.
    fn write_catalog_items(&self, i: usize, alt: bool, kind: usize) -> Vec<String> {
        let s = &self.sc.servers[i];
        let tools = if alt { &s.alt_tools } else { &s.tools };
        match kind {
            0 => {
                let mut v: Vec<String> = tools
                    .iter()
                    .map(|t| format!("sim://{}/{t}", s.name))
                    .collect();
                v.push(SHARED_URI.to_string());
                v
            }
            1 => vec![format!("sim://{}/{{name}}", s.name)],
            _ => tools.iter().take(3).map(|t| format!("p_{t}")).collect(),
        }
    }

    fn item_json(kind: usize, item: &str) -> Value {
        match kind {
            0 => json!({"uri": item, "name": item.rsplit('/').next().unwrap_or(item)}),
            1 => json!({"uriTemplate": item, "name": "by-name"}),
            _ => json!({"name": item, "arguments": [{"name": "who", "required": false}]}),
        }
    }

    /// A catalog request reached server `i` on `conn`.
    pub(super) fn catalog_request(
        &mut self,
        conn: ConnId,
        i: usize,
        method: &str,
        id: Value,
        req: &Received,
    ) {
        if let Some(kind) = KINDS.iter().position(|(m, _)| *m == method) {
            self.catalog_list(conn, i, kind, id, req);
            return;
        }
        let cf = self.sc.mix.call_fault_pct;
        if self.pct(cf) {
            self.cov.catalog_operation_faults += 1;
            if self.rng.below(2) == 0 {
                self.reply_error(conn, 3, &id, -32002, "not now", Tag::None);
            }
            // Else no answer: the operation times out (or is cancelled).
            return;
        }
        let result = match method {
            "resources/read" => {
                let uri = received::str_of(req.params.uri);
                let uri = uri.as_deref().unwrap_or("");
                json!({"contents": [{"uri": uri, "text": format!("contents of {uri}")}]})
            }
            "prompts/get" => {
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}]})
            }
            "completion/complete" => {
                json!({"completion": {"values": ["ada", "alan"], "hasMore": false}})
            }
            "tasks/list" => json!({"tasks": [
                {"taskId": "t-1", "status": "completed", "createdAt": "2026-01-01T00:00:00Z"}
            ]}),
            _ => json!({}),
        };
        self.reply(
            conn,
            2,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
        if method == "resources/subscribe" {
            let uri = req.params.uri.map_or(Value::Null, received::value_of);
            self.cov.catalog_updates_sent += 1;
            let n = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
            self.reply(conn, 4, n);
        }
    }

    fn catalog_list(&mut self, conn: ConnId, i: usize, kind: usize, id: Value, req: &Received) {
        let Some(n) = id.as_u64() else {
            return;
        };
        let page = received::str_of(req.params.cursor).map_or(0, |_| 1);
        let healed = self.healed;
        let cf = self.sc.mix.call_fault_pct;
        let fault = if page == 0 {
            // Each listing draws its behaviour once; its second page follows it.
            let f = (!healed && self.pct(cf)).then(|| self.rng.below(3));
            let two_pages = f.is_none() && self.rng.below(4) == 0;
            Some(if two_pages { Some(2) } else { f })
        } else {
            None
        };
        let Some(alt) = self.procs.get(&conn).map(|p| p.catalog.alt) else {
            return;
        };
        let items = self.catalog_items(i, alt, kind);
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let c = &mut p.catalog;
        if let Some(f) = fault {
            c.first[kind] = !c.begun[kind];
            c.begun[kind] = true;
            c.fault[kind] = f;
            c.acc[kind].clear();
        }
        let behaviour = c.fault[kind];
        let (key, ms) = (KINDS[kind].1, 3);
        let (outcome, answer) = match behaviour {
            Some(0) => {
                self.cov.catalog_list_errors += 1;
                (PageOutcome::Failed, true)
            }
            // No answer: the manager's request timeout ends the listing.
            Some(1) => {
                self.cov.catalog_list_hangs += 1;
                (PageOutcome::Failed, false)
            }
            Some(_) => {
                let half = items.len() / 2;
                let (these, more) = if page == 0 {
                    self.cov.catalog_lists_paged += 1;
                    (items[..half].to_vec(), true)
                } else {
                    (items[half..].to_vec(), false)
                };
                self.count_hinted_page(i);
                let page = PageKey::Catalog {
                    server: i,
                    alt,
                    kind,
                    half: if more { 1 } else { 2 },
                };
                let next = more.then_some("c1");
                let write = |w: &Self, b: &mut Vec<u8>| {
                    w.write_list(b, i, key, next, |b| {
                        answers::write_array(b, &these, |b, t| write_item(b, kind, t))
                    })
                };
                let frame = self.page_frame(page, &id, write, |w| {
                    let list: Vec<Value> = these.iter().map(|t| Self::item_json(kind, t)).collect();
                    let mut result = json!({ key: list });
                    if more {
                        result["nextCursor"] = json!("c1");
                    }
                    w.add_hints(i, &mut result);
                    result
                });
                let outcome = if more {
                    PageOutcome::More
                } else {
                    PageOutcome::Final
                };
                self.record_page(conn, n, kind, these, outcome.clone());
                self.reply_frame(conn, ms, frame, Tag::CatalogAnswer { id: n });
                return;
            }
            None => {
                self.count_hinted_page(i);
                let page = PageKey::Catalog {
                    server: i,
                    alt,
                    kind,
                    half: 0,
                };
                let write = |w: &Self, b: &mut Vec<u8>| {
                    w.write_list(b, i, key, None, |b| {
                        answers::write_array(b, &items, |b, t| write_item(b, kind, t))
                    })
                };
                let frame = self.page_frame(page, &id, write, |w| {
                    let list: Vec<Value> = items.iter().map(|t| Self::item_json(kind, t)).collect();
                    let mut result = json!({ key: list });
                    w.add_hints(i, &mut result);
                    result
                });
                self.record_page(conn, n, kind, items, PageOutcome::Final);
                self.reply_frame(conn, ms, frame, Tag::CatalogAnswer { id: n });
                return;
            }
        };
        self.record_page(conn, n, kind, Vec::new(), outcome);
        if answer {
            let tag = Tag::CatalogAnswer { id: n };
            self.reply_error(conn, ms, &id, -32603, "catalog unavailable", tag);
        }
    }

    fn record_page(
        &mut self,
        conn: ConnId,
        id: u64,
        kind: usize,
        items: Vec<String>,
        outcome: PageOutcome,
    ) {
        if let Some(p) = self.procs.get_mut(&conn) {
            p.catalog.open.insert(
                id,
                Pending {
                    kind,
                    items,
                    outcome,
                },
            );
        }
    }

    /// A list page's answer reached the manager (a duplicate of one already delivered, or of
    /// a cancelled request, changes nothing).
    pub(super) fn catalog_delivered(&mut self, conn: ConnId, id: u64) {
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let c = &mut p.catalog;
        let Some(page) = c.open.remove(&id) else {
            return;
        };
        let (k, server) = (page.kind, p.server);
        if page.outcome == PageOutcome::Final {
            self.list_delivered(server);
        }
        let Some(c) = self.procs.get_mut(&conn).map(|p| &mut p.catalog) else {
            return;
        };
        match page.outcome {
            PageOutcome::More => c.acc[k].extend(page.items),
            PageOutcome::Final => {
                c.acc[k].extend(page.items);
                c.applied[k] = std::mem::take(&mut c.acc[k]);
                c.applied_gen += 1;
                c.known[k] = true;
            }
            // A failed first list leaves that slice empty; a failed re-list keeps the last.
            PageOutcome::Failed => {
                if c.first[k] {
                    c.applied[k].clear();
                    c.applied_gen += 1;
                }
            }
        }
    }

    /// The manager cancelled request `id` (it timed out): a list page ends failed.
    pub(super) fn catalog_cancelled(&mut self, conn: ConnId, id: u64) {
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let c = &mut p.catalog;
        if let Some(page) = c.open.remove(&id) {
            if c.first[page.kind] {
                c.applied[page.kind].clear();
                c.applied_gen += 1;
            }
        }
    }

    /// The tool set changed (`flip`) on a catalog server: its resources and prompts change with
    /// it, announced by their own `list_changed` notifications.
    pub(super) fn catalog_changes(&mut self, conn: ConnId, ms: u64, flip: bool) {
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        if !flip || !self.sc.servers[p.server].catalog {
            return;
        }
        p.catalog.alt = !p.catalog.alt;
        p.catalog.changed_in_flight += 2;
        self.cov.catalog_changes_sent += 1;
        for method in [
            "notifications/resources/list_changed",
            "notifications/prompts/list_changed",
        ] {
            let frame = self.changed_frame(conn, method);
            self.reply_frame(conn, ms, frame, Tag::CatalogChanged);
        }
    }

    /// Servers whose catalog settled: connected (in `after`), its attempt alive, nothing of it
    /// in flight, with what its lists last told the manager.
    pub(super) fn catalog_settled<'w>(
        sc: &Scenario,
        obs: &Observer,
        procs: &'w BTreeMap<ConnId, Proc>,
        after: &View,
    ) -> Vec<SettledCatalog<'w>> {
        // Room for every server from the start (most steps list a few): one allocation.
        let mut v = if sc.servers.iter().any(|s| s.catalog) {
            Vec::with_capacity(sc.servers.len())
        } else {
            Vec::new()
        };
        for (i, s) in sc.servers.iter().enumerate() {
            if !s.catalog || after.status[i] != ServerStatus::Connected {
                continue;
            }
            let Some((conn, p)) = obs.latest_conn[i].and_then(|c| procs.get_key_value(&c)) else {
                continue;
            };
            if !p.alive() || p.reported || !p.catalog.settled() {
                continue;
            }
            // Ready from fresh cached lists, not (fully) listed on this process since: what it
            // shows is what an earlier process listed (invariant 35 checks that was allowed).
            if p.era.fresh_checked && !p.catalog.known.iter().all(|k| *k) {
                continue;
            }
            v.push(SettledCatalog {
                server: i,
                attempt: *conn,
                lists_gen: p.catalog.applied_gen,
                applied: &p.catalog.applied,
            });
        }
        v
    }

    /// Now and then, after a call, the embedder also reads a resource, gets a prompt,
    /// completes an argument or subscribes (live or deferred, as the call's target).
    pub(super) fn maybe_operation(&mut self, pick: usize, deferred: bool) {
        // Only in a world with catalog servers (the others' runs stay as they were).
        if pick % 2 != 0 || !self.sc.servers.iter().any(|s| s.catalog) {
            return;
        }
        let resources = self.m.resources();
        let prompts = self.m.prompts();
        let res: Vec<_> = resources
            .iter()
            .filter(|r| r.deferred == deferred)
            .collect();
        let prm: Vec<_> = prompts.iter().filter(|p| p.deferred == deferred).collect();
        let level = self.sc.options.probe && (pick / 2) % 6 == 5 && (pick / 12) % 2 == 0;
        let op = match (pick / 2) % 6 {
            // In a world of both revisions, some set a server's log level instead: a stateless
            // server gets it in the `_meta` of its requests, a legacy one by `logging/setLevel`.
            5 if level && !res.is_empty() => Operation::SetLogLevel {
                server: res[pick % res.len()].server.clone(),
                level: LogLevel::Debug,
            },
            // Without naming the server: ambiguous when several list it.
            0 => Operation::ReadResource {
                uri: SHARED_URI.to_string(),
                server: None,
            },
            1 if !res.is_empty() => {
                let r = res[pick % res.len()];
                Operation::ReadResource {
                    uri: r.def.uri.clone(),
                    server: Some(r.server.clone()),
                }
            }
            2 if !prm.is_empty() => Operation::GetPrompt {
                name: prm[pick % prm.len()].qualified_name.clone(),
                arguments: BTreeMap::new(),
            },
            3 if !prm.is_empty() => Operation::Complete {
                reference: CompletionRef::Prompt {
                    name: prm[pick % prm.len()].qualified_name.clone(),
                },
                argument: "who".into(),
                value: "a".into(),
                context: BTreeMap::new(),
            },
            4 if !res.is_empty() => {
                let r = res[pick % res.len()];
                Operation::Subscribe {
                    uri: r.def.uri.clone(),
                    server: Some(r.server.clone()),
                }
            }
            5 if !res.is_empty() => Operation::ListTasks {
                server: res[pick % res.len()].server.clone(),
                cursor: None,
            },
            _ => return,
        };
        let call = CallId(self.next_call);
        self.next_call += 1;
        self.cov.operations_issued += 1;
        self.cov.deferred_operations_issued += u64::from(deferred);
        self.obs.ops.insert(call, ());
        let timeout = Some(Duration::from_millis(self.sc.options.call_timeout_ms));
        self.input(Input::Operation { call, op, timeout }, |_| {});
    }

    /// An operation completed: exactly once, for an operation the embedder made.
    pub(super) fn operation_completed(&mut self, call: CallId, outcome: &OperationOutcome) {
        if self.obs.ops.remove(&call).is_none() {
            self.step.output_violations.push((
                Invariant::EveryOperationCompletesOnce,
                format!("operation c{} completed again, or was never made", call.0),
            ));
        }
        if let OperationOutcome::Err(CallError::AmbiguousResource { .. }) = outcome {
            self.cov.ambiguous_reads += 1;
        }
    }
}
