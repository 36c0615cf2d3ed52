//! Delivering the core's events: replies to the requests and calls they complete, the shared
//! snapshot the handle reads, log lines, and the events themselves to subscribers — unchanged,
//! as the core produced them.

use super::waiters::Waiter;
use super::Driver;
use crate::driver::link::{Error, Progress};
use crate::rt::OneshotSender;
use async_channel::Sender;
use std::sync::Arc;
use switchboard_core::catalog::OperationOutcome;
use switchboard_core::manager::{CallOutcome, Event, Level, RequestError, StartupReport};

/// What one drain of the core's outputs changed, published together at its end.
pub(super) struct Batch {
    refresh: bool,
    /// Rebuilding the view costs O(view): only when it changed, not on every status change.
    refresh_tools: bool,
    /// Events go out after the shared snapshot is refreshed, so a subscriber that reacts to
    /// `ToolsChanged` reads the new view, and before the replies of the same batch.
    events: Vec<Event>,
    /// Nobody listens: events are not kept (a startup report is then moved, not copied).
    subscribed: bool,
    replies: Vec<(Sender<Option<StartupReport>>, Option<StartupReport>)>,
    call_replies: Vec<CallReply>,
    op_replies: Vec<(OneshotSender<OperationOutcome>, OperationOutcome)>,
    /// The resources, templates and prompts changed (or may have, with the tool view).
    refresh_catalog: bool,
    /// Refresh and refusal answers: sent after the snapshot, so a caller that reads the view
    /// once `refresh_tools` returned sees the new list.
    answers: Vec<(Sender<Answer>, Answer)>,
}

/// A call's outcome, with where it goes.
pub(super) type CallReply = (OneshotSender<CallOutcome>, CallOutcome);

/// A waiter's answer to the handle.
type Answer = Result<(), Error>;

impl Batch {
    pub(super) fn new(driver: &mut Driver) -> Self {
        Batch {
            refresh: false,
            refresh_tools: false,
            events: Vec::new(),
            subscribed: driver.subscribers.any(),
            replies: Vec::new(),
            // The driver's spare list, empty: most batches answer a call.
            call_replies: std::mem::take(&mut driver.spare_call_replies),
            op_replies: Vec::new(),
            refresh_catalog: false,
            answers: Vec::new(),
        }
    }

    fn publish(&mut self, ev: Event) {
        if self.subscribed {
            self.events.push(ev);
        }
    }
}

impl Driver {
    /// One event of the core, into `batch`.
    pub(super) fn deliver(&mut self, ev: Event, batch: &mut Batch) {
        match ev {
            Event::StartupComplete { mut report } => {
                batch.refresh = true;
                batch.refresh_tools = true;
                let waiter = report.request.and_then(|r| self.waiters.remove(&r));
                match waiter {
                    Some(Waiter::Round { reply, config }) => {
                        config.add_to(&mut report);
                        if batch.subscribed {
                            batch.replies.push((reply, Some(report.clone())));
                        } else {
                            batch.replies.push((reply, Some(report)));
                            return;
                        }
                    }
                    Some(other) => {
                        // Not a round's request (cannot happen): keep it for its own answer.
                        if let Some(r) = report.request {
                            self.waiters.insert(r, other);
                        }
                    }
                    None => {}
                }
                batch.publish(Event::StartupComplete { report });
            }
            Event::SyncCompleted { request } => {
                if let Some(Waiter::Round { reply, .. }) = self.waiters.remove(&request) {
                    batch.replies.push((reply, None));
                }
                batch.publish(Event::SyncCompleted { request });
            }
            Event::RefreshCompleted {
                request,
                server,
                result,
            } => {
                if let Some(Waiter::Refresh { reply }) = self.waiters.remove(&request) {
                    let answer = result.clone().map_err(|error| match error {
                        switchboard_core::RefreshError::NotConnected { server, reason } => {
                            Error::NotConnected { server, reason }
                        }
                        error => Error::Refresh {
                            server: server.clone(),
                            error,
                        },
                    });
                    batch.answers.push((reply, answer));
                }
                batch.publish(Event::RefreshCompleted {
                    request,
                    server,
                    result,
                });
            }
            Event::Disconnected { request, closed } => {
                if let Some(Waiter::Disconnect { server, reply }) = self.waiters.remove(&request) {
                    self.wait_for_close(server, &closed, reply);
                }
                batch.publish(Event::Disconnected { request, closed });
            }
            Event::RequestFailed { request, error } => {
                if let Some(w) = self.waiters.remove(&request) {
                    let e = match &error {
                        RequestError::UnknownServer(name) => Error::UnknownServer(name.clone()),
                        other => Error::Refused(other.clone()),
                    };
                    match w {
                        Waiter::Refresh { reply } | Waiter::Disconnect { reply, .. } => {
                            batch.answers.push((reply, Err(e)));
                        }
                        // Dropped unanswered: the handle reads that as "no report".
                        Waiter::Round { .. } => {}
                    }
                }
                batch.publish(Event::RequestFailed { request, error });
            }
            Event::CallCompleted { call, outcome } => {
                if let Some(slot) = self.calls.remove(&call) {
                    if batch.subscribed {
                        batch.call_replies.push((slot.reply, outcome.clone()));
                    } else {
                        batch.call_replies.push((slot.reply, outcome));
                        return;
                    }
                }
                batch.publish(Event::CallCompleted { call, outcome });
            }
            Event::OperationCompleted { call, outcome } => {
                if let Some(reply) = self.ops.remove(&call) {
                    if batch.subscribed {
                        batch.op_replies.push((reply, outcome.clone()));
                    } else {
                        batch.op_replies.push((reply, outcome));
                        return;
                    }
                }
                batch.publish(Event::OperationCompleted { call, outcome });
            }
            Event::Progress {
                server,
                call,
                progress,
                total,
                message,
            } => {
                let watcher = call.and_then(|c| self.calls.get(&c)?.progress.as_ref());
                if let Some(tx) = watcher {
                    // Bounded: a caller that does not read its progress misses some.
                    let _ = tx.try_send(Progress {
                        progress,
                        total,
                        message: message.clone(),
                    });
                }
                batch.publish(Event::Progress {
                    server,
                    call,
                    progress,
                    total,
                    message,
                });
            }
            ev => {
                match &ev {
                    Event::ToolsChanged { .. } => {
                        batch.refresh = true;
                        batch.refresh_tools = true;
                    }
                    Event::StatusChanged { .. } => batch.refresh = true,
                    Event::PeerRequest { .. } | Event::PeerRequestWithdrawn { .. } => {
                        self.on_peer_event(&ev)
                    }
                    Event::ResourcesChanged { .. } | Event::PromptsChanged { .. } => {
                        batch.refresh = true;
                        batch.refresh_catalog = true;
                    }
                    _ => {}
                }
                log_event(&ev);
                batch.publish(ev);
            }
        }
    }

    /// Publishes a batch: the shared snapshot first, then the events, then the replies.
    pub(super) fn finish(&mut self, batch: Batch) {
        let Batch {
            refresh,
            refresh_tools,
            events,
            replies,
            call_replies,
            op_replies,
            answers,
            refresh_catalog,
            ..
        } = batch;
        if refresh {
            if let Ok(mut s) = self.shared.lock() {
                if refresh_tools {
                    s.tools = Arc::new(self.m.tools());
                }
                // The catalog is shown exactly when the tools are: it changes with them.
                if refresh_tools || refresh_catalog {
                    s.resources = Arc::new(self.m.resources());
                    s.templates = Arc::new(self.m.resource_templates());
                    s.prompts = Arc::new(self.m.prompts());
                }
                s.servers = self.m.servers();
            }
        }
        // Events before replies: a caller whose request completed finds every event of the
        // same batch (the `ToolsChanged` its refresh caused, say) already queued for its
        // subscription, whichever thread runs it. Publishing never waits.
        for ev in &events {
            self.subscribers.publish(ev);
        }
        for (w, report) in replies {
            let _ = w.try_send(report);
        }
        let mut call_replies = call_replies;
        for (reply, outcome) in call_replies.drain(..) {
            let _ = reply.send(outcome);
        }
        self.spare_call_replies = call_replies;
        for (reply, outcome) in op_replies {
            let _ = reply.send(outcome);
        }
        for (reply, answer) in answers {
            let _ = reply.try_send(answer);
        }
    }
}

/// Diagnostics, server logs and scheduled reconnects go to `tracing` too: the library's own
/// diagnostics under the target `switchboard::diagnostic`, what servers log under
/// `switchboard::server_log`, so an embedder can show the one without the other (the command
/// line shows diagnostic warnings by default, server logs only when asked).
fn log_event(ev: &Event) {
    match ev {
        Event::Diagnostic {
            server,
            level,
            message,
        } => log_diagnostic(server.as_deref(), *level, message),
        Event::ServerLog {
            server,
            level,
            logger,
            data,
            ..
        } => {
            let text = switchboard_core::manager::log_text(data);
            let text = match logger {
                Some(l) => format!("[{l}] {text}"),
                None => text.into_owned(),
            };
            match level {
                Level::Debug => {
                    tracing::debug!(target: "switchboard::server_log", server = %server, "{text}")
                }
                Level::Info => {
                    tracing::info!(target: "switchboard::server_log", server = %server, "{text}")
                }
                Level::Warn => {
                    tracing::warn!(target: "switchboard::server_log", server = %server, "{text}")
                }
                _ => tracing::error!(target: "switchboard::server_log", server = %server, "{text}"),
            }
        }
        Event::ReconnectScheduled {
            server,
            attempt,
            delay,
            error,
        } => {
            let ms = delay.as_millis();
            let line = format!("{error}; reconnect attempt {attempt} in {ms} ms");
            log_diagnostic(Some(server), Level::Warn, &line);
        }
        _ => {}
    }
}

pub(super) fn log_diagnostic(server: Option<&str>, level: Level, message: &str) {
    let server = server.unwrap_or("-");
    match level {
        Level::Debug => tracing::debug!(target: "switchboard::diagnostic", server, "{message}"),
        Level::Info => tracing::info!(target: "switchboard::diagnostic", server, "{message}"),
        Level::Warn => tracing::warn!(target: "switchboard::diagnostic", server, "{message}"),
        _ => tracing::error!(target: "switchboard::diagnostic", server, "{message}"),
    }
}
