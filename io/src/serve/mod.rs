//! Serving: every configured server as one MCP server, over stdio ([`serve_stdio`]) or
//! Streamable HTTP ([`serve_http`]).
//!
//! The decisions are the core's [`Gateway`]'s; this shell only carries frames. One loop owns
//! the gateway and feeds it what the downstream transports read, the library's events (the
//! view is handed over again after every change) and the completions of the calls and
//! operations it asked for; it performs the gateway's outputs: a frame to a session, a call or
//! operation through the library's API (one task each, dropped to cancel), a session to close.
//! The gateway's calls are the library's calls under the gateway's own numbers: the library's
//! events about its own call ids never reach the gateway.

mod http;
mod peer;
mod stdio;
mod watch;

pub use http::{serve_http, HttpServeError, HttpServeOptions};
pub use peer::PeerForwarder;
pub use stdio::serve_stdio;
pub use watch::{discovered_files, watch_config, watch_files, DEFAULT_WATCH_INTERVAL};

use crate::driver::link::{Error, Progress};
use crate::{CallOptions, Switchboard};
use async_channel::{Receiver, Sender};
use futures_lite::future;
use std::collections::BTreeMap;
use std::future::Future;
use switchboard_core::catalog::OperationOutcome;
use switchboard_core::gateway::{
    Gateway, GatewayInput, GatewayOptions, GatewayOutput, Unavailable, UnavailableServers, View,
};
use switchboard_core::manager::{
    CallError, CallId, CallOutcome, Event, Input, PeerRequestKey, WithdrawReason,
};
use switchboard_core::protocol::PeerAnswer;

/// The most bytes one downstream message may have (16 MiB); a longer one ends its session
/// (stdio) or is refused with `413` (HTTP).
pub const MAX_DOWNSTREAM_FRAME: usize = 16 * 1024 * 1024;

/// Completions of the work the loop started.
enum Internal {
    CallDone(CallId, CallOutcome),
    OpDone(CallId, OperationOutcome),
    Progress(CallId, Progress),
}

/// What a downstream transport does with the gateway's outputs about its sessions.
pub(crate) trait Sink {
    /// Perform one `Send`, `Accepted` or `Close`.
    fn deliver(&mut self, out: GatewayOutput) -> impl Future<Output = ()>;
}

/// What the loop waits for.
enum Wake {
    Downstream(Option<GatewayInput>),
    Internal(Internal),
    Event(Option<Result<Event, crate::RecvError>>),
    Peer(peer::Asked),
}

/// Run the gateway until `downstream` closes (every transport reader is gone): feed it, perform
/// its outputs through `sink` and the library. Calls still in flight are cancelled on return.
pub(crate) async fn run<S: Sink>(
    sb: &Switchboard,
    options: GatewayOptions,
    peers: Option<PeerForwarder>,
    downstream: Receiver<GatewayInput>,
    sink: &mut S,
) {
    let ex = async_executor::LocalExecutor::new();
    ex.run(run_loop(sb, options, peers, downstream, sink, &ex))
        .await;
}

async fn run_loop<S: Sink>(
    sb: &Switchboard,
    options: GatewayOptions,
    peers: Option<PeerForwarder>,
    downstream: Receiver<GatewayInput>,
    sink: &mut S,
    ex: &async_executor::LocalExecutor<'_>,
) {
    // The servers' requests waiting for a client, by the keys the loop gives them.
    let mut replies: BTreeMap<PeerRequestKey, Sender<PeerAnswer>> = BTreeMap::new();
    let mut next_peer = 0u64;
    let events = sb.events();
    let mut options = options;
    if options.request_state_key.is_none() {
        options.request_state_key = random_key();
    }
    if options.instance == 0 {
        options.instance = random_key().map_or(1, |k| {
            u64::from_le_bytes([
                k.0[0], k.0[1], k.0[2], k.0[3], k.0[4], k.0[5], k.0[6], k.0[7],
            ])
        });
    }
    let mut g = Gateway::new(options);
    let (internal_tx, internal_rx) = async_channel::unbounded::<Internal>();
    // The tasks of the calls and operations in flight; dropping one cancels it.
    let mut tasks: BTreeMap<CallId, async_executor::Task<()>> = BTreeMap::new();
    let mut events_open = true;
    g.handle(GatewayInput::View(view(sb)));
    g.handle(GatewayInput::Unavailable(unavailable(sb)));
    loop {
        let wake = future::or(
            async { Wake::Downstream(downstream.recv().await.ok()) },
            future::or(
                async {
                    // The loop holds a sender, so this never ends.
                    match internal_rx.recv().await {
                        Ok(i) => Wake::Internal(i),
                        Err(_) => future::pending().await,
                    }
                },
                future::or(
                    async {
                        if events_open {
                            Wake::Event(Some(events.recv().await))
                        } else {
                            future::pending().await
                        }
                    },
                    async {
                        // The loop's forwarder holds a sender too, so this never ends.
                        match &peers {
                            Some(p) => match p.rx.recv().await {
                                Ok(asked) => Wake::Peer(asked),
                                Err(_) => future::pending().await,
                            },
                            None => future::pending().await,
                        }
                    },
                ),
            ),
        )
        .await;
        match wake {
            Wake::Downstream(None) => break,
            Wake::Downstream(Some(input)) => g.handle(input),
            Wake::Internal(Internal::CallDone(call, outcome)) => {
                tasks.remove(&call);
                g.handle_event(&Event::CallCompleted { call, outcome });
            }
            Wake::Internal(Internal::OpDone(call, outcome)) => {
                tasks.remove(&call);
                g.handle_event(&Event::OperationCompleted { call, outcome });
            }
            Wake::Internal(Internal::Progress(call, p)) => g.handle_event(&Event::Progress {
                server: String::new(),
                call: Some(call),
                progress: p.progress,
                total: p.total,
                message: p.message,
            }),
            Wake::Event(Some(Ok(event))) => match &event {
                // The library's own calls: not the gateway's.
                Event::CallCompleted { .. }
                | Event::OperationCompleted { .. }
                | Event::Progress { .. } => {}
                Event::ServerLog { .. } | Event::ResourceUpdated { .. } => g.handle_event(&event),
                // A status changed, or a round ended (a sync after a re-discovery, which may
                // have started nothing: an approval withdrawn, a new server awaiting one).
                Event::StatusChanged { .. }
                | Event::StartupComplete { .. }
                | Event::SyncCompleted { .. } => {
                    g.handle(GatewayInput::View(view(sb)));
                    g.handle(GatewayInput::Unavailable(unavailable(sb)));
                }
                _ => g.handle(GatewayInput::View(view(sb))),
            },
            // Missed events: the view is read again, which is all they could have changed
            // that the gateway keeps.
            Wake::Event(Some(Err(crate::RecvError::Lagged { .. }))) => {
                g.handle(GatewayInput::View(view(sb)))
            }
            Wake::Event(_) => events_open = false,
            Wake::Peer(asked) => {
                next_peer += 1;
                let request = PeerRequestKey(next_peer);
                replies.insert(request, asked.reply);
                g.handle_event(&Event::PeerRequest {
                    server: asked.request.server,
                    request,
                    kind: asked.request.kind,
                    input: asked.request.input,
                });
            }
        }
        // A handler the library dropped (the server cancelled, its connection ended, the
        // request timed out) closed its reply channel: the request is withdrawn.
        let withdrawn: Vec<PeerRequestKey> = replies
            .iter()
            .filter(|(_, tx)| tx.is_closed())
            .map(|(k, _)| *k)
            .collect();
        for request in withdrawn {
            replies.remove(&request);
            g.handle_event(&Event::PeerRequestWithdrawn {
                server: String::new(),
                request,
                reason: WithdrawReason::RequestEnded,
            });
        }
        while let Some(out) = g.poll_output() {
            match out {
                GatewayOutput::Manager(Input::AnswerPeerRequest { request, answer }) => {
                    if let Some(reply) = replies.remove(&request) {
                        let _ = reply.try_send(answer);
                    }
                }
                GatewayOutput::Manager(input) => start(sb, ex, &internal_tx, &mut tasks, input),
                other => sink.deliver(other).await,
            }
        }
    }
}

/// A fresh key for the gateway's `requestState` seals, from the system's random source
/// (`None` without one: then multi round-trip requests of stateless clients are refused).
fn random_key() -> Option<switchboard_core::gateway::StateKey> {
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key))
        .ok()?;
    Some(switchboard_core::gateway::StateKey(key))
}

/// The manager's view as the library's snapshot holds it.
fn view(sb: &Switchboard) -> View {
    View {
        tools: sb.tools(),
        resources: sb.resources(),
        templates: sb.resource_templates(),
        prompts: sb.prompts(),
    }
}

/// The configured servers that serve nothing, and why: the project servers discovery left
/// awaiting approval, and the servers whose last attempt failed (a login they need among
/// them). The gateway names the reason and the fix when a call needs one of them.
fn unavailable(sb: &Switchboard) -> UnavailableServers {
    use switchboard_core::manager::{ServerErrorKind, ServerStatus};
    let mut out = UnavailableServers::new();
    if let Some(d) = sb.discovery() {
        for a in d.awaiting {
            out.insert(a.server, Unavailable::AwaitingApproval);
        }
    }
    for s in sb.servers() {
        if s.status == ServerStatus::Connected {
            continue;
        }
        if let Some(e) = s.last_error {
            if e.kind != ServerErrorKind::Disconnected {
                out.insert(s.name, Unavailable::Failed(e));
            }
        }
    }
    out
}

/// Perform one manager input of the gateway's through the library.
fn start<'a>(
    sb: &Switchboard,
    ex: &async_executor::LocalExecutor<'a>,
    done: &Sender<Internal>,
    tasks: &mut BTreeMap<CallId, async_executor::Task<()>>,
    input: Input,
) {
    match input {
        Input::CallTool {
            call,
            tool,
            arguments,
            timeout,
            progress,
            meta,
        } => {
            let (sb, done) = (sb.clone(), done.clone());
            let task = ex.spawn(async move {
                let handle = sb.call_with(
                    &tool,
                    arguments.unwrap_or_else(|| serde_json::json!({})),
                    CallOptions {
                        timeout,
                        progress,
                        meta,
                    },
                );
                let updates = handle.progress().cloned();
                let left = updates.clone();
                let forward = async {
                    if let Some(rx) = updates {
                        while let Ok(p) = rx.recv().await {
                            let _ = done.send(Internal::Progress(call, p)).await;
                        }
                    }
                    future::pending::<Result<switchboard_core::ToolResult, Error>>().await
                };
                let outcome = match future::or(handle, forward).await {
                    Ok(r) => CallOutcome::Ok(r),
                    Err(e) => match call_error(e) {
                        Some(e) => CallOutcome::Err(e),
                        None => CallOutcome::Cancelled,
                    },
                };
                // Progress the server sent before its result may still be queued when the
                // result wins the race above: it goes out first, in order.
                if let Some(rx) = left {
                    while let Ok(p) = rx.try_recv() {
                        let _ = done.send(Internal::Progress(call, p)).await;
                    }
                }
                let _ = done.send(Internal::CallDone(call, outcome)).await;
            });
            tasks.insert(call, task);
        }
        Input::Operation { call, op, timeout } => {
            let (sb, done) = (sb.clone(), done.clone());
            let task = ex.spawn(async move {
                let outcome = match sb.operation(op, timeout).await {
                    Ok(r) => OperationOutcome::Ok(r),
                    Err(e) => match call_error(e) {
                        Some(e) => OperationOutcome::Err(e),
                        None => OperationOutcome::Cancelled,
                    },
                };
                let _ = done.send(Internal::OpDone(call, outcome)).await;
            });
            tasks.insert(call, task);
        }
        Input::CancelCall { call } => {
            // Dropping the task drops its call handle, which cancels the call.
            tasks.remove(&call);
        }
        Input::SetRoots { roots } => {
            // The downstream client's roots (or, once it left, the configured ones).
            let sb = sb.clone();
            ex.spawn(async move {
                let _ = sb.set_roots(roots).await;
            })
            .detach();
        }
        _ => {}
    }
}

/// The library's error back as the core's (`None`: cancelled).
fn call_error(e: Error) -> Option<CallError> {
    Some(match e {
        Error::Call(e) => e,
        Error::Cancelled => return None,
        Error::UnknownServer(server) => CallError::UnknownServer { server },
        Error::NotConnected { server, reason } => CallError::NotConnected { server, reason },
        other => CallError::Protocol(other.to_string()),
    })
}
