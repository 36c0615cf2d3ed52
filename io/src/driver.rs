//! The driver: one task owns the [`Manager`] and performs what it asks.
//!
//! Its loop (quinn's `ConnectionDriver`, str0m's rule): drain `poll_output` and perform each
//! command; re-arm the timer to `poll_timeout()`; wait for the first of the timer, a transport
//! event, an internal completion and an API request; feed it in; repeat. Decisions stay in the
//! core — this file only moves bytes, spawns and kills processes, reads and writes files.

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
use std::collections::BTreeMap;
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
    /// Start a round and answer with its report.
    Connect {
        input: Input,
        reply: Sender<StartupReport>,
    },
    /// Close everything, wait until every process is reaped, then answer and stop.
    Shutdown {
        reply: Sender<()>,
    },
}

/// Events for the embedder (`Switchboard::events`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    StartupComplete {
        report: StartupReport,
    },
    ToolsChanged {
        servers: Vec<String>,
    },
    StatusChanged {
        server: String,
        status: switchboard_core::ServerStatus,
    },
    Diagnostic {
        server: Option<String>,
        level: switchboard_core::manager::Level,
        message: String,
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
    startup_waiters: Vec<Sender<StartupReport>>,
    shutdown: Option<Sender<()>>,
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
        let secrets = Arc::new(SecretCache::new().with_registry(cfg.registry.clone()));
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
            startup_waiters: Vec::new(),
            shutdown: None,
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
            if let Some(reply) = &self.shutdown {
                if self.opening.is_empty() && self.transports.is_empty() && self.closing.is_empty()
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
            Request::Connect { input, reply } => {
                self.remember_auth(&input);
                self.startup_waiters.push(reply);
                self.m.handle(now, input);
            }
            Request::Shutdown { reply } => self.begin_shutdown(reply),
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
            }
            Internal::CacheLoaded { server, key, tools } => {
                self.m
                    .handle(now, Input::CacheLoaded { server, key, tools });
            }
            Internal::Closed(conn) => {
                self.closing.remove(&conn);
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
                    // Dropping a task that is still resolving secrets or spawning cancels it;
                    // if it already spawned, `on_internal` closes what arrives.
                    self.opening.remove(&conn);
                    if let Some(t) = self.transports.remove(&conn) {
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
                Output::StartupComplete(report) => {
                    refresh = true;
                    refresh_tools = true;
                    let waiter = if self.startup_waiters.is_empty() {
                        None
                    } else {
                        Some(self.startup_waiters.remove(0))
                    };
                    match (waiter, subscribed) {
                        (Some(w), true) => {
                            replies.push((w, report.clone()));
                            events.push(Event::StartupComplete { report });
                        }
                        (Some(w), false) => replies.push((w, report)),
                        (None, true) => events.push(Event::StartupComplete { report }),
                        (None, false) => {}
                    }
                }
                Output::ToolsChanged { servers } => {
                    refresh = true;
                    refresh_tools = true;
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
                    message,
                } => {
                    log_diagnostic(server.as_deref(), level, &message);
                    if subscribed {
                        events.push(Event::Diagnostic {
                            server,
                            level,
                            message,
                        });
                    }
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
