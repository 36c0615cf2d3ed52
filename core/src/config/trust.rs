//! Trust: a project-level config comes with a checkout, so a server it names does not start
//! until the user approved it. User-level files are the user's own and need no approval.
//!
//! The decision is made here, from approvals the shell gathers ([`Approvals`]): Switchboard's
//! own (the `--trust-project` switch, and per-server approvals bound to the config hash, so
//! an edited entry needs approval again) and each client's own state where it keeps one
//! (Claude Code's `enableAllProjectMcpServers`, `enabledMcpjsonServers`,
//! `disabledMcpjsonServers` and `disabledMcpServers`; Codex's trusted projects; Gemini CLI's
//! trusted folders). A client's rejection always wins over any approval. [`merge`](super::merge)
//! runs approved servers, reports rejected ones as skipped and the rest as
//! [`AwaitingApproval`] for the embedder to decide.
//!
//! The readers of the clients' approval files are here too (pure: the shell passes the text).

use super::codex::parse_toml_root;
use super::jsonc::strip_jsonc;
use super::{ConfigError, SourceLevel, SourceMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A client's verdict on a whole project folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FolderTrust {
    /// The user marked the folder trusted in that client.
    Trusted,
    /// The user marked it untrusted: that client loads nothing from it.
    Untrusted,
}

/// Claude Code's approval state for the project's `.mcp.json` servers, gathered from
/// `~/.claude.json` (`projects["<dir>"]`) and its settings files.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClaudeApprovals {
    /// `enableAllProjectMcpServers: true`: every `.mcp.json` server is approved.
    pub enable_all: bool,
    /// `enabledMcpjsonServers`: these `.mcp.json` servers are approved.
    pub enabled: BTreeSet<String>,
    /// `disabledMcpjsonServers`: these `.mcp.json` servers are rejected, whatever approves them.
    pub rejected: BTreeSet<String>,
    /// `projects["<dir>"].disabledMcpServers`: these Claude Code servers (any scope) are
    /// switched off in this project.
    pub disabled: BTreeSet<String>,
}

impl ClaudeApprovals {
    /// Add what one settings file says. `approvals` is `false` for a file whose approvals do
    /// not count (a project's own settings in a folder Claude Code has not trusted): its
    /// rejections still do.
    pub fn add(&mut self, settings: ClaudeSettings, approvals: bool) {
        if approvals {
            self.enable_all |= settings.enable_all;
            self.enabled.extend(settings.enabled);
        }
        self.rejected.extend(settings.rejected);
        self.disabled.extend(settings.disabled);
    }
}

/// The approval keys of one Claude Code settings file (or of one `~/.claude.json` project
/// entry).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ClaudeSettings {
    /// `enableAllProjectMcpServers`.
    pub enable_all: bool,
    /// `enabledMcpjsonServers`.
    pub enabled: Vec<String>,
    /// `disabledMcpjsonServers`.
    pub rejected: Vec<String>,
    /// `disabledMcpServers`.
    pub disabled: Vec<String>,
    /// `hasTrustDialogAccepted` (only in `~/.claude.json` project entries): the user trusted
    /// the folder in Claude Code.
    pub folder_trusted: bool,
}

/// Everything that can approve or reject a project-level server.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Approvals {
    /// Approve every project-level server (the `--trust-project` switch, for scripts that
    /// vouch for the checkout). Clients' rejections still win.
    pub trust_project: bool,
    /// Switchboard's own approvals for this project: server name → the config hash approved.
    pub approved: BTreeMap<String, String>,
    /// Claude Code's state, for `claude-code` sources.
    pub claude: ClaudeApprovals,
    /// Codex's `projects."<dir>".trust_level`, for `codex` project sources.
    pub codex: Option<FolderTrust>,
    /// Gemini CLI's trusted folders, for `gemini` project sources.
    pub gemini: Option<FolderTrust>,
    /// Clients' rules that switch servers off at any level (Gemini CLI's allow and exclude
    /// lists and enablement files, Claude Code's managed controls).
    #[serde(default)]
    pub policies: super::ClientPolicies,
}

/// Why a server may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovedBy {
    /// A user-level file: the user's own, no approval needed.
    UserLevel,
    /// `--trust-project`.
    TrustProject,
    /// `switchboard trust`, for this very config.
    Switchboard,
    /// Claude Code's `enableAllProjectMcpServers`.
    ClaudeEnableAll,
    /// Claude Code's `enabledMcpjsonServers`.
    ClaudeEnabled,
    /// Codex trusts the project.
    CodexTrustedProject,
    /// Gemini CLI trusts the folder.
    GeminiTrustedFolder,
}

impl ApprovedBy {
    /// How a report names it.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovedBy::UserLevel => "user-level file",
            ApprovedBy::TrustProject => "--trust-project",
            ApprovedBy::Switchboard => "switchboard trust",
            ApprovedBy::ClaudeEnableAll => "Claude Code enableAllProjectMcpServers",
            ApprovedBy::ClaudeEnabled => "Claude Code enabledMcpjsonServers",
            ApprovedBy::CodexTrustedProject => "Codex trusted project",
            ApprovedBy::GeminiTrustedFolder => "Gemini trusted folder",
        }
    }
}

/// Which client's state rejected a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectedBy {
    /// Claude Code's `disabledMcpjsonServers`.
    ClaudeDisabledMcpjsonServers,
    /// Claude Code's `projects["<dir>"].disabledMcpServers`.
    ClaudeDisabledMcpServers,
    /// Codex marks the project untrusted (it reads no project config there).
    CodexUntrustedProject,
    /// Gemini CLI marks the folder untrusted (it connects no project server there).
    GeminiUntrustedFolder,
    /// Gemini CLI's `mcp.allowed` is set and does not name it.
    GeminiNotAllowed,
    /// Gemini CLI's `mcp.excluded` names it.
    GeminiExcluded,
    /// Gemini CLI's `mcp-server-enablement.json` switches it off (`gemini mcp disable`).
    GeminiDisabled,
    /// It comes from a Gemini CLI extension switched off for this directory.
    GeminiExtensionDisabled,
    /// A system `managed-mcp.json` takes exclusive control of Claude Code's servers.
    ClaudeManagedMcpOnly,
    /// Claude Code's `deniedMcpServers` matches it.
    ClaudeDeniedMcpServers,
    /// Claude Code's `allowedMcpServers` is set and does not match it.
    ClaudeNotInAllowedMcpServers,
}

impl RejectedBy {
    /// Whether the rejection means the client does not read the entry's file at all (so a
    /// lower source of the same name is what that client uses), rather than switching one
    /// server off.
    pub fn file_unread(self) -> bool {
        matches!(
            self,
            RejectedBy::CodexUntrustedProject | RejectedBy::GeminiUntrustedFolder
        )
    }

    /// How a report names it.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectedBy::ClaudeDisabledMcpjsonServers => "Claude Code disabledMcpjsonServers",
            RejectedBy::ClaudeDisabledMcpServers => "Claude Code disabledMcpServers",
            RejectedBy::CodexUntrustedProject => "Codex untrusted project",
            RejectedBy::GeminiUntrustedFolder => "Gemini untrusted folder",
            RejectedBy::GeminiNotAllowed => "not in Gemini mcp.allowed",
            RejectedBy::GeminiExcluded => "Gemini mcp.excluded",
            RejectedBy::GeminiDisabled => "Gemini mcp-server-enablement.json",
            RejectedBy::GeminiExtensionDisabled => "Gemini extension disabled here",
            RejectedBy::ClaudeManagedMcpOnly => "Claude Code managed-mcp.json",
            RejectedBy::ClaudeDeniedMcpServers => "Claude Code deniedMcpServers",
            RejectedBy::ClaudeNotInAllowedMcpServers => "not in Claude Code allowedMcpServers",
        }
    }
}

/// The verdict on one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "trust", rename_all = "snake_case")]
pub enum TrustDecision {
    /// It may start.
    Approved {
        /// What approved it.
        by: ApprovedBy,
    },
    /// A client's own state says no.
    Rejected {
        /// Whose state.
        by: RejectedBy,
    },
    /// Nothing approved it yet.
    Awaiting {
        /// Switchboard approved this server with another config: it was edited since.
        changed: bool,
    },
}

/// A project-level server that does not start until it is approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AwaitingApproval {
    /// The server's name.
    pub server: String,
    /// The file naming it.
    pub source: SourceMeta,
    /// The hash an approval binds to ([`config_hash`](super::config_hash) of the entry).
    pub config_hash: String,
    /// It was approved before, with a config that has changed since.
    pub changed: bool,
}

/// A project-level server that runs, and what approved it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approved {
    /// The server's name.
    pub server: String,
    /// What approved it.
    pub by: ApprovedBy,
}

impl Approvals {
    /// The verdict on server `name` from `source`, whose config hashes to `hash`.
    pub fn decide(&self, name: &str, source: &SourceMeta, hash: &str) -> TrustDecision {
        let provider = source.provider.as_str();
        if provider == "claude-code" && self.claude.disabled.contains(name) {
            return TrustDecision::Rejected {
                by: RejectedBy::ClaudeDisabledMcpServers,
            };
        }
        if source.level == SourceLevel::User {
            return TrustDecision::Approved {
                by: ApprovedBy::UserLevel,
            };
        }
        let rejected = match provider {
            "claude-code" if self.claude.rejected.contains(name) => {
                Some(RejectedBy::ClaudeDisabledMcpjsonServers)
            }
            "codex" if self.codex == Some(FolderTrust::Untrusted) => {
                Some(RejectedBy::CodexUntrustedProject)
            }
            "gemini" if self.gemini == Some(FolderTrust::Untrusted) => {
                Some(RejectedBy::GeminiUntrustedFolder)
            }
            _ => None,
        };
        if let Some(by) = rejected {
            return TrustDecision::Rejected { by };
        }
        let approved = |by| TrustDecision::Approved { by };
        if self.trust_project {
            return approved(ApprovedBy::TrustProject);
        }
        let stored = self.approved.get(name);
        if stored.is_some_and(|h| h == hash) {
            return approved(ApprovedBy::Switchboard);
        }
        match provider {
            "claude-code" if self.claude.enable_all => {
                return approved(ApprovedBy::ClaudeEnableAll)
            }
            "claude-code" if self.claude.enabled.contains(name) => {
                return approved(ApprovedBy::ClaudeEnabled)
            }
            "codex" if self.codex == Some(FolderTrust::Trusted) => {
                return approved(ApprovedBy::CodexTrustedProject)
            }
            "gemini" if self.gemini == Some(FolderTrust::Trusted) => {
                return approved(ApprovedBy::GeminiTrustedFolder)
            }
            _ => {}
        }
        TrustDecision::Awaiting {
            changed: stored.is_some(),
        }
    }
}

/// Read the approval keys of a Claude Code settings file (`~/.claude/settings.json`,
/// `.claude/settings.json`, `.claude/settings.local.json`). Keys of the wrong type are an
/// error naming the key: a rejection list that cannot be read must not be silently ignored.
pub fn parse_claude_settings(path: &str, text: &str) -> Result<ClaudeSettings, ConfigError> {
    match json_root(path, text)? {
        Some(root) => claude_settings_of(path, &root),
        None => Ok(ClaudeSettings::default()),
    }
}

/// The approval keys of one JSON object (a settings file, or a `~/.claude.json` project entry).
pub(super) fn claude_settings_of(
    path: &str,
    obj: &serde_json::Map<String, Value>,
) -> Result<ClaudeSettings, ConfigError> {
    let list = |key: &str| -> Result<Vec<String>, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad(path, key, "an array of server names")),
            Some(_) => Err(bad(path, key, "an array of server names")),
        }
    };
    let flag = |key: &str| -> Result<bool, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(path, key, "true or false")),
        }
    };
    Ok(ClaudeSettings {
        enable_all: flag("enableAllProjectMcpServers")?,
        enabled: list("enabledMcpjsonServers")?,
        rejected: list("disabledMcpjsonServers")?,
        disabled: list("disabledMcpServers")?,
        folder_trusted: flag("hasTrustDialogAccepted")?,
    })
}

fn bad(path: &str, key: &str, want: &str) -> ConfigError {
    ConfigError::Document {
        path: path.to_string(),
        message: format!("\"{key}\" must be {want}"),
    }
}

pub(super) fn json_root(
    path: &str,
    text: &str,
) -> Result<Option<serde_json::Map<String, Value>>, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(&strip_jsonc(text)).map_err(|e| {
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        ConfigError::Syntax {
            path: path.to_string(),
            line: e.line().max(1),
            column: e.column().max(1),
            message: full.strip_suffix(&suffix).unwrap_or(&full).to_string(),
        }
    })?;
    match value {
        Value::Object(map) => Ok(Some(map)),
        _ => Err(ConfigError::Document {
            path: path.to_string(),
            message: "the top level must be an object".into(),
        }),
    }
}

/// `dir` is `root` or lies inside it (plain path text, `/` or `\` separators, trailing
/// separators ignored).
fn within(dir: &str, root: &str) -> bool {
    let norm = |s: &str| {
        let s = s.replace('\\', "/");
        match s.trim_end_matches('/') {
            "" => "/".to_string(),
            t => t.to_string(),
        }
    };
    let (dir, root) = (norm(dir), norm(root));
    dir == root || root == "/" || dir.starts_with(&format!("{root}/"))
}

/// The path of `dir`'s parent (plain path text).
fn parent(dir: &str) -> String {
    let d = dir.trim_end_matches(['/', '\\']);
    match d.rfind(['/', '\\']) {
        Some(0) => "/".to_string(),
        Some(i) => d[..i].to_string(),
        None => d.to_string(),
    }
}

/// Codex's trust in `project_dir`, from `~/.codex/config.toml`'s
/// `[projects."<path>"] trust_level`: the entry for the project directory or its nearest
/// listed ancestor decides.
pub fn codex_project_trust(
    path: &str,
    text: &str,
    project_dir: &str,
) -> Result<Option<FolderTrust>, ConfigError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let root = parse_toml_root(path, text)?;
    let Some(Value::Object(projects)) = root.get("projects") else {
        return Ok(None);
    };
    let rules = projects.iter().filter_map(|(dir, entry)| {
        let level = entry.get("trust_level")?.as_str()?;
        let trust = match level {
            "trusted" => FolderTrust::Trusted,
            "untrusted" => FolderTrust::Untrusted,
            _ => return None,
        };
        Some((dir.clone(), trust))
    });
    Ok(nearest(rules, project_dir))
}

/// Gemini CLI's trust in `project_dir`, from `~/.gemini/trustedFolders.json`
/// (`{"<path>": "TRUST_FOLDER" | "TRUST_PARENT" | "DO_NOT_TRUST"}`; `TRUST_PARENT` trusts the
/// path's parent): the most specific rule containing the project decides.
pub fn gemini_folder_trust(
    path: &str,
    text: &str,
    project_dir: &str,
) -> Result<Option<FolderTrust>, ConfigError> {
    let Some(root) = json_root(path, text)? else {
        return Ok(None);
    };
    let rules = root
        .iter()
        .filter_map(|(dir, level)| match level.as_str()? {
            "TRUST_FOLDER" => Some((dir.clone(), FolderTrust::Trusted)),
            "TRUST_PARENT" => Some((parent(dir), FolderTrust::Trusted)),
            "DO_NOT_TRUST" => Some((dir.clone(), FolderTrust::Untrusted)),
            _ => None,
        });
    Ok(nearest(rules, project_dir))
}

/// The verdict of the longest rule path containing `dir`; on a tie, untrusted wins.
fn nearest(rules: impl Iterator<Item = (String, FolderTrust)>, dir: &str) -> Option<FolderTrust> {
    rules
        .filter(|(root, _)| within(dir, root))
        .map(|(root, trust)| {
            let depth = root.trim_end_matches(['/', '\\']).len();
            // `Untrusted` sorts after `Trusted`: on equal depth it is the maximum.
            (depth, trust)
        })
        .max()
        .map(|(_, trust)| trust)
}
