//! `WWW-Authenticate` challenges (RFC 9110 section 11.6.1, RFC 6750 section 3): the `Bearer`
//! challenge's `resource_metadata` (RFC 9728), `scope` and `error` parameters.

use serde::Serialize;

/// What a `401` or `403` said about how to authorize.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Challenge {
    /// `resource_metadata`: where the protected resource metadata lives.
    pub resource_metadata: Option<String>,
    /// `scope`, split on spaces.
    pub scope: Option<Vec<String>>,
    /// `error` (`invalid_token`, `insufficient_scope`, ...).
    pub error: Option<String>,
}

impl Challenge {
    /// `error="insufficient_scope"`: the token is valid but lacks a scope (step-up).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The most header text read; a longer header is cut (challenges are short).
const MAX_HEADER: usize = 8192;

/// The `Bearer` challenge in a `WWW-Authenticate` header value (which may list several
/// challenges); an absent or foreign-scheme header gives an empty challenge, never an error.
pub fn parse_www_authenticate(header: &str) -> Challenge {
    let header = match header.char_indices().nth(MAX_HEADER) {
        Some((i, _)) => &header[..i],
        None => header,
    };
    let mut out = Challenge::default();
    let mut tokens = Tokenizer { s: header, i: 0 };
    let mut in_bearer = false;
    while let Some(item) = tokens.next_item() {
        match item {
            Item::Scheme(s) => in_bearer = s.eq_ignore_ascii_case("bearer"),
            Item::Param(k, v) if in_bearer => match k.to_ascii_lowercase().as_str() {
                "resource_metadata" => out.resource_metadata = Some(v),
                "scope" => out.scope = Some(v.split_whitespace().map(str::to_string).collect()),
                "error" => out.error = Some(v),
                _ => {}
            },
            Item::Param(..) => {}
        }
    }
    out
}

enum Item {
    Scheme(String),
    Param(String, String),
}

struct Tokenizer<'a> {
    s: &'a str,
    i: usize,
}

impl Tokenizer<'_> {
    fn skip(&mut self, f: impl Fn(char) -> bool) {
        while let Some(c) = self.s[self.i..].chars().next() {
            if !f(c) {
                break;
            }
            self.i += c.len_utf8();
        }
    }

    fn token(&mut self) -> &str {
        let start = self.i;
        self.skip(|c| !matches!(c, ' ' | '\t' | ',' | '=' | '"'));
        &self.s[start..self.i]
    }

    /// A scheme name, or `name=value` (value a token or a quoted string).
    fn next_item(&mut self) -> Option<Item> {
        loop {
            self.skip(|c| matches!(c, ' ' | '\t' | ','));
            if self.i >= self.s.len() {
                return None;
            }
            let name = self.token().to_string();
            if name.is_empty() {
                // A stray `=` or quote: skip it.
                self.i += self.s[self.i..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            self.skip(|c| c == ' ' || c == '\t');
            if !self.s[self.i..].starts_with('=') {
                return Some(Item::Scheme(name));
            }
            self.i += 1;
            self.skip(|c| c == ' ' || c == '\t');
            if self.s[self.i..].starts_with('=') {
                // token68 padding (`abc==`): not a parameter.
                self.skip(|c| c == '=');
                continue;
            }
            let value = if self.s[self.i..].starts_with('"') {
                self.i += 1;
                let mut v = String::new();
                let mut chars = self.s[self.i..].char_indices();
                let mut end = self.s.len() - self.i;
                while let Some((j, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                v.push(n);
                            }
                        }
                        '"' => {
                            end = j + 1;
                            break;
                        }
                        c => v.push(c),
                    }
                }
                self.i += end;
                v
            } else {
                self.token().to_string()
            };
            return Some(Item::Param(name, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_bearer_parameters() {
        let c = parse_www_authenticate(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", error_description="a \"quoted\" word""#,
        );
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scope, Some(vec!["mcp:basic".into(), "mcp:write".into()]));
        assert!(c.insufficient_scope());
    }

    #[test]
    fn ignores_other_schemes_and_token68() {
        let c = parse_www_authenticate(
            r#"Basic realm="x", scope="no", Newauth abc==, Bearer realm=api,error=invalid_token"#,
        );
        assert_eq!(c.scope, None);
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(parse_www_authenticate(""), Challenge::default());
        assert_eq!(parse_www_authenticate("Bearer"), Challenge::default());
        // Unterminated quotes and stray characters never panic.
        let _ = parse_www_authenticate(r#"Bearer scope="a, =", "é"#);
    }
}
