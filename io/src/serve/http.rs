//! `serve` over Streamable HTTP: one endpoint (`/mcp`), sessions named by `Mcp-Session-Id`,
//! a POST per message (answered with JSON, or with an SSE stream when progress comes first),
//! a GET stream per session for what is not about one request (list changes, logs, resource
//! updates), `DELETE` to end a session. Many clients share the one switchboard behind it.
//!
//! Guarded against DNS rebinding: a request whose `Origin` is not local (or allowed by name)
//! is refused, and on a loopback address so is one whose `Host` is not a loopback name. A
//! bearer token, when set, is required on every request; binding anything but loopback
//! requires one.

use super::{Sink, MAX_DOWNSTREAM_FRAME};
use crate::Switchboard;
use async_channel::{Receiver, Sender, TrySendError};
use async_io::Async;
use bytes::Bytes;
use futures_lite::{future, StreamExt};
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use switchboard_core::gateway::{
    ExchangeId, ExchangeStatus, GatewayInput, GatewayOptions, GatewayOutput, RequestHeaders,
    SessionId, Target, DOWNSTREAM_VERSIONS,
};

/// Frames one POST's stream or one GET stream may hold unread; progress beyond half of it is
/// dropped (progress is advisory), a GET stream that is full misses notifications.
const STREAM_QUEUE: usize = 256;
/// Most connections served at once; one more is closed at once.
const MAX_CONNECTIONS: usize = 512;

/// How to serve over HTTP. Its `Debug` never shows the bearer token.
#[derive(Clone)]
pub struct HttpServeOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Required as `Authorization: Bearer <token>` on every request when set; required to
    /// listen on anything but a loopback address.
    pub bearer_token: Option<String>,
    /// Origins allowed besides local ones (`http://localhost:…`, `http://127.0.0.1:…`,
    /// `http://[::1]:…`), exactly as a browser sends them.
    pub allowed_origins: Vec<String>,
    /// The gateway's options.
    pub gateway: GatewayOptions,
    /// Forward the servers' sampling and elicitation requests to the clients (installed on
    /// the switchboard's builder).
    pub peers: Option<super::PeerForwarder>,
}

impl std::fmt::Debug for HttpServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServeOptions")
            .field("addr", &self.addr)
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("allowed_origins", &self.allowed_origins)
            .field("gateway", &self.gateway)
            .finish_non_exhaustive()
    }
}

/// Why serving over HTTP could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpServeError {
    /// A non-loopback address without a bearer token.
    #[error("listening on {0} (not a loopback address) requires a bearer token")]
    NeedsToken(SocketAddr),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        error: std::io::Error,
    },
}

/// What the POST handler of one exchange hears.
enum ExchangeMsg {
    /// A frame; `last`: the answer.
    Frame { frame: Bytes, last: bool },
    /// Nothing will come (the POST held no request).
    Accepted,
}

#[derive(Default)]
struct State {
    /// Session ids as the client sends them, to the gateway's numbers.
    by_header: BTreeMap<String, SessionId>,
    sessions: BTreeMap<SessionId, SessionEntry>,
    exchanges: BTreeMap<ExchangeId, (SessionId, Sender<ExchangeMsg>)>,
    /// Exchanges of the stateless revision (no session id in the answer), with their status.
    stateless: BTreeMap<ExchangeId, ExchangeStatus>,
    next_session: u64,
    next_exchange: u64,
    connections: usize,
}

struct SessionEntry {
    header: String,
    stream: Option<Sender<Bytes>>,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    // A panic while holding the lock cannot leave the maps half-updated in a way that
    // matters more than stopping would.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Serve every server of `sb` as one MCP server at `http://ADDR/mcp`, until the future is
/// dropped. Errors only when it cannot start.
pub async fn serve_http(
    sb: &Switchboard,
    options: HttpServeOptions,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), HttpServeError> {
    let addr = options.addr;
    if !addr.ip().is_loopback() && options.bearer_token.is_none() {
        return Err(HttpServeError::NeedsToken(addr));
    }
    let listener =
        Async::<TcpListener>::bind(addr).map_err(|error| HttpServeError::Bind { addr, error })?;
    let local = listener.get_ref().local_addr().unwrap_or(addr);
    ready(local);
    let state: Shared = Arc::default();
    let (tx, rx) = async_channel::bounded(256);
    let guard = Arc::new(Guard {
        loopback: local.ip().is_loopback(),
        token: options.bearer_token.clone(),
        origins: options.allowed_origins.clone(),
    });
    let ex = async_executor::LocalExecutor::new();
    let mut sink = HttpSink {
        state: state.clone(),
    };
    let accept = async {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors, say: wait a little instead of spinning.
                async_io::Timer::after(std::time::Duration::from_millis(50)).await;
                continue;
            };
            {
                let mut s = lock(&state);
                if s.connections >= MAX_CONNECTIONS {
                    continue;
                }
                s.connections += 1;
            }
            let (state, tx, guard) = (state.clone(), tx.clone(), guard.clone());
            ex.spawn(async move {
                let service = hyper::service::service_fn(|req| {
                    handle(state.clone(), tx.clone(), guard.clone(), req)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(smol_hyper::rt::SmolTimer::new())
                    .serve_connection(smol_hyper::rt::FuturesIo::new(stream), service)
                    .await;
                lock(&state).connections -= 1;
            })
            .detach();
        }
    };
    ex.run(future::zip(
        accept,
        super::run(sb, options.gateway, options.peers, rx, &mut sink),
    ))
    .await;
    Ok(())
}

struct Guard {
    loopback: bool,
    token: Option<String>,
    origins: Vec<String>,
}

impl Guard {
    /// `None` when the request may go on; else the refusal.
    fn check<B>(&self, req: &Request<B>) -> Option<Response<Body>> {
        if let Some(origin) = req.headers().get(hyper::header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !local_origin(origin) && !self.origins.iter().any(|o| o == origin) {
                return Some(plain(StatusCode::FORBIDDEN, "origin not allowed"));
            }
        }
        if self.loopback {
            let host = req
                .headers()
                .get(hyper::header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            if !loopback_host(host) {
                return Some(plain(StatusCode::FORBIDDEN, "host not allowed"));
            }
        }
        if let Some(token) = &self.token {
            let given = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.strip_prefix("Bearer "))
                .unwrap_or("");
            if !same_secret(given.as_bytes(), token.as_bytes()) {
                let mut r = plain(StatusCode::UNAUTHORIZED, "a bearer token is required");
                r.headers_mut().insert(
                    hyper::header::WWW_AUTHENTICATE,
                    hyper::header::HeaderValue::from_static("Bearer"),
                );
                return Some(r);
            }
        }
        None
    }
}

/// Compared in time independent of where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    authority.split(':').next().unwrap_or("")
}

fn loopback_host(host: &str) -> bool {
    matches!(host_name(host), "localhost" | "127.0.0.1" | "::1")
}

fn local_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    rest.is_some_and(loopback_host)
}

type Body = BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *r.status_mut() = status;
    r
}

fn json_error(status: StatusCode, message: &str) -> Response<Body> {
    let frame = switchboard_core::gateway::wire::error(
        &serde_json::Value::Null,
        switchboard_core::gateway::wire::INVALID_REQUEST,
        message,
        None,
    );
    let mut r = Response::new(Full::new(frame).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn sse_event(frame: Bytes) -> Result<Frame<Bytes>, Infallible> {
    let mut out = Vec::with_capacity(frame.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(&frame);
    out.extend_from_slice(b"\n\n");
    Ok(Frame::data(Bytes::from(out)))
}

fn sse_response(body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    r
}

/// A fresh, unguessable session id: 128 bits from the system's random source.
fn new_session_header() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        // No random source: still unique, from the hasher's per-process random keys.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id().into());
        bytes[..8].copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn handle(
    state: Shared,
    tx: Sender<GatewayInput>,
    guard: Arc<Guard>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if let Some(refused) = guard.check(&req) {
        return Ok(refused);
    }
    if req.uri().path() != "/mcp" {
        return Ok(plain(StatusCode::NOT_FOUND, "the endpoint is /mcp"));
    }
    let header = req
        .headers()
        .get("mcp-session-id")
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    // Within a session the version is one of the session's revisions; without one, a
    // request of the stateless revision is the gateway's to judge.
    if let (Some(v), Some(_)) = (req.headers().get("mcp-protocol-version"), &header) {
        let v = v.to_str().unwrap_or("");
        if !DOWNSTREAM_VERSIONS.contains(&v) {
            return Ok(json_error(
                StatusCode::BAD_REQUEST,
                "unsupported MCP-Protocol-Version",
            ));
        }
    }
    let known = header
        .as_ref()
        .and_then(|h| lock(&state).by_header.get(h).copied());
    if header.is_some() && known.is_none() {
        return Ok(json_error(
            StatusCode::NOT_FOUND,
            "unknown or expired session",
        ));
    }
    Ok(match *req.method() {
        Method::POST => post(state, tx, known, req).await,
        Method::GET => match known {
            Some(session) => get(&state, session),
            None => json_error(StatusCode::BAD_REQUEST, "Mcp-Session-Id is required"),
        },
        Method::DELETE => match known {
            Some(session) => {
                forget(&state, session);
                let _ = tx.send(GatewayInput::Closed { session }).await;
                plain(StatusCode::OK, "")
            }
            None => json_error(StatusCode::BAD_REQUEST, "Mcp-Session-Id is required"),
        },
        _ => {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "use POST, GET or DELETE");
            r.headers_mut().insert(
                hyper::header::ALLOW,
                hyper::header::HeaderValue::from_static("GET, POST, DELETE"),
            );
            r
        }
    })
}

/// Drop a session from the maps: its streams end, its exchanges hear nothing more.
fn forget(state: &Shared, session: SessionId) {
    let mut s = lock(state);
    if let Some(entry) = s.sessions.remove(&session) {
        s.by_header.remove(&entry.header);
    }
    s.exchanges.retain(|_, (owner, _)| *owner != session);
}

/// Removes its exchange when the POST is done (answered, or its client went away); the
/// session of a stateless exchange ends with it (a listen stream whose client left).
struct ExchangeGuard {
    state: Shared,
    exchange: ExchangeId,
    session: SessionId,
    tx: Sender<GatewayInput>,
}

impl Drop for ExchangeGuard {
    fn drop(&mut self) {
        let stateless = {
            let mut s = lock(&self.state);
            s.exchanges.remove(&self.exchange);
            s.stateless.remove(&self.exchange).is_some()
        };
        if stateless {
            forget(&self.state, self.session);
            let _ = self.tx.try_send(GatewayInput::Closed {
                session: self.session,
            });
        }
    }
}

/// The headers the stateless revision checks, as sent.
fn request_headers<B>(req: &Request<B>) -> RequestHeaders {
    let get = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|h| h.to_str().ok())
            .map(str::to_string)
    };
    RequestHeaders {
        protocol_version: get("mcp-protocol-version"),
        method: get("mcp-method"),
        name: get("mcp-name"),
    }
}

async fn post(
    state: Shared,
    tx: Sender<GatewayInput>,
    known: Option<SessionId>,
    req: Request<Incoming>,
) -> Response<Body> {
    let accepts_sse = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"));
    let headers = request_headers(&req);
    let body = match Limited::new(req.into_body(), MAX_DOWNSTREAM_FRAME)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the message is too large (or the body was cut off)",
            )
        }
    };
    let (created, session) = match known {
        Some(s) => (None, s),
        None => {
            let header = new_session_header();
            let session = {
                let mut s = lock(&state);
                let session = SessionId(s.next_session);
                s.next_session += 1;
                s.by_header.insert(header.clone(), session);
                s.sessions.insert(
                    session,
                    SessionEntry {
                        header: header.clone(),
                        stream: None,
                    },
                );
                session
            };
            if tx
                .send(GatewayInput::Opened {
                    session,
                    strict: true,
                })
                .await
                .is_err()
            {
                return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
            }
            (Some(header), session)
        }
    };
    let (etx, erx) = async_channel::bounded(STREAM_QUEUE);
    let exchange = {
        let mut s = lock(&state);
        let exchange = ExchangeId(s.next_exchange);
        s.next_exchange += 1;
        s.exchanges.insert(exchange, (session, etx));
        exchange
    };
    let guard = ExchangeGuard {
        state: state.clone(),
        exchange,
        session,
        tx: tx.clone(),
    };
    let frame = GatewayInput::HttpFrame {
        session,
        exchange,
        frame: body,
        headers,
    };
    if tx.send(frame).await.is_err() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    let with_header = |mut r: Response<Body>| {
        if let Some(status) = lock(&state).stateless.get(&exchange).copied() {
            // No session: the answer stands alone.
            *r.status_mut() = match status {
                ExchangeStatus::Ok => r.status(),
                ExchangeStatus::BadRequest => StatusCode::BAD_REQUEST,
                ExchangeStatus::NotFound => StatusCode::NOT_FOUND,
            };
            return r;
        }
        // Only while the session lives: a session the gateway refused gets no id.
        if let Some(h) = &created {
            if lock(&state).by_header.contains_key(h) {
                if let Ok(v) = hyper::header::HeaderValue::from_str(h) {
                    r.headers_mut().insert("mcp-session-id", v);
                }
            } else {
                // A message without a session that did not start one.
                *r.status_mut() = StatusCode::BAD_REQUEST;
            }
        }
        r
    };
    match erx.recv().await {
        Err(_) => json_error(StatusCode::NOT_FOUND, "the session was closed"),
        Ok(ExchangeMsg::Accepted) => with_header(plain(StatusCode::ACCEPTED, "")),
        Ok(ExchangeMsg::Frame { frame, last: true }) => {
            let mut r = Response::new(Full::new(frame).boxed());
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            with_header(r)
        }
        Ok(ExchangeMsg::Frame { frame, last: false }) if accepts_sse => {
            with_header(sse_response(exchange_stream(frame, erx, guard)))
        }
        Ok(ExchangeMsg::Frame { last: false, .. }) => {
            // A client that takes JSON only gets the answer alone.
            loop {
                match erx.recv().await {
                    Ok(ExchangeMsg::Frame { frame, last: true }) => {
                        let mut r = Response::new(Full::new(frame).boxed());
                        r.headers_mut().insert(
                            hyper::header::CONTENT_TYPE,
                            hyper::header::HeaderValue::from_static("application/json"),
                        );
                        break with_header(r);
                    }
                    Ok(_) => continue,
                    Err(_) => break json_error(StatusCode::NOT_FOUND, "the session was closed"),
                }
            }
        }
    }
}

/// The SSE body of one POST: `first`, then every frame until the answer (included).
fn exchange_stream(first: Bytes, rx: Receiver<ExchangeMsg>, guard: ExchangeGuard) -> Body {
    let rest = futures_lite::stream::unfold((rx, false, guard), |(rx, done, guard)| async move {
        if done {
            return None;
        }
        match rx.recv().await {
            Ok(ExchangeMsg::Frame { frame, last }) => Some((sse_event(frame), (rx, last, guard))),
            _ => None,
        }
    });
    let stream = futures_lite::stream::once(sse_event(first)).chain(rest);
    BodyExt::boxed(StreamBody::new(stream))
}

fn get(state: &Shared, session: SessionId) -> Response<Body> {
    let (stx, srx) = async_channel::bounded::<Bytes>(STREAM_QUEUE);
    if let Some(entry) = lock(state).sessions.get_mut(&session) {
        // A new GET stream replaces the previous one (which then ends).
        entry.stream = Some(stx);
    }
    // An SSE comment first, so the client sees the stream open at once.
    let opening = futures_lite::stream::once(Ok(Frame::data(Bytes::from_static(b": open\n\n"))));
    let stream = opening.chain(srx.map(sse_event));
    sse_response(BodyExt::boxed(StreamBody::new(stream)))
}

struct HttpSink {
    state: Shared,
}

impl Sink for HttpSink {
    async fn deliver(&mut self, out: GatewayOutput) {
        let mut s = lock(&self.state);
        match out {
            GatewayOutput::Send {
                target: Target::Exchange { exchange, last },
                frame,
                ..
            } => {
                if let Some((_, tx)) = s.exchanges.get(&exchange) {
                    // Progress gives way to the answer: never more than half the queue.
                    if last || tx.len() < STREAM_QUEUE / 2 {
                        let _ = tx.try_send(ExchangeMsg::Frame { frame, last });
                    }
                }
            }
            GatewayOutput::Send {
                session,
                target: Target::Session,
                frame,
            } => {
                if let Some(entry) = s.sessions.get_mut(&session) {
                    if let Some(tx) = &entry.stream {
                        if let Err(TrySendError::Closed(_)) = tx.try_send(frame) {
                            entry.stream = None;
                        }
                    }
                }
            }
            GatewayOutput::Accepted { exchange, .. } => {
                if let Some((_, tx)) = s.exchanges.get(&exchange) {
                    let _ = tx.try_send(ExchangeMsg::Accepted);
                }
            }
            GatewayOutput::Close { session } => {
                drop(s);
                forget(&self.state, session);
            }
            GatewayOutput::Stateless {
                exchange, status, ..
            } => {
                s.stateless.insert(exchange, status);
            }
            GatewayOutput::Manager(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_bearer_token() {
        let opts = HttpServeOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            bearer_token: Some("s3cret-token".into()),
            allowed_origins: vec![],
            gateway: GatewayOptions::default(),
            peers: None,
        };
        let shown = format!("{opts:?}");
        assert!(!shown.contains("s3cret-token"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
