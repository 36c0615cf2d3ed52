//! The transport actor: one task per transport owns its client (every socket), the POST
//! tasks in flight and the GET stream. It takes frames from the handle, starts one POST per
//! frame with the ordering rule for notifications, reacts to what those tasks report
//! (fallback, fatal errors, the legacy stream's end), and at the end cancels everything,
//! sends the session `DELETE` and closes every connection.

use super::framing::FrameInfo;
use super::streamable::PostError;
use super::{legacy, Inner, Internal, Mode, ERROR_BODY_PREFIX, ERROR_BODY_WAIT};
use async_channel::{Receiver, Sender};
use async_executor::Task;
use async_io::Timer;
use bytes::Bytes;
use futures_lite::future;
use http::Method;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::manager::{FrameMeta, TransportEvent};

/// The longest a request waits for the GET stream's first attempt to be answered.
const LISTEN_WAIT: Duration = Duration::from_secs(2);

pub(super) async fn with_timeout<F: Future>(limit: Duration, fut: F) -> Option<F::Output> {
    future::or(async { Some(fut.await) }, async {
        Timer::after(limit).await;
        None
    })
    .await
}

/// The frames the handle queued, and their bytes (what the handle's limit counts).
pub(super) struct Frames {
    pub(super) rx: Receiver<(Bytes, FrameMeta)>,
    pub(super) queued: Arc<AtomicUsize>,
}

/// The actor: takes frames, starts their POSTs, and tears everything down at the end.
pub(super) async fn run(
    inner: Arc<Inner>,
    mut mode: Mode,
    frames: Frames,
    close: Receiver<()>,
    internal: Receiver<Internal>,
) {
    enum Wake {
        Frame(Bytes, FrameMeta),
        Internal(Internal),
        Close,
    }
    let mut next = 0u64;
    let mut tasks: BTreeMap<u64, Task<()>> = BTreeMap::new();
    let mut by_request: BTreeMap<u64, u64> = BTreeMap::new();
    let mut listener: Option<Task<()>> = None;
    // Closed when every notification/response sent so far was accepted.
    let mut barrier: Option<Receiver<()>> = None;
    // Closed once the GET stream's first attempt was answered (or failed): a server sends
    // requests of its own that belong to no request of ours (an elicitation while it runs a
    // tool, say) only on that stream, and drops them while it is not open, so requests wait
    // for it (bounded by `LISTEN_WAIT`).
    let mut listening: Option<Receiver<()>> = None;
    // The sending half of `listening`'s gate, until the GET stream that closes it starts
    // (dropped unused when no stream will: the gate then opens at once).
    let mut listen_ready: Option<Sender<()>> = None;
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
                    match frames.rx.recv().await {
                        Ok((f, meta)) => {
                            frames.queued.fetch_sub(f.len(), Ordering::AcqRel);
                            Wake::Frame(f, meta)
                        }
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
            Wake::Frame(frame, meta) => {
                let info = FrameInfo::of(&meta);
                if let Some(cancelled) = info.cancels {
                    // The core gave up on that request: stop waiting for its answer.
                    if let Some(n) = by_request.remove(&cancelled) {
                        tasks.remove(&n);
                    }
                }
                let n = next;
                next += 1;
                if let Some(id) = info.request_id {
                    by_request.insert(id, n);
                }
                let running = listener.as_ref().is_some_and(|t| !t.is_finished());
                if info.method == Some("notifications/initialized")
                    && matches!(mode, Mode::Streamable)
                    && !running
                {
                    // The GET stream opens once this is accepted; every request from here on
                    // (the first `tools/list` included) waits for its first attempt.
                    let (ready, gate) = async_channel::bounded::<()>(1);
                    listening = Some(gate);
                    listen_ready = Some(ready);
                }
                let wait_for = Wait {
                    sent: barrier.clone(),
                    listening: listening.clone().filter(|_| info.is_request()),
                };
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
                inner
                    .emit
                    .end(TransportEvent::Failed {
                        error: format!("server \"{}\": {error}", inner.server),
                    })
                    .await;
                break;
            }
            Wake::Internal(Internal::Ended(reason)) => {
                inner.emit.end(TransportEvent::Closed { reason }).await;
                break;
            }
            Wake::Internal(Internal::Initialized) => {
                let running = listener.as_ref().is_some_and(|t| !t.is_finished());
                if matches!(mode, Mode::Streamable) && !running {
                    let listen = inner.clone();
                    let ready = match listen_ready.take() {
                        Some(ready) => ready,
                        // A renewed session: a new stream, and a new gate for it.
                        None => {
                            let (ready, gate) = async_channel::bounded::<()>(1);
                            listening = Some(gate);
                            ready
                        }
                    };
                    listener = Some(
                        inner
                            .spawner
                            .spawn(async move { listen.listen(Some(ready)).await }),
                    );
                }
            }
            Wake::Internal(Internal::Fallback { frame, info, why }) => {
                let note = format!(
                    "{why} to the Streamable HTTP initialize; falling back to the legacy HTTP+SSE transport (MCP 2024-11-05)"
                );
                tracing::warn!(target: "switchboard::http", server = %inner.server, "{note}");
                let connected = future::or(async { Some(legacy::connect(&inner).await) }, async {
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
                        inner
                            .emit
                            .end(TransportEvent::Failed {
                                error: format!(
                                    "server \"{}\": Streamable HTTP failed ({why}) and the legacy SSE fallback failed too: {e}",
                                    inner.server
                                ),
                            })
                            .await;
                        break;
                    }
                    Some(Ok(legacy)) => {
                        // Reaches the embedder as a warning Diagnostic of this server.
                        inner.emit.notice(note).await;
                        mode = Mode::Legacy(legacy);
                        // No GET stream in the legacy protocol: nothing to wait for.
                        listen_ready = None;
                        listening = None;
                        let n = next;
                        next += 1;
                        let task =
                            spawn_post(inner.clone(), &mode, frame, info, n, Wait::none(), None);
                        tasks.insert(n, task);
                    }
                }
            }
        }
    }

    if closed_by_client {
        // Requests in flight are abandoned (nobody waits for their answers); notifications
        // and responses, in flight or still queued, are delivered first (see `flush`).
        for n in std::mem::take(&mut by_request).into_values() {
            if let Some(t) = tasks.remove(&n) {
                t.cancel().await;
            }
        }
        while let Ok((frame, meta)) = frames.rx.try_recv() {
            frames.queued.fetch_sub(frame.len(), Ordering::AcqRel);
            let info = FrameInfo::of(&meta);
            if info.is_request() {
                tracing::debug!(target: "switchboard::http", server = %inner.server, method = info.method.unwrap_or("-"), "a request queued at close is not sent");
                continue;
            }
            let (tx, rx) = async_channel::bounded::<()>(1);
            let wait_for = Wait {
                sent: barrier.replace(rx),
                listening: None,
            };
            let n = next;
            next += 1;
            let task = spawn_post(inner.clone(), &mode, frame, info, n, wait_for, Some(tx));
            tasks.insert(n, task);
        }
        flush(&inner, &internal, &mut tasks).await;
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
        inner
            .emit
            .end(TransportEvent::Closed {
                reason: "closed by client".into(),
            })
            .await;
    }
}

/// At a close asked for by the client: waits, up to `close_timeout`, for the POSTs of the
/// notifications and responses queued before the close (a `notifications/cancelled` for each
/// call given up at shutdown, say), so they reach the server before the session ends. Stops
/// early when the transport cannot go on; the caller cancels whatever is left.
async fn flush(inner: &Inner, internal: &Receiver<Internal>, tasks: &mut BTreeMap<u64, Task<()>>) {
    let delivered = with_timeout(inner.opts.close_timeout, async {
        while !tasks.is_empty() {
            match internal.recv().await {
                Ok(Internal::Done(n)) => {
                    tasks.remove(&n);
                }
                Ok(Internal::Fatal(_) | Internal::Ended(_)) | Err(_) => {
                    return false;
                }
                Ok(Internal::Initialized | Internal::Fallback { .. }) => {}
            }
        }
        true
    })
    .await;
    if delivered != Some(true) {
        tracing::debug!(target: "switchboard::http", server = %inner.server, left = tasks.len(), "messages queued at close were not all delivered");
    }
}

/// What a frame's POST waits for before it starts.
pub(super) struct Wait {
    /// Every notification and response sent before it was accepted.
    sent: Option<Receiver<()>>,
    /// The GET stream's first attempt settled (requests only).
    listening: Option<Receiver<()>>,
}

impl Wait {
    pub(super) fn none() -> Self {
        Wait {
            sent: None,
            listening: None,
        }
    }
}

/// Starts the POST of one frame in `mode`; it reports `Done(n)` when finished.
pub(super) fn spawn_post(
    inner: Arc<Inner>,
    mode: &Mode,
    frame: Bytes,
    info: FrameInfo,
    n: u64,
    wait_for: Wait,
    done_signal: Option<Sender<()>>,
) -> Task<()> {
    let endpoint = match mode {
        Mode::Streamable => None,
        Mode::Legacy(l) => Some(l.endpoint.clone()),
    };
    let spawner = inner.spawner.clone();
    spawner.spawn(async move {
        if let Some(rx) = wait_for.sent {
            // Closed (Err) once the earlier notifications were answered.
            let _ = rx.recv().await;
        }
        if let Some(rx) = wait_for.listening {
            // Closed once the GET stream's first attempt settled; bounded, so a slow stream
            // does not hold requests.
            let _ = with_timeout(LISTEN_WAIT, rx.recv()).await;
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
            // Refused credentials: the transport reports the refused frame and goes on; the
            // core decides whether that request or the whole attempt ends.
            Err(PostError::Auth(error)) => {
                inner
                    .emit
                    .emit(TransportEvent::Unauthorized {
                        id: info.request_id,
                        error,
                    })
                    .await
            }
            Err(PostError::Fallback(why)) => {
                let _ = inner
                    .internal
                    .send(Internal::Fallback {
                        frame: frame.clone(),
                        info: info.clone(),
                        why,
                    })
                    .await;
            }
            Err(PostError::Request(e)) => match info.request_id {
                Some(id) => {
                    tracing::debug!(target: "switchboard::http", server = %inner.server, method = info.method.unwrap_or("-"), id, "a request was not delivered: {e}");
                    inner.emit.request_failed(id, e).await
                }
                None => {
                    tracing::warn!(target: "switchboard::http", server = %inner.server, method = info.method.unwrap_or("-"), "a message was not accepted: {e}");
                }
            },
        }
        let _ = inner.internal.send(Internal::Done(n)).await;
    })
}
