//! `${VAR}` expansion in a server's command, arguments, environment, working directory, URL
//! and headers. The variables come from a map the caller passes, never from the process
//! environment, so the core stays pure and tests choose their own.

use std::collections::BTreeMap;

/// Expand `${VAR}` and `${VAR:-default}` in `s` from `env`. An unset variable without a
/// default expands to the empty string.
pub fn expand_vars(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                let inner = &after[..end];
                let (var, default) = match inner.find(":-") {
                    Some(i) => (&inner[..i], Some(&inner[i + 2..])),
                    None => (inner, None),
                };
                match (env.get(var), default) {
                    (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
                    (Some(v), _) => out.push_str(v),
                    (None, Some(d)) => out.push_str(d),
                    (None, None) => {}
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}
