//! The names the gateway serves: the view's qualified names, or, with
//! [`GatewayOptions::plain_names`](super::GatewayOptions::plain_names), each tool's and
//! prompt's own name where that is unambiguous.
//!
//! A plain name is served only when no other entry of the same kind has the same raw name and
//! no entry's qualified name equals it, so every served name still names exactly one entry.
//! The rest keep their qualified names. Names are recomputed with every view, so a second
//! server arriving with a clashing tool turns both back to qualified names, and the
//! `list_changed` that announces the new view announces the renaming too. A request may name
//! an entry by its served or its qualified name.

use crate::catalog::Prompt;
use crate::tool::Tool;
use std::collections::BTreeMap;

/// The served name of every tool and prompt of one view, in the view's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ServedNames {
    pub tools: Vec<String>,
    pub prompts: Vec<String>,
}

impl ServedNames {
    /// The names for `tools` and `prompts`; plain where unambiguous when `plain` is set.
    pub fn new(tools: &[Tool], prompts: &[Prompt], plain: bool) -> Self {
        ServedNames {
            tools: served(
                tools
                    .iter()
                    .map(|t| (t.def.name.as_str(), t.qualified_name.as_str())),
                plain,
            ),
            prompts: served(
                prompts
                    .iter()
                    .map(|p| (p.def.name.as_str(), p.qualified_name.as_str())),
                plain,
            ),
        }
    }
}

/// `(raw, qualified)` pairs to served names.
fn served<'a>(
    entries: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    plain: bool,
) -> Vec<String> {
    if !plain {
        return entries.map(|(_, q)| q.to_string()).collect();
    }
    let mut raw_count: BTreeMap<&str, usize> = BTreeMap::new();
    for (raw, _) in entries.clone() {
        *raw_count.entry(raw).or_default() += 1;
    }
    let qualified: BTreeMap<&str, ()> = entries.clone().map(|(_, q)| (q, ())).collect();
    entries
        .map(|(raw, q)| {
            let unique = raw_count.get(raw) == Some(&1)
                && (raw == q || !qualified.contains_key(raw))
                && !raw.is_empty();
            if unique { raw } else { q }.to_string()
        })
        .collect()
}

/// The qualified name `name` stands for among `served` names of `qualified` entries: the
/// entry served under `name`, else `name` itself (a qualified name, or unknown: the manager
/// says which).
pub(super) fn resolve<'a>(
    name: &'a str,
    served: &'a [String],
    qualified: impl Iterator<Item = &'a str>,
) -> &'a str {
    served
        .iter()
        .zip(qualified)
        .find(|(s, _)| s.as_str() == name)
        .map_or(name, |(_, q)| q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(entries: &[(&str, &str)], plain: bool) -> Vec<String> {
        served(entries.iter().copied(), plain)
    }

    #[test]
    fn plain_names_are_served_only_where_unambiguous() {
        let entries = [
            ("echo", "mcp_a_echo"),
            ("echo", "mcp_b_echo"),
            ("add", "mcp_a_add"),
            ("mcp_a_add", "mcp_c_mcp_a_add"),
        ];
        assert_eq!(
            names(&entries, true),
            ["mcp_a_echo", "mcp_b_echo", "add", "mcp_c_mcp_a_add"]
        );
        assert_eq!(
            names(&entries, false),
            ["mcp_a_echo", "mcp_b_echo", "mcp_a_add", "mcp_c_mcp_a_add"]
        );
    }

    #[test]
    fn a_request_may_name_the_served_or_the_qualified_name() {
        let served = vec!["add".to_string(), "mcp_b_echo".to_string()];
        let qualified = ["mcp_a_add", "mcp_b_echo"];
        assert_eq!(
            resolve("add", &served, qualified.iter().copied()),
            "mcp_a_add"
        );
        assert_eq!(
            resolve("mcp_a_add", &served, qualified.iter().copied()),
            "mcp_a_add"
        );
        assert_eq!(resolve("nope", &served, qualified.iter().copied()), "nope");
    }
}
