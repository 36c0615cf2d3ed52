//! Qualified tool names: the names the agent sees, unique across the whole view.
//!
//! Default scheme `mcp_<server>_<tool>` (the seed's); also `mcp__<server>__<tool>` (Claude
//! Code's and Codex's). Routing uses [`NameTable`], never parsing a name back.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Maximum length of a qualified name (the limit most model APIs put on tool names).
pub const MAX_NAME_LEN: usize = 64;

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
/// are trimmed. Digits are kept.
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

/// The name before any uniqueness suffix.
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

/// FNV-1a over the raw pair: stable on every run and machine.
fn pair_hash(server: &str, tool: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in server.bytes().chain([0u8]).chain(tool.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn suffixed(base: &str, server: &str, tool: &str) -> String {
    let suffix = format!("_{:08x}", pair_hash(server, tool) as u32);
    let keep = MAX_NAME_LEN - suffix.len();
    let mut head = base[..base.len().min(keep)]
        .trim_end_matches('_')
        .to_string();
    head.push_str(&suffix);
    head
}

type Raw = (String, String);

/// The routing table: qualified name ↔ (server, raw tool name). Names depend only on the set
/// of pairs, never on insertion order.
#[derive(Debug, Clone, Default)]
pub struct NameTable {
    scheme: NamingScheme,
    /// base name → every raw pair that wants it.
    bases: BTreeMap<String, BTreeSet<Raw>>,
    by_raw: BTreeMap<Raw, String>,
    by_name: BTreeMap<String, Raw>,
    by_server: BTreeMap<String, BTreeSet<String>>,
}

impl NameTable {
    pub fn new(scheme: NamingScheme) -> Self {
        NameTable {
            scheme,
            ..Default::default()
        }
    }

    pub fn scheme(&self) -> NamingScheme {
        self.scheme
    }

    /// Replace `server`'s tools with `tools` (raw names). Cost is proportional to the number of
    /// this server's tools (and the few pairs that collide with them), not to the view.
    pub fn set_server_tools<'a>(&mut self, server: &str, tools: impl IntoIterator<Item = &'a str>) {
        self.remove_server(server);
        let mut touched = BTreeSet::new();
        let mut set = BTreeSet::new();
        for tool in tools {
            let raw = (server.to_string(), tool.to_string());
            let base = base_name(self.scheme, server, tool);
            if self.bases.entry(base.clone()).or_default().insert(raw) {
                touched.insert(base);
                set.insert(tool.to_string());
            }
        }
        self.by_server.insert(server.to_string(), set);
        for base in touched {
            self.assign(&base);
        }
    }

    /// Remove every tool of `server` (by identity).
    pub fn remove_server(&mut self, server: &str) {
        let Some(tools) = self.by_server.remove(server) else {
            return;
        };
        let mut touched = BTreeSet::new();
        for tool in tools {
            let raw = (server.to_string(), tool);
            if let Some(name) = self.by_raw.remove(&raw) {
                self.by_name.remove(&name);
            }
            let base = base_name(self.scheme, &raw.0, &raw.1);
            if let Some(set) = self.bases.get_mut(&base) {
                set.remove(&raw);
                if set.is_empty() {
                    self.bases.remove(&base);
                } else {
                    touched.insert(base);
                }
            }
        }
        for base in touched {
            self.assign(&base);
        }
    }

    /// (Re)assign names to every pair that wants `base`.
    fn assign(&mut self, base: &str) {
        let Some(pairs) = self.bases.get(base).cloned() else {
            return;
        };
        for raw in &pairs {
            if let Some(old) = self.by_raw.remove(raw) {
                self.by_name.remove(&old);
            }
        }
        let unique = pairs.len() == 1 && base.len() <= MAX_NAME_LEN;
        for raw in pairs {
            let name = if unique {
                base.to_string()
            } else {
                suffixed(base, &raw.0, &raw.1)
            };
            self.by_name.insert(name.clone(), raw.clone());
            self.by_raw.insert(raw, name);
        }
    }

    /// The qualified name of a raw pair.
    pub fn qualified(&self, server: &str, tool: &str) -> Option<&str> {
        self.by_raw
            .get(&(server.to_string(), tool.to_string()))
            .map(String::as_str)
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
