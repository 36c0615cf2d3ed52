//! Simulated servers of both protocol revisions: how each answers the `server/discover`
//! probe (legacy ones plainly, misleadingly with an unrelated error, or not at all; stateless
//! ones with a `DiscoverResult`, after refusing the first version now and then), and what a
//! stateless server checks of every request — the `_meta` it must carry, that the revision
//! was decided from the probe's answer, and that a retry after an input-required result
//! echoes the `requestState` it was given byte for byte. Before the heal a stateless server
//! also misbehaves the ways the revision allows a client to refuse: a tool whose header
//! annotation cannot be mirrored, an input the embedder has no handler for, a result type the
//! revision does not define.

use super::os::Proc;
use super::received::{self, Received};
use super::server::{PageKey, Tag};
use super::World;
use crate::json::At;
use crate::scenario::{AttemptPlan, Init, SimEra};
use crate::verdict::Invariant;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::time::Duration;
use switchboard_core::manager::{ConnId, ServerStatus};
use switchboard_core::Instant;

/// Most request states a process remembers (the oldest is forgotten first).
const MAX_STATES: usize = 64;

/// The attempts the era checks may still have to look at (most steps: none), so that
/// neither walks every process the run spawned.
#[derive(Debug, Default)]
pub(super) struct EraWatch {
    /// Spawned attempts (with their servers) not yet known never to pass the freshness
    /// check's filter.
    fresh: Vec<(ConnId, usize)>,
    /// Attempts whose stream ended (with their servers), not yet known never to pass the
    /// stream check's filter.
    listen: Vec<(ConnId, usize)>,
}

impl EraWatch {
    /// A process was spawned for attempt `conn` of server `i`.
    pub(super) fn spawned(&mut self, conn: ConnId, i: usize) {
        self.fresh.push((conn, i));
    }
}

/// What one simulated process saw of the protocol revision.
#[derive(Debug, Clone, Default)]
pub(super) struct ProcEra {
    /// It answered the probe with a `DiscoverResult` (the handshake is done).
    pub(super) discovered: bool,
    /// That answer reached the client (a probe that timed out first may fall back).
    pub(super) discovered_delivered: bool,
    /// It refused the first probe's version once (`ModernRetry`).
    pub(super) refused_once: bool,
    /// It received a request other than `server/discover` (a warm start skips the probe,
    /// so a later discover is a health check).
    pub(super) in_use: bool,
    /// The `requestState` texts it handed out, exactly as written.
    pub(super) states: VecDeque<String>,
    /// The `subscriptions/listen` request whose answer is its open stream.
    pub(super) listen: Option<u64>,
    /// When it ended a stream while no other was open (cleared by the next one).
    pub(super) listen_closed_at: Option<Instant>,
    /// When its answer to the probe is due (a stdio server answers in order: what it is
    /// asked after waits for it).
    pub(super) discover_due: Option<Instant>,
    /// Its connection became ready without a `tools/list`, and that was checked.
    pub(super) fresh_checked: bool,
}

/// The longest a closed stream may stay closed while its server is connected: the client's
/// longest re-listen delay, plus delivery.
const LISTEN_GRACE: Duration = Duration::from_millis(8_000 + 2_000);

/// `params._meta` naming stream `id`.
fn stream_meta(id: u64) -> Value {
    json!({ "io.modelcontextprotocol/subscriptionId": id })
}

/// The request carries the whole stateless `_meta`: the revision, the client's capabilities
/// and its info.
fn full_meta(r: &Received) -> bool {
    r.params.has_meta
        && received::str_of(r.meta.protocol_version).as_deref() == Some("2026-07-28")
        && received::is_object(r.meta.client_capabilities)
        && received::is_object(r.meta.client_info)
}

impl World<'_> {
    fn era_violation(&mut self, inv: Invariant, what: String) {
        self.step.output_violations.push((inv, what));
    }

    /// Check a frame the manager sent to server `i` against the revision it speaks.
    pub(super) fn era_check(&mut self, conn: ConnId, i: usize, r: &Received) {
        let Some(method) = r.method() else {
            return;
        };
        let request = r.id.is_some();
        let era = self.sc.servers[i].era;
        if method == "server/discover" {
            self.cov.stateless_requests_checked += 1;
            if !full_meta(r) {
                self.era_violation(
                    Invariant::StatelessRequestsCarryMeta,
                    format!("server/discover without the stateless _meta: {}", r.value()),
                );
            }
            return;
        }
        let discovered = self
            .procs
            .get(&conn)
            .is_some_and(|p| p.era.discovered_delivered);
        if era.is_modern() {
            if r.meta.log_level.is_some() {
                self.cov.stateless_log_levels_seen += 1;
            }
            if matches!(
                method,
                "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe"
            ) {
                self.era_violation(
                    Invariant::EraDecidedFromProbe,
                    format!(
                        "a stateless server got {method}, which its revision has not: {}",
                        r.value()
                    ),
                );
            } else if (method == "initialize" && discovered)
                || method == "notifications/initialized"
            {
                self.era_violation(
                    Invariant::EraDecidedFromProbe,
                    format!("a stateless server that answered the probe got {method}"),
                );
            } else if request && method != "initialize" {
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.era.in_use = true;
                }
                self.cov.stateless_requests_checked += 1;
                if !full_meta(r) {
                    self.era_violation(
                        Invariant::StatelessRequestsCarryMeta,
                        format!(
                            "a stateless request without the protocol _meta: {}",
                            r.value()
                        ),
                    );
                }
            }
        } else if request && r.meta.protocol_version.is_some() {
            self.era_violation(
                Invariant::EraDecidedFromProbe,
                format!("a legacy server, which refused the probe, got a stateless {method}"),
            );
        }
    }

    /// `server/discover`: the probe, or (on a stateless connection already discovered) a
    /// health check.
    pub(super) fn discover(&mut self, conn: ConnId, i: usize, plan: &AttemptPlan, id: Value) {
        let era = self.sc.servers[i].era;
        match era {
            SimEra::Legacy => {
                self.cov.probes_refused_legacy += 1;
                let message = "Method not found: server/discover";
                self.reply_error(conn, 1, &id, -32601, message, Tag::None);
                return;
            }
            SimEra::LegacyUnrelatedError => {
                self.cov.probes_misleading += 1;
                let message = "Bad Request: Server not initialized";
                self.reply_error(conn, 1, &id, -32000, message, Tag::None);
                return;
            }
            SimEra::LegacySilent => {
                self.cov.probes_unanswered += 1;
                return;
            }
            SimEra::Modern | SimEra::ModernRetry => {}
        }
        let Some(p) = self.procs.get(&conn) else {
            return;
        };
        if p.era.discovered || p.era.in_use {
            // A health check: answered like a ping (a deaf server stays silent).
            let now = self.now;
            let deaf = !self.healed && p.deaf_at.is_some_and(|t| now >= t);
            self.obs.pinged[i] = Some(now);
            if deaf {
                self.cov.pings_unanswered += 1;
            } else {
                self.cov.stateless_health_checks += 1;
                let r = self.discover_result(i, &id, true);
                self.reply_frame(conn, 1, r, Tag::None);
            }
            return;
        }
        if era == SimEra::ModernRetry && !p.era.refused_once {
            self.cov.probe_version_refusals += 1;
            if let Some(p) = self.procs.get_mut(&conn) {
                p.era.refused_once = true;
            }
            let r = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"], "requested": "?"}}});
            self.reply(conn, 1, r);
            return;
        }
        // The first discover of an attempt follows the attempt's plan, as `initialize` does.
        let gate = self.sc.options.gate_ms;
        let (ms, r) = match plan.init {
            Init::Ok { ms } | Init::Refused { ms, .. } => (ms, self.discover_result(i, &id, true)),
            Init::NoTools { ms } => {
                self.cov.init_without_tools += 1;
                (ms, self.discover_result(i, &id, false))
            }
            Init::Error { ms } => {
                self.cov.init_errors += 1;
                self.reply_error(conn, ms, &id, -32603, "discovery failed", Tag::None);
                return;
            }
            Init::Unsupported { ms } => {
                self.cov.init_unsupported += 1;
                let r = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete", "supportedVersions": ["2030-01-01"], "capabilities": {"tools": {}}}});
                self.reply(conn, ms, r);
                return;
            }
            Init::Hang => {
                self.cov.init_hangs += 1;
                return;
            }
            Init::Drop { ms } => {
                self.cov.drops_during_init += 1;
                self.exit_in(conn, ms, "crashed during server/discover");
                return;
            }
        };
        // Slow to start: the answer comes past the client's probe timeout, after it sent
        // `initialize` (answered only after this, in order).
        let slow = if self.healed {
            0
        } else {
            self.sc.servers[i].slow_discover_ms
        };
        if slow > 0 {
            self.cov.slow_discovers_sent += 1;
        }
        let ms = ms + slow;
        if ms >= gate {
            self.cov.init_slow_past_gate += 1;
        }
        self.cov.probes_answered_modern += 1;
        let due = self.now + Duration::from_millis(ms);
        if let Some(p) = self.procs.get_mut(&conn) {
            p.era.discovered = true;
            p.era.discover_due = Some(due);
        }
        self.reply_frame(conn, ms, r, Tag::Discovered);
    }

    /// How long a stateless server takes to refuse `initialize`: after its probe answer if
    /// that is still to come (it answers in order) — except every other server, which
    /// answers out of order (the refusal first, the late `DiscoverResult` after).
    pub(super) fn refusal_delay_ms(&mut self, conn: ConnId) -> u64 {
        let p = self.procs.get(&conn);
        if p.is_some_and(|p| p.server % 2 == 1 && p.era.discover_due.is_some_and(|d| d > self.now))
        {
            self.cov.initialize_refused_before_discover += 1;
            return 1;
        }
        let due = p.and_then(|p| p.era.discover_due);
        let wait = due.map_or(0, |d| d.saturating_duration_since(self.now).as_millis());
        1 + u64::try_from(wait).unwrap_or(0)
    }

    /// The cache hints of server `i` on a list result (a stateless server's only).
    pub(super) fn add_hints(&self, i: usize, result: &mut Value) {
        let (ttl, scope) = self.hints_of(i);
        if let Some(t) = ttl {
            result["ttlMs"] = json!(t);
        }
        if let Some(sc) = scope {
            result["cacheScope"] = json!(sc);
        }
    }

    /// The cache hints (`ttlMs`, `cacheScope`) of server `i`'s list results.
    pub(super) fn hints_of(&self, i: usize) -> (Option<u64>, Option<&'static str>) {
        let s = &self.sc.servers[i];
        if !s.era.is_modern() || !self.sc.options.probe {
            return (None, None);
        }
        s.hints.members()
    }

    /// Count one list page of server `i` to which [`World::add_hints`] gives a TTL.
    pub(super) fn count_hinted_page(&mut self, i: usize) {
        let s = &self.sc.servers[i];
        if s.era.is_modern() && self.sc.options.probe && s.hints.members().0.is_some() {
            self.cov.list_pages_hinted += 1;
        }
    }

    /// A last tools page of server `i` reached the client: what it listed is fresh for the
    /// page's TTL from now.
    pub(super) fn list_delivered(&mut self, i: usize) {
        let s = &self.sc.servers[i];
        if !s.era.is_modern() || !self.sc.options.probe {
            return;
        }
        let ttl = s.hints.members().0.unwrap_or(0);
        let ttl = Duration::from_millis(ttl).min(switchboard_core::protocol::MAX_CACHE_TTL);
        let until = self.now + ttl;
        self.fresh_until[i] = Some(self.fresh_until[i].map_or(until, |u| u.max(until)));
    }

    /// A connection that became ready without asking for the tool list did so while the last
    /// list its server delivered was fresh by its TTL. `status`: `status()` of every server
    /// after the step, by index.
    pub(super) fn fresh_check(&mut self, status: &[ServerStatus]) {
        let now = self.now;
        // Once fresh-checked, listed, asked for its catalog, killed, exited or found to list
        // nothing, an attempt never passes again.
        let mut watch = std::mem::take(&mut self.era_watch.fresh);
        let found = self.watched(
            &mut watch,
            status,
            |w, p| {
                p.era.fresh_checked
                    || p.lists > 0
                    || p.catalog.asked()
                    || p.killed
                    || p.exited
                    || !w.lists_something(p)
            },
            Self::fresh_filter,
            "freshness check",
        );
        self.era_watch.fresh = watch;
        let mut checked = Vec::new();
        let mut stale = None;
        for (conn, i) in found {
            checked.push(conn);
            if self.fresh_until[i].is_none_or(|u| now > u) {
                stale = Some((conn, i));
                break;
            }
        }
        for c in checked {
            if let Some(p) = self.procs.get_mut(&c) {
                p.era.fresh_checked = true;
            }
            self.cov.fresh_reuses_checked += 1;
        }
        if let Some((conn, i)) = stale {
            self.era_violation(
                Invariant::ListsReusedOnlyWhileFresh,
                format!(
                    "connection {} of {} became ready without a tools/list at {now:?}, but its lists were fresh only until {:?}",
                    conn.0, self.sc.servers[i].name, self.fresh_until[i]
                ),
            );
        }
    }

    /// The processes the freshness check looks at: each became ready on its server's latest
    /// attempt without listing anything, and was not looked at before.
    fn fresh_filter(&self, conn: ConnId, p: &Proc, status: &[ServerStatus]) -> bool {
        let i = p.server;
        !(p.era.fresh_checked
            || p.lists > 0
            || p.catalog.asked()
            || !p.alive()
            || !self.lists_something(p)
            || self.obs.latest_conn[i] != Some(conn)
            || status[i] != ServerStatus::Connected)
    }

    /// A server that offers nothing to list is ready at once without any cache (its planned
    /// answer to the probe may never be asked for: a remembered one stands in).
    fn lists_something(&self, p: &Proc) -> bool {
        !matches!(p.plan.init, Init::NoTools { .. }) || self.sc.servers[p.server].catalog
    }

    /// Every process of the run that `keep` accepts, with its server, in attempt order: what
    /// the watch lists must find (builds with debug assertions compare).
    /// The attempts of `watch` that pass `pass`, in attempt order. Both checks look only at
    /// the latest attempt of a connected server, so the watch forgets an attempt that is no
    /// longer its server's latest or whose process is `gone` (facts that stay true once true),
    /// and keeps one whose server is not connected without reading its process. Debug builds
    /// compare the answer with a walk over every process of the run.
    fn watched(
        &self,
        watch: &mut Vec<(ConnId, usize)>,
        status: &[ServerStatus],
        gone: impl Fn(&Self, &Proc) -> bool,
        pass: impl Fn(&Self, ConnId, &Proc, &[ServerStatus]) -> bool,
        check: &str,
    ) -> Vec<(ConnId, usize)> {
        let mut found = Vec::new();
        watch.retain(|&(c, i)| {
            if self.obs.latest_conn[i] != Some(c) {
                return false;
            }
            if status[i] != ServerStatus::Connected {
                return true;
            }
            let Some(p) = self.procs.get(&c) else {
                return false;
            };
            if gone(self, p) {
                return false;
            }
            if pass(self, c, p, status) {
                found.push((c, p.server));
            }
            true
        });
        found.sort_unstable_by_key(|&(c, _)| c);
        debug_assert_eq!(
            found,
            self.every_proc(|c, p| pass(self, c, p, status)),
            "the watched attempts disagree with every process on the {check}"
        );
        found
    }

    fn every_proc(&self, keep: impl Fn(ConnId, &Proc) -> bool) -> Vec<(ConnId, usize)> {
        self.procs
            .iter()
            .filter(|(c, p)| keep(**c, p))
            .map(|(c, p)| (*c, p.server))
            .collect()
    }

    /// Its `DiscoverResult` answering request `id`.
    fn discover_result(&mut self, i: usize, id: &Value, tools: bool) -> Bytes {
        let key = PageKey::Discover { server: i, tools };
        let write = |w: &Self, b: &mut Vec<u8>| w.write_hello(b, i, tools, true);
        self.page_frame(key, id, write, |w| {
            json!({
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": w.capabilities(i, tools),
                "serverInfo": {"name": w.sc.servers[i].name, "version": "1.0.0"}
            })
        })
    }

    /// A stateless server's tool call, read or prompt: a retry is checked (its
    /// `requestState` must be one this process wrote, byte for byte, with the input it asked
    /// for); a first request with an even id is answered with an input-required result asking
    /// for the roots (or, for a tool call before the heal, for an input the client cannot
    /// give, or with an undefined result type). `true` when it answered (the request is not
    /// run yet).
    pub(super) fn ask_for_input(&mut self, conn: ConnId, id: &Value, r: &Received) -> bool {
        if r.params.request_state.is_some() {
            self.cov.request_states_checked += 1;
            let text = r.text;
            let echoed = self.procs.get(&conn).is_some_and(|p| {
                p.era
                    .states
                    .iter()
                    .any(|s| text.contains(&format!("\"requestState\":{s}")))
            });
            let roots = received::get(received::get(r.params.input_responses, "where"), "roots");
            let answered = received::is_array(roots);
            if !echoed || !answered {
                self.era_violation(
                    Invariant::RequestStateEchoed,
                    format!("a retry that does not echo the state or answer the input: {text}"),
                );
            }
            return false;
        }
        let Some(n) = id.as_u64() else {
            return false;
        };
        if n % 2 != 0 {
            return false;
        }
        // Before the heal, some first calls ask for an input the embedder has no handler for
        // (a form elicitation, when it offers none), and some are answered with a result type
        // the revision does not define: the client fails each call with a typed error.
        let call = r.method() == Some("tools/call");
        let no_form = !self.sc.options.peer.as_ref().is_some_and(|p| p.form);
        if call && !self.healed && n % 6 == 2 && no_form {
            self.cov.inputs_asked_unavailable += 1;
            let frame = format!(
                r#"{{"jsonrpc":"2.0","id":{n},"result":{{"resultType":"input_required","inputRequests":{{"ok":{{"method":"elicitation/create","params":{{"mode":"form","message":"go on?","requestedSchema":{{"type":"object","properties":{{}}}}}}}}}},"requestState":"s"}}}}"#
            );
            self.reply_frame(conn, 2, Bytes::from(frame), Tag::None);
            return true;
        }
        if call && !self.healed && n % 6 == 4 {
            self.cov.unknown_result_types_sent += 1;
            let frame = format!(
                r#"{{"jsonrpc":"2.0","id":{n},"result":{{"resultType":"deferred_elsewhere","content":[]}}}}"#
            );
            self.reply_frame(conn, 2, Bytes::from(frame), Tag::None);
            return true;
        }
        // Escapes a JSON writer would not produce itself: a client that re-serialized the
        // state instead of echoing it would change them.
        let state = format!("\"st\\u00e9\\/{}-{n}\"", conn.0);
        if let Some(p) = self.procs.get_mut(&conn) {
            if p.era.states.len() >= MAX_STATES {
                p.era.states.pop_front();
            }
            p.era.states.push_back(state.clone());
        }
        if call {
            self.cov.input_rounds_sent += 1;
        } else {
            self.cov.op_input_rounds_sent += 1;
        }
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":{n},"result":{{"resultType":"input_required","inputRequests":{{"where":{{"method":"roots/list","params":{{}}}}}},"requestState":{state}}}}}"#
        );
        self.reply_frame(conn, 2, Bytes::from(frame), Tag::None);
        true
    }
}

/// A tool whose `x-mcp-header` is on an object argument, which no header can carry: a client
/// of the stateless revision must drop it.
pub(super) fn unmirrorable_tool() -> Value {
    json!({
        "name": "hdr_unmirrorable",
        "description": "routes by an object",
        "inputSchema": {"type": "object", "properties": {
            "region": {"type": "object", "x-mcp-header": "Region"}
        }}
    })
}

impl World<'_> {
    /// `subscriptions/listen` on a stateless server: the stream opens (acknowledged at once,
    /// tagged with its id) and replaces any before it; before the heal, now and then the
    /// server ends it soon after, and the client must ask again while connected.
    pub(super) fn listen(&mut self, conn: ConnId, i: usize, id: Value, r: &Received) {
        let Some(n) = id.as_u64() else {
            return;
        };
        let filter = r
            .params
            .notifications
            .map_or(Value::Null, received::value_of);
        self.cov.listens_received += 1;
        let tools = received::is_true(received::get(r.params.notifications, "toolsListChanged"));
        let offers = self
            .procs
            .get(&conn)
            .is_some_and(|p| !matches!(p.plan.init, Init::NoTools { .. }));
        if offers && !tools {
            self.era_violation(
                Invariant::StatelessRequestsCarryMeta,
                format!(
                    "a stream that does not ask for the tool list changes offered: {}",
                    r.value()
                ),
            );
        }
        // A server whose revision needed a second probe serves no streams (an error answers
        // the request; the client must not keep asking).
        if self.sc.servers[i].era == SimEra::ModernRetry && i % 2 == 0 {
            self.cov.listens_refused_sent += 1;
            let r = json!({"jsonrpc": "2.0", "id": n,
                "error": {"code": -32601, "message": "Method not found: subscriptions/listen"}});
            self.reply(conn, 1, r);
            return;
        }
        if let Some(p) = self.procs.get_mut(&conn) {
            p.era.listen = Some(n);
            p.era.listen_closed_at = None;
        }
        let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": filter, "_meta": stream_meta(n)}});
        self.reply(conn, 1, ack);
        // The resources it follows changed once since.
        if let Some(uri) = filter.at("/resourceSubscriptions/0").cloned() {
            self.cov.stream_resource_updates_sent += 1;
            let u = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"uri": uri, "_meta": stream_meta(n)}});
            self.reply(conn, 2, u);
        }
        let cp = self.sc.mix.chatter_pct;
        if !self.sc.servers[i].catalog && self.pct(cp) {
            self.cov.listen_streams_ended += 1;
            let ms = 5 + self.rng.below(300);
            let end = json!({"jsonrpc": "2.0", "id": n,
                "result": {"resultType": "complete", "_meta": stream_meta(n)}});
            let now = self.now;
            if let Some(p) = self.procs.get_mut(&conn) {
                p.era.listen = None;
                p.era.listen_closed_at = Some(now);
                if !self.era_watch.listen.contains(&(conn, p.server)) {
                    self.era_watch.listen.push((conn, p.server));
                }
            }
            self.reply(conn, ms, end);
        }
    }

    /// The client cancelled request `id` on `conn`: if it was the open stream, it is gone.
    pub(super) fn listen_cancelled(&mut self, conn: ConnId, id: u64) {
        if let Some(p) = self.procs.get_mut(&conn) {
            if p.era.listen == Some(id) {
                p.era.listen = None;
            }
        }
    }

    /// The list-change notification `method` of the server on `conn` (naming its open
    /// stream, if any, as [`World::tag_stream`] does).
    pub(super) fn changed_frame(&self, conn: ConnId, method: &str) -> Bytes {
        let stream = self.procs.get(&conn).and_then(|p| p.era.listen);
        let frame = super::answers::notification_bytes(method, stream);
        debug_assert_eq!(
            frame,
            serde_json::to_vec(&self.tag_stream(conn, json!({"jsonrpc": "2.0", "method": method})))
                .unwrap_or_default()
        );
        Bytes::from(frame)
    }

    /// A list-change notification of a stateless server names its open stream, if any.
    pub(super) fn tag_stream(&self, conn: ConnId, mut v: Value) -> Value {
        if let Some(n) = self.procs.get(&conn).and_then(|p| p.era.listen) {
            v["params"] = json!({ "_meta": stream_meta(n) });
        }
        v
    }

    /// No stream a server ended stays unasked for longer than the client's longest delay
    /// while that server is connected on that process. `status`: `status()` of every server
    /// after the step, by index.
    pub(super) fn listen_check(&mut self, status: &[ServerStatus]) {
        let now = self.now;
        // An attempt whose stream is open again is forgotten until it ends again; killed,
        // exited and reported stay true once true.
        let mut watch = std::mem::take(&mut self.era_watch.listen);
        let found = self.watched(
            &mut watch,
            status,
            |_, p| p.era.listen_closed_at.is_none() || p.killed || p.exited || p.reported,
            Self::listen_filter,
            "stream check",
        );
        self.era_watch.listen = watch;
        let mut late = None;
        for (conn, _) in found {
            let Some(at) = self.procs.get(&conn).and_then(|p| p.era.listen_closed_at) else {
                continue;
            };
            if now.saturating_duration_since(at) > LISTEN_GRACE {
                late = Some((conn, at));
                break;
            }
            self.cov.listen_gaps_checked += 1;
        }
        if let Some((conn, at)) = late {
            self.era_violation(
                Invariant::ListenStreamsResent,
                format!(
                    "the stream of connection {} closed at {at:?} and was not asked again by {now:?}",
                    conn.0
                ),
            );
        }
    }

    /// The processes the stream check looks at: a stream ended on its server's latest
    /// attempt, alive, not reported gone, while the server is connected.
    fn listen_filter(&self, conn: ConnId, p: &Proc, status: &[ServerStatus]) -> bool {
        let i = p.server;
        p.era.listen_closed_at.is_some()
            && p.alive()
            && !p.reported
            && self.obs.latest_conn[i] == Some(conn)
            && status[i] == ServerStatus::Connected
    }
}
