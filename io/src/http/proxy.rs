//! HTTP proxies from the environment, as curl and most HTTP clients read them.
//!
//! - `HTTPS_PROXY` / `https_proxy` for `https` servers, `HTTP_PROXY` / `http_proxy` for plain
//!   `http` ones (`ALL_PROXY` / `all_proxy` for either when the specific one is unset). The
//!   lowercase name wins when both are set, as in curl.
//! - `NO_PROXY` / `no_proxy`: comma-separated hosts reached directly. `*` is every host;
//!   `example.com` and `.example.com` match that host and its subdomains; an IP address or
//!   `localhost` matches itself; `host:port` only that port. CIDR ranges are not read.
//! - A proxy is an `http://` URL (`http://user:password@proxy:3128`); its credentials go out as
//!   `Proxy-Authorization: Basic` and are never part of a message or a log line (a proxy is
//!   shown as `http://proxy:3128`).
//! - An `https` server is reached through a `CONNECT` tunnel (TLS runs end to end, inside it);
//!   a plain `http` server through requests in absolute form (`POST http://host/mcp`).

use super::client::Origin;
use std::fmt;

/// One proxy: where it listens and the credentials to give it.
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    /// The proxy's own address (always plain `http`).
    pub origin: Origin,
    /// `Proxy-Authorization` value, when the proxy URL carried credentials.
    authorization: Option<String>,
}

impl Proxy {
    /// Parses a proxy URL (`http://[user:password@]host[:port]`; the scheme may be left out).
    pub fn parse(value: &str) -> Result<Proxy, String> {
        let value = value.trim();
        let rest = match value.split_once("://") {
            Some(("http", rest)) => rest,
            Some((scheme, _)) => {
                return Err(format!(
                    "proxy scheme \"{scheme}\" is not supported (only http:// proxies)"
                ))
            }
            None => value,
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = split_host_port(hostport).ok_or_else(|| {
            // The value may hold a password: name only the host part.
            format!("proxy address \"{hostport}\" is not host[:port]")
        })?;
        let authorization = userinfo.map(|u| {
            let (user, password) = u.split_once(':').unwrap_or((u, ""));
            let plain = format!("{}:{}", percent_decode(user), percent_decode(password));
            format!("Basic {}", base64(plain.as_bytes()))
        });
        Ok(Proxy {
            origin: Origin {
                https: false,
                host,
                port: port.unwrap_or(80),
            },
            authorization,
        })
    }

    /// The `Proxy-Authorization` value, if any.
    pub fn authorization(&self) -> Option<&str> {
        self.authorization.as_deref()
    }
}

/// Without the credentials.
impl fmt::Display for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}", hostport(&self.origin))
    }
}

/// Without the credentials.
impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Proxy({self}{})",
            if self.authorization.is_some() {
                ", with credentials"
            } else {
                ""
            }
        )
    }
}

/// Which proxy, if any, each origin goes through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proxies {
    http: Option<Proxy>,
    https: Option<Proxy>,
    no_proxy: Vec<NoProxyEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum NoProxyEntry {
    All,
    /// A host name or address (lower case, no leading dot), and a port when one was given.
    Host(String, Option<u16>),
}

impl Proxies {
    /// No proxy at all.
    pub fn none() -> Proxies {
        Proxies::default()
    }

    /// Reads the variables through `var`; a variable that does not parse is skipped with a
    /// warning (it never names the credentials).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Proxies {
        let pick = |names: &[&str]| -> Option<Proxy> {
            let (name, value) = names
                .iter()
                .find_map(|n| var(n).filter(|v| !v.trim().is_empty()).map(|v| (*n, v)))?;
            match Proxy::parse(&value) {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::warn!(target: "switchboard::http", "ignored {name}: {e}");
                    None
                }
            }
        };
        let all = ["all_proxy", "ALL_PROXY"];
        let https = pick(&["https_proxy", "HTTPS_PROXY"]).or_else(|| pick(&all));
        let http = pick(&["http_proxy", "HTTP_PROXY"]).or_else(|| pick(&all));
        let no_proxy = var("no_proxy")
            .or_else(|| var("NO_PROXY"))
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .filter_map(|e| {
                if e == "*" {
                    return Some(NoProxyEntry::All);
                }
                let e = e.trim_start_matches("*.").trim_start_matches('.');
                let (host, port) = split_host_port(e)?;
                Some(NoProxyEntry::Host(host.to_ascii_lowercase(), port))
            })
            .collect();
        Proxies {
            http,
            https,
            no_proxy,
        }
    }

    /// From this process's environment.
    pub fn from_env() -> Proxies {
        Proxies::from_vars(|name| std::env::var(name).ok())
    }

    /// The proxy to reach `origin` through, `None` for a direct connection.
    pub fn for_origin(&self, origin: &Origin) -> Option<&Proxy> {
        let proxy = if origin.https {
            self.https.as_ref()
        } else {
            self.http.as_ref()
        }?;
        let host = origin.host.to_ascii_lowercase();
        let bypass = self.no_proxy.iter().any(|entry| match entry {
            NoProxyEntry::All => true,
            NoProxyEntry::Host(h, port) => {
                port.is_none_or(|p| p == origin.port)
                    && (host == *h
                        || (host.len() > h.len()
                            && host.ends_with(h.as_str())
                            && host.as_bytes()[host.len() - h.len() - 1] == b'.'))
            }
        });
        (!bypass).then_some(proxy)
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port` (a bare IPv6 address has no port).
fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        return Some((host.to_string(), port));
    }
    if s.matches(':').count() > 1 {
        return Some((s.to_string(), None));
    }
    let (host, port) = match s.split_once(':') {
        Some((h, p)) => (h, Some(p.parse().ok()?)),
        None => (s, None),
    };
    if host.is_empty() {
        return None;
    }
    Some((host.to_string(), port))
}

fn hostport(origin: &Origin) -> String {
    if origin.host.contains(':') {
        format!("[{}]:{}", origin.host, origin.port)
    } else {
        format!("{}:{}", origin.host, origin.port)
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn base64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn origin(https: bool, host: &str, port: u16) -> Origin {
        Origin {
            https,
            host: host.into(),
            port,
        }
    }

    fn proxies(vars: &[(&str, &str)]) -> Proxies {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Proxies::from_vars(|n| map.get(n).cloned())
    }

    #[test]
    fn proxy_urls_parse_and_never_show_their_credentials() {
        let p = Proxy::parse("http://al%40ice:s3cret@proxy.local:3128/").unwrap();
        assert_eq!(p.origin, origin(false, "proxy.local", 3128));
        assert_eq!(p.authorization(), Some("Basic YWxAaWNlOnMzY3JldA=="));
        assert_eq!(p.to_string(), "http://proxy.local:3128");
        assert!(!format!("{p:?}").contains("s3cret"));
        assert_eq!(Proxy::parse("proxy:8080").unwrap().origin.port, 8080);
        assert_eq!(Proxy::parse("http://proxy").unwrap().origin.port, 80);
        let e = Proxy::parse("socks5://u:pw@h:1").unwrap_err();
        assert!(e.contains("socks5") && !e.contains("pw"), "{e}");
        let e = Proxy::parse("http://u:pw@h:notaport").unwrap_err();
        assert!(!e.contains("pw"), "{e}");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
    }

    #[test]
    fn each_scheme_has_its_proxy_and_no_proxy_bypasses_it() {
        let p = proxies(&[
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:2"),
            ("HTTP_PROXY", "http://plain:3"),
            (
                "NO_PROXY",
                "localhost, .internal.example ,10.0.0.1,svc:8443,[::1]",
            ),
        ]);
        let via = |o: Origin| p.for_origin(&o).map(|p| p.to_string());
        assert_eq!(
            via(origin(true, "api.example.com", 443)).as_deref(),
            Some("http://lower:2")
        );
        assert_eq!(
            via(origin(false, "api.example.com", 80)).as_deref(),
            Some("http://plain:3")
        );
        assert_eq!(via(origin(true, "localhost", 443)), None);
        assert_eq!(via(origin(true, "a.internal.example", 443)), None);
        assert_eq!(via(origin(true, "internal.example", 443)), None);
        assert!(via(origin(true, "notinternal.example", 443)).is_some());
        assert_eq!(via(origin(false, "10.0.0.1", 80)), None);
        assert_eq!(via(origin(true, "svc", 8443)), None);
        assert!(via(origin(true, "svc", 443)).is_some());
        assert_eq!(via(origin(false, "::1", 80)), None);
        let all = proxies(&[("ALL_PROXY", "http://all:9"), ("no_proxy", "*")]);
        assert_eq!(all.for_origin(&origin(true, "x", 443)), None);
        let all = proxies(&[("all_proxy", "http://all:9")]);
        assert_eq!(
            all.for_origin(&origin(false, "x", 80))
                .map(|p| p.to_string())
                .as_deref(),
            Some("http://all:9")
        );
        assert_eq!(proxies(&[]).for_origin(&origin(true, "x", 443)), None);
    }
}
