//! Just enough of a URL for discovery: scheme, authority, path and query, kept as written so
//! identifiers published by a server are compared and sent back byte for byte.

use serde::Serialize;

/// An `http` or `https` URL split into its parts (the fragment is dropped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpUrl {
    /// `http` or `https`, lowercased.
    pub scheme: String,
    /// Host and optional port, as written (userinfo refused).
    pub authority: String,
    /// The path, possibly empty; never includes the query.
    pub path: String,
    /// The query without its `?`.
    pub query: Option<String>,
}

impl HttpUrl {
    /// Parses an absolute `http(s)` URL; `None` for anything else.
    pub fn parse(s: &str) -> Option<HttpUrl> {
        let (scheme, rest) = s.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let rest = rest.split('#').next().unwrap_or("");
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(end);
        if authority.is_empty() || authority.contains('@') || authority.contains(' ') {
            return None;
        }
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q.to_string())),
            None => (rest, None),
        };
        Some(HttpUrl {
            scheme,
            authority: authority.to_string(),
            path: path.to_string(),
            query,
        })
    }

    /// `scheme://authority`.
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// The path without a trailing `/` (`""` for the root).
    pub fn trimmed_path(&self) -> &str {
        self.path.trim_end_matches('/')
    }

    /// Same scheme and authority (host compared without case).
    pub fn same_origin(&self, other: &HttpUrl) -> bool {
        self.scheme == other.scheme && self.authority.eq_ignore_ascii_case(&other.authority)
    }

    /// This URL with `pairs` appended to its query.
    pub fn with_query(&self, pairs: &[(&str, &str)]) -> String {
        let added = super::encode::form_encode(pairs);
        let query = match &self.query {
            Some(q) if !q.is_empty() => format!("{q}&{added}"),
            _ => added,
        };
        format!("{}{}?{}", self.origin(), self.path, query)
    }
}

impl std::fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.origin(), self.path)?;
        if let Some(q) = &self.query {
            write!(f, "?{q}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_parts_and_drops_the_fragment() {
        let u = HttpUrl::parse("HTTPS://Example.com:8443/a/b/?x=1#frag").unwrap();
        assert_eq!(u.scheme, "https");
        assert_eq!(u.authority, "Example.com:8443");
        assert_eq!(u.path, "/a/b/");
        assert_eq!(u.trimmed_path(), "/a/b");
        assert_eq!(u.query.as_deref(), Some("x=1"));
        assert_eq!(u.to_string(), "https://Example.com:8443/a/b/?x=1");
        assert!(HttpUrl::parse("ftp://x/").is_none());
        assert!(HttpUrl::parse("http://user@x/").is_none());
        assert_eq!(HttpUrl::parse("http://h").unwrap().path, "");
        assert_eq!(
            HttpUrl::parse("http://h/a?b=1")
                .unwrap()
                .with_query(&[("c", "d e")]),
            "http://h/a?b=1&c=d%20e"
        );
    }
}
