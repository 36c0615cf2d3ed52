//! What a server lists besides tools: resources, resource templates and prompts.
//!
//! A server that declares `resources` is listed with `resources/list` and
//! `resources/templates/list`; one that declares `prompts` with `prompts/list`. Their first
//! pages go out with the first `tools/list` page, and the server is `Connected` once every
//! declared list has its last page (each page bounded by `request_timeout`, cursors checked,
//! at most `max_tool_pages` pages and [`MAX_CATALOG_ITEMS`] items per list). A list that fails
//! does not fail the server: it keeps its tools, that slice is empty (or, on a re-list, keeps
//! the previous one), and a diagnostic says why.
//!
//! The slices are shown exactly when the server's tools are: live once it is connected, from
//! the cache while it is deferred. `notifications/{resources,prompts}/list_changed` re-list
//! only that server's slice, a burst coalesced into one more list, and announce it with
//! `ResourcesChanged` or `PromptsChanged`. Prompts get qualified names under the same rules
//! as tools, in a name table of their own.

use super::servers::Stage;
use super::sessions::Req;
use super::{CacheKey, CallId, ConnId, Event, Level, Manager, Output, TimerReason};
use crate::catalog::{
    Catalog, Prompt, PromptDef, Resource, ResourceDef, ResourceTemplate, ResourceTemplateDef,
};
use crate::names::NameTable;
use crate::protocol::{self, ServerCapabilities};
use crate::time::Instant;
use crate::tool::ToolDef;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most items one list (resources, templates or prompts) of one server may have; a longer
/// list fails that list only.
pub const MAX_CATALOG_ITEMS: usize = 100_000;

/// One of the lists a server may have besides tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum ListKind {
    Resources,
    Templates,
    Prompts,
}

impl ListKind {
    const ALL: [ListKind; 3] = [ListKind::Resources, ListKind::Templates, ListKind::Prompts];

    fn index(self) -> usize {
        self as usize
    }

    fn method(self) -> &'static str {
        match self {
            ListKind::Resources => "resources/list",
            ListKind::Templates => "resources/templates/list",
            ListKind::Prompts => "prompts/list",
        }
    }

    fn key(self) -> &'static str {
        match self {
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
            ListKind::Prompts => "prompts",
        }
    }

    fn declared(self, caps: &ServerCapabilities) -> bool {
        match self {
            ListKind::Resources | ListKind::Templates => caps.resources,
            ListKind::Prompts => caps.prompts,
        }
    }

    fn len(self, c: &Catalog) -> usize {
        match self {
            ListKind::Resources => c.resources.len(),
            ListKind::Templates => c.templates.len(),
            ListKind::Prompts => c.prompts.len(),
        }
    }

    /// Move this kind's items from `from` into `into`.
    fn take_into(self, from: &mut Catalog, into: &mut Catalog) {
        match self {
            ListKind::Resources => into.resources = std::mem::take(&mut from.resources),
            ListKind::Templates => into.templates = std::mem::take(&mut from.templates),
            ListKind::Prompts => into.prompts = std::mem::take(&mut from.prompts),
        }
    }
}

/// A catalog page's answer as the frame's decoding gave it.
pub(super) enum PageResult {
    /// The raw result.
    Raw(Box<RawValue>),
    /// The result read as a `Value` while the frame was decoded (what the raw text parses to).
    Value(serde_json::Value),
}

/// [`protocol::parse_catalog_page`] of a page's answer, however it was decoded.
fn read_page<T: serde::de::DeserializeOwned>(
    result: PageResult,
    method: &str,
    key: &str,
) -> Result<protocol::CatalogPage<T>, String> {
    match result {
        PageResult::Raw(raw) => protocol::parse_catalog_page(&raw, method, key),
        PageResult::Value(v) => protocol::catalog_page_of(v, method, key),
    }
    .map_err(|e| e.to_string())
}

/// One list under way: the request of its current page and what earlier pages gave.
#[derive(Debug, Clone)]
struct KindListing {
    conn: ConnId,
    req: u64,
    pages: usize,
    cursors: BTreeSet<String>,
    acc: Catalog,
    deadline: Instant,
    /// The attempt's first list of this kind: the server is ready only once it ends.
    first: bool,
    /// How fresh the pages so far are (`ttlMs`, `cacheScope`).
    fresh: Option<super::freshness::Fresh>,
}

/// A server's resources, templates and prompts, and its lists under way.
#[derive(Debug, Clone, Default)]
pub(super) struct ServerCatalog {
    /// What it listed live on its current (or last) connection.
    live: Arc<Catalog>,
    /// What the cache holds for it, with the config hash it was stored under.
    cached: Option<(String, Arc<Catalog>)>,
    lists: [Option<KindListing>; 3],
    /// A `list_changed` came while that list was under way: list it once more after.
    again: [bool; 3],
    /// The first tool list of attempt `conn`, held until the first catalog lists end.
    tools_wait: Option<(ConnId, Vec<ToolDef>)>,
    /// Kinds this attempt's server no longer declares, whose items an earlier attempt listed:
    /// they left `live` when the attempt initialized, so the view changed even though
    /// nothing of them is listed now (announced once the server is ready).
    dropped: [bool; 3],
}

impl ServerCatalog {
    /// Whether the live or the cached catalog holds anything: only then can showing or
    /// withdrawing the server's slice change what the catalog getters return.
    pub(super) fn has_any(&self) -> bool {
        let some = |c: &Catalog| {
            !(c.resources.is_empty() && c.templates.is_empty() && c.prompts.is_empty())
        };
        some(&self.live) || self.cached.as_ref().is_some_and(|(_, c)| some(c))
    }
}

/// The manager's catalog-wide state: the prompt name table, and operations in flight.
#[derive(Debug)]
pub(super) struct CatalogState {
    pub(super) prompt_names: NameTable,
    pub(super) ops: BTreeMap<CallId, super::operations::Op>,
    /// Bumped by every change that may alter what the catalog getters show (a server's live
    /// or cached catalog replaced, its slice shown or withdrawn, its config hash changed, the
    /// prompt names re-synced, a server forgotten): see [`Manager::catalog_generation`].
    pub(super) generation: u64,
}

impl CatalogState {
    pub(super) fn new(scheme: crate::names::NamingScheme) -> Self {
        CatalogState {
            prompt_names: NameTable::new(scheme),
            ops: BTreeMap::new(),
            generation: 0,
        }
    }
}

impl Manager {
    /// The resources in the view (live or deferred, as the server's tools are), ordered by
    /// URI, then server.
    pub fn resources(&self) -> Vec<Resource> {
        let mut out = Vec::new();
        for (name, c, deferred) in self.shown_catalogs() {
            out.extend(c.resources.iter().map(|def| Resource {
                server: name.to_string(),
                def: def.clone(),
                deferred,
            }));
        }
        out.sort_by(|a, b| (&a.def.uri, &a.server).cmp(&(&b.def.uri, &b.server)));
        out
    }

    /// The resource templates in the view, ordered by template, then server.
    pub fn resource_templates(&self) -> Vec<ResourceTemplate> {
        let mut out = Vec::new();
        for (name, c, deferred) in self.shown_catalogs() {
            out.extend(c.templates.iter().map(|def| ResourceTemplate {
                server: name.to_string(),
                def: def.clone(),
                deferred,
            }));
        }
        out.sort_by(|a, b| (&a.def.uri_template, &a.server).cmp(&(&b.def.uri_template, &b.server)));
        out
    }

    /// The prompts in the view, ordered by qualified name.
    pub fn prompts(&self) -> Vec<Prompt> {
        let mut out = Vec::new();
        for (name, c, deferred) in self.shown_catalogs() {
            for (q, raw) in self.catalog.prompt_names.server_tools(name) {
                if let Some(def) = c.prompts.iter().find(|p| p.name == raw) {
                    out.push(Prompt {
                        qualified_name: q.to_string(),
                        server: name.to_string(),
                        def: def.clone(),
                        deferred,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.qualified_name.cmp(&b.qualified_name));
        out
    }

    /// A number that is the same as at an earlier call only if the catalog getters
    /// ([`Manager::resources`], [`Manager::resource_templates`], [`Manager::prompts`]) cannot
    /// have changed since: an observer that keeps what they showed can skip reading them
    /// again. (It may change without the catalog changing.)
    pub fn catalog_generation(&self) -> u64 {
        self.catalog.generation
    }

    /// Route a prompt's qualified name to (server, raw prompt name).
    pub fn resolve_prompt(&self, qualified: &str) -> Option<(&str, &str)> {
        self.catalog.prompt_names.resolve(qualified)
    }

    /// What a server declared in `initialize`, once it has answered.
    pub fn capabilities(&self, server: &str) -> Option<&ServerCapabilities> {
        self.servers
            .get(server)
            .and_then(|s| s.init.as_ref())
            .map(|i| &i.capabilities)
    }

    /// Each server whose catalog is shown, with it and whether it is deferred.
    fn shown_catalogs(&self) -> impl Iterator<Item = (&str, &Catalog, bool)> {
        self.servers
            .iter()
            .filter_map(|(name, s)| match s.exposed? {
                false => Some((name.as_str(), &*s.catalog.live, false)),
                true => match &s.catalog.cached {
                    Some((hash, c)) if *hash == s.hash => Some((name.as_str(), &**c, true)),
                    _ => None,
                },
            })
    }

    /// The catalog the getters show for `server` now, borrowed: its live one (`false`) or,
    /// while it is deferred, its cached one (`true`); `None` when they show nothing of it.
    /// Its prompts are shown through the prompt name table ([`Manager::prompts`]).
    pub fn shown_catalog(&self, server: &str) -> Option<(&Catalog, bool)> {
        let s = self.servers.get(server)?;
        match s.exposed? {
            false => Some((&s.catalog.live, false)),
            true => match &s.catalog.cached {
                Some((hash, c)) if *hash == s.hash => Some((c, true)),
                _ => None,
            },
        }
    }

    /// The live catalog of `server`, for the cache: with how it was reached and how long its
    /// lists stay fresh.
    pub(super) fn cache_catalog(&mut self, server: &str) -> Catalog {
        let freshness = self.freshness_to_store(server);
        self.servers
            .get(server)
            .map(|s| {
                let mut c = (*s.catalog.live).clone();
                c.handshake = s.handshake.clone();
                c.freshness = freshness;
                c
            })
            .unwrap_or_default()
    }

    /// A connection ready from fresh cached lists: the cached catalog is its live one.
    /// Whether the cache holds one for the current config.
    pub(super) fn catalog_from_cache(&mut self, server: &str) -> bool {
        let Some(s) = self.servers.get_mut(server) else {
            return false;
        };
        let Some(cached) = s
            .catalog
            .cached
            .as_ref()
            .filter(|(hash, _)| *hash == s.hash)
            .map(|(_, c)| c.clone())
        else {
            return false;
        };
        s.catalog.live = cached;
        s.catalog.lists = Default::default();
        s.catalog.again = [false; 3];
        s.catalog.tools_wait = None;
        true
    }

    /// Ask every list `server` declared again (its cached lists expired).
    pub(super) fn relist_everything(&mut self, server: &str) {
        let Some(init) = self.servers.get(server).and_then(|s| s.init.clone()) else {
            return;
        };
        if init.has_tools {
            self.refresh(server);
        }
        for kind in ListKind::ALL {
            if kind.declared(&init.capabilities) {
                self.relist_kind(server, kind);
            }
        }
    }

    /// The cache answered for `server` (its key already checked): keep its catalog.
    pub(super) fn catalog_cached(&mut self, server: &str, catalog: Option<Catalog>) {
        if let Some(s) = self.servers.get_mut(server) {
            // What the getters show does not change here: the cached catalog is shown only
            // while the server is deferred, a server is deferred only once its cache answered
            // with tools (or after it connected, which makes the cache its live list), and
            // the cache's answer is taken only while it is still awaited.
            debug_assert_ne!(
                s.exposed,
                Some(true),
                "a cached catalog arrived for a server already shown from its cache"
            );
            s.catalog.cached = catalog.map(|mut c| {
                // The revision it spoke is the attempt's concern, not the catalog view's.
                if let Some(h) = c.handshake.take() {
                    if s.handshake.is_none() && s.era.is_none() {
                        s.handshake = Some(h);
                    }
                }
                // So is how fresh it is (read by `cached_freshness`).
                c.freshness = None;
                (s.hash.clone(), Arc::new(c))
            });
        }
    }

    /// What the cache now holds for `server` is its live catalog. Only a server whose live
    /// catalog is shown stores one, so what the getters show does not change (the cached
    /// catalog is shown only while the server is deferred).
    pub(super) fn catalog_stored(&mut self, server: &str) {
        if let Some(s) = self.servers.get_mut(server) {
            debug_assert_eq!(
                s.exposed,
                Some(false),
                "{server} stores while not shown live"
            );
            s.catalog.cached = Some((s.hash.clone(), s.catalog.live.clone()));
        }
    }

    /// Store a connected server's live tools and catalog in the cache.
    fn store_cache(&mut self, server: &str) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        if s.exposed != Some(false) {
            return;
        }
        let key = CacheKey {
            server: server.to_string(),
            config_hash: s.hash.clone(),
        };
        let tools = s.tools.to_vec();
        let catalog = self.cache_catalog(server);
        self.catalog_stored(server);
        self.out.push_back(Output::StoreCache {
            server: server.to_string(),
            key,
            tools,
            catalog,
        });
    }

    /// Bring the prompt name table in line with what `server` shows now.
    pub(super) fn sync_prompt_names(&mut self, server: &str) {
        let names: Vec<String> = self
            .shown_catalog(server)
            .map(|(c, _)| c.prompts.iter().map(|p| p.name.clone()).collect())
            .unwrap_or_default();
        // The table (and so `prompts()`) can only change if the server has prompt names in it
        // now or is to have some.
        if !names.is_empty()
            || self
                .catalog
                .prompt_names
                .server_tools(server)
                .next()
                .is_some()
        {
            self.catalog.generation += 1;
        }
        if names.is_empty() {
            self.catalog.prompt_names.remove_server(server);
        } else {
            self.catalog
                .prompt_names
                .set_server_tools(server, names.iter().map(String::as_str));
        }
    }

    /// Attempt `conn` initialized: send the first page of every list the server declared.
    /// Whether any went out (the server is then ready only once they end).
    pub(super) fn start_catalog_lists(&mut self, server: &str, conn: ConnId) -> bool {
        let Some(s) = self.servers.get_mut(server) else {
            return false;
        };
        s.catalog.lists = Default::default();
        s.catalog.again = [false; 3];
        s.catalog.tools_wait = None;
        let caps = s
            .init
            .as_ref()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default();
        // What an earlier attempt listed of a kind this server no longer declares is not
        // its catalog any more: it leaves the view (and the cache, at the next store). An
        // initializing attempt's live catalog is not shown, so the getters move (and the
        // catalog generation with them) only when the server is shown live again.
        debug_assert_ne!(
            s.exposed,
            Some(false),
            "{server} initializes while shown live"
        );
        s.catalog.dropped = [false; 3];
        for kind in ListKind::ALL.into_iter().filter(|k| !k.declared(&caps)) {
            if kind.len(&s.catalog.live) > 0 {
                kind.take_into(&mut Catalog::default(), Arc::make_mut(&mut s.catalog.live));
                s.catalog.dropped[kind.index()] = true;
            }
        }
        let mut any = false;
        for kind in ListKind::ALL {
            if kind.declared(&caps) {
                any |= self.start_kind_list(server, conn, kind, true);
            }
        }
        any
    }

    fn start_kind_list(&mut self, server: &str, conn: ConnId, kind: ListKind, first: bool) -> bool {
        let listing = KindListing {
            conn,
            req: 0,
            pages: 0,
            cursors: BTreeSet::new(),
            acc: Catalog::default(),
            deadline: self.now,
            first,
            fresh: None,
        };
        self.send_kind_page(server, kind, listing, None)
    }

    fn send_kind_page(
        &mut self,
        server: &str,
        kind: ListKind,
        mut listing: KindListing,
        cursor: Option<String>,
    ) -> bool {
        let conn = listing.conn;
        let params = protocol::list_params(cursor.as_deref());
        let Some(req) = self.request(conn, kind.method(), params, Req::List(kind)) else {
            return false;
        };
        listing.req = req;
        listing.deadline = self.now + self.opts.request_timeout;
        self.timers
            .arm(listing.deadline, TimerReason::Request { conn, id: req });
        match kind {
            ListKind::Resources => self.counters.resource_pages_requested += 1,
            ListKind::Templates => self.counters.template_pages_requested += 1,
            ListKind::Prompts => self.counters.prompt_pages_requested += 1,
        }
        if let Some(s) = self.servers.get_mut(server) {
            s.catalog.lists[kind.index()] = Some(listing);
        }
        true
    }

    /// The first tool list of the attempt is in: the server is ready now, or once its first
    /// catalog lists end.
    pub(super) fn tools_listed(&mut self, server: &str, tools: Vec<ToolDef>) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let waiting = s.catalog.lists.iter().flatten().any(|l| l.first);
        match s.phase.conn() {
            Some(conn) if waiting => s.catalog.tools_wait = Some((conn, tools)),
            _ => self.tools_ready(server, tools),
        }
    }

    /// A catalog list's page answered (or failed in the transport's words).
    pub(super) fn on_catalog_page(
        &mut self,
        conn: ConnId,
        server: &str,
        id: u64,
        kind: ListKind,
        result: Result<PageResult, String>,
    ) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let Some(listing) =
            s.catalog.lists[kind.index()].take_if(|l| l.req == id && l.conn == conn)
        else {
            return;
        };
        self.timers
            .disarm(listing.deadline, TimerReason::Request { conn, id });
        let first = listing.first;
        let method = kind.method();
        let page = result.and_then(|raw| {
            let mut acc = Catalog::default();
            let (next, skipped, hint) = match kind {
                ListKind::Resources => {
                    let p = read_page::<ResourceDef>(raw, method, kind.key())?;
                    acc.resources = p.items;
                    (p.next_cursor, p.skipped, p.hint)
                }
                ListKind::Templates => {
                    let p = read_page::<ResourceTemplateDef>(raw, method, kind.key())?;
                    acc.templates = p.items;
                    (p.next_cursor, p.skipped, p.hint)
                }
                ListKind::Prompts => {
                    let p = read_page::<PromptDef>(raw, method, kind.key())?;
                    acc.prompts = p.items;
                    (p.next_cursor, p.skipped, p.hint)
                }
            };
            Ok((acc, next, skipped, hint))
        });
        let outcome = match page {
            Err(e) => Err(format!("{method} failed: {e}")),
            Ok((mut items, next, skipped, hint)) => {
                if !skipped.is_empty() {
                    self.diag(
                        Some(server),
                        Level::Warn,
                        format!(
                            "{method}: skipped malformed definitions: {}",
                            skipped.join(", ")
                        ),
                    );
                }
                let mut listing = listing;
                listing.fresh = super::freshness::fold(
                    listing.fresh,
                    super::freshness::Fresh::of_page(self.now, hint),
                );
                listing.acc.resources.append(&mut items.resources);
                listing.acc.templates.append(&mut items.templates);
                listing.acc.prompts.append(&mut items.prompts);
                listing.pages += 1;
                if kind.len(&listing.acc) > MAX_CATALOG_ITEMS {
                    Err(format!(
                        "{method} failed: more than {MAX_CATALOG_ITEMS} items"
                    ))
                } else {
                    match next {
                        None => Ok(listing),
                        Some(cursor) if !listing.cursors.insert(cursor.clone()) => {
                            self.counters.repeated_cursors += 1;
                            Err(format!(
                                "{method} failed: the server repeated cursor \"{cursor}\""
                            ))
                        }
                        Some(_) if listing.pages >= self.opts.max_tool_pages => Err(format!(
                            "{method} failed: more than {} pages",
                            self.opts.max_tool_pages
                        )),
                        Some(cursor) => {
                            if !self.send_kind_page(server, kind, listing, Some(cursor)) {
                                self.end_kind_list(server, kind, first, Err(String::new()));
                            }
                            return;
                        }
                    }
                }
            }
        };
        let fresh = outcome.as_ref().ok().and_then(|l| l.fresh);
        self.note_list_fresh(conn, server, 1 + kind.index(), fresh);
        self.end_kind_list(server, kind, first, outcome.map(|l| l.acc));
    }

    /// A catalog page went unanswered: whether `(conn, id)` was one (else it is a tool page).
    pub(super) fn on_catalog_timeout(&mut self, conn: ConnId, id: u64) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return false;
        };
        let Some(Req::List(kind)) = c.tracker.get(id).cloned() else {
            return false;
        };
        c.tracker.forget(id);
        let server = c.server.clone();
        self.counters.request_timeouts += 1;
        self.send_cancelled(conn, id, "request timed out");
        let ms = self.opts.request_timeout.as_millis();
        let error = format!("{} timed out after {ms} ms", kind.method());
        self.on_catalog_page(conn, &server, id, kind, Err(error));
        true
    }

    /// A list ended: apply it (or say why not), and make the server ready when it was the
    /// last first list it waited for.
    fn end_kind_list(
        &mut self,
        server: &str,
        kind: ListKind,
        first: bool,
        outcome: Result<Catalog, String>,
    ) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        self.catalog.generation += 1;
        let connected = matches!(s.phase, Stage::Connected { .. });
        match outcome {
            Ok(mut acc) => {
                // Copied only while another holder (the cached catalog) shares it.
                kind.take_into(&mut acc, Arc::make_mut(&mut s.catalog.live));
                match kind {
                    ListKind::Resources => self.counters.resource_lists_applied += 1,
                    ListKind::Templates => self.counters.template_lists_applied += 1,
                    ListKind::Prompts => self.counters.prompt_lists_applied += 1,
                }
            }
            Err(e) => {
                self.counters.catalog_lists_failed += 1;
                if first {
                    kind.take_into(&mut Catalog::default(), Arc::make_mut(&mut s.catalog.live));
                }
                let what = if first {
                    "that list is empty"
                } else {
                    "keeping the previous list"
                };
                let e = if e.is_empty() {
                    format!("{} failed: the connection is gone", kind.method())
                } else {
                    e
                };
                self.diag(Some(server), Level::Warn, format!("{e}; {what}"));
                if !first {
                    self.relist_again(server, kind);
                    return;
                }
            }
        }
        if connected && !first {
            self.catalog_changed(server, kind);
        }
        self.relist_again(server, kind);
        // The last first list the server waited for: it is ready now.
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let waiting = s.catalog.lists.iter().flatten().any(|l| l.first);
        if !waiting {
            if let Some((conn, tools)) = s.catalog.tools_wait.take() {
                if s.phase.conn() == Some(conn) {
                    self.tools_ready(server, tools);
                }
            }
        }
    }

    /// A connected server's slice of `kind` changed: show it, store the cache, announce it.
    fn catalog_changed(&mut self, server: &str, kind: ListKind) {
        if kind == ListKind::Prompts {
            self.sync_prompt_names(server);
        }
        self.store_cache(server);
        let servers = vec![server.to_string()];
        self.emit(match kind {
            ListKind::Prompts => Event::PromptsChanged { servers },
            _ => Event::ResourcesChanged { servers },
        });
    }

    /// A `list_changed` came while `kind` was listed: list it once more.
    fn relist_again(&mut self, server: &str, kind: ListKind) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if std::mem::take(&mut s.catalog.again[kind.index()]) {
            self.relist_kind(server, kind);
        }
    }

    /// List `kind` of `server` again (once more after the list under way, if one is).
    fn relist_kind(&mut self, server: &str, kind: ListKind) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if s.catalog.lists[kind.index()].is_some() {
            s.catalog.again[kind.index()] = true;
            self.counters.catalog_relists_coalesced += 1;
            return;
        }
        let conn = match s.phase {
            Stage::Connected { conn, .. } | Stage::Listing { conn, .. } => conn,
            _ => return,
        };
        self.start_kind_list(server, conn, kind, false);
    }

    /// `notifications/resources/list_changed` or `notifications/prompts/list_changed`.
    pub(super) fn on_catalog_list_changed(&mut self, server: &str, prompts: bool) {
        let Some(caps) = self.capabilities(server) else {
            return;
        };
        let declared = if prompts {
            caps.prompts_list_changed
        } else {
            caps.resources_list_changed
        };
        if !declared {
            let what = if prompts { "prompts" } else { "resources" };
            self.diag(
                Some(server),
                Level::Debug,
                format!(
                    "ignored {what}/list_changed: the server did not declare {what}.listChanged"
                ),
            );
            return;
        }
        self.stale_lists(server);
        if prompts {
            self.relist_kind(server, ListKind::Prompts);
        } else {
            self.relist_kind(server, ListKind::Resources);
            self.relist_kind(server, ListKind::Templates);
        }
    }

    /// The server is connected and its catalog live: show its prompts, and tell the embedder
    /// outside a startup round.
    pub(super) fn catalog_ready(&mut self, server: &str, announce: bool) {
        self.sync_prompt_names(server);
        if !announce {
            return;
        }
        // Only a server that declares resources or prompts, or whose earlier ones just left
        // the view, changes those views. (Its live catalog holds only kinds it declares:
        // nothing else is listed, and what an earlier attempt listed of a kind no longer
        // declared left when this attempt initialized.)
        let caps = self.capabilities(server).cloned().unwrap_or_default();
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let dropped = std::mem::take(&mut s.catalog.dropped);
        let live = &s.catalog.live;
        debug_assert!(
            (caps.resources || live.resources.is_empty() && live.templates.is_empty())
                && (caps.prompts || live.prompts.is_empty()),
            "{server} shows a kind it does not declare"
        );
        let resources = caps.resources
            || dropped[ListKind::Resources.index()]
            || dropped[ListKind::Templates.index()];
        let prompts = caps.prompts || dropped[ListKind::Prompts.index()];
        let servers = vec![server.to_string()];
        if resources {
            self.emit(Event::ResourcesChanged {
                servers: servers.clone(),
            });
        }
        if prompts {
            self.emit(Event::PromptsChanged { servers });
        }
    }
}
