//! Simulated downstream clients of the stateless revision (2026-07-28): each discovers the
//! gateway (`server/discover`), opens a `subscriptions/listen` stream and, once it is
//! acknowledged, lists tools, resources, templates and prompts page by page; it lists a kind
//! again when its stream says it changed, and re-opens the stream (listing everything again:
//! nothing is replayed) when it ends it — now and then to change the resources it follows.
//! Every request is an HTTP exchange of its own (the shell opens a one-request session for
//! it), with the envelope in `_meta` and the `Mcp-Method`/`Mcp-Name` headers. It calls tools
//! it listed (or names it never saw), reads, gets prompts, and abandons an exchange (the
//! client goes away: the session closes) to cancel it. An `InputRequiredResult` is answered
//! for every input it declared — at once, late, never, with a `requestState` it changed, or
//! twice with the same state; an input it did not declare is a violation.
//!
//! The judge's side of these exchanges (what the gateway is seen to serve them) is here too,
//! called from `super::gateway` while outputs are drained.

use super::downstream::Client;
use super::downstream_wire::{self as wire, Caps, Info, Listen, Meta, Params, Written};
use super::gateway::{session_obs, Cause, DownEv};
use super::{Ev, World};
use crate::invariants::gateway::{announced_lists, IssuedState, OpenRequest, LIST_METHODS};
use crate::verdict::Invariant;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;
use switchboard_core::gateway::{GatewayInput, RequestHeaders, SessionId};
use switchboard_core::protocol::form_defaults;

/// The revision the clients speak.
const VERSION: &str = "2026-07-28";

/// What one exchange of a stateless client asked.
#[derive(Debug, Clone)]
enum Req {
    Discover,
    Listen,
    List(usize),
    /// A call, read or prompt (or a retry of one): its method and params (no envelope).
    Call {
        method: String,
        params: Box<Params>,
    },
}

/// What a stateless client put off.
#[derive(Debug, Clone)]
enum Later {
    Send {
        method: String,
        params: Box<Params>,
        req: Req,
    },
    Listen,
}

/// A stateless client's own state.
#[derive(Debug, Clone, Default)]
pub(super) struct ModernClient {
    /// Its exchanges waiting for an answer (the listen stream's too): the request id and
    /// what it asked.
    exchanges: BTreeMap<SessionId, (u64, Req)>,
    listen: Option<SessionId>,
    /// The resources it follows on its stream.
    uris: BTreeSet<String>,
    later: BTreeMap<u64, Later>,
    next_token: u64,
    /// Its requests' envelope, once written.
    envelope: Option<std::sync::Arc<str>>,
}

/// The name the `Mcp-Name` header repeats.
fn named(method: &str, params: &Params) -> Option<String> {
    match method {
        "tools/call" | "prompts/get" => params.name.clone(),
        "resources/read" => params.uri.clone(),
        _ => None,
    }
}

/// A `requestState` changed as a client might (its last character): the seal no longer
/// opens.
fn forged(state: &str) -> String {
    let mut s = state.to_string();
    let last = s.pop().unwrap_or('0');
    s.push(if last == '0' { '1' } else { '0' });
    s
}

impl World<'_> {
    pub(super) fn modern_client_of(&self, session: SessionId) -> Option<usize> {
        let gw = self.gw.as_ref()?;
        gw.clients
            .iter()
            .position(|c| c.m.exchanges.contains_key(&session))
    }

    pub(super) fn is_modern_exchange(&self, session: SessionId) -> bool {
        self.gw
            .as_ref()
            .is_some_and(|gw| gw.obs.exchanges.contains_key(&session))
    }

    /// The client starts: it discovers the gateway.
    pub(super) fn modern_open(&mut self, i: usize) {
        let Some(gw) = self.gw.as_mut() else { return };
        if gw.clients[i].initialized || !gw.clients[i].m.exchanges.is_empty() {
            return;
        }
        gw.clients[i] = Client::new();
        self.tr(|t| {
            let _ = writeln!(t, "            ds: stateless client {i} discovers");
        });
        let _ = self.modern_request(i, "server/discover", Params::default(), Req::Discover);
    }

    /// The client sends a request on an exchange of its own.
    fn modern_request(
        &mut self,
        i: usize,
        method: &str,
        params: Params,
        req: Req,
    ) -> Option<SessionId> {
        let gw = self.gw.as_mut()?;
        let plan = &gw.plan.clients[i];
        let (sampling, roots, form, url) = (plan.sampling, plan.roots, plan.form, plan.url);
        let level = plan.log_level.clone();
        let c = &mut gw.clients[i];
        c.next_id += 1;
        let id = c.next_id;
        // The envelope, in the call's own `_meta` (its progress token) when it has one.
        let merge = |meta: &mut Meta| {
            meta.version = Some(VERSION);
            meta.caps = Some(Caps::new(sampling, roots, form, url));
            meta.info = Some(Info {
                name: format!("sim-client-{i}"),
                version: "1",
            });
            if let Some(level) = &level {
                meta.level = Some(level.clone());
            }
        };
        let envelope =
            c.m.envelope
                .get_or_insert_with(|| {
                    let mut meta = Meta::default();
                    merge(&mut meta);
                    wire::envelope(&meta)
                })
                .clone();
        let merged = || {
            let mut sent = params.clone();
            merge(sent.meta.get_or_insert_with(Meta::default));
            sent
        };
        let headers = RequestHeaders {
            protocol_version: Some(VERSION.into()),
            method: Some(method.into()),
            name: named(method, &params),
        };
        gw.next_session += 1;
        let session = SessionId(gw.next_session);
        let exchange = gw.exchange();
        gw.clients[i].m.exchanges.insert(session, (id, req));
        gw.obs.exchanges.insert(session, i);
        gw.obs.modern.entry(i).or_default();
        gw.obs
            .sessions
            .insert(session, session_obs((sampling, form, url)));
        let lat = 1 + gw.rng.below(4);
        let at = self.now + Duration::from_millis(lat);
        let (frame, message) = wire::enveloped(id, method, &params, &envelope, merged);
        self.gateway_input(
            GatewayInput::Opened {
                session,
                strict: true,
            },
            Cause::Other,
        );
        self.push(
            at,
            Ev::Downstream(DownEv::ToGateway {
                session,
                exchange,
                frame,
                message: Box::new(message),
                headers: Some(Box::new(headers)),
            }),
        );
        Some(session)
    }

    /// The client puts something off for `ms`.
    pub(super) fn modern_later(&mut self, i: usize, token: u64) {
        let Some(gw) = self.gw.as_mut() else { return };
        let Some(what) = gw.clients[i].m.later.remove(&token) else {
            return;
        };
        match what {
            Later::Send {
                method,
                params,
                req,
            } => {
                let _ = self.modern_request(i, &method, *params, req);
            }
            Later::Listen => {
                if gw.clients[i].m.listen.is_none() {
                    self.cov.modern_listens_reopened += 1;
                    self.modern_listen(i);
                }
            }
        }
    }

    fn put_off(&mut self, i: usize, ms: u64, what: Later) {
        let Some(gw) = self.gw.as_mut() else { return };
        let m = &mut gw.clients[i].m;
        m.next_token += 1;
        let token = m.next_token;
        m.later.insert(token, what);
        let at = self.after_ms(ms);
        self.push(at, Ev::Downstream(DownEv::Later { client: i, token }));
    }

    /// Open the listen stream, asking for every list's changes and the resources followed.
    fn modern_listen(&mut self, i: usize) {
        let Some(gw) = self.gw.as_mut() else { return };
        let uris: Vec<String> = gw.clients[i].m.uris.iter().cloned().collect();
        let params = Params {
            notifications: Some(Listen {
                prompts_list_changed: true,
                resource_subscriptions: uris,
                resources_list_changed: true,
                tools_list_changed: true,
            }),
            ..Params::default()
        };
        let session = self.modern_request(i, "subscriptions/listen", params, Req::Listen);
        if let Some(gw) = self.gw.as_mut() {
            gw.clients[i].m.listen = session;
        }
    }

    /// Start (or, while one is under way, ask for another) listing of kind `k`.
    fn modern_list(&mut self, i: usize, k: usize) {
        let Some(gw) = self.gw.as_mut() else { return };
        let l = &mut gw.clients[i].lists[k];
        if l.listing {
            l.again = true;
            return;
        }
        l.listing = true;
        l.again = false;
        l.so_far.clear();
        let _ = self.modern_request(i, LIST_METHODS[k], Params::default(), Req::List(k));
    }

    /// A frame on one of the client's exchanges.
    pub(super) fn modern_frame(&mut self, i: usize, session: SessionId, v: &Written) {
        match (&v.id, &v.method) {
            (Some(_), None) => {
                let Some(gw) = self.gw.as_mut() else { return };
                let Some((_, req)) = gw.clients[i].m.exchanges.remove(&session) else {
                    return;
                };
                self.modern_response(i, session, req, v);
            }
            (None, Some(method)) => {
                let listen = self
                    .gw
                    .as_ref()
                    .is_some_and(|gw| gw.clients[i].m.listen == Some(session));
                if !listen {
                    return; // progress or a log on a call's exchange
                }
                if method == "notifications/subscriptions/acknowledged" {
                    // Nothing is replayed: everything is listed again.
                    for k in 0..4 {
                        self.modern_list(i, k);
                    }
                }
                for &k in announced_lists(method) {
                    self.modern_list(i, k);
                }
            }
            _ => {
                let d = format!("stateless client {i} was sent a request: {}", v.shown());
                self.fail(Invariant::ForwardedRequestsAnsweredOnce, d);
            }
        }
    }

    fn modern_response(&mut self, i: usize, session: SessionId, req: Req, v: &Written) {
        let Some(gw) = self.gw.as_mut() else { return };
        let error = v.error;
        match req {
            Req::Discover => {
                if error || gw.clients[i].initialized {
                    return;
                }
                gw.clients[i].initialized = true;
                self.cov.modern_discovered += 1;
                self.modern_listen(i);
            }
            Req::Listen => {
                // The stream's answer is its end (or its refusal): open another a little later.
                if gw.clients[i].m.listen == Some(session) {
                    gw.clients[i].m.listen = None;
                    self.put_off(i, 500, Later::Listen);
                }
            }
            Req::List(k) => {
                let l = &mut gw.clients[i].lists[k];
                if error {
                    l.listing = false;
                    if std::mem::take(&mut l.again) {
                        self.modern_list(i, k);
                    }
                    return;
                }
                if let Some(items) = &v.items[k] {
                    l.so_far.extend(items.iter().flatten().cloned());
                }
                match &v.cursor {
                    Some(cursor) => {
                        let params = Params::cursor(Some(cursor.clone()));
                        let _ = self.modern_request(i, LIST_METHODS[k], params, Req::List(k));
                    }
                    None => {
                        l.items = std::mem::take(&mut l.so_far);
                        l.listing = false;
                        if std::mem::take(&mut l.again) {
                            self.modern_list(i, k);
                        }
                    }
                }
            }
            Req::Call { method, params } => {
                if v.result_type.as_deref() == Some("input_required") {
                    self.modern_inputs(i, &method, *params, v);
                }
            }
        }
    }

    /// An `InputRequiredResult`: answer what it asks, as the plan's weights draw.
    fn modern_inputs(&mut self, i: usize, method: &str, params: Params, v: &Written) {
        let Some(gw) = self.gw.as_mut() else { return };
        let plan = gw.plan.clients[i].clone();
        let Some(state) = v.request_state.as_deref() else {
            let d = format!(
                "stateless client {i} got an InputRequiredResult without requestState: {}",
                v.shown()
            );
            return self.fail(Invariant::InputRoundsHonoured, d);
        };
        let mut responses = Map::new();
        let asked = v.input_requests.clone().unwrap_or_default();
        for (key, input) in &asked {
            let kind = input.get("method").and_then(Value::as_str).unwrap_or("");
            let p = input.get("params").cloned().unwrap_or(Value::Null);
            let url = p.get("mode") == Some(&json!("url"));
            let (declared, answer) = match kind {
                "sampling/createMessage" => (
                    plan.sampling,
                    json!({"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "sim"}),
                ),
                "elicitation/create" if url => (plan.url, json!({"action": "accept"})),
                "elicitation/create" => {
                    let schema = p.get("requestedSchema").cloned().unwrap_or(Value::Null);
                    (
                        plan.form,
                        json!({"action": "accept", "content": form_defaults(&schema)}),
                    )
                }
                "roots/list" => (plan.roots, json!({ "roots": [] })),
                _ => (false, Value::Null),
            };
            if !declared {
                let d = format!(
                    "stateless client {i} was asked {kind} (url: {url}) in an input round, which it never declared"
                );
                return self.fail(Invariant::ForwardedRequestsAnsweredOnce, d);
            }
            responses.insert(key.clone(), answer);
        }
        let retry = |state: &str| Params {
            input_responses: Some(responses.clone()),
            request_state: Some(state.to_string()),
            ..params.clone()
        };
        let w = plan.rounds;
        let total: u64 = w.iter().map(|&w| u64::from(w)).sum();
        let mut choice = 0;
        if total > 0 {
            let mut pick = gw.rng.below(total);
            for (k, &w) in w.iter().enumerate() {
                if pick < u64::from(w) {
                    choice = k;
                    break;
                }
                pick -= u64::from(w);
            }
        }
        let late = 300 + gw.rng.below(2_700);
        let req = Req::Call {
            method: method.to_string(),
            params: Box::new(params.clone()),
        };
        match choice {
            0 => {
                let _ = self.modern_request(i, method, retry(state), req);
            }
            1 => {
                self.cov.modern_retries_late += 1;
                let what = Later::Send {
                    method: method.to_string(),
                    params: Box::new(retry(state)),
                    req,
                };
                self.put_off(i, late, what);
            }
            2 => self.cov.modern_retries_abandoned += 1,
            3 => {
                let _ = self.modern_request(i, method, retry(&forged(state)), req.clone());
                let _ = self.modern_request(i, method, retry(state), req);
            }
            _ => {
                self.cov.modern_retries_doubled += 1;
                let _ = self.modern_request(i, method, retry(state), req.clone());
                let _ = self.modern_request(i, method, retry(state), req);
            }
        }
    }

    /// One of the plan's actions, by a stateless client.
    pub(super) fn modern_action(&mut self, i: usize, kind: crate::scenario::DownstreamKind) {
        use crate::scenario::DownstreamKind as K;
        let Some(gw) = self.gw.as_mut() else { return };
        let c = &gw.clients[i];
        if !c.initialized {
            return;
        }
        let call = |method: &str, params: Params| {
            (
                method.to_string(),
                params.clone(),
                Req::Call {
                    method: method.to_string(),
                    params: Box::new(params),
                },
            )
        };
        let (method, params, req) = match kind {
            K::Call {
                pick,
                known,
                progress,
            } => {
                let tools = &c.lists[0].items;
                let name = if known && !tools.is_empty() {
                    tools[pick % tools.len()].clone()
                } else {
                    format!("nosuch_tool_{pick}")
                };
                let n = c.next_id + 1;
                let token = progress.then(|| format!("pt-{i}-{n}"));
                call("tools/call", Params::call(name, n, token))
            }
            K::Cancel(pick) => {
                let calls: Vec<SessionId> =
                    c.m.exchanges
                        .iter()
                        .filter(|(_, (_, r))| matches!(r, Req::Call { .. }))
                        .map(|(s, _)| *s)
                        .collect();
                if let Some(&session) = calls.get(pick % calls.len().max(1)) {
                    self.modern_abandon(i, session);
                }
                return;
            }
            K::Read(pick) => {
                let uris = &c.lists[1].items;
                let uri = if uris.is_empty() {
                    format!("sim://nowhere/{pick}")
                } else {
                    uris[pick % uris.len()].clone()
                };
                call("resources/read", Params::uri(uri))
            }
            K::Prompt(pick) => {
                let names = &c.lists[3].items;
                if names.is_empty() {
                    return;
                }
                let name = names[pick % names.len()].clone();
                call("prompts/get", Params::prompt(name))
            }
            K::Subscribe(pick) => {
                // The filter is the stream's: follow (or stop following) a resource by
                // opening the stream again.
                let uris = &c.lists[1].items;
                if uris.is_empty() {
                    return;
                }
                let uri = uris[pick % uris.len()].clone();
                let m = &mut gw.clients[i].m;
                if !m.uris.remove(&uri) {
                    m.uris.insert(uri);
                }
                if let Some(session) = m.listen {
                    self.cov.modern_listen_filters_changed += 1;
                    self.modern_abandon(i, session);
                    self.modern_listen(i);
                }
                return;
            }
            K::Ping => (
                "server/discover".to_string(),
                Params::default(),
                Req::Discover,
            ),
            K::Close => {
                // The client ends its stream; it opens another a little later.
                let Some(session) = c.m.listen else { return };
                let wait = 100 + gw.rng.below(400);
                self.modern_abandon(i, session);
                self.put_off(i, wait, Later::Listen);
                return;
            }
        };
        let _ = self.modern_request(i, &method, params, req);
    }

    /// The client goes away from one of its exchanges (the HTTP request is dropped): the
    /// shell closes its session, and what it carried must be cancelled upstream.
    fn modern_abandon(&mut self, i: usize, session: SessionId) {
        self.tr(|t| {
            let _ = writeln!(
                t,
                "            ds: stateless client {i} abandons s{}",
                session.0
            );
        });
        if let Some(gw) = self.gw.as_mut() {
            let m = &mut gw.clients[i].m;
            m.exchanges.remove(&session);
            if m.listen == Some(session) {
                m.listen = None;
            }
            let working = gw
                .obs
                .sessions
                .get(&session)
                .is_some_and(|s| s.open.values().any(|r| r.call.is_some()));
            self.cov.modern_exchanges_abandoned += u64::from(working);
        }
        self.gateway_input(GatewayInput::Closed { session }, Cause::Closed(session));
        let Some(gw) = self.gw.as_mut() else { return };
        gw.obs.exchanges.remove(&session);
        if let Some(o) = gw.obs.modern.get_mut(&i) {
            if o.listen == Some(session) {
                o.listen = None;
                o.all_stale(&[0, 1, 2, 3]);
            }
        }
        if let Some(s) = gw.obs.sessions.remove(&session) {
            if let Some((id, r)) = s.open.iter().find(|(_, r)| r.call.is_some()) {
                let d = format!(
                    "stateless client {i} left its {} (id {id}) on s{}, and the gateway did not cancel it",
                    r.method, session.0
                );
                self.fail(Invariant::DownstreamCancelReachesUpstream, d);
            }
        }
    }

    /// The gateway closed one of a stateless client's exchanges (answered, so over).
    pub(super) fn modern_exchange_closed(&mut self, session: SessionId) {
        let Some(gw) = self.gw.as_mut() else { return };
        let client = gw.obs.exchanges.remove(&session);
        let open = gw.obs.sessions.remove(&session);
        if let Some((id, r)) = open.as_ref().and_then(|s| s.open.iter().next()) {
            let d = format!(
                "the gateway closed stateless exchange s{} with its {} (id {id}) unanswered",
                session.0, r.method
            );
            gw.obs
                .found
                .push((Invariant::ForwardedRequestsAnsweredOnce, d));
        }
        let Some(i) = client else { return };
        if let Some(o) = gw.obs.modern.get_mut(&i) {
            if o.listen == Some(session) {
                o.listen = None;
                o.all_stale(&[0, 1, 2, 3]);
            }
        }
        // The client sees its stream end.
        if gw.clients[i].m.listen == Some(session) {
            gw.clients[i].m.listen = None;
            gw.clients[i].m.exchanges.remove(&session);
            self.put_off(i, 500, Later::Listen);
        }
    }

    /// After the gateway handled a retry that it did not answer at once: it continues the
    /// call, whose completion now answers this request.
    pub(super) fn modern_retry_taken(&mut self, session: SessionId, id: String) {
        let Some(gw) = self.gw.as_mut() else { return };
        let call = gw
            .obs
            .sessions
            .get(&session)
            .and_then(|s| s.open.get(&id))
            .and_then(|r| r.call);
        if let Some(call) = call {
            gw.obs.calls.entry(call).or_insert((session, id));
        }
    }

    /// The judge's side of an answer on a stateless client's exchange.
    pub(super) fn modern_answered(&mut self, client: usize, r: &OpenRequest, v: &Written) {
        let Some(gw) = self.gw.as_mut() else { return };
        let code = v.code;
        if let Err(d) =
            crate::invariants::gateway::forged_state_refused(&gw.obs, r, code, || v.shown())
        {
            gw.obs.found.push((Invariant::InputRoundsHonoured, d));
        }
        let error = v.error;
        if let Some(k) = LIST_METHODS.iter().position(|l| *l == r.method) {
            let o = gw.obs.modern.entry(client).or_default();
            let unwatched = o.listen.is_none();
            let page = o.lists[k].take_page(v.page(k), r.first_page, unwatched);
            self.cov.modern_lists_paged += u64::from(page.paged);
            if page.completed {
                // The announced-view check runs again (see `lists_set`).
                gw.lists_set += 1;
                self.cov.modern_lists_served += 1;
            }
            return;
        }
        if !matches!(
            r.method.as_str(),
            "tools/call" | "resources/read" | "prompts/get"
        ) {
            return;
        }
        if code == Some(-32602) {
            if let Some(state) = &r.state {
                match gw.obs.states.get(state) {
                    None => self.cov.modern_states_forged_refused += 1,
                    Some(IssuedState { taken: Some(_), .. }) => {
                        self.cov.modern_retries_stale_refused += 1
                    }
                    Some(_) => {}
                }
            }
        }
        if code == Some(-32021) {
            self.cov.modern_capability_missing += 1;
        }
        match v.result_type.as_deref() {
            Some("input_required") => {
                let Some(state) = v.request_state.as_deref() else {
                    return; // the client says so
                };
                let Some(call) = r.call else {
                    let d = format!(
                        "an InputRequiredResult answered a {} the gateway never handed the manager",
                        r.method
                    );
                    gw.obs.found.push((Invariant::InputRoundsHonoured, d));
                    return;
                };
                gw.obs.states.insert(
                    state.to_string(),
                    IssuedState {
                        call,
                        server: r.server.clone(),
                        taken: None,
                    },
                );
                gw.obs.latest.insert(call, state.to_string());
                self.cov.modern_inputs_asked += 1;
            }
            Some(_) if !error => self.cov.modern_calls_complete += 1,
            _ => {}
        }
    }

    /// The judge's side of a notification on a stateless client's exchange.
    pub(super) fn modern_notified(&mut self, session: SessionId, method: &str) {
        let Some(gw) = self.gw.as_mut() else { return };
        let Some(&i) = gw.obs.exchanges.get(&session) else {
            return;
        };
        let o = gw.obs.modern.entry(i).or_default();
        if method == "notifications/subscriptions/acknowledged" {
            o.listen = Some(session);
            self.cov.modern_listens_acknowledged += 1;
            return;
        }
        let kinds = announced_lists(method);
        if kinds.is_empty() {
            return;
        }
        if o.listen == Some(session) {
            o.all_stale(kinds);
            self.cov.modern_list_changed_told += 1;
        } else {
            let d = format!(
                "the gateway sent {method} on s{}, which is not stateless client {i}'s stream",
                session.0
            );
            gw.obs.found.push((Invariant::DownstreamViewIsAnnounced, d));
        }
    }
}
