//! One frame over Streamable HTTP: the POST with the session's headers, its answer (a JSON
//! body or an SSE stream) passed on until the response, a broken stream resumed with
//! `Last-Event-ID`, an expired session renewed by replaying the `initialize`, and the GET
//! stream that carries server-initiated messages.

use super::actor::with_timeout;
use super::client::{Body, HttpError, Response, Url};
use super::framing::{
    answers, content_type, initialized_notification, is_error_response_to, negotiated_version,
    response_id, split_json_body, status_error, FrameInfo,
};
use super::sse::SseParser;
use super::{Inner, Internal, ERROR_BODY_PREFIX, ERROR_BODY_WAIT, IGNORED_BODY_LIMIT};
use async_io::Timer;
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, StatusCode};
use std::time::Duration;

/// Times one POST is sent again after a `401`/`403` the authorization layer handled.
const MAX_AUTH_ROUNDS: u32 = 8;

/// How long a POST stream may stay open after it delivered its response.
const AFTER_RESPONSE_WAIT: Duration = Duration::from_secs(5);

/// How one POST went wrong.
pub(super) enum PostError {
    /// The transport cannot go on (unreachable, refused without an authorization layer, a
    /// session that could not be renewed).
    Fatal(String),
    /// Only this request failed; the core is told (`TransportEvent::RequestFailed`).
    Request(String),
    /// Not a Streamable HTTP server: fall back to legacy SSE.
    Fallback(String),
    /// The server refused our credentials and authorization could not fix it.
    Auth(switchboard_core::auth::AuthError),
}

/// An unreachable server ends the transport; an exchange that broke after the connection was
/// made fails only its request (the core decides what that ends: the attempt, for the
/// `initialize`).
pub(super) fn exchange_error(e: HttpError) -> PostError {
    match e {
        HttpError::Connect(m) => PostError::Fatal(m),
        other => PostError::Request(other.to_string()),
    }
}

impl Inner {
    pub(super) fn session_headers(&self) -> (Option<String>, Option<String>) {
        let s = self.session.lock().unwrap_or_else(|e| e.into_inner());
        (s.id.clone(), s.protocol_version.clone())
    }

    /// The configured headers plus ours.
    pub(super) fn headers_with(
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
        if let Some(auth) = &self.auth {
            for (name, value) in auth.headers() {
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&value),
                ) {
                    h.retain(|(k, _)| *k != n);
                    h.push((n, v));
                }
            }
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

    pub(super) fn record_session(&self, resp: &Response) {
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

    pub(super) fn record_version(&self, frame: &[u8]) {
        if let Some(v) = negotiated_version(frame) {
            self.session
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .protocol_version = Some(v);
        }
    }

    pub(super) async fn post(
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

    pub(super) async fn get_stream(
        &self,
        last_event_id: Option<&str>,
    ) -> Result<Response, HttpError> {
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

    /// One frame of the stateless revision: no session; `MCP-Protocol-Version`, `Mcp-Method`,
    /// `Mcp-Name` and `Mcp-Param-*` from the frame's metadata. A request refused with an error
    /// status whose body is the JSON-RPC error for it passes that error on (the core reads
    /// it); any other refusal fails the request.
    async fn post_stateless(
        &self,
        frame: &Bytes,
        info: &FrameInfo,
        version: &'static str,
    ) -> Result<(), PostError> {
        if info.cancels.is_some() {
            // Cancelling is closing the request's response stream (the actor aborted its POST);
            // the stateless revision's HTTP transport has no cancellation message.
            return Ok(());
        }
        let mut auth_rounds = 0;
        let mut resp = loop {
            let sent = match &self.auth {
                Some(a) => a.ready().await,
                None => 0,
            };
            let mut headers = self.headers_with(
                &[
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-protocol-version", version),
                ],
                &(None, None),
            );
            let mut set = |name: String, value: &str| match (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                (Ok(n), Ok(v)) => {
                    headers.retain(|(k, _)| *k != n);
                    headers.push((n, v));
                }
                _ => {
                    tracing::debug!(target: "switchboard::http", server = %self.server, header = %name, "left out a header whose name or value is not valid");
                }
            };
            if let Some(method) = info.method {
                set("mcp-method".into(), method);
            }
            if let Some(name) = &info.name {
                set("mcp-name".into(), name);
            }
            for (name, value) in &info.params {
                set(format!("mcp-param-{name}"), value);
            }
            let mut resp = self
                .client
                .request(Method::POST, &self.url, &headers, frame.clone())
                .await
                .map_err(exchange_error)?;
            let status = resp.status;
            let Some(auth) = self
                .auth
                .as_ref()
                .filter(|_| status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN)
            else {
                break resp;
            };
            // The same authorization rounds as a session's POST: the core's guard bounds them.
            auth_refused(auth, &mut resp, sent, &mut auth_rounds).await?;
        };
        let status = resp.status;
        if status.is_success() {
            if let Some(auth) = &self.auth {
                auth.accepted();
            }
            if info.is_request() {
                return self.read_answer(resp, info).await;
            }
            let _ = resp.body.read_to_end(IGNORED_BODY_LIMIT).await;
            return Ok(());
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(PostError::Fatal(status_error(&mut resp).await));
        }
        let body = resp
            .body
            .read_prefix(ERROR_BODY_PREFIX, ERROR_BODY_WAIT)
            .await;
        if let Some(id) = info.request_id {
            if is_error_response_to(&body, id) {
                self.emit.frame(body).await;
                return Ok(());
            }
        }
        let text = String::from_utf8_lossy(&body);
        let text: String = text.trim().chars().take(200).collect();
        Err(PostError::Request(if text.is_empty() {
            format!("HTTP {}", status.as_u16())
        } else {
            format!("HTTP {}: {text}", status.as_u16())
        }))
    }

    /// One frame over Streamable HTTP, including session recovery.
    pub(super) async fn post_streamable(
        &self,
        frame: &Bytes,
        info: &FrameInfo,
    ) -> Result<(), PostError> {
        if let Some(version) = info.protocol {
            return self.post_stateless(frame, info, version).await;
        }
        let mut renewed = false;
        let mut auth_rounds = 0;
        loop {
            let sent = match &self.auth {
                Some(a) => a.ready().await,
                None => 0,
            };
            let session = if info.is_initialize() {
                // A new session: never send a stale id with an initialize.
                (None, None)
            } else {
                self.session_headers()
            };
            let mut resp = self
                .post(&self.url, frame, &session)
                .await
                .map_err(exchange_error)?;
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
            if let (Some(auth), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) =
                (&self.auth, status)
            {
                auth_refused(auth, &mut resp, sent, &mut auth_rounds).await?;
                continue;
            }
            if status.is_success() {
                if let Some(auth) = &self.auth {
                    auth.accepted();
                }
            }
            if status == StatusCode::BAD_REQUEST && info.is_initialize() {
                // A server of the stateless revision refuses an `initialize` it does not speak
                // with a 400 whose body is the JSON-RPC error (naming the versions it speaks):
                // that is its answer for the core to read, not a sign of the legacy transport.
                let body = resp
                    .body
                    .read_prefix(ERROR_BODY_PREFIX, ERROR_BODY_WAIT)
                    .await;
                if info
                    .request_id
                    .is_some_and(|id| is_error_response_to(&body, id))
                {
                    self.emit.frame(body).await;
                    return Ok(());
                }
                let text = String::from_utf8_lossy(&body);
                let text: String = text.trim().chars().take(200).collect();
                let first = !self
                    .session
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .initialized;
                let msg = if text.is_empty() {
                    "HTTP 400: Bad Request".to_string()
                } else {
                    format!("HTTP 400: {text}")
                };
                return Err(if first {
                    PostError::Fallback(msg)
                } else {
                    PostError::Request(msg)
                });
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
                // Refused without an authorization layer to ask: nothing will get through.
                // Any other status fails this request alone; the core decides what that ends
                // (a failed `initialize` ends the attempt).
                return Err(
                    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
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
                if info.method == Some("notifications/initialized") {
                    self.open_listener().await;
                }
            }
            return Ok(());
        }
    }

    /// Passes on the frames of a request's answer (JSON or SSE) until its response.
    pub(super) async fn read_answer(
        &self,
        mut resp: Response,
        info: &FrameInfo,
    ) -> Result<(), PostError> {
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
                let mut answered = false;
                for frame in split_json_body(body) {
                    if info.is_initialize() {
                        self.record_version(&frame);
                    }
                    answered |= info.request_id.is_some_and(|id| answers(&frame, id));
                    self.emit.frame(frame).await;
                }
                // A JSON answer is the whole exchange: without the response in it, nothing
                // more will come for this request, so it fails now rather than at its timeout.
                if answered {
                    Ok(())
                } else {
                    Err(PostError::Request(
                        "the server's HTTP answer (application/json) held no JSON-RPC response to the request".into(),
                    ))
                }
            }
            "text/event-stream" => self.read_post_stream(resp.body, info).await,
            other => Err(PostError::Request(format!(
                "the server answered with content type \"{other}\", expected application/json or text/event-stream"
            ))),
        }
    }

    /// Reads a POST's SSE stream until the request's response, resuming it when it breaks.
    pub(super) async fn read_post_stream(
        &self,
        body: Body,
        info: &FrameInfo,
    ) -> Result<(), PostError> {
        let mut parser = SseParser::new(self.opts.max_message_len);
        let mut body = body;
        let mut attempts = 0;
        loop {
            let mut answered = false;
            let end = self
                .pump(
                    &mut body,
                    &mut parser,
                    true,
                    &mut |inner: &Inner, frame: &Bytes| {
                        if response_id(frame) == info.request_id.map(|id| id.to_string()) {
                            if info.is_initialize() {
                                inner.record_version(frame);
                            }
                            answered = true;
                        }
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

    /// Starts a new session after a 404 for `stale`, unless another request already did.
    pub(super) async fn reinitialize(&self, stale: &str) -> Result<(), PostError> {
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
                self.pump(&mut resp.body, &mut parser, false, &mut |_, f| {
                    frames.push(f.clone());
                    response_id(f).is_some()
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
        self.open_listener().await;
        // The core re-lists the server's tools: the new session may offer others.
        self.emit.session_renewed().await;
        Ok(())
    }

    /// Asks the actor for the GET stream (waiting while its queue is full, so the request is
    /// never lost). Requests wait for the stream's first attempt in the actor.
    pub(super) async fn open_listener(&self) {
        let _ = self.internal.send(Internal::Initialized).await;
    }

    /// The server-initiated GET stream, resumed when it breaks, until the server says it has
    /// none or it fails `max_resume_attempts` times in a row.
    pub(super) async fn listen(&self, mut ready: Option<async_channel::Sender<()>>) {
        let mut last_event_id: Option<String> = None;
        let mut retry = self.opts.default_retry;
        let mut failures = 0;
        loop {
            let mut delivered = false;
            let answer = self.get_stream(last_event_id.as_deref()).await;
            // The first attempt settled: requests held for it may go.
            drop(ready.take());
            match answer {
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
                        .pump(&mut resp.body, &mut parser, true, &mut |_, _| {
                            delivered = true;
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
}

/// One `401`/`403` handed to the authorization layer. `Ok` means send the request again; the
/// core's guard bounds how often, and `MAX_AUTH_ROUNDS` is only a backstop against a layer
/// that keeps saying "retry".
async fn auth_refused(
    auth: &crate::auth::AuthLayer,
    resp: &mut Response,
    sent: u64,
    rounds: &mut u32,
) -> Result<(), PostError> {
    let status = resp.status.as_u16();
    let challenge = resp
        .headers
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let _ = resp
        .body
        .read_prefix(ERROR_BODY_PREFIX, ERROR_BODY_WAIT)
        .await;
    *rounds += 1;
    match auth.refused(status, challenge.as_deref(), sent).await {
        Ok(()) if *rounds <= MAX_AUTH_ROUNDS => Ok(()),
        Ok(()) => Err(PostError::Auth(
            switchboard_core::auth::AuthError::Rejected {
                status,
                attempts: *rounds,
            },
        )),
        Err(e) => Err(PostError::Auth(e)),
    }
}
