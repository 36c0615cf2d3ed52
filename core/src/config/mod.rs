//! MCP server configuration: the document formats, validation, `${VAR}` expansion, merging of
//! sources by priority, filters, and the stable config hash used as the tool-cache key.
//!
//! Pure: the shell reads files and passes their text and path in; the environment used for
//! expansion is a map the caller passes, never the process environment.
//!
//! The pipeline: [`parse_document`] (or [`parse_claude_json`]) turns one file's text into a
//! [`ParsedDocument`] — the entries that parsed plus one error per entry that did not, so one
//! typo never hides a whole file. The shell wraps each in a [`Source`] with its
//! [`SourceMeta`], in priority order, and [`merge`] picks the first source naming each server,
//! applies the [`FilterOptions`], validates, and reports everything it did not run
//! ([`Merged::shadowed`], [`Merged::skipped`], [`Merged::errors`]).
//!
//! The parts, each in its own file: the model ([`ServerConfig`] as written, [`ServerSpec`],
//! the resolved [`TransportConfig`], [`ConfigError`]); document parsing (JSON and JSONC in the
//! client dialects, Codex TOML, Claude Code's `~/.claude.json`) and the reading of one entry's
//! fields with every client's aliases; validation and resolution; `${VAR}` expansion; the
//! config hash; deny-list filters; and the merge of sources by precedence.

mod codex;
mod credentials;
mod document;
mod entry;
mod expand;
mod filter;
mod hash;
mod interpolate;
mod jsonc;
mod merge;
mod model;
mod oauth;
mod plugins;
mod policy;
mod trust;
mod validate;
mod yaml;

pub use document::{
    parse_claude_json, parse_document, parse_document_as, parse_layer_over, ClaudeJson, Dialect,
    ParsedDocument,
};
pub use expand::expand_vars;
pub use filter::{glob_match, DenyList, FilterOptions};
pub use hash::config_hash;
pub use interpolate::{
    interpolate, parse_env_file, ConfigWarning, InputSpec, Interpolated, InterpolationContext,
    Syntax, WarningKind,
};
pub use merge::{merge, Merged, Shadowed, SkipReason, Skipped, Source, SourceError, OWN_PROVIDER};
pub use model::{
    ConfigError, ReadValues, ServerConfig, ServerSpec, SourceLevel, SourceMeta, TransportConfig,
    TransportKind, DEFAULT_CONNECT_TIMEOUT,
};
pub use oauth::{oauth_config, OAuthConfig, PrivateKey};
pub use plugins::{
    parse_enabled_plugins, parse_installed_plugins, parse_plugin_manifest, InstalledPlugin,
    PluginManifest,
};
pub use policy::{
    gemini_disabled_servers, gemini_server_lists, parse_claude_policy, ClaudePolicy,
    ClaudePolicySettings, ClientPolicies, GeminiExtensionEnablement, GeminiPolicy, ServerRule,
};
pub use trust::{
    codex_project_trust, gemini_folder_trust, parse_claude_settings, Approvals, Approved,
    ApprovedBy, AwaitingApproval, ClaudeApprovals, ClaudeSettings, FolderTrust, RejectedBy,
    TrustDecision,
};
pub use validate::{resolve, valid_server_name, validate};

#[cfg(test)]
mod interpolate_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trust_tests;
