//! The gateway: the serving side of `switchboard serve`, a second sans-IO machine beside the
//! [`Manager`](crate::manager::Manager).
//!
//! Downstream MCP clients talk to it in sessions; it answers from the manager's view (tools,
//! resources, templates, prompts) at once, turns the requests that need a server (`tools/call`,
//! `resources/read`, `prompts/get`, `completion/complete`, `resources/subscribe`) into manager
//! [`Input`]s, and turns the manager's completions and notifications back into downstream
//! frames. It never touches the manager itself: the driver feeds it the manager's events and a
//! fresh [`View`] whenever the view may have changed, and performs its outputs, so the same
//! machine runs behind stdio, behind HTTP and in the simulator.
//!
//! ```text
//! let mut g = Gateway::new(options);
//! g.handle(GatewayInput::Opened { session, .. });   // any input
//! while let Some(out) = g.poll_output() { … }        // drain after EVERY handle
//! ```
//!
//! Promises, each checked by the tests beside this module:
//! - every downstream request is answered exactly once, unless the client cancelled it;
//! - every request it hands the manager is a call or operation with a fresh [`CallId`] of its
//!   own range (`GatewayOptions::first_call` onwards), and a cancelled or abandoned one is
//!   cancelled in the manager (`CancelCall`);
//! - a session's list equals the view the gateway last announced to it: a changed view is
//!   stored and its `list_changed` notifications emitted in the same step;
//! - every server request handed to it (`Event::PeerRequest`) is answered exactly once
//!   (`Input::AnswerPeerRequest`) unless the manager withdraws it: forwarded to the
//!   downstream client with a call in flight to that server that declared the capability,
//!   else refused with an error saying why.
//!
//! The gateway holds no clock: deadlines are the manager's (a call's timeout bounds a call to
//! a deferred tool too).

pub mod modern;
#[cfg(test)]
mod modern_tests;
mod mrtr;
mod peer;
mod requests;
pub mod roots;
mod seal;
pub mod search;
mod served;
mod templates;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_inputs;
#[cfg(test)]
mod tests_pages;
#[cfg(test)]
mod tests_roots;
#[cfg(test)]
mod tests_unavailable;
#[cfg(test)]
mod tests_wire;
mod unavailable;
pub mod wire;

pub use unavailable::{Unavailable, UnavailableServers};

use crate::catalog::{LogLevel, Prompt, Resource, ResourceTemplate};
use crate::manager::{CallId, Event, Input};
use crate::tool::Tool;
use bytes::Bytes;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

pub use modern::{supported_versions, ExchangeStatus, RequestHeaders};

/// One downstream session: the stdio client, or one `Mcp-Session-Id` over HTTP. Numbered by
/// the shell, never reused while open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct SessionId(pub u64);

/// One exchange a frame came on: an HTTP POST (whose response stream carries the answers to
/// the requests it held), or the single stdio stream. Numbered by the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct ExchangeId(pub u64);

/// What the gateway is told at start.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayOptions {
    /// `serverInfo.name` in the `initialize` answer.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// `instructions` in the `initialize` answer, if any.
    pub instructions: Option<String>,
    /// The first [`CallId`] the gateway gives its calls and operations; the ids after it are
    /// its own, so an embedder sharing the manager keeps the ids below.
    pub first_call: u64,
    /// Most sessions open at once; one more is closed at once.
    pub max_sessions: usize,
    /// Most requests of one session waiting for a server; one more is refused.
    pub max_in_flight: usize,
    /// Most resource subscriptions of one session.
    pub max_subscriptions: usize,
    /// Items per page of `tools/list`, `resources/list`, `resources/templates/list`,
    /// `prompts/list`.
    pub page_size: usize,
    /// Serve each tool and prompt under its own name where no other one has it (else under
    /// its qualified name); a request may use either.
    pub plain_names: bool,
    /// Serve two tools instead of the view: one searches it (by name and description,
    /// ranked), one calls a tool found there.
    pub tool_search: bool,
    /// The roots the manager was configured with: they apply while no downstream client
    /// that declared `roots` has given its own (see `roots`).
    pub roots: Vec<crate::protocol::Root>,
    /// The key the `requestState` of multi round-trip requests is sealed with (clients of
    /// the stateless revision). Without one, a server's request for input in the middle of
    /// such a client's call is refused. Gateways that share a key accept each other's state.
    pub request_state_key: Option<StateKey>,
    /// This gateway's number among those sharing its key (the shell picks it at random): a
    /// state it issued is continued here, one of another's runs its call again.
    pub instance: u64,
}

/// A secret key of 32 bytes; its `Debug` never shows it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StateKey(pub [u8; 32]);

impl StateKey {
    /// The key for a secret shared by gateways (SHA-256 of its bytes).
    pub fn from_secret(secret: &[u8]) -> StateKey {
        StateKey(seal::derive_key(secret))
    }
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(<redacted>)")
    }
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            name: "switchboard".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            first_call: 1 << 48,
            max_sessions: 64,
            max_in_flight: 256,
            max_subscriptions: 1024,
            page_size: 1000,
            plain_names: false,
            tool_search: false,
            roots: Vec::new(),
            request_state_key: None,
            instance: 0,
        }
    }
}

/// The manager's view as the gateway serves it (the manager's getters `tools`, `resources`,
/// `resource_templates`, `prompts`; the library's snapshot hands the same `Arc`s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct View {
    /// The tool view.
    pub tools: Arc<Vec<Tool>>,
    /// Every resource.
    pub resources: Arc<Vec<Resource>>,
    /// Every resource template.
    pub templates: Arc<Vec<ResourceTemplate>>,
    /// Every prompt.
    pub prompts: Arc<Vec<Prompt>>,
}

/// What the gateway is fed.
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayInput {
    /// A downstream session opened. `strict`: its first message must be `initialize` (HTTP,
    /// where a message without a session creates one); stdio is lenient.
    Opened {
        /// The shell's number for it.
        session: SessionId,
        /// Refuse anything before `initialize`.
        strict: bool,
    },
    /// One frame of a downstream session, on `exchange`.
    Frame {
        /// The session.
        session: SessionId,
        /// The exchange it came on.
        exchange: ExchangeId,
        /// One JSON-RPC message.
        frame: Bytes,
    },
    /// The session ended (stdin closed, `DELETE`, the shell dropped it): its requests in
    /// flight are cancelled and its subscriptions dropped.
    Closed {
        /// The session.
        session: SessionId,
    },
    /// The manager's view, after anything that may have changed it (and once at start).
    View(View),
    /// The configured servers that serve nothing now, and why (awaiting approval, failed,
    /// needing a login): a call that needs one is answered naming the reason and the fix.
    /// Replaces what was told before.
    Unavailable(UnavailableServers),
    /// One frame that came over HTTP, with the request headers the stateless revision
    /// checks. A POST without a session id comes on a session the shell opened for it:
    /// a request of the stateless revision keeps it for that exchange alone.
    HttpFrame {
        /// The session.
        session: SessionId,
        /// The exchange it came on.
        exchange: ExchangeId,
        /// One JSON-RPC message.
        frame: Bytes,
        /// Its headers.
        headers: RequestHeaders,
    },
}

/// Where a downstream frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Target {
    /// On the exchange a request came on: its progress (`last: false`) or its answer
    /// (`last: true`: the exchange has nothing more once every request it held is answered).
    Exchange {
        /// The exchange.
        exchange: ExchangeId,
        /// This is the answer to one of its requests.
        last: bool,
    },
    /// Anywhere the session listens (the stdio stream; over HTTP, its GET stream).
    Session,
}

/// What the gateway asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayOutput {
    /// Write `frame` to the session.
    Send {
        /// The session.
        session: SessionId,
        /// Where in it.
        target: Target,
        /// One JSON-RPC message.
        frame: Bytes,
    },
    /// The exchange held no request: nothing will be sent on it (HTTP: `202 Accepted`).
    Accepted {
        /// The session.
        session: SessionId,
        /// The exchange.
        exchange: ExchangeId,
    },
    /// Hand this to the manager (a `CallTool`, `Operation` or `CancelCall`).
    Manager(Input),
    /// End the session (too many sessions; an HTTP session that did not start with
    /// `initialize`). Its requests are already cancelled.
    Close {
        /// The session.
        session: SessionId,
    },
    /// The exchange carries a request of the stateless revision on a session opened for it
    /// alone: answer it without a session id, with this status. Comes before its first
    /// frame; the session is closed once it is answered (a listen stream: when it ends).
    Stateless {
        /// The session.
        session: SessionId,
        /// The exchange.
        exchange: ExchangeId,
        /// Its HTTP status.
        status: ExchangeStatus,
    },
}

/// A downstream request waiting for the manager.
#[derive(Debug, Clone, PartialEq)]
struct Pending {
    session: SessionId,
    exchange: ExchangeId,
    id: Value,
    /// The client's progress token, when it asked for progress.
    progress: Option<Value>,
    kind: PendingKind,
}

#[derive(Debug, Clone, PartialEq)]
enum PendingKind {
    /// A tool call, to this server (when the view named one).
    Tool {
        server: Option<String>,
    },
    Operation,
    /// A subscription: on success the session holds `uri`.
    Subscribe {
        uri: String,
    },
}

/// One downstream session.
#[derive(Debug, Clone, PartialEq)]
struct Session {
    strict: bool,
    /// `initialize` was answered.
    initialized: bool,
    /// The protocol version agreed.
    version: Option<String>,
    /// The level at or above which server logs are forwarded (none until `logging/setLevel`).
    log_level: Option<LogLevel>,
    /// Its requests in the manager, by their downstream id's text.
    in_flight: BTreeMap<String, CallId>,
    subscriptions: BTreeSet<String>,
    /// What it can answer of the servers' requests.
    caps: peer::ClientCaps,
    /// It declared the `roots` capability.
    roots_capable: bool,
    /// The id of the gateway's `roots/list` it has not answered yet.
    roots_asked: Option<Value>,
    /// The roots it gave last.
    roots: Option<Vec<crate::protocol::Root>>,
}

/// Counts of what the gateway did, for tests and the simulator's coverage.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GatewayCounters {
    /// Requests answered.
    pub answered: u64,
    /// Calls and operations handed to the manager.
    pub forwarded: u64,
    /// Downstream cancellations passed on.
    pub cancelled: u64,
    /// `list_changed` notifications sent (all kinds, all sessions).
    pub list_changed: u64,
    /// Malformed frames answered with an error.
    pub malformed: u64,
    /// Servers' requests forwarded to a downstream client.
    pub peer_forwarded: u64,
    /// Forwarded requests the client answered.
    pub peer_answered: u64,
    /// Servers' requests answered with an error (nobody to ask, or the client left).
    pub peer_refused: u64,
    /// Retries of stateless clients whose call was not here, run again.
    pub replayed: u64,
    /// Servers' roots inputs answered from the roots the gateway keeps (no stateless
    /// client's request that declared `roots` asked for them).
    pub roots_answered: u64,
}

/// The serving side's state machine. See the module documentation for the contract.
#[derive(Debug)]
pub struct Gateway {
    options: GatewayOptions,
    view: View,
    /// The names the view is served under.
    names: served::ServedNames,
    /// The list pages served from this view and these names, as JSON text, by list kind and
    /// first item; emptied whenever either changes.
    pages: BTreeMap<(u8, usize), Box<serde_json::value::RawValue>>,
    sessions: BTreeMap<SessionId, Session>,
    pending: BTreeMap<CallId, Pending>,
    next_call: u64,
    /// Servers' requests forwarded downstream, waiting for the client.
    peers: BTreeMap<crate::manager::PeerRequestKey, peer::Forwarded>,
    /// The number of the last id given to a forwarded request.
    next_peer: u64,
    outputs: VecDeque<GatewayOutput>,
    counters: GatewayCounters,
    /// What the shell last said of the servers that serve nothing.
    unavailable: UnavailableServers,
    /// The roots last handed to the manager (`None`: the configured ones, untouched).
    roots_applied: Option<Vec<crate::protocol::Root>>,
    /// What the stateless revision's side keeps.
    modern: modern::ModernState,
}

/// The protocol versions the gateway speaks downstream, newest first.
pub const DOWNSTREAM_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

impl Gateway {
    /// A gateway with an empty view and no session.
    pub fn new(options: GatewayOptions) -> Self {
        let mut g = Gateway {
            next_call: options.first_call,
            options,
            view: View::default(),
            names: served::ServedNames::default(),
            pages: BTreeMap::new(),
            sessions: BTreeMap::new(),
            pending: BTreeMap::new(),
            peers: BTreeMap::new(),
            next_peer: 0,
            outputs: VecDeque::new(),
            counters: GatewayCounters::default(),
            unavailable: UnavailableServers::new(),
            roots_applied: None,
            modern: modern::ModernState::default(),
        };
        g.set_unavailable(UnavailableServers::new());
        g
    }

    /// The next output, in order; drain to `None` after every [`Gateway::handle`].
    #[must_use]
    pub fn poll_output(&mut self) -> Option<GatewayOutput> {
        self.outputs.pop_front()
    }

    /// The view the sessions were last told about.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// The open sessions.
    pub fn sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.sessions.keys().copied()
    }

    /// Whether `session` has been initialized.
    pub fn is_initialized(&self, session: SessionId) -> bool {
        self.sessions.get(&session).is_some_and(|s| s.initialized)
    }

    /// The protocol version agreed with `session`, once initialized.
    pub fn version(&self, session: SessionId) -> Option<&str> {
        self.sessions.get(&session)?.version.as_deref()
    }

    /// Calls and operations of the gateway's in the manager.
    pub fn in_flight(&self) -> impl Iterator<Item = CallId> + '_ {
        self.pending.keys().copied()
    }

    /// What the gateway did so far.
    pub fn counters(&self) -> &GatewayCounters {
        &self.counters
    }

    /// Whether `call` is one of the gateway's ids.
    pub fn owns(&self, call: CallId) -> bool {
        call.0 >= self.options.first_call
    }

    /// Feed one input.
    pub fn handle(&mut self, input: GatewayInput) {
        match input {
            GatewayInput::Opened { session, strict } => self.open(session, strict),
            GatewayInput::Frame {
                session,
                exchange,
                frame,
            } => self.any_frame(session, exchange, &frame, None),
            GatewayInput::HttpFrame {
                session,
                exchange,
                frame,
                headers,
            } => self.any_frame(session, exchange, &frame, Some(&headers)),
            GatewayInput::Closed { session } => self.close(session, false),
            GatewayInput::View(view) => self.set_view(view),
            GatewayInput::Unavailable(servers) => self.set_unavailable(servers),
        }
    }

    /// Feed one of the manager's events: those about the gateway's own calls and operations,
    /// progress, server logs, resource updates and servers' requests for the client (which
    /// it forwards, see `peer`) act; the others are ignored (view changes arrive as
    /// [`GatewayInput::View`]).
    pub fn handle_event(&mut self, event: &Event) {
        self.event(event);
    }

    fn open(&mut self, session: SessionId, strict: bool) {
        if self.sessions.contains_key(&session) {
            return;
        }
        if self.sessions.len() >= self.options.max_sessions {
            self.outputs.push_back(GatewayOutput::Close { session });
            return;
        }
        self.sessions.insert(
            session,
            Session {
                strict,
                initialized: false,
                version: None,
                log_level: None,
                in_flight: BTreeMap::new(),
                subscriptions: BTreeSet::new(),
                caps: peer::ClientCaps::default(),
                roots_capable: false,
                roots_asked: None,
                roots: None,
            },
        );
    }

    /// Drop a session: cancel what it waits for, release its subscriptions; `tell` also asks
    /// the shell to close it.
    fn close(&mut self, session: SessionId, tell: bool) {
        let Some(s) = self.sessions.remove(&session) else {
            return;
        };
        for call in s.in_flight.into_values() {
            if self.pending.remove(&call).is_some() {
                self.counters.cancelled += 1;
                self.outputs
                    .push_back(GatewayOutput::Manager(Input::CancelCall { call }));
            }
        }
        for uri in s.subscriptions {
            self.release_subscription(&uri);
        }
        self.peer_session_closed(session);
        if s.roots.is_some() {
            // Its roots no longer apply: the next newest session's, or the configured ones.
            self.apply_roots();
        }
        self.modern_session_closed(session);
        self.mrtr_forget_cancelled();
        if tell {
            self.outputs.push_back(GatewayOutput::Close { session });
        }
    }

    /// Unsubscribe upstream once no session holds `uri` any more.
    fn release_subscription(&mut self, uri: &str) {
        if self
            .sessions
            .values()
            .any(|s| s.subscriptions.contains(uri))
            || self.modern.holds(uri)
        {
            return;
        }
        let call = self.fresh_call();
        self.outputs
            .push_back(GatewayOutput::Manager(Input::Operation {
                call,
                op: crate::catalog::Operation::Unsubscribe {
                    uri: uri.to_string(),
                    server: None,
                },
                timeout: None,
            }));
        // Nobody waits for its answer: the completion finds no pending entry and is dropped.
    }

    /// What the shell says of the servers that serve nothing: its latest word replaces the
    /// last (an approval given, or a config edited, since then changes what awaits).
    fn set_unavailable(&mut self, servers: UnavailableServers) {
        self.unavailable = servers;
    }

    fn fresh_call(&mut self) -> CallId {
        let call = CallId(self.next_call);
        self.next_call += 1;
        call
    }

    fn set_view(&mut self, view: View) {
        // The very lists it serves (a shell hands the same `Arc`s while the manager's view
        // has not moved): nothing to compare, nothing to announce.
        if Arc::ptr_eq(&self.view.tools, &view.tools)
            && Arc::ptr_eq(&self.view.resources, &view.resources)
            && Arc::ptr_eq(&self.view.templates, &view.templates)
            && Arc::ptr_eq(&self.view.prompts, &view.prompts)
        {
            return;
        }
        let names = served::ServedNames::new(&view.tools, &view.prompts, self.options.plain_names);
        let tools_same =
            same_tools(&self.view.tools, &view.tools) && names.tools == self.names.tools;
        // With tool search the two tools served never change: searches see the new view.
        let tools = !self.options.tool_search && !tools_same;
        let resources = !same_resources(&self.view, &view);
        let prompts =
            !same_prompts(&self.view.prompts, &view.prompts) || names.prompts != self.names.prompts;
        self.view = view;
        self.names = names;
        // A page reads only its entries' definitions and served names, whose equality is
        // textual (strings, numbers, raw JSON): the pages of a kind that compared equal are
        // the same text, the others are forgotten.
        self.pages.retain(|&(kind, _), _| match kind {
            0 => tools_same,
            1 | 2 => !resources,
            _ => !prompts,
        });
        let mut methods = Vec::new();
        if tools {
            methods.push("notifications/tools/list_changed");
        }
        if resources {
            methods.push("notifications/resources/list_changed");
        }
        if prompts {
            methods.push("notifications/prompts/list_changed");
        }
        for method in methods {
            let frame = wire::notification(method, None::<()>);
            for (&session, s) in &self.sessions {
                if s.initialized {
                    self.counters.list_changed += 1;
                    self.outputs.push_back(GatewayOutput::Send {
                        session,
                        target: Target::Session,
                        frame: frame.clone(),
                    });
                }
            }
        }
        self.listen_view_changed(tools, resources, prompts);
    }

    fn send(&mut self, session: SessionId, target: Target, frame: Bytes) {
        self.outputs.push_back(GatewayOutput::Send {
            session,
            target,
            frame,
        });
    }

    /// Answer a request (the one place an answer goes out, so each is counted once).
    fn answer(&mut self, session: SessionId, exchange: ExchangeId, frame: Bytes) {
        self.counters.answered += 1;
        let frame = self.modern_answer_frame(session, exchange, frame);
        self.send(
            session,
            Target::Exchange {
                exchange,
                last: true,
            },
            frame,
        );
        self.modern_answered(session);
    }

    fn event(&mut self, event: &Event) {
        if self.mrtr_event(event) {
            return;
        }
        match event {
            Event::CallCompleted { call, outcome } => {
                if let Some(p) = self.take_pending(*call) {
                    let server = match &p.kind {
                        PendingKind::Tool { server } => server.as_deref(),
                        _ => None,
                    };
                    let frame = requests::call_answer(&p.id, server, outcome, &self.unavailable);
                    if let Some(frame) = frame {
                        self.answer(p.session, p.exchange, frame);
                    }
                }
            }
            Event::OperationCompleted { call, outcome } => {
                if let Some(p) = self.take_pending(*call) {
                    if let (
                        PendingKind::Subscribe { uri },
                        crate::catalog::OperationOutcome::Ok(_),
                    ) = (&p.kind, outcome)
                    {
                        if let Some(s) = self.sessions.get_mut(&p.session) {
                            s.subscriptions.insert(uri.clone());
                        }
                    }
                    if let Some(frame) = requests::operation_answer(&p.id, outcome) {
                        self.answer(p.session, p.exchange, frame);
                    }
                }
            }
            Event::Progress {
                call: Some(call),
                progress,
                total,
                message,
                ..
            } => {
                let Some(p) = self.pending.get(call) else {
                    return;
                };
                let Some(token) = &p.progress else {
                    return;
                };
                let mut params =
                    serde_json::json!({ "progressToken": token, "progress": progress });
                if let Some(obj) = params.as_object_mut() {
                    if let Some(total) = total {
                        obj.insert("total".into(), Value::from(*total));
                    }
                    if let Some(message) = message {
                        obj.insert("message".into(), Value::String(message.clone()));
                    }
                }
                let (session, exchange) = (p.session, p.exchange);
                let frame = wire::notification("notifications/progress", Some(params));
                self.send(
                    session,
                    Target::Exchange {
                        exchange,
                        last: false,
                    },
                    frame,
                );
            }
            Event::ServerLog {
                server,
                severity,
                logger,
                data,
                ..
            } => {
                let level = LogLevel::parse(severity).unwrap_or(LogLevel::Info);
                let logger = match logger {
                    Some(l) => format!("{server}/{l}"),
                    None => server.clone(),
                };
                let frame = wire::notification(
                    "notifications/message",
                    Some(serde_json::json!({
                        "level": level.as_str(), "logger": logger, "data": data
                    })),
                );
                let to: Vec<SessionId> = self
                    .sessions
                    .iter()
                    .filter(|(_, s)| s.initialized && s.log_level.is_some_and(|min| level >= min))
                    .map(|(&id, _)| id)
                    .collect();
                for session in to {
                    self.send(session, Target::Session, frame.clone());
                }
                self.modern_server_log(server, level, &frame);
            }
            Event::PeerRequest {
                server,
                request,
                kind,
                input,
            } if !self.mrtr_peer_request(server, *request, kind, input.as_ref()) => {
                self.peer_request(server, *request, kind)
            }
            Event::PeerRequestWithdrawn { request, .. } => self.peer_withdrawn(*request),
            Event::ResourceUpdated { uri, .. } => {
                let frame = wire::notification(
                    "notifications/resources/updated",
                    Some(serde_json::json!({ "uri": uri })),
                );
                let to: Vec<SessionId> = self
                    .sessions
                    .iter()
                    .filter(|(_, s)| s.subscriptions.contains(uri))
                    .map(|(&id, _)| id)
                    .collect();
                for session in to {
                    self.send(session, Target::Session, frame.clone());
                }
                self.listen_resource_updated(uri);
            }
            _ => {}
        }
    }

    /// The pending request `call`, removed from its session too.
    fn take_pending(&mut self, call: CallId) -> Option<Pending> {
        let p = self.pending.remove(&call)?;
        if let Some(s) = self.sessions.get_mut(&p.session) {
            s.in_flight.remove(&id_key(&p.id));
        }
        Some(p)
    }
}

/// A request id as a map key: its JSON text, so `1` and `"1"` stay two ids.
fn id_key(id: &Value) -> String {
    id.to_string()
}

/// Same names, definitions and liveness: a deferred tool turning live is announced too, so a
/// client that listed cached definitions lists again once its server has confirmed them.
fn same_tools(a: &[Tool], b: &[Tool]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.qualified_name == y.qualified_name && x.def == y.def && x.deferred == y.deferred
        })
}

fn same_resources(a: &View, b: &View) -> bool {
    a.resources.len() == b.resources.len()
        && a.resources
            .iter()
            .zip(b.resources.iter())
            .all(|(x, y)| x.def == y.def)
        && a.templates.len() == b.templates.len()
        && a.templates
            .iter()
            .zip(b.templates.iter())
            .all(|(x, y)| x.def == y.def)
}

fn same_prompts(a: &[Prompt], b: &[Prompt]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.qualified_name == y.qualified_name && x.def == y.def)
}
