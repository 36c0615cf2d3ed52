//! Simulated downstream clients of `switchboard serve`: each opens a session (a stdio-like
//! stream, or an HTTP-like session where every message is its own exchange and anything
//! before `initialize` ends it), initializes, lists tools, resources, templates and prompts
//! (page by page), lists again when told `list_changed`, calls tools it listed (or names it
//! never saw), reads, gets prompts, subscribes, pings, cancels its requests and closes its
//! session to open a new one — while the upstream servers start, crash, recover and change
//! their lists. It answers the servers' requests the gateway forwards (promptly, with an
//! error, never, or twice) only for what it declared; anything else is a violation.
//!
//! These are the legacy era's clients (`DownstreamEra::Legacy`); the stateless era's are in
//! [`super::downstream_modern`], sharing the world's plumbing here.

use super::downstream_wire::{self as wire, Caps, Info, Params, Sent, Written};
use super::gateway::{open_request, session_obs, Cause, DownEv};
use super::{Ev, World};
use crate::invariants::gateway::{announced_lists, LIST_METHODS};
use crate::scenario::{DownstreamEra, DownstreamKind};
use crate::verdict::Invariant;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;
use switchboard_core::gateway::{
    ExchangeId, GatewayInput, RequestHeaders, SessionId, DOWNSTREAM_VERSIONS,
};
use switchboard_core::protocol::form_defaults;

/// What one of a client's requests was.
#[derive(Debug, Clone, PartialEq)]
enum Waiting {
    Initialize,
    List(usize),
    Subscribe(String),
    Unsubscribe(String),
    Call,
    Other,
}

/// One list as the client holds it.
#[derive(Debug, Clone, Default)]
pub(super) struct ClientList {
    pub(super) items: Vec<String>,
    pub(super) so_far: Vec<String>,
    pub(super) listing: bool,
    /// Told `list_changed` while listing: list again when done.
    pub(super) again: bool,
}

/// A simulated downstream client.
#[derive(Debug, Clone)]
pub(super) struct Client {
    session: Option<SessionId>,
    /// The one exchange of a stdio-like session.
    stream: ExchangeId,
    strict: bool,
    pub(super) initialized: bool,
    pub(super) next_id: u64,
    waiting: BTreeMap<u64, Waiting>,
    pub(super) lists: [ClientList; 4],
    subscribed: BTreeSet<String>,
    /// A stateless client's exchanges, stream and put-off work.
    pub(super) m: super::downstream_modern::ModernClient,
}

impl Client {
    pub(super) fn new() -> Self {
        Client {
            session: None,
            stream: ExchangeId(0),
            strict: false,
            initialized: false,
            next_id: 0,
            waiting: BTreeMap::new(),
            lists: Default::default(),
            subscribed: BTreeSet::new(),
            m: Default::default(),
        }
    }
}

impl World<'_> {
    /// One event of the serving side.
    pub(super) fn downstream(&mut self, ev: DownEv) {
        match ev {
            DownEv::Open(i) => self.client_open(i),
            DownEv::Action(k) => self.client_action(k),
            DownEv::ToGateway {
                session,
                exchange,
                frame,
                message,
                headers,
            } => self.frame_to_gateway(session, exchange, frame, &message, headers.map(|h| *h)),
            DownEv::Later { client, token } => self.modern_later(client, token),
            DownEv::ToClient {
                session,
                frame: Some(w),
            } => self.frame_to_client(session, &w),
            DownEv::ToClient { frame: None, .. } => {}
            DownEv::Manager(input) => self.gateway_manager_input(*input),
        }
    }

    fn client_open(&mut self, i: usize) {
        let Some(gw) = self.gw.as_mut() else { return };
        if gw.plan.clients[i].era == DownstreamEra::Stateless {
            return self.modern_open(i);
        }
        if gw.clients[i].session.is_some() {
            return;
        }
        let plan = gw.plan.clients[i].clone();
        gw.next_session += 1;
        let session = SessionId(gw.next_session);
        let stream = gw.exchange();
        let c = &mut gw.clients[i];
        *c = Client::new();
        c.session = Some(session);
        c.stream = stream;
        c.strict = plan.strict;
        gw.obs
            .sessions
            .insert(session, session_obs((plan.sampling, plan.form, plan.url)));
        // An HTTP-like client now and then speaks before initializing: its session ends.
        let rude = plan.strict && !self.healed && gw.rng.below(8) == 0;
        self.tr(|t| {
            let _ = writeln!(t, "            ds: client {i} opens s{}", session.0);
        });
        self.gateway_input(
            GatewayInput::Opened {
                session,
                strict: plan.strict,
            },
            Cause::Other,
        );
        if rude {
            self.client_request(i, "tools/list", Params::default(), Waiting::Other);
            return;
        }
        let version = match plan.era {
            DownstreamEra::Legacy | DownstreamEra::Stateless => {
                let k = self.gw.as_mut().map_or(0, |gw| gw.rng.below(4)) as usize;
                DOWNSTREAM_VERSIONS[k % DOWNSTREAM_VERSIONS.len()]
            }
        };
        let params = Params {
            capabilities: Some(Caps::new(plan.sampling, false, plan.form, plan.url)),
            client_info: Some(Info {
                name: format!("sim-client-{i}"),
                version: "1",
            }),
            protocol_version: Some(version),
            ..Params::default()
        };
        self.client_request(i, "initialize", params, Waiting::Initialize);
    }

    /// The client sends a request.
    fn client_request(&mut self, i: usize, method: &str, params: Params, what: Waiting) -> u64 {
        let Some(gw) = self.gw.as_mut() else { return 0 };
        let c = &mut gw.clients[i];
        c.next_id += 1;
        let id = c.next_id;
        c.waiting.insert(id, what);
        let (frame, sent) = wire::request(id, method, &params);
        self.client_send(i, frame, sent);
        id
    }

    /// The client writes one message (a new exchange when its session is HTTP-like).
    fn client_send(&mut self, i: usize, frame: Bytes, sent: Sent) {
        let Some(gw) = self.gw.as_mut() else { return };
        let Some(session) = gw.clients[i].session else {
            return;
        };
        let exchange = if gw.clients[i].strict {
            gw.exchange()
        } else {
            gw.clients[i].stream
        };
        let lat = 1 + gw.rng.below(4);
        let at = self.now + Duration::from_millis(lat);
        let last = gw.to_gateway_at.entry(session).or_insert(at);
        let at = at.max(*last);
        *last = at;
        self.push(
            at,
            Ev::Downstream(DownEv::ToGateway {
                session,
                exchange,
                frame,
                message: Box::new(sent),
                headers: None,
            }),
        );
    }

    fn frame_to_gateway(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        frame: Bytes,
        v: &Sent,
        headers: Option<RequestHeaders>,
    ) {
        let now = self.now;
        let Some(gw) = self.gw.as_mut() else { return };
        if !gw.obs.sessions.contains_key(&session) {
            return; // The gateway ended the session while this was under way.
        }
        let method = v.method.as_deref();
        let id = v.id.clone();
        let cause = match (&id, method) {
            (Some(id), Some(method)) => {
                let key = wire::id_key(id);
                let first_page = !v.cursor;
                let mut r = open_request(exchange, method, now, first_page);
                // A retry continues the call whose round its state names (if it is one the
                // gateway issued).
                if let Some(state) = v.request_state.as_deref() {
                    if let Some(issued) = gw.obs.states.get(state) {
                        r.call = Some(issued.call);
                        r.server = issued.server.clone();
                    }
                    r.state = Some(state.to_string());
                }
                if let Some(s) = gw.obs.sessions.get_mut(&session) {
                    s.open.insert(key.clone(), r);
                }
                Cause::Frame {
                    session,
                    request: Some((key, method.to_string())),
                    response_id: None,
                }
            }
            (Some(id), None) => Cause::Frame {
                session,
                request: None,
                response_id: Some(id.clone()),
            },
            _ => Cause::Frame {
                session,
                request: None,
                response_id: None,
            },
        };
        if self.trace.is_some() {
            let text: String = String::from_utf8_lossy(&frame).chars().take(160).collect();
            self.tr(|t| {
                let _ = writeln!(t, "[{:>6}ms] ds> s{} {text}", now.as_millis(), session.0);
            });
        }
        let retry = match &cause {
            Cause::Frame {
                request: Some((id, _)),
                ..
            } if v.request_state.is_some() => Some(id.clone()),
            _ => None,
        };
        let input = match headers {
            Some(headers) => GatewayInput::HttpFrame {
                session,
                exchange,
                frame,
                headers,
            },
            None => GatewayInput::Frame {
                session,
                exchange,
                frame,
            },
        };
        self.gateway_input(input, cause);
        if let Some(id) = retry {
            self.modern_retry_taken(session, id);
        }
    }

    fn client_of(&self, session: SessionId) -> Option<usize> {
        let gw = self.gw.as_ref()?;
        gw.clients.iter().position(|c| c.session == Some(session))
    }

    fn frame_to_client(&mut self, session: SessionId, v: &Written) {
        if let Some(i) = self.modern_client_of(session) {
            self.modern_frame(i, session, v);
            return;
        }
        let Some(i) = self.client_of(session) else {
            return;
        };
        match (&v.id, &v.method) {
            (Some(id), None) => self.client_response(i, id, v),
            (Some(id), Some(method)) => self.client_asked(i, id.clone(), method, v),
            (None, Some(method)) => {
                for &k in announced_lists(method) {
                    self.client_list(i, k, true);
                }
            }
            (None, None) => {}
        }
    }

    /// Start (or, while one is under way, ask for another) listing of kind `k`.
    fn client_list(&mut self, i: usize, k: usize, told: bool) {
        let Some(gw) = self.gw.as_mut() else { return };
        let l = &mut gw.clients[i].lists[k];
        if l.listing {
            l.again |= told;
            return;
        }
        l.listing = true;
        l.again = false;
        l.so_far.clear();
        self.client_request(i, LIST_METHODS[k], Params::default(), Waiting::List(k));
    }

    fn client_response(&mut self, i: usize, id: &Value, v: &Written) {
        let Some(gw) = self.gw.as_mut() else { return };
        let Some(what) = id.as_u64().and_then(|n| gw.clients[i].waiting.remove(&n)) else {
            return;
        };
        let error = v.error;
        match what {
            Waiting::Initialize => {
                if error {
                    return;
                }
                gw.clients[i].initialized = true;
                self.cov.downstream_sessions_opened += 1;
                let level = gw.plan.clients[i].log_level.clone();
                let (frame, sent) = wire::notification("notifications/initialized", None);
                self.client_send(i, frame, sent);
                for k in 0..4 {
                    self.client_list(i, k, false);
                }
                if let Some(level) = level {
                    let params = Params {
                        level: Some(level),
                        ..Params::default()
                    };
                    self.client_request(i, "logging/setLevel", params, Waiting::Other);
                }
            }
            Waiting::List(k) => {
                let l = &mut gw.clients[i].lists[k];
                if error {
                    l.listing = false;
                    if std::mem::take(&mut l.again) {
                        self.client_list(i, k, false);
                    }
                    return;
                }
                if let Some(items) = &v.items[k] {
                    l.so_far.extend(items.iter().flatten().cloned());
                }
                match &v.cursor {
                    Some(cursor) => {
                        let params = Params::cursor(Some(cursor.clone()));
                        self.client_request(i, LIST_METHODS[k], params, Waiting::List(k));
                    }
                    None => {
                        l.items = std::mem::take(&mut l.so_far);
                        l.listing = false;
                        if std::mem::take(&mut l.again) {
                            self.client_list(i, k, false);
                        }
                    }
                }
            }
            Waiting::Subscribe(uri) => {
                if !error {
                    gw.clients[i].subscribed.insert(uri);
                }
            }
            Waiting::Unsubscribe(uri) => {
                gw.clients[i].subscribed.remove(&uri);
            }
            Waiting::Call | Waiting::Other => {
                if v.code == Some(-32000) {
                    self.cov.downstream_too_many += 1;
                }
            }
        }
    }

    /// The gateway forwarded a server's request: answer it as the plan's weights draw.
    fn client_asked(&mut self, i: usize, id: Value, method: &str, v: &Written) {
        let Some(gw) = self.gw.as_mut() else { return };
        let plan = gw.plan.clients[i].clone();
        let url = v.url;
        let declared = match method {
            "sampling/createMessage" => plan.sampling,
            "elicitation/create" if url => plan.url,
            "elicitation/create" => plan.form,
            _ => false,
        };
        if !declared {
            let d = format!("client {i} was asked {method} (url: {url}), which it never declared");
            self.fail(Invariant::ForwardedRequestsAnsweredOnce, d);
            return;
        }
        let good = match method {
            "sampling/createMessage" => {
                json!({"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "sim"})
            }
            _ if url => json!({"action": "accept"}),
            _ => {
                json!({"action": "accept", "content": form_defaults(&v.requested_schema)})
            }
        };
        let total: u64 = plan
            .answers
            .iter()
            .map(|&w| u64::from(w))
            .sum::<u64>()
            .max(1);
        let mut pick = gw.rng.below(total);
        let mut choice = 0;
        for (k, &w) in plan.answers.iter().enumerate() {
            if pick < u64::from(w) {
                choice = k;
                break;
            }
            pick -= u64::from(w);
        }
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": good});
        let send = |w: &mut Self, v: &Value| {
            let (frame, sent) = wire::message(v);
            w.client_send(i, frame, sent);
        };
        match choice {
            0 => send(self, &answer),
            1 => send(
                self,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "the client failed"}}),
            ),
            2 => {}
            _ => {
                send(self, &answer);
                send(self, &answer);
            }
        }
    }

    fn client_action(&mut self, k: usize) {
        let Some(gw) = self.gw.as_mut() else { return };
        let a = gw.plan.actions[k].clone();
        let i = a.client % gw.clients.len();
        if gw.plan.clients[i].era == DownstreamEra::Stateless {
            return self.modern_action(i, a.kind);
        }
        let c = &gw.clients[i];
        if c.session.is_none() || !c.initialized {
            return;
        }
        match a.kind {
            DownstreamKind::Call {
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
                let id = c.next_id + 1;
                let token = progress.then(|| format!("pt-{i}-{id}"));
                self.client_request(
                    i,
                    "tools/call",
                    Params::call(name, id, token),
                    Waiting::Call,
                );
            }
            DownstreamKind::Cancel(pick) => {
                let ids: Vec<u64> = c
                    .waiting
                    .iter()
                    .filter(|(_, w)| **w == Waiting::Call || matches!(w, Waiting::Other))
                    .map(|(id, _)| *id)
                    .collect();
                if ids.is_empty() {
                    return;
                }
                let id = ids[pick % ids.len()];
                gw.clients[i].waiting.remove(&id);
                let params = Params {
                    reason: Some("the user moved on"),
                    request_id: Some(id),
                    ..Params::default()
                };
                let (frame, sent) = wire::notification("notifications/cancelled", Some(&params));
                self.client_send(i, frame, sent);
            }
            DownstreamKind::Read(pick) => {
                let uris = &c.lists[1].items;
                let uri = if uris.is_empty() {
                    format!("sim://nowhere/{pick}")
                } else {
                    uris[pick % uris.len()].clone()
                };
                self.client_request(i, "resources/read", Params::uri(uri), Waiting::Other);
            }
            DownstreamKind::Prompt(pick) => {
                let names = &c.lists[3].items;
                if names.is_empty() {
                    return;
                }
                let name = names[pick % names.len()].clone();
                self.client_request(i, "prompts/get", Params::prompt(name), Waiting::Other);
            }
            DownstreamKind::Subscribe(pick) => {
                let uris = &c.lists[1].items;
                if uris.is_empty() {
                    return;
                }
                let uri = uris[pick % uris.len()].clone();
                if c.subscribed.contains(&uri) {
                    self.client_request(
                        i,
                        "resources/unsubscribe",
                        Params::uri(uri.clone()),
                        Waiting::Unsubscribe(uri),
                    );
                } else {
                    self.client_request(
                        i,
                        "resources/subscribe",
                        Params::uri(uri.clone()),
                        Waiting::Subscribe(uri),
                    );
                }
            }
            DownstreamKind::Ping => {
                self.client_request(i, "ping", Params::default(), Waiting::Other);
            }
            DownstreamKind::Close => {
                let Some(session) = c.session else { return };
                self.client_closes(i, session);
            }
        }
    }

    /// The client ends its session; it opens a new one a little later.
    fn client_closes(&mut self, i: usize, session: SessionId) {
        self.tr(|t| {
            let _ = writeln!(t, "            ds: client {i} closes s{}", session.0);
        });
        self.gateway_input(GatewayInput::Closed { session }, Cause::Closed(session));
        let Some(gw) = self.gw.as_mut() else { return };
        if let Some(s) = gw.obs.sessions.remove(&session) {
            if let Some((id, r)) = s.open.iter().find(|(_, r)| r.call.is_some()) {
                let d = format!(
                    "session {} ended with its {} (id {id}) in flight, and the gateway did not cancel it",
                    session.0, r.method
                );
                self.fail(Invariant::DownstreamCancelReachesUpstream, d);
            }
        }
        self.client_session_closed(session);
    }

    /// The client's session is gone (it closed it, or the gateway did): open a new one soon.
    pub(super) fn client_session_closed(&mut self, session: SessionId) {
        let Some(i) = self.client_of(session) else {
            return;
        };
        let Some(gw) = self.gw.as_mut() else { return };
        gw.clients[i].session = None;
        let wait = 100 + gw.rng.below(400);
        let at = self.after_ms(wait);
        self.push(at, Ev::Downstream(DownEv::Open(i)));
    }
}
