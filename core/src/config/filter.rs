//! Filters on which configured servers may run: a deny list of server names and URLs
//! (simple globs) and the switch that turns project-level configs off.

use serde::{Deserialize, Serialize};

/// Server names and URLs to refuse. Patterns are simple globs: `*` matches any run of
/// characters, everything else matches itself, ignoring ASCII case.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DenyList {
    /// Matched against the server's name.
    pub servers: Vec<String>,
    /// Matched against the URL as written (before `${VAR}` expansion).
    pub urls: Vec<String>,
}

impl DenyList {
    /// The usual deny list: Exa servers are run by the embedder's native integration, not
    /// here.
    pub fn exa() -> Self {
        DenyList {
            servers: vec!["exa".into(), "exa-*".into()],
            urls: vec!["*.exa.ai*".into(), "*//exa.ai*".into()],
        }
    }

    /// The first server-name pattern matching `name`.
    pub(super) fn server_match(&self, name: &str) -> Option<&str> {
        self.servers
            .iter()
            .find(|p| glob_match(p, name))
            .map(String::as_str)
    }

    /// The first URL pattern matching `url`.
    pub(super) fn url_match(&self, url: &str) -> Option<&str> {
        self.urls
            .iter()
            .find(|p| glob_match(p, url))
            .map(String::as_str)
    }
}

/// Which servers [`merge`](super::merge) keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterOptions {
    /// `false` drops every source whose level is
    /// [`SourceLevel::Project`](super::SourceLevel::Project) before precedence is decided (so
    /// they shadow nothing).
    pub project_configs: bool,
    /// Names and URLs never to run, whichever source names them.
    pub deny: DenyList,
    /// What approves (or rejects) project-level servers; without any, every project-level
    /// server awaits approval.
    #[serde(default)]
    pub approvals: super::Approvals,
}

impl Default for FilterOptions {
    fn default() -> Self {
        FilterOptions {
            project_configs: true,
            deny: DenyList::default(),
            approvals: super::Approvals::default(),
        }
    }
}

/// `pattern` matches `text` in full; `*` matches any run of characters; ASCII case ignored.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().map(|c| c.to_ascii_lowercase()).collect();
    let t: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}
