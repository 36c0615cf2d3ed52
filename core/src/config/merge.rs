//! Merging config sources by precedence: the first source naming a server wins, every later
//! entry of that name is reported as shadowed, and winners that are disabled or filtered out
//! are reported as skipped. Nothing is dropped silently.

use super::{
    config_hash, validate, Approved, ApprovedBy, AwaitingApproval, ConfigError, FilterOptions,
    ParsedDocument, RejectedBy, ServerConfig, ServerSpec, SourceLevel, SourceMeta, TrustDecision,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// One config source: a document (or a part of one) and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Source {
    /// Where the entries came from; it goes with every server, shadowing and error reported.
    pub meta: SourceMeta,
    /// The entries that parsed, with their names.
    pub servers: Vec<(String, ServerConfig)>,
    /// Entries of this source that did not parse ([`ParsedDocument::errors`]). A broken
    /// entry still claims its name, so a lower-priority entry of the same name does not run
    /// in its place; whole-document errors belong to the shell's report, not here.
    pub errors: Vec<ConfigError>,
}

/// The provider of Switchboard's own config files (and of files named on the command line),
/// the only ones whose `!command` values run.
pub const OWN_PROVIDER: &str = "switchboard";

impl Source {
    /// A source of entries that all parsed (or were built in code).
    pub fn new(meta: SourceMeta, servers: Vec<(String, ServerConfig)>) -> Self {
        Source {
            meta,
            servers,
            errors: Vec::new(),
        }
    }

    /// A source holding a parsed document: its entries and its per-entry errors.
    ///
    /// A `timeout` in Claude Code's and Gemini CLI's files limits each tool call there, so it
    /// becomes the entry's call timeout (Claude Code ignores values under 1000 ms), not its
    /// connect timeout.
    ///
    /// `!command` values (run by the shell at connect time) are Switchboard's own syntax: in
    /// a file of another client ([`SourceMeta::provider`] other than `switchboard`), where
    /// that client would pass the value on as it is, a leading `!` is kept as text (written
    /// `!!`, the escape for a literal `!`), so nothing in such a file is ever executed.
    pub fn from_document(meta: SourceMeta, document: ParsedDocument) -> Self {
        let mut servers = document.servers;
        if meta.provider != OWN_PROVIDER {
            for (_, config) in &mut servers {
                config.keep_commands_as_text();
            }
        }
        // Each client's `timeout` means what that client makes of it.
        let per_call_below = match meta.provider.as_str() {
            "claude-code" => Some(1000),
            "gemini" => Some(0),
            _ => None,
        };
        if let Some(below) = per_call_below {
            for (_, config) in &mut servers {
                config.timeout_limits_each_call(below);
            }
        }
        // Cline, Roo Code and goose count a call's `timeout` in seconds.
        if matches!(meta.provider.as_str(), "cline" | "roo" | "goose") {
            for (_, config) in &mut servers {
                if let Some(secs) = config.timeout_ms.take() {
                    config
                        .call_timeout_ms
                        .get_or_insert(secs.saturating_mul(1000));
                }
            }
        }
        Source {
            meta,
            servers,
            errors: document.errors,
        }
    }
}

/// A lower-priority entry that lost to an earlier source naming the same server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shadowed {
    /// The server both sources name.
    pub server: String,
    /// The source whose entry is used.
    pub winner: SourceMeta,
    /// The source whose entry is not.
    pub shadowed: SourceMeta,
}

/// Why a server that was configured is not run. Not an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    /// `enabled: false` (or `disabled: true`) on the winning entry.
    Disabled,
    /// The source is project-level and project configs are switched off.
    ProjectConfigsOff,
    /// The server's name matches a deny pattern.
    DeniedName {
        /// The deny-list pattern that matched.
        pattern: String,
    },
    /// The server's URL matches a deny pattern.
    DeniedUrl {
        /// The deny-list pattern that matched.
        pattern: String,
    },
    /// A client's own approval state or policy rejects it (rejections win over every
    /// approval).
    Rejected {
        /// Whose state.
        by: RejectedBy,
    },
}

/// A configured server that is not run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The server's name.
    pub server: String,
    /// The source of the entry that decided it.
    pub source: SourceMeta,
    /// Why it is not run.
    #[serde(flatten)]
    pub reason: SkipReason,
}

/// An error together with the source it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceError {
    /// The file the error is in.
    pub source: SourceMeta,
    /// What is wrong.
    pub error: ConfigError,
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            // These already name the file.
            ConfigError::Syntax { .. } | ConfigError::Document { .. } => self.error.fmt(f),
            ConfigError::Server { .. } => write!(f, "{}: {}", self.source.path, self.error),
        }
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// The outcome of [`merge`]: everything is reported, nothing is dropped silently.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Merged {
    /// Valid, enabled, allowed servers, sorted by name.
    pub servers: Vec<ServerSpec>,
    /// In source order.
    pub shadowed: Vec<Shadowed>,
    /// Project sources first (in source order), then the rest by server name.
    pub skipped: Vec<Skipped>,
    /// Parse errors in source order, then validation errors by server name.
    pub errors: Vec<SourceError>,
    /// Valid project-level servers nothing approved yet, by name: they are not in `servers`.
    pub awaiting: Vec<AwaitingApproval>,
    /// The project-level servers in `servers`, with what approved each, by name.
    pub approved: Vec<Approved>,
}

/// Merge sources given in priority order (first = highest).
///
/// 1. Project-level sources are dropped when `options.project_configs` is off.
/// 2. The first source naming a server wins (even when its entry is broken or disabled: a
///    higher layer can switch a server off); every later entry of that name is reported in
///    [`Merged::shadowed`]. An entry of a file its client does not read at all (an untrusted
///    Codex project or Gemini folder) is skipped at once and claims no name.
/// 3. Winners that are disabled, match the deny list, are switched off by a client's policy
///    ([`ClientPolicies`](super::ClientPolicies)) or are rejected by a client's approval
///    state are reported in [`Merged::skipped`].
/// 4. The rest are validated; each invalid one gives one error and the others carry on.
/// 5. Valid project-level winners run only when approved ([`FilterOptions::approvals`]);
///    the others are reported in [`Merged::awaiting`].
pub fn merge(sources: Vec<Source>, options: &FilterOptions) -> Merged {
    let mut merged = Merged::default();
    // name -> (winning source, its config; `None` when the winning entry did not parse)
    let mut winners: BTreeMap<String, (SourceMeta, Option<ServerConfig>)> = BTreeMap::new();
    let mut claim =
        |merged: &mut Merged, name: &str, meta: &SourceMeta, config: Option<ServerConfig>| {
            match winners.get(name) {
                Some((winner, _)) => merged.shadowed.push(Shadowed {
                    server: name.to_string(),
                    winner: winner.clone(),
                    shadowed: meta.clone(),
                }),
                None => {
                    winners.insert(name.to_string(), (meta.clone(), config));
                }
            }
        };
    for source in sources {
        if source.meta.level == SourceLevel::Project && !options.project_configs {
            for (name, _) in source.servers {
                merged.skipped.push(Skipped {
                    server: name,
                    source: source.meta.clone(),
                    reason: SkipReason::ProjectConfigsOff,
                });
            }
            continue;
        }
        for error in source.errors {
            if let ConfigError::Server { server, .. } = &error {
                claim(&mut merged, server, &source.meta, None);
            }
            merged.errors.push(SourceError {
                source: source.meta.clone(),
                error,
            });
        }
        for (name, config) in source.servers {
            // A file its own client does not read (Codex in an untrusted project, Gemini in
            // an untrusted folder) claims no name: the next source of that name wins, as it
            // does in that client, which never sees the project's entry.
            if let TrustDecision::Rejected { by } =
                options
                    .approvals
                    .decide(&name, &source.meta, &config_hash(&config))
            {
                if by.file_unread() {
                    merged.skipped.push(Skipped {
                        server: name,
                        source: source.meta.clone(),
                        reason: SkipReason::Rejected { by },
                    });
                    continue;
                }
            }
            claim(&mut merged, &name, &source.meta, Some(config));
        }
    }
    for (name, (source, config)) in winners {
        let Some(config) = config else { continue };
        let skip = if !config.enabled {
            Some(SkipReason::Disabled)
        } else if let Some(pattern) = options.deny.server_match(&name) {
            Some(SkipReason::DeniedName {
                pattern: pattern.to_string(),
            })
        } else {
            config
                .url
                .as_deref()
                .and_then(|url| options.deny.url_match(url))
                .map(|pattern| SkipReason::DeniedUrl {
                    pattern: pattern.to_string(),
                })
        };
        let skip = skip.or_else(|| {
            let by = options
                .approvals
                .policies
                .blocked(&name, &source, &config)?;
            Some(SkipReason::Rejected { by })
        });
        let hash = config_hash(&config);
        let decision = options.approvals.decide(&name, &source, &hash);
        let skip = skip.or(match decision {
            TrustDecision::Rejected { by } => Some(SkipReason::Rejected { by }),
            _ => None,
        });
        if let Some(reason) = skip {
            merged.skipped.push(Skipped {
                server: name,
                source,
                reason,
            });
            continue;
        }
        if let Err(error) = validate(&name, &config) {
            merged.errors.push(SourceError { source, error });
            continue;
        }
        match decision {
            TrustDecision::Awaiting { changed } => merged.awaiting.push(AwaitingApproval {
                server: name,
                source,
                config_hash: hash,
                changed,
            }),
            TrustDecision::Approved { by } => {
                if by != ApprovedBy::UserLevel {
                    merged.approved.push(Approved {
                        server: name.clone(),
                        by,
                    });
                }
                merged.servers.push(ServerSpec {
                    name,
                    config,
                    source,
                });
            }
            TrustDecision::Rejected { .. } => {}
        }
    }
    merged
}
