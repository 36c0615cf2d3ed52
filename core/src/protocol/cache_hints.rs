//! The freshness hints of a cacheable result (MCP 2026-07-28): `ttlMs`, how many milliseconds
//! the result may be taken as fresh after it was received, and `cacheScope`, whether it may be
//! shared across authorization contexts (`public`) or only reused within the one that asked
//! (`private`). List results (`tools/list`, `resources/list`, `resources/templates/list`,
//! `prompts/list`) and `resources/read` carry them, per page.
//!
//! Read conservatively: a missing or malformed `ttlMs` is 0 (stale at once), a missing or
//! unknown `cacheScope` is `private` (never shared), and a TTL is clipped to
//! [`MAX_CACHE_TTL`] so a hint cannot pin a list for longer than a day.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The longest a hint may keep a result fresh (24 hours); a longer `ttlMs` is clipped.
pub const MAX_CACHE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Who may reuse a cached result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheScope {
    /// Holds nothing user-specific: reusable under any credentials.
    Public,
    /// Reusable only within the authorization context that received it.
    Private,
}

impl CacheScope {
    /// The narrower of two scopes: one private page makes the whole list private.
    pub fn narrowest(self, other: CacheScope) -> CacheScope {
        self.max(other)
    }
}

/// A result's `ttlMs` and `cacheScope`, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheHint {
    /// How long the result stays fresh after it was received (0: stale at once).
    pub ttl: Duration,
    /// Who may reuse it.
    pub scope: CacheScope,
}

impl Default for CacheHint {
    /// What a result without hints says: stale at once, private.
    fn default() -> Self {
        CacheHint {
            ttl: Duration::ZERO,
            scope: CacheScope::Private,
        }
    }
}

/// The hint of a result from its `ttlMs` and `cacheScope` members (either may be absent).
pub fn cache_hint(ttl_ms: Option<&Value>, scope: Option<&Value>) -> CacheHint {
    let ttl = ttl_ms
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
        .unwrap_or(Duration::ZERO)
        .min(MAX_CACHE_TTL);
    let scope = match scope.and_then(Value::as_str) {
        Some("public") => CacheScope::Public,
        _ => CacheScope::Private,
    };
    CacheHint { ttl, scope }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_hints_read_as_stale_and_private() {
        assert_eq!(cache_hint(None, None), CacheHint::default());
    }

    #[test]
    fn malformed_ttl_is_zero_and_unknown_scope_is_private() {
        let h = cache_hint(Some(&json!(-5)), Some(&json!("shared")));
        assert_eq!(h.ttl, Duration::ZERO);
        assert_eq!(h.scope, CacheScope::Private);
        let h = cache_hint(Some(&json!("100")), Some(&json!(true)));
        assert_eq!(h, CacheHint::default());
    }

    #[test]
    fn a_huge_ttl_is_clipped_to_a_day() {
        let h = cache_hint(Some(&json!(u64::MAX)), Some(&json!("public")));
        assert_eq!(h.ttl, MAX_CACHE_TTL);
        assert_eq!(h.scope, CacheScope::Public);
    }

    #[test]
    fn one_private_page_makes_the_list_private() {
        assert_eq!(
            CacheScope::Public.narrowest(CacheScope::Private),
            CacheScope::Private
        );
        assert_eq!(
            CacheScope::Public.narrowest(CacheScope::Public),
            CacheScope::Public
        );
    }
}
