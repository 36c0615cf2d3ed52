//! Qualified tool names: the names the agent sees, unique across the whole view.
//!
//! Default scheme `mcp_<server>_<tool>` (the classic MCP client's); also
//! `mcp__<server>__<tool>` (Claude Code's and Codex's). Routing uses [`NameTable`], never parsing a name back.
//!
//! # How a name is chosen
//!
//! Every raw (server, tool) pair has a *base name* ([`base_name`]): both parts sanitized
//! ([`sanitize`]), the server prefix dropped from the tool, joined by the scheme. A pair keeps
//! its base name when it is the only pair with that base and the base fits in
//! [`MAX_NAME_LEN`] characters. Every other pair is *suffixed*: it takes the first of its
//! candidates `<base cut to fit>_<hash>` (attempt 0, 1, 2, …; see [`suffixed_name`]) that is
//! nobody's base name and is not held by a suffixed pair that sorts before it by raw
//! (server, tool).
//!
//! So base names always win over hash suffixes, and among suffixed pairs the raw order breaks
//! ties (a serial dictatorship). That rule has exactly one outcome for a given set of pairs, so
//! names never depend on insertion order or on which server answered first, and they are unique
//! by construction. The hash is SHA-256 of the raw pair, fixed forever (a unit test pins it).
//!
//! The table keeps that outcome incrementally: a change marks the few pairs whose choice it
//! could affect (the pair itself, the other members of its base group, the holder of a name that
//! just became someone's base, and the pairs that had skipped a name that just came free), and
//! re-decides them in raw order. A change to one server costs in proportion to its tools and the
//! pairs that actually collide with them, never to the whole view.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::btree_map::Entry as MapEntry;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

/// Maximum length of a qualified name (the limit most model APIs put on tool names).
pub const MAX_NAME_LEN: usize = 64;

/// Hex digits in a uniqueness suffix (32 bits of the pair's hash).
pub const SUFFIX_HEX_DIGITS: usize = 8;

/// How a qualified name joins a server's and a tool's sanitized names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamingScheme {
    /// `mcp_<server>_<tool>` (the default, and the classic MCP client's)
    #[default]
    Seed,
    /// `mcp__<server>__<tool>`
    DoubleUnderscore,
}

/// Lower-case; runs of characters outside `[a-z0-9_]` become `_`; runs of `_` collapse; ends
/// are trimmed. Digits are kept. Anything non-ASCII (`ü`, CJK, emoji) counts as "outside", so
/// the result is always ASCII and may be empty.
pub fn sanitize(part: &str) -> String {
    sanitized(part).into_owned()
}

/// [`sanitize`], borrowing `part` when it is already sanitized (the common case: no copy).
fn sanitized(part: &str) -> Cow<'_, str> {
    let b = part.as_bytes();
    let clean = b.first() != Some(&b'_')
        && b.last() != Some(&b'_')
        && b.windows(2).all(|w| w != b"__")
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
    if clean {
        return Cow::Borrowed(part);
    }
    let mut out = String::with_capacity(part.len());
    for c in part.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '_'
        };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    Cow::Owned(out.trim_matches('_').to_string())
}

/// The name before any uniqueness suffix. May be longer than [`MAX_NAME_LEN`]; the table then
/// suffixes it. A part that sanitizes to nothing becomes `server` or `tool`.
pub fn base_name(scheme: NamingScheme, server: &str, tool: &str) -> String {
    let mut out = String::new();
    write_base_name(&mut out, scheme, &sanitized(server), tool);
    out
}

/// [`base_name`] into `out` (cleared first), the server part already sanitized.
fn write_base_name(out: &mut String, scheme: NamingScheme, server: &str, tool: &str) {
    let tool = sanitized(tool);
    let mut t: &str = &tool;
    if !server.is_empty() {
        if let Some(rest) = t.strip_prefix(server).and_then(|r| r.strip_prefix('_')) {
            if !rest.is_empty() {
                t = rest;
            }
        }
    }
    let s = if server.is_empty() { "server" } else { server };
    let t = if t.is_empty() { "tool" } else { t };
    out.clear();
    out.reserve(s.len() + t.len() + 6);
    match scheme {
        NamingScheme::Seed => {
            out.push_str("mcp_");
            out.push_str(s);
            out.push('_');
        }
        NamingScheme::DoubleUnderscore => {
            out.push_str("mcp__");
            out.push_str(s);
            out.push_str("__");
        }
    }
    out.push_str(t);
}

/// SHA-256 of the raw pair (length-prefixed, so `("ab", "c")` and `("a", "bc")` differ), first
/// eight bytes big-endian. Stable on every run, machine and version.
fn pair_hash(server: &str, tool: &str) -> u64 {
    let mut h = Sha256::new();
    h.update((server.len() as u64).to_le_bytes());
    h.update(server.as_bytes());
    h.update(tool.as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// Candidate `attempt` for a suffixed pair: `base`, cut (at a char boundary, trailing `_`
/// dropped) so the whole name fits in [`MAX_NAME_LEN`], then `_` and [`SUFFIX_HEX_DIGITS`] hex
/// digits of `pair_hash + attempt`. Attempts walk every suffix of that width once; beyond that
/// (only reachable with billions of colliding pairs) the suffix is the attempt itself in wider
/// hex, so candidates never run out.
pub fn suffixed_name(base: &str, server: &str, tool: &str, attempt: u64) -> String {
    candidate(base, server, tool, attempt, SUFFIX_HEX_DIGITS)
}

fn candidate(base: &str, server: &str, tool: &str, attempt: u64, digits: usize) -> String {
    let space = 1u64 << (4 * digits);
    let suffix = if attempt < space {
        let value = pair_hash(server, tool).wrapping_add(attempt) & (space - 1);
        format!("_{value:0digits$x}")
    } else {
        format!("_{attempt:x}")
    };
    let mut cut = base.len().min(MAX_NAME_LEN - suffix.len());
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = base[..cut].trim_end_matches('_');
    format!("{head}{suffix}")
}

/// A raw (server, tool) pair. Names are shared (`Arc<str>`): a pair is a key or value in several
/// maps at once, and copying it must not copy its strings.
type Raw = (Arc<str>, Arc<str>);

/// What the table knows about one raw pair.
#[derive(Debug, Clone)]
struct Entry {
    base: Arc<str>,
    /// The name it holds; `None` only between a change and the settling that follows it.
    name: Option<Arc<str>>,
    /// Suffixed candidates it went through (attempts `0..=n`), the last being `name`. Empty
    /// while it holds its base. Kept so a name that comes free can find who skipped it.
    claimed: Vec<Arc<str>>,
    /// Where the tool first appeared in the list last given for its server.
    index: usize,
}

/// Everything the table knows about one name string: whose base it is, who holds it, and
/// which suffixed pairs reached it. One map of these, so deciding a pair looks its name up once
/// for all three.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Pairs whose base name this is, sorted (one unless bases collide). Non-empty: the string
    /// is a base name, which suffixes must avoid.
    base_of: Vec<Raw>,
    /// The pair holding this name.
    holder: Option<Raw>,
    /// Suffixed pairs that reached this string as a candidate (hold it or skipped it).
    claims: BTreeSet<Raw>,
}

impl Slot {
    fn is_unused(&self) -> bool {
        self.base_of.is_empty() && self.holder.is_none() && self.claims.is_empty()
    }
}

/// The routing table: qualified name ↔ (server, raw tool name). The names are a function of
/// the set of pairs alone (see the module docs for the rule).
#[derive(Debug, Clone)]
pub struct NameTable {
    scheme: NamingScheme,
    suffix_digits: usize,
    /// name string → its slot; a slot that no longer says anything is removed.
    slots: BTreeMap<Arc<str>, Slot>,
    /// Slots with a holder (the number of names in the view).
    held: usize,
    /// server → raw tool → entry (two levels, so a lookup by `&str` allocates nothing). A
    /// server's key set is its current tools.
    entries: BTreeMap<Arc<str>, BTreeMap<Arc<str>, Entry>>,
    /// Pairs to re-decide; empty outside `set_server_tools`/`remove_server`.
    dirty: BTreeSet<Raw>,
}

impl Default for NameTable {
    fn default() -> Self {
        NameTable::new(NamingScheme::default())
    }
}

impl NameTable {
    /// An empty table naming under `scheme`.
    pub fn new(scheme: NamingScheme) -> Self {
        NameTable::with_suffix_digits(scheme, SUFFIX_HEX_DIGITS)
    }

    /// A table with shorter (or longer) suffixes, clamped to 1..=15 hex digits. Tests use one
    /// or two digits to make suffix collisions common; production uses [`NameTable::new`].
    #[doc(hidden)]
    pub fn with_suffix_digits(scheme: NamingScheme, digits: usize) -> Self {
        NameTable {
            scheme,
            suffix_digits: digits.clamp(1, 15),
            slots: BTreeMap::new(),
            held: 0,
            entries: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    /// The scheme it names under.
    pub fn scheme(&self) -> NamingScheme {
        self.scheme
    }

    /// Candidate `attempt` of a pair under this table's scheme and suffix width (what
    /// [`suffixed_name`] gives for the default width). For reference models in tests.
    pub fn candidate_name(&self, server: &str, tool: &str, attempt: u64) -> String {
        let base = base_name(self.scheme, server, tool);
        candidate(&base, server, tool, attempt, self.suffix_digits)
    }

    /// Replace `server`'s tools with `tools` (raw names; duplicates count once). Cost is
    /// proportional to the number of this server's tools (and the few pairs that collide with
    /// them), not to the view.
    pub fn set_server_tools<'a>(&mut self, server: &str, tools: impl IntoIterator<Item = &'a str>) {
        // (name, position of its first occurrence), sorted by name.
        let mut new: Vec<(&str, usize)> = tools.into_iter().zip(0..).collect();
        new.sort_unstable();
        new.dedup_by_key(|(name, _)| *name);
        // Walk the server's current tools and the new list together (both sorted): tools on
        // both keep their entry (its position updated), the rest go or come.
        let mut removed = Vec::new();
        let mut added = Vec::new();
        let server: Arc<str> = match self.entries.get_key_value(server) {
            Some((s, _)) => s.clone(),
            None => Arc::from(server),
        };
        let mut next = new.into_iter().peekable();
        if let Some(current) = self.entries.get_mut(&server) {
            for (tool, entry) in current.iter_mut() {
                while let Some(n) = next.next_if(|(n, _)| *n < &**tool) {
                    added.push(n);
                }
                match next.next_if(|(n, _)| *n == &**tool) {
                    Some((_, index)) => entry.index = index,
                    None => removed.push(tool.clone()),
                }
            }
        }
        added.extend(next);
        for tool in removed {
            self.detach((server.clone(), tool));
        }
        if !added.is_empty() {
            let s = sanitized(&server).into_owned();
            let mut base = String::new();
            let mut entries = Vec::with_capacity(added.len());
            for (tool, index) in added {
                write_base_name(&mut base, self.scheme, &s, tool);
                let tool: Arc<str> = Arc::from(tool);
                let entry = self.attach((server.clone(), tool.clone()), &base, index);
                entries.push((tool, entry));
            }
            let tools = self.entries.entry(server).or_default();
            for (tool, entry) in entries {
                tools.insert(tool, entry);
            }
        }
        self.settle();
    }

    /// Remove every tool of `server` (by identity, never by name prefix).
    pub fn remove_server(&mut self, server: &str) {
        let Some((server, tools)) = self.entries.get_key_value(server) else {
            return;
        };
        let server = server.clone();
        let tools: Vec<Arc<str>> = tools.keys().cloned().collect();
        for tool in tools {
            self.detach((server.clone(), tool));
        }
        self.settle();
    }

    /// Add a pair (whose base name is `base`) and mark whoever its arrival can move. Returns
    /// its entry, for the caller to file under its server before settling.
    #[must_use]
    fn attach(&mut self, raw: Raw, base: &str, index: usize) -> Entry {
        let (base, slot, fresh) = match self.slots.entry(Arc::from(base)) {
            MapEntry::Occupied(o) => (o.key().clone(), o.into_mut(), false),
            MapEntry::Vacant(v) => (v.key().clone(), v.insert(Slot::default()), true),
        };
        if fresh && base.len() <= MAX_NAME_LEN {
            // Nobody else wants, holds or skipped this string: the pair takes its base now,
            // exactly as settling it would. It is then like any settled pair: a later arrival
            // on the same base marks it dirty.
            slot.base_of.push(raw.clone());
            slot.holder = Some(raw);
            self.held += 1;
            return Entry {
                base: base.clone(),
                name: Some(base),
                claimed: Vec::new(),
                index,
            };
        }
        let group = &mut slot.base_of;
        let newcomer_base = group.is_empty();
        if group.len() == 1 {
            // The sole owner of this base now shares it: it becomes suffixed.
            self.dirty.extend(group.iter().cloned());
        }
        if let Err(at) = group.binary_search(&raw) {
            group.insert(at, raw.clone());
        }
        if newcomer_base {
            // A suffixed pair holding exactly this string must give it up: bases win.
            if let Some(holder) = &slot.holder {
                self.dirty.insert(holder.clone());
            }
        }
        self.dirty.insert(raw);
        Entry {
            base,
            name: None,
            claimed: Vec::new(),
            index,
        }
    }

    /// Drop a pair and mark whoever its departure can move.
    fn detach(&mut self, raw: Raw) {
        let Some(tools) = self.entries.get_mut(&raw.0) else {
            return;
        };
        let Some(entry) = tools.remove(&raw.1) else {
            return;
        };
        if tools.is_empty() {
            self.entries.remove(&raw.0);
        }
        self.dirty.remove(&raw);
        self.unclaim(&raw, &entry.claimed);
        if let Some(name) = entry.name {
            self.release(&name, &raw, None);
        }
        let Some(slot) = self.slots.get_mut(&entry.base) else {
            return;
        };
        if let Ok(at) = slot.base_of.binary_search(&raw) {
            slot.base_of.remove(at);
        }
        match slot.base_of.len() {
            0 => {
                // No longer anyone's base: pairs that skipped it may take it now.
                self.mark_claimants(&entry.base, None);
                self.prune(&entry.base);
            }
            1 => {
                // The last one left gets the bare base back (if it fits).
                self.dirty.extend(slot.base_of.iter().cloned());
            }
            _ => {}
        }
    }

    /// `raw` gives up `name` if it holds it; the pairs that reached it (after `after`, or all)
    /// may take it now.
    fn release(&mut self, name: &str, raw: &Raw, after: Option<&Raw>) {
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        if slot.holder.as_ref() == Some(raw) {
            slot.holder = None;
            self.held -= 1;
            self.mark_claimants(name, after);
            self.prune(name);
        }
    }

    /// Forget `name`'s slot if it no longer says anything.
    fn prune(&mut self, name: &str) {
        if self.slots.get(name).is_some_and(Slot::is_unused) {
            self.slots.remove(name);
        }
    }

    /// Mark the pairs that reached `name` (all of them, or only those after `after`).
    fn mark_claimants(&mut self, name: &str, after: Option<&Raw>) {
        let Some(slot) = self.slots.get(name) else {
            return;
        };
        match after {
            None => self.dirty.extend(slot.claims.iter().cloned()),
            Some(p) => self.dirty.extend(
                slot.claims
                    .range((Bound::Excluded(p), Bound::Unbounded))
                    .cloned(),
            ),
        }
    }

    fn unclaim(&mut self, raw: &Raw, names: &[Arc<str>]) {
        for name in names {
            if let Some(slot) = self.slots.get_mut(name) {
                slot.claims.remove(raw);
                self.prune(name);
            }
        }
    }

    /// Re-decide dirty pairs, smallest raw pair first, until none is left.
    ///
    /// When `p` is taken, every pair before it that is not dirty already holds its final name,
    /// so `p`'s decision is final too; whatever `p` moves (the holder it displaces, the pairs
    /// that skipped the name it releases) sorts after `p`, so each pair is decided at most once
    /// per call.
    fn settle(&mut self) {
        while let Some(p) = self.dirty.pop_first() {
            let Some(entry) = self.entries.get_mut(&p.0).and_then(|t| t.get_mut(&p.1)) else {
                continue;
            };
            let base = entry.base.clone();
            // The common case: `p` is alone on a base that fits and has no earlier claims, so
            // it takes (or keeps) its base and nothing else changes. One lookup of its slot.
            if entry.claimed.is_empty()
                && !matches!(&entry.name, Some(n) if *n != base)
                && base.len() <= MAX_NAME_LEN
            {
                if let Some(slot) = self
                    .slots
                    .get_mut(&base)
                    .filter(|slot| slot.base_of.len() == 1)
                {
                    entry.name = Some(base);
                    match slot.holder.replace(p.clone()) {
                        None => self.held += 1,
                        Some(old) if old != p => {
                            self.dirty.insert(old);
                        }
                        Some(_) => {}
                    }
                    continue;
                }
            }
            let sole = self.slots.get(&base).is_some_and(|s| s.base_of.len() == 1);
            let mut claimed: Vec<Arc<str>> = Vec::new();
            let name = if sole && base.len() <= MAX_NAME_LEN {
                base
            } else {
                let mut attempt = 0u64;
                loop {
                    let n = candidate(&base, &p.0, &p.1, attempt, self.suffix_digits);
                    let blocked = self.slots.get(n.as_str()).is_some_and(|s| {
                        !s.base_of.is_empty() || s.holder.as_ref().is_some_and(|h| h < &p)
                    });
                    let n: Arc<str> = Arc::from(n);
                    claimed.push(n.clone());
                    if !blocked {
                        break n;
                    }
                    attempt += 1;
                }
            };
            let old_claimed = std::mem::replace(&mut entry.claimed, claimed.clone());
            let old_name = entry.name.replace(name.clone());

            self.unclaim(&p, &old_claimed);
            for n in claimed {
                self.slots.entry(n).or_default().claims.insert(p.clone());
            }
            if let Some(old) = old_name.filter(|old| *old != name) {
                self.release(&old, &p, Some(&p));
            }
            let slot = self.slots.entry(name).or_default();
            match &slot.holder {
                None => {
                    slot.holder = Some(p);
                    self.held += 1;
                }
                Some(holder) if *holder != p => {
                    if let Some(displaced) = slot.holder.replace(p) {
                        self.dirty.insert(displaced);
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// The qualified name of a raw pair.
    pub fn qualified(&self, server: &str, tool: &str) -> Option<&str> {
        self.entries
            .get(server)
            .and_then(|t| t.get(tool))
            .and_then(|e| e.name.as_deref())
    }

    /// Route a qualified name to (server, raw tool name).
    pub fn resolve(&self, qualified: &str) -> Option<(&str, &str)> {
        self.slots
            .get(qualified)
            .and_then(|slot| slot.holder.as_ref())
            .map(|(s, t)| (&**s, &**t))
    }

    /// Every (qualified name, server, raw tool), ordered by qualified name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.slots
            .iter()
            .filter_map(|(n, slot)| slot.holder.as_ref().map(|(s, t)| (&**n, &**s, &**t)))
    }

    /// `server`'s (qualified name, raw tool), ordered by raw tool name.
    pub fn server_tools<'a>(&'a self, server: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.entries
            .get(server)
            .into_iter()
            .flatten()
            .filter_map(|(tool, e)| Some((e.name.as_deref()?, &**tool)))
    }

    /// `server`'s (qualified name, raw tool, index), ordered by raw tool name; `index` is the
    /// position of the tool's first occurrence in the list last given to
    /// [`NameTable::set_server_tools`] for `server` (so the caller can find its definition
    /// without a lookup by name).
    pub fn server_tools_indexed<'a>(
        &'a self,
        server: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str, usize)> {
        self.entries
            .get(server)
            .into_iter()
            .flatten()
            .filter_map(|(tool, e)| Some((e.name.as_deref()?, &**tool, e.index)))
    }

    /// Number of qualified names held (tools in the view).
    pub fn len(&self) -> usize {
        self.held
    }

    /// No tool is in the view.
    pub fn is_empty(&self) -> bool {
        self.held == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(table: &NameTable) -> Vec<(&str, &str, &str)> {
        table.iter().collect()
    }

    /// Pinned: these strings are what agents and caches see. If this test fails, the naming
    /// rule or the hash changed; that is a breaking change, not a snapshot to re-bless.
    /// (The hash is SHA-256 over `u64 LE len(server) ‖ server ‖ tool`, first 8 bytes
    /// big-endian; `daf8c173dba8deeb` for ("a", "b") is checkable with any sha256 tool.)
    #[test]
    fn pinned_names_never_change() {
        assert_eq!(pair_hash("a", "b"), 0xdaf8_c173_dba8_deeb);
        assert_eq!(suffixed_name("mcp_a_b", "a", "b", 0), "mcp_a_b_dba8deeb");
        assert_eq!(suffixed_name("mcp_a_b", "a", "b", 1), "mcp_a_b_dba8deec");

        let mut t = NameTable::new(NamingScheme::Seed);
        t.set_server_tools("github", ["github_create_issue", "Search Code"]);
        t.set_server_tools("GitHub", ["create_issue"]);
        t.set_server_tools("s3", ["s3_list", "工具", "🚀"]);
        let long = "x".repeat(70);
        t.set_server_tools("long", [long.as_str()]);
        assert_eq!(
            view(&t),
            vec![
                (
                    "mcp_github_create_issue_8381e50e",
                    "github",
                    "github_create_issue"
                ),
                ("mcp_github_create_issue_bf21af6e", "GitHub", "create_issue"),
                ("mcp_github_search_code", "github", "Search Code"),
                (
                    "mcp_long_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_79a6e31e",
                    "long",
                    long.as_str()
                ),
                ("mcp_s3_list", "s3", "s3_list"),
                ("mcp_s3_tool_c18f1b69", "s3", "工具"),
                ("mcp_s3_tool_cf7360b5", "s3", "🚀"),
            ]
        );

        let mut d = NameTable::new(NamingScheme::DoubleUnderscore);
        d.set_server_tools("My Server", ["Get.Thing", "über"]);
        assert_eq!(
            view(&d),
            vec![
                ("mcp__my_server__ber", "My Server", "über"),
                ("mcp__my_server__get_thing", "My Server", "Get.Thing"),
            ]
        );
    }

    #[test]
    fn non_ascii_and_empty_parts_fall_back_to_valid_names() {
        assert_eq!(sanitize("Über-Tool"), "ber_tool");
        assert_eq!(sanitize("工具"), "");
        assert_eq!(
            base_name(NamingScheme::Seed, "🚀", "工具"),
            "mcp_server_tool"
        );
        assert_eq!(base_name(NamingScheme::Seed, "", "--"), "mcp_server_tool");
        // A tool that is only the server prefix keeps it rather than becoming empty.
        assert_eq!(base_name(NamingScheme::Seed, "s3", "s3_"), "mcp_s3_s3");
    }

    #[test]
    fn a_base_of_exactly_64_characters_is_not_suffixed() {
        let tool64 = "t".repeat(MAX_NAME_LEN - "mcp_s_".len());
        let tool65 = format!("{tool64}t");
        let mut t = NameTable::new(NamingScheme::Seed);
        t.set_server_tools("s", [tool64.as_str(), tool65.as_str()]);
        let n64 = t.qualified("s", &tool64).unwrap_or_default();
        let n65 = t.qualified("s", &tool65).unwrap_or_default();
        assert_eq!(n64, format!("mcp_s_{tool64}"));
        assert_eq!(n64.len(), MAX_NAME_LEN);
        assert_eq!(n65.len(), MAX_NAME_LEN);
        assert_ne!(n65, format!("mcp_s_{tool65}"));
    }

    #[test]
    fn the_cut_lands_on_a_char_boundary() {
        // Bases are ASCII after sanitizing; the cut must still never split a char.
        let base = format!("mcp_{}", "é".repeat(40));
        let name = candidate(&base, "s", "t", 0, SUFFIX_HEX_DIGITS);
        assert!(name.len() <= MAX_NAME_LEN);
        assert!(name.ends_with(&format!("_{:08x}", pair_hash("s", "t") as u32)));
    }

    #[test]
    fn a_tool_named_like_a_suffix_keeps_its_base_and_the_suffixed_pair_moves() {
        let mut t = NameTable::new(NamingScheme::Seed);
        t.set_server_tools("a", ["b"]);
        t.set_server_tools("A", ["b"]);
        let taken = t.qualified("a", "b").unwrap_or_default().to_string();
        let bait = taken.trim_start_matches("mcp_a_").to_string();
        t.set_server_tools("a-", [bait.as_str()]);
        // Bases win: the bait gets the bare name, the suffixed pair its next candidate.
        assert_eq!(t.qualified("a-", &bait), Some(taken.as_str()));
        assert_eq!(
            t.qualified("a", "b"),
            Some(suffixed_name("mcp_a_b", "a", "b", 1).as_str())
        );
        // The bait leaves: the pair moves back.
        t.remove_server("a-");
        assert_eq!(t.qualified("a", "b"), Some(taken.as_str()));
    }

    #[test]
    fn exhausted_suffixes_widen_instead_of_failing() {
        // One hex digit leaves 16 suffixes for 40 pairs that share a base.
        let mut t = NameTable::with_suffix_digits(NamingScheme::Seed, 1);
        let servers: Vec<String> = (0..40).map(|i| format!("{}a", "-".repeat(i))).collect();
        for s in &servers {
            t.set_server_tools(s, ["b"]);
        }
        let names: BTreeSet<&str> = t.iter().map(|(n, _, _)| n).collect();
        assert_eq!(names.len(), 40);
        assert!(names.iter().all(|n| n.len() <= MAX_NAME_LEN));
        for s in &servers {
            let q = t.qualified(s, "b").unwrap_or_default();
            assert_eq!(t.resolve(q), Some((s.as_str(), "b")));
        }
    }

    #[test]
    fn replacing_a_servers_tools_keeps_unchanged_names() {
        let mut t = NameTable::new(NamingScheme::Seed);
        t.set_server_tools("a", ["x", "y"]);
        t.set_server_tools("a", ["y", "z"]);
        assert_eq!(view(&t), vec![("mcp_a_y", "a", "y"), ("mcp_a_z", "a", "z")]);
        t.set_server_tools("a", []);
        assert!(t.is_empty());
        assert_eq!(t.server_tools("a").count(), 0);
    }

    #[test]
    fn indexes_follow_the_list_last_given() {
        let mut t = NameTable::new(NamingScheme::Seed);
        let indexed = |t: &NameTable| -> Vec<(String, usize)> {
            t.server_tools_indexed("s")
                .map(|(_, tool, i)| (tool.to_string(), i))
                .collect()
        };
        t.set_server_tools("s", ["b", "a", "b", "c"]);
        assert_eq!(
            indexed(&t),
            [("a".into(), 1), ("b".into(), 0), ("c".into(), 3)]
        );
        t.set_server_tools("s", ["d", "c", "a"]);
        assert_eq!(
            indexed(&t),
            [("a".into(), 2), ("c".into(), 1), ("d".into(), 0)]
        );
        assert_eq!(t.resolve("mcp_s_b"), None);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn sanitize_keeps_digits_and_collapses() {
        assert_eq!(sanitize("S3--Bucket!!"), "s3_bucket");
        assert_eq!(
            base_name(NamingScheme::Seed, "s3", "s3_list"),
            "mcp_s3_list"
        );
        assert_eq!(
            base_name(NamingScheme::DoubleUnderscore, "My Server", "Get.Thing"),
            "mcp__my_server__get_thing"
        );
    }

    #[test]
    fn collisions_get_stable_suffixes_regardless_of_order() {
        let mut a = NameTable::new(NamingScheme::Seed);
        a.set_server_tools("a-b", ["c"]);
        a.set_server_tools("a", ["b_c"]);
        let mut b = NameTable::new(NamingScheme::Seed);
        b.set_server_tools("a", ["b_c"]);
        b.set_server_tools("a-b", ["c"]);
        let na: Vec<_> = a.iter().collect();
        let nb: Vec<_> = b.iter().collect();
        assert_eq!(na, nb);
        assert_eq!(na.len(), 2);
        assert!(na.iter().all(|(n, _, _)| n.len() <= MAX_NAME_LEN));
        assert_ne!(na[0].0, na[1].0);
    }
}
