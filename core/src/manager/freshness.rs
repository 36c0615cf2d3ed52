//! How long a stateless server's lists stay fresh, from the hints its pages carry (`ttlMs`,
//! `cacheScope`), and what that lets the core skip.
//!
//! Every page of a list says how long it stays fresh; a list is fresh until the earliest of
//! its pages expires, and private if any page is (or says nothing). A server's lists together
//! are fresh until the earliest of its declared lists expires. That is recorded twice: in the
//! server's state (`Server::fresh`, in the core's time) and with the cache entry
//! ([`Freshness`], as milliseconds left when it is handed over, since the core's time does not
//! survive the process: the cache takes the entry's age off when it loads it).
//!
//! What it decides:
//! - A connection to a stateless server whose lists are still fresh (this process listed them,
//!   or the cache entry says so) becomes ready from them without listing; when they expire,
//!   its lists are asked again (`TimerReason::CacheExpiry`). A missing or zero TTL keeps
//!   today's behaviour: the entry may serve deferred tools at the gate, and the server is
//!   listed at once.
//! - A private entry belongs to the credentials it was listed under: it carries a fingerprint
//!   of the resolved config (headers, environment, arguments after `${VAR}` expansion), and an
//!   entry whose fingerprint is not the current one is a miss, never shown.
//! - A change the server announces makes what was fresh stale.
//!
//! The `initialize`-based revisions have no such hints: their lists are never skipped.

use super::servers::CacheState;
use super::{ConnId, Era, Level, Manager, TimerReason};
use crate::catalog::Catalog;
use crate::protocol::{CacheHint, CacheScope, InitializeResult, MAX_CACHE_TTL};
use crate::time::Instant;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// What a cache entry says of its lists' freshness (`Catalog::freshness`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Freshness {
    /// How many milliseconds the lists stay fresh from the moment the record is handed over:
    /// at `StoreCache`, from the store; at `CacheLoaded`, from the load (the cache takes the
    /// entry's age off).
    pub ttl_ms: u64,
    /// `private` if any page of any list was.
    pub scope: CacheScope,
    /// For a private entry: the fingerprint of the resolved config it was listed under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

/// Until when something listed stays fresh, and who may reuse it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fresh {
    pub(super) until: Instant,
    pub(super) scope: CacheScope,
}

impl Fresh {
    /// A page received at `now` with `hint`.
    pub(super) fn of_page(now: Instant, hint: CacheHint) -> Fresh {
        Fresh {
            until: now + hint.ttl,
            scope: hint.scope,
        }
    }

    /// Both together: the earlier expiry, the narrower scope.
    pub(super) fn and(self, other: Fresh) -> Fresh {
        Fresh {
            until: self.until.min(other.until),
            scope: self.scope.narrowest(other.scope),
        }
    }
}

/// A list's freshness so far, with one more page.
pub(super) fn fold(acc: Option<Fresh>, page: Fresh) -> Option<Fresh> {
    Some(acc.map_or(page, |a| a.and(page)))
}

/// The slot of the tool list in `Server::list_fresh` (the catalog kinds follow it).
pub(super) const TOOLS_SLOT: usize = 0;

impl Manager {
    /// A list of `server` on `conn` ended: remember how fresh it is (`None`: failed, or
    /// unknown). Only a stateless connection's hints count.
    pub(super) fn note_list_fresh(
        &mut self,
        conn: ConnId,
        server: &str,
        slot: usize,
        fresh: Option<Fresh>,
    ) {
        let modern = self.is_modern(conn);
        if let Some(s) = self.servers.get_mut(server) {
            if let Some(f) = s.list_fresh.get_mut(slot) {
                *f = fresh.filter(|_| modern);
            }
        }
    }

    /// How fresh every list `server` declared is, together: `None` unless each one has a hint.
    fn lists_fresh(&self, server: &str) -> Option<Fresh> {
        let s = self.servers.get(server)?;
        if s.era != Some(Era::Modern) {
            return None;
        }
        let init = s.init.as_ref()?;
        let caps = &init.capabilities;
        let declared = [init.has_tools, caps.resources, caps.resources, caps.prompts];
        let mut acc = None;
        for (slot, on) in declared.into_iter().enumerate() {
            if on {
                acc = fold(acc, s.list_fresh[slot]?);
            }
        }
        acc
    }

    /// The freshness record of `server`'s cache entry now (also kept in its state), if its
    /// lists are still fresh.
    pub(super) fn freshness_to_store(&mut self, server: &str) -> Option<Freshness> {
        let fresh = self.lists_fresh(server).filter(|f| f.until > self.now);
        if let Some(s) = self.servers.get_mut(server) {
            s.fresh = fresh;
            s.fresh_caps = s
                .init
                .as_ref()
                .map(|i| (i.has_tools, i.capabilities.clone()));
        }
        let fresh = fresh?;
        let left = fresh.until.saturating_duration_since(self.now);
        let identity = match fresh.scope {
            CacheScope::Private => Some(self.identity(server)?),
            CacheScope::Public => None,
        };
        Some(Freshness {
            ttl_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
            scope: fresh.scope,
            identity,
        })
    }

    /// The fingerprint of `server`'s resolved config: what a private entry is bound to.
    fn identity(&self, server: &str) -> Option<String> {
        let s = self.servers.get(server)?;
        let resolved = crate::config::resolve(server, &s.spec.config, &self.opts.env).ok()?;
        let bytes = serde_json::to_vec(&resolved).ok()?;
        let digest = Sha256::digest(&bytes);
        Some(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The cache answered `server` with `catalog`: whether the entry may be used (a private
    /// one listed under other credentials may not), and, if it is still fresh, for how long.
    pub(super) fn cached_freshness(&mut self, server: &str, catalog: Option<&Catalog>) -> bool {
        let Some(f) = catalog.and_then(|c| c.freshness.as_ref()) else {
            return true;
        };
        if f.scope == CacheScope::Private && f.identity != self.identity(server) {
            self.counters.cache_private_refused += 1;
            self.diag(
                Some(server),
                Level::Debug,
                "the cached lists are private to other credentials: not used".into(),
            );
            return false;
        }
        // The lists stand in for the server's only under the capabilities they were made for:
        // those of the discover answer stored with them.
        let caps = catalog
            .and_then(|c| c.handshake.as_ref())
            .and_then(|h| h.discover.clone())
            .and_then(|text| serde_json::value::RawValue::from_string(text).ok())
            .and_then(|raw| crate::protocol::parse_discover_result(&raw).ok().flatten())
            .map(|init| (init.has_tools, init.capabilities));
        if let (true, Some(caps)) = (f.ttl_ms > 0, caps) {
            self.counters.cache_fresh_loaded += 1;
            let ttl = Duration::from_millis(f.ttl_ms).min(MAX_CACHE_TTL);
            let fresh = Fresh {
                until: self.now + ttl,
                scope: f.scope,
            };
            if let Some(s) = self.servers.get_mut(server) {
                s.fresh = Some(fresh);
                s.list_fresh = [Some(fresh); 4];
                s.fresh_caps = Some(caps);
            }
        }
        true
    }

    /// `conn` reached a stateless server: if its lists are still fresh and it declares what
    /// it declared when they were made, it is ready from them without listing (and they are
    /// asked again when they expire). Whether it was.
    pub(super) fn ready_from_fresh_cache(
        &mut self,
        conn: ConnId,
        server: &str,
        deadline: Instant,
        init: &InitializeResult,
    ) -> bool {
        let now = self.now;
        let Some(s) = self.servers.get(server) else {
            return false;
        };
        let Some(fresh) = s.fresh.filter(|f| f.until > now) else {
            return false;
        };
        let same = s
            .fresh_caps
            .as_ref()
            .is_some_and(|(tools, caps)| *tools == init.has_tools && *caps == init.capabilities);
        if !same {
            return false;
        }
        let CacheState::Hit(tools) = &s.cache else {
            return false;
        };
        let tools = tools.to_vec();
        if !self.catalog_from_cache(server) {
            return false;
        }
        if let Some(s) = self.servers.get_mut(server) {
            s.era = Some(Era::Modern);
            s.init = Some(init.clone());
            s.list_fresh = [Some(fresh); 4];
        }
        self.timers.disarm(
            deadline,
            TimerReason::Connect {
                server: server.to_string(),
                conn,
            },
        );
        self.counters.lists_skipped_fresh += 1;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.cache_expiry = Some(fresh.until);
        }
        self.timers
            .arm(fresh.until, TimerReason::CacheExpiry { conn });
        self.diag(
            Some(server),
            Level::Debug,
            format!(
                "lists still fresh for {} ms: ready from the cache without listing",
                fresh.until.saturating_duration_since(now).as_millis()
            ),
        );
        self.tools_ready(server, tools);
        true
    }

    /// The lists `conn` became ready from without listing have expired: ask them again.
    pub(super) fn on_cache_expired(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.cache_expiry.is_none_or(|at| at > self.now) {
            return;
        }
        c.cache_expiry = None;
        let server = c.server.clone();
        let connected = self.servers.get(&server).is_some_and(
            |s| matches!(s.phase, super::servers::Stage::Connected { conn: c, .. } if c == conn),
        );
        if !connected {
            return;
        }
        self.counters.lists_expired_relisted += 1;
        self.stale_lists(&server);
        self.relist_everything(&server);
    }

    /// What was fresh of `server` is stale now (it announced a change, or it expired).
    pub(super) fn stale_lists(&mut self, server: &str) {
        if let Some(s) = self.servers.get_mut(server) {
            s.fresh = None;
            s.list_fresh = [None; 4];
        }
    }
}
