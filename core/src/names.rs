//! Qualified tool names: the names the agent sees, unique across the whole view.
//!
//! Default scheme `mcp_<server>_<tool>` (the seed's); also `mcp__<server>__<tool>` (Claude
//! Code's and Codex's). Routing uses [`NameTable`], never parsing a name back.
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
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// Maximum length of a qualified name (the limit most model APIs put on tool names).
pub const MAX_NAME_LEN: usize = 64;

/// Hex digits in a uniqueness suffix (32 bits of the pair's hash).
pub const SUFFIX_HEX_DIGITS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamingScheme {
    /// `mcp_<server>_<tool>`
    #[default]
    Seed,
    /// `mcp__<server>__<tool>`
    DoubleUnderscore,
}

/// Lower-case; runs of characters outside `[a-z0-9_]` become `_`; runs of `_` collapse; ends
/// are trimmed. Digits are kept. Anything non-ASCII (`ü`, CJK, emoji) counts as "outside", so
/// the result is always ASCII and may be empty.
pub fn sanitize(part: &str) -> String {
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
    out.trim_matches('_').to_string()
}

/// The name before any uniqueness suffix. May be longer than [`MAX_NAME_LEN`]; the table then
/// suffixes it. A part that sanitizes to nothing becomes `server` or `tool`.
pub fn base_name(scheme: NamingScheme, server: &str, tool: &str) -> String {
    let s = sanitize(server);
    let mut t = sanitize(tool);
    if !s.is_empty() {
        if let Some(rest) = t.strip_prefix(&format!("{s}_")) {
            if !rest.is_empty() {
                t = rest.to_string();
            }
        }
    }
    let s = if s.is_empty() {
        "server".to_string()
    } else {
        s
    };
    let t = if t.is_empty() { "tool".to_string() } else { t };
    match scheme {
        NamingScheme::Seed => format!("mcp_{s}_{t}"),
        NamingScheme::DoubleUnderscore => format!("mcp__{s}__{t}"),
    }
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

type Raw = (String, String);

/// What the table knows about one raw pair.
#[derive(Debug, Clone)]
struct Entry {
    base: String,
    /// The name it holds; `None` only between a change and the settling that follows it.
    name: Option<String>,
    /// Suffixed candidates it went through (attempts `0..=n`), the last being `name`. Empty
    /// while it holds its base. Kept so a name that comes free can find who skipped it.
    claimed: Vec<String>,
}

/// The routing table: qualified name ↔ (server, raw tool name). The names are a function of
/// the set of pairs alone (see the module docs for the rule).
#[derive(Debug, Clone)]
pub struct NameTable {
    scheme: NamingScheme,
    suffix_digits: usize,
    /// base name → every pair that wants it. Its keys are the names suffixes must avoid.
    bases: BTreeMap<String, BTreeSet<Raw>>,
    /// server → raw tool → entry (two levels, so a lookup by `&str` allocates nothing).
    entries: BTreeMap<String, BTreeMap<String, Entry>>,
    by_name: BTreeMap<String, Raw>,
    by_server: BTreeMap<String, BTreeSet<String>>,
    /// suffixed candidate → the suffixed pairs that reached it (hold it or skipped it).
    claims: BTreeMap<String, BTreeSet<Raw>>,
    /// Pairs to re-decide; empty outside `set_server_tools`/`remove_server`.
    dirty: BTreeSet<Raw>,
}

impl Default for NameTable {
    fn default() -> Self {
        NameTable::new(NamingScheme::default())
    }
}

impl NameTable {
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
            bases: BTreeMap::new(),
            entries: BTreeMap::new(),
            by_name: BTreeMap::new(),
            by_server: BTreeMap::new(),
            claims: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
    }

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
        let new: BTreeSet<String> = tools.into_iter().map(str::to_string).collect();
        let old = self.by_server.remove(server).unwrap_or_default();
        for tool in old.difference(&new) {
            self.detach((server.to_string(), tool.clone()));
        }
        for tool in new.difference(&old) {
            self.attach((server.to_string(), tool.clone()));
        }
        if !new.is_empty() {
            self.by_server.insert(server.to_string(), new);
        }
        self.settle();
    }

    /// Remove every tool of `server` (by identity, never by name prefix).
    pub fn remove_server(&mut self, server: &str) {
        let Some(tools) = self.by_server.remove(server) else {
            return;
        };
        for tool in tools {
            self.detach((server.to_string(), tool));
        }
        self.settle();
    }

    /// Add a pair and mark whoever its arrival can move.
    fn attach(&mut self, raw: Raw) {
        let base = base_name(self.scheme, &raw.0, &raw.1);
        let group = self.bases.entry(base.clone()).or_default();
        let newcomer_base = group.is_empty();
        if group.len() == 1 {
            // The sole owner of this base now shares it: it becomes suffixed.
            self.dirty.extend(group.iter().cloned());
        }
        group.insert(raw.clone());
        if newcomer_base {
            // A suffixed pair holding exactly this string must give it up: bases win.
            if let Some(holder) = self.by_name.get(&base) {
                self.dirty.insert(holder.clone());
            }
        }
        self.entries.entry(raw.0.clone()).or_default().insert(
            raw.1.clone(),
            Entry {
                base,
                name: None,
                claimed: Vec::new(),
            },
        );
        self.dirty.insert(raw);
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
            if self.by_name.get(&name) == Some(&raw) {
                self.by_name.remove(&name);
                self.mark_claimants(&name, None);
            }
        }
        let Some(group) = self.bases.get_mut(&entry.base) else {
            return;
        };
        group.remove(&raw);
        match group.len() {
            0 => {
                // No longer anyone's base: pairs that skipped it may take it now.
                self.bases.remove(&entry.base);
                self.mark_claimants(&entry.base, None);
            }
            1 => {
                // The last one left gets the bare base back (if it fits).
                self.dirty.extend(group.iter().cloned());
            }
            _ => {}
        }
    }

    /// Mark the pairs that reached `name` (all of them, or only those after `after`).
    fn mark_claimants(&mut self, name: &str, after: Option<&Raw>) {
        let Some(claimants) = self.claims.get(name) else {
            return;
        };
        match after {
            None => self.dirty.extend(claimants.iter().cloned()),
            Some(p) => self.dirty.extend(
                claimants
                    .range((Bound::Excluded(p), Bound::Unbounded))
                    .cloned(),
            ),
        }
    }

    fn unclaim(&mut self, raw: &Raw, names: &[String]) {
        for name in names {
            if let Some(set) = self.claims.get_mut(name) {
                set.remove(raw);
                if set.is_empty() {
                    self.claims.remove(name);
                }
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
            let Some(entry) = self.entries.get(&p.0).and_then(|t| t.get(&p.1)) else {
                continue;
            };
            let base = entry.base.clone();
            let sole = self.bases.get(&base).is_some_and(|g| g.len() == 1);
            let mut claimed = Vec::new();
            let name = if sole && base.len() <= MAX_NAME_LEN {
                base
            } else {
                let mut attempt = 0u64;
                loop {
                    let n = candidate(&base, &p.0, &p.1, attempt, self.suffix_digits);
                    let blocked = self.bases.contains_key(&n)
                        || self.by_name.get(&n).is_some_and(|holder| holder < &p);
                    claimed.push(n.clone());
                    if !blocked {
                        break n;
                    }
                    attempt += 1;
                }
            };

            let Some(entry) = self.entries.get_mut(&p.0).and_then(|t| t.get_mut(&p.1)) else {
                continue;
            };
            let old_claimed = std::mem::replace(&mut entry.claimed, claimed.clone());
            let old_name = entry.name.replace(name.clone());
            self.unclaim(&p, &old_claimed);
            for n in claimed {
                self.claims.entry(n).or_default().insert(p.clone());
            }
            if let Some(old) = old_name.filter(|old| *old != name) {
                if self.by_name.get(&old) == Some(&p) {
                    self.by_name.remove(&old);
                    self.mark_claimants(&old, Some(&p));
                }
            }
            if self.by_name.get(&name) != Some(&p) {
                if let Some(displaced) = self.by_name.insert(name, p.clone()) {
                    self.dirty.insert(displaced);
                }
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
        self.by_name
            .get(qualified)
            .map(|(s, t)| (s.as_str(), t.as_str()))
    }

    /// Every (qualified name, server, raw tool), ordered by qualified name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.by_name
            .iter()
            .map(|(n, (s, t))| (n.as_str(), s.as_str(), t.as_str()))
    }

    /// `server`'s (qualified name, raw tool), ordered by raw tool name.
    pub fn server_tools<'a>(&'a self, server: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.by_server
            .get(server)
            .into_iter()
            .flatten()
            .filter_map(move |tool| Some((self.qualified(server, tool)?, tool.as_str())))
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
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
