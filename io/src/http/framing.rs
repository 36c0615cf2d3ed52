//! Framing: what an outgoing frame is (request, notification, cancellation: as the core said),
//! the body the transport makes itself (the replayed `initialized`), and the bodies it
//! reads (JSON messages and batches, error statuses, SSE streams into frames).

use super::client::{Body, HttpError, Response};
use super::sse::{SseEvent, SseParser};
use super::{Inner, ERROR_BODY_PREFIX, ERROR_BODY_WAIT};
use bytes::Bytes;
use http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use switchboard_core::manager::{FrameKind, FrameMeta};

/// What the transport needs to know of an outgoing frame, from the core's [`FrameMeta`]
/// (never from the frame's bytes).
#[derive(Debug, Clone)]
pub(super) struct FrameInfo {
    pub(super) method: Option<&'static str>,
    /// The request id when the frame is a request.
    pub(super) request_id: Option<u64>,
    /// For `notifications/cancelled`: the id of the request it cancels.
    pub(super) cancels: Option<u64>,
    /// A frame of the stateless revision: the version for `MCP-Protocol-Version` (no session).
    pub(super) protocol: Option<&'static str>,
    /// `Mcp-Name` of a stateless request.
    pub(super) name: Option<String>,
    /// `Mcp-Param-*` headers of a stateless tool call.
    pub(super) params: Vec<(String, String)>,
}

impl FrameInfo {
    pub(super) fn of(meta: &FrameMeta) -> FrameInfo {
        let (request_id, cancels) = match meta.kind {
            FrameKind::Request { id } => (Some(id), None),
            FrameKind::Notification { cancels } => (None, cancels),
            _ => (None, None),
        };
        FrameInfo {
            method: meta.method,
            request_id,
            cancels,
            protocol: meta.protocol,
            name: meta.name.clone(),
            params: meta.params.clone(),
        }
    }

    pub(super) fn is_request(&self) -> bool {
        self.request_id.is_some()
    }

    pub(super) fn is_initialize(&self) -> bool {
        self.is_request() && self.method == Some("initialize")
    }
}

/// The id (JSON text) of a response frame; `None` for requests and notifications.
pub(super) fn response_id(frame: &[u8]) -> Option<String> {
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

/// Is `body` a JSON-RPC error response to request `id`? (A stateless server answers a request
/// it refuses with an error status and the JSON-RPC error in the body.)
pub(super) fn is_error_response_to(body: &[u8], id: u64) -> bool {
    #[derive(Deserialize)]
    struct Peek {
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        error: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_slice::<Peek>(body) {
        Ok(Peek {
            id: Some(v),
            error: Some(_),
        }) => v.as_u64() == Some(id),
        _ => false,
    }
}

/// Whether `frame` is the response to our request `id` (a number, or a numeric string as
/// some servers echo it back, as the core reads it).
pub(super) fn answers(frame: &[u8], id: u64) -> bool {
    response_id(frame).is_some_and(|got| {
        let got = got.trim_matches('"');
        got.parse::<u64>() == Ok(id)
    })
}

/// The `protocolVersion` of an `initialize` result.
pub(super) fn negotiated_version(frame: &[u8]) -> Option<String> {
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

pub(super) fn initialized_notification() -> Bytes {
    Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
}

pub(super) fn content_type(resp: &Response) -> String {
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
pub(super) async fn status_error(resp: &mut Response) -> String {
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
    } else if status.is_redirection() {
        // A redirect the client did not follow (not one of the redirect statuses, e.g. 300).
        match resp
            .headers
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok())
        {
            Some(location) => {
                msg.push_str(" (Location: ");
                msg.push_str(location);
                msg.push(')');
            }
            None => msg.push_str(" (no Location)"),
        }
    }
    msg
}

/// A JSON body: one message, or a batch (an array) of them.
pub(super) fn split_json_body(body: Bytes) -> Vec<Bytes> {
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

impl Inner {
    /// Reads `body` through `parser` to its end, passing each `message` event's data to
    /// `on_frame` (which returns true to stop early).
    pub(super) async fn pump(
        &self,
        body: &mut Body,
        parser: &mut SseParser,
        forward: bool,
        on_frame: &mut (dyn FnMut(&Inner, &Bytes) -> bool + Send),
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
                let frame = Bytes::from(data);
                stop |= on_frame(self, &frame);
                if forward {
                    // Waits while the driver's inbound channel is full: back-pressure.
                    self.emit.frame(frame).await;
                }
            }
            if stop {
                return Ok(());
            }
        }
    }
}
