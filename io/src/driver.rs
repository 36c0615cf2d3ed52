//! The driver: one task owns the [`Manager`] and performs what it asks.
//!
//! Its loop (quinn's `ConnectionDriver`, str0m's rule): drain `poll_output` and perform each
//! command; re-arm the timer to `poll_timeout()`; wait for the first of the timer, a transport
//! event, an internal completion and an API request; feed it in; repeat. Decisions stay in the
//! core — this file only moves bytes, spawns and kills processes, reads and writes files.

use crate::api::Error as ApiError;
use crate::cache::{now_unix_ms, ToolCache};
use crate::http::{HttpOptions, HttpTarget, HttpTransport};
use crate::rt::{OneshotSender, Spawner};
use crate::secrets::{resolve_secrets, CredentialProvider, SecretCache};
use crate::stdio::{ProcessRegistry, StdioCommand, StdioEvent, StdioOptions, StdioTransport};
use async_channel::{Receiver, Sender};
use async_io::Timer;
use futures_lite::future;
use serde_json::Value;
use smol::Task;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_core::config::{ServerSpec, TransportConfig};
use switchboard_core::manager::{
    CallId, CallOutcome, ConnId, Input, Manager, Output, ServerState, StartupReport, TransportEvent,
};
use switchboard_core::tool::{Tool, ToolDef};
use switchboard_core::Instant;

/// Most inputs handled in one turn before outputs are performed and other sources get a look;
/// a chatty server cannot starve the others or the API.
const MAX_EVENTS_PER_TURN: usize = 64;

/// Maps the real clock onto the core's `Instant`: the only place the shell reads time for
/// the core.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: std::time::Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            origin: std::time::Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Instant {
        let nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Instant::from_nanos(nanos)
    }

    pub(crate) fn to_std(self, t: Instant) -> std::time::Instant {
        self.origin + Duration::from_nanos(t.as_nanos())
    }
}

/// Something the embedder-facing handle asks of the driver.
pub(crate) enum Request {
    Input(Input),
    /// Call and answer on `reply` when it completes.
    Call {
        call: CallId,
        tool: String,
        arguments: Option<Value>,
        timeout: Option<Duration>,
        reply: OneshotSender<CallOutcome>,
    },
    /// Start a round and answer with its report, completed with `config` (what discovery
    /// found wrong with the config files). An input that opened no round (a `Sync` that
    /// started nothing) drops `reply` unanswered.
    Connect {
        input: Input,
        config: ConfigReport,
        reply: Sender<StartupReport>,
    },
    /// Close everything, wait until every process is reaped, then answer and stop.
    Shutdown {
        reply: Sender<()>,
    },
    /// Disconnect one server (`None`: all) and answer once its transports are closed.
    Disconnect {
        server: Option<String>,
        reply: Sender<Result<(), ApiError>>,
    },
    /// Re-list one server's tools and answer once the new list is applied (or failed).
    Refresh {
        server: String,
        reply: Sender<Result<(), ApiError>>,
    },
}

/// Config problems found by discovery, reported with the startup round they fed.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfigReport {
    pub errors: Vec<switchboard_core::config::SourceError>,
    pub shadowed: Vec<switchboard_core::config::Shadowed>,
}

impl ConfigReport {
    /// Into the report: every error and shadowed entry, and each invalid server entry also
    /// under its server's name in `errors` (as the seed reports invalid configs).
    fn add_to(self, report: &mut StartupReport) {
        for e in &self.errors {
            if let switchboard_core::config::ConfigError::Server { server, .. } = &e.error {
                report
                    .errors
                    .entry(server.clone())
                    .or_insert_with(|| e.to_string());
            }
        }
        report.config_errors.extend(self.errors);
        report.shadowed.extend(self.shadowed);
    }
}

/// Events for the embedder (`Switchboard::events`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A startup round reached its gate (`start`, `connect`, `reload`, or `sync` that
    /// started servers).
    StartupComplete {
        /// What the round found.
        report: StartupReport,
    },
    /// These servers' tools in the view changed; read [`Switchboard::tools`](crate::Switchboard::tools).
    ToolsChanged {
        /// The servers whose slices changed.
        servers: Vec<String>,
    },
    /// A server's status changed.
    StatusChanged {
        /// The server.
        server: String,
        /// Its new status.
        status: switchboard_core::ServerStatus,
    },
    /// Something worth telling: a late failure, a lost connection, a reconnect, a skipped
    /// tool definition. Also logged through `tracing` (target `switchboard`).
    Diagnostic {
        /// The server it is about, if any.
        server: Option<String>,
        /// How serious it is.
        level: switchboard_core::manager::Level,
        /// What happened.
        message: String,
    },
    /// A server's `notifications/progress`; `call` when it is about one of our calls.
    Progress {
        /// The server that sent it.
        server: String,
        /// The call it reports on, when its progress token is one of our calls in flight.
        call: Option<CallId>,
        /// Progress so far (increases with every notification).
        progress: f64,
        /// The total, when the server knows it.
        total: Option<f64>,
        /// A human-readable note, if any.
        message: Option<String>,
    },
    /// A server's log message (`notifications/message`); `severity` is its MCP level.
    ServerLog {
        /// The server that sent it.
        server: String,
        /// The MCP level mapped onto Switchboard's levels.
        level: switchboard_core::manager::Level,
        /// The MCP level as sent (`debug` … `emergency`).
        severity: String,
        /// The server's logger name, if any.
        logger: Option<String>,
        /// The message: any JSON value, usually a string.
        data: Value,
    },
    /// An automatic reconnect (or a startup retry, when enabled) is scheduled; sent for every
    /// attempt of the ladder (and logged through `tracing` at warn).
    ReconnectScheduled {
        /// The server.
        server: String,
        /// The attempt's number on the ladder (1 for the first after a lost connection).
        attempt: u32,
        /// How long until it starts (jitter included).
        delay: Duration,
        /// Why the last connection or attempt ended.
        error: String,
    },
    /// A scheduled attempt starts now (its transport is being opened).
    ReconnectStarted {
        /// The server.
        server: String,
        /// The attempt's number, as scheduled.
        attempt: u32,
    },
}

/// What the handle can read without asking the driver: refreshed whenever the view or a
/// status changes.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub tools: Arc<Vec<Tool>>,
    pub servers: Vec<ServerState>,
    pub stopped: bool,
}

/// An open transport of either kind.
enum Transport {
    Stdio(StdioTransport),
    Http(HttpTransport),
}

impl Transport {
    fn send(&self, frame: bytes::Bytes) -> Result<(), String> {
        match self {
            Transport::Stdio(t) => t.send(frame),
            Transport::Http(t) => t.send(frame),
        }
    }

    async fn close(self) {
        match self {
            Transport::Stdio(t) => t.close().await,
            Transport::Http(t) => t.close().await,
        }
    }
}

/// Completions of work the driver started in other tasks.
enum Internal {
    Opened(ConnId, Transport),
    OpenFailed(ConnId, String),
    CacheLoaded {
        server: String,
        key: switchboard_core::CacheKey,
        tools: Option<Vec<ToolDef>>,
    },
    Closed(ConnId),
    /// An opening task cancelled by `CloseTransport` is gone. If it had finished, its
    /// `Opened`/`OpenFailed` came before this (same channel).
    Aborted(ConnId),
}

pub(crate) struct DriverConfig {
    pub stdio: StdioOptions,
    pub http: HttpOptions,
    pub cache: Option<ToolCache>,
    pub credentials: Option<Arc<dyn CredentialProvider>>,
    pub registry: ProcessRegistry,
    pub spawner: Spawner,
}

pub(crate) struct Driver {
    m: Manager,
    clock: Clock,
    cfg: DriverConfig,
    secrets: Arc<SecretCache>,
    shared: Arc<Mutex<Shared>>,
    subscribers: Arc<Mutex<Vec<Sender<Event>>>>,
    /// `auth` sections by server, from the specs we passed in (the core keeps the unresolved
    /// config; the credential provider needs it at open time).
    auth: BTreeMap<String, Value>,
    requests: Receiver<Request>,
    /// Everything but the API's requests: transport events of both kinds and completions of
    /// the driver's own tasks, on one channel (one wake-up source to wait on, not three).
    inbound_tx: Sender<Inbound>,
    inbound_rx: Receiver<Inbound>,
    opening: BTreeMap<ConnId, Task<()>>,
    transports: BTreeMap<ConnId, Transport>,
    closing: BTreeMap<ConnId, Task<()>>,
    background: Vec<Task<()>>,
    calls: BTreeMap<CallId, OneshotSender<CallOutcome>>,
    /// By round number: rounds can complete out of order (a round whose members were all
    /// disconnected completes at once).
    startup_waiters: BTreeMap<u64, (Sender<StartupReport>, ConfigReport)>,
    shutdown: Option<Sender<()>>,
    /// Which server each attempt that still has something open belongs to.
    conn_server: BTreeMap<ConnId, String>,
    /// Opening tasks being cancelled (see `Internal::Aborted`).
    aborting: BTreeMap<ConnId, Task<()>>,
    close_waiters: Vec<CloseWaiter>,
    refresh_waiters: Vec<RefreshWaiter>,
    /// What the last outputs said about servers that refresh waiters watch.
    refresh_seen: Vec<(String, RefreshSeen)>,
    /// Stderr tails of stdio attempts the core ended with an error, by server.
    failed_tails: BTreeMap<String, FailedTail>,
}

impl Driver {
    pub(crate) fn new(
        m: Manager,
        clock: Clock,
        cfg: DriverConfig,
        shared: Arc<Mutex<Shared>>,
        subscribers: Arc<Mutex<Vec<Sender<Event>>>>,
        requests: Receiver<Request>,
    ) -> Self {
        let (inbound_tx, inbound_rx) = async_channel::unbounded();
        let secrets = Arc::new(SecretCache::shared().with_registry(cfg.registry.clone()));
        Driver {
            m,
            clock,
            cfg,
            secrets,
            shared,
            subscribers,
            auth: BTreeMap::new(),
            requests,
            inbound_tx,
            inbound_rx,
            opening: BTreeMap::new(),
            transports: BTreeMap::new(),
            closing: BTreeMap::new(),
            background: Vec::new(),
            calls: BTreeMap::new(),
            startup_waiters: BTreeMap::new(),
            shutdown: None,
            conn_server: BTreeMap::new(),
            aborting: BTreeMap::new(),
            close_waiters: Vec::new(),
            refresh_waiters: Vec::new(),
            refresh_seen: Vec::new(),
            failed_tails: BTreeMap::new(),
        }
    }

    pub(crate) async fn run(mut self) {
        // One timer for the whole run, armed at the core's next deadline. It is moved only to
        // an *earlier* deadline: waking early is harmless (`handle_timeout` with nothing due
        // does nothing, and the timer is armed again), while every re-arm costs a reactor
        // notification (an eventfd write and an extra `epoll_wait`). Every call has a
        // deadline, so re-arming on every change would cost that twice per call.
        let mut timer = Timer::never();
        let mut armed: Option<std::time::Instant> = None;
        loop {
            self.perform_outputs();
            if self.check_waiters() {
                // A deferred refresh was issued: perform what it asked for.
                self.perform_outputs();
            }
            if let Some(reply) = &self.shutdown {
                if self.opening.is_empty()
                    && self.aborting.is_empty()
                    && self.transports.is_empty()
                    && self.closing.is_empty()
                {
                    // Every process is reaped. Let cache writes finish (they are quick).
                    for t in std::mem::take(&mut self.background) {
                        t.await;
                    }
                    self.shared.lock().map(|mut s| s.stopped = true).ok();
                    let _ = reply.try_send(());
                    return;
                }
            }
            if let Some(at) = self.m.poll_timeout().map(|t| self.clock.to_std(t)) {
                if !matches!(armed, Some(armed) if armed <= at) {
                    timer.set_at(at);
                    armed = Some(at);
                }
            }
            let woke = self.wait(&mut timer).await;
            match woke {
                Wake::Timer => {
                    armed = None;
                    let now = self.clock.now();
                    self.m.handle_timeout(now);
                }
                Wake::Request(r) => self.on_request(r),
                Wake::Inbound(first) => {
                    self.on_inbound(first);
                    // Take more of what is already queued, bounded.
                    for _ in 1..MAX_EVENTS_PER_TURN {
                        match self.inbound_rx.try_recv() {
                            Ok(next) => self.on_inbound(next),
                            Err(_) => break,
                        }
                    }
                }
                Wake::RequestsClosed => {
                    // Every handle is gone: shut down.
                    if self.shutdown.is_none() {
                        let (tx, _rx) = async_channel::bounded(1);
                        self.begin_shutdown(tx);
                    }
                }
            }
        }
    }

    async fn wait(&self, timer: &mut Timer) -> Wake {
        let requests = async {
            if self.shutdown.is_some() && self.requests.is_closed() {
                // Every handle is gone and shutdown is under way: park this source, or a
                // closed channel would wake us in a busy loop.
                return future::pending().await;
            }
            match self.requests.recv().await {
                Ok(r) => Wake::Request(r),
                Err(_) => Wake::RequestsClosed,
            }
        };
        let inbound = async {
            match self.inbound_rx.recv().await {
                Ok(i) => Wake::Inbound(i),
                // Cannot happen: the driver holds a sender.
                Err(_) => future::pending().await,
            }
        };
        let timer = async {
            timer.await;
            Wake::Timer
        };
        // `race` picks fairly among ready sources.
        future::race(inbound, future::race(timer, requests)).await
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn on_request(&mut self, r: Request) {
        let now = self.now();
        match r {
            Request::Input(input) => {
                self.remember_auth(&input);
                self.m.handle(now, input);
            }
            Request::Call {
                call,
                tool,
                arguments,
                timeout,
                reply,
            } => {
                self.calls.insert(call, reply);
                self.m.handle(
                    now,
                    Input::CallTool {
                        call,
                        tool,
                        arguments,
                        timeout,
                    },
                );
            }
            Request::Connect {
                input,
                config,
                reply,
            } => {
                self.remember_auth(&input);
                let before = self.m.last_round();
                self.m.handle(now, input);
                // `Connect` and `Reload` always open a round, `Sync` when it starts a server:
                // a new latest round is theirs. No round: `reply` is dropped (the handle
                // reads that as "no report").
                let after = self.m.last_round();
                if let Some(round) = after.filter(|_| after != before) {
                    self.startup_waiters.insert(round, (reply, config));
                }
            }
            Request::Shutdown { reply } => self.begin_shutdown(reply),
            Request::Disconnect { server, reply } => self.on_disconnect(server, reply),
            Request::Refresh { server, reply } => self.on_refresh(server, reply),
        }
    }

    fn begin_shutdown(&mut self, reply: Sender<()>) {
        let now = self.now();
        self.m.handle(now, Input::DisconnectAll);
        self.shutdown = Some(reply);
    }

    fn remember_auth(&mut self, input: &Input) {
        let specs: &[ServerSpec] = match input {
            Input::Connect { servers } | Input::Reload { servers } | Input::Sync { servers } => {
                servers
            }
            _ => return,
        };
        for s in specs {
            match &s.config.auth {
                Some(a) => self.auth.insert(s.name.clone(), a.clone()),
                None => self.auth.remove(&s.name),
            };
        }
    }

    fn on_inbound(&mut self, inbound: Inbound) {
        match inbound {
            Inbound::Transport(conn, event) => self.on_transport(conn, event),
            Inbound::Internal(i) => self.on_internal(i),
        }
    }

    fn on_transport(&mut self, conn: ConnId, event: TransportEvent) {
        if matches!(
            event,
            TransportEvent::Closed { .. } | TransportEvent::Failed { .. }
        ) {
            // The transport reaped itself; forget the handle without closing it again.
            if let Some(t) = self.transports.remove(&conn) {
                self.close_in_background(conn, t);
            }
        }
        let now = self.now();
        self.m.handle(now, Input::Transport { conn, event });
    }

    fn on_internal(&mut self, i: Internal) {
        let now = self.now();
        match i {
            Internal::Opened(conn, transport) => {
                if self.opening.remove(&conn).is_some() {
                    self.transports.insert(conn, transport);
                    self.m.handle(
                        now,
                        Input::Transport {
                            conn,
                            event: TransportEvent::Opened,
                        },
                    );
                } else {
                    // Abandoned while it was starting: close what it started.
                    self.close_in_background(conn, transport);
                }
            }
            Internal::OpenFailed(conn, error) => {
                if self.opening.remove(&conn).is_some() {
                    self.m.handle(
                        now,
                        Input::Transport {
                            conn,
                            event: TransportEvent::Failed { error },
                        },
                    );
                }
                self.forget_if_gone(conn);
            }
            Internal::CacheLoaded { server, key, tools } => {
                self.m
                    .handle(now, Input::CacheLoaded { server, key, tools });
            }
            Internal::Closed(conn) => {
                self.closing.remove(&conn);
                self.forget_if_gone(conn);
            }
            Internal::Aborted(conn) => {
                self.aborting.remove(&conn);
                self.forget_if_gone(conn);
            }
        }
    }

    fn close_in_background(&mut self, conn: ConnId, t: Transport) {
        let tx = self.inbound_tx.clone();
        let task = self.cfg.spawner.spawn(async move {
            t.close().await;
            let _ = tx.send(Inbound::Internal(Internal::Closed(conn))).await;
        });
        self.closing.insert(conn, task);
    }

    fn perform_outputs(&mut self) {
        let mut refresh = false;
        // Rebuilding the view costs O(view): only when it changed, not on every status change.
        let mut refresh_tools = false;
        // Events go out after the shared snapshot is refreshed, so a subscriber that reacts
        // to `ToolsChanged` reads the new view.
        let mut events = Vec::new();
        // Nobody listens: no event is built (a startup report is then moved, not copied).
        let subscribed = self.subscribers.lock().is_ok_and(|s| !s.is_empty());
        let mut replies = Vec::new();
        let mut call_replies = Vec::new();
        while let Some(out) = self.m.poll_output() {
            match out {
                Output::OpenTransport {
                    conn,
                    server,
                    config,
                } => self.open(conn, server, config),
                Output::Send { conn, frame } => {
                    if let Some(t) = self.transports.get(&conn) {
                        if let Err(error) = t.send(frame) {
                            let _ = self.inbound_tx.try_send(Inbound::Transport(
                                conn,
                                TransportEvent::Failed { error },
                            ));
                        }
                    }
                }
                Output::CloseTransport { conn } => {
                    // Cancelling a task that is still resolving secrets or spawning stops it;
                    // if it already spawned, `on_internal` closes what arrives. A conn we do
                    // not hold (already closed, or reaped by itself) is a no-op: the core
                    // also closes a transport whose `Opened` reached it after the attempt's
                    // end (its `Closed` can overtake the spawn's completion).
                    if let Some(task) = self.opening.remove(&conn) {
                        self.abort_opening(conn, task);
                    }
                    if let Some(t) = self.transports.remove(&conn) {
                        self.remember_failed_tail(conn, &t);
                        self.close_in_background(conn, t);
                    }
                }
                Output::LoadCache { server, key } => match &self.cfg.cache {
                    Some(cache) => {
                        let cache = cache.clone();
                        let tx = self.inbound_tx.clone();
                        self.background.push(self.cfg.spawner.spawn(async move {
                            let k = key.clone();
                            let tools =
                                blocking::unblock(move || cache.load(&k, now_unix_ms())).await;
                            let loaded = Internal::CacheLoaded { server, key, tools };
                            let _ = tx.send(Inbound::Internal(loaded)).await;
                        }));
                    }
                    None => {
                        let _ =
                            self.inbound_tx
                                .try_send(Inbound::Internal(Internal::CacheLoaded {
                                    server,
                                    key,
                                    tools: None,
                                }));
                    }
                },
                Output::StoreCache { key, tools, .. } => {
                    if let Some(cache) = &self.cfg.cache {
                        let cache = cache.clone();
                        self.background.push(self.cfg.spawner.spawn(async move {
                            let _ = blocking::unblock(move || {
                                if let Err(e) = cache.store(&key, &tools, now_unix_ms()) {
                                    tracing::warn!(target: "switchboard", server = %key.server, "could not write the tool cache: {e}");
                                }
                            })
                            .await;
                        }));
                    }
                }
                Output::StartupComplete(mut report) => {
                    for (server, error) in &mut report.errors {
                        self.add_failed_tail(server, error);
                    }
                    refresh = true;
                    refresh_tools = true;
                    match (self.startup_waiters.remove(&report.round), subscribed) {
                        (Some((w, config)), true) => {
                            config.add_to(&mut report);
                            replies.push((w, report.clone()));
                            events.push(Event::StartupComplete { report });
                        }
                        (Some((w, config)), false) => {
                            config.add_to(&mut report);
                            replies.push((w, report));
                        }
                        (None, true) => events.push(Event::StartupComplete { report }),
                        (None, false) => {}
                    }
                }
                Output::ToolsChanged { servers } => {
                    refresh = true;
                    refresh_tools = true;
                    self.observe_tools_changed(&servers);
                    if subscribed {
                        events.push(Event::ToolsChanged { servers });
                    }
                }
                Output::StatusChanged { server, status } => {
                    refresh = true;
                    if subscribed {
                        events.push(Event::StatusChanged { server, status });
                    }
                }
                Output::CallCompleted { call, outcome } => {
                    if let Some(reply) = self.calls.remove(&call) {
                        call_replies.push((reply, outcome));
                    }
                }
                Output::Diagnostic {
                    server,
                    level,
                    mut message,
                } => {
                    if let Some(s) = &server {
                        self.add_failed_tail(s, &mut message);
                    }
                    log_diagnostic(server.as_deref(), level, &message);
                    self.observe_diagnostic(server.as_deref(), level, &message);
                    if subscribed {
                        events.push(Event::Diagnostic {
                            server,
                            level,
                            message,
                        });
                    }
                }
                Output::Progress {
                    server,
                    call,
                    progress,
                    total,
                    message,
                } => events.push(Event::Progress {
                    server,
                    call,
                    progress,
                    total,
                    message,
                }),
                Output::ServerLog {
                    server,
                    level,
                    severity,
                    logger,
                    data,
                } => {
                    let text = switchboard_core::manager::log_text(&data);
                    let line = match &logger {
                        Some(l) => format!("[{l}] {text}"),
                        None => text.into_owned(),
                    };
                    log_diagnostic(Some(&server), level, &line);
                    events.push(Event::ServerLog {
                        server,
                        level,
                        severity,
                        logger,
                        data,
                    });
                }
                Output::ReconnectScheduled {
                    server,
                    attempt,
                    delay,
                    error,
                } => {
                    let ms = delay.as_millis();
                    let line = format!("{error}; reconnect attempt {attempt} in {ms} ms");
                    log_diagnostic(Some(&server), switchboard_core::manager::Level::Warn, &line);
                    events.push(Event::ReconnectScheduled {
                        server,
                        attempt,
                        delay,
                        error,
                    })
                }
                Output::ReconnectStarted { server, attempt } => {
                    events.push(Event::ReconnectStarted { server, attempt })
                }
            }
        }
        self.background.retain(|t| !t.is_finished());
        if refresh {
            if let Ok(mut s) = self.shared.lock() {
                if refresh_tools {
                    s.tools = Arc::new(self.m.tools());
                }
                s.servers = self.m.servers();
                self.failed_tails.retain(|name, ft| {
                    s.servers
                        .iter()
                        .any(|st| st.name == *name && st.attempts == ft.attempts)
                });
                for st in &mut s.servers {
                    if let (Some(ft), Some(e)) =
                        (self.failed_tails.get(&st.name), st.last_error.as_mut())
                    {
                        if *e == ft.error {
                            e.push_str(&ft.tail);
                        }
                    }
                }
            }
        }
        for (w, report) in replies {
            let _ = w.try_send(report);
        }
        for (reply, outcome) in call_replies {
            let _ = reply.send(outcome);
        }
        for ev in events {
            self.publish(ev);
        }
    }

    fn open(&mut self, conn: ConnId, server: String, config: TransportConfig) {
        let tx = self.inbound_tx.clone();
        let opts = self.cfg.stdio.clone();
        let http_opts = self.cfg.http.clone();
        let registry = self.cfg.registry.clone();
        let secrets = self.secrets.clone();
        let creds = self.cfg.credentials.clone();
        let auth = self.auth.get(&server).cloned();
        self.conn_server.insert(conn, server.clone());
        let spawner = self.cfg.spawner.clone();
        let task = self.cfg.spawner.spawn(async move {
            let resolved =
                resolve_secrets(&server, config, auth.as_ref(), creds.as_deref(), &secrets).await;
            let msg = match resolved {
                Err(e) => Internal::OpenFailed(conn, e),
                Ok(config) => match HttpTarget::from_config(config.clone()) {
                    // HTTP: Opened once the URL is valid (legacy SSE: once the endpoint event
                    // arrived); see the `http` module docs.
                    Some(target) => {
                        match HttpTransport::open_on(
                            &spawner,
                            &server,
                            target,
                            &http_opts,
                            conn,
                            tx.clone(),
                        )
                        .await
                        {
                            Ok(t) => Internal::Opened(conn, Transport::Http(t)),
                            Err(e) => Internal::OpenFailed(conn, e),
                        }
                    }
                    None => match StdioCommand::from_config(config) {
                        Some(cmd) => match StdioTransport::spawn_on(
                            &spawner,
                            &server,
                            cmd,
                            &opts,
                            &registry,
                            conn,
                            tx.clone(),
                        ) {
                            Ok(t) => Internal::Opened(conn, Transport::Stdio(t)),
                            Err(e) => Internal::OpenFailed(conn, e),
                        },
                        None => Internal::OpenFailed(conn, "unknown transport".into()),
                    },
                },
            };
            let _ = tx.send(Inbound::Internal(msg)).await;
        });
        self.opening.insert(conn, task);
    }

    fn publish(&self, ev: Event) {
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.retain(|s| s.try_send(ev.clone()).is_ok() || !s.is_closed() && !s.is_full());
        }
    }
}

/// The stderr tail of a stdio attempt the core ended with `error` (its `attempts`-th).
struct FailedTail {
    attempts: u32,
    error: String,
    tail: String,
}

/// A `disconnect`/`disconnect_all` waiting for transports to close.
struct CloseWaiter {
    /// `None` until the outputs of the disconnect were performed; then the attempts that
    /// still had something open.
    conns: Option<BTreeSet<ConnId>>,
    /// `None`: every server.
    server: Option<String>,
    reply: Sender<Result<(), ApiError>>,
}

/// A `refresh_tools` waiting for the list it asked for.
struct RefreshWaiter {
    server: String,
    state: RefreshWait,
    reply: Sender<Result<(), ApiError>>,
}

enum RefreshWait {
    /// Another re-list was under way when asked: issue ours once it ends, so the answer is a
    /// list fetched after the request.
    Queued,
    /// Ours is under way on this attempt.
    Issued(ConnId),
    /// The server was still connecting: its first list is the answer.
    FirstList,
}

/// How a re-list ended, seen in the core's outputs.
enum RefreshSeen {
    Applied,
    Failed(String),
}

/// The core's wording of a failed re-list (`Manager::end_refresh`); the previous list stays.
const REFRESH_FAILED_SUFFIX: &str = "; keeping the previous tool list";

impl Driver {
    /// The core closes `conn` itself: if that ended the server's attempt with an error, keep
    /// the server's last stderr lines for that error (issue 4: a server that fails to start
    /// or dies reports them). Transports that end by themselves put them in their own
    /// `Closed`/`Failed` already.
    fn remember_failed_tail(&mut self, conn: ConnId, t: &Transport) {
        let Transport::Stdio(t) = t else { return };
        let tail = t.stderr_tail();
        let Some(server) = self.conn_server.get(&conn) else {
            return;
        };
        let Some(state) = self.m.server_state(server) else {
            return;
        };
        if tail.is_empty() || state.conn == Some(conn) {
            return;
        }
        if let Some(error) = state.last_error {
            self.failed_tails.insert(
                server.clone(),
                FailedTail {
                    attempts: state.attempts,
                    error,
                    tail,
                },
            );
        }
    }

    /// Append the kept stderr tail to an error (or a message ending with it) of that attempt.
    fn add_failed_tail(&self, server: &str, message: &mut String) {
        if let Some(ft) = self.failed_tails.get(server) {
            if message.ends_with(&ft.error) {
                message.push_str(&ft.tail);
            }
        }
    }

    fn on_disconnect(&mut self, server: Option<String>, reply: Sender<Result<(), ApiError>>) {
        let now = self.now();
        match &server {
            Some(name) => {
                if self.m.server_state(name).is_none() {
                    let _ = reply.try_send(Err(ApiError::UnknownServer(name.clone())));
                    return;
                }
                self.m.handle(
                    now,
                    Input::Disconnect {
                        server: name.clone(),
                    },
                );
            }
            None => self.m.handle(now, Input::DisconnectAll),
        }
        self.close_waiters.push(CloseWaiter {
            conns: None,
            server,
            reply,
        });
    }

    fn on_refresh(&mut self, server: String, reply: Sender<Result<(), ApiError>>) {
        let Some(state) = self.m.server_state(&server) else {
            let _ = reply.try_send(Err(ApiError::UnknownServer(server)));
            return;
        };
        let state = match (state.phase, state.conn) {
            ("connected", Some(_)) if self.m.refreshing(&server) => RefreshWait::Queued,
            ("connected", Some(conn)) => {
                let now = self.now();
                self.m.handle(
                    now,
                    Input::RefreshTools {
                        server: server.clone(),
                    },
                );
                RefreshWait::Issued(conn)
            }
            ("opening" | "initializing" | "listing-tools", _) => RefreshWait::FirstList,
            (phase, _) => {
                let reason = state.last_error.unwrap_or_else(|| phase.to_string());
                let _ = reply.try_send(Err(ApiError::NotConnected { server, reason }));
                return;
            }
        };
        self.refresh_waiters.push(RefreshWaiter {
            server,
            state,
            reply,
        });
    }

    /// Cancel an opening task; `Internal::Aborted` reports when it is gone.
    fn abort_opening(&mut self, conn: ConnId, task: Task<()>) {
        let tx = self.inbound_tx.clone();
        let abort = self.cfg.spawner.spawn(async move {
            task.cancel().await;
            let _ = tx.send(Inbound::Internal(Internal::Aborted(conn))).await;
        });
        self.aborting.insert(conn, abort);
    }

    fn conn_is_open(&self, conn: &ConnId) -> bool {
        self.opening.contains_key(conn)
            || self.aborting.contains_key(conn)
            || self.transports.contains_key(conn)
            || self.closing.contains_key(conn)
    }

    fn forget_if_gone(&mut self, conn: ConnId) {
        if !self.conn_is_open(&conn) {
            self.conn_server.remove(&conn);
        }
    }

    fn observe_tools_changed(&mut self, servers: &[String]) {
        for w in &self.refresh_waiters {
            if servers.contains(&w.server) {
                self.refresh_seen
                    .push((w.server.clone(), RefreshSeen::Applied));
            }
        }
    }

    fn observe_diagnostic(
        &mut self,
        server: Option<&str>,
        level: switchboard_core::manager::Level,
        message: &str,
    ) {
        let (Some(server), switchboard_core::manager::Level::Warn) = (server, level) else {
            return;
        };
        let Some(error) = message.strip_suffix(REFRESH_FAILED_SUFFIX) else {
            return;
        };
        if self.refresh_waiters.iter().any(|w| w.server == server) {
            self.refresh_seen
                .push((server.to_string(), RefreshSeen::Failed(error.to_string())));
        }
    }

    /// Answer the waiters whose work is done. True if it issued a queued refresh (its outputs
    /// are then waiting to be performed).
    fn check_waiters(&mut self) -> bool {
        let mut waiters = std::mem::take(&mut self.close_waiters);
        waiters.retain_mut(|w| {
            let conns = w.conns.get_or_insert_with(|| {
                self.conn_server
                    .iter()
                    .filter(|(_, s)| match &w.server {
                        Some(n) => n == *s,
                        None => true,
                    })
                    .map(|(c, _)| *c)
                    .collect()
            });
            conns.retain(|c| self.conn_is_open(c));
            if conns.is_empty() {
                let _ = w.reply.try_send(Ok(()));
                false
            } else {
                true
            }
        });
        self.close_waiters = waiters;

        let seen = std::mem::take(&mut self.refresh_seen);
        let mut issued = false;
        let mut waiters = std::mem::take(&mut self.refresh_waiters);
        waiters.retain_mut(|w| {
            let state = self.m.server_state(&w.server);
            let phase = state.as_ref().map(|s| s.phase);
            let conn = state.as_ref().and_then(|s| s.conn);
            let lost = || {
                let error = state
                    .as_ref()
                    .and_then(|s| s.last_error.clone())
                    .unwrap_or_else(|| "the server was disconnected".to_string());
                Err(ApiError::Refresh {
                    server: w.server.clone(),
                    error,
                })
            };
            let outcome = match w.state {
                RefreshWait::Queued => match conn {
                    Some(c) if phase == Some("connected") => {
                        if !self.m.refreshing(&w.server) {
                            let now = self.clock.now();
                            self.m.handle(
                                now,
                                Input::RefreshTools {
                                    server: w.server.clone(),
                                },
                            );
                            w.state = RefreshWait::Issued(c);
                            issued = true;
                        }
                        None
                    }
                    _ => Some(lost()),
                },
                RefreshWait::Issued(c) => {
                    let ours = seen.iter().find(|(s, _)| *s == w.server).map(|(_, r)| r);
                    if phase != Some("connected") || conn != Some(c) {
                        Some(lost())
                    } else {
                        match ours {
                            Some(RefreshSeen::Failed(error)) => Some(Err(ApiError::Refresh {
                                server: w.server.clone(),
                                error: error.clone(),
                            })),
                            Some(RefreshSeen::Applied) => Some(Ok(())),
                            // Ended without a word (it could not be sent).
                            None if !self.m.refreshing(&w.server) => Some(Ok(())),
                            None => None,
                        }
                    }
                }
                RefreshWait::FirstList => match phase {
                    Some("connected") => Some(Ok(())),
                    Some("opening" | "initializing" | "listing-tools") => None,
                    _ => Some(lost()),
                },
            };
            match outcome {
                Some(result) => {
                    let _ = w.reply.try_send(result);
                    false
                }
                None => true,
            }
        });
        self.refresh_waiters = waiters;
        issued
    }
}

enum Wake {
    Timer,
    Request(Request),
    RequestsClosed,
    Inbound(Inbound),
}

/// What reaches the driver from its transports and its own tasks.
enum Inbound {
    Transport(ConnId, TransportEvent),
    Internal(Internal),
}

impl From<(ConnId, StdioEvent)> for Inbound {
    fn from((conn, event): (ConnId, StdioEvent)) -> Self {
        Inbound::Transport(conn, event.into_transport_event())
    }
}

impl From<(ConnId, TransportEvent)> for Inbound {
    fn from((conn, event): (ConnId, TransportEvent)) -> Self {
        Inbound::Transport(conn, event)
    }
}

fn log_diagnostic(server: Option<&str>, level: switchboard_core::manager::Level, message: &str) {
    use switchboard_core::manager::Level;
    let server = server.unwrap_or("-");
    match level {
        Level::Debug => tracing::debug!(target: "switchboard", server, "{message}"),
        Level::Info => tracing::info!(target: "switchboard", server, "{message}"),
        Level::Warn => tracing::warn!(target: "switchboard", server, "{message}"),
        Level::Error => tracing::error!(target: "switchboard", server, "{message}"),
    }
}
