//! One connection attempt from open to ready: register the server and open its transport,
//! send `initialize` once it is open, then read every frame it sends. Responses are matched to
//! the request that asked for them, notifications are routed to their concern, and the
//! server's own requests (`ping`, `roots/list`) are answered here.

use super::errors::{CallError, ServerError, ServerErrorKind};
use super::servers::{CacheState, Server, Stage};
use super::{
    CacheKey, CallId, CallOutcome, ConnId, Event, FrameKind, FrameMeta, Level, Manager, Output,
    TimerReason, TransportEvent,
};
use crate::config::{self, ServerSpec};
use crate::protocol::{self, Incoming, RequestTracker, ServerNotification};
use crate::time::Instant;
use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::{BTreeSet, VecDeque};

/// Most stderr lines the core keeps per attempt, and most bytes they may take together.
const TAIL_LINES: usize = 20;
const TAIL_BYTES: usize = 4096;

/// What a tool call or an operation adds to its request: the value a stateless request's
/// `Mcp-Name` header mirrors (the params' `name` or `uri`), the `Mcp-Param-*` headers of a
/// stateless call, and the caller's own `_meta` members (a call's progress token and the
/// embedder's `_meta`, on either revision).
#[derive(Debug, Default)]
pub(super) struct RequestExtras<'a> {
    pub(super) name: Option<&'a str>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) own_meta: Option<&'a Map<String, Value>>,
}

/// The last lines an attempt's process wrote to stderr, bounded in lines and bytes.
#[derive(Debug, Clone, Default)]
pub(super) struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    fn push(&mut self, mut line: String) {
        if line.len() > TAIL_BYTES {
            let mut cut = TAIL_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > TAIL_LINES || self.bytes > TAIL_BYTES {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    /// The lines joined by newlines, or `None` if the process wrote nothing.
    pub(super) fn render(&self) -> Option<String> {
        if self.lines.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(self.bytes + self.lines.len());
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(line);
        }
        Some(out)
    }
}

/// An answer to one of our requests, as the codec read it.
enum Answer {
    Raw(Result<Box<RawValue>, protocol::RpcError>),
    Page(Result<protocol::ToolsPage, protocol::ProtocolError>),
    /// The result read as a `Value` while the frame was decoded.
    Value(serde_json::Value),
}

/// What a request of ours on a connection was for.
#[derive(Debug, Clone)]
pub(super) enum Req {
    Initialize,
    /// `server/discover`, asked to learn which revision the server speaks.
    Probe,
    ListTools,
    Call(CallId),
    Ping,
    /// `tasks/get` for the task a call runs as.
    TaskGet(CallId),
    /// `tasks/result` for the task a call runs as.
    TaskResult(CallId),
    /// `tasks/cancel` of a task nobody waits for; its answer changes nothing.
    TaskCancel,
    /// A page of a resources, templates or prompts list.
    List(super::catalog::ListKind),
    /// An operation (`Input::Operation`).
    Op(CallId),
    /// A `subscriptions/listen` stream (stateless connections).
    Listen,
}

/// A transport the manager tracks (opening or open), with the requests in flight on it.
#[derive(Debug, Clone)]
pub(super) struct Conn {
    pub(super) server: String,
    pub(super) tracker: RequestTracker<Req>,
    /// The health timer armed for this connection (the next ping, or the answer's deadline),
    /// so a pong or a close disarms it instead of leaving a wake-up behind.
    pub(super) ping_timer: Option<(Instant, TimerReason)>,
    /// What this attempt's process wrote to stderr last; attached to the attempt's error.
    pub(super) stderr: StderrTail,
    /// Which protocol revision it speaks (or whether that is still being found out).
    pub(super) wire: super::era::Wire,
    /// Its `subscriptions/listen` stream (stateless connections).
    pub(super) listen: super::subscriptions::Listen,
    /// Streams that ended in a row without an acknowledgement between (the ladder's rung).
    pub(super) listen_failures: u32,
    /// When the lists it became ready from without listing expire (`CacheExpiry`).
    pub(super) cache_expiry: Option<Instant>,
    /// A stdio probe that went unanswered in time while its `initialize` is out: its answer
    /// may still come first and decide the revision.
    pub(super) late_probe: Option<super::era::LateProbe>,
}

impl Manager {
    /// Attempt `conn` has not connected within its connect timeout: fail it, if it is still
    /// the server's current attempt.
    pub(super) fn on_connect_timeout(&mut self, server: &str, conn: ConnId) {
        let timeout = self.servers.get(server).map(|s| {
            s.spec
                .config
                .connect_timeout_or(self.opts.default_connect_timeout)
        });
        let current = self.servers.get(server).and_then(|s| s.phase.conn());
        if current == Some(conn) {
            if let Some(t) = timeout {
                self.counters.connect_timeouts += 1;
                let error = ServerError::new(
                    ServerErrorKind::ConnectTimeout,
                    format!("connect timed out after {} ms", t.as_millis()),
                );
                self.fail_server(server, error, true);
            }
        }
    }

    /// Register (or update) the server and start an attempt. Errors are config errors; the
    /// server is then known, idle, with that error.
    pub(super) fn start_server(
        &mut self,
        spec: ServerSpec,
        round: Option<u64>,
    ) -> Result<(), ServerError> {
        let name = spec.name.clone();
        // A reconnect or restart with the same config keeps its hash, and so does a server
        // connected again after it was forgotten: hashing serializes the whole config, which
        // is far dearer than comparing it.
        let hash = match self.servers.get(&name) {
            Some(s) if s.spec.config == spec.config => s.hash.clone(),
            _ => self.hashes.hash(&name, &spec.config),
        };
        let resolved = config::resolve(&name, &spec.config, &self.opts.env);
        let transport = spec
            .config
            .transport_kind()
            .ok()
            .map(config::TransportKind::as_str);
        if !self.servers.contains_key(&name) {
            self.phase_gen += 1; // a server newly known (idle)
        }
        let s = self
            .servers
            .entry(name.clone())
            .or_insert_with(|| Server::new(spec.clone(), hash.clone(), transport));
        if s.hash != hash {
            s.cache = CacheState::Unknown;
            s.handshake = None;
            s.fresh = None;
            s.list_fresh = [None; 4];
            self.view_gen += 1;
            // A cached catalog is shown only under the hash it was stored with.
            self.catalog.generation += 1;
        }
        s.spec = spec;
        s.hash = hash.clone();
        s.transport = transport;
        let config = match resolved {
            Ok(c) => c,
            Err(e) => {
                let error = ServerError::new(ServerErrorKind::InvalidConfig, e.to_string());
                s.last_error = Some(error.clone());
                s.round = None;
                return Err(error);
            }
        };
        s.attempts += 1;
        s.started_at = Some(self.now);
        s.ready_at = None;
        s.last_error = None;
        s.round = round;
        s.init = None;
        s.era = None;
        s.relist_when_ready = false;
        let deadline = self.now
            + s.spec
                .config
                .connect_timeout_or(self.opts.default_connect_timeout);
        let need_cache = matches!(s.cache, CacheState::Unknown);
        if need_cache {
            s.cache = CacheState::Loading;
            self.view_gen += 1;
        }
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                server: name.clone(),
                tracker: RequestTracker::default(),
                ping_timer: None,
                stderr: StderrTail::default(),
                wire: super::era::Wire::Legacy,
                listen: Default::default(),
                listen_failures: 0,
                cache_expiry: None,
                late_probe: None,
            },
        );
        self.set_phase(&name, Stage::Opening { conn, deadline });
        self.timers.arm(
            deadline,
            TimerReason::Connect {
                server: name.clone(),
                conn,
            },
        );
        // Cache lookups go out with the open, so reading the cache never adds to the gate.
        if need_cache {
            self.out.push_back(Output::LoadCache {
                server: name.clone(),
                key: CacheKey {
                    server: name.clone(),
                    config_hash: hash,
                },
            });
        }
        self.out.push_back(Output::OpenTransport {
            conn,
            server: name,
            config,
        });
        Ok(())
    }

    pub(super) fn on_transport(&mut self, conn: ConnId, event: TransportEvent) {
        let Some(c) = self.conns.get(&conn) else {
            // Stale: an attempt we abandoned (and already closed), one whose end the shell
            // reported before its open, or one never issued.
            self.counters.stale_events += 1;
            if matches!(event, TransportEvent::Opened) && conn.0 < self.next_conn {
                // The shell now holds a live transport for an attempt nobody tracks: close it
                // (the shell treats a close of what it no longer holds as a no-op).
                self.counters.stale_opened_closed += 1;
                self.out.push_back(Output::CloseTransport { conn });
            }
            return;
        };
        if let TransportEvent::Frame(frame) = &event {
            // Copies its server's name only when it needs it (a call's answer does not).
            self.on_frame(conn, frame);
            return;
        }
        let server = c.server.clone();
        match event {
            TransportEvent::Opened => {
                let Some(s) = self.servers.get(&server) else {
                    return;
                };
                if let Stage::Opening { conn: pc, deadline } = s.phase {
                    if pc != conn {
                        return;
                    }
                    self.begin_handshake(conn, &server, deadline);
                }
            }
            TransportEvent::Frame(_) => {}
            TransportEvent::Notice { message } => self.diag(Some(&server), Level::Warn, message),
            TransportEvent::Closed { reason } => {
                let error = format!("connection closed: {reason}");
                self.transport_gone(conn, &server, ServerErrorKind::Closed, error);
            }
            TransportEvent::Failed { error } => {
                self.transport_gone(conn, &server, ServerErrorKind::TransportFailed, error);
            }
            TransportEvent::Stderr { line } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.stderr.push(line);
                }
            }
            TransportEvent::RequestFailed { id, error } => {
                self.on_request_failed(conn, &server, id, error)
            }
            TransportEvent::SessionRenewed => self.on_session_renewed(&server),
            TransportEvent::Unauthorized { id, error } => self.on_refused(conn, &server, id, error),
        }
    }

    /// The server refused our credentials for one frame (`id`: the request, `None`: a frame
    /// that is no request). The attempt ends, and the core closes its transport, when nothing
    /// more can be sent: the refusal is `NeedsLogin` (about the server, not this request: a
    /// `server/discover` probe that meets it must not pass for an old server's answer), the
    /// handshake is still under way (a refused probe falling back to `initialize` would only
    /// be refused again), or the frame was no request. Otherwise only that request fails (a
    /// step-up the user did not grant), in the words of a transport failure.
    fn on_refused(
        &mut self,
        conn: ConnId,
        server: &str,
        id: Option<u64>,
        error: crate::auth::AuthError,
    ) {
        let handshake = self.servers.get(server).is_some_and(|s| s.era.is_none())
            || id.is_some_and(|id| {
                matches!(
                    self.conns.get(&conn).and_then(|c| c.tracker.get(id)),
                    Some(Req::Probe | Req::Initialize)
                )
            });
        match id {
            Some(id) if !handshake && error != crate::auth::AuthError::NeedsLogin => {
                self.counters.refusals_failed_request += 1;
                self.on_request_failed(conn, server, id, format!("authorization failed: {error}"))
            }
            _ => {
                // The refused request goes with its connection (`fail_server` drains it).
                let tracked = id.is_some_and(|id| {
                    self.conns
                        .get(&conn)
                        .is_some_and(|c| c.tracker.get(id).is_some())
                });
                self.counters.requests_failed_by_transport += u64::from(tracked);
                self.counters.refusals_ended_attempt += 1;
                let error = Self::refusal(server, error);
                self.fail_server(server, error, true);
            }
        }
    }

    /// The attempt's error for refused credentials: `needs login` names the command to run.
    fn refusal(server: &str, error: crate::auth::AuthError) -> ServerError {
        if error == crate::auth::AuthError::NeedsLogin {
            ServerError::new(
                ServerErrorKind::NeedsLogin,
                format!("needs login: run `switchboard login {server}`"),
            )
        } else {
            ServerError::new(
                ServerErrorKind::Unauthorized,
                format!("authorization failed: {error}"),
            )
        }
    }

    /// The shell reports the transport is gone (it cleaned up; no `CloseTransport`). The
    /// error carries this attempt's stderr tail, taken before the attempt is forgotten.
    fn transport_gone(&mut self, conn: ConnId, server: &str, kind: ServerErrorKind, msg: String) {
        let mut error = ServerError::new(kind, msg);
        error.stderr_tail = self.conns.get(&conn).and_then(|c| c.stderr.render());
        self.remove_conn(conn);
        self.fail_server(server, error, false);
    }

    /// The transport could not deliver request `id`: that request fails at once, in the
    /// transport's words (a call with a transport error, never as if the server answered).
    fn on_request_failed(&mut self, conn: ConnId, server: &str, id: u64, error: String) {
        let Some(req) = self
            .conns
            .get(&conn)
            .and_then(|c| c.tracker.get(id))
            .cloned()
        else {
            self.counters.unknown_responses += 1;
            return;
        };
        self.counters.requests_failed_by_transport += 1;
        match req {
            Req::Probe => self.on_probe_undelivered(conn, server, id),
            Req::Initialize => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.tracker.complete(id);
                }
                let error = ServerError::new(
                    ServerErrorKind::RequestFailed,
                    format!("initialize failed: {error}"),
                );
                self.fail_server(server, error, true);
            }
            Req::ListTools => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.tracker.complete(id);
                }
                let page = Err(format!("tools/list failed: {error}"));
                self.on_list_page(conn, server, id, page);
            }
            Req::Call(call) => {
                let error = ServerError::new(ServerErrorKind::RequestFailed, error);
                self.complete_call(call, CallOutcome::Err(CallError::Transport(error)));
            }
            // An undeliverable ping counts as unanswered now.
            Req::Ping => self.on_ping_timeout(conn, id),
            Req::TaskGet(call) | Req::TaskResult(call) => {
                let error = ServerError::new(ServerErrorKind::RequestFailed, error);
                self.complete_call(call, CallOutcome::Err(CallError::Transport(error)));
            }
            Req::TaskCancel => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.tracker.complete(id);
                }
            }
            Req::List(kind) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.tracker.complete(id);
                }
                let error = format!("the transport could not deliver it: {error}");
                self.on_catalog_page(conn, server, id, kind, Err(error));
            }
            Req::Op(call) => self.on_op_undelivered(call, error),
            Req::Listen => self.on_listen_ended(conn, server, id),
        }
    }

    /// The HTTP session expired and the transport opened a new one: tools may have changed
    /// with it, so a connected server lists them again.
    fn on_session_renewed(&mut self, server: &str) {
        self.counters.sessions_renewed += 1;
        self.emit(Event::SessionRenewed {
            server: server.to_string(),
        });
        let connected = matches!(
            self.servers.get(server).map(|s| &s.phase),
            Some(Stage::Connected { .. })
        );
        let message = if connected {
            self.refresh(server);
            "the HTTP session expired and a new one was opened; listing the tools again"
        } else {
            "the HTTP session expired and a new one was opened"
        };
        self.diag(Some(server), Level::Info, message.into());
    }

    /// The name of the server `conn` belongs to (the connection is tracked).
    fn server_of(&self, conn: ConnId) -> String {
        self.conns
            .get(&conn)
            .map(|c| c.server.clone())
            .unwrap_or_default()
    }

    fn on_frame(&mut self, conn: ConnId, frame: &[u8]) {
        // A `tools/list` answer is read as a page while the frame is parsed (one pass over
        // its bytes, no raw copy of the result); a catalog page, which is read as a `Value`,
        // is read as one there.
        let conns = &self.conns;
        let expect = |id: u64| match conns.get(&conn).and_then(|c| c.tracker.get(id)) {
            Some(Req::ListTools) => protocol::Expect::ToolsPage,
            Some(Req::List(_)) => protocol::Expect::Value,
            _ => protocol::Expect::Raw,
        };
        let msg = match protocol::decode_expecting(frame, self.opts.max_frame_len, &expect) {
            Ok(m) => m,
            Err(e @ protocol::DecodeError::TooLarge { .. }) => {
                self.counters.bad_frames += 1;
                let error = ServerError::new(ServerErrorKind::FrameTooLarge, e.to_string());
                let server = self.server_of(conn);
                self.fail_server(&server, error, true);
                return;
            }
            Err(e) => {
                self.counters.bad_frames += 1;
                let server = &self.server_of(conn);
                // An answer to a request in flight that cannot be read fails that request
                // now, with the reason, rather than leaving it to its timeout.
                let pending = protocol::salvage_response_id(frame).filter(|id| {
                    self.conns
                        .get(&conn)
                        .is_some_and(|c| c.tracker.get(*id).is_some())
                });
                match pending {
                    Some(id) => {
                        self.counters.unreadable_answers += 1;
                        self.diag(
                            Some(server),
                            Level::Warn,
                            format!("the answer to request {id} could not be read: {e}"),
                        );
                        self.on_request_failed(
                            conn,
                            server,
                            id,
                            format!("the server's answer could not be read: {e}"),
                        );
                    }
                    None => self.diag(Some(server), Level::Warn, format!("ignored a frame: {e}")),
                }
                return;
            }
        };
        let (id, answer) = match msg {
            Incoming::Response { id, result } => (id, Answer::Raw(result)),
            Incoming::ToolsPage { id, page } => (Some(id), Answer::Page(page)),
            Incoming::Value { id, result } => (Some(id), Answer::Value(result)),
            other => {
                let server = self.server_of(conn);
                self.on_server_message(conn, &server, other);
                return;
            }
        };
        let req = id.and_then(|id| {
            self.conns
                .get_mut(&conn)
                .and_then(|c| c.tracker.complete(id).map(|r| (id, r)))
        });
        match (req, answer) {
            (Some((_, Req::Call(call) | Req::TaskResult(call))), Answer::Raw(result)) => {
                self.on_call_result(call, result)
            }
            (req, answer) => {
                let server = self.server_of(conn);
                self.on_answer(conn, &server, id, req, answer);
            }
        }
    }

    /// A request or notification of the server's.
    fn on_server_message(&mut self, conn: ConnId, server: &str, msg: Incoming) {
        match msg {
            // Answers are taken apart by `on_frame`.
            Incoming::Response { .. } | Incoming::ToolsPage { .. } | Incoming::Value { .. } => {}
            Incoming::Request { id, method, params } => {
                self.on_peer_request(conn, server, id, &method, &params);
            }
            Incoming::Notification(ServerNotification::Cancelled { request_id }) => {
                self.on_peer_cancelled(conn, &request_id);
            }
            Incoming::Notification(ServerNotification::ElicitationComplete { elicitation_id }) => {
                self.on_elicitation_complete(conn, server, elicitation_id);
            }
            Incoming::Notification(n) => {
                self.on_notification(server, n);
            }
            Incoming::Stream {
                subscription,
                notification,
            } => {
                let ack = notification == ServerNotification::SubscriptionsAcknowledged;
                self.on_stream_notification(conn, server, subscription, ack);
                self.on_notification(server, notification);
            }
        }
    }

    /// An answer to request `id` (`req`: what it asked, when it was still in flight).
    fn on_answer(
        &mut self,
        conn: ConnId,
        server: &str,
        id: Option<u64>,
        req: Option<(u64, Req)>,
        answer: Answer,
    ) {
        let Some((id, req)) = req else {
            self.counters.unknown_responses += 1;
            // A late answer to a request we gave up on (timed out, cancelled) is normal; an
            // id we never issued, or none, means the server is confused: say so.
            let issued = id.filter(|id| {
                self.conns
                    .get(&conn)
                    .is_some_and(|c| c.tracker.was_issued(*id))
            });
            let (level, message) = match (issued, id) {
                (Some(id), _) => (
                    Level::Debug,
                    format!("ignored a response to an unknown or already answered request id {id}"),
                ),
                (None, Some(id)) => (
                    Level::Warn,
                    format!(
                        "ignored a response to request id {id}, which this connection never sent"
                    ),
                ),
                (None, None) => (
                    Level::Warn,
                    "ignored a response without a usable id (a number or a numeric string)"
                        .to_string(),
                ),
            };
            self.diag(Some(server), level, message);
            return;
        };
        match (req, answer) {
            (Req::ListTools, Answer::Page(page)) => {
                let page = page.map_err(|e| format!("tools/list failed: {e}"));
                self.on_list_page(conn, server, id, page);
            }
            (Req::ListTools, Answer::Raw(result)) => {
                let page = result
                    .map_err(|e| format!("tools/list failed: {e}"))
                    .and_then(|v| {
                        protocol::parse_list_tools_result(&v)
                            .map_err(|e| format!("tools/list failed: {e}"))
                    });
                self.on_list_page(conn, server, id, page);
            }
            // Not reached: `expect` asks for a page only for a pending `tools/list` id, for a
            // `Value` only for a pending catalog page's, and nothing completes requests
            // between the decode and here.
            (_, Answer::Page(_)) => {}
            (Req::List(kind), Answer::Value(result)) => {
                let result = Ok(super::catalog::PageResult::Value(result));
                self.on_catalog_page(conn, server, id, kind, result);
            }
            (_, Answer::Value(_)) => {}
            (Req::Initialize, Answer::Raw(result)) => {
                if self.initialize_decides(conn, server, &result) {
                    self.on_initialize(conn, server, result)
                }
            }
            (Req::Probe, Answer::Raw(result)) => self.on_probe_answer(conn, server, result),
            (Req::Call(call), Answer::Raw(result)) => self.on_call_result(call, result),
            (Req::Ping, Answer::Raw(_)) => self.on_pong(conn, server),
            (Req::TaskGet(call), Answer::Raw(result)) => self.on_task_status(call, result),
            (Req::TaskResult(call), Answer::Raw(result)) => self.on_call_result(call, result),
            (Req::TaskCancel, Answer::Raw(_)) => {}
            (Req::List(kind), Answer::Raw(result)) => {
                let result = result
                    .map(super::catalog::PageResult::Raw)
                    .map_err(|e| e.to_string());
                self.on_catalog_page(conn, server, id, kind, result);
            }
            (Req::Op(call), Answer::Raw(result)) => self.on_op_result(call, result),
            // A result is the stream's graceful end; an error, a refusal of the request.
            (Req::Listen, Answer::Raw(Ok(_))) => self.on_listen_ended(conn, server, id),
            (Req::Listen, Answer::Raw(Err(e))) => self.on_listen_refused(conn, server, id, e),
        }
    }

    fn on_notification(&mut self, server: &str, n: ServerNotification) {
        match n {
            ServerNotification::ToolsListChanged => self.on_list_changed(server),
            ServerNotification::Message {
                level,
                logger,
                data,
            } => {
                let lvl = match level.as_str() {
                    "debug" => Level::Debug,
                    "info" | "notice" => Level::Info,
                    "warning" => Level::Warn,
                    _ => Level::Error,
                };
                self.emit(Event::ServerLog {
                    server: server.to_string(),
                    level: lvl,
                    severity: level,
                    logger,
                    data,
                });
            }
            ServerNotification::Progress {
                token,
                progress,
                total,
                message,
            } => {
                let call = self.on_progress(server, &token);
                self.emit(Event::Progress {
                    server: server.to_string(),
                    call,
                    progress,
                    total,
                    message,
                });
            }
            ServerNotification::TaskStatus { params } => self.on_task_notification(server, &params),
            ServerNotification::ResourcesListChanged => self.on_catalog_list_changed(server, false),
            ServerNotification::PromptsListChanged => self.on_catalog_list_changed(server, true),
            ServerNotification::ResourceUpdated { uri } => self.on_resource_updated(server, uri),
            ServerNotification::Cancelled { .. }
            | ServerNotification::SubscriptionsAcknowledged
            | ServerNotification::Other { .. }
            | ServerNotification::ElicitationComplete { .. } => {}
        }
    }

    pub(super) fn on_initialize(
        &mut self,
        conn: ConnId,
        server: &str,
        result: Result<Box<RawValue>, protocol::RpcError>,
    ) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        let Stage::Initializing { deadline, .. } = s.phase else {
            return;
        };
        let init = match result {
            Ok(v) => match protocol::parse_initialize_result(&v) {
                Ok(i) => i,
                Err(e) => {
                    let kind = if matches!(e, protocol::ProtocolError::UnsupportedVersion(_)) {
                        self.counters.unsupported_versions += 1;
                        ServerErrorKind::UnsupportedVersion
                    } else {
                        ServerErrorKind::InitializeFailed
                    };
                    let error = ServerError::new(kind, format!("initialize failed: {e}"));
                    self.fail_server(server, error, true);
                    return;
                }
            },
            Err(e) => {
                let kind = if super::era::refused_for_version(&e) {
                    self.counters.unsupported_versions += 1;
                    ServerErrorKind::UnsupportedVersion
                } else {
                    ServerErrorKind::InitializeFailed
                };
                let error = ServerError::new(kind, format!("initialize failed: {e}"));
                self.fail_server(server, error, true);
                return;
            }
        };
        if let Some(s) = self.servers.get_mut(server) {
            s.era = Some(super::Era::Legacy);
            if self.opts.protocol.probe {
                s.handshake = Some(super::Handshake {
                    era: super::Era::Legacy,
                    discover: None,
                });
            }
        }
        self.on_ready_to_list(conn, server, deadline, init, true);
    }

    /// The server answered `initialize` (legacy) or `server/discover` (stateless, `notify`
    /// false: no `notifications/initialized`): start its lists.
    pub(super) fn on_ready_to_list(
        &mut self,
        conn: ConnId,
        server: &str,
        deadline: Instant,
        init: protocol::InitializeResult,
        notify: bool,
    ) {
        if !notify {
            if let Some(s) = self.servers.get_mut(server) {
                s.era = Some(super::Era::Modern);
            }
        }
        self.timers.disarm(
            deadline,
            TimerReason::Connect {
                server: server.to_string(),
                conn,
            },
        );
        if notify {
            self.notify(conn, "notifications/initialized");
        }
        let has_tools = init.has_tools;
        if let Some(s) = self.servers.get_mut(server) {
            s.init = Some(init);
        }
        // The first pages of every declared list go out together; the server is ready once
        // each has its last page.
        let catalog = self.start_catalog_lists(server, conn);
        if has_tools {
            if let Some(listing) = self.start_list(conn, None, 0, BTreeSet::new(), Vec::new()) {
                self.set_phase(server, Stage::Listing { conn, listing });
            }
        } else if catalog {
            // No tools capability: ready with an empty tool list once the others are in.
            let listing = super::listing::Listing::settled(self.now);
            self.set_phase(server, Stage::Listing { conn, listing });
            self.tools_listed(server, Vec::new());
        } else {
            // No tools capability: ready with an empty list.
            self.tools_ready(server, Vec::new());
        }
    }

    /// Forget a connection and disarm the timers that die with it (its health timer and its
    /// list pages'); whether it was known.
    pub(super) fn remove_conn(&mut self, conn: ConnId) -> bool {
        let Some(mut c) = self.conns.remove(&conn) else {
            return false;
        };
        self.withdraw_peer_requests(conn);
        if let Some(t) = c.ping_timer.take() {
            self.timers.remove(&t);
        }
        if let super::era::Wire::Probing {
            id,
            deadline: Some(at),
            ..
        } = c.wire
        {
            self.timers.disarm(at, TimerReason::Probe { conn, id });
        }
        if let super::subscriptions::Listen::Closed { at, .. } = c.listen {
            self.timers.disarm(at, TimerReason::Relisten { conn });
        }
        if let Some(at) = c.cache_expiry {
            self.timers.disarm(at, TimerReason::CacheExpiry { conn });
        }
        for (id, req) in c.tracker.drain() {
            if let Req::ListTools | Req::List(_) = req {
                self.timers.disarm_request(conn, id);
            }
        }
        true
    }

    pub(super) fn send(&mut self, conn: ConnId, frame: Bytes, meta: FrameMeta) {
        if self.conns.contains_key(&conn) {
            self.out.push_back(Output::Send { conn, frame, meta });
        }
    }

    /// Issue request `method` on `conn` (tracked as `req`) and write it; its id, unless the
    /// connection is no longer tracked.
    pub(super) fn request<P: Serialize>(
        &mut self,
        conn: ConnId,
        method: &'static str,
        params: Option<P>,
        req: Req,
    ) -> Option<u64> {
        self.request_with(conn, method, params, req, RequestExtras::default())
    }

    /// [`request`](Self::request) with what a stateless call adds (see [`RequestExtras`]).
    pub(super) fn request_with<P: Serialize>(
        &mut self,
        conn: ConnId,
        method: &'static str,
        params: Option<P>,
        req: Req,
        extras: RequestExtras<'_>,
    ) -> Option<u64> {
        let (id, params, meta) = self.request_params(conn, method, params, req, extras)?;
        let frame = protocol::encode_request(id, method, (!params.is_absent()).then_some(params));
        self.out.push_back(Output::Send { conn, frame, meta });
        Some(id)
    }

    /// Issue an id for request `method` on `conn` (tracked as `req`), and the params its frame
    /// carries: `body` under the `_meta` of a request (the stateless members on a stateless
    /// connection, merged with the caller's own), with the frame's metadata. `None` when the
    /// connection is no longer tracked.
    pub(super) fn request_params<'s, P>(
        &'s mut self,
        conn: ConnId,
        method: &'static str,
        body: Option<P>,
        req: Req,
        extras: RequestExtras<'s>,
    ) -> Option<(u64, protocol::RequestParams<'s, P>, FrameMeta)> {
        let id = self.conns.get_mut(&conn)?.tracker.issue(req);
        let this: &'s Self = self;
        let (stateless, meta) = this.frame_for(
            conn,
            method,
            extras.name,
            FrameKind::Request { id },
            extras.headers,
        );
        let params = protocol::RequestParams {
            meta: protocol::RequestMeta {
                stateless,
                own: extras.own_meta,
            },
            body,
        };
        Some((id, params, meta))
    }

    /// Write notification `method` (without params) on `conn`.
    pub(super) fn notify(&mut self, conn: ConnId, method: &'static str) {
        let (_, meta) = self.frame_for(
            conn,
            method,
            None,
            FrameKind::Notification { cancels: None },
            Vec::new(),
        );
        let frame = protocol::encode_notification(method, protocol::NO_PARAMS);
        self.send(conn, frame, meta);
    }

    /// Tell the server we no longer wait for request `id`.
    pub(super) fn send_cancelled(&mut self, conn: ConnId, id: u64, reason: &str) {
        let (_, meta) = self.frame_for(
            conn,
            "notifications/cancelled",
            None,
            FrameKind::Notification { cancels: Some(id) },
            Vec::new(),
        );
        self.send(conn, protocol::encode_cancelled(id, reason), meta);
    }
}
