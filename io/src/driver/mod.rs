//! The driver: one task owns the [`Manager`] and performs what it asks.
//!
//! The loop: drain the core's outputs and perform each command; re-arm the timer to
//! `poll_timeout()`; wait for the first of the timer, a transport event, an internal
//! completion and an API request; feed it in; repeat. Decisions stay in the core — the driver
//! only moves bytes, spawns and kills processes, reads and writes files.
//!
//! - `link`: what the handle and the driver share (requests, snapshot, errors).
//! - `perform`: the core's commands, carried out.
//! - `events`: the core's events, delivered: replies, the shared snapshot, subscribers.
//! - `waiters`: requests, numbered, and answered from the core's completion events.
//! - `peer`: the handlers of what servers ask of the embedder (sampling, elicitation).

mod events;
pub(crate) mod link;
pub(crate) use peer::PeerHandlers;
mod peer;
mod perform;
mod waiters;

use crate::cache::ToolCache;
use crate::events::Subscribers;
use crate::http::{HttpOptions, HttpTransport};
use crate::rt::Spawner;
use crate::secrets::{CredentialProvider, SecretCache};
use crate::stdio::{ProcessRegistry, StdioEvent, StdioOptions, StdioTransport};
use async_channel::{Receiver, Sender};
use async_executor::Task;
use async_io::Timer;
use futures_lite::{future, Stream};
use link::{Request, Shared};
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
use switchboard_core::config::ServerSpec;
use switchboard_core::manager::{
    CallId, ConnId, FrameMeta, Input, Manager, RequestId, TransportEvent,
};
use switchboard_core::tool::ToolDef;
use switchboard_core::{Instant, PeerRequestKey};
use waiters::{CallSlot, CloseWaiter, Waiter};

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

/// An open transport of either kind.
enum Transport {
    Stdio(StdioTransport),
    Http(HttpTransport),
}

impl Transport {
    fn send(&self, frame: bytes::Bytes, meta: FrameMeta) -> Result<(), String> {
        match self {
            Transport::Stdio(t) => t.send(frame),
            Transport::Http(t) => t.send(frame, meta),
        }
    }

    /// Whether the transport has ended or is ending (its terminal event follows).
    fn is_closed(&self) -> bool {
        match self {
            Transport::Stdio(t) => t.is_closed(),
            Transport::Http(t) => t.is_closed(),
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
        catalog: Option<switchboard_core::catalog::Catalog>,
    },
    Closed(ConnId),
    /// An opening task cancelled by `CloseTransport` is gone. If it had finished, its
    /// `Opened`/`OpenFailed` came before this (same channel).
    Aborted(ConnId),
    /// A handler answered a request of a server's.
    PeerAnswered(PeerRequestKey, switchboard_core::protocol::PeerAnswer),
}

pub(crate) struct DriverConfig {
    pub stdio: StdioOptions,
    pub http: HttpOptions,
    pub cache: Option<ToolCache>,
    pub credentials: Option<Arc<dyn CredentialProvider>>,
    /// The token store and the interactive part of OAuth authorization.
    pub authorization: crate::auth::AuthContext,
    pub registry: ProcessRegistry,
    pub spawner: Spawner,
    /// Capacity of the inbound channel (transport events and task completions).
    pub inbound_capacity: usize,
    /// The embedder's handlers of servers' sampling and elicitation requests.
    pub peer: peer::PeerHandlers,
}

pub(crate) struct Driver {
    m: Manager,
    clock: Clock,
    cfg: DriverConfig,
    secrets: Arc<SecretCache>,
    shared: Arc<Mutex<Shared>>,
    subscribers: Subscribers,
    /// `auth` sections by server, from the specs we passed in (the core keeps the unresolved
    /// config; the credential provider needs it at open time).
    auth: BTreeMap<String, Value>,
    /// `oauth` settings by server (a malformed section is logged and ignored).
    oauth: BTreeMap<String, switchboard_core::config::OAuthConfig>,
    /// The authorization state of each HTTP server, kept across its connection attempts.
    auth_layers: BTreeMap<String, Arc<crate::auth::AuthLayer>>,
    /// `headersHelper` commands by server.
    helpers: BTreeMap<String, String>,
    /// Pinned (once, here) so `wait` can poll it as a stream.
    requests: Pin<Box<Receiver<Request>>>,
    /// Everything but the API's requests: transport events of both kinds and completions of
    /// the driver's own tasks, on one channel (one wake-up source to wait on, not three).
    inbound_tx: Sender<Inbound>,
    inbound_rx: Pin<Box<Receiver<Inbound>>>,
    opening: BTreeMap<ConnId, Task<()>>,
    transports: BTreeMap<ConnId, Transport>,
    closing: BTreeMap<ConnId, Task<()>>,
    background: Vec<Task<()>>,
    calls: BTreeMap<CallId, CallSlot>,
    /// The handle's requests in the core, by the id the driver gave them; each is answered
    /// from the one event that completes it.
    waiters: BTreeMap<RequestId, Waiter>,
    next_request: u64,
    shutdown: Option<Sender<()>>,
    /// Which server each attempt that still has something open belongs to.
    conn_server: BTreeMap<ConnId, String>,
    /// Opening tasks being cancelled (see `Internal::Aborted`).
    aborting: BTreeMap<ConnId, Task<()>>,
    /// Disconnects done in the core, waiting for their transports to be reaped.
    close_waiters: Vec<CloseWaiter>,
    /// What the driver tells itself (a failed send, a cache miss without a cache): handled
    /// before waiting again, never through the bounded inbound channel it must not block on.
    local: std::collections::VecDeque<Inbound>,
    /// The running handler of each request of a server's waiting for the embedder.
    peer_tasks: BTreeMap<PeerRequestKey, Task<()>>,
    /// Operations in the core, with the reply each waits on.
    ops: BTreeMap<CallId, crate::rt::OneshotSender<switchboard_core::catalog::OperationOutcome>>,
    /// Which source `wait` looks at first (it rotates).
    turn: usize,
    /// The list a batch's call replies go into, kept empty between batches so answering a
    /// call allocates none.
    spare_call_replies: Vec<events::CallReply>,
}

impl Driver {
    pub(crate) fn new(
        m: Manager,
        clock: Clock,
        cfg: DriverConfig,
        shared: Arc<Mutex<Shared>>,
        subscribers: Subscribers,
        requests: Receiver<Request>,
    ) -> Self {
        let (inbound_tx, inbound_rx) = async_channel::bounded(cfg.inbound_capacity.max(1));
        let secrets = Arc::new(SecretCache::shared().with_registry(cfg.registry.clone()));
        Driver {
            m,
            clock,
            cfg,
            secrets,
            shared,
            subscribers,
            auth: BTreeMap::new(),
            oauth: BTreeMap::new(),
            auth_layers: BTreeMap::new(),
            helpers: BTreeMap::new(),
            requests: Box::pin(requests),
            inbound_tx,
            inbound_rx: Box::pin(inbound_rx),
            opening: BTreeMap::new(),
            transports: BTreeMap::new(),
            closing: BTreeMap::new(),
            background: Vec::new(),
            calls: BTreeMap::new(),
            waiters: BTreeMap::new(),
            next_request: 1,
            shutdown: None,
            conn_server: BTreeMap::new(),
            aborting: BTreeMap::new(),
            close_waiters: Vec::new(),
            local: std::collections::VecDeque::new(),
            peer_tasks: BTreeMap::new(),
            ops: BTreeMap::new(),
            turn: 0,
            spare_call_replies: Vec::new(),
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
            while let Some(next) = self.local.pop_front() {
                self.on_inbound(next);
                self.perform_outputs();
            }
            self.check_close_waiters();
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
                    self.subscribers.close();
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

    /// Waits for the first of a transport event or task completion, the timer and a request
    /// of the handles'. Ready sources are taken in turn: the one looked at first rotates from
    /// one wait to the next, so none is starved. The channels are polled as streams, so the
    /// one that did not fire keeps its registration for a wake-up into the next wait instead
    /// of registering anew.
    async fn wait(&mut self, timer: &mut Timer) -> Wake {
        self.turn = (self.turn + 1) % 3;
        let first = self.turn;
        // Every handle is gone and shutdown is under way: park the requests, or a closed
        // channel would wake us in a busy loop.
        let parked = self.shutdown.is_some() && self.requests.is_closed();
        let (requests, inbound) = (&mut self.requests, &mut self.inbound_rx);
        future::poll_fn(|cx| {
            for i in 0..3 {
                let woke = match (first + i) % 3 {
                    0 => match inbound.as_mut().poll_next(cx) {
                        Poll::Ready(Some(i)) => Some(Wake::Inbound(i)),
                        // The channel cannot end: the driver holds a sender.
                        _ => None,
                    },
                    1 => match Pin::new(&mut *timer).poll(cx) {
                        Poll::Ready(_) => Some(Wake::Timer),
                        Poll::Pending => None,
                    },
                    _ if parked => None,
                    _ => match requests.as_mut().poll_next(cx) {
                        Poll::Ready(Some(r)) => Some(Wake::Request(r)),
                        Poll::Ready(None) => Some(Wake::RequestsClosed),
                        Poll::Pending => None,
                    },
                };
                if let Some(woke) = woke {
                    return Poll::Ready(woke);
                }
            }
            Poll::Pending
        })
        .await
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn on_request(&mut self, r: Request) {
        let now = self.now();
        match r {
            Request::Input(input) => self.m.handle(now, input),
            Request::Call {
                call,
                tool,
                arguments,
                timeout,
                progress,
                reply,
                meta,
            } => {
                let wants_progress = progress.is_some();
                self.calls.insert(call, CallSlot { reply, progress });
                self.m.handle(
                    now,
                    Input::CallTool {
                        call,
                        tool,
                        arguments,
                        timeout,
                        progress: wants_progress,
                        meta,
                    },
                );
            }
            Request::Round {
                round,
                servers,
                config,
                reply,
            } => self.on_round(round, servers, config, reply),
            Request::Shutdown { reply } => self.begin_shutdown(reply),
            Request::Disconnect { server, reply } => self.on_disconnect(server, reply),
            Request::Refresh { server, reply } => self.on_refresh(server, reply),
            Request::Operation {
                call,
                op,
                timeout,
                reply,
            } => {
                self.ops.insert(call, reply);
                self.m.handle(now, Input::Operation { call, op, timeout });
            }
        }
    }

    fn begin_shutdown(&mut self, reply: Sender<()>) {
        let now = self.now();
        // Nobody waits on this request: shutdown ends when every transport is reaped.
        let request = self.next_request_id();
        self.m.handle(now, Input::DisconnectAll { request });
        self.shutdown = Some(reply);
    }

    fn remember_auth(&mut self, specs: &[ServerSpec]) {
        for s in specs {
            match &s.config.auth {
                Some(a) => self.auth.insert(s.name.clone(), a.clone()),
                None => self.auth.remove(&s.name),
            };
            match switchboard_core::config::oauth_config(&s.config) {
                Ok(Some(o)) => {
                    self.oauth.insert(s.name.clone(), o);
                }
                Ok(None) => {
                    self.oauth.remove(&s.name);
                }
                Err(e) => {
                    tracing::warn!(target: "switchboard", server = %s.name, "ignored the oauth settings: {e}");
                    self.oauth.remove(&s.name);
                }
            }
            // Settings may have changed: the next attempt starts from the store again.
            match s.config.extra.get("headersHelper").and_then(Value::as_str) {
                Some(h) => self.helpers.insert(s.name.clone(), h.to_string()),
                None => self.helpers.remove(&s.name),
            };
            self.auth_layers.remove(&s.name);
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
            Internal::CacheLoaded {
                server,
                key,
                tools,
                catalog,
            } => {
                self.m.handle(
                    now,
                    Input::CacheLoaded {
                        server,
                        key,
                        tools,
                        catalog,
                    },
                );
            }
            Internal::Closed(conn) => {
                self.closing.remove(&conn);
                self.forget_if_gone(conn);
            }
            Internal::Aborted(conn) => {
                self.aborting.remove(&conn);
                self.forget_if_gone(conn);
            }
            Internal::PeerAnswered(key, answer) => self.on_peer_answered(key, answer),
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
