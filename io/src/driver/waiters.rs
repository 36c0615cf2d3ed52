//! Waiters: the handle's requests, numbered for the core and answered from the one event that
//! completes each (see `events`). A disconnect has one more step in the shell: its answer
//! waits until the transports it closed are reaped.

use super::link::{ConfigReport, Error, Progress, RoundKind};
use super::Driver;
use crate::rt::OneshotSender;
use async_channel::Sender;
use std::collections::BTreeSet;
use switchboard_core::config::ServerSpec;
use switchboard_core::manager::{CallOutcome, ConnId, Input, RequestId, StartupReport};

/// A request in the core, waiting for its completion event.
pub(super) enum Waiter {
    /// `Connect`, `Reload`, `Sync`: the round's report (`None`: a `Sync` that opened none).
    Round {
        reply: Sender<Option<StartupReport>>,
        config: ConfigReport,
    },
    Refresh {
        reply: Sender<Result<(), Error>>,
    },
    /// `server`: `None` for every server.
    Disconnect {
        server: Option<String>,
        reply: Sender<Result<(), Error>>,
    },
}

/// A call in flight: its reply, and where its progress goes when the caller asked for it.
pub(super) struct CallSlot {
    pub(super) reply: OneshotSender<CallOutcome>,
    pub(super) progress: Option<Sender<Progress>>,
}

/// A disconnect done in the core, waiting for the transports it closed to be reaped.
pub(super) struct CloseWaiter {
    conns: BTreeSet<ConnId>,
    reply: Sender<Result<(), Error>>,
}

impl Driver {
    pub(super) fn next_request_id(&mut self) -> RequestId {
        let id = RequestId(self.next_request);
        self.next_request += 1;
        id
    }

    pub(super) fn on_round(
        &mut self,
        kind: RoundKind,
        servers: Vec<ServerSpec>,
        config: ConfigReport,
        reply: Sender<Option<StartupReport>>,
    ) {
        self.remember_auth(&servers);
        let request = self.next_request_id();
        self.waiters
            .insert(request, Waiter::Round { reply, config });
        let input = match kind {
            RoundKind::Connect => Input::Connect { request, servers },
            RoundKind::Reload => Input::Reload { request, servers },
            RoundKind::Sync => Input::Sync { request, servers },
        };
        let now = self.now();
        self.m.handle(now, input);
    }

    pub(super) fn on_disconnect(
        &mut self,
        server: Option<String>,
        reply: Sender<Result<(), Error>>,
    ) {
        let request = self.next_request_id();
        let input = match &server {
            Some(name) => Input::Disconnect {
                request,
                server: name.clone(),
            },
            None => Input::DisconnectAll { request },
        };
        self.waiters
            .insert(request, Waiter::Disconnect { server, reply });
        let now = self.now();
        self.m.handle(now, input);
    }

    pub(super) fn on_refresh(&mut self, server: String, reply: Sender<Result<(), Error>>) {
        let request = self.next_request_id();
        self.waiters.insert(request, Waiter::Refresh { reply });
        let now = self.now();
        self.m.handle(now, Input::RefreshTools { request, server });
    }

    /// The core closed `closed` for a disconnect: answer once they, and any earlier attempt
    /// of the same servers still being reaped, are gone.
    pub(super) fn wait_for_close(
        &mut self,
        server: Option<String>,
        closed: &[ConnId],
        reply: Sender<Result<(), Error>>,
    ) {
        let mut conns: BTreeSet<ConnId> = closed.iter().copied().collect();
        conns.extend(
            self.conn_server
                .iter()
                .filter(|(_, s)| server.as_ref().is_none_or(|n| n == *s))
                .map(|(c, _)| *c),
        );
        self.close_waiters.push(CloseWaiter { conns, reply });
    }

    /// Answer the disconnects whose transports are all reaped.
    pub(super) fn check_close_waiters(&mut self) {
        if self.close_waiters.is_empty() {
            return;
        }
        let mut waiters = std::mem::take(&mut self.close_waiters);
        waiters.retain_mut(|w| {
            w.conns.retain(|c| self.conn_is_open(c));
            if w.conns.is_empty() {
                let _ = w.reply.try_send(Ok(()));
                false
            } else {
                true
            }
        });
        self.close_waiters = waiters;
    }
}
