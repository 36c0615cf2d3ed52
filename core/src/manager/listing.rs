//! Tool lists: the paged `tools/list` of a new connection (cursors checked, pages bounded),
//! re-lists after `RefreshTools` or `tools/list_changed` (bursts coalesced into one more
//! list), and the tool cache's answers. A first list that fails fails the server; a re-list
//! that fails keeps the previous list.

use super::errors::{RefreshError, RequestError, ServerError, ServerErrorKind};
use super::servers::{CacheState, Stage};
use super::sessions::Req;
use super::{CacheKey, ConnId, Event, Level, Manager, Output, RequestId, TimerReason};
use crate::protocol;
use crate::time::Instant;
use crate::tool::ToolDef;
use std::collections::BTreeSet;

/// A `tools/list` under way: the request of its current page and what earlier pages gave.
#[derive(Debug, Clone)]
pub(super) struct Listing {
    pub(super) req: u64,
    pages: usize,
    cursors: BTreeSet<String>,
    acc: Vec<ToolDef>,
    deadline: Instant,
    /// How fresh the pages so far are (`ttlMs`, `cacheScope`).
    fresh: Option<super::freshness::Fresh>,
}

impl Listing {
    /// A listing with nothing under way: the tool list of a server without the tools
    /// capability, while its other first lists are.
    pub(super) fn settled(now: Instant) -> Listing {
        Listing {
            req: u64::MAX,
            pages: 0,
            cursors: BTreeSet::new(),
            acc: Vec::new(),
            deadline: now,
            fresh: None,
        }
    }
}

/// The most tools one server's list may hold (over all its pages); a longer list fails like
/// any broken listing: the first list fails the server, a re-list keeps the previous tools.
pub const MAX_TOOLS: usize = 100_000;

impl Manager {
    /// A `tools/list` page went unanswered: cancel it, then fail a first listing or keep the
    /// previous list of a refresh.
    pub(super) fn on_list_timeout(&mut self, conn: ConnId, id: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let server = c.server.clone();
        if !matches!(c.tracker.get(id), Some(Req::ListTools)) {
            return;
        }
        c.tracker.forget(id);
        self.counters.request_timeouts += 1;
        self.send_cancelled(conn, id, "request timed out");
        let ms = self.opts.request_timeout.as_millis();
        let refreshing = matches!(
            self.servers.get(&server).map(|s| &s.phase),
            Some(Stage::Connected { .. })
        );
        let message = format!("tools/list timed out after {ms} ms");
        if refreshing {
            self.end_refresh(&server, Err(message));
        } else {
            let error = ServerError::new(ServerErrorKind::ListFailed, message);
            self.fail_server(&server, error, true);
        }
    }

    pub(super) fn start_list(
        &mut self,
        conn: ConnId,
        cursor: Option<String>,
        pages: usize,
        cursors: BTreeSet<String>,
        acc: Vec<ToolDef>,
    ) -> Option<Listing> {
        let params = protocol::list_params(cursor.as_deref());
        let req = self.request(conn, "tools/list", params, Req::ListTools)?;
        let deadline = self.now + self.opts.request_timeout;
        self.timers
            .arm(deadline, TimerReason::Request { conn, id: req });
        Some(Listing {
            req,
            pages,
            cursors,
            acc,
            deadline,
            fresh: None,
        })
    }

    pub(super) fn on_list_page(
        &mut self,
        conn: ConnId,
        server: &str,
        id: u64,
        page: Result<protocol::ToolsPage, String>,
    ) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let (listing, refreshing) = match &mut s.phase {
            Stage::Listing { listing, .. } if listing.req == id => (listing.clone(), false),
            Stage::Connected {
                refresh: Some(listing),
                ..
            } if listing.req == id => (listing.clone(), true),
            _ => return,
        };
        self.timers
            .disarm(listing.deadline, TimerReason::Request { conn, id });
        let outcome = match page {
            Err(e) => Err(e),
            Ok(protocol::ToolsPage {
                tools,
                next_cursor: next,
                skipped,
                hint,
            }) => {
                let fresh = super::freshness::fold(
                    listing.fresh,
                    super::freshness::Fresh::of_page(self.now, hint),
                );
                if !skipped.is_empty() {
                    self.diag(
                        Some(server),
                        Level::Warn,
                        format!("skipped malformed tool definitions: {}", skipped.join(", ")),
                    );
                }
                let tools = self.drop_unmirrorable_tools(conn, server, tools);
                let mut acc = listing.acc;
                acc.extend(tools);
                let pages = listing.pages + 1;
                match next {
                    // Pages are bounded, and so is what they add up to.
                    _ if acc.len() > MAX_TOOLS => {
                        Err(format!("tools/list failed: more than {MAX_TOOLS} tools"))
                    }
                    None => Ok((acc, fresh)),
                    Some(cursor) => {
                        let mut cursors = listing.cursors;
                        if !cursors.insert(cursor.clone()) {
                            self.counters.repeated_cursors += 1;
                            Err(format!(
                                "tools/list failed: the server repeated cursor \"{cursor}\""
                            ))
                        } else if pages >= self.opts.max_tool_pages {
                            Err(format!(
                                "tools/list failed: more than {} pages",
                                self.opts.max_tool_pages
                            ))
                        } else {
                            if let Some(mut next) =
                                self.start_list(conn, Some(cursor), pages, cursors, acc)
                            {
                                next.fresh = fresh;
                                if let Some(s) = self.servers.get_mut(server) {
                                    match &mut s.phase {
                                        Stage::Listing { listing, .. } => *listing = next,
                                        Stage::Connected { refresh, .. } => *refresh = Some(next),
                                        _ => {}
                                    }
                                }
                            }
                            return;
                        }
                    }
                }
            }
        };
        let fresh = outcome.as_ref().ok().and_then(|(_, f)| *f);
        self.note_list_fresh(conn, server, super::freshness::TOOLS_SLOT, fresh);
        let outcome = outcome.map(|(tools, _)| tools);
        if refreshing {
            self.end_refresh(server, outcome);
        } else {
            match outcome {
                Ok(tools) => self.tools_listed(server, tools),
                // A server whose tools/list fails is not left "connected" with no tools: it
                // fails, and its transport is closed.
                Err(e) => {
                    let error = ServerError::new(ServerErrorKind::ListFailed, e);
                    self.fail_server(server, error, true);
                }
            }
        }
    }

    /// First tool list done: the server is connected.
    pub(super) fn tools_ready(&mut self, server: &str, tools: Vec<ToolDef>) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if s.phase.conn().is_none() {
            return;
        }
        let tools = self.dedupe_listed(server, tools);
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let Some(conn) = s.phase.conn() else {
            return;
        };
        let (tools, filtered) = filter_tools(&s.spec.config, tools);
        s.tools = tools.into();
        s.filtered_tools = filtered;
        s.schemas.clear();
        self.view_gen += 1;
        s.ready_at = Some(self.now);
        s.last_error = None;
        s.ping_misses = 0;
        if s.retry_attempt > 0 {
            s.retry_attempt = 0;
            self.counters.reconnects_succeeded += 1;
        }
        let key = CacheKey {
            server: server.to_string(),
            config_hash: s.hash.clone(),
        };
        let stored = s.tools.to_vec();
        // Live tools replace whatever the cache said; the cache now holds them too.
        s.cache = CacheState::Hit(s.tools.clone());
        let in_open_round = s.round.is_some();
        self.set_phase(
            server,
            Stage::Connected {
                conn,
                refresh: None,
                again: false,
            },
        );
        self.expose(server, false);
        let catalog = self.cache_catalog(server);
        self.catalog_stored(server);
        self.out.push_back(Output::StoreCache {
            server: server.to_string(),
            key,
            tools: stored,
            catalog,
        });
        if !in_open_round {
            self.emit(Event::ToolsChanged {
                servers: vec![server.to_string()],
            });
        }
        self.catalog_ready(server, !in_open_round);
        // A stateless server announces changes only on a stream asked for; a relisted
        // connection keeps the one it has.
        if self
            .conns
            .get(&conn)
            .is_some_and(|c| c.listen == super::subscriptions::Listen::Off)
        {
            self.open_listen(conn, server);
        }
        if let Some(h) = &self.opts.health {
            let at = self.now + h.interval;
            self.arm_ping(conn, at, TimerReason::Ping { conn });
        }
        self.flush_waiting_calls(server, conn);
        self.flush_waiting_ops(server, conn);
        // Refreshes asked while the server was connecting: its first list is their answer.
        self.answer_refreshes(server, |gen| gen.is_none(), || Ok(()));
        let relist = self
            .servers
            .get_mut(server)
            .is_some_and(|s| std::mem::take(&mut s.relist_when_ready));
        if relist {
            self.refresh(server);
        }
    }

    /// `RefreshTools` from the embedder. A connected server lists again (a refresh asked
    /// while one is under way waits for one more, so its answer is a list fetched after it
    /// was asked); a connecting one is answered by its first list; any other by
    /// `NotConnected` at once.
    pub(super) fn refresh_request(&mut self, request: RequestId, server: &str) {
        let Some(s) = self.servers.get_mut(server) else {
            let error = RequestError::UnknownServer(server.to_string());
            self.emit(Event::RequestFailed { request, error });
            return;
        };
        match &s.phase {
            Stage::Connected { refresh, .. } => {
                let gen = s.list_gen + u64::from(refresh.is_some());
                s.refreshes.push((request, Some(gen)));
                if refresh.is_some() {
                    self.counters.refreshes_queued += 1;
                }
                self.refresh(server);
            }
            Stage::Opening { .. } | Stage::Initializing { .. } | Stage::Listing { .. } => {
                self.counters.refreshes_of_connecting += 1;
                s.refreshes.push((request, None));
            }
            Stage::Idle | Stage::Backoff { .. } => {
                self.counters.refreshes_not_connected += 1;
                let reason = s.last_error.clone();
                let server = server.to_string();
                let result = Err(RefreshError::NotConnected {
                    server: server.clone(),
                    reason,
                });
                self.emit(Event::RefreshCompleted {
                    request,
                    server,
                    result,
                });
            }
        }
    }

    /// Answer `server`'s refresh waiters whose awaited list (`None`: the first) `matches`.
    pub(super) fn answer_refreshes(
        &mut self,
        server: &str,
        matches: impl Fn(Option<u64>) -> bool,
        result: impl Fn() -> Result<(), RefreshError>,
    ) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if s.refreshes.is_empty() {
            return;
        }
        let mut done = Vec::new();
        s.refreshes.retain(|(request, gen)| {
            let hit = matches(*gen);
            if hit {
                done.push(*request);
            }
            !hit
        });
        for request in done {
            self.emit(Event::RefreshCompleted {
                request,
                server: server.to_string(),
                result: result(),
            });
        }
    }

    /// Re-list a connected server's tools, or, if a re-list is under way, once more after it
    /// (pending servers list their tools anyway once connected: nothing to do for them).
    pub(super) fn refresh(&mut self, server: &str) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if let Stage::Connected {
            conn,
            refresh,
            again,
        } = &mut s.phase
        {
            if refresh.is_some() {
                *again = true;
                return;
            }
            let conn = *conn;
            self.start_refresh(server, conn);
        }
    }

    /// Start re-list number `list_gen + 1` of a connected server.
    fn start_refresh(&mut self, server: &str, conn: ConnId) {
        let listing = self.start_list(conn, None, 0, BTreeSet::new(), Vec::new());
        if let Some(s) = self.servers.get_mut(server) {
            if let Stage::Connected { refresh, .. } = &mut s.phase {
                if listing.is_some() {
                    s.list_gen += 1;
                }
                *refresh = listing;
            }
        }
    }

    pub(super) fn on_list_changed(&mut self, server: &str) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        let declared = s.init.as_ref().is_some_and(|i| i.tools_list_changed);
        let (connected, listing) = (
            matches!(s.phase, Stage::Connected { .. }),
            matches!(s.phase, Stage::Listing { .. }),
        );
        if declared {
            // What was fresh is not any more.
            self.stale_lists(server);
        }
        if !declared {
            self.diag(
                Some(server),
                Level::Debug,
                "ignored tools/list_changed: the server did not declare tools.listChanged".into(),
            );
        } else if connected {
            self.refresh(server);
        } else if listing {
            if let Some(s) = self.servers.get_mut(server) {
                s.relist_when_ready = true;
            }
        }
    }

    fn end_refresh(&mut self, server: &str, outcome: Result<Vec<ToolDef>, String>) {
        let connected = matches!(
            self.servers.get(server).map(|s| &s.phase),
            Some(Stage::Connected { .. })
        );
        if !connected {
            return;
        }
        let outcome = outcome.map(|tools| self.dedupe_listed(server, tools));
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let Stage::Connected {
            conn,
            refresh,
            again,
        } = &mut s.phase
        else {
            return;
        };
        let conn = *conn;
        *refresh = None;
        let again = std::mem::take(again);
        let gen = s.list_gen;
        let result = match &outcome {
            Ok(_) => Ok(()),
            Err(e) => Err(RefreshError::Failed(ServerError::new(
                ServerErrorKind::ListFailed,
                e.clone(),
            ))),
        };
        match outcome {
            Ok(tools) => {
                self.counters.list_changed_applied += 1;
                let (tools, filtered) = filter_tools(&s.spec.config, tools);
                s.filtered_tools = filtered;
                s.tools = tools.as_slice().into();
                s.schemas.clear();
                s.cache = CacheState::Hit(s.tools.clone());
                self.view_gen += 1;
                let key = CacheKey {
                    server: server.to_string(),
                    config_hash: s.hash.clone(),
                };
                self.expose(server, false);
                let catalog = self.cache_catalog(server);
                self.catalog_stored(server);
                self.out.push_back(Output::StoreCache {
                    server: server.to_string(),
                    key,
                    tools,
                    catalog,
                });
                self.emit(Event::ToolsChanged {
                    servers: vec![server.to_string()],
                });
            }
            Err(e) => self.diag(
                Some(server),
                Level::Warn,
                format!("{e}; keeping the previous tool list"),
            ),
        }
        self.answer_refreshes(server, |g| g.is_some_and(|g| g <= gen), || result.clone());
        if again {
            self.start_refresh(server, conn);
        }
    }

    pub(super) fn on_cache(
        &mut self,
        server: &str,
        key: CacheKey,
        tools: Option<Vec<ToolDef>>,
        catalog: Option<crate::catalog::Catalog>,
    ) {
        let Some(s) = self.servers.get_mut(server) else {
            self.counters.stale_events += 1;
            return;
        };
        if key.config_hash != s.hash
            || key.server != server
            || !matches!(s.cache, CacheState::Loading)
        {
            self.counters.stale_events += 1;
            return;
        }
        let usable = self.cached_freshness(server, catalog.as_ref());
        let (tools, catalog) = if usable {
            (tools, catalog)
        } else {
            (None, None)
        };
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let hit = tools.is_some();
        s.cache = match tools {
            Some(t) => CacheState::Hit(dedupe(t).into()),
            None => CacheState::Miss,
        };
        self.view_gen += 1;
        self.catalog_cached(server, catalog.filter(|_| hit));
    }
}

/// Keep the first definition of each tool name.
fn dedupe(tools: Vec<ToolDef>) -> Vec<ToolDef> {
    dedupe_named(tools).0
}

/// Keep the first definition of each tool name; also the names given more than once (each
/// once, in order).
fn dedupe_named(mut tools: Vec<ToolDef>) -> (Vec<ToolDef>, Vec<String>) {
    let mut seen = BTreeSet::new();
    let keep: Vec<bool> = tools.iter().map(|t| seen.insert(t.name.as_str())).collect();
    let mut repeated = Vec::new();
    if keep.contains(&false) {
        let mut named = BTreeSet::new();
        for (t, k) in tools.iter().zip(&keep) {
            if !k && named.insert(t.name.as_str()) {
                repeated.push(t.name.clone());
            }
        }
        let mut keep = keep.into_iter();
        tools.retain(|_| keep.next().unwrap_or(false));
    }
    (tools, repeated)
}

impl Manager {
    /// A live list with duplicate names keeps each name's first definition, with a warning.
    fn dedupe_listed(&mut self, server: &str, tools: Vec<ToolDef>) -> Vec<ToolDef> {
        let (tools, repeated) = dedupe_named(tools);
        if !repeated.is_empty() {
            self.counters.duplicate_tool_names += repeated.len() as u64;
            self.diag(
                Some(server),
                Level::Warn,
                format!(
                    "tools listed more than once (the first definition of each is kept): {}",
                    repeated.join(", ")
                ),
            );
        }
        tools
    }
}

/// The tools the config's filters let through, and how many they hid. A filtered tool never
/// reaches the view (nor the cache), so it is neither listed nor callable.
fn filter_tools(
    config: &crate::config::ServerConfig,
    tools: Vec<ToolDef>,
) -> (Vec<ToolDef>, usize) {
    let before = tools.len();
    let kept: Vec<ToolDef> = tools
        .into_iter()
        .filter(|t| config.tool_allowed(&t.name))
        .collect();
    let hidden = before - kept.len();
    (kept, hidden)
}
