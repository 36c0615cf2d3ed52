//! What clients decide beyond their server lists, found on disk: the system-wide files
//! (under `/`, or `$SWITCHBOARD_SYSTEM_ROOT`), Claude Code's plugins and managed controls,
//! Gemini CLI's extensions, allow and exclude lists and enablement files. The decisions are
//! the core's ([`ClientPolicies`]); this module only finds and reads the files.

use super::{read, Discovered, DiscoveryOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use switchboard_core::config::{
    gemini_disabled_servers, gemini_server_lists, parse_claude_policy, parse_enabled_plugins,
    parse_installed_plugins, parse_plugin_manifest, ClientPolicies, ConfigError, Dialect,
    GeminiExtensionEnablement, SourceError, SourceLevel, SourceMeta,
};

/// The root the system-wide files are under: `/`, or `$SWITCHBOARD_SYSTEM_ROOT` (for tests,
/// and for reading another machine's layout).
pub(super) fn system_root(opts: &DiscoveryOptions) -> PathBuf {
    opts.env
        .get("SWITCHBOARD_SYSTEM_ROOT")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// The directory of Claude Code's managed files (`managed-mcp.json`,
/// `managed-settings.json`).
pub(super) fn claude_managed_dir(opts: &DiscoveryOptions) -> PathBuf {
    let root = system_root(opts);
    if cfg!(target_os = "macos") {
        root.join("Library/Application Support/ClaudeCode")
    } else if cfg!(windows) {
        root.join("Program Files/ClaudeCode")
    } else {
        root.join("etc/claude-code")
    }
}

/// Gemini CLI's system settings (which override every other settings file) and system
/// defaults (which every other overrides): `$GEMINI_CLI_SYSTEM_SETTINGS_PATH` and
/// `$GEMINI_CLI_SYSTEM_DEFAULTS_PATH`, else `/etc/gemini-cli/{settings,system-defaults}.json`
/// (macOS `/Library/Application Support/GeminiCli/`).
pub(super) fn gemini_system_files(opts: &DiscoveryOptions) -> (PathBuf, PathBuf) {
    let dir = if cfg!(target_os = "macos") {
        system_root(opts).join("Library/Application Support/GeminiCli")
    } else if cfg!(windows) {
        system_root(opts).join("ProgramData/gemini-cli")
    } else {
        system_root(opts).join("etc/gemini-cli")
    };
    let env = |name: &str| {
        opts.env
            .get(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    (
        env("GEMINI_CLI_SYSTEM_SETTINGS_PATH").unwrap_or_else(|| dir.join("settings.json")),
        env("GEMINI_CLI_SYSTEM_DEFAULTS_PATH").unwrap_or_else(|| dir.join("system-defaults.json")),
    )
}

/// The most Claude Code plugins read.
const MAX_CLAUDE_PLUGINS: usize = 64;

/// A file of an enabled Claude Code plugin that configures servers.
#[derive(Debug, Clone)]
pub(super) struct PluginFile {
    pub(super) path: PathBuf,
    pub(super) dialect: Dialect,
    /// The variables the plugin's files define (`CLAUDE_PLUGIN_ROOT`, ...).
    pub(super) vars: BTreeMap<String, String>,
}

/// The server files of the Claude Code plugins installed (`<claude dir>/plugins/
/// installed_plugins.json`) and enabled (`enabledPlugins` in the user's or the managed
/// settings): each plugin's `.mcp.json`, and its `.claude-plugin/plugin.json` when that holds
/// servers inline or names files of them inside the plugin.
pub(super) fn claude_plugin_files(
    opts: &DiscoveryOptions,
    project_key: &str,
    found: &mut Discovered,
) -> Vec<PluginFile> {
    let Some(claude_dir) = opts
        .env
        .get("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| opts.home_dir.as_ref().map(|h| h.join(".claude")))
    else {
        return Vec::new();
    };
    let mut enabled = BTreeMap::new();
    let settings = [
        claude_dir.join("settings.json"),
        claude_managed_dir(opts).join("managed-settings.json"),
    ];
    for path in settings {
        // Errors in these files are reported where they are read for approvals and policies.
        if let Ok(Some(text)) = read(&path, false) {
            if let Ok(on) = parse_enabled_plugins(&path.to_string_lossy(), &text) {
                enabled.extend(on);
            }
        }
    }
    if !enabled.values().any(|on| *on) {
        return Vec::new();
    }
    let installed = claude_dir.join("plugins/installed_plugins.json");
    let plugins = match read(&installed, false) {
        Ok(Some(text)) => {
            found.files_read.push(installed.clone());
            match parse_installed_plugins(&installed.to_string_lossy(), &text) {
                Ok(p) => p,
                Err(e) => {
                    push_config_error(found, &installed, "claude-code", e);
                    return Vec::new();
                }
            }
        }
        Ok(None) => return Vec::new(),
        Err(message) => {
            push_error(found, &installed, "claude-code", message);
            return Vec::new();
        }
    };
    let mut files = Vec::new();
    for plugin in plugins.into_iter().take(MAX_CLAUDE_PLUGINS) {
        if enabled.get(&plugin.id) != Some(&true) {
            continue;
        }
        let root = PathBuf::from(&plugin.install_path);
        let data_name: String = (plugin.id.chars())
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let vars: BTreeMap<String, String> = [
            ("CLAUDE_PLUGIN_ROOT", plugin.install_path.clone()),
            (
                "CLAUDE_PLUGIN_DATA",
                claude_dir
                    .join("plugins/data")
                    .join(data_name)
                    .to_string_lossy()
                    .into_owned(),
            ),
            ("CLAUDE_PROJECT_DIR", project_key.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let file = |path: PathBuf| PluginFile {
            path,
            dialect: Dialect::ClaudePlugin,
            vars: vars.clone(),
        };
        files.push(file(root.join(".mcp.json")));
        let manifest = root.join(".claude-plugin/plugin.json");
        if let Ok(Some(text)) = read(&manifest, false) {
            match parse_plugin_manifest(&manifest.to_string_lossy(), &text) {
                Ok(m) => {
                    if !m.servers.servers.is_empty() || !m.servers.errors.is_empty() {
                        files.push(PluginFile {
                            dialect: Dialect::Json,
                            ..file(manifest.clone())
                        });
                    }
                    for rel in m.files {
                        // A plugin's files stay inside the plugin.
                        let inside = Path::new(&rel).components().all(|c| {
                            matches!(
                                c,
                                std::path::Component::Normal(_) | std::path::Component::CurDir
                            )
                        });
                        if inside {
                            files.push(file(root.join(rel)));
                        } else {
                            let message = format!("\"mcpServers\": {rel:?} is outside the plugin");
                            push_error(found, &manifest, "claude-code", message);
                        }
                    }
                }
                Err(e) => push_config_error(found, &manifest, "claude-code", e),
            }
        }
    }
    files
}

/// The most Gemini CLI extensions read.
const MAX_GEMINI_EXTENSIONS: usize = 64;

/// The manifests (`<dir>/<extension>/gemini-extension.json`) of the extensions installed in
/// `dir`, by name; at most [`MAX_GEMINI_EXTENSIONS`].
pub(super) fn gemini_extensions(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .take(MAX_GEMINI_EXTENSIONS * 4)
        .map(|e| e.path().join("gemini-extension.json"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.truncate(MAX_GEMINI_EXTENSIONS);
    found
}

/// Gather the clients' policies (see [`ClientPolicies`]): Gemini CLI's `mcp.allowed` and
/// `mcp.excluded`, its enablement files for servers and extensions; Claude Code's
/// `managed-mcp.json` and the `allowedMcpServers` / `deniedMcpServers` of its managed and
/// user settings. A file that cannot be read or parsed is one error and switches nothing.
pub(super) fn policies(
    opts: &DiscoveryOptions,
    project_key: &str,
    found: &mut Discovered,
) -> ClientPolicies {
    let mut policies = ClientPolicies::default();
    let text_of = |found: &mut Discovered, path: &Path, provider: &str| -> Option<String> {
        found.depends_on.push(path.to_path_buf());
        match read(path, false) {
            Ok(Some(text)) => {
                if !found.files_read.contains(&path.to_path_buf()) {
                    found.files_read.push(path.to_path_buf());
                }
                Some(text)
            }
            Ok(None) => None,
            Err(message) => {
                push_error(found, path, provider, message);
                None
            }
        }
    };
    let report = |found: &mut Discovered, path: &Path, provider: &str, error: ConfigError| {
        found.errors.push(SourceError {
            source: SourceMeta {
                provider: provider.to_string(),
                level: SourceLevel::User,
                path: path.to_string_lossy().into_owned(),
            },
            error,
        })
    };
    // Gemini CLI: the project's settings (read only as a config source when approved, but
    // its lists only ever narrow) over the user's.
    let home = opts.home_dir.clone();
    let (system, defaults) = gemini_system_files(opts);
    let mut gemini_settings = vec![system];
    if opts.project_configs {
        gemini_settings.push(opts.project_dir.join(".gemini/settings.json"));
    }
    if let Some(home) = &home {
        gemini_settings.push(home.join(".gemini/settings.json"));
    }
    gemini_settings.push(defaults);
    for path in gemini_settings {
        let Some(text) = text_of(found, &path, "gemini") else {
            continue;
        };
        // A syntax error is reported with the file's servers.
        match gemini_server_lists(&path.to_string_lossy(), &text) {
            Ok((allowed, excluded)) => {
                if policies.gemini.allowed.is_none() {
                    policies.gemini.allowed = allowed;
                }
                policies
                    .gemini
                    .excluded
                    .extend(excluded.unwrap_or_default());
            }
            Err(ConfigError::Syntax { .. }) => {}
            Err(e) => report(found, &path, "gemini", e),
        }
    }
    if let Some(home) = &home {
        let path = home.join(".gemini/mcp-server-enablement.json");
        if let Some(text) = text_of(found, &path, "gemini") {
            match gemini_disabled_servers(&path.to_string_lossy(), &text) {
                Ok(off) => policies.gemini.disabled = off,
                Err(e) => report(found, &path, "gemini", e),
            }
        }
        let dir = home.join(".gemini/extensions");
        let path = dir.join("extension-enablement.json");
        let enablement = match text_of(found, &path, "gemini") {
            Some(text) => match GeminiExtensionEnablement::parse(&path.to_string_lossy(), &text) {
                Ok(e) => e,
                Err(e) => {
                    report(found, &path, "gemini", e);
                    GeminiExtensionEnablement::default()
                }
            },
            None => GeminiExtensionEnablement::default(),
        };
        for manifest in gemini_extensions(&dir) {
            let name = manifest
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !enablement.enabled(&name, project_key) {
                let path = manifest.to_string_lossy().into_owned();
                policies.gemini.disabled_extensions.insert(path);
            }
        }
    }
    // Claude Code: the managed file, then the managed settings and the user's own.
    let managed = claude_managed_dir(opts);
    let managed_mcp = managed.join("managed-mcp.json");
    if matches!(read(&managed_mcp, false), Ok(Some(_))) {
        policies.claude.managed_file = Some(managed_mcp.to_string_lossy().into_owned());
    }
    let mut managed_only = false;
    let mut settings = vec![(managed.join("managed-settings.json"), true)];
    if let Some(home) = &home {
        settings.push((home.join(".claude/settings.json"), false));
    }
    for (path, is_managed) in settings {
        let Some(text) = text_of(found, &path, "claude-code") else {
            continue;
        };
        match parse_claude_policy(&path.to_string_lossy(), &text) {
            Ok(p) => {
                if is_managed {
                    managed_only = p.managed_only;
                }
                policies.claude.add(p, is_managed, managed_only);
            }
            // The user's settings file is also read for approvals, which report its errors.
            Err(e) if is_managed => report(found, &path, "claude-code", e),
            Err(_) => {}
        }
    }
    policies
}

fn push_config_error(found: &mut Discovered, path: &Path, provider: &str, error: ConfigError) {
    found.errors.push(SourceError {
        source: SourceMeta {
            provider: provider.to_string(),
            level: SourceLevel::User,
            path: path.to_string_lossy().into_owned(),
        },
        error,
    });
}

pub(super) fn push_error(found: &mut Discovered, path: &Path, provider: &str, message: String) {
    let path_text = path.to_string_lossy().into_owned();
    found.errors.push(SourceError {
        source: SourceMeta {
            provider: provider.to_string(),
            level: SourceLevel::User,
            path: path_text.clone(),
        },
        error: ConfigError::Document {
            path: path_text,
            message,
        },
    });
}
