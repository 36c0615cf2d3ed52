//! The HTTP transports: MCP Streamable HTTP (`type: "http"`, MCP 2025-11-25) and the legacy
//! HTTP+SSE transport (`type: "sse"`, MCP 2024-11-05), beside stdio as the shell's other
//! transport kind. The core does not know which one it talks to: it sees the same
//! `Opened`, `Frame`, `Closed`, `Failed` events.
//!
//! # Shape
//!
//! [`HttpTransport::open`] validates the URL and headers and starts one actor task that owns
//! everything the transport does: its [`client::HttpClient`] (and so every socket), the POST
//! tasks in flight, the GET stream. [`HttpTransport::close`] stops the actor, which cancels
//! every request, sends the session `DELETE` (bounded by `close_timeout`), closes every
//! connection and returns; nothing it started outlives it. Dropping the handle cancels the
//! actor (no `DELETE`, but no socket or task survives either).
//!
//! # When `Opened` is reported
//!
//! - Streamable HTTP: as soon as the URL and headers are valid. There is nothing to hold open
//!   before the first POST (a connection made early could be closed by the server before the
//!   `initialize` goes out), and the first POST reports an unreachable server precisely
//!   ("connection refused by 127.0.0.1:9"), as a `Failed` event, within the core's connect
//!   timeout.
//! - Legacy SSE: after the server's `endpoint` event arrived on the GET stream, because
//!   nothing can be sent before that.
//!
//! # Streamable HTTP
//!
//! Each frame is one POST (`Accept: application/json, text/event-stream`). The answer is one
//! JSON body, an SSE stream (requests and notifications, then the response), or `202` for a
//! notification/response. The `initialize` response's `Mcp-Session-Id` and its negotiated
//! `protocolVersion` are recorded before its frame is passed on, so every later request
//! carries `Mcp-Session-Id` and `MCP-Protocol-Version`. POSTs run concurrently, with one
//! ordering rule: a frame waits until every notification or response sent before it was
//! accepted, so `notifications/initialized` reaches the server before `tools/list` (servers
//! reject requests before it) while concurrent calls still overlap.
//!
//! - A POST stream that breaks before the response is resumed with `GET` + `Last-Event-ID`
//!   after the server's `retry` delay (bounded attempts). If it cannot be resumed, the
//!   transport reports `TransportEvent::RequestFailed` for the request, so the call fails now
//!   rather than at its timeout.
//! - A `404` to a request that carried a session id starts a new session once: the transport
//!   replays the client's `initialize` and `notifications/initialized` (their answers are not
//!   passed on: the core's session continues), reports `TransportEvent::SessionRenewed` (the
//!   core re-lists the tools) and retries the request. Concurrent 404s share one
//!   re-initialization.
//! - After `notifications/initialized` is accepted, a GET stream listens for server-initiated
//!   messages (`405`: the server has none), resumed with `Last-Event-ID` when it breaks. The
//!   frames after the `initialized` wait (at most 2 s) until the server answered that GET, so
//!   a message about a later request (even the response of a resumed one, which some servers
//!   send on "the" GET stream) finds it open.
//! - Outgoing frames wait in a bounded queue (`max_write_queue` bytes, 4,096 frames); a
//!   transport that stops taking them fails that server with an error saying so.
//! - `notifications/cancelled` for a request in flight also aborts that request's POST, so a
//!   response stream that never ends does not linger; every POST also has a ceiling
//!   (`max_request_duration`).
//! - Close sends `DELETE` with the session id.
//!
//! # Fallback to legacy SSE
//!
//! When the first POST (the `initialize`) is answered `400`, `404` or `405`, the server is an
//! older one that only speaks the legacy transport on the same URL: the transport GETs that
//! URL as an SSE stream, waits for `endpoint`, and carries on with the legacy transport (the
//! `initialize` is sent again there). It says so twice: a tracing warning, and a
//! `TransportEvent::Notice` passed to the core, which shows it to the embedder as a warning
//! `Diagnostic` of that server.
//!
//! # Errors
//!
//! - Unreachable server (DNS, refused, TLS, connect timeout) or `401`/`403` with no
//!   authorization layer: `Failed` with the reason (`HTTP 401: <body> (authentication
//!   required; WWW-Authenticate: ...)`); the core decides about reconnecting.
//! - Any other error status, an exchange that broke after the connection was made, or a
//!   response larger than `max_message_len`, for one request: `RequestFailed` for that
//!   request (`HTTP 500: <first 200 characters>`), which the core fails in those words —
//!   never as a server's JSON-RPC error; the transport stays. The `initialize` too: the
//!   core decides that its failure ends the attempt, and closes the transport.
//! - Refused credentials the authorization layer could not fix: `Unauthorized` for that
//!   frame; the transport stays, and the core decides whether the request or the attempt
//!   ends.
//! - Outgoing frames come with the core's `FrameMeta` (request id, method, the request a
//!   cancellation names): the transport never parses what it sends.
//! - Legacy: the SSE stream ending is `Closed`.
//!
//! # Layout
//!
//! - `actor`: the task that owns a transport, starts a POST per frame and tears down.
//! - `streamable`: one frame over Streamable HTTP, sessions, resumption, the GET stream.
//! - `legacy`: connecting to a legacy HTTP+SSE server and posting to its endpoint.
//! - `framing`: what a frame is, the bodies the transport makes and reads, SSE into frames.
//! - [`client`]: the hyper/rustls connection layer; [`sse`]: the event-stream parser.

mod actor;
pub mod client;
mod connect;
mod framing;
mod legacy;
pub mod proxy;
mod redirect;
pub mod sse;
mod streamable;
mod tls;

use crate::rt::Spawner;
use async_channel::Sender;
use async_executor::Task;
use bytes::Bytes;
use client::{HttpClient, Url};
use futures_lite::future;
use http::{HeaderName, HeaderValue};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_core::config::TransportConfig;
use switchboard_core::manager::{FrameMeta, TransportEvent};

pub(crate) use crate::units::{human_size, MIB};
/// How much of an error body is read (the message keeps 200 characters of it).
const ERROR_BODY_PREFIX: usize = 4096;
/// How long an error body may take to arrive.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(2);
/// How much of a `202`/legacy POST answer body is read and ignored.
const IGNORED_BODY_LIMIT: usize = 64 * 1024;
/// Frames waiting for the transport to take them, at most (besides their bytes,
/// [`HttpOptions::max_write_queue`]).
const MAX_QUEUED_FRAMES: usize = 4096;
/// Messages from a transport's tasks to its actor, at most; a task waits while it is full.
const INTERNAL_QUEUE: usize = 64;

/// Tuning for HTTP transports. `Default` gives the values noted on each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Largest JSON body or SSE event accepted (16 MiB, like a stdio frame).
    pub max_message_len: usize,
    /// TCP connect plus TLS handshake, per connection (30 s; the core's connect timeout
    /// usually fires first and closes the transport).
    pub connect_timeout: Duration,
    /// Ceiling on one POST, from sending it to the end of its response stream (10 min). The
    /// core's call timeouts are the real limits; this one only guarantees nothing hangs.
    pub max_request_duration: Duration,
    /// How long close waits for the session `DELETE` (2 s).
    pub close_timeout: Duration,
    /// Reconnection delay when the server sent no `retry` (1 s).
    pub default_retry: Duration,
    /// Attempts to resume a broken stream, in a row (5).
    pub max_resume_attempts: u32,
    /// Idle keep-alive connections kept per origin (16).
    pub max_idle_per_origin: usize,
    /// Connections busy at once, per transport (128; at least 4): a request beyond it waits
    /// for one to come free instead of opening another socket, so thousands of concurrent
    /// calls share a bounded number of file descriptors. An open SSE stream (the GET stream,
    /// a streamed answer) keeps its connection busy while it lasts.
    pub max_busy_connections: usize,
    /// Bytes of outgoing frames waiting for the transport to take them (16 MiB, like the
    /// stdio write queue): a transport that stops taking frames fails with an error saying
    /// so, instead of the queue growing.
    pub max_write_queue: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_message_len: 16 * MIB,
            connect_timeout: Duration::from_secs(30),
            max_request_duration: Duration::from_secs(600),
            close_timeout: Duration::from_secs(2),
            default_retry: Duration::from_secs(1),
            max_resume_attempts: 5,
            max_idle_per_origin: 16,
            max_busy_connections: 128,
            max_write_queue: 16 * MIB,
        }
    }
}

/// Which HTTP transport a config asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpKind {
    /// `type: "http"`: Streamable HTTP, falling back to legacy SSE when the server is one.
    Streamable,
    /// `type: "sse"`: the legacy HTTP+SSE transport.
    LegacySse,
}

/// A resolved HTTP or SSE config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    /// Streamable HTTP or legacy SSE.
    pub kind: HttpKind,
    /// The endpoint URL (variables expanded).
    pub url: String,
    /// Headers sent with every request (secrets resolved).
    pub headers: BTreeMap<String, String>,
}

impl HttpTarget {
    /// The target of a resolved config; `None` for stdio configs.
    pub fn from_config(config: TransportConfig) -> Option<Self> {
        match config {
            TransportConfig::Http { url, headers } => Some(HttpTarget {
                kind: HttpKind::Streamable,
                url,
                headers,
            }),
            TransportConfig::Sse { url, headers } => Some(HttpTarget {
                kind: HttpKind::LegacySse,
                url,
                headers,
            }),
            TransportConfig::Stdio { .. } => None,
        }
    }
}

/// Sends one event on the driver's channel, waiting while it is full.
type SendEvent = Box<dyn Fn(TransportEvent) -> future::Boxed<()> + Send + Sync>;

/// Reports events once the transport is running; drops everything after the terminal event.
/// Every report waits while the driver's inbound channel is full, so a server that floods us
/// is held back at its socket instead of filling memory.
struct Emitter {
    send: SendEvent,
    ended: AtomicBool,
}

impl Emitter {
    async fn emit(&self, event: TransportEvent) {
        if !self.ended.load(Ordering::Acquire) {
            (self.send)(event).await;
        }
    }

    async fn frame(&self, frame: Bytes) {
        self.emit(TransportEvent::Frame(frame)).await;
    }

    async fn notice(&self, message: String) {
        self.emit(TransportEvent::Notice { message }).await;
    }

    /// The core fails request `id` at once, in the transport's words.
    async fn request_failed(&self, id: u64, error: String) {
        self.emit(TransportEvent::RequestFailed { id, error }).await;
    }

    async fn session_renewed(&self) {
        self.emit(TransportEvent::SessionRenewed).await;
    }

    async fn end(&self, event: TransportEvent) {
        if !self.ended.swap(true, Ordering::AcqRel) {
            (self.send)(event).await;
        }
    }
}

#[derive(Debug, Default)]
struct Session {
    id: Option<String>,
    protocol_version: Option<String>,
    /// The client's `initialize` frame, replayed when the session expires.
    init_frame: Option<Bytes>,
    /// An `initialize` POST succeeded once (no fallback after that).
    initialized: bool,
}

/// What tasks tell the actor.
enum Internal {
    /// POST task `n` finished.
    Done(u64),
    /// The transport cannot go on.
    Fatal(String),
    /// The legacy SSE stream ended.
    Ended(String),
    /// `notifications/initialized` was accepted: time to open the GET stream.
    Initialized,
    /// The first POST says this is not a Streamable HTTP server.
    Fallback {
        frame: Bytes,
        info: framing::FrameInfo,
        why: String,
    },
}

struct Inner {
    server: String,
    url: Url,
    headers: Vec<(HeaderName, HeaderValue)>,
    client: HttpClient,
    opts: HttpOptions,
    emit: Emitter,
    session: Mutex<Session>,
    /// Serializes re-initialization after a 404.
    reinit: async_lock::Mutex<()>,
    internal: Sender<Internal>,
    spawner: Spawner,
    /// The server's authorization: the `Authorization` header, and what to do about a
    /// `401`/`403` (`None`: the transport sends the configured headers only).
    auth: Option<Arc<crate::auth::AuthLayer>>,
}

/// A running HTTP transport. See the module docs.
pub struct HttpTransport {
    server: String,
    frames: Sender<(Bytes, FrameMeta)>,
    /// Bytes of frames in `frames` (the actor subtracts what it takes).
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    close: Sender<()>,
    actor: Option<Task<()>>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// Validates `target` and starts the transport; for legacy SSE, also waits for the
    /// `endpoint` event. Events go to `events` tagged with `tag`: frames, then at most one
    /// `Closed` or `Failed` (`Opened` is the caller's to report when this returns `Ok`).
    /// Cancel-safe: dropping the future closes whatever it opened.
    pub async fn open<T>(
        server: &str,
        target: HttpTarget,
        opts: &HttpOptions,
        tag: T,
        events: Sender<(T, TransportEvent)>,
    ) -> Result<HttpTransport, String>
    where
        T: Clone + Send + Sync + 'static,
    {
        Self::open_on(&Spawner::default(), server, target, opts, None, tag, events).await
    }

    /// [`open`](Self::open) with the transport's tasks on `spawner`, sending
    /// `M::from((tag, event))` (the driver's channel carries other inputs too), authorized
    /// by `auth` when given.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn open_on<T, M>(
        spawner: &Spawner,
        server: &str,
        target: HttpTarget,
        opts: &HttpOptions,
        auth: Option<Arc<crate::auth::AuthLayer>>,
        tag: T,
        events: Sender<M>,
    ) -> Result<HttpTransport, String>
    where
        T: Clone + Send + Sync + 'static,
        M: From<(T, TransportEvent)> + Send + 'static,
    {
        let url = Url::parse(&target.url).map_err(|e| format!("server \"{server}\": {e}"))?;
        let mut headers = Vec::new();
        for (name, value) in &target.headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("server \"{server}\": invalid header name \"{name}\""))?;
            let v = HeaderValue::from_str(value).map_err(|_| {
                format!("server \"{server}\": the value of header \"{name}\" is not a valid header value")
            })?;
            headers.push((n, v));
        }
        let (internal_tx, internal_rx) = async_channel::bounded(INTERNAL_QUEUE);
        let inner = Arc::new(Inner {
            server: server.to_string(),
            url,
            headers,
            client: HttpClient::new(
                opts.connect_timeout,
                opts.max_idle_per_origin,
                opts.max_busy_connections,
            )
            .with_spawner(spawner.clone()),
            spawner: spawner.clone(),
            opts: opts.clone(),
            emit: Emitter {
                send: Box::new(move |ev| {
                    let (events, message) = (events.clone(), M::from((tag.clone(), ev)));
                    Box::pin(async move {
                        let _ = events.send(message).await;
                    })
                }),
                ended: AtomicBool::new(false),
            },
            session: Mutex::new(Session::default()),
            reinit: async_lock::Mutex::new(()),
            internal: internal_tx,
            auth,
        });
        let mode = match target.kind {
            HttpKind::Streamable => Mode::Streamable,
            HttpKind::LegacySse => {
                let legacy = legacy::connect(&inner).await?;
                Mode::Legacy(legacy)
            }
        };
        let (frames_tx, frames_rx) = async_channel::bounded(MAX_QUEUED_FRAMES);
        let (close_tx, close_rx) = async_channel::bounded(1);
        let queued = Arc::new(AtomicUsize::new(0));
        let frames = actor::Frames {
            rx: frames_rx,
            queued: queued.clone(),
        };
        let actor = spawner.spawn(actor::run(inner, mode, frames, close_rx, internal_rx));
        Ok(HttpTransport {
            server: server.to_string(),
            frames: frames_tx,
            queued,
            max_queued: opts.max_write_queue,
            close: close_tx,
            actor: Some(actor),
        })
    }

    /// Queues one frame; `meta` says what it is (the transport never parses it). Never
    /// blocks. Fails when the transport is closed, or when it has not taken the frames
    /// queued before (more than [`HttpOptions::max_write_queue`] bytes of them, or 4,096).
    pub fn send(&self, frame: Bytes, meta: FrameMeta) -> Result<(), String> {
        let len = frame.len();
        let before = self.queued.fetch_add(len, Ordering::AcqRel);
        let full = || {
            format!(
                "server \"{}\": the HTTP transport is not taking frames ({} waiting to be sent, the limit is {})",
                self.server,
                human_size(before),
                human_size(self.max_queued)
            )
        };
        if before + len > self.max_queued {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            return Err(full());
        }
        self.frames.try_send((frame, meta)).map_err(|e| {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            match e {
                async_channel::TrySendError::Full(_) => full(),
                async_channel::TrySendError::Closed(_) => {
                    format!("server \"{}\": the HTTP transport is closed", self.server)
                }
            }
        })
    }

    /// Whether the transport takes no more frames: it ended (and sent its one terminal
    /// event) or is closing. A frame refused for this reason needs no report of its own.
    pub fn is_closed(&self) -> bool {
        self.frames.is_closed()
    }

    /// Bytes of frames waiting for the transport to take them.
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Aborts every request and stream, ends the session (`DELETE`, bounded), closes every
    /// connection, and returns when nothing is left running.
    pub async fn close(mut self) {
        self.close.close();
        if let Some(actor) = self.actor.take() {
            actor.await;
        }
    }

    /// The server name this transport was opened for.
    pub fn server(&self) -> &str {
        &self.server
    }
}

struct Legacy {
    endpoint: Url,
    reader: Task<()>,
}

enum Mode {
    Streamable,
    Legacy(Legacy),
}
