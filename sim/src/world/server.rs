//! The simulated MCP servers: how a server answers the frames the manager sends it
//! (`initialize`, `tools/list` in pages, `tools/call`, pings, cancellations, answers to its own
//! requests), what it says unprompted (logs, progress, `list_changed` storms, requests of its
//! own), and the faults its attempt's plan or the scenario's fault mix give it: hangs,
//! errors, crashes, garbage, duplicate and unknown-id frames.

use super::os::SessionExpiry;
use super::received::{self, Received};
use super::{answers, Ev, World};
use crate::observe::SIM_LOG_LEVELS;
use crate::scenario::{AttemptPlan, Init, List};
use crate::verdict::Invariant;
use bytes::Bytes;
use serde_json::{json, Value};
use std::time::Duration;
use switchboard_core::manager::{CallId, ConnId, ServerStatus, TransportEvent};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListKind {
    /// A page with a next cursor.
    Page,
    /// The last page of a listing of this tool-set version (`u64::MAX`: it changed meanwhile).
    Final(u64),
    /// An error or a malformed answer.
    Failed,
}

/// What a frame from a simulated server carries, for the simulator's own bookkeeping.
/// Which list page a simulated server answers with (see [`World::page_frame`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum PageKey {
    /// Page `page` of `pages` of server `server`'s tools (its alternative set: `alt`).
    Tools {
        server: usize,
        alt: bool,
        page: usize,
        pages: usize,
    },
    /// Server `server`'s catalog list `kind`: whole (`half` 0), or its first or second half.
    Catalog {
        server: usize,
        alt: bool,
        kind: usize,
        half: u8,
    },
    /// Server `server`'s answer to `initialize` (`tools`: it offers tools).
    Init { server: usize, tools: bool },
    /// Server `server`'s `DiscoverResult` (`tools`: it offers tools).
    Discover { server: usize, tools: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
    None,
    /// An answer to `tools/list` request `id`; `Some(version)`: the final, healthy page of a
    /// listing of tool-set `version` (`u64::MAX`: the set changed between pages).
    ListAnswer {
        id: u64,
        kind: ListKind,
    },
    ListChanged,
    Progress {
        call: u64,
    },
    /// An `Opened` that reaches the manager after the attempt's `Closed` (the shell's race).
    RacedOpen,
    /// The server's cancellation of its request `peer-<id>` to the client.
    PeerCancel {
        id: u64,
    },
    /// An answer to a resources, templates or prompts list request `id`.
    CatalogAnswer {
        id: u64,
    },
    /// A resources or prompts `list_changed`.
    CatalogChanged,
    /// A stateless server's `DiscoverResult` to the probe.
    Discovered,
    /// The transport's report that the server refused the handshake's credentials.
    HandshakeRefused,
}

/// A frame cut short: not JSON, so the codec rejects it.
pub(super) const GARBAGE_FRAME: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";

impl World<'_> {
    /// The simulator's bookkeeping for a frame about to reach the manager.
    pub(super) fn note_tag(&mut self, conn: ConnId, server: usize, tag: Tag) {
        match tag {
            Tag::None | Tag::RacedOpen | Tag::HandshakeRefused => {}
            Tag::Discovered => {
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.era.discovered_delivered = true;
                }
            }
            Tag::PeerCancel { id } => self.peer_cancel_delivered(conn, id),
            Tag::CatalogAnswer { id } => self.catalog_delivered(conn, id),
            Tag::CatalogChanged => {
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.catalog.changed_in_flight = p.catalog.changed_in_flight.saturating_sub(1);
                }
            }
            Tag::ListAnswer { id, kind } => {
                if matches!(kind, ListKind::Final(_)) {
                    self.list_delivered(server);
                }
                if let Some(p) = self.procs.get_mut(&conn) {
                    if p.open_lists.remove(&id) {
                        match kind {
                            ListKind::Page => {}
                            ListKind::Final(v) => p.view_version = Some(v),
                            ListKind::Failed => p.view_version = None,
                        }
                    }
                }
            }
            Tag::ListChanged => {
                let connected = self.view.status[server] == ServerStatus::Connected;
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.changed_in_flight = p.changed_in_flight.saturating_sub(1);
                    if connected && !p.open_lists.is_empty() {
                        self.cov.list_changed_while_listing += 1;
                    }
                }
            }
            Tag::Progress { call } => {
                let o = &self.sc.options;
                if !o.reset_timeout_on_progress {
                    return;
                }
                let max = Duration::from_millis(o.max_call_time_ms);
                let now = self.now;
                if let Some(t) = self
                    .obs
                    .calls
                    .get_mut(&CallId(call))
                    .and_then(|c| c.timing.as_mut())
                {
                    let new = (now + t.timeout).min(t.started + max);
                    if new > t.deadline {
                        t.deadline = new;
                        t.extended = true;
                        self.obs.progress_extensions += 1;
                    }
                }
            }
        }
    }

    /// Schedule a frame from the server `ms` from now (plus jitter), maybe with a frame fault.
    pub(super) fn reply(&mut self, conn: ConnId, ms: u64, v: Value) {
        self.reply_tagged(conn, ms, v, Tag::None);
    }

    /// The answer `{"jsonrpc": "2.0", "id": id, "result": …}` to a request whose result is
    /// the same for the same `key` all run long (a pure function of the scenario): `write`
    /// writes it once, then only the id is written around it. Debug builds build it again as
    /// a `Value` (`build`) every time and check the bytes are those of the whole answer
    /// serialised.
    pub(super) fn page_frame(
        &mut self,
        key: PageKey,
        id: &Value,
        write: impl Fn(&Self, &mut Vec<u8>),
        build: impl Fn(&Self) -> Value,
    ) -> Bytes {
        let result = match self.pages.get(&key) {
            Some(b) => b.clone(),
            None => {
                let mut b = Vec::with_capacity(256);
                write(self, &mut b);
                let b = Bytes::from(b);
                self.pages.insert(key, b.clone());
                b
            }
        };
        let frame = answers::result_bytes(id, &result);
        debug_assert_eq!(
            frame,
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": build(self)}))
                .unwrap_or_default(),
            "a remembered list page differs from the page built again"
        );
        Bytes::from(frame)
    }

    pub(super) fn reply_tagged(&mut self, conn: ConnId, ms: u64, v: Value, tag: Tag) {
        let frame = Bytes::from(serde_json::to_vec(&v).unwrap_or_default());
        self.reply_frame(conn, ms, frame, tag);
    }

    /// Send these bytes as one frame (which need not be valid JSON, or even UTF-8).
    pub(super) fn reply_frame(&mut self, conn: ConnId, ms: u64, frame: Bytes, tag: Tag) {
        let j = self.jitter();
        let at = self.after_ms(ms + j);
        let ff = self.sc.mix.frame_fault_pct;
        if self.pct(ff) {
            let kind = self.rng.below(4);
            let extra: Bytes = match kind {
                0 => {
                    self.cov.garbage_frames += 1;
                    Bytes::from_static(GARBAGE_FRAME)
                }
                1 => {
                    self.cov.duplicate_responses += 1;
                    frame.clone()
                }
                2 => {
                    self.cov.unknown_id_responses += 1;
                    Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":987654,\"result\":{}}")
                }
                _ => {
                    self.cov.batch_frames += 1;
                    Bytes::from_static(b"[{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}]")
                }
            };
            // The fault frame lands just before (garbage, batch) or after (duplicate) the answer.
            let fat = if kind == 1 {
                at + Duration::from_millis(1)
            } else {
                at
            };
            // A duplicate carries what the original carries (a second progress resets too).
            let extra_tag = if kind == 1 { tag } else { Tag::None };
            if extra_tag == Tag::ListChanged {
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.changed_in_flight += 1;
                }
            }
            if extra_tag == Tag::CatalogChanged {
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.catalog.changed_in_flight += 1;
                }
            }
            self.push(
                fat,
                Ev::Deliver {
                    conn,
                    event: TransportEvent::Frame(extra),
                    exit: false,
                    tag: extra_tag,
                },
            );
        }
        self.push(
            at,
            Ev::Deliver {
                conn,
                event: TransportEvent::Frame(frame),
                exit: false,
                tag,
            },
        );
    }

    /// Its tool set changes, announced by a burst of 1–4 `list_changed` notifications (the
    /// set may change again between them).
    fn storm(&mut self, conn: ConnId) {
        let n = 1 + self.rng.below(4);
        let flips: Vec<bool> = (0..n).map(|k| k == 0 || self.rng.below(2) == 0).collect();
        let j = self.jitter();
        if n > 1 {
            self.cov.list_changed_storms += 1;
        }
        for (k, flip) in flips.into_iter().enumerate() {
            let Some(p) = self.procs.get_mut(&conn) else {
                return;
            };
            if flip {
                p.alt_tools = !p.alt_tools;
                p.version += 1;
            }
            p.changed_in_flight += 1;
            self.cov.list_changed_sent += 1;
            let frame = self.changed_frame(conn, "notifications/tools/list_changed");
            self.reply_frame(conn, 1 + j + k as u64, frame, Tag::ListChanged);
            self.catalog_changes(conn, 1 + j + k as u64, flip);
        }
    }

    /// Maybe send one server-initiated message.
    fn chatter(&mut self, conn: ConnId) {
        let cp = self.sc.mix.chatter_pct;
        if !self.pct(cp) {
            return;
        }
        let lat = 1 + self.jitter();
        let kind = self.rng.below(6);
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let v = match kind {
            0..=2 => {
                let method = ["ping", "roots/list", "sampling/createMessage"][kind as usize];
                let id = p.next_peer_id;
                p.next_peer_id += 1;
                p.peer_requests.insert(id, method);
                self.cov.peer_requests_sent += 1;
                json!({"jsonrpc": "2.0", "id": format!("srv-{id}"), "method": method})
            }
            3 => {
                self.storm(conn);
                return;
            }
            4 => {
                self.cov.progress_sent += 1;
                // Progress for a token it does not own: another server's call in flight (it
                // must not move that call's deadline), or a token no call has.
                let me = self.procs.get(&conn).map(|p| p.server);
                let foreign = self
                    .obs
                    .calls
                    .iter()
                    .find(|(_, c)| c.server.is_some() && c.server != me)
                    .map(|(id, _)| id.0);
                let token = match foreign {
                    Some(id) => {
                        self.cov.foreign_progress_sent += 1;
                        json!(id)
                    }
                    None => json!("unsolicited"),
                };
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 0.5, "total": 1.0}})
            }
            _ => {
                // Every level in turn (no extra draw from the RNG); the first is a warning.
                let level = SIM_LOG_LEVELS[(self.cov.log_messages_sent % 6) as usize].0;
                self.cov.log_messages_sent += 1;
                let data = if level == "warning" {
                    "disk almost full".to_string()
                } else {
                    format!("sim log at {level}")
                };
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "logger": "sim", "data": data}})
            }
        };
        self.reply(conn, lat, v);
    }

    pub(super) fn server_receives(&mut self, conn: ConnId, frame: &[u8]) {
        let r = match Received::read(frame) {
            Ok(r) => r,
            Err(e) => {
                self.step.output_violations.push((
                    Invariant::ClientSpeaksValidJsonRpc,
                    format!("the manager sent a frame that is not JSON: {e}"),
                ));
                return;
            }
        };
        let Some(p) = self.procs.get(&conn) else {
            return;
        };
        if !p.alive() || p.reported {
            return; // lost: the process is gone
        }
        let i = p.server;
        let plan = p.plan.clone();
        self.peer_saw_frame(conn, &r);
        let method = r.method();
        let id = r.id.clone();
        self.era_check(conn, i, &r);
        if method == Some("ping") && id.is_some() {
            // The manager's health check reached the server (answered or not).
            self.obs.pinged[i] = Some(self.now);
        }
        if method.is_some() && id.is_none() && self.refuse_notification(conn, i) {
            return;
        }
        let handshake = matches!(method, Some("initialize" | "server/discover"));
        if handshake && self.refuse_handshake(conn, i, id.as_ref().and_then(Value::as_u64)) {
            return;
        }
        match (method, id) {
            (Some("initialize"), Some(id)) if self.sc.servers[i].era.is_modern() => {
                self.cov.initialize_refused_by_modern += 1;
                let ms = self.refusal_delay_ms(conn);
                let mut frame = Vec::with_capacity(128);
                let mut o = answers::Obj::new(&mut frame);
                o.raw("error", br#"{"code":-32022,"data":{"supported":["2026-07-28"]},"message":"Unsupported protocol version"}"#);
                o.val("id", &id).val("jsonrpc", "2.0");
                o.end();
                debug_assert_eq!(
                    frame,
                    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"]}}})).unwrap_or_default()
                );
                self.reply_frame(conn, ms, Bytes::from(frame), Tag::None);
            }
            (Some("server/discover"), Some(id)) => self.discover(conn, i, &plan, id),
            (Some("subscriptions/listen"), Some(id)) if self.sc.servers[i].era.is_modern() => {
                self.listen(conn, i, id, &r)
            }
            (Some("initialize"), Some(id)) => {
                let gate = self.sc.options.gate_ms;
                let (ms, result) = match plan.init {
                    Init::Ok { ms } | Init::Refused { ms, .. } => (ms, Ok(true)),
                    Init::NoTools { ms } => {
                        self.cov.init_without_tools += 1;
                        (ms, Ok(false))
                    }
                    Init::Error { ms } => {
                        self.cov.init_errors += 1;
                        (ms, Err(()))
                    }
                    Init::Unsupported { ms } => {
                        self.cov.init_unsupported += 1;
                        let r = json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "1999-01-01", "capabilities": {"tools": {}}}});
                        self.reply(conn, ms, r);
                        return;
                    }
                    Init::Hang => {
                        self.cov.init_hangs += 1;
                        return;
                    }
                    Init::Drop { ms } => {
                        self.cov.drops_during_init += 1;
                        self.exit_in(conn, ms, "crashed during initialize");
                        return;
                    }
                };
                if ms >= gate {
                    self.cov.init_slow_past_gate += 1;
                }
                let frame = match result {
                    Ok(tools) => {
                        let key = PageKey::Init { server: i, tools };
                        let write = |w: &Self, b: &mut Vec<u8>| w.write_hello(b, i, tools, false);
                        self.page_frame(key, &id, write, |w| {
                            json!({
                                "protocolVersion": "2025-06-18",
                                "capabilities": w.capabilities(i, tools),
                                "serverInfo": {"name": w.sc.servers[i].name, "version": "1.0.0"}
                            })
                        })
                    }
                    Err(()) => {
                        Bytes::from(answers::error_bytes(&id, -32603, "initialization failed"))
                    }
                };
                self.reply_frame(conn, ms, frame, Tag::None);
            }
            (Some("tools/list"), Some(id)) => {
                if let (Some(n), Some(p)) = (id.as_u64(), self.procs.get_mut(&conn)) {
                    p.open_lists.insert(n);
                }
                self.list(conn, i, &plan, id, &r);
            }
            (Some("tools/call"), Some(id)) if r.params.task.is_some() => {
                let tool = received::str_of(r.params.name);
                let tool = tool.as_deref().unwrap_or("").to_string();
                self.task_call(conn, i, id, tool);
            }
            (Some("tools/call"), Some(id)) if self.sc.servers[i].era.is_modern() => {
                if !self.ask_for_input(conn, &id, &r) {
                    self.tool_call(conn, i, &plan, id, &r);
                }
            }
            (Some("tools/call"), Some(id)) => {
                self.tool_call(conn, i, &plan, id, &r);
                self.peer_ask(conn);
            }
            (Some(m @ ("tasks/get" | "tasks/result" | "tasks/cancel")), Some(id))
                if self.sc.mix.task_pct > 0 =>
            {
                self.task_request(conn, m, id, &r);
            }
            (Some(m), Some(id)) if self.sc.servers[i].catalog && super::catalog::handles(m) => {
                // A stateless server takes input rounds on reads and prompts as on tool calls.
                let rounds = self.sc.servers[i].era.is_modern()
                    && matches!(m, "resources/read" | "prompts/get");
                if !(rounds && self.ask_for_input(conn, &id, &r)) {
                    self.catalog_request(conn, i, m, id, &r)
                }
            }
            (Some("ping"), Some(id)) => {
                let now = self.now;
                let deaf = !self.healed
                    && self
                        .procs
                        .get(&conn)
                        .and_then(|p| p.deaf_at)
                        .is_some_and(|t| now >= t);
                if deaf {
                    self.cov.pings_unanswered += 1;
                } else {
                    let frame = answers::result_bytes(&id, b"{}");
                    self.reply_frame(conn, 1, Bytes::from(frame), Tag::None);
                }
            }
            (Some(m), Some(id)) => {
                let message = format!("Method not found: {m}");
                self.reply_error(conn, 1, &id, -32601, &message, Tag::None);
            }
            (Some("notifications/initialized"), None) => {
                self.chatter(conn);
                self.peer_ask(conn);
            }
            (Some("notifications/cancelled"), None) => {
                self.cov.cancel_notifications_received += 1;
                let rid = received::u64_of(r.params.request_id);
                let timed_out =
                    received::str_of(r.params.reason).as_deref() == Some("request timed out");
                let was_call = rid.is_some_and(|r| {
                    self.procs
                        .get(&conn)
                        .is_some_and(|p| p.call_ids.contains(&r))
                });
                if timed_out && was_call {
                    self.cov.call_timeout_with_cancel += 1;
                }
                if let Some(r) = rid {
                    self.listen_cancelled(conn, r);
                    self.catalog_cancelled(conn, r);
                }
                // An abandoned listing: the manager keeps what it had (unknown here).
                if let (Some(r), Some(p)) = (rid, self.procs.get_mut(&conn)) {
                    if p.open_lists.remove(&r) {
                        p.view_version = None;
                    }
                }
            }
            (Some(_), None) => {}
            (None, id) => self.peer_answer(conn, id, &r.value()),
        }
    }

    /// The capabilities it declares (in `initialize` or `server/discover`).
    pub(super) fn capabilities(&self, i: usize, tools: bool) -> Value {
        let mut caps = if tools {
            json!({"tools": {"listChanged": true}, "logging": {}})
        } else {
            json!({"logging": {}})
        };
        if self.sc.mix.task_pct > 0 {
            caps["tasks"] = json!({"cancel": {}, "requests": {"tools": {"call": {}}}});
        }
        if self.sc.servers[i].catalog {
            super::catalog::add_capabilities(&mut caps);
        }
        caps
    }

    /// Check the client's answer to a request this server sent.
    fn peer_answer(&mut self, conn: ConnId, id: Option<Value>, v: &Value) {
        if self.peer_wire_answer(conn, id.as_ref(), v) {
            return;
        }
        let key = id
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|s| s.strip_prefix("srv-"))
            .and_then(|s| s.parse::<u64>().ok());
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let resent = key.is_some_and(|k| k < p.next_peer_id && !p.peer_requests.contains_key(&k));
        let method = key.and_then(|k| p.peer_requests.remove(&k));
        let ok = resent
            || match method {
                Some("ping") => v.get("result") == Some(&json!({})),
                Some("roots/list") => v
                    .get("result")
                    .and_then(|r| r.get("roots"))
                    .is_some_and(Value::is_array),
                // Sent without params: not offered (-32601), or offered and malformed (-32602).
                Some(_) => matches!(
                    v.get("error")
                        .and_then(|e| e.get("code"))
                        .and_then(Value::as_i64),
                    Some(-32601) | Some(-32602)
                ),
                None => false,
            };
        self.cov.peer_answers_checked += 1;
        if !ok {
            self.step.output_violations.push((
                Invariant::ClientSpeaksValidJsonRpc,
                format!("bad answer to a server request: {v}"),
            ));
        }
    }

    fn list(&mut self, conn: ConnId, i: usize, plan: &AttemptPlan, id: Value, req: &Received) {
        let has_cursor = req.params.cursor.is_some_and(|c| c.get() != "null");
        let list_id = id.as_u64().unwrap_or(u64::MAX);
        let (first, alt, version) = match self.procs.get_mut(&conn) {
            Some(p) => {
                p.lists += 1;
                if !has_cursor {
                    p.list_version = Some(p.version);
                } else if p.list_version != Some(p.version) {
                    p.list_version = Some(u64::MAX);
                }
                (
                    p.lists == 1,
                    p.alt_tools,
                    p.list_version.unwrap_or(u64::MAX),
                )
            }
            None => return,
        };
        let sc = self.sc;
        let s = &sc.servers[i];
        let tools: &[String] = if alt { &s.alt_tools } else { &s.tools };
        let cursor = received::str_of(req.params.cursor);
        // Only the first listing of an attempt (all its pages) follows the plan; refreshes
        // answer healthily.
        let ongoing = self.procs.get(&conn).and_then(|p| p.cur_list.clone());
        let behaviour = if first {
            plan.list.clone()
        } else if let (Some(b), true) = (ongoing, cursor.is_some()) {
            // Later pages of a listing behave as its first page did.
            b
        } else {
            // A refresh (list_changed or RefreshTools) can misbehave too.
            let cf = self.sc.mix.call_fault_pct;
            if self.pct(cf) {
                self.cov.refresh_faults += 1;
                match self.rng.below(3) {
                    0 => List::Error { ms: 20 },
                    1 => List::Hang,
                    _ => List::Ok { ms: 30, pages: 2 },
                }
            } else {
                List::Ok { ms: 5, pages: 1 }
            }
        };
        if cursor.is_none() {
            if let Some(p) = self.procs.get_mut(&conn) {
                p.cur_list = Some(behaviour.clone());
            }
        }
        let task_pct = self.sc.mix.task_pct;
        let schema_pct = self.sc.mix.schema_pct;
        let page_json = |names: &[String]| -> Vec<Value> {
            names
                .iter()
                .map(|n| {
                    let mut t = json!({"name": n, "description": format!("{n} tool"), "inputSchema": {"type": "object"}});
                    if super::tasks::task_required(n, task_pct) {
                        t["execution"] = json!({"taskSupport": "required"});
                    }
                    if let Some(kind) = super::schemas::schema_kind(n, schema_pct) {
                        t["outputSchema"] = super::schemas::schema_json(kind);
                    }
                    t
                })
                .collect()
        };
        match behaviour {
            List::Ok { ms, pages } => {
                let pages = usize::from(pages.max(1));
                let k: usize = cursor
                    .as_deref()
                    .and_then(|c| c.strip_prefix('p'))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                if let Some(max) = self.sc.options.max_tool_pages {
                    if k + 1 > max {
                        self.step.output_violations.push((
                            Invariant::ClientSpeaksValidJsonRpc,
                            format!(
                                "asked for page {} of a listing, past max_tool_pages {max}",
                                k + 1
                            ),
                        ));
                    } else if k + 1 == max && k + 1 < pages {
                        self.cov.list_page_limit_hit += 1;
                    }
                }
                if pages > 1 && k == 0 {
                    self.cov.list_paged += 1;
                }
                let per = tools.len().div_ceil(pages).max(1);
                let lo = (k * per).min(tools.len());
                let hi = ((k + 1) * per).min(tools.len());
                // Under a schema mix, every fourth server lists its first tool twice (again on
                // its last page): the client keeps the first definition and warns.
                let twice =
                    sc.mix.schema_pct > 0 && i % 4 == 3 && k + 1 >= pages && !tools.is_empty();
                // A stateless server also lists a tool whose `x-mcp-header` cannot be mirrored
                // into a header: the client drops it, so the view never shows it.
                let unmirrorable = s.era.is_modern() && k + 1 >= pages;
                self.cov.duplicate_tools_listed += u64::from(twice);
                self.cov.unmirrorable_tools_listed += u64::from(unmirrorable);
                self.count_hinted_page(i);
                let key = PageKey::Tools {
                    server: i,
                    alt,
                    page: k,
                    pages,
                };
                let write_tool = |b: &mut Vec<u8>, n: &String, description: &str| {
                    let mut o = answers::Obj::new(b);
                    o.val("description", description);
                    if super::tasks::task_required(n, task_pct) {
                        o.raw("execution", br#"{"taskSupport":"required"}"#);
                    }
                    o.raw("inputSchema", br#"{"type":"object"}"#).val("name", n);
                    if let Some(kind) = super::schemas::schema_kind(n, schema_pct) {
                        o.val("outputSchema", &super::schemas::schema_json(kind));
                    }
                    o.end();
                };
                let next = (k + 1 < pages).then(|| format!("p{}", k + 1));
                let write = |w: &Self, b: &mut Vec<u8>| {
                    w.write_list(b, i, "tools", next.as_deref(), |b| {
                        b.push(b'[');
                        for (at, n) in tools[lo..hi].iter().enumerate() {
                            if at > 0 {
                                b.push(b',');
                            }
                            write_tool(b, n, &format!("{n} tool"));
                        }
                        if twice {
                            if hi > lo {
                                b.push(b',');
                            }
                            write_tool(b, &tools[0], "a second definition, ignored");
                        }
                        if unmirrorable {
                            if hi > lo || twice {
                                b.push(b',');
                            }
                            answers::write(b, &super::era::unmirrorable_tool());
                        }
                        b.push(b']');
                    });
                };
                let frame = self.page_frame(key, &id, write, |w| {
                    let mut listed = page_json(&tools[lo..hi]);
                    if twice {
                        let mut again = page_json(&tools[..1]);
                        again[0]["description"] = json!("a second definition, ignored");
                        listed.extend(again);
                    }
                    if unmirrorable {
                        listed.push(super::era::unmirrorable_tool());
                    }
                    let mut result = json!({ "tools": listed });
                    w.add_hints(i, &mut result);
                    if k + 1 < pages {
                        result["nextCursor"] = json!(format!("p{}", k + 1));
                    }
                    result
                });
                let kind = if k + 1 < pages {
                    ListKind::Page
                } else {
                    ListKind::Final(version)
                };
                self.reply_frame(conn, ms, frame, Tag::ListAnswer { id: list_id, kind });
                // Now and then the tool set changes while this listing is under way.
                let cp = self.sc.mix.chatter_pct / 3;
                if self.pct(cp) {
                    self.cov.list_changed_during_list += 1;
                    self.storm(conn);
                }
                if k + 1 >= pages {
                    let startup = first || cursor.is_some();
                    let crash = self.sc.servers[i].crash_loop.clone().filter(|c| {
                        !self.healed && c.recover_after.is_none_or(|k| self.crashes[i] < k)
                    });
                    if let (Some(c), true) = (crash, startup) {
                        self.crashes[i] += 1;
                        self.cov.crash_loop_crashes += 1;
                        self.exit_in(conn, c.after_ready_ms + 1, "crashed again (crash loop)");
                    } else if let Some(ms) = plan.drop_after_ready_ms {
                        if startup {
                            self.cov.drops_after_ready += 1;
                            self.exit_in(conn, ms + 1, "exited after it was ready");
                        }
                    }
                    if let (Some(ms), true) = (plan.deaf_after_ms, startup) {
                        let at = self.after_ms(ms);
                        if let Some(p) = self.procs.get_mut(&conn) {
                            p.deaf_at = Some(at);
                        }
                    }
                    self.chatter(conn);
                }
            }
            List::Error { ms } => {
                self.cov.list_errors_after_init += 1;
                let tag = Tag::ListAnswer {
                    id: list_id,
                    kind: ListKind::Failed,
                };
                self.reply_error(conn, ms, &id, -32603, "tools unavailable", tag);
            }
            List::Hang => self.cov.list_hangs += 1,
            List::RepeatedCursor { ms } => {
                if cursor.is_some() {
                    self.cov.list_repeated_cursor += 1;
                }
                let r = json!({"jsonrpc": "2.0", "id": id, "result": {"tools": page_json(tools), "nextCursor": "again"}});
                let tag = Tag::ListAnswer {
                    id: list_id,
                    kind: ListKind::Page,
                };
                self.reply_tagged(conn, ms, r, tag);
            }
            List::Malformed { ms } => {
                self.cov.list_malformed += 1;
                let r = json!({"jsonrpc": "2.0", "id": id, "result": {"items": []}});
                let tag = Tag::ListAnswer {
                    id: list_id,
                    kind: ListKind::Failed,
                };
                self.reply_tagged(conn, ms, r, tag);
            }
            List::Drop { ms } => {
                self.cov.drops_during_list += 1;
                self.exit_in(conn, ms, "crashed during tools/list");
            }
        }
    }

    fn tool_call(&mut self, conn: ConnId, i: usize, plan: &AttemptPlan, id: Value, req: &Received) {
        let first = match self.procs.get_mut(&conn) {
            Some(p) => {
                p.calls += 1;
                if let Some(n) = id.as_u64() {
                    p.call_ids.insert(n);
                }
                p.calls == 1
            }
            None => return,
        };
        if plan.drop_on_call && first {
            self.cov.drops_during_call += 1;
            self.exit_in(conn, 1, "crashed during tools/call");
            return;
        }
        let session_delay_ms = match self.http_session_expiry(conn, i, id.as_u64()) {
            SessionExpiry::None => 0,
            SessionExpiry::Recovered { delay_ms } => delay_ms,
            SessionExpiry::Failed | SessionExpiry::RequestFailed => return,
        };
        let tool = received::str_of(req.params.name);
        let tool = tool.as_deref().unwrap_or("").to_string();
        let lat = self.sc.servers[i].call_latency_ms;
        // With `reset_timeout_on_progress` the call carries its id as a progress token.
        let token = received::u64_of(req.meta.progress_token);
        let progress_tag = token.map_or(Tag::None, |call| Tag::Progress { call });
        let token_json = token.map_or_else(|| id.clone(), |t| json!(t));
        let call_timeout = token
            .and_then(|t| self.obs.calls.get(&CallId(t)))
            .and_then(|c| c.timing)
            .map(|t| t.timeout.as_millis() as u64);
        let cf = self.sc.mix.call_fault_pct;
        let fault = if self.pct(cf) {
            Some(self.rng.below(5))
        } else {
            None
        };
        let r = match fault {
            // A slow call that reports progress, each report within its timeout of the last.
            Some(0) if call_timeout.is_some_and(|t| t <= 3_000) => {
                let t = call_timeout.unwrap_or(0);
                let n = 1 + self.rng.below(6);
                let step = t * 6 / 10;
                // Now and then it never answers: it times out at its extended deadline or at
                // max_call_time.
                let answers = self.rng.below(3) != 0;
                self.cov.slow_calls_with_progress += 1;
                for k in 1..=n {
                    self.cov.progress_sent += 1;
                    let p = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token_json, "progress": k, "total": n + 1}});
                    self.reply_tagged(conn, k * step, p, progress_tag);
                }
                let result = self.tool_result(i, &tool, "slow but alive".into(), false);
                (
                    n * step + t / 2,
                    answers.then(|| json!({"jsonrpc": "2.0", "id": id, "result": result})),
                )
            }
            Some(0) => {
                self.cov.slow_calls += 1;
                let ms = self.sc.options.call_timeout_ms + 100;
                let result = self.tool_result(i, &tool, "late".into(), false);
                (
                    ms,
                    Some(json!({"jsonrpc": "2.0", "id": id, "result": result})),
                )
            }
            Some(1) => {
                self.cov.failing_calls += 1;
                (
                    lat,
                    Some(
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "tool exploded"}}),
                    ),
                )
            }
            Some(2) => {
                self.cov.error_result_calls += 1;
                (
                    lat,
                    Some(
                        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "bad input"}], "isError": true}}),
                    ),
                )
            }
            Some(3) => {
                // An answer whose id still reads but whose text is not UTF-8: the call fails
                // at once with the reason, the server stays.
                self.cov.unreadable_answers_sent += 1;
                let mut frame = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": "@@"}]}}))
                .unwrap_or_default();
                if let Some(at) = frame.windows(2).position(|w| w == b"@@") {
                    frame[at] = 0xff;
                    frame[at + 1] = 0xfe;
                }
                self.reply_frame(conn, lat + session_delay_ms, Bytes::from(frame), Tag::None);
                (lat, None)
            }
            Some(_) => {
                self.cov.unanswered_calls += 1;
                (lat, None)
            }
            None => {
                let result = self.tool_result(i, &tool, format!("ok:{tool}"), true);
                (
                    lat,
                    Some(json!({"jsonrpc": "2.0", "id": id, "result": result})),
                )
            }
        };
        let cp = self.sc.mix.chatter_pct;
        if self.pct(cp) {
            self.cov.progress_sent += 1;
            let n = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token_json, "progress": 0.5}});
            self.reply_tagged(conn, lat / 2, n, progress_tag);
        }
        if let (ms, Some(r)) = r {
            self.reply(conn, ms + session_delay_ms, r);
        }
    }
}
