//! Config discovery: find the MCP config files of every client we understand (Switchboard,
//! Claude Code, Codex, Gemini CLI, Cursor, Windsurf, VS Code), read them, and hand their text
//! to the pure parser and merger in [`switchboard_core::config`].
//!
//! Everything that decides anything (formats, precedence, filters) lives in the core; this
//! module only knows where the files are. A missing file is skipped silently; a file that
//! cannot be read or parsed is one error entry and everything else still loads.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use switchboard_core::config::{
    codex_project_trust, gemini_folder_trust, merge, parse_claude_json, parse_claude_settings,
    parse_document, Approvals, Approved, AwaitingApproval, ClaudeSettings, ConfigError, DenyList,
    FilterOptions, ParsedDocument, ServerSpec, Shadowed, Skipped, Source, SourceError, SourceLevel,
    SourceMeta,
};

/// Where to look and what to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryOptions {
    /// The project (working) directory. It must exist: if it does not, discovery fails as a
    /// whole (no servers, one error).
    pub project_dir: PathBuf,
    /// The user's home directory; `None` skips every user-level file.
    pub home_dir: Option<PathBuf>,
    /// `false` ignores project-level files: they are not even read, so a broken file in a
    /// repository you opted out of reports nothing.
    pub project_configs: bool,
    /// When non-empty, these files replace discovery entirely, in this priority order
    /// (provider `switchboard`, level user). A missing explicit file is an error. A file
    /// named `.claude.json` is read as Claude Code's (provider `claude-code`): its top-level
    /// `mcpServers` and `projects["<project_dir>"].mcpServers`.
    pub explicit_files: Vec<PathBuf>,
    /// Server names and URLs never to run (they are reported as skipped).
    pub deny: DenyList,
    /// Approve every project-level server for this discovery (for scripts that vouch for
    /// the checkout); a client's rejection still wins. Off: a project-level server runs only
    /// when approved ([`Discovered::awaiting`] lists the others).
    pub trust_project: bool,
    /// Switchboard's approvals file ([`TrustStore`](crate::TrustStore)); `None` reads none.
    pub trust_store: Option<PathBuf>,
}

impl DiscoveryOptions {
    /// Discover for `project_dir`, with the home directory from `$HOME` (`%USERPROFILE%` on
    /// Windows) and project configs on.
    pub fn new(project_dir: impl Into<PathBuf>) -> Self {
        let home_dir = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        DiscoveryOptions {
            project_dir: project_dir.into(),
            home_dir,
            project_configs: true,
            explicit_files: Vec::new(),
            deny: DenyList::default(),
            trust_project: false,
            trust_store: crate::TrustStore::default_path(),
        }
    }
}

impl DiscoveryOptions {
    /// The project as clients and approvals key it: the real (canonical) path of the project
    /// directory, as text.
    pub fn project_key(&self) -> String {
        std::fs::canonicalize(&self.project_dir)
            .unwrap_or_else(|_| self.project_dir.clone())
            .to_string_lossy()
            .into_owned()
    }
}

/// The result of [`discover`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Discovered {
    /// Servers to run, sorted by name.
    pub servers: Vec<ServerSpec>,
    /// Entries that lost to an earlier source naming the same server.
    pub shadowed: Vec<Shadowed>,
    /// Disabled, denied, or project-level with project configs off.
    pub skipped: Vec<Skipped>,
    /// Each names its file ([`SourceError::source`]); syntax errors carry line and column.
    /// When discovery fails as a whole (see [`discover`]), the one error saying why.
    pub errors: Vec<SourceError>,
    /// Every file that was read (whether or not it parsed), in priority order, then the
    /// approval files.
    pub files_read: Vec<PathBuf>,
    /// Valid project-level servers nothing has approved: they are not in `servers`. The
    /// embedder decides (the CLI: `switchboard trust`); each carries the hash to approve.
    pub awaiting: Vec<AwaitingApproval>,
    /// The project-level servers in `servers`, with what approved each.
    pub approved: Vec<Approved>,
}

/// How a candidate file is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Document,
    /// Claude Code's `~/.claude.json`: user servers plus per-project ("local") servers.
    ClaudeJson,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Candidate {
    path: PathBuf,
    provider: &'static str,
    level: SourceLevel,
    shape: Shape,
}

/// The files discovery looks at, highest priority first.
///
/// `~/.claude.json` is user level, including its `projects["<dir>"].mcpServers` (Claude's
/// "local" scope): those entries were written by the user on this machine, not checked into
/// the repository, so switching project configs off (a guard against untrusted repositories)
/// does not drop them. Within the file the project entries come first, as in Claude Code.
fn candidates(opts: &DiscoveryOptions) -> Vec<Candidate> {
    if !opts.explicit_files.is_empty() {
        return opts
            .explicit_files
            .iter()
            .map(|path| {
                let claude = path.file_name().is_some_and(|n| n == ".claude.json");
                Candidate {
                    path: path.clone(),
                    provider: if claude { "claude-code" } else { "switchboard" },
                    level: SourceLevel::User,
                    shape: if claude {
                        Shape::ClaudeJson
                    } else {
                        Shape::Document
                    },
                }
            })
            .collect();
    }
    use SourceLevel::{Project, User};
    let project = |rel: &str, provider| Some((opts.project_dir.join(rel), provider, Project));
    let home = |rel: &str, provider| {
        opts.home_dir
            .as_ref()
            .map(|h| (h.join(rel), provider, User))
    };
    [
        project(".switchboard/mcp.json", "switchboard"),
        home(".config/switchboard/mcp.json", "switchboard"),
        project(".mcp.json", "claude-code"),
        home(".claude.json", "claude-code"),
        project(".codex/config.toml", "codex"),
        home(".codex/config.toml", "codex"),
        project(".gemini/settings.json", "gemini"),
        home(".gemini/settings.json", "gemini"),
        project(".cursor/mcp.json", "cursor"),
        home(".cursor/mcp.json", "cursor"),
        home(".codeium/windsurf/mcp_config.json", "windsurf"),
        project(".vscode/mcp.json", "vscode"),
    ]
    .into_iter()
    .flatten()
    .filter(|(_, _, level)| *level == User || opts.project_configs)
    .map(|(path, provider, level)| Candidate {
        shape: if path.ends_with(".claude.json") {
            Shape::ClaudeJson
        } else {
            Shape::Document
        },
        path,
        provider,
        level,
    })
    .collect()
}

/// Find, read, parse and merge every config file (see [`DiscoveryOptions`] for the order).
///
/// A file that cannot be read or parsed is one error and the rest still loads. Discovery
/// fails as a whole — no servers and one error — when the project directory is not a
/// directory, or if discovery itself breaks (a panic).
pub fn discover(opts: &DiscoveryOptions) -> Discovered {
    let failed = |message: String| {
        let path = opts.project_dir.to_string_lossy().into_owned();
        Discovered {
            errors: vec![SourceError {
                source: SourceMeta {
                    provider: "switchboard".to_string(),
                    level: SourceLevel::Project,
                    path: path.clone(),
                },
                error: ConfigError::Document {
                    path,
                    message: format!("config discovery failed: {message}"),
                },
            }],
            ..Discovered::default()
        }
    };
    match std::fs::metadata(&opts.project_dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return failed("the project directory is not a directory".into()),
        Err(e) => return failed(format!("cannot open the project directory: {e}")),
    }
    match std::panic::catch_unwind(|| discover_files(opts)) {
        Ok(found) => found,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            failed(what)
        }
    }
}

fn discover_files(opts: &DiscoveryOptions) -> Discovered {
    let explicit = !opts.explicit_files.is_empty();
    let project_key = opts.project_key();
    let mut found = Discovered::default();
    let mut sources = Vec::new();
    // `~/.claude.json`'s entry for this project: approvals the user gave in Claude Code.
    let mut claude_project = ClaudeSettings::default();
    for candidate in candidates(opts) {
        let meta = SourceMeta {
            provider: candidate.provider.to_string(),
            level: candidate.level,
            path: candidate.path.to_string_lossy().into_owned(),
        };
        let text = match read(&candidate.path, explicit) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(message) => {
                found.errors.push(SourceError {
                    error: ConfigError::Document {
                        path: meta.path.clone(),
                        message,
                    },
                    source: meta,
                });
                continue;
            }
        };
        found.files_read.push(candidate.path.clone());
        let parsed: Result<Vec<ParsedDocument>, ConfigError> = match candidate.shape {
            Shape::Document => parse_document(&meta.path, &text).map(|doc| vec![doc]),
            Shape::ClaudeJson => {
                parse_claude_json(&meta.path, &text, Some(&project_key)).map(|claude| {
                    claude_project = claude.project_settings;
                    vec![claude.project, claude.user]
                })
            }
        };
        match parsed {
            Ok(docs) => {
                for doc in docs {
                    sources.push(Source::from_document(meta.clone(), doc));
                }
            }
            Err(error) => found.errors.push(SourceError {
                source: meta,
                error,
            }),
        }
    }
    let approvals = if explicit || !opts.project_configs {
        // Every source is user level: nothing to approve.
        Approvals::default()
    } else {
        approvals(opts, &project_key, claude_project, &mut found)
    };
    let merged = merge(
        sources,
        &FilterOptions {
            project_configs: opts.project_configs,
            deny: opts.deny.clone(),
            approvals,
        },
    );
    found.servers = merged.servers;
    found.shadowed = merged.shadowed;
    found.skipped = merged.skipped;
    found.errors.extend(merged.errors);
    found.awaiting = merged.awaiting;
    found.approved = merged.approved;
    found
}

/// Gather what approves or rejects project-level servers: `--trust-project`, Switchboard's
/// store, Claude Code's `~/.claude.json` project entry and settings files, Codex's trusted
/// projects and Gemini CLI's trusted folders. A file that cannot be read is one error (and
/// approves nothing).
fn approvals(
    opts: &DiscoveryOptions,
    project_key: &str,
    claude_project: ClaudeSettings,
    found: &mut Discovered,
) -> Approvals {
    let mut approvals = Approvals {
        trust_project: opts.trust_project,
        ..Approvals::default()
    };
    let error = |found: &mut Discovered, path: &Path, provider: &str, error: ConfigError| {
        found.errors.push(SourceError {
            source: SourceMeta {
                provider: provider.to_string(),
                level: SourceLevel::User,
                path: path.to_string_lossy().into_owned(),
            },
            error,
        })
    };
    if let Some(store) = &opts.trust_store {
        match crate::TrustStore::new(store).approvals(project_key) {
            Ok(approved) => {
                approvals.approved = approved
                    .into_iter()
                    .map(|(name, entry)| (name, entry.config_hash))
                    .collect();
            }
            Err(e) => {
                let doc = ConfigError::Document {
                    path: store.to_string_lossy().into_owned(),
                    message: format!("cannot read the approvals: {e}"),
                };
                error(found, store, "switchboard", doc);
            }
        }
    }
    // Read one approval file: its text, or `None` when absent (a read error is reported).
    let text_of = |found: &mut Discovered, path: &Path, provider: &str| -> Option<String> {
        match read(path, false) {
            Ok(Some(text)) => {
                found.files_read.push(path.to_path_buf());
                Some(text)
            }
            Ok(None) => None,
            Err(message) => {
                let path_text = path.to_string_lossy().into_owned();
                let doc = ConfigError::Document {
                    path: path_text,
                    message,
                };
                error(found, path, provider, doc);
                None
            }
        }
    };
    // A project's own Claude settings approve only in a folder the user trusted in Claude
    // Code (a repository must not approve itself); their rejections always count.
    let folder_trusted = claude_project.folder_trusted;
    approvals.claude.add(claude_project, true);
    let mut claude_files = Vec::new();
    if let Some(home) = &opts.home_dir {
        claude_files.push((home.join(".claude/settings.json"), true));
    }
    for rel in [".claude/settings.json", ".claude/settings.local.json"] {
        claude_files.push((opts.project_dir.join(rel), folder_trusted));
    }
    for (path, approves) in claude_files {
        if let Some(text) = text_of(found, &path, "claude-code") {
            match parse_claude_settings(&path.to_string_lossy(), &text) {
                Ok(settings) => approvals.claude.add(settings, approves),
                Err(e) => error(found, &path, "claude-code", e),
            }
        }
    }
    if let Some(home) = &opts.home_dir {
        let codex = home.join(".codex/config.toml");
        // Already read as a config source; read again for its `projects` table.
        if let Ok(Some(text)) = read(&codex, false) {
            // A syntax error is already reported with its servers.
            if let Ok(trust) = codex_project_trust(&codex.to_string_lossy(), &text, project_key) {
                approvals.codex = trust;
            }
        }
        let gemini = home.join(".gemini/trustedFolders.json");
        if let Some(text) = text_of(found, &gemini, "gemini") {
            match gemini_folder_trust(&gemini.to_string_lossy(), &text, project_key) {
                Ok(trust) => approvals.gemini = trust,
                Err(e) => error(found, &gemini, "gemini", e),
            }
        }
    }
    approvals
}

/// The file's text; `None` when it does not exist (and was not asked for explicitly).
fn read(path: &Path, explicit: bool) -> Result<Option<String>, String> {
    match crate::files::read_regular(path, crate::files::MAX_CONFIG_BYTES) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| format!("not valid UTF-8 (at byte {})", e.utf8_error().valid_up_to())),
        Err(e)
            if !explicit && matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) =>
        {
            Ok(None)
        }
        Err(e) => Err(format!("cannot read: {e}")),
    }
}
