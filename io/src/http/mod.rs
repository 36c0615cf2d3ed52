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
//!   after the server's `retry` delay (bounded attempts). If it cannot be resumed, the request
//!   gets a JSON-RPC error response from the transport, so the call fails now rather than at
//!   its timeout.
//! - A `404` to a request that carried a session id starts a new session once: the transport
//!   replays the client's `initialize` and `notifications/initialized` (their answers are not
//!   passed on: the core's session continues) and retries the request. Concurrent 404s share
//!   one re-initialization.
//! - After `notifications/initialized` is accepted, a GET stream listens for server-initiated
//!   messages (`405`: the server has none), resumed with `Last-Event-ID` when it breaks.
//! - `notifications/cancelled` for a request in flight also aborts that request's POST, so a
//!   response stream that never ends does not linger; every POST also has a ceiling
//!   (`max_request_duration`).
//! - Close sends `DELETE` with the session id.
//!
//! # Fallback to legacy SSE
//!
//! When the first POST (the `initialize`) is answered `400`, `404` or `405`, the transport
//! does what the specification's backwards-compatibility section says: GET the same URL as an
//! SSE stream, wait for `endpoint`, and carry on with the legacy transport (the `initialize`
//! is sent again there). It says so twice: a tracing warning, and a
//! `TransportEvent::Notice` passed to the core, which shows it to the embedder as a warning
//! `Diagnostic` of that server.
//!
//! # Errors
//!
//! - Unreachable server (DNS, refused, TLS, connect timeout) or `401`/`403`: `Failed` with the
//!   reason (`HTTP 401: <body> (authentication required; WWW-Authenticate: ...)`); the core
//!   decides about reconnecting.
//! - Any other error status, an exchange that broke after the connection was made, or a
//!   response larger than `max_message_len`, for one request: that request gets a JSON-RPC
//!   error response (`HTTP 500: <first 200 characters>`); the transport stays. For the
//!   `initialize` it is `Failed`.
//! - Legacy: the SSE stream ending is `Closed`.

pub mod client;
pub mod sse;

use crate::rt::Spawner;
use async_channel::{Receiver, Sender};
use async_io::Timer;
use bytes::Bytes;
use client::{Body, HttpClient, HttpError, Response, Url};
use futures_lite::future;
use http::{HeaderName, HeaderValue, Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use smol::Task;
use sse::{SseEvent, SseParser};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_core::config::TransportConfig;
use switchboard_core::manager::TransportEvent;

const MIB: usize = 1024 * 1024;
/// How much of an error body is read (the message keeps 200 characters of it).
const ERROR_BODY_PREFIX: usize = 4096;
/// How long an error body may take to arrive.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(2);
/// How long a POST stream may stay open after it delivered its response.
const AFTER_RESPONSE_WAIT: Duration = Duration::from_secs(5);
/// How much of a `202`/legacy POST answer body is read and ignored.
const IGNORED_BODY_LIMIT: usize = 64 * 1024;

/// Tuning for HTTP transports. `Default` gives the documented values.
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

/// `n` bytes in words ("16 MiB").
#[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` is newer than the workspace MSRV
pub(crate) fn human_size(n: usize) -> String {
    if n >= MIB && n % MIB == 0 {
        format!("{} MiB", n / MIB)
    } else if n >= 1024 && n % 1024 == 0 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// Reports events once the transport is running; drops everything after the terminal event.
struct Emitter {
    send: Box<dyn Fn(TransportEvent) + Send + Sync>,
    ended: AtomicBool,
}

impl Emitter {
    fn frame(&self, frame: Bytes) {
        if !self.ended.load(Ordering::Acquire) {
            (self.send)(TransportEvent::Frame(frame));
        }
    }

    fn notice(&self, message: String) {
        if !self.ended.load(Ordering::Acquire) {
            (self.send)(TransportEvent::Notice { message });
        }
    }

    fn end(&self, event: TransportEvent) {
        if !self.ended.swap(true, Ordering::AcqRel) {
            (self.send)(event);
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
    Fallback { frame: Bytes, why: String },
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
    reinit: smol::lock::Mutex<()>,
    internal: Sender<Internal>,
    spawner: Spawner,
}

/// A running HTTP transport. See the module docs.
pub struct HttpTransport {
    server: String,
    frames: Sender<Bytes>,
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
        Self::open_on(&Spawner::default(), server, target, opts, tag, events).await
    }

    /// [`open`](Self::open) with the transport's tasks on `spawner`, sending
    /// `M::from((tag, event))` (the driver's channel carries other inputs too).
    pub(crate) async fn open_on<T, M>(
        spawner: &Spawner,
        server: &str,
        target: HttpTarget,
        opts: &HttpOptions,
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
        let (internal_tx, internal_rx) = async_channel::unbounded();
        let inner = Arc::new(Inner {
            server: server.to_string(),
            url,
            headers,
            client: HttpClient::new(opts.connect_timeout, opts.max_idle_per_origin)
                .with_spawner(spawner.clone()),
            spawner: spawner.clone(),
            opts: opts.clone(),
            emit: Emitter {
                send: Box::new(move |ev| {
                    let _ = events.try_send(M::from((tag.clone(), ev)));
                }),
                ended: AtomicBool::new(false),
            },
            session: Mutex::new(Session::default()),
            reinit: smol::lock::Mutex::new(()),
            internal: internal_tx,
        });
        let mode = match target.kind {
            HttpKind::Streamable => Mode::Streamable,
            HttpKind::LegacySse => {
                let legacy = legacy_connect(&inner).await?;
                Mode::Legacy(legacy)
            }
        };
        let (frames_tx, frames_rx) = async_channel::unbounded();
        let (close_tx, close_rx) = async_channel::bounded(1);
        let actor = spawner.spawn(run(inner, mode, frames_rx, close_rx, internal_rx));
        Ok(HttpTransport {
            server: server.to_string(),
            frames: frames_tx,
            close: close_tx,
            actor: Some(actor),
        })
    }

    /// Queues one frame. Never blocks.
    pub fn send(&self, frame: Bytes) -> Result<(), String> {
        self.frames
            .try_send(frame)
            .map_err(|_| format!("server \"{}\": the HTTP transport is closed", self.server))
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

/// What an outgoing frame is, as far as the transport cares.
#[derive(Debug, Default, Clone)]
struct FrameInfo {
    method: Option<String>,
    /// The request id (JSON text) when the frame is a request.
    request_id: Option<String>,
    /// For `notifications/cancelled`: the id (JSON text) of the request it cancels.
    cancels: Option<String>,
}

impl FrameInfo {
    fn of(frame: &[u8]) -> FrameInfo {
        #[derive(Deserialize)]
        struct Peek {
            #[serde(default)]
            id: Option<Value>,
            #[serde(default)]
            method: Option<String>,
            #[serde(default)]
            params: Option<Params>,
        }
        #[derive(Deserialize)]
        struct Params {
            #[serde(default, rename = "requestId")]
            request_id: Option<Value>,
        }
        let Ok(p) = serde_json::from_slice::<Peek>(frame) else {
            return FrameInfo::default();
        };
        let cancels = match (&p.method, p.params) {
            (Some(m), Some(params)) if m == "notifications/cancelled" => {
                params.request_id.map(|id| id.to_string())
            }
            _ => None,
        };
        FrameInfo {
            request_id: match (&p.method, p.id) {
                (Some(_), Some(id)) if !id.is_null() => Some(id.to_string()),
                _ => None,
            },
            method: p.method,
            cancels,
        }
    }

    fn is_request(&self) -> bool {
        self.request_id.is_some()
    }

    fn is_initialize(&self) -> bool {
        self.is_request() && self.method.as_deref() == Some("initialize")
    }
}

/// The id (JSON text) of a response frame; `None` for requests and notifications.
fn response_id(frame: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Peek {
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    let p: Peek = serde_json::from_slice(frame).ok()?;
    match (p.method, p.id) {
        (None, Some(id)) if !id.is_null() => Some(id.to_string()),
        _ => None,
    }
}

/// The `protocolVersion` of an `initialize` result.
fn negotiated_version(frame: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Peek {
        result: Option<InitResult>,
    }
    #[derive(Deserialize)]
    struct InitResult {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    serde_json::from_slice::<Peek>(frame)
        .ok()?
        .result?
        .protocol_version
}

/// A JSON-RPC error response for request `id` (JSON text), made by the transport.
fn error_response(id: &str, message: &str) -> Bytes {
    let id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
    let v = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32000, "message": message},
    });
    Bytes::from(v.to_string())
}

fn initialized_notification() -> Bytes {
    Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
}

/// How one POST went wrong.
enum PostError {
    /// The transport cannot go on (unreachable, authentication, the `initialize` failed).
    Fatal(String),
    /// Only this request failed; it gets an error response.
    Request(String),
    /// Not a Streamable HTTP server: fall back to legacy SSE.
    Fallback(String),
}

/// An unreachable server ends the transport; an exchange that broke after the connection was
/// made fails only its request (unless it was the `initialize`).
fn exchange_error(e: HttpError, initialize: bool) -> PostError {
    match e {
        HttpError::Connect(m) => PostError::Fatal(m),
        other if initialize => PostError::Fatal(other.to_string()),
        other => PostError::Request(other.to_string()),
    }
}

async fn with_timeout<F: Future>(limit: Duration, fut: F) -> Option<F::Output> {
    future::or(async { Some(fut.await) }, async {
        Timer::after(limit).await;
        None
    })
    .await
}

fn content_type(resp: &Response) -> String {
    resp.headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// `HTTP <status>: <first 200 characters of the body>`, plus the authentication challenge.
async fn status_error(resp: &mut Response) -> String {
    let prefix = resp
        .body
        .read_prefix(ERROR_BODY_PREFIX, ERROR_BODY_WAIT)
        .await;
    let text = String::from_utf8_lossy(&prefix);
    let text = text.trim();
    let status = resp.status;
    let mut msg = if text.is_empty() {
        format!(
            "HTTP {}: {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("(no body)")
        )
    } else {
        let mut t: String = text.chars().take(200).collect();
        if t.len() < text.len() {
            t.push('…');
        }
        format!("HTTP {}: {t}", status.as_u16())
    };
    if status == StatusCode::UNAUTHORIZED {
        msg.push_str(" (authentication required");
        if let Some(challenge) = resp
            .headers
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
        {
            msg.push_str("; WWW-Authenticate: ");
            msg.push_str(challenge);
        }
        msg.push(')');
    } else if status == StatusCode::FORBIDDEN {
        msg.push_str(" (access denied)");
    }
    msg
}

impl Inner {
    fn session_headers(&self) -> (Option<String>, Option<String>) {
        let s = self.session.lock().unwrap_or_else(|e| e.into_inner());
        (s.id.clone(), s.protocol_version.clone())
    }

    /// The configured headers plus ours.
    fn headers_with(
        &self,
        extra: &[(&'static str, &str)],
        session: &(Option<String>, Option<String>),
    ) -> Vec<(HeaderName, HeaderValue)> {
        let mut h = self.headers.clone();
        let mut set = |name: &'static str, value: &str| {
            if let Ok(v) = HeaderValue::from_str(value) {
                let n = HeaderName::from_static(name);
                h.retain(|(k, _)| k != n);
                h.push((n, v));
            }
        };
        for (name, value) in extra {
            set(name, value);
        }
        if let Some(id) = &session.0 {
            set("mcp-session-id", id);
        }
        if let Some(v) = &session.1 {
            set("mcp-protocol-version", v);
        }
        if !self
            .headers
            .iter()
            .any(|(k, _)| k == http::header::USER_AGENT)
        {
            h.push((
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("switchboard/", env!("CARGO_PKG_VERSION"))),
            ));
        }
        h
    }

    fn record_session(&self, resp: &Response) {
        let Some(id) = resp
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        else {
            return;
        };
        if id.is_empty() || !id.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            tracing::warn!(target: "switchboard::http", server = %self.server, "ignored an Mcp-Session-Id with characters outside visible ASCII");
            return;
        }
        self.session.lock().unwrap_or_else(|e| e.into_inner()).id = Some(id.to_string());
    }

    fn record_version(&self, frame: &[u8]) {
        if let Some(v) = negotiated_version(frame) {
            self.session
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .protocol_version = Some(v);
        }
    }

    async fn post(
        &self,
        url: &Url,
        frame: &Bytes,
        session: &(Option<String>, Option<String>),
    ) -> Result<Response, HttpError> {
        let headers = self.headers_with(
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ],
            session,
        );
        self.client
            .request(Method::POST, url, &headers, frame.clone())
            .await
    }

    async fn get_stream(&self, last_event_id: Option<&str>) -> Result<Response, HttpError> {
        let session = self.session_headers();
        let mut extra = vec![("accept", "text/event-stream")];
        if let Some(id) = last_event_id {
            extra.push(("last-event-id", id));
        }
        let headers = self.headers_with(&extra, &session);
        self.client
            .request(Method::GET, &self.url, &headers, Bytes::new())
            .await
    }

    /// One frame over Streamable HTTP, including session recovery.
    async fn post_streamable(&self, frame: &Bytes, info: &FrameInfo) -> Result<(), PostError> {
        let mut renewed = false;
        loop {
            let session = if info.is_initialize() {
                // A new session: never send a stale id with an initialize.
                (None, None)
            } else {
                self.session_headers()
            };
            let mut resp = self
                .post(&self.url, frame, &session)
                .await
                .map_err(|e| exchange_error(e, info.is_initialize()))?;
            let status = resp.status;
            if status == StatusCode::NOT_FOUND && !renewed {
                if let Some(stale) = &session.0 {
                    let _ = resp
                        .body
                        .read_prefix(ERROR_BODY_PREFIX, ERROR_BODY_WAIT)
                        .await;
                    self.reinitialize(stale).await?;
                    renewed = true;
                    continue;
                }
            }
            if !status.is_success() {
                let msg = status_error(&mut resp).await;
                let first = info.is_initialize()
                    && !self
                        .session
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .initialized;
                if first
                    && matches!(
                        status,
                        StatusCode::BAD_REQUEST
                            | StatusCode::NOT_FOUND
                            | StatusCode::METHOD_NOT_ALLOWED
                    )
                {
                    return Err(PostError::Fallback(msg));
                }
                return Err(
                    if info.is_initialize()
                        || status == StatusCode::UNAUTHORIZED
                        || status == StatusCode::FORBIDDEN
                    {
                        PostError::Fatal(msg)
                    } else {
                        PostError::Request(msg)
                    },
                );
            }
            if info.is_initialize() {
                self.record_session(&resp);
                let mut s = self.session.lock().unwrap_or_else(|e| e.into_inner());
                s.init_frame = Some(frame.clone());
                s.initialized = true;
            }
            if info.is_request() {
                self.read_answer(resp, info).await?;
            } else {
                // 202 (or any 2xx) for a notification or response: nothing to pass on.
                let _ = resp.body.read_to_end(IGNORED_BODY_LIMIT).await;
                if info.method.as_deref() == Some("notifications/initialized") {
                    let _ = self.internal.try_send(Internal::Initialized);
                }
            }
            return Ok(());
        }
    }

    /// Passes on the frames of a request's answer (JSON or SSE) until its response.
    async fn read_answer(&self, mut resp: Response, info: &FrameInfo) -> Result<(), PostError> {
        let ct = content_type(&resp);
        if resp.status == StatusCode::ACCEPTED {
            let _ = resp.body.read_to_end(IGNORED_BODY_LIMIT).await;
            return Err(PostError::Request(
                "the server accepted the request (HTTP 202) but sent no response".into(),
            ));
        }
        match ct.as_str() {
            "application/json" => {
                let body = resp
                    .body
                    .read_to_end(self.opts.max_message_len)
                    .await
                    .map_err(|e| PostError::Request(e.to_string()))?;
                for frame in split_json_body(body) {
                    if info.is_initialize() {
                        self.record_version(&frame);
                    }
                    self.emit.frame(frame);
                }
                Ok(())
            }
            "text/event-stream" => self.read_post_stream(resp.body, info).await,
            other => Err(PostError::Request(format!(
                "the server answered with content type \"{other}\", expected application/json or text/event-stream"
            ))),
        }
    }

    /// Reads a POST's SSE stream until the request's response, resuming it when it breaks.
    async fn read_post_stream(&self, body: Body, info: &FrameInfo) -> Result<(), PostError> {
        let mut parser = SseParser::new(self.opts.max_message_len);
        let mut body = body;
        let mut attempts = 0;
        loop {
            let mut answered = false;
            let end = self
                .pump(
                    &mut body,
                    &mut parser,
                    &mut |inner: &Inner, frame: Bytes| {
                        if response_id(&frame).as_deref() == info.request_id.as_deref() {
                            if info.is_initialize() {
                                inner.record_version(&frame);
                            }
                            answered = true;
                        }
                        inner.emit.frame(frame);
                        answered
                    },
                )
                .await;
            if answered {
                // Read the rest briefly so the connection can be reused; then let it go.
                let _ = with_timeout(AFTER_RESPONSE_WAIT, async {
                    while let Ok(Some(_)) = body.chunk().await {}
                })
                .await;
                return Ok(());
            }
            if let Err(HttpError::TooLarge(m)) = end {
                return Err(PostError::Request(m));
            }
            let why = match end {
                Ok(()) => "the server ended the response stream before the response".to_string(),
                Err(e) => format!("the response stream broke before the response: {e}"),
            };
            let Some(last) = parser.last_event_id().map(str::to_string) else {
                return Err(PostError::Request(why));
            };
            attempts += 1;
            if attempts > self.opts.max_resume_attempts {
                return Err(PostError::Request(format!(
                    "{why}; gave up resuming it after {} attempts",
                    self.opts.max_resume_attempts
                )));
            }
            Timer::after(parser.retry().unwrap_or(self.opts.default_retry)).await;
            tracing::debug!(target: "switchboard::http", server = %self.server, last_event_id = %last, "resuming a response stream");
            let mut resp = match self.get_stream(Some(&last)).await {
                Ok(r) => r,
                Err(HttpError::Connect(e)) => return Err(PostError::Fatal(e)),
                Err(e) => {
                    tracing::debug!(target: "switchboard::http", server = %self.server, "resume failed: {e}");
                    continue;
                }
            };
            if !resp.status.is_success() {
                let msg = status_error(&mut resp).await;
                return Err(PostError::Request(format!(
                    "{why}; resuming it failed: {msg}"
                )));
            }
            if content_type(&resp) != "text/event-stream" {
                return Err(PostError::Request(format!(
                    "{why}; resuming it did not give an SSE stream"
                )));
            }
            body = resp.body;
        }
    }

    /// Reads `body` through `parser` to its end, passing each `message` event's data to
    /// `on_frame` (which returns true to stop early).
    async fn pump(
        &self,
        body: &mut Body,
        parser: &mut SseParser,
        on_frame: &mut (dyn FnMut(&Inner, Bytes) -> bool + Send),
    ) -> Result<(), HttpError> {
        let mut events = Vec::new();
        loop {
            let Some(chunk) = body.chunk().await? else {
                return Ok(());
            };
            parser
                .feed(&chunk, &mut events)
                .map_err(|e| HttpError::TooLarge(e.to_string()))?;
            let mut stop = false;
            for SseEvent { event, data, .. } in events.drain(..) {
                if event != "message" {
                    tracing::debug!(target: "switchboard::http", server = %self.server, event, "ignored an SSE event");
                    continue;
                }
                if data.trim().is_empty() {
                    continue;
                }
                stop |= on_frame(self, Bytes::from(data));
            }
            if stop {
                return Ok(());
            }
        }
    }

    /// Starts a new session after a 404 for `stale`, unless another request already did.
    async fn reinitialize(&self, stale: &str) -> Result<(), PostError> {
        let _one_at_a_time = self.reinit.lock().await;
        let init = {
            let mut s = self.session.lock().unwrap_or_else(|e| e.into_inner());
            if s.id.as_deref() != Some(stale) {
                return Ok(()); // someone else renewed it meanwhile
            }
            s.id = None;
            s.protocol_version = None;
            s.init_frame.clone()
        };
        let Some(init) = init else {
            return Err(PostError::Fatal(
                "the session expired (HTTP 404) and there is no initialize to replay".into(),
            ));
        };
        tracing::warn!(target: "switchboard::http", server = %self.server, "the session expired (HTTP 404); starting a new one");
        let fail = |e: String| {
            PostError::Fatal(format!(
                "the session expired (HTTP 404) and a new one could not be started: {e}"
            ))
        };
        let mut resp = self
            .post(&self.url, &init, &(None, None))
            .await
            .map_err(|e| fail(e.to_string()))?;
        if !resp.status.is_success() {
            return Err(fail(status_error(&mut resp).await));
        }
        self.record_session(&resp);
        // The answer is for the transport, not the core (its session goes on): read, keep the
        // negotiated version, drop.
        let frames = match content_type(&resp).as_str() {
            "text/event-stream" => {
                let mut parser = SseParser::new(self.opts.max_message_len);
                let mut frames = Vec::new();
                self.pump(&mut resp.body, &mut parser, &mut |_, f| {
                    let done = response_id(&f).is_some();
                    frames.push(f);
                    done
                })
                .await
                .map_err(|e| fail(e.to_string()))?;
                frames
            }
            _ => split_json_body(
                resp.body
                    .read_to_end(self.opts.max_message_len)
                    .await
                    .map_err(|e| fail(e.to_string()))?,
            ),
        };
        for f in &frames {
            self.record_version(f);
        }
        let session = self.session_headers();
        let mut resp = self
            .post(&self.url, &initialized_notification(), &session)
            .await
            .map_err(|e| fail(e.to_string()))?;
        if !resp.status.is_success() {
            return Err(fail(status_error(&mut resp).await));
        }
        let _ = resp.body.read_to_end(IGNORED_BODY_LIMIT).await;
        let _ = self.internal.try_send(Internal::Initialized);
        Ok(())
    }

    /// The server-initiated GET stream, resumed when it breaks, until the server says it has
    /// none or it fails `max_resume_attempts` times in a row.
    async fn listen(&self) {
        let mut last_event_id: Option<String> = None;
        let mut retry = self.opts.default_retry;
        let mut failures = 0;
        loop {
            let mut delivered = false;
            match self.get_stream(last_event_id.as_deref()).await {
                Ok(mut resp) if resp.status == StatusCode::METHOD_NOT_ALLOWED => {
                    let _ = resp
                        .body
                        .read_prefix(ERROR_BODY_PREFIX, ERROR_BODY_WAIT)
                        .await;
                    tracing::debug!(target: "switchboard::http", server = %self.server, "the server offers no GET stream (HTTP 405)");
                    return;
                }
                Ok(mut resp) if !resp.status.is_success() => {
                    let msg = status_error(&mut resp).await;
                    tracing::debug!(target: "switchboard::http", server = %self.server, "no GET stream: {msg}");
                    return;
                }
                Ok(resp) if content_type(&resp) != "text/event-stream" => {
                    tracing::debug!(target: "switchboard::http", server = %self.server, "the GET stream is not an SSE stream; not listening");
                    return;
                }
                Ok(mut resp) => {
                    let mut parser = SseParser::new(self.opts.max_message_len);
                    let end = self
                        .pump(&mut resp.body, &mut parser, &mut |inner, frame| {
                            delivered = true;
                            inner.emit.frame(frame);
                            false
                        })
                        .await;
                    if let Err(e) = end {
                        tracing::debug!(target: "switchboard::http", server = %self.server, "the GET stream broke: {e}");
                    }
                    if let Some(id) = parser.last_event_id() {
                        last_event_id = Some(id.to_string());
                    }
                    if let Some(r) = parser.retry() {
                        retry = r;
                    }
                }
                Err(e) => {
                    tracing::debug!(target: "switchboard::http", server = %self.server, "the GET stream failed: {e}");
                }
            }
            failures = if delivered { 0 } else { failures + 1 };
            if failures >= self.opts.max_resume_attempts {
                tracing::debug!(target: "switchboard::http", server = %self.server, "stopped listening on the GET stream after {failures} empty attempts");
                return;
            }
            Timer::after(retry).await;
        }
    }

    /// One frame over legacy HTTP+SSE: POST it to the endpoint; answers come on the stream.
    async fn post_legacy(&self, endpoint: &Url, frame: &Bytes) -> Result<(), PostError> {
        let headers = self.headers_with(&[("content-type", "application/json")], &(None, None));
        let mut resp = self
            .client
            .request(Method::POST, endpoint, &headers, frame.clone())
            .await
            .map_err(|e| exchange_error(e, false))?;
        if !resp.status.is_success() {
            let msg = status_error(&mut resp).await;
            return Err(
                if resp.status == StatusCode::UNAUTHORIZED || resp.status == StatusCode::FORBIDDEN {
                    PostError::Fatal(msg)
                } else {
                    PostError::Request(msg)
                },
            );
        }
        let _ = resp.body.read_to_end(IGNORED_BODY_LIMIT).await;
        Ok(())
    }
}

/// A JSON body: one message, or a batch (an array) of them.
fn split_json_body(body: Bytes) -> Vec<Bytes> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        if let Ok(items) = serde_json::from_slice::<Vec<Value>>(&body) {
            return items
                .into_iter()
                .map(|v| Bytes::from(v.to_string()))
                .collect();
        }
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Vec::new();
    }
    vec![body]
}

/// Legacy HTTP+SSE: GET the SSE URL and wait for the `endpoint` event; the stream is then read
/// by a task that passes `message` events on.
async fn legacy_connect(inner: &Arc<Inner>) -> Result<Legacy, String> {
    let server = &inner.server;
    let headers = inner.headers_with(&[("accept", "text/event-stream")], &(None, None));
    let mut resp = inner
        .client
        .request(Method::GET, &inner.url, &headers, Bytes::new())
        .await
        .map_err(|e| e.to_string())?;
    if !resp.status.is_success() {
        return Err(status_error(&mut resp).await);
    }
    let ct = content_type(&resp);
    if ct != "text/event-stream" {
        return Err(format!(
            "the SSE URL answered with content type \"{ct}\", expected text/event-stream"
        ));
    }
    let mut parser = SseParser::new(inner.opts.max_message_len);
    let mut events = Vec::new();
    let endpoint = 'found: loop {
        let chunk = match resp.body.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => return Err("the SSE stream ended before the endpoint event".into()),
            Err(e) => {
                return Err(format!(
                    "the SSE stream broke before the endpoint event: {e}"
                ))
            }
        };
        parser
            .feed(&chunk, &mut events)
            .map_err(|e| e.to_string())?;
        let mut found = None;
        for ev in events.drain(..) {
            if found.is_none() && ev.event == "endpoint" {
                found = Some(ev.data);
            } else if found.is_none() {
                tracing::warn!(target: "switchboard::http", server = %server, event = %ev.event, "ignored an SSE event before the endpoint event");
            } else if ev.event == "message" {
                inner.emit.frame(Bytes::from(ev.data));
            }
        }
        if let Some(data) = found {
            break 'found data;
        }
    };
    let endpoint = inner
        .url
        .join(endpoint.trim())
        .map_err(|e| format!("the endpoint event is not a usable URL: {e}"))?;
    if endpoint.origin != inner.url.origin {
        return Err(format!(
            "the endpoint event points to another origin ({}); refusing to send messages there",
            endpoint.origin
        ));
    }
    tracing::debug!(target: "switchboard::http", server = %server, endpoint = %endpoint, "legacy SSE endpoint");
    let reader_inner = inner.clone();
    let reader = inner.spawner.spawn(async move {
        let inner = reader_inner;
        let mut body = resp.body;
        let end = inner
            .pump(&mut body, &mut parser, &mut |inner, frame| {
                inner.emit.frame(frame);
                false
            })
            .await;
        let msg = match end {
            Ok(()) => Internal::Ended("the server closed the SSE stream".into()),
            Err(HttpError::TooLarge(m)) => Internal::Fatal(m),
            Err(e) => Internal::Ended(format!("the SSE stream broke: {e}")),
        };
        let _ = inner.internal.send(msg).await;
    });
    Ok(Legacy { endpoint, reader })
}

/// The actor: takes frames, starts their POSTs, and tears everything down at the end.
async fn run(
    inner: Arc<Inner>,
    mut mode: Mode,
    frames: Receiver<Bytes>,
    close: Receiver<()>,
    internal: Receiver<Internal>,
) {
    enum Wake {
        Frame(Bytes),
        Internal(Internal),
        Close,
    }
    let mut next = 0u64;
    let mut tasks: BTreeMap<u64, Task<()>> = BTreeMap::new();
    let mut by_request: BTreeMap<String, u64> = BTreeMap::new();
    let mut listener: Option<Task<()>> = None;
    // Closed when every notification/response sent so far was accepted.
    let mut barrier: Option<Receiver<()>> = None;
    let mut closed_by_client = false;
    loop {
        let wake = future::or(
            async {
                match close.recv().await {
                    Ok(()) | Err(_) => Wake::Close,
                }
            },
            future::or(
                async {
                    match internal.recv().await {
                        Ok(i) => Wake::Internal(i),
                        Err(_) => future::pending().await,
                    }
                },
                async {
                    match frames.recv().await {
                        Ok(f) => Wake::Frame(f),
                        Err(_) => Wake::Close,
                    }
                },
            ),
        )
        .await;
        match wake {
            Wake::Close => {
                closed_by_client = true;
                break;
            }
            Wake::Frame(frame) => {
                let info = FrameInfo::of(&frame);
                if let Some(cancelled) = &info.cancels {
                    // The core gave up on that request: stop waiting for its answer.
                    if let Some(n) = by_request.remove(cancelled) {
                        tasks.remove(&n);
                    }
                }
                let n = next;
                next += 1;
                if let Some(id) = &info.request_id {
                    by_request.insert(id.clone(), n);
                }
                let wait_for = barrier.clone();
                let done_signal = if info.is_request() {
                    None
                } else {
                    let (tx, rx) = async_channel::bounded::<()>(1);
                    barrier = Some(rx);
                    Some(tx)
                };
                let task = spawn_post(inner.clone(), &mode, frame, info, n, wait_for, done_signal);
                tasks.insert(n, task);
            }
            Wake::Internal(Internal::Done(n)) => {
                tasks.remove(&n);
                by_request.retain(|_, v| *v != n);
            }
            Wake::Internal(Internal::Fatal(error)) => {
                inner.emit.end(TransportEvent::Failed {
                    error: format!("server \"{}\": {error}", inner.server),
                });
                break;
            }
            Wake::Internal(Internal::Ended(reason)) => {
                inner.emit.end(TransportEvent::Closed { reason });
                break;
            }
            Wake::Internal(Internal::Initialized) => {
                let running = listener.as_ref().is_some_and(|t| !t.is_finished());
                if matches!(mode, Mode::Streamable) && !running {
                    let listening = inner.clone();
                    listener = Some(inner.spawner.spawn(async move { listening.listen().await }));
                }
            }
            Wake::Internal(Internal::Fallback { frame, why }) => {
                let note = format!(
                    "{why} to the Streamable HTTP initialize; falling back to the legacy HTTP+SSE transport (MCP 2024-11-05)"
                );
                tracing::warn!(target: "switchboard::http", server = %inner.server, "{note}");
                let connected = future::or(async { Some(legacy_connect(&inner).await) }, async {
                    let _ = close.recv().await;
                    None
                })
                .await;
                match connected {
                    None => {
                        closed_by_client = true;
                        break;
                    }
                    Some(Err(e)) => {
                        inner.emit.end(TransportEvent::Failed {
                            error: format!(
                                "server \"{}\": Streamable HTTP failed ({why}) and the legacy SSE fallback failed too: {e}",
                                inner.server
                            ),
                        });
                        break;
                    }
                    Some(Ok(legacy)) => {
                        // Reaches the embedder as a warning Diagnostic of this server.
                        inner.emit.notice(note);
                        mode = Mode::Legacy(legacy);
                        let info = FrameInfo::of(&frame);
                        let n = next;
                        next += 1;
                        let task = spawn_post(inner.clone(), &mode, frame, info, n, None, None);
                        tasks.insert(n, task);
                    }
                }
            }
        }
    }

    // Teardown: abort every request and stream, end the session, close every connection.
    for (_, t) in std::mem::take(&mut tasks) {
        t.cancel().await;
    }
    if let Some(t) = listener.take() {
        t.cancel().await;
    }
    match mode {
        Mode::Legacy(legacy) => {
            legacy.reader.cancel().await;
        }
        Mode::Streamable => {
            let session = inner.session_headers();
            if session.0.is_some() {
                let headers = inner.headers_with(&[], &session);
                let delete = async {
                    match inner
                        .client
                        .request(Method::DELETE, &inner.url, &headers, Bytes::new())
                        .await
                    {
                        Ok(mut r) => {
                            let _ = r.body.read_prefix(ERROR_BODY_PREFIX, ERROR_BODY_WAIT).await;
                            tracing::debug!(target: "switchboard::http", server = %inner.server, status = %r.status, "session DELETE");
                        }
                        Err(e) => {
                            tracing::debug!(target: "switchboard::http", server = %inner.server, "session DELETE failed: {e}");
                        }
                    }
                };
                if with_timeout(inner.opts.close_timeout, delete)
                    .await
                    .is_none()
                {
                    tracing::debug!(target: "switchboard::http", server = %inner.server, "session DELETE timed out");
                }
            }
        }
    }
    inner.client.close_idle().await;
    if closed_by_client {
        inner.emit.end(TransportEvent::Closed {
            reason: "closed by client".into(),
        });
    }
}

/// Starts the POST of one frame in `mode`; it reports `Done(n)` when finished.
fn spawn_post(
    inner: Arc<Inner>,
    mode: &Mode,
    frame: Bytes,
    info: FrameInfo,
    n: u64,
    wait_for: Option<Receiver<()>>,
    done_signal: Option<Sender<()>>,
) -> Task<()> {
    let endpoint = match mode {
        Mode::Streamable => None,
        Mode::Legacy(l) => Some(l.endpoint.clone()),
    };
    let spawner = inner.spawner.clone();
    spawner.spawn(async move {
        if let Some(rx) = wait_for {
            // Closed (Err) once the earlier notifications were answered.
            let _ = rx.recv().await;
        }
        let limit = inner.opts.max_request_duration;
        let result = with_timeout(limit, async {
            match &endpoint {
                None => inner.post_streamable(&frame, &info).await,
                Some(endpoint) => inner.post_legacy(endpoint, &frame).await,
            }
        })
        .await
        .unwrap_or_else(|| {
            Err(PostError::Request(format!(
                "no complete answer within {} s",
                limit.as_secs()
            )))
        });
        drop(done_signal);
        match result {
            Ok(()) => {}
            Err(PostError::Fatal(e)) => {
                let _ = inner.internal.send(Internal::Fatal(e)).await;
            }
            Err(PostError::Fallback(why)) => {
                let _ = inner
                    .internal
                    .send(Internal::Fallback {
                        frame: frame.clone(),
                        why,
                    })
                    .await;
            }
            Err(PostError::Request(e)) => match &info.request_id {
                Some(id) => inner.emit.frame(error_response(id, &e)),
                None => {
                    tracing::warn!(target: "switchboard::http", server = %inner.server, method = info.method.as_deref().unwrap_or("-"), "a message was not accepted: {e}");
                }
            },
        }
        let _ = inner.internal.send(Internal::Done(n)).await;
    })
}
