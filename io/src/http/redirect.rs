//! Which redirects the HTTP client follows.
//!
//! A redirect is followed only while it stays on the configured server's origin (same scheme,
//! host and port), or upgrades `http` to `https` on the same host. Everything a request
//! carries — the configured headers, credentials, the session id, the JSON-RPC message — was
//! meant for that server, so a hop to another origin is refused rather than stripped and
//! re-sent: the error names the `Location`, and the user can point the config at it if it is
//! trusted. `https` → `http` is refused for the same reason. The common case this serves is a
//! server that moved its endpoint on the same host (`/mcp` → `/mcp/`).
//!
//! - `307`/`308`: the same method and body.
//! - `301`/`302`: the same method and body too. Browsers turn a redirected `POST` into a `GET`,
//!   which would drop the JSON-RPC message; on the same origin, re-sending it is what the
//!   server meant (a moved endpoint).
//! - `303 See Other`: a `GET` (without body) when the request was a `GET`; for any other method
//!   it is refused, because the message cannot be sent as a `GET`.
//! - At most [`MAX_REDIRECTS`] hops per request.

use super::client::Url;
use http::{Method, StatusCode};

/// Redirects followed for one request, at most.
pub(super) const MAX_REDIRECTS: usize = 5;

/// What to do with one redirect answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hop {
    /// Not a redirect this client follows: hand the response to the caller as it is.
    NotARedirect,
    /// Send the same request to `Url` (the method may change for a `303`).
    Follow(Method, Url),
    /// A redirect refused; the message names the `Location` and why.
    Refused(String),
}

/// Decides about one answer with `status` and a `Location` header, for a request with `method`
/// to `current`; `hops` redirects were followed before it.
pub(super) fn next_hop(
    method: &Method,
    status: StatusCode,
    location: Option<&str>,
    current: &Url,
    hops: usize,
) -> Hop {
    let code = status.as_u16();
    if !matches!(code, 301 | 302 | 303 | 307 | 308) {
        return Hop::NotARedirect;
    }
    let Some(location) = location.map(str::trim).filter(|l| !l.is_empty()) else {
        return Hop::Refused(format!(
            "HTTP {code} redirect from {current} without a Location header"
        ));
    };
    if hops >= MAX_REDIRECTS {
        return Hop::Refused(format!(
            "HTTP {code} redirect from {current} to {location}: more than {MAX_REDIRECTS} \
             redirects in a row; not followed"
        ));
    }
    let target = match current.join(location) {
        Ok(t) => t,
        Err(e) => {
            return Hop::Refused(format!(
                "HTTP {code} redirect from {current} to an unusable Location \"{location}\": {e}"
            ))
        }
    };
    let same_origin = target.origin == current.origin;
    let upgrade =
        !current.origin.https && target.origin.https && target.origin.host == current.origin.host;
    if current.origin.https && !target.origin.https {
        return Hop::Refused(format!(
            "HTTP {code} redirect from {current} to {target}: from https to plain http; \
             not followed"
        ));
    }
    if !same_origin && !upgrade {
        return Hop::Refused(format!(
            "HTTP {code} redirect from {current} to {target}: another origin than {}; not \
             followed (the request's headers and message are only sent to the configured \
             server: set the server's url to the new address if it is trusted)",
            current.origin
        ));
    }
    let method = if code == 303 {
        if *method != Method::GET {
            return Hop::Refused(format!(
                "HTTP 303 redirect from {current} to {target}: a {method} cannot be repeated \
                 as a GET; not followed"
            ));
        }
        Method::GET
    } else {
        method.clone()
    };
    Hop::Follow(method, target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn follow(hop: Hop) -> (Method, String) {
        match hop {
            Hop::Follow(m, u) => (m, u.to_string()),
            other => panic!("expected a hop, got {other:?}"),
        }
    }

    fn refused(hop: Hop) -> String {
        match hop {
            Hop::Refused(m) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn same_origin_redirects_keep_the_method() {
        let here = url("http://127.0.0.1:8/mcp");
        for code in [301, 302, 307, 308] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(
                follow(next_hop(&Method::POST, status, Some("/mcp/"), &here, 0)),
                (Method::POST, "http://127.0.0.1:8/mcp/".to_string())
            );
        }
        assert_eq!(
            follow(next_hop(
                &Method::GET,
                StatusCode::SEE_OTHER,
                Some("http://127.0.0.1:8/other"),
                &here,
                4
            )),
            (Method::GET, "http://127.0.0.1:8/other".to_string())
        );
        assert_eq!(
            follow(next_hop(
                &Method::POST,
                StatusCode::TEMPORARY_REDIRECT,
                Some("https://127.0.0.1/mcp"),
                &here,
                0
            )),
            (Method::POST, "https://127.0.0.1/mcp".to_string())
        );
    }

    #[test]
    fn refused_redirects_name_the_location() {
        let here = url("https://example.com/mcp");
        let m = refused(next_hop(
            &Method::POST,
            StatusCode::FOUND,
            Some("https://evil.example/mcp"),
            &here,
            0,
        ));
        assert!(
            m.contains("https://evil.example/mcp") && m.contains("another origin"),
            "{m}"
        );
        let m = refused(next_hop(
            &Method::POST,
            StatusCode::PERMANENT_REDIRECT,
            Some("http://example.com/mcp"),
            &here,
            0,
        ));
        assert!(
            m.contains("http://example.com/mcp") && m.contains("plain http"),
            "{m}"
        );
        let m = refused(next_hop(
            &Method::POST,
            StatusCode::SEE_OTHER,
            Some("/done"),
            &here,
            0,
        ));
        assert!(
            m.contains("https://example.com/done") && m.contains("303"),
            "{m}"
        );
        let m = refused(next_hop(
            &Method::GET,
            StatusCode::TEMPORARY_REDIRECT,
            Some("/again"),
            &here,
            MAX_REDIRECTS,
        ));
        assert!(m.contains("/again") && m.contains("more than 5"), "{m}");
        let m = refused(next_hop(&Method::GET, StatusCode::FOUND, None, &here, 0));
        assert!(m.contains("without a Location"), "{m}");
        // Another port is another origin.
        let m = refused(next_hop(
            &Method::GET,
            StatusCode::FOUND,
            Some("https://example.com:8443/mcp"),
            &here,
            0,
        ));
        assert!(m.contains("https://example.com:8443/mcp"), "{m}");
        assert_eq!(
            next_hop(&Method::GET, StatusCode::NOT_MODIFIED, Some("/x"), &here, 0),
            Hop::NotARedirect
        );
    }
}
