//! The simulated operating system: the processes (or HTTP sessions) behind connection
//! attempts, what the shell's `OpenTransport`, `Send` and `CloseTransport` do to them, the
//! events their transports report back (opens, exits, spawn failures, the shell's races), and
//! the tool cache store the manager loads and saves.

use super::embedder::is_http;
use super::server::{Tag, GARBAGE_FRAME};
use super::{Ev, World};
use crate::observe::{ConnObs, Refusal, View};
use crate::scenario::{AttemptPlan, Init, List, Scenario, Spawn};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use switchboard_core::auth::AuthError;
use switchboard_core::catalog::Catalog;
use switchboard_core::manager::{CacheKey, ConnId, Input, ServerStatus, TransportEvent};
use switchboard_core::protocol::CacheScope;
use switchboard_core::tool::ToolDef;
use switchboard_core::Instant;

/// A simulated process (or HTTP session) behind one connection attempt.
#[derive(Debug, Clone)]
pub(super) struct Proc {
    pub(super) server: usize,
    pub(super) plan: AttemptPlan,
    /// The OS killed it on the manager's `CloseTransport`.
    pub(super) killed: bool,
    /// It ended by itself (exit, spawn failure).
    pub(super) exited: bool,
    /// Its end was reported to the manager (`Closed`/`Failed`).
    pub(super) reported: bool,
    pub(super) spawned: bool,
    pub(super) lists: u32,
    pub(super) calls: u32,
    pub(super) alt_tools: bool,
    pub(super) next_peer_id: u64,
    pub(super) peer_requests: BTreeMap<u64, &'static str>,
    /// Ids of the `tools/call` requests it received.
    pub(super) call_ids: std::collections::BTreeSet<u64>,
    /// Its tool set's version (bumped on every change, each announced by list_changed).
    pub(super) version: u64,
    /// The version the first page of the listing under way was generated from.
    pub(super) list_version: Option<u64>,
    /// tools/list requests received whose answer has not reached the manager (nor been
    /// cancelled by it).
    pub(super) open_lists: BTreeSet<u64>,
    /// list_changed notifications sent and not yet delivered.
    pub(super) changed_in_flight: u32,
    /// The tool-set version the manager last received a complete listing of (`None`: unknown,
    /// e.g. the last listing failed or was abandoned).
    pub(super) view_version: Option<u64>,
    /// Stops answering pings from this time on.
    pub(super) deaf_at: Option<Instant>,
    /// How the listing under way behaves (its later pages follow its first).
    pub(super) cur_list: Option<List>,
    /// The tasks it runs (tool calls sent as tasks), by task id.
    pub(super) tasks: BTreeMap<String, super::tasks::SimTask>,
    /// Its requests to the client (sampling, elicitation) and what it saw of them.
    pub(super) peer: super::peer::ProcPeer,
    /// Its resources, templates and prompts (`--catalog` servers): what the manager was sent.
    pub(super) catalog: super::catalog::CatalogProc,
    /// What it saw of the protocol revision (the probe, the stateless requests).
    pub(super) era: super::era::ProcEra,
}

impl Proc {
    pub(super) fn alive(&self) -> bool {
        self.spawned && !self.killed && !self.exited
    }
}

#[derive(Default)]
pub(super) struct StoreEntry {
    pub(super) hash: String,
    /// `None`: corrupt.
    pub(super) tools: Option<Vec<ToolDef>>,
    /// The catalog stored beside the tools (with the revision the server spoke, so a warm
    /// start skips the probe); none for the entries a scenario starts with.
    pub(super) catalog: Option<Catalog>,
    /// When it was written (its freshness hint counts from then).
    pub(super) stored_at: Instant,
    /// Times it was read.
    pub(super) loads: u32,
}

/// The fingerprint a private entry carries when the store hands it to another user's
/// credentials: the client must not use it.
pub(super) const FOREIGN_IDENTITY: &str = "written-under-other-credentials";

/// A healthy attempt: what every attempt becomes after the heal.
pub(super) fn healthy() -> AttemptPlan {
    AttemptPlan {
        spawn: Spawn::Ok { open_ms: 5 },
        init: Init::Ok { ms: 5 },
        list: List::Ok { ms: 5, pages: 1 },
        drop_after_ready_ms: None,
        drop_on_call: false,
        oversized_after_ms: None,
        deaf_after_ms: None,
    }
}

impl<'a> World<'a> {
    /// Servers whose tool listing has settled: connected, no listing and no list_changed in
    /// flight. `Some(tools)`: the set the manager last listed is the current one; `None`: the
    /// set changed (announced) since the last complete listing, and no re-list is under way.
    /// Written into `v` (emptied first), a buffer the world keeps from step to step.
    pub(super) fn settled(&self, after: &View, v: &mut Vec<(usize, Option<&'a [String]>)>) {
        let sc: &'a Scenario = self.sc;
        v.clear();
        for (i, st) in after.status.iter().enumerate() {
            if *st != ServerStatus::Connected {
                continue;
            }
            let Some(p) = self.obs.latest_conn[i].and_then(|c| self.procs.get(&c)) else {
                continue;
            };
            if !p.alive() || p.reported || !p.open_lists.is_empty() || p.changed_in_flight > 0 {
                continue;
            }
            // Without the tools capability it never declared tools.listChanged either.
            if matches!(p.plan.init, Init::NoTools { .. }) {
                continue;
            }
            match p.view_version {
                None => {}
                Some(x) if x == p.version => {
                    let s = &sc.servers[i];
                    let tools = if p.alt_tools { &s.alt_tools } else { &s.tools };
                    v.push((i, Some(tools.as_slice())));
                }
                Some(_) => v.push((i, None)),
            }
        }
    }

    /// The cache store answers a lookup.
    pub(super) fn cache_answers(
        &mut self,
        server: String,
        key: CacheKey,
        tools: Option<Vec<ToolDef>>,
        catalog: Option<Catalog>,
    ) {
        if let Some(&i) = self.obs.index.get(&server) {
            // Not the answer the manager is waiting for (none is awaited, or it is for
            // another config): stale, so it must change nothing and be counted.
            let stale = !matches!(&self.awaiting_cache[i], Some((_, h)) if *h == key.config_hash);
            let c = self.m.counters();
            let counted = (c.stale_events, c.stale_opened_closed, false);
            self.cov.stale_cache_answers += u64::from(stale);
            if let Some((c, h)) = &self.awaiting_cache[i] {
                if *h == key.config_hash {
                    let c = *c;
                    // An entry of other credentials is a miss to the client.
                    let foreign = catalog
                        .as_ref()
                        .and_then(|c| c.freshness.as_ref())
                        .is_some_and(|f| f.identity.as_deref() == Some(FOREIGN_IDENTITY));
                    if let Some(o) = self.obs.conns.get_mut(&c) {
                        o.cache_hit = Some(tools.is_some() && !foreign);
                    }
                    self.awaiting_cache[i] = None;
                }
            }
            self.input(
                Input::CacheLoaded {
                    server,
                    key,
                    tools,
                    catalog,
                },
                |s| {
                    s.scope = Some(i);
                    s.stale = stale;
                    s.stale_counters_before = stale.then_some(counted);
                },
            );
        }
    }

    /// The manager asks the store for a server's cached tools; the answer comes after the
    /// server's cache latency.
    pub(super) fn load_cache(&mut self, server: String, key: CacheKey) {
        let Some(&i) = self.obs.index.get(&server) else {
            return;
        };
        self.pending_load[i] = Some(key.config_hash.clone());
        let lat = self.sc.servers[i].cache_latency_ms + self.jitter();
        let at = self.after_ms(lat);
        let (tools, catalog, stale, corrupt) = match self.store.get_mut(&server) {
            Some(e) if e.hash == key.config_hash => {
                e.loads += 1;
                let mut catalog = e.tools.as_ref().and(e.catalog.clone());
                // The hint counts from the store; the client gets what is left when the
                // answer reaches it. About a third of the private entries read are ones
                // written under other credentials (picked by when they were written).
                if let Some(f) = catalog.as_mut().and_then(|c| c.freshness.as_mut()) {
                    let age = at.saturating_duration_since(e.stored_at).as_millis();
                    f.ttl_ms = f
                        .ttl_ms
                        .saturating_sub(u64::try_from(age).unwrap_or(u64::MAX));
                    let pick = e.stored_at.as_millis() + u64::from(e.loads);
                    if f.scope == CacheScope::Private && pick % 3 == 0 {
                        f.identity = Some(FOREIGN_IDENTITY.into());
                    }
                }
                (e.tools.clone(), catalog, false, e.tools.is_none())
            }
            Some(_) => (None, None, true, false),
            None => (None, None, false, false),
        };
        if let Some(f) = catalog.as_ref().and_then(|c| c.freshness.as_ref()) {
            if f.identity.as_deref() == Some(FOREIGN_IDENTITY) {
                self.cov.cache_entries_foreign += 1;
            } else if f.ttl_ms > 0 {
                self.cov.cache_entries_fresh += 1;
            }
        }
        if stale {
            self.cov.cache_stale += 1;
        }
        if corrupt {
            self.cov.cache_corrupt += 1;
        }
        if tools.is_some() {
            self.cov.cache_hits += 1;
        }
        if lat >= self.sc.options.gate_ms {
            self.cov.cache_slower_than_gate += 1;
        }
        if catalog.as_ref().is_some_and(|c| c.handshake.is_some()) {
            self.cov.cache_handshakes_served += 1;
        }
        self.push(
            at,
            Ev::Cache(Box::new(super::CacheAnswer {
                server,
                key,
                tools,
                catalog,
            })),
        );
    }

    pub(super) fn store_cache(
        &mut self,
        server: String,
        key: CacheKey,
        tools: Vec<ToolDef>,
        catalog: Catalog,
    ) {
        let entry = StoreEntry {
            hash: key.config_hash,
            tools: Some(tools),
            catalog: Some(catalog),
            stored_at: self.now,
            loads: 0,
        };
        self.store.insert(server, entry);
    }

    /// The manager closes a transport: the OS kills its process.
    pub(super) fn close_transport(&mut self, conn: ConnId) {
        if let Some(p) = self.procs.get_mut(&conn) {
            p.killed = true;
        }
    }

    pub(super) fn deliver(&mut self, conn: ConnId, event: TransportEvent, exit: bool, tag: Tag) {
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let server = p.server;
        let dead_before = p.killed || p.reported || p.exited;
        if exit {
            p.exited = true;
        }
        if dead_before && tag != Tag::RacedOpen {
            // The OS has nothing to report for a dead process — unless it raced.
            let stale_pct = self.sc.mix.stale_pct;
            if !self.pct(stale_pct) {
                return;
            }
            self.cov.stale_events_delivered += 1;
        }
        let stale = !self.obs.mirror.contains(&conn);
        if !stale {
            self.note_tag(conn, server, tag);
        }
        if matches!(
            event,
            TransportEvent::Closed { .. } | TransportEvent::Failed { .. }
        ) {
            if let Some(p) = self.procs.get_mut(&conn) {
                p.reported = true;
            }
            if let Some(o) = self.obs.conns.get_mut(&conn) {
                o.ended = true;
            }
            self.obs.mirror.remove(&conn);
        }
        if let TransportEvent::Opened = event {
            if !stale {
                // A process says something on stderr as it starts.
                let now = self.now;
                self.write_stderr(conn, "listening", now);
            }
            let plan = self.procs.get(&conn).map(|p| p.plan.clone());
            if let Some(AttemptPlan {
                oversized_after_ms: Some(ms),
                ..
            }) = plan
            {
                if !stale {
                    let at = self.after_ms(ms);
                    let big = format!(
                        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":\"{}\"}}}}",
                        "x".repeat(self.sc.options.max_frame_len)
                    );
                    self.push(
                        at,
                        Ev::Deliver {
                            conn,
                            event: TransportEvent::Frame(Bytes::from(big)),
                            exit: false,
                            tag: Tag::None,
                        },
                    );
                }
            }
        }
        if let TransportEvent::Frame(f) = &event {
            if f.len() > self.sc.options.max_frame_len && !stale {
                self.cov.oversized_frames += 1;
            }
        }
        let c = self.m.counters();
        let counted = (c.stale_events, c.stale_opened_closed);
        let opened = matches!(event, TransportEvent::Opened);
        // Every attempt here was issued by the manager (it has a process).
        let stale_opened = (stale && opened).then_some(conn);
        let rejected = !stale
            && matches!(&event, TransportEvent::Frame(f)
                if f.len() > self.sc.options.max_frame_len || f.as_ref() == GARBAGE_FRAME);
        let bad_before = c.bad_frames;
        let refused = match &event {
            TransportEvent::Unauthorized { id, error } if !stale => Some(Refusal {
                conn,
                login: *error == AuthError::NeedsLogin,
                handshake: tag == Tag::HandshakeRefused,
                request: id.is_some(),
            }),
            _ => None,
        };
        self.input(Input::Transport { conn, event }, |s| {
            s.refused = refused;
            s.scope = Some(server);
            s.stale = stale;
            s.stale_opened = stale_opened;
            s.stale_counters_before = stale.then_some((counted.0, counted.1, opened));
            s.rejected_frame_before = rejected.then_some(bad_before);
        });
    }

    pub(super) fn spawn(&mut self, conn: ConnId, server: &str) {
        // The output checks refused an unknown server or a reused attempt.
        let Some(&i) = self.obs.index.get(server) else {
            return;
        };
        let k = self.attempts[i];
        self.attempts[i] += 1;
        if std::mem::take(&mut self.session_lost[i]) {
            self.cov.http_session_failed_then_reopened += 1;
        }
        let plans = &self.sc.servers[i].attempts;
        let plan = if self.healed || plans.is_empty() {
            healthy()
        } else {
            plans[k.min(plans.len() - 1)].clone()
        };
        self.obs.mirror.insert(conn);
        self.obs.latest_conn[i] = Some(conn);
        self.obs.withdrawn[i] = false;
        let load_cache = self.pending_load[i].take();
        if let Some(h) = &load_cache {
            self.awaiting_cache[i] = Some((conn, h.clone()));
        }
        self.obs.conns.insert(
            conn,
            ConnObs {
                server: i,
                load_cache: load_cache.is_some(),
                ..ConnObs::default()
            },
        );
        let mut p = Proc {
            server: i,
            plan: plan.clone(),
            killed: false,
            exited: false,
            reported: false,
            spawned: true,
            lists: 0,
            calls: 0,
            alt_tools: false,
            next_peer_id: 0,
            peer_requests: BTreeMap::new(),
            call_ids: Default::default(),
            version: 0,
            list_version: None,
            open_lists: BTreeSet::new(),
            changed_in_flight: 0,
            view_version: None,
            deaf_at: None,
            cur_list: None,
            tasks: BTreeMap::new(),
            peer: Default::default(),
            catalog: Default::default(),
            era: Default::default(),
        };
        match plan.spawn {
            Spawn::Ok { open_ms } => {
                let at = self.after_ms(open_ms);
                self.push(
                    at,
                    Ev::Deliver {
                        conn,
                        event: TransportEvent::Opened,
                        exit: false,
                        tag: Tag::None,
                    },
                );
            }
            Spawn::Fail { after_ms } => {
                self.cov.spawn_failures += 1;
                p.spawned = false;
                let at = self.after_ms(after_ms);
                self.push(
                    at,
                    Ev::Deliver {
                        conn,
                        event: TransportEvent::Failed {
                            error: format!("failed to start {server}: No such file or directory"),
                        },
                        exit: true,
                        tag: Tag::None,
                    },
                );
            }
            Spawn::NeverOpens => self.cov.opens_never_completed += 1,
            Spawn::DropBeforeOpen { after_ms } => {
                self.cov.drops_before_open += 1;
                let at = self.after_ms(after_ms);
                self.push(at, exit_event(conn, "exited before the transport opened"));
                // The shell's race: the spawn succeeded, the process exited at once, and its
                // exit reached the manager before the spawn's completion did. The manager
                // must close the transport that `Opened` hands it.
                self.push(
                    at,
                    Ev::Deliver {
                        conn,
                        event: TransportEvent::Opened,
                        exit: false,
                        tag: Tag::RacedOpen,
                    },
                );
            }
        }
        self.era_watch.spawned(conn, i);
        self.procs.insert(conn, p);
    }

    pub(super) fn exit_in(&mut self, conn: ConnId, ms: u64, why: &str) {
        let at = self.after_ms(ms);
        // A dying process says why on stderr first; the error of its attempt carries it.
        self.write_stderr(conn, why, at);
        self.push(at, exit_event(conn, why));
    }
}

pub(super) fn exit_event(conn: ConnId, why: &str) -> Ev {
    Ev::Deliver {
        conn,
        event: TransportEvent::Closed {
            reason: why.to_string(),
        },
        exit: true,
        tag: Tag::None,
    }
}

impl World<'_> {
    /// An attempt planned to have its credentials refused: the HTTP front of server `i`
    /// answers the handshake request `id` (`initialize`, or the first `server/discover`) with
    /// 401 before the server reads it, and the transport, which could not fix it, reports the
    /// refusal for that request. `true` when refused (the server does nothing more with the
    /// frame). A stdio server has no credentials to refuse.
    pub(super) fn refuse_handshake(&mut self, conn: ConnId, i: usize, id: Option<u64>) -> bool {
        let (Some(id), Some(p)) = (id, self.procs.get(&conn)) else {
            return false;
        };
        let Init::Refused { ms, login } = p.plan.init else {
            return false;
        };
        if !is_http(i) || p.era.discovered || p.era.in_use {
            return false;
        }
        let error = if login {
            self.cov.http_handshakes_need_login += 1;
            AuthError::NeedsLogin
        } else {
            self.cov.http_handshakes_refused += 1;
            AuthError::Rejected {
                status: 401,
                attempts: 1,
            }
        };
        let event = TransportEvent::Unauthorized {
            id: Some(id),
            error,
        };
        self.deliver_in(conn, ms, event, Tag::HandshakeRefused);
        true
    }

    /// The transport of attempt `conn` reports `event`, `ms` from now (the process goes on).
    fn deliver_in(&mut self, conn: ConnId, ms: u64, event: TransportEvent, tag: Tag) {
        let at = self.after_ms(ms);
        self.push(
            at,
            Ev::Deliver {
                conn,
                event,
                exit: false,
                tag,
            },
        );
    }

    /// Now and then, before the heal, the HTTP front of server `i` refuses the credentials of
    /// a notification the client sent (`notifications/initialized`, `notifications/cancelled`,
    /// …) and the transport reports the refusal without an id: nothing names a request to
    /// fail, so the core must end the attempt. `true` when refused (the server never reads
    /// the notification).
    pub(super) fn refuse_notification(&mut self, conn: ConnId, i: usize) -> bool {
        let http = is_http(i) && !self.sc.servers[i].invalid;
        let p = u64::from(self.sc.mix.call_fault_pct / 4);
        if !http || self.healed || p == 0 || self.auth_rng.below(100) >= p {
            return false;
        }
        let error = if self.auth_rng.below(3) == 0 {
            AuthError::NeedsLogin
        } else {
            AuthError::Rejected {
                status: 403,
                attempts: 1,
            }
        };
        self.cov.http_notifications_refused += 1;
        let ms = 1 + self.auth_rng.below(10);
        let event = TransportEvent::Unauthorized { id: None, error };
        self.deliver_in(conn, ms, event, Tag::None);
        true
    }

    /// The HTTP session-expiry fault as the core sees it. A Streamable HTTP server that
    /// forgot the session answers this `tools/call` with 404; the transport then replays
    /// `initialize` once and retries (io/src/http/mod.rs). If that works, the core sees only
    /// a later answer; if it fails, the transport ends with `Failed`, like the shell's. Or
    /// the POST of this call fails alone: undelivered (`RequestFailed`), or refused for its
    /// credentials (`Unauthorized`: a step-up not granted, or a login that lapsed), which the
    /// transport reports for the request only, as the shell's does.
    pub(super) fn http_session_expiry(
        &mut self,
        conn: ConnId,
        i: usize,
        id: Option<u64>,
    ) -> SessionExpiry {
        let http = is_http(i) && !self.sc.servers[i].invalid;
        let p = u64::from(self.sc.mix.call_fault_pct / 2);
        if !http || self.healed || p == 0 || self.http_rng.below(100) >= p {
            return SessionExpiry::None;
        }
        let draw = self.http_rng.below(3);
        if draw == 1 && id.is_some() {
            // The POST itself failed: the transport reports this one request; a refusal of
            // its credentials (a step-up not granted, or a login that lapsed) is reported
            // the same way, and the core decides what ends.
            let id = id.unwrap_or_default();
            let ms = 1 + self.http_rng.below(10);
            let event = match self.http_rng.below(4) {
                2 => {
                    self.cov.http_calls_refused += 1;
                    TransportEvent::Unauthorized {
                        id: Some(id),
                        error: AuthError::Rejected {
                            status: 403,
                            attempts: 1,
                        },
                    }
                }
                3 => {
                    self.cov.http_logins_lapsed += 1;
                    TransportEvent::Unauthorized {
                        id: Some(id),
                        error: AuthError::NeedsLogin,
                    }
                }
                _ => TransportEvent::RequestFailed {
                    id,
                    error: "HTTP POST failed: connection reset".to_string(),
                },
            };
            self.deliver_in(conn, ms, event, Tag::None);
            return SessionExpiry::RequestFailed;
        }
        if draw != 0 {
            self.cov.http_session_expired_recovered += 1;
            let lat = self.sc.servers[i].call_latency_ms;
            // The transport says it renewed the session before the late answer arrives.
            let ms = 2 * lat.max(1);
            self.deliver_in(conn, ms, TransportEvent::SessionRenewed, Tag::None);
            // The 404, then initialize and notifications/initialized, then the call again.
            SessionExpiry::Recovered {
                delay_ms: 3 * lat.max(1) + self.http_rng.below(20),
            }
        } else {
            self.cov.http_session_expired_failed += 1;
            self.session_lost[i] = true;
            let name = &self.sc.servers[i].name;
            let error = format!(
                "server \"{name}\": the session expired (HTTP 404) and a new one could not be started: HTTP 503: unavailable"
            );
            let ms = 1 + self.http_rng.below(20);
            let at = self.after_ms(ms);
            self.push(
                at,
                Ev::Deliver {
                    conn,
                    event: TransportEvent::Failed { error },
                    exit: true,
                    tag: Tag::None,
                },
            );
            SessionExpiry::Failed
        }
    }
}

/// What the HTTP session-expiry fault did to one call.
pub(super) enum SessionExpiry {
    /// No 404 (or not an HTTP server).
    None,
    /// A new session was started inside the transport: the answer comes later.
    Recovered { delay_ms: u64 },
    /// The new session could not be started: the transport failed.
    Failed,
    /// The request could not be delivered: the transport reported it failed.
    RequestFailed,
}
