//! Translating the core's reports into what the embedder sees: the shared snapshot the
//! handle reads, replies to waiting calls and rounds, `Event`s for subscribers, and log lines.
//! A server's stderr tail is added to the errors of attempts the core ended itself.

use super::link::Event;
use super::{Driver, Transport};
use crate::rt::OneshotSender;
use async_channel::Sender;
use std::sync::Arc;
use switchboard_core::manager::{CallOutcome, ConnId, Output, StartupReport};

/// What one drain of the core's outputs changed, published together at its end.
pub(super) struct Batch {
    refresh: bool,
    /// Rebuilding the view costs O(view): only when it changed, not on every status change.
    refresh_tools: bool,
    /// Events go out after the shared snapshot is refreshed, so a subscriber that reacts to
    /// `ToolsChanged` reads the new view.
    events: Vec<Event>,
    /// Nobody listens: no event is built (a startup report is then moved, not copied).
    subscribed: bool,
    replies: Vec<(Sender<StartupReport>, StartupReport)>,
    call_replies: Vec<(OneshotSender<CallOutcome>, CallOutcome)>,
}

impl Batch {
    pub(super) fn new(driver: &Driver) -> Self {
        Batch {
            refresh: false,
            refresh_tools: false,
            events: Vec::new(),
            subscribed: driver.subscribers.lock().is_ok_and(|s| !s.is_empty()),
            replies: Vec::new(),
            call_replies: Vec::new(),
        }
    }
}

impl Driver {
    /// One report of the core, into `batch`. Commands are performed by `perform_outputs`
    /// and never reach this.
    pub(super) fn report(&mut self, out: Output, batch: &mut Batch) {
        match out {
            Output::StartupComplete(mut report) => {
                for (server, error) in &mut report.errors {
                    self.add_failed_tail(server, error);
                }
                batch.refresh = true;
                batch.refresh_tools = true;
                match (self.startup_waiters.remove(&report.round), batch.subscribed) {
                    (Some((w, config)), true) => {
                        config.add_to(&mut report);
                        batch.replies.push((w, report.clone()));
                        batch.events.push(Event::StartupComplete { report });
                    }
                    (Some((w, config)), false) => {
                        config.add_to(&mut report);
                        batch.replies.push((w, report));
                    }
                    (None, true) => batch.events.push(Event::StartupComplete { report }),
                    (None, false) => {}
                }
            }
            Output::ToolsChanged { servers } => {
                batch.refresh = true;
                batch.refresh_tools = true;
                self.observe_tools_changed(&servers);
                if batch.subscribed {
                    batch.events.push(Event::ToolsChanged { servers });
                }
            }
            Output::StatusChanged { server, status } => {
                batch.refresh = true;
                if batch.subscribed {
                    batch.events.push(Event::StatusChanged { server, status });
                }
            }
            Output::CallCompleted { call, outcome } => {
                if let Some(reply) = self.calls.remove(&call) {
                    batch.call_replies.push((reply, outcome));
                }
            }
            Output::Diagnostic {
                server,
                level,
                mut message,
            } => {
                if let Some(s) = &server {
                    self.add_failed_tail(s, &mut message);
                }
                log_diagnostic(server.as_deref(), level, &message);
                self.observe_diagnostic(server.as_deref(), level, &message);
                if batch.subscribed {
                    batch.events.push(Event::Diagnostic {
                        server,
                        level,
                        message,
                    });
                }
            }
            Output::Progress {
                server,
                call,
                progress,
                total,
                message,
            } => batch.events.push(Event::Progress {
                server,
                call,
                progress,
                total,
                message,
            }),
            Output::ServerLog {
                server,
                level,
                severity,
                logger,
                data,
            } => {
                let text = switchboard_core::manager::log_text(&data);
                let line = match &logger {
                    Some(l) => format!("[{l}] {text}"),
                    None => text.into_owned(),
                };
                log_diagnostic(Some(&server), level, &line);
                batch.events.push(Event::ServerLog {
                    server,
                    level,
                    severity,
                    logger,
                    data,
                });
            }
            Output::ReconnectScheduled {
                server,
                attempt,
                delay,
                error,
            } => {
                let ms = delay.as_millis();
                let line = format!("{error}; reconnect attempt {attempt} in {ms} ms");
                log_diagnostic(Some(&server), switchboard_core::manager::Level::Warn, &line);
                batch.events.push(Event::ReconnectScheduled {
                    server,
                    attempt,
                    delay,
                    error,
                })
            }
            Output::ReconnectStarted { server, attempt } => batch
                .events
                .push(Event::ReconnectStarted { server, attempt }),
            Output::OpenTransport { .. }
            | Output::Send { .. }
            | Output::CloseTransport { .. }
            | Output::LoadCache { .. }
            | Output::StoreCache { .. } => {}
        }
    }

    /// Publishes a batch: the shared snapshot first, then the replies, then the events.
    pub(super) fn finish(&mut self, batch: Batch) {
        let Batch {
            refresh,
            refresh_tools,
            events,
            replies,
            call_replies,
            ..
        } = batch;
        if refresh {
            if let Ok(mut s) = self.shared.lock() {
                if refresh_tools {
                    s.tools = Arc::new(self.m.tools());
                }
                s.servers = self.m.servers();
                self.failed_tails.retain(|name, ft| {
                    s.servers
                        .iter()
                        .any(|st| st.name == *name && st.attempts == ft.attempts)
                });
                for st in &mut s.servers {
                    if let (Some(ft), Some(e)) =
                        (self.failed_tails.get(&st.name), st.last_error.as_mut())
                    {
                        if *e == ft.error {
                            e.push_str(&ft.tail);
                        }
                    }
                }
            }
        }
        for (w, report) in replies {
            let _ = w.try_send(report);
        }
        for (reply, outcome) in call_replies {
            let _ = reply.send(outcome);
        }
        for ev in events {
            self.publish(ev);
        }
    }

    fn publish(&self, ev: Event) {
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.retain(|s| s.try_send(ev.clone()).is_ok() || !s.is_closed() && !s.is_full());
        }
    }

    /// The core closes `conn` itself: if that ended the server's attempt with an error, keep
    /// the server's last stderr lines for that error, so a server that fails to start or dies
    /// reports them. Transports that end by themselves put them in their own
    /// `Closed`/`Failed` already.
    pub(super) fn remember_failed_tail(&mut self, conn: ConnId, t: &Transport) {
        let Transport::Stdio(t) = t else { return };
        let tail = t.stderr_tail();
        let Some(server) = self.conn_server.get(&conn) else {
            return;
        };
        let Some(state) = self.m.server_state(server) else {
            return;
        };
        if tail.is_empty() || state.conn == Some(conn) {
            return;
        }
        if let Some(error) = state.last_error {
            self.failed_tails.insert(
                server.clone(),
                FailedTail {
                    attempts: state.attempts,
                    error,
                    tail,
                },
            );
        }
    }

    /// Append the kept stderr tail to an error (or a message ending with it) of that attempt.
    fn add_failed_tail(&self, server: &str, message: &mut String) {
        if let Some(ft) = self.failed_tails.get(server) {
            if message.ends_with(&ft.error) {
                message.push_str(&ft.tail);
            }
        }
    }
}

/// The stderr tail of a stdio attempt the core ended with `error` (its `attempts`-th).
pub(super) struct FailedTail {
    attempts: u32,
    error: String,
    tail: String,
}

pub(super) fn log_diagnostic(
    server: Option<&str>,
    level: switchboard_core::manager::Level,
    message: &str,
) {
    use switchboard_core::manager::Level;
    let server = server.unwrap_or("-");
    match level {
        Level::Debug => tracing::debug!(target: "switchboard", server, "{message}"),
        Level::Info => tracing::info!(target: "switchboard", server, "{message}"),
        Level::Warn => tracing::warn!(target: "switchboard", server, "{message}"),
        Level::Error => tracing::error!(target: "switchboard", server, "{message}"),
    }
}
