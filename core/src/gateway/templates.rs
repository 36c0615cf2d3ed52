//! Which server a URI belongs to when no server lists it: the one whose resource template
//! (RFC 6570) matches it. A downstream client reads `test://item/7` after listing the template
//! `test://item/{id}`; the manager only routes URIs a server lists, so the gateway names the
//! server. More than one server with a matching template is left to the manager, which says
//! the URI is ambiguous.

use super::View;

/// The server to read `uri` from, when the view's resources do not name it and exactly one
/// server's templates match it.
pub(super) fn server_for_uri(view: &View, uri: &str) -> Option<String> {
    if view.resources.iter().any(|r| r.def.uri == uri) {
        return None;
    }
    let mut servers = view
        .templates
        .iter()
        .filter(|t| matches(&t.def.uri_template, uri))
        .map(|t| t.server.as_str());
    let first = servers.next()?;
    servers.all(|s| s == first).then(|| first.to_string())
}

/// Whether `uri` is an expansion of `template`: its literal parts in order, each expression
/// standing for a non-empty run (without `/`, `?`, `#` for a simple `{var}`; anything for a
/// reserved `{+var}` or fragment `{#var}`; a path `{/var}` or query `{?var}` expansion
/// starts with its operator's character).
pub(super) fn matches(template: &str, uri: &str) -> bool {
    let parts = split(template);
    // The matching backtracks over each expression's run: keep it bounded.
    let expressions = parts.iter().filter(|p| matches!(p, Part::Expr(_))).count();
    if expressions > MAX_EXPRESSIONS || uri.len() > MAX_URI {
        return false;
    }
    match_parts(&parts, uri)
}

/// Most expressions of a template matched against a URI.
const MAX_EXPRESSIONS: usize = 8;
/// Longest URI matched against templates.
const MAX_URI: usize = 4096;

#[derive(Debug, PartialEq)]
enum Part<'a> {
    Literal(&'a str),
    /// An expression, by its operator (`None`: a simple one).
    Expr(Option<char>),
}

fn split(template: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let Some(close) = rest[open..].find('}') else {
            parts.push(Part::Literal(&rest[open..]));
            return parts;
        };
        let body = &rest[open + 1..open + close];
        let op = body
            .chars()
            .next()
            .filter(|c| matches!(c, '+' | '#' | '.' | '/' | ';' | '?' | '&'));
        parts.push(Part::Expr(op));
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    parts
}

fn match_parts(parts: &[Part<'_>], uri: &str) -> bool {
    match parts.split_first() {
        None => uri.is_empty(),
        Some((Part::Literal(lit), rest)) => {
            uri.strip_prefix(lit).is_some_and(|u| match_parts(rest, u))
        }
        Some((Part::Expr(op), rest)) => {
            let allowed = |c: char| match op {
                None => !matches!(c, '/' | '?' | '#'),
                Some('+' | '#') => true,
                Some(_) => !matches!(c, '#'),
            };
            let body = match op {
                Some(c @ ('#' | '.' | '/' | ';' | '?' | '&')) => match uri.strip_prefix(*c) {
                    Some(u) => u,
                    // An expression whose variable is undefined expands to nothing.
                    None => return match_parts(rest, uri),
                },
                _ => uri,
            };
            // Try every non-empty run of allowed characters, shortest first (the input is
            // bounded by the frame size and templates are short).
            let ends: Vec<usize> = body
                .char_indices()
                .take_while(|&(_, c)| allowed(c))
                .map(|(i, c)| i + c.len_utf8())
                .collect();
            ends.into_iter().any(|end| match_parts(rest, &body[end..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn a_uri_matches_the_template_it_expands() {
        assert!(matches(
            "test://template/{id}/data",
            "test://template/123/data"
        ));
        assert!(!matches(
            "test://template/{id}/data",
            "test://template//data"
        ));
        assert!(!matches(
            "test://template/{id}/data",
            "test://template/1/2/data"
        ));
        assert!(matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(matches("db://{table}{?limit}", "db://users?limit=3"));
        assert!(matches("db://{table}{?limit}", "db://users"));
        assert!(!matches("db://{table}", "web://users"));
        assert!(matches("plain://fixed", "plain://fixed"));
        assert!(!matches("plain://fixed", "plain://fixed/more"));
    }
}
