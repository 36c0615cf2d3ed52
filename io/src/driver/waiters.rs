//! Waiters: the handle's requests that are answered later, once the core's outputs show
//! their work is done — a disconnect once its transports are closed, a refresh once its list
//! is applied or failed.

use super::link::Error;
use super::Driver;
use async_channel::Sender;
use std::collections::BTreeSet;
use switchboard_core::manager::{ConnId, Input};

/// A `disconnect`/`disconnect_all` waiting for transports to close.
pub(super) struct CloseWaiter {
    /// `None` until the outputs of the disconnect were performed; then the attempts that
    /// still had something open.
    conns: Option<BTreeSet<ConnId>>,
    /// `None`: every server.
    server: Option<String>,
    reply: Sender<Result<(), Error>>,
}

/// A `refresh_tools` waiting for the list it asked for.
pub(super) struct RefreshWaiter {
    server: String,
    state: RefreshWait,
    reply: Sender<Result<(), Error>>,
}

enum RefreshWait {
    /// Another re-list was under way when asked: issue ours once it ends, so the answer is a
    /// list fetched after the request.
    Queued,
    /// Ours is under way on this attempt.
    Issued(ConnId),
    /// The server was still connecting: its first list is the answer.
    FirstList,
}

/// How a re-list ended, seen in the core's outputs.
pub(super) enum RefreshSeen {
    Applied,
    Failed(String),
}

/// The core's wording of a failed re-list (`Manager::end_refresh`); the previous list stays.
const REFRESH_FAILED_SUFFIX: &str = "; keeping the previous tool list";

impl Driver {
    pub(super) fn on_disconnect(
        &mut self,
        server: Option<String>,
        reply: Sender<Result<(), Error>>,
    ) {
        let now = self.now();
        match &server {
            Some(name) => {
                if self.m.server_state(name).is_none() {
                    let _ = reply.try_send(Err(Error::UnknownServer(name.clone())));
                    return;
                }
                self.m.handle(
                    now,
                    Input::Disconnect {
                        server: name.clone(),
                    },
                );
            }
            None => self.m.handle(now, Input::DisconnectAll),
        }
        self.close_waiters.push(CloseWaiter {
            conns: None,
            server,
            reply,
        });
    }

    pub(super) fn on_refresh(&mut self, server: String, reply: Sender<Result<(), Error>>) {
        let Some(state) = self.m.server_state(&server) else {
            let _ = reply.try_send(Err(Error::UnknownServer(server)));
            return;
        };
        let state = match (state.phase, state.conn) {
            ("connected", Some(_)) if self.m.refreshing(&server) => RefreshWait::Queued,
            ("connected", Some(conn)) => {
                let now = self.now();
                self.m.handle(
                    now,
                    Input::RefreshTools {
                        server: server.clone(),
                    },
                );
                RefreshWait::Issued(conn)
            }
            ("opening" | "initializing" | "listing-tools", _) => RefreshWait::FirstList,
            (phase, _) => {
                let reason = state.last_error.unwrap_or_else(|| phase.to_string());
                let _ = reply.try_send(Err(Error::NotConnected { server, reason }));
                return;
            }
        };
        self.refresh_waiters.push(RefreshWaiter {
            server,
            state,
            reply,
        });
    }

    pub(super) fn observe_tools_changed(&mut self, servers: &[String]) {
        for w in &self.refresh_waiters {
            if servers.contains(&w.server) {
                self.refresh_seen
                    .push((w.server.clone(), RefreshSeen::Applied));
            }
        }
    }

    pub(super) fn observe_diagnostic(
        &mut self,
        server: Option<&str>,
        level: switchboard_core::manager::Level,
        message: &str,
    ) {
        let (Some(server), switchboard_core::manager::Level::Warn) = (server, level) else {
            return;
        };
        let Some(error) = message.strip_suffix(REFRESH_FAILED_SUFFIX) else {
            return;
        };
        if self.refresh_waiters.iter().any(|w| w.server == server) {
            self.refresh_seen
                .push((server.to_string(), RefreshSeen::Failed(error.to_string())));
        }
    }

    /// Answer the waiters whose work is done. True if it issued a queued refresh (its outputs
    /// are then waiting to be performed).
    pub(super) fn check_waiters(&mut self) -> bool {
        let mut waiters = std::mem::take(&mut self.close_waiters);
        waiters.retain_mut(|w| {
            let conns = w.conns.get_or_insert_with(|| {
                self.conn_server
                    .iter()
                    .filter(|(_, s)| match &w.server {
                        Some(n) => n == *s,
                        None => true,
                    })
                    .map(|(c, _)| *c)
                    .collect()
            });
            conns.retain(|c| self.conn_is_open(c));
            if conns.is_empty() {
                let _ = w.reply.try_send(Ok(()));
                false
            } else {
                true
            }
        });
        self.close_waiters = waiters;

        let seen = std::mem::take(&mut self.refresh_seen);
        let mut issued = false;
        let mut waiters = std::mem::take(&mut self.refresh_waiters);
        waiters.retain_mut(|w| {
            let state = self.m.server_state(&w.server);
            let phase = state.as_ref().map(|s| s.phase);
            let conn = state.as_ref().and_then(|s| s.conn);
            let lost = || {
                let error = state
                    .as_ref()
                    .and_then(|s| s.last_error.clone())
                    .unwrap_or_else(|| "the server was disconnected".to_string());
                Err(Error::Refresh {
                    server: w.server.clone(),
                    error,
                })
            };
            let outcome = match w.state {
                RefreshWait::Queued => match conn {
                    Some(c) if phase == Some("connected") => {
                        if !self.m.refreshing(&w.server) {
                            let now = self.clock.now();
                            self.m.handle(
                                now,
                                Input::RefreshTools {
                                    server: w.server.clone(),
                                },
                            );
                            w.state = RefreshWait::Issued(c);
                            issued = true;
                        }
                        None
                    }
                    _ => Some(lost()),
                },
                RefreshWait::Issued(c) => {
                    let ours = seen.iter().find(|(s, _)| *s == w.server).map(|(_, r)| r);
                    if phase != Some("connected") || conn != Some(c) {
                        Some(lost())
                    } else {
                        match ours {
                            Some(RefreshSeen::Failed(error)) => Some(Err(Error::Refresh {
                                server: w.server.clone(),
                                error: error.clone(),
                            })),
                            Some(RefreshSeen::Applied) => Some(Ok(())),
                            // Ended without a word (it could not be sent).
                            None if !self.m.refreshing(&w.server) => Some(Ok(())),
                            None => None,
                        }
                    }
                }
                RefreshWait::FirstList => match phase {
                    Some("connected") => Some(Ok(())),
                    Some("opening" | "initializing" | "listing-tools") => None,
                    _ => Some(lost()),
                },
            };
            match outcome {
                Some(result) => {
                    let _ = w.reply.try_send(result);
                    false
                }
                None => true,
            }
        });
        self.refresh_waiters = waiters;
        issued
    }
}
