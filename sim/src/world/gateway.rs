//! `switchboard serve` in the world: the real [`Gateway`] in front of the real manager, fed
//! as the serving shell feeds it — downstream frames, the manager's events about its calls,
//! progress, logs, resource updates and servers' requests, and the manager's view after every
//! step — with its calls and operations handed to the manager under its own ids. The
//! downstream clients are in [`super::downstream`]; what the gateway is seen to do is
//! recorded in a [`GatewayObs`] and judged by `crate::invariants::gateway`.
//!
//! Runs whose scenario has no `GatewayPlan` have no gateway and draw nothing here, so their
//! traces are as they were.

use super::downstream::Client;
use super::downstream_wire::{Sent, Written};
use super::{Ev, World};
use crate::invariants::gateway::{
    self as judge, announced_lists, GatewayObs, OpenRequest, PeerObs, SessionObs, LIST_METHODS,
};
use crate::scenario::GatewayPlan;
use crate::verdict::Invariant;
use bytes::Bytes;
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::gateway::{
    ExchangeId, Gateway, GatewayInput, GatewayOptions, GatewayOutput, RequestHeaders, SessionId,
    StateKey, Target, View,
};
use switchboard_core::manager::{CallId, Event, Input, Manager, Output};
use switchboard_core::rng::SplitMix64;
use switchboard_core::Instant;

/// The first call id of the gateway's; the embedder's ids stay far below.
pub(super) const FIRST_CALL: u64 = 1 << 48;

/// What the world's queue carries for the serving side.
#[derive(Debug, Clone)]
pub(super) enum DownEv {
    /// A client opens its session (again).
    Open(usize),
    /// The `k`-th downstream action of the plan.
    Action(usize),
    /// A frame reaches the gateway (with its HTTP headers when a stateless client sent it).
    ToGateway {
        session: SessionId,
        exchange: ExchangeId,
        frame: Bytes,
        /// What the client wrote as `frame`, which the world reads instead of parsing the
        /// frame again.
        message: Box<Sent>,
        headers: Option<Box<RequestHeaders>>,
    },
    /// A stateless client does what it put off (a late retry, re-opening its stream).
    Later { client: usize, token: u64 },
    /// A frame reaches a client: read once, when the gateway wrote it (`None` when it is
    /// not JSON, which a client ignores).
    ToClient {
        session: SessionId,
        frame: Option<Box<Written>>,
    },
    /// The gateway's input for the manager reaches it.
    Manager(Box<Input>),
}

/// What the gateway was handling when it produced an output (to tie outputs to their cause).
#[derive(Debug, Clone)]
pub(super) enum Cause {
    /// A downstream frame: a request (its id's text and method), or anything else.
    Frame {
        session: SessionId,
        request: Option<(String, String)>,
        response_id: Option<Value>,
    },
    Closed(SessionId),
    Peer(switchboard_core::PeerRequestKey),
    Other,
}

/// The serving side of a run.
pub(super) struct GatewayWorld {
    pub(super) g: Gateway,
    pub(super) plan: GatewayPlan,
    pub(super) rng: SplitMix64,
    pub(super) clients: Vec<Client>,
    pub(super) obs: GatewayObs,
    pub(super) next_session: u64,
    pub(super) next_exchange: u64,
    /// When the last frame to each session (and from it) is delivered: frames keep their order.
    pub(super) to_client_at: std::collections::BTreeMap<SessionId, Instant>,
    pub(super) to_gateway_at: std::collections::BTreeMap<SessionId, Instant>,
    /// Calls whose cancellation the manager handled in this step.
    cancelled_now: Vec<CallId>,
    /// The manager's view as last read, with the generations it was read at.
    memo: Option<ViewMemo>,
    /// Bumped whenever a client's list is replaced in [`GatewayObs`].
    pub(super) lists_set: u64,
    /// The view's generations and `lists_set` the announced-view check last passed with.
    announced: Option<(Option<(u64, u64)>, u64)>,
    /// Results of the gateway's frames read before, by their bytes.
    results: super::downstream_scan::Results,
}

/// The manager's view read once per change of its `view_generation()` and
/// `catalog_generation()`: what the gateway is handed (the same `Arc`s while nothing moved, as
/// the library's snapshot hands them) and what the judge compares the clients' lists with.
struct ViewMemo {
    gens: (u64, u64),
    view: View,
    expected: [Arc<judge::Expected>; 4],
}

impl GatewayWorld {
    pub(super) fn new(plan: &GatewayPlan, seed: u64) -> Self {
        let options = GatewayOptions {
            first_call: FIRST_CALL,
            page_size: plan.page_size,
            max_in_flight: plan.max_in_flight,
            plain_names: plan.plain_names,
            request_state_key: Some(StateKey::from_secret(&seed.to_le_bytes())),
            ..GatewayOptions::default()
        };
        GatewayWorld {
            g: Gateway::new(options),
            plan: plan.clone(),
            rng: SplitMix64::new(seed ^ 0x6761_7465_7761_7921),
            clients: (0..plan.clients.len()).map(|_| Client::new()).collect(),
            obs: GatewayObs::default(),
            next_session: 0,
            next_exchange: 0,
            to_client_at: Default::default(),
            to_gateway_at: Default::default(),
            cancelled_now: Vec::new(),
            memo: None,
            lists_set: 0,
            announced: None,
            results: Default::default(),
        }
    }

    /// The manager's view now: the tools read again only when `view_generation()` moved,
    /// the catalog (resources, templates, prompts) only when `catalog_generation()` did; what
    /// did not move is the same `Arc`s as before (debug builds, the tests among them, read
    /// the whole view every time and check that promise).
    fn view(&mut self, m: &Manager) -> &ViewMemo {
        let gens = (m.view_generation(), m.catalog_generation());
        let memo = match self.memo.take() {
            Some(memo) if memo.gens == gens => memo,
            Some(mut memo) => {
                if memo.gens.0 != gens.0 {
                    memo.view.tools = Arc::new(m.tools());
                    memo.expected[0] = Arc::new(expected_tools(&memo.view));
                }
                if memo.gens.1 != gens.1 {
                    memo.view.resources = Arc::new(m.resources());
                    memo.view.templates = Arc::new(m.resource_templates());
                    memo.view.prompts = Arc::new(m.prompts());
                    let [_, r, t, p] = expected_catalog(&memo.view);
                    memo.expected[1] = Arc::new(r);
                    memo.expected[2] = Arc::new(t);
                    memo.expected[3] = Arc::new(p);
                }
                memo.gens = gens;
                memo
            }
            None => {
                let view = current_view(m);
                let expected = expected_views(&view).map(Arc::new);
                ViewMemo {
                    gens,
                    view,
                    expected,
                }
            }
        };
        debug_assert!(
            memo.view == current_view(m),
            "the manager's view changed but its generation did not move"
        );
        debug_assert!(
            memo.expected
                .iter()
                .map(|e| &**e)
                .eq(expected_views(&memo.view).iter()),
            "the judge's lists are those of the view"
        );
        self.memo.insert(memo)
    }

    pub(super) fn exchange(&mut self) -> ExchangeId {
        self.next_exchange += 1;
        ExchangeId(self.next_exchange)
    }
}

/// Which of the manager's events the serving shell hands the gateway.
fn for_gateway(o: &Output) -> Option<&Event> {
    match o {
        Output::Event(
            e @ (Event::CallCompleted { .. }
            | Event::OperationCompleted { .. }
            | Event::Progress { .. }
            | Event::ServerLog { .. }
            | Event::ResourceUpdated { .. }
            | Event::PeerRequest { .. }
            | Event::PeerRequestWithdrawn { .. }),
        ) => Some(e),
        _ => None,
    }
}

impl World<'_> {
    /// Schedule the clients' sessions and actions (at the start of a run with a gateway).
    pub(super) fn gateway_start(&mut self) {
        let Some(gw) = self.gw.as_mut() else { return };
        let view = gw.view(&self.m).view.clone();
        gw.g.handle(GatewayInput::View(view));
        while gw.g.poll_output().is_some() {}
        let opens: Vec<(usize, u64)> = gw
            .plan
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| (i, c.open_at_ms))
            .collect();
        let actions: Vec<(usize, u64)> = gw
            .plan
            .actions
            .iter()
            .enumerate()
            .map(|(k, a)| (k, a.at_ms))
            .collect();
        for (i, at) in opens {
            self.push(Instant::from_millis(at), Ev::Downstream(DownEv::Open(i)));
        }
        for (k, at) in actions {
            self.push(Instant::from_millis(at), Ev::Downstream(DownEv::Action(k)));
        }
    }

    /// Whether the manager's output goes to the gateway (and not to the embedder).
    pub(super) fn gateway_takes(&self, o: &Output) -> Option<Event> {
        self.gw.as_ref()?;
        for_gateway(o).cloned()
    }

    /// The manager's event, handed to the gateway.
    pub(super) fn gateway_event(&mut self, e: Event) {
        let now = self.now;
        let owned = |gw: &GatewayWorld, call: &CallId| gw.g.owns(*call);
        let Some(gw) = self.gw.as_ref() else { return };
        let cause = match &e {
            Event::CallCompleted { call, .. }
            | Event::OperationCompleted { call, .. }
            | Event::Progress {
                call: Some(call), ..
            } if !owned(gw, call) => return,
            Event::Progress { call: None, .. } => return,
            Event::PeerRequest {
                server, request, ..
            } => {
                let gw = self.gw.as_mut().expect("checked above");
                gw.obs.peers.insert(
                    *request,
                    PeerObs::Handed {
                        server: server.clone(),
                        at: now,
                    },
                );
                Cause::Peer(*request)
            }
            Event::PeerRequestWithdrawn { request, .. } => {
                let gw = self.gw.as_mut().expect("checked above");
                if let Some(p) = gw.obs.peers.get_mut(request) {
                    if matches!(p, PeerObs::Forwarded { .. }) {
                        self.cov.downstream_peer_withdrawn += 1;
                    }
                    *p = PeerObs::Done;
                }
                Cause::Other
            }
            _ => Cause::Other,
        };
        let completed = match &e {
            Event::CallCompleted { call, outcome } => Some((*call, Some(outcome.clone()))),
            Event::OperationCompleted { call, .. } => Some((*call, None)),
            _ => None,
        };
        if let Some(gw) = self.gw.as_mut() {
            gw.g.handle_event(&e);
        }
        self.gateway_drain(cause);
        // A completion the gateway was waiting for is answered in the same step.
        if let Some((call, outcome)) = completed {
            let Some(gw) = self.gw.as_mut() else { return };
            if let Some((session, id)) = gw.obs.calls.remove(&call) {
                let open = gw
                    .obs
                    .sessions
                    .get(&session)
                    .is_some_and(|s| s.open.contains_key(&id));
                if open {
                    let d = format!(
                        "call {} completed ({outcome:?}), but session {}'s request {id} was not answered",
                        call.0, session.0
                    );
                    gw.obs
                        .found
                        .push((Invariant::ForwardedRequestsAnsweredOnce, d));
                }
            }
        }
    }

    /// After every manager step: the gateway gets the view, and the serving side is checked.
    pub(super) fn gateway_after_step(&mut self) {
        let Some(gw) = self.gw.as_mut() else { return };
        let view = gw.view(&self.m).view.clone();
        gw.g.handle(GatewayInput::View(view));
        self.gateway_drain(Cause::Other);
        // The cancellations the manager handled in this step left it.
        let cancelled = self
            .gw
            .as_mut()
            .map(|gw| std::mem::take(&mut gw.cancelled_now))
            .unwrap_or_default();
        if !cancelled.is_empty() {
            let calls = self.m.calls_in_flight();
            let ops = self.m.operations_in_flight();
            if let Err(d) = judge::cancelled_calls_left_the_manager(&cancelled, &calls, &ops) {
                self.fail(Invariant::DownstreamCancelReachesUpstream, d);
            }
        }
        self.gateway_check();
    }

    /// Hand one downstream input to the gateway, drain it, check.
    pub(super) fn gateway_input(&mut self, input: GatewayInput, cause: Cause) {
        let Some(gw) = self.gw.as_mut() else { return };
        self.gateway_steps += 1;
        gw.g.handle(input);
        self.gateway_drain(cause);
        self.gateway_check();
    }

    /// The gateway's invariants after a step.
    fn gateway_check(&mut self) {
        let Some(gw) = self.gw.as_mut() else { return };
        if let Some((inv, d)) = gw.obs.found.first().cloned() {
            gw.obs.found.clear();
            self.fail(inv, d);
            return;
        }
        let plain = gw.plan.plain_names;
        let gens = gw.view(&self.m).gens;
        let checks = gw
            .obs
            .sessions
            .values()
            .flat_map(|s| s.lists.iter())
            .filter(|l| l.listed.is_some() && !l.stale)
            .count() as u64;
        self.cov.downstream_view_checks += checks;
        self.cov.modern_view_checks += gw
            .obs
            .modern
            .values()
            .flat_map(|m| m.lists.iter())
            .filter(|l| l.listed.is_some() && !l.stale)
            .count() as u64;
        let o = &self.sc.options;
        let mut bound = Duration::from_millis(o.call_timeout_ms);
        if o.reset_timeout_on_progress {
            bound = bound.max(Duration::from_millis(o.max_call_time_ms));
        }
        // The lists judged are those of the last pass unless a client's list was replaced
        // since (a list told stale, or a session gone, only drops a comparison) or the view
        // moved: then the judgement is that of the last pass (debug builds judge anyway).
        let key = (gw.memo.as_ref().map(|m| m.gens), gw.lists_set);
        let same = gw.announced == Some(key);
        let announced = if same && !cfg!(debug_assertions) {
            Ok(())
        } else {
            let memo = gw.memo.as_ref().expect("read above");
            let views = std::array::from_fn(|k| &*memo.expected[k]);
            judge::downstream_view_is_announced(&mut gw.obs, views, plain, gens)
        };
        debug_assert!(
            !same || announced.is_ok(),
            "a client's list or the view changed without a generation moving"
        );
        if announced.is_ok() {
            gw.announced = Some(key);
        }
        let verdict = announced
            .map_err(|d| (Invariant::DownstreamViewIsAnnounced, d))
            .and_then(|()| {
                judge::requests_answered_or_forwarded(&gw.obs)
                    .map_err(|d| (Invariant::ForwardedRequestsAnsweredOnce, d))
            })
            .and_then(|()| {
                judge::downstream_requests_bounded(&gw.obs, self.now, bound)
                    .map_err(|d| (Invariant::DownstreamRequestsBounded, d))
            });
        if let Err((inv, d)) = verdict {
            self.fail(inv, d);
        }
    }

    /// After the heal, once the work finished: the serving side is settled too.
    pub(super) fn gateway_settled(&mut self) {
        let Some(gw) = self.gw.as_ref() else { return };
        // The manager's timeout answers what a client never does; the run may end (idle but
        // for health pings) before it fires, as the embedder's own requests may.
        let timeout = self
            .sc
            .options
            .peer
            .as_ref()
            .map_or(Duration::ZERO, |p| Duration::from_millis(p.timeout_ms));
        let within = timeout + Duration::from_millis(1_000);
        if let Err(d) = judge::gateway_settled(&gw.obs, self.now, within) {
            self.fail(Invariant::ForwardedRequestsAnsweredOnce, d);
        }
    }

    /// Drain the gateway's outputs: observe each, then perform it.
    fn gateway_drain(&mut self, cause: Cause) {
        loop {
            let Some(out) = self.gw.as_mut().and_then(|gw| gw.g.poll_output()) else {
                return;
            };
            match out {
                GatewayOutput::Send {
                    session,
                    target,
                    frame,
                } => {
                    let parsed = self.observe_send(session, target, &frame, &cause);
                    self.send_to_client(session, parsed);
                }
                GatewayOutput::Accepted { .. } => {}
                // The HTTP status of a stateless client's exchange: the frames say the rest.
                GatewayOutput::Stateless { .. } => {}
                GatewayOutput::Manager(input) => {
                    self.observe_manager_input(&input, &cause);
                    let now = self.now;
                    self.push(now, Ev::Downstream(DownEv::Manager(Box::new(input))));
                }
                GatewayOutput::Close { session } if self.is_modern_exchange(session) => {
                    self.modern_exchange_closed(session);
                }
                GatewayOutput::Close { session } => {
                    self.cov.downstream_sessions_refused += 1;
                    if let Some(gw) = self.gw.as_mut() {
                        gw.obs.sessions.remove(&session);
                    }
                    self.client_session_closed(session);
                }
            }
        }
    }

    /// A frame for a client, delivered after a little latency, in order.
    fn send_to_client(&mut self, session: SessionId, frame: Option<Box<Written>>) {
        let Some(gw) = self.gw.as_mut() else { return };
        let lat = 1 + gw.rng.below(4);
        let at = self.now + Duration::from_millis(lat);
        let last = gw.to_client_at.entry(session).or_insert(at);
        let at = at.max(*last);
        *last = at;
        self.push(at, Ev::Downstream(DownEv::ToClient { session, frame }));
    }

    /// What a frame the gateway writes tells about the promises; the frame read, for the
    /// client that reads it.
    fn observe_send(
        &mut self,
        session: SessionId,
        target: Target,
        frame: &Bytes,
        cause: &Cause,
    ) -> Option<Box<Written>> {
        if self.trace.is_some() {
            let text = String::from_utf8_lossy(frame).into_owned();
            let text: String = text.chars().take(160).collect();
            self.tr(|t| {
                let _ = writeln!(t, "            ds< s{} {text}", session.0);
            });
        }
        let gw = self.gw.as_mut()?;
        let v = Written::read(frame, &mut gw.results).map(Box::new);
        if let Some(v) = &v {
            self.observe_sent(session, target, v, cause);
        }
        v
    }

    fn observe_sent(&mut self, session: SessionId, target: Target, v: &Written, cause: &Cause) {
        let now = self.now;
        let Some(gw) = self.gw.as_mut() else { return };
        let id = v.id.clone();
        let method = v.method.clone();
        let mut found = Vec::new();
        match (id, method) {
            (Some(id), None) => {
                // An answer.
                let key = super::downstream_wire::id_key(&id);
                let modern_client = gw.obs.exchanges.get(&session).copied();
                let Some(s) = gw.obs.sessions.get_mut(&session) else {
                    found.push(format!(
                        "an answer to session {} that is not open",
                        session.0
                    ));
                    gw.obs.found.extend(
                        found
                            .into_iter()
                            .map(|d| (Invariant::ForwardedRequestsAnsweredOnce, d)),
                    );
                    return;
                };
                if s.cancelled.contains(&key) {
                    let d = format!(
                        "session {}'s request {key} was answered after it cancelled it",
                        session.0
                    );
                    gw.obs
                        .found
                        .push((Invariant::DownstreamCancelReachesUpstream, d));
                    return;
                }
                let Some(r) = s.open.remove(&key) else {
                    found.push(format!(
                        "session {} was answered for request {key} twice, or never asked: {}",
                        session.0,
                        v.shown()
                    ));
                    gw.obs.found.extend(
                        found
                            .into_iter()
                            .map(|d| (Invariant::ForwardedRequestsAnsweredOnce, d)),
                    );
                    return;
                };
                if target
                    != (Target::Exchange {
                        exchange: r.exchange,
                        last: true,
                    })
                {
                    let d = format!(
                        "session {}'s request {key} came on exchange {} and was answered on {target:?}",
                        session.0, r.exchange.0
                    );
                    gw.obs
                        .found
                        .push((Invariant::ForwardedRequestsAnsweredOnce, d));
                }
                // The call's link goes with the request it answers (a stateless client's
                // refused second retry names the call its first retry carries on).
                if let Some(call) = r.call {
                    if gw.obs.calls.get(&call) == Some(&(session, key.clone())) {
                        gw.obs.calls.remove(&call);
                    }
                }
                if let Some(client) = modern_client {
                    self.modern_answered(client, &r, v);
                    return;
                }
                let error = v.error;
                match r.method.as_str() {
                    "tools/call" => {
                        if error {
                            self.cov.downstream_calls_rpc_errors += 1;
                        } else if v.is_error {
                            let text = v.text.as_deref().unwrap_or_default();
                            if text.starts_with("the call to server") {
                                self.cov.downstream_calls_tool_errors += 1;
                            }
                        } else {
                            self.cov.downstream_calls_ok += 1;
                        }
                    }
                    "resources/read" | "prompts/get" | "resources/subscribe" => {
                        self.cov.downstream_operations_answered += 1
                    }
                    m => {
                        if let Some(k) = LIST_METHODS.iter().position(|l| *l == m) {
                            let page = s.lists[k].take_page(v.page(k), r.first_page, false);
                            self.cov.downstream_lists_paged += u64::from(page.paged);
                            if page.completed {
                                gw.lists_set += 1;
                                self.cov.downstream_lists_served += 1;
                            }
                        }
                    }
                }
            }
            (Some(id), Some(method)) => {
                // A server's request, forwarded.
                let Cause::Peer(key) = cause else {
                    let d = format!(
                        "the gateway sent {method} to session {} out of the blue",
                        session.0
                    );
                    gw.obs
                        .found
                        .push((Invariant::ForwardedRequestsAnsweredOnce, d));
                    return;
                };
                let server = match gw.obs.peers.get(key) {
                    Some(PeerObs::Handed { server, .. }) => server.clone(),
                    other => {
                        let d = format!("server request p{} forwarded while {other:?}", key.0);
                        gw.obs
                            .found
                            .push((Invariant::ForwardedRequestsAnsweredOnce, d));
                        return;
                    }
                };
                let Some(s) = gw.obs.sessions.get(&session) else {
                    return;
                };
                let on_call = s.open.values().any(|r| {
                    r.method == "tools/call"
                        && r.server.as_deref() == Some(server.as_str())
                        && target
                            == Target::Exchange {
                                exchange: r.exchange,
                                last: false,
                            }
                });
                let url = v.url;
                let declared = match method.as_str() {
                    "sampling/createMessage" => s.caps.0,
                    _ if url => s.caps.2,
                    _ => s.caps.1,
                };
                if !on_call || !declared {
                    let d = format!(
                        "server request p{} of {server} went to session {} (on a call to it: {on_call}, declared: {declared})",
                        key.0, session.0
                    );
                    gw.obs
                        .found
                        .push((Invariant::ForwardedRequestsAnsweredOnce, d));
                }
                gw.obs.peers.insert(
                    *key,
                    PeerObs::Forwarded {
                        session,
                        id,
                        at: now,
                    },
                );
                self.cov.downstream_peer_forwarded += 1;
            }
            (None, Some(method)) if gw.obs.exchanges.contains_key(&session) => {
                self.modern_notified(session, &method);
            }
            (None, Some(method)) => {
                let lists = announced_lists(&method);
                if let Some(s) = gw.obs.sessions.get_mut(&session) {
                    for &k in lists {
                        let l = &mut s.lists[k];
                        l.stale = true;
                        if let Some((_, stale)) = l.building.as_mut() {
                            *stale = true;
                        }
                    }
                }
                if !lists.is_empty() {
                    self.cov.downstream_list_changed_told += 1;
                }
                match method.as_str() {
                    "notifications/progress" => self.cov.downstream_progress_forwarded += 1,
                    "notifications/message" => self.cov.downstream_logs_forwarded += 1,
                    _ => {}
                }
            }
            (None, None) => {}
        }
    }

    /// What an input the gateway hands the manager tells about the promises, and the
    /// bookkeeping the manager's own invariants need for it.
    fn observe_manager_input(&mut self, input: &Input, cause: &Cause) {
        let Some(gw) = self.gw.as_mut() else { return };
        match input {
            Input::CallTool { call, .. } | Input::Operation { call, .. } => {
                let server = match input {
                    Input::CallTool { tool, .. } => {
                        self.m.resolve_tool(tool).map(|(s, _)| s.to_string())
                    }
                    _ => None,
                };
                // A listen stream's resources are watched upstream by operations of the
                // gateway's own: the stream is not answered by them.
                if let Cause::Frame {
                    session,
                    request: Some((id, method)),
                    ..
                } = cause
                {
                    if method == "subscriptions/listen" {
                        return;
                    }
                    if let Some(r) = gw
                        .obs
                        .sessions
                        .get_mut(session)
                        .and_then(|s| s.open.get_mut(id))
                    {
                        r.call = Some(*call);
                        r.server = server;
                        gw.obs.calls.insert(*call, (*session, id.clone()));
                    }
                }
            }
            // The gateway ends a stateless client's call itself (it needs a capability the
            // client did not declare) and answers it in the same step.
            Input::CancelCall { call } if matches!(cause, Cause::Peer(_)) => {
                gw.obs.calls.remove(call);
                gw.obs.cancelling.insert(*call);
            }
            Input::CancelCall { call } => {
                let linked = gw.obs.calls.remove(call);
                if let Some((session, id)) = linked {
                    if let Some(s) = gw.obs.sessions.get_mut(&session) {
                        if s.open.remove(&id).is_some() {
                            s.cancelled.insert(id);
                        }
                    }
                    match cause {
                        Cause::Closed(_) => self.cov.downstream_closed_with_work += 1,
                        _ => self.cov.downstream_cancels_passed_on += 1,
                    }
                }
                gw.obs.cancelling.insert(*call);
            }
            Input::AnswerPeerRequest { request, .. } => {
                let state = gw.obs.peers.get(request).cloned();
                let ok = match (&state, cause) {
                    (Some(PeerObs::Handed { .. }), Cause::Peer(k)) if k == request => {
                        self.cov.downstream_peer_refused += 1;
                        true
                    }
                    (
                        Some(PeerObs::Forwarded { session, id, .. }),
                        Cause::Frame {
                            session: from,
                            response_id: Some(rid),
                            ..
                        },
                    ) if session == from && id == rid => {
                        self.cov.downstream_peer_answered += 1;
                        true
                    }
                    (Some(PeerObs::Forwarded { session, .. }), Cause::Closed(s))
                        if session == s =>
                    {
                        self.cov.downstream_peer_refused += 1;
                        true
                    }
                    (
                        Some(PeerObs::Handed { server, .. }),
                        Cause::Frame {
                            session,
                            request: Some((id, _)),
                            ..
                        },
                    ) => {
                        let peer = *request;
                        if let Err(d) =
                            judge::retry_may_answer(&mut gw.obs, *session, id, peer, server)
                        {
                            gw.obs.found.push((Invariant::InputRoundsHonoured, d));
                        }
                        self.cov.modern_inputs_answered += 1;
                        true
                    }
                    _ => false,
                };
                if !ok {
                    let d = format!(
                        "the gateway answered server request p{} while it was {state:?} (cause {cause:?})",
                        request.0
                    );
                    gw.obs
                        .found
                        .push((Invariant::ForwardedRequestsAnsweredOnce, d));
                }
                gw.obs.peers.insert(*request, PeerObs::Done);
            }
            _ => {}
        }
    }

    /// The gateway's input reaches the manager.
    pub(super) fn gateway_manager_input(&mut self, input: Input) {
        use crate::observe::{CallObs, CallTiming};
        let mut scope = None;
        match &input {
            Input::CallTool {
                call,
                tool,
                progress,
                ..
            } => {
                let server = self
                    .m
                    .resolve_tool(tool)
                    .and_then(|(s, _)| self.obs.index.get(s).copied());
                let deferred = self
                    .view
                    .tools
                    .iter()
                    .any(|t| t.qualified == *tool && t.deferred);
                self.cov.downstream_deferred_calls += u64::from(deferred);
                let timeout = Duration::from_millis(self.sc.options.call_timeout_ms);
                self.obs.calls.insert(
                    *call,
                    CallObs {
                        server,
                        deferred,
                        withdrawn_target: false,
                        progress: *progress,
                        timing: Some(CallTiming {
                            started: self.now,
                            timeout,
                            deadline: self.now + timeout,
                            extended: false,
                        }),
                    },
                );
                scope = server;
            }
            Input::Operation { call, .. } => {
                self.obs.ops.insert(*call, ());
            }
            Input::CancelCall { call } => {
                if let Some(gw) = self.gw.as_mut() {
                    if gw.obs.cancelling.remove(call) {
                        gw.cancelled_now.push(*call);
                    }
                }
            }
            _ => {}
        }
        self.input(input, |s| s.scope = scope);
    }
}

/// The manager's view, as the serving shell hands it to the gateway.
fn current_view(m: &Manager) -> View {
    View {
        tools: Arc::new(m.tools()),
        resources: Arc::new(m.resources()),
        templates: Arc::new(m.resource_templates()),
        prompts: Arc::new(m.prompts()),
    }
}

/// The core's view of each list kind, as [`judge::downstream_view_is_announced`] reads it.
fn expected_views(v: &View) -> [judge::Expected; 4] {
    let [_, r, t, p] = expected_catalog(v);
    [expected_tools(v), r, t, p]
}

fn expected_tools(v: &View) -> judge::Expected {
    v.tools
        .iter()
        .map(|t| (t.qualified_name.clone(), Some(t.def.name.clone())))
        .collect()
}

/// The catalog's three kinds (the first is left empty).
fn expected_catalog(v: &View) -> [judge::Expected; 4] {
    [
        Vec::new(),
        v.resources
            .iter()
            .map(|r| (r.def.uri.clone(), None))
            .collect(),
        v.templates
            .iter()
            .map(|t| (t.def.uri_template.clone(), None))
            .collect(),
        v.prompts
            .iter()
            .map(|p| (p.qualified_name.clone(), Some(p.def.name.clone())))
            .collect(),
    ]
}

/// A session the gateway opened, as the judge records it.
pub(super) fn session_obs(caps: (bool, bool, bool)) -> SessionObs {
    SessionObs {
        caps,
        ..SessionObs::default()
    }
}

/// A request the gateway received, as the judge records it.
pub(super) fn open_request(
    exchange: ExchangeId,
    method: &str,
    at: Instant,
    first_page: bool,
) -> OpenRequest {
    OpenRequest {
        exchange,
        method: method.to_string(),
        at,
        call: None,
        server: None,
        first_page,
        state: None,
    }
}
