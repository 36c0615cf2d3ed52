//! `${VAR}` expansion in a server's command, arguments, environment, working directory, URL
//! and headers. The variables come from a map the caller passes, never from the process
//! environment, so the core stays pure and tests choose their own.
//!
//! This is Switchboard's own syntax, the one every config is in once read (each client's
//! syntax is translated into it first, see [`super::interpolate`]): `${NAME}`,
//! `${NAME:-default}`, and `$${` for a literal `${`.

use std::collections::BTreeMap;

/// Expand `${VAR}` and `${VAR:-default}` in `s` from `env`. An unset variable without a
/// default expands to the empty string; `$${` is a literal `${`.
pub fn expand_vars(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let at = &rest[dollar..];
        if let Some(after) = at.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        let Some(after) = at.strip_prefix("${") else {
            out.push('$');
            rest = &at[1..];
            continue;
        };
        match after.find('}') {
            Some(end) => {
                let (var, default) = split_default(&after[..end]);
                match (env.get(var), default) {
                    (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
                    (Some(v), _) => out.push_str(v),
                    (None, Some(d)) => out.push_str(d),
                    (None, None) => {}
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(at);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// `NAME:-default` into the name and the default.
pub(super) fn split_default(inner: &str) -> (&str, Option<&str>) {
    match inner.find(":-") {
        Some(i) => (&inner[..i], Some(&inner[i + 2..])),
        None => (inner, None),
    }
}

/// `text` as a literal in Switchboard's syntax: every `${` is written `$${`.
pub(super) fn literal(text: &str) -> String {
    text.replace("${", "$${")
}
