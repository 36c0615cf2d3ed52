//! The embedder's request ledger: every request the simulated embedder issues (with its
//! `RequestId`) and the one event that must complete it. It checks that each request
//! completes exactly once and with the right kind of event, that a round's report reaches the
//! request that opened it, that a refresh's answer comes from a list fetched after it was
//! asked, and that an error's stderr tail is the lines of the attempt it names.

use super::World;
use crate::verdict::Invariant;
use std::collections::BTreeMap;
use switchboard_core::manager::{
    CallError, CallOutcome, ConnId, Event, Input, Output, RefreshError, RequestId, ServerError,
    ServerStatus, TransportEvent,
};

/// What a request in flight asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `Connect` or `Reload`: must open a round in its own step.
    Round,
    Sync,
    Disconnect,
    DisconnectAll,
    Refresh,
}

/// One request in flight.
#[derive(Debug, Clone)]
pub(super) struct Open {
    kind: Kind,
    server: Option<usize>,
    /// The round it opened, once `RoundStarted` named it.
    round: Option<u64>,
    /// For a refresh of a connected server: the `tools/list` requests its server had been
    /// sent when the refresh was asked (its answer must come from a later one).
    lists_at: Option<u64>,
}

/// The ledger.
#[derive(Debug, Default)]
pub(super) struct Requests {
    next: u64,
    open: BTreeMap<RequestId, Open>,
    /// `tools/list` requests the manager wrote to each server so far.
    lists_sent: BTreeMap<usize, u64>,
    /// The request the current step's input carried.
    pub(super) current: Option<RequestId>,
}

impl Requests {
    /// Requests issued and not completed.
    pub(super) fn in_flight(&self) -> Vec<u64> {
        self.open.keys().map(|r| r.0).collect()
    }
}

/// The line a simulated process writes to stderr: it names its attempt, so a tail can be
/// traced back to the attempt that wrote it.
pub(super) fn stderr_line(conn: ConnId, what: &str) -> String {
    format!("#{} {what}", conn.0)
}

impl World<'_> {
    /// A fresh request id.
    pub(super) fn rid(&mut self) -> RequestId {
        self.requests.next += 1;
        RequestId(self.requests.next)
    }

    /// Enter an embedder request into the ledger before the manager handles it.
    pub(super) fn request_issued(&mut self, input: &Input) {
        let (request, kind, server) = match input {
            Input::Connect { request, .. } | Input::Reload { request, .. } => {
                (*request, Kind::Round, None)
            }
            Input::Sync { request, .. } => (*request, Kind::Sync, None),
            Input::Disconnect { request, server } => (
                *request,
                Kind::Disconnect,
                self.obs.index.get(server).copied(),
            ),
            Input::DisconnectAll { request } => (*request, Kind::DisconnectAll, None),
            Input::RefreshTools { request, server } => {
                (*request, Kind::Refresh, self.obs.index.get(server).copied())
            }
            _ => {
                self.requests.current = None;
                return;
            }
        };
        let lists_at = match (kind, server) {
            (Kind::Refresh, Some(i)) if self.view.status[i] == ServerStatus::Connected => {
                Some(self.requests.lists_sent.get(&i).copied().unwrap_or(0))
            }
            _ => None,
        };
        self.requests.current = Some(request);
        let open = Open {
            kind,
            server,
            round: None,
            lists_at,
        };
        if self.requests.open.insert(request, open).is_some() {
            self.fail(
                Invariant::EveryRequestCompletesOnce,
                format!("request r{} issued twice", request.0),
            );
        }
    }

    /// One output, as the ledger sees it.
    pub(super) fn request_output(&mut self, o: &Output) {
        match o {
            Output::Send { conn, meta, .. } if meta.method == Some("tools/list") => {
                if let Some(p) = self.procs.get(conn) {
                    *self.requests.lists_sent.entry(p.server).or_default() += 1;
                }
            }
            Output::Event(Event::RoundStarted { request, round }) => {
                match self.requests.open.get_mut(request) {
                    Some(o) if matches!(o.kind, Kind::Round | Kind::Sync) && o.round.is_none() => {
                        o.round = Some(*round);
                    }
                    _ => self.request_wrong(*request, "RoundStarted"),
                }
            }
            Output::Event(Event::StartupComplete { report }) => {
                let Some(request) = report.request else {
                    return self.fail(
                        Invariant::RoundReportReachesItsRequest,
                        format!("round {} reported without its request", report.round),
                    );
                };
                match self.requests.open.remove(&request) {
                    Some(o) if o.round == Some(report.round) => self.cov.round_reports_matched += 1,
                    _ => self.fail(
                        Invariant::RoundReportReachesItsRequest,
                        format!(
                            "round {} reported to r{}, which did not open it",
                            report.round, request.0
                        ),
                    ),
                }
                for (name, e) in &report.errors {
                    self.check_tail(name, e, None);
                }
            }
            Output::Event(Event::SyncCompleted { request }) => {
                self.complete(*request, "SyncCompleted", |o| {
                    o.kind == Kind::Sync && o.round.is_none()
                });
                self.cov.syncs_without_round += 1;
            }
            Output::Event(Event::Disconnected { request, .. }) => {
                self.complete(*request, "Disconnected", |o| {
                    matches!(o.kind, Kind::Disconnect | Kind::DisconnectAll)
                });
            }
            Output::Event(Event::RequestFailed { request, .. }) => {
                self.cov.requests_refused += 1;
                self.complete(*request, "RequestFailed", |o| {
                    matches!(o.kind, Kind::Disconnect | Kind::Refresh)
                });
            }
            Output::Event(Event::RefreshCompleted {
                request,
                server,
                result,
            }) => self.refresh_completed(*request, server, result),
            Output::Event(Event::ReconnectScheduled { server, error, .. }) => {
                let latest = self
                    .obs
                    .index
                    .get(server)
                    .and_then(|&i| self.obs.latest_conn[i]);
                self.check_tail(server, error, latest);
            }
            Output::Event(Event::CallCompleted {
                outcome: CallOutcome::Err(CallError::Transport(e)),
                ..
            }) if e.kind == switchboard_core::manager::ServerErrorKind::RequestFailed => {
                self.cov.calls_failed_by_transport += 1;
            }
            Output::Event(Event::SessionRenewed { .. }) => self.cov.sessions_renewed += 1,
            _ => {}
        }
    }

    fn refresh_completed(
        &mut self,
        request: RequestId,
        server: &str,
        result: &Result<(), RefreshError>,
    ) {
        let i = self.obs.index.get(server).copied();
        let Some(o) = self.requests.open.remove(&request) else {
            return self.request_wrong(request, "RefreshCompleted");
        };
        if o.kind != Kind::Refresh || o.server != i {
            return self.request_wrong(request, "RefreshCompleted");
        }
        match result {
            Ok(()) | Err(RefreshError::Failed(_)) => {
                let sent = i.and_then(|i| self.requests.lists_sent.get(&i).copied());
                if let Some(at) = o.lists_at {
                    if sent.unwrap_or(0) <= at {
                        return self.fail(
                            Invariant::RefreshReportsItsOwnResult,
                            format!(
                                "refresh r{} of {server} answered without a list asked after it",
                                request.0
                            ),
                        );
                    }
                    self.cov.refreshes_answered_by_their_list += 1;
                } else {
                    self.cov.refreshes_answered_by_first_list += 1;
                }
            }
            Err(RefreshError::NotConnected { .. }) => {
                self.cov.refreshes_refused_not_connected += 1;
                if o.lists_at.is_some() {
                    self.fail(
                        Invariant::RefreshReportsItsOwnResult,
                        format!(
                            "refresh r{} of connected {server} said not connected",
                            request.0
                        ),
                    )
                }
            }
            Err(_) => self.cov.refreshes_lost += 1,
        }
    }

    fn complete(&mut self, request: RequestId, what: &str, ok: impl Fn(&Open) -> bool) {
        match self.requests.open.remove(&request) {
            Some(o) if ok(&o) => {}
            _ => self.request_wrong(request, what),
        }
    }

    fn request_wrong(&mut self, request: RequestId, what: &str) {
        self.fail(
            Invariant::EveryRequestCompletesOnce,
            format!(
                "{what} for r{}, which is not a request in flight of that kind",
                request.0
            ),
        );
    }

    /// After the step of an embedder request: what must complete in its own step did.
    pub(super) fn request_step_done(&mut self) {
        let Some(request) = self.requests.current.take() else {
            return;
        };
        let Some(o) = self.requests.open.get(&request) else {
            return;
        };
        let pending_ok = match o.kind {
            Kind::Round | Kind::Sync => o.round.is_some(),
            Kind::Refresh => o.server.is_some(),
            Kind::Disconnect | Kind::DisconnectAll => false,
        };
        if !pending_ok {
            self.fail(
                Invariant::EveryRequestCompletesOnce,
                format!(
                    "request r{} ({:?}) neither completed nor started its work",
                    request.0, o.kind
                ),
            );
        }
    }

    /// A stderr tail names the attempt that wrote it: all its lines come from one attempt of
    /// that server (`conn`, when the error is known to be that attempt's).
    fn check_tail(&mut self, server: &str, e: &ServerError, conn: Option<ConnId>) {
        let Some(tail) = &e.stderr_tail else {
            return;
        };
        self.cov.stderr_tails_checked += 1;
        let i = self.obs.index.get(server).copied();
        let mut owner: Option<u64> = None;
        for line in tail.lines() {
            let id = line
                .strip_prefix('#')
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse::<u64>().ok());
            let from = id.and_then(|id| self.procs.get(&ConnId(id)).map(|p| (id, p.server)));
            let fine = match (from, owner) {
                (Some((id, s)), None) if Some(s) == i => {
                    owner = Some(id);
                    true
                }
                (Some((id, _)), Some(o)) => id == o,
                _ => false,
            };
            if !fine || conn.is_some_and(|c| Some(c.0) != owner) {
                return self.fail(
                    Invariant::StderrTailsBelongToTheirAttempt,
                    format!("{server}'s error carries stderr line {line:?} of another attempt"),
                );
            }
        }
    }

    /// The OS's stderr line for attempt `conn`, delivered at `at` (stdio servers only).
    pub(super) fn write_stderr(&mut self, conn: ConnId, what: &str, at: switchboard_core::Instant) {
        let Some(p) = self.procs.get(&conn) else {
            return;
        };
        if super::embedder::is_http(p.server) {
            return; // HTTP: no process
        }
        let line = stderr_line(conn, what);
        self.push(
            at,
            super::Ev::Deliver {
                conn,
                event: TransportEvent::Stderr { line },
                exit: false,
                tag: super::server::Tag::None,
            },
        );
    }
}
