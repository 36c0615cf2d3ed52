//! Config discovery: find the MCP config files of every client we understand (Switchboard,
//! Claude Code, Codex, Gemini CLI, Cursor, Windsurf, VS Code), read them, and hand their text
//! to the pure parser and merger in [`switchboard_core::config`].
//!
//! Everything that decides anything (formats, precedence, filters) lives in the core; this
//! module only knows where the files are. A missing file is skipped silently; a file that
//! cannot be read or parsed is one error entry and everything else still loads.

mod clients;

use clients::PluginFile;
use clients::{claude_managed_dir, claude_plugin_files, gemini_extensions, gemini_system_files};
use clients::{policies, system_root};
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use switchboard_core::config::{
    codex_project_trust, gemini_folder_trust, interpolate, merge, parse_claude_json,
    parse_claude_settings, parse_document_as, parse_layer_over, Approvals, Approved,
    AwaitingApproval, ClaudeSettings, ConfigError, ConfigWarning, DenyList, Dialect, FilterOptions,
    InputSpec, InterpolationContext, ParsedDocument, ServerSpec, Shadowed, Skipped, SourceError,
    SourceLevel, SourceMeta,
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
    /// The environment: where some clients' files are (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
    /// `COPILOT_HOME`, `XDG_CONFIG_HOME`, `CLINE_*`), and what each client's variables
    /// expand to (an unset or empty one is a warning).
    pub env: BTreeMap<String, String>,
    /// Answers to VS Code `${input:id}` prompts, by id. A server whose input has no answer
    /// is an error, and its input is listed in [`Discovered::inputs_needed`].
    pub inputs: BTreeMap<String, String>,
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
            env: std::env::vars().collect(),
            inputs: BTreeMap::new(),
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
    /// Every file looked at, found or not, in priority order.
    pub looked_at: Vec<LookedAt>,
    /// What is not applied as written: variables that expand to nothing or are kept as
    /// written, fields read but not applied.
    pub warnings: Vec<ConfigWarning>,
    /// VS Code `inputs` that servers need and [`DiscoveryOptions::inputs`] does not answer.
    pub inputs_needed: Vec<InputSpec>,
    /// The values the manager's variables must hold besides the environment (see
    /// [`Variables`]): the library adds them; an embedder that builds with
    /// `Builder::servers` adds them to `Builder::env`.
    pub variables: Variables,
    /// The other files what discovery found depends on, found or not: the `envFile` and
    /// `${file:…}` files the entries read, Switchboard's approvals file and every other
    /// approval or policy file it looked for. With [`files_read`](Self::files_read) and
    /// [`looked_at`](Self::looked_at), what a watcher watches (`serve` re-discovers when one
    /// changes: a value file changed restarts its server, an approval starts one).
    pub depends_on: Vec<PathBuf>,
}

/// How a candidate file is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Document(Dialect),
    /// Claude Code's `~/.claude.json`, its `projects["<dir>"].mcpServers` ("local" scope,
    /// which wins over `.mcp.json`) and its project's approval keys.
    ClaudeLocal,
    /// Claude Code's `~/.claude.json`, its top-level `mcpServers` ("user" scope).
    ClaudeUser,
    /// One layer of a client whose files merge key by key: each entry is merged with the
    /// same entry in the lower-priority candidates of the same [`Layers`].
    Layered(Dialect, Layers),
}

/// The clients whose layers merge key by key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layers {
    Codex,
    Opencode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Candidate {
    path: PathBuf,
    provider: &'static str,
    level: SourceLevel,
    shape: Shape,
}

/// A file discovery looked at, whether or not it was there.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LookedAt {
    /// Where it looked.
    pub source: SourceMeta,
    /// The file exists (it may still have failed to read or parse: see the errors).
    pub found: bool,
}

/// The variables the manager needs besides the environment: answers to `${input:id}`
/// (`input:<id>`) and the text of `${file:…}` files (`file:<path>`). Their values are never
/// shown.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Variables(pub BTreeMap<String, String>);

impl std::fmt::Debug for Variables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// The directory of VS Code's user settings (`mcp.json`, `settings.json`, and extensions'
/// `globalStorage`).
fn vscode_user_dir(home: &Path) -> PathBuf {
    if cfg!(target_os = "macos") {
        home.join("Library/Application Support/Code/User")
    } else if cfg!(windows) {
        home.join("AppData/Roaming/Code/User")
    } else {
        home.join(".config/Code/User")
    }
}

/// The files discovery looks at, highest priority first: per client its project file, then
/// its user file, and the clients in the order of the README's precedence table.
///
/// `~/.claude.json` is user level, including its `projects["<dir>"].mcpServers` (Claude's
/// "local" scope): those entries were written by the user on this machine, not checked into
/// the repository, so switching project configs off (a guard against untrusted repositories)
/// does not drop them. As in Claude Code, local entries win over `.mcp.json`, which wins over
/// the user entries.
fn candidates(opts: &DiscoveryOptions, plugins: &[PluginFile]) -> Vec<Candidate> {
    if !opts.explicit_files.is_empty() {
        return opts
            .explicit_files
            .iter()
            .flat_map(|path| {
                let claude = path.file_name().is_some_and(|n| n == ".claude.json");
                let shapes = if claude {
                    vec![Shape::ClaudeLocal, Shape::ClaudeUser]
                } else {
                    vec![Shape::Document(Dialect::from_path(&path.to_string_lossy()))]
                };
                shapes.into_iter().map(move |shape| Candidate {
                    path: path.clone(),
                    provider: if claude { "claude-code" } else { "switchboard" },
                    level: SourceLevel::User,
                    shape,
                })
            })
            .collect();
    }
    use SourceLevel::{Project, User};
    let env = |name: &str| {
        opts.env
            .get(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut list: Vec<(PathBuf, &'static str, SourceLevel, Shape)> = Vec::new();
    let json = Shape::Document(Dialect::Json);
    // Claude Code's system-wide file: when it exists, it alone configures Claude Code.
    list.push((
        claude_managed_dir(opts).join("managed-mcp.json"),
        "claude-code",
        User,
        json,
    ));
    let p = |rel: &str| opts.project_dir.join(rel);
    list.push((p(".switchboard/mcp.json"), "switchboard", Project, json));
    let home = opts.home_dir.clone();
    let h = |rel: &str| home.as_ref().map(|h| h.join(rel));
    let config_home = env("XDG_CONFIG_HOME").or_else(|| h(".config"));
    if let Some(path) = h(".config/switchboard/mcp.json") {
        list.push((path, "switchboard", User, json));
    }
    // Claude Code: `$CLAUDE_CONFIG_DIR/.claude.json` replaces `~/.claude.json`.
    let claude_json = env("CLAUDE_CONFIG_DIR")
        .map(|d| d.join(".claude.json"))
        .or_else(|| h(".claude.json"));
    if let Some(path) = &claude_json {
        list.push((path.clone(), "claude-code", User, Shape::ClaudeLocal));
    }
    list.push((p(".mcp.json"), "claude-code", Project, json));
    if let Some(path) = claude_json {
        list.push((path, "claude-code", User, Shape::ClaudeUser));
    }
    // Servers of enabled Claude Code plugins: below every scope of Claude Code's own.
    for plugin in plugins {
        let shape = Shape::Document(plugin.dialect);
        list.push((plugin.path.clone(), "claude-code", User, shape));
    }
    // Codex: every `.codex/config.toml` from the working directory up to the project root
    // (nearest first), then the user's, then the system's; their `[mcp_servers.<name>]`
    // tables merge key by key.
    let codex = Shape::Layered(Dialect::Toml, Layers::Codex);
    // Outside a repository, Codex's project is the working directory alone.
    // Walking up needs an absolute path (a relative `.` has no parents to walk).
    let cwd = if opts.project_dir.is_relative() {
        std::fs::canonicalize(&opts.project_dir).unwrap_or_else(|_| opts.project_dir.clone())
    } else {
        opts.project_dir.clone()
    };
    let git = git_root(&cwd);
    let root = git.clone().unwrap_or_else(|| cwd.clone());
    for dir in up_to(&cwd, &root) {
        list.push((dir.join(".codex/config.toml"), "codex", Project, codex));
    }
    if let Some(dir) = env("CODEX_HOME").or_else(|| h(".codex")) {
        list.push((dir.join("config.toml"), "codex", User, codex));
    }
    let system = system_root(opts);
    list.push((system.join("etc/codex/config.toml"), "codex", User, codex));
    // Gemini CLI: the system settings override the project's, which override the user's,
    // which override the system defaults.
    let gemini = Shape::Document(Dialect::Gemini);
    let (gemini_system, gemini_defaults) = gemini_system_files(opts);
    list.push((gemini_system, "gemini", User, gemini));
    list.push((p(".gemini/settings.json"), "gemini", Project, gemini));
    if let Some(path) = h(".gemini/settings.json") {
        list.push((path, "gemini", User, gemini));
    }
    list.push((gemini_defaults, "gemini", User, gemini));
    // Gemini CLI extensions: below the settings files, which win a name clash.
    if let Some(dir) = h(".gemini/extensions") {
        for path in gemini_extensions(&dir) {
            list.push((path, "gemini", User, gemini));
        }
    }
    list.push((p(".cursor/mcp.json"), "cursor", Project, json));
    if let Some(path) = h(".cursor/mcp.json") {
        list.push((path, "cursor", User, json));
    }
    for rel in [
        ".codeium/windsurf/mcp_config.json",
        ".codeium/mcp_config.json",
    ] {
        if let Some(path) = h(rel) {
            list.push((path, "windsurf", User, json));
        }
    }
    list.push((p(".vscode/mcp.json"), "vscode", Project, json));
    let vscode = home.as_deref().map(vscode_user_dir);
    if let Some(dir) = &vscode {
        list.push((dir.join("mcp.json"), "vscode", User, json));
        let settings = Shape::Document(Dialect::VsCodeSettings);
        list.push((dir.join("settings.json"), "vscode", User, settings));
    }
    // GitHub Copilot's portable file (its project file is `.mcp.json`, read above).
    if let Some(dir) = env("COPILOT_HOME").or_else(|| h(".copilot")) {
        let copilot = Shape::Document(Dialect::Copilot);
        list.push((dir.join("mcp-config.json"), "copilot", User, copilot));
    }
    if let Some(home) = &home {
        let desktop = if cfg!(target_os = "macos") {
            home.join("Library/Application Support/Claude/claude_desktop_config.json")
        } else if cfg!(windows) {
            home.join("AppData/Roaming/Claude/claude_desktop_config.json")
        } else {
            config_home
                .clone()
                .unwrap_or_else(|| home.join(".config"))
                .join("Claude/claude_desktop_config.json")
        };
        list.push((desktop, "claude-desktop", User, json));
    }
    let zed = Shape::Document(Dialect::Zed);
    list.push((p(".zed/settings.json"), "zed", Project, zed));
    if let Some(dir) = &config_home {
        list.push((dir.join("zed/settings.json"), "zed", User, zed));
    }
    // opencode: `opencode.json` then `opencode.jsonc` in the working directory and each
    // ancestor up to the git root (nearest first; `.json` files load after every `.jsonc`,
    // so they win), then the user's; the `mcp.<name>` entries merge key by key.
    let opencode = Shape::Layered(Dialect::Opencode, Layers::Opencode);
    // Outside a repository, opencode walks up to the filesystem root.
    let root = git.unwrap_or_else(|| PathBuf::from("/"));
    for name in ["opencode.json", "opencode.jsonc"] {
        for dir in up_to(&cwd, &root) {
            list.push((dir.join(name), "opencode", Project, opencode));
        }
    }
    if let Some(dir) = &config_home {
        for name in ["opencode/opencode.jsonc", "opencode/opencode.json"] {
            list.push((dir.join(name), "opencode", User, opencode));
        }
    }
    let roo = Shape::Document(Dialect::Roo);
    list.push((p(".roo/mcp.json"), "roo", Project, roo));
    if let Some(dir) = &vscode {
        let rel = "globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json";
        list.push((dir.join(rel), "roo", User, roo));
    }
    let cline = Shape::Document(Dialect::Cline);
    let cline_file = env("CLINE_MCP_SETTINGS_PATH")
        .or_else(|| env("CLINE_DATA_DIR").map(|d| d.join("settings/cline_mcp_settings.json")))
        .or_else(|| env("CLINE_DIR").map(|d| d.join("data/settings/cline_mcp_settings.json")))
        .or_else(|| h(".cline/data/settings/cline_mcp_settings.json"));
    if let Some(path) = cline_file {
        list.push((path, "cline", User, cline));
    }
    if let Some(dir) = &vscode {
        let rel = "globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json";
        list.push((dir.join(rel), "cline", User, cline));
    }
    list.push((p(".air/mcp.json"), "jetbrains", Project, json));
    if let Some(dir) = &config_home {
        let goose = Shape::Document(Dialect::Goose);
        list.push((dir.join("goose/config.yaml"), "goose", User, goose));
    }
    // Continue: the project's block files (YAML, or JSON in other clients' shape), then
    // the user's `config.yaml`.
    let continue_yaml = Shape::Document(Dialect::Continue);
    for path in continue_blocks(&opts.project_dir.join(".continue/mcpServers")) {
        let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        let shape = if yaml { continue_yaml } else { json };
        list.push((path, "continue", Project, shape));
    }
    if let Some(path) = h(".continue/config.yaml") {
        list.push((path, "continue", User, continue_yaml));
    }
    list.into_iter()
        .filter(|(_, _, level, _)| *level == User || opts.project_configs)
        .map(|(path, provider, level, shape)| Candidate {
            path,
            provider,
            level,
            shape,
        })
        .collect()
}

/// The most directories walked up from the working directory.
const MAX_ANCESTORS: usize = 64;

/// The project root as git-aware clients find it: the nearest directory from `dir` up that
/// holds `.git`, if any.
fn git_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .take(MAX_ANCESTORS)
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// `dir` and its ancestors up to and including `root`, nearest first.
fn up_to(dir: &Path, root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for d in dir.ancestors().take(MAX_ANCESTORS) {
        dirs.push(d.to_path_buf());
        if d == root {
            break;
        }
    }
    dirs
}

/// The most block files read from one `.continue/mcpServers` folder.
const MAX_CONTINUE_BLOCKS: usize = 64;

/// Continue's block files in `dir` (`*.yaml`, `*.yml`, `*.json`), by name; at most
/// [`MAX_CONTINUE_BLOCKS`].
fn continue_blocks(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .take(MAX_CONTINUE_BLOCKS * 4)
        .collect();
    files.sort();
    files.truncate(MAX_CONTINUE_BLOCKS);
    files
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

/// The largest `envFile` or `${file:…}` file read (1 MiB).
pub const MAX_VARIABLE_FILE_BYTES: u64 = 1024 * 1024;

fn discover_files(opts: &DiscoveryOptions) -> Discovered {
    let explicit = !opts.explicit_files.is_empty();
    let project_key = opts.project_key();
    let mut found = Discovered::default();
    let mut sources = Vec::new();
    let mut ctx = InterpolationContext {
        env: opts.env.clone(),
        workspace: Some(project_key.clone()),
        home: opts
            .home_dir
            .as_ref()
            .map(|h| h.to_string_lossy().into_owned()),
        inputs: opts.inputs.clone(),
        files: BTreeMap::new(),
        file_vars: BTreeMap::new(),
    };
    let mut inputs_needed: BTreeMap<String, InputSpec> = BTreeMap::new();
    // `~/.claude.json`'s entry for this project: approvals the user gave in Claude Code.
    let mut claude_project = ClaudeSettings::default();
    let plugins = if explicit {
        Vec::new()
    } else {
        claude_plugin_files(opts, &project_key, &mut found)
    };
    for plugin in &plugins {
        let path = plugin.path.to_string_lossy().into_owned();
        ctx.file_vars.insert(path, plugin.vars.clone());
    }
    let list = candidates(opts, &plugins);
    for (index, candidate) in list.iter().enumerate() {
        let meta = SourceMeta {
            provider: candidate.provider.to_string(),
            level: candidate.level,
            path: candidate.path.to_string_lossy().into_owned(),
        };
        let text = read(&candidate.path, explicit);
        found.looked_at.push(LookedAt {
            source: meta.clone(),
            found: !matches!(text, Ok(None)),
        });
        let text = match text {
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
        if !found.files_read.contains(&candidate.path) {
            found.files_read.push(candidate.path.clone());
        }
        let parsed: Result<ParsedDocument, ConfigError> = match candidate.shape {
            Shape::Document(dialect) => parse_document_as(&meta.path, &text, dialect),
            Shape::Layered(dialect, layers) => {
                let below: Vec<(String, String)> = list[index + 1..]
                    .iter()
                    .filter(|c| matches!(c.shape, Shape::Layered(_, l) if l == layers))
                    .filter_map(|c| match read(&c.path, false) {
                        Ok(Some(text)) => Some((c.path.to_string_lossy().into_owned(), text)),
                        _ => None,
                    })
                    .collect();
                parse_layer_over(&meta.path, &text, dialect, &below)
            }
            Shape::ClaudeLocal => {
                parse_claude_json(&meta.path, &text, Some(&project_key)).map(|claude| {
                    claude_project = claude.project_settings;
                    claude.project
                })
            }
            // Its syntax errors are reported with its local part.
            Shape::ClaudeUser => match parse_claude_json(&meta.path, &text, None) {
                Ok(claude) => Ok(claude.user),
                Err(_) => continue,
            },
        };
        let doc = match parsed {
            Ok(doc) => doc,
            Err(error) => {
                found.errors.push(SourceError {
                    source: meta,
                    error,
                });
                continue;
            }
        };
        let mut done = interpolate(meta.clone(), doc.clone(), &ctx);
        if !done.files_needed.is_empty() {
            // `envFile` and `${file:…}`: read, bounded, then translate again with them.
            for path in &done.files_needed {
                found.depends_on.push(PathBuf::from(path));
                let text =
                    match crate::files::read_regular(Path::new(path), MAX_VARIABLE_FILE_BYTES) {
                        Ok(bytes) => String::from_utf8(bytes).map_err(|_| "not valid UTF-8".into()),
                        Err(e) => Err(e.to_string()),
                    };
                ctx.files.insert(path.clone(), text);
            }
            done = interpolate(meta, doc, &ctx);
        }
        found.warnings.extend(done.warnings);
        found.variables.0.extend(done.variables);
        for input in done.inputs_needed {
            inputs_needed.entry(input.id.clone()).or_insert(input);
        }
        sources.push(done.source);
    }
    found.inputs_needed = inputs_needed.into_values().collect();
    let mut approvals = if explicit || !opts.project_configs {
        // Every source is user level: nothing to approve.
        Approvals::default()
    } else {
        approvals(opts, &project_key, claude_project, &mut found)
    };
    if !explicit {
        approvals.policies = policies(opts, &project_key, &mut found);
    }
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
    // Warnings about entries that do not run (shadowed, skipped) would only distract.
    let running: std::collections::BTreeSet<(&str, &str)> = found
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.source.path.as_str()))
        .chain(
            found
                .awaiting
                .iter()
                .map(|a| (a.server.as_str(), a.source.path.as_str())),
        )
        .collect();
    found
        .warnings
        .retain(|w| running.contains(&(w.server.as_str(), w.source.path.as_str())));
    found.depends_on.sort();
    found.depends_on.dedup();
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
        found.depends_on.push(store.clone());
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
        found.depends_on.push(path.to_path_buf());
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
        let codex = opts
            .env
            .get("CODEX_HOME")
            .filter(|v| !v.is_empty())
            .map_or_else(|| home.join(".codex"), PathBuf::from)
            .join("config.toml");
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
