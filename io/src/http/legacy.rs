//! The legacy HTTP+SSE transport: a GET stream that first names the endpoint to POST to and
//! then carries every message from the server; each frame is one POST to that endpoint, whose
//! answer comes on the stream.

use super::client::{HttpError, Url};
use super::framing::{content_type, status_error};
use super::sse::SseParser;
use super::streamable::{exchange_error, PostError};
use super::{Inner, Internal, Legacy, IGNORED_BODY_LIMIT};
use bytes::Bytes;
use http::{Method, StatusCode};
use std::sync::Arc;

/// Legacy HTTP+SSE: GET the SSE URL and wait for the `endpoint` event; the stream is then read
/// by a task that passes `message` events on.
pub(super) async fn connect(inner: &Arc<Inner>) -> Result<Legacy, String> {
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
                inner.emit.frame(Bytes::from(ev.data)).await;
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
            .pump(&mut body, &mut parser, true, &mut |_, _| false)
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

impl Inner {
    /// One frame over legacy HTTP+SSE: POST it to the endpoint; answers come on the stream.
    pub(super) async fn post_legacy(&self, endpoint: &Url, frame: &Bytes) -> Result<(), PostError> {
        let headers = self.headers_with(&[("content-type", "application/json")], &(None, None));
        let mut resp = self
            .client
            .request(Method::POST, endpoint, &headers, frame.clone())
            .await
            .map_err(exchange_error)?;
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
