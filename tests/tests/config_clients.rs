//! Each client's own rules beyond its server list, read from real files in a temporary home,
//! system root and project: Gemini CLI's allow and exclude lists, enablement files and
//! extensions; Claude Code's managed file, allow and deny lists and plugins; opencode's and
//! Codex's layered project files; Copilot CLI's `local` type and `tools`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use switchboard::{discover, Discovered, DiscoveryOptions};
use switchboard_core::config::{DenyList, RejectedBy, SkipReason};

struct Dirs {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let project = root.join("repo/app");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&project).unwrap();
    Dirs {
        _tmp: tmp,
        root,
        home,
        project,
    }
}

fn write(base: &Path, rel: &str, text: &str) {
    let path = base.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn options(d: &Dirs) -> DiscoveryOptions {
    let env: BTreeMap<String, String> = [
        ("HOME", d.home.to_string_lossy().into_owned()),
        (
            "SWITCHBOARD_SYSTEM_ROOT",
            d.root.join("system").to_string_lossy().into_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    DiscoveryOptions {
        project_dir: d.project.clone(),
        home_dir: Some(d.home.clone()),
        project_configs: true,
        explicit_files: Vec::new(),
        deny: DenyList::default(),
        trust_project: true,
        trust_store: Some(d.home.join(".local/share/switchboard/trust.json")),
        env,
        inputs: BTreeMap::new(),
    }
}

fn running(found: &Discovered) -> Vec<&str> {
    found.servers.iter().map(|s| s.name.as_str()).collect()
}

fn rejected(found: &Discovered) -> Vec<(&str, RejectedBy)> {
    found
        .skipped
        .iter()
        .filter_map(|s| match s.reason {
            SkipReason::Rejected { by } => Some((s.server.as_str(), by)),
            _ => None,
        })
        .collect()
}

fn server<'a>(found: &'a Discovered, name: &str) -> &'a switchboard_core::config::ServerSpec {
    found
        .servers
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} runs: {found:#?}"))
}

#[test]
fn gemini_allow_and_exclude_lists_and_its_enablement_file_switch_servers_off() {
    let d = dirs();
    let servers = r#""mcpServers": {
        "alpha": {"command": "a"}, "beta": {"command": "b"},
        "gamma": {"command": "c"}, "Delta": {"command": "d"}
    }"#;
    write(
        &d.home,
        ".gemini/settings.json",
        &format!(
            r#"{{ {servers}, "mcp": {{"allowed": ["alpha", "beta", "delta"], "excluded": ["beta"]}} }}"#
        ),
    );
    // `gemini mcp disable Delta` writes the name lower-cased.
    write(
        &d.home,
        ".gemini/mcp-server-enablement.json",
        r#"{"delta": {"enabled": false}, "alpha": {"enabled": true}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["alpha"], "{:#?}", found.errors);
    assert_eq!(
        rejected(&found),
        [
            ("Delta", RejectedBy::GeminiDisabled),
            ("beta", RejectedBy::GeminiExcluded),
            ("gamma", RejectedBy::GeminiNotAllowed),
        ]
    );
    // Only Gemini's own servers: another client's `omega` is not Gemini's to refuse.
    write(
        &d.home,
        ".cursor/mcp.json",
        r#"{"mcpServers": {"omega": {"command": "o"}}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["alpha", "omega"]);
}

#[test]
fn a_broken_gemini_enablement_file_is_an_error_not_everything_on() {
    let d = dirs();
    write(
        &d.home,
        ".gemini/settings.json",
        r#"{"mcpServers": {"a": {"command": "a"}}}"#,
    );
    write(
        &d.home,
        ".gemini/mcp-server-enablement.json",
        r#"{"a": {"enabled": "no"}}"#,
    );
    let found = discover(&options(&d));
    assert!(
        found
            .errors
            .iter()
            .any(|e| e.to_string().contains("a.enabled")),
        "{:#?}",
        found.errors
    );
}

#[test]
fn a_gemini_extension_runs_from_its_own_directory_unless_switched_off_here() {
    let d = dirs();
    let ext = d.home.join(".gemini/extensions/tools-ext");
    write(
        &ext,
        "gemini-extension.json",
        r#"{"name": "tools-ext", "version": "1.0.0", "mcpServers": {
            "ext-server": {"command": "node", "args": ["${extensionPath}${/}run.js", "${workspacePath}"],
                           "cwd": "${extensionPath}"},
            "shared": {"command": "from-extension"}
        }}"#,
    );
    write(
        &d.home,
        ".gemini/settings.json",
        r#"{"mcpServers": {"shared": {"command": "from-settings"}}}"#,
    );
    let found = discover(&options(&d));
    let s = server(&found, "ext-server");
    let ext_dir = ext.to_string_lossy();
    assert_eq!(
        s.config.args,
        [
            format!("{ext_dir}/run.js"),
            d.project.to_string_lossy().into_owned()
        ]
    );
    assert_eq!(s.config.cwd.as_deref(), Some(&*ext_dir));
    // The settings file wins a name clash with an extension.
    assert_eq!(
        server(&found, "shared").config.command.as_deref(),
        Some("from-settings")
    );
    // Switched off for this project and everything under it.
    let rule = format!("!{}/*", d.project.to_string_lossy());
    write(
        &d.home,
        ".gemini/extensions/extension-enablement.json",
        &format!(r#"{{"tools-ext": {{"overrides": ["/*", "{rule}"]}}}}"#),
    );
    let found = discover(&options(&d));
    assert_eq!(
        rejected(&found),
        [("ext-server", RejectedBy::GeminiExtensionDisabled)]
    );
}

#[test]
fn claude_managed_mcp_json_takes_exclusive_control_of_claude_codes_servers() {
    let d = dirs();
    write(
        &d.home,
        ".claude.json",
        r#"{"mcpServers": {"personal": {"command": "p"}}}"#,
    );
    write(
        &d.project,
        ".mcp.json",
        r#"{"mcpServers": {"repo": {"command": "r"}}}"#,
    );
    write(
        &d.home,
        ".cursor/mcp.json",
        r#"{"mcpServers": {"cursor-one": {"command": "c"}}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["cursor-one", "personal", "repo"]);
    write(
        &d.root,
        "system/etc/claude-code/managed-mcp.json",
        r#"{"mcpServers": {"company-internal": {"type": "stdio",
            "command": "/usr/local/bin/company-mcp-server", "args": ["--config", "/etc/company/mcp-config.json"]}}}"#,
    );
    let found = discover(&options(&d));
    // Other clients' files are not Claude Code's to control.
    assert_eq!(running(&found), ["company-internal", "cursor-one"]);
    assert_eq!(
        rejected(&found),
        [
            ("personal", RejectedBy::ClaudeManagedMcpOnly),
            ("repo", RejectedBy::ClaudeManagedMcpOnly),
        ]
    );
    // An empty managed file switches every Claude Code server off.
    write(
        &d.root,
        "system/etc/claude-code/managed-mcp.json",
        r#"{"mcpServers": {}}"#,
    );
    assert_eq!(running(&discover(&options(&d))), ["cursor-one"]);
}

#[test]
fn claude_allowed_and_denied_mcp_servers_match_by_name_command_and_url() {
    let d = dirs();
    write(
        &d.home,
        ".claude.json",
        r#"{"mcpServers": {
            "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"]},
            "files-other": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/"]},
            "company": {"type": "http", "url": "https://mcp.company.com/tools"},
            "evil": {"type": "http", "url": "https://x.untrusted.com/mcp"},
            "dangerous-server": {"command": "d"},
            "stranger": {"command": "s"}
        }}"#,
    );
    write(
        &d.root,
        "system/etc/claude-code/managed-settings.json",
        r#"{
          "allowedMcpServers": [
            { "serverName": "github" },
            { "serverName": "dangerous-server" },
            { "serverCommand": ["npx", "-y", "@modelcontextprotocol/server-filesystem"] },
            { "serverUrl": "https://mcp.company.com/*" },
            { "serverUrl": "https://*.untrusted.com/*" }
          ],
          "deniedMcpServers": [
            { "serverName": "dangerous-server" },
            { "serverUrl": "https://*.untrusted.com/*" }
          ]
        }"#,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["company", "files", "github"]);
    assert_eq!(
        rejected(&found),
        [
            ("dangerous-server", RejectedBy::ClaudeDeniedMcpServers),
            ("evil", RejectedBy::ClaudeDeniedMcpServers),
            ("files-other", RejectedBy::ClaudeNotInAllowedMcpServers),
            ("stranger", RejectedBy::ClaudeNotInAllowedMcpServers),
        ]
    );
    // The user's own allow list extends the managed one, unless the managed settings say
    // only theirs counts; the user's deny list always adds.
    write(
        &d.home,
        ".claude/settings.json",
        r#"{"allowedMcpServers": [{"serverName": "stranger"}],
            "deniedMcpServers": [{"serverName": "github"}]}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["company", "files", "stranger"]);
    let managed = fs::read_to_string(d.root.join("system/etc/claude-code/managed-settings.json"))
        .unwrap()
        .replacen('{', r#"{"allowManagedMcpServersOnly": true,"#, 1);
    write(
        &d.root,
        "system/etc/claude-code/managed-settings.json",
        &managed,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["company", "files"]);
}

#[test]
fn an_enabled_claude_plugins_servers_run_with_the_plugins_variables() {
    let d = dirs();
    let root = d.home.join(".claude/plugins/cache/market/db-plugin/1.0.0");
    let off = d.home.join(".claude/plugins/cache/market/off-plugin/1.0.0");
    write(
        &d.home,
        ".claude/plugins/installed_plugins.json",
        &format!(
            r#"{{"version": 2, "plugins": {{
                "db-plugin@market": [{{"scope": "user", "installPath": "{}", "version": "1.0.0"}}],
                "off-plugin@market": [{{"scope": "user", "installPath": "{}", "version": "1.0.0"}}]
            }}}}"#,
            root.to_string_lossy(),
            off.to_string_lossy()
        ),
    );
    write(
        &d.home,
        ".claude/settings.json",
        r#"{"enabledPlugins": {"db-plugin@market": true, "off-plugin@market": false}}"#,
    );
    // Flat, as plugins write their `.mcp.json`.
    write(
        &root,
        ".mcp.json",
        r#"{"database-tools": {"command": "${CLAUDE_PLUGIN_ROOT}/servers/db-server",
            "args": ["--config", "${CLAUDE_PLUGIN_ROOT}/config.json", "--data", "${CLAUDE_PLUGIN_DATA}"]}}"#,
    );
    write(
        &root,
        ".claude-plugin/plugin.json",
        r#"{"name": "db-plugin", "mcpServers": {"plugin-api": {"command": "${CLAUDE_PLUGIN_ROOT}/servers/api-server",
            "args": ["--port", "8080"]}}}"#,
    );
    write(
        &off,
        ".mcp.json",
        r#"{"mcpServers": {"off-server": {"command": "x"}}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(
        running(&found),
        ["database-tools", "plugin-api"],
        "{:#?}",
        found.errors
    );
    let r = root.to_string_lossy();
    let db = server(&found, "database-tools");
    assert_eq!(
        db.config.command.as_deref(),
        Some(&*format!("{r}/servers/db-server"))
    );
    assert_eq!(db.config.args[1], format!("{r}/config.json"));
    assert!(db.config.args[3].ends_with("/.claude/plugins/data/db-plugin-market"));
    assert_eq!(db.source.provider, "claude-code");
    // A managed file's exclusive control covers plugins too.
    write(
        &d.root,
        "system/etc/claude-code/managed-mcp.json",
        r#"{"mcpServers": {}}"#,
    );
    assert!(running(&discover(&options(&d))).is_empty());
}

#[test]
fn opencode_reads_every_ancestor_up_to_the_git_root_and_merges_entries_key_by_key() {
    let d = dirs();
    let repo = d.project.parent().unwrap().to_path_buf();
    fs::create_dir_all(repo.join(".git")).unwrap();
    let cwd = d.project.join("sub");
    fs::create_dir_all(&cwd).unwrap();
    // Above the repository: never read.
    write(
        &d.root,
        "opencode.json",
        r#"{"mcp": {"outside": {"type": "local", "command": ["o"]}}}"#,
    );
    write(
        &repo,
        "opencode.jsonc",
        r#"{"mcp": {"tool": {"type": "local", "command": ["npx", "tool"], "environment": {"A": "1"}},
                    "root-only": {"type": "local", "command": ["r"]}}}"#,
    );
    write(
        &cwd,
        "opencode.json",
        r#"{"mcp": {"tool": {"environment": {"B": "2"}}}}"#,
    );
    let mut o = options(&d);
    o.project_dir = cwd.clone();
    let found = discover(&o);
    assert_eq!(
        running(&found),
        ["root-only", "tool"],
        "{:#?}",
        found.errors
    );
    let tool = server(&found, "tool");
    assert_eq!(tool.config.command.as_deref(), Some("npx"));
    assert_eq!(
        tool.config.env.keys().collect::<Vec<_>>(),
        ["A", "B"],
        "the nearer file's keys join the farther file's"
    );
    assert!(tool.source.path.ends_with("app/sub/opencode.json"));
    let outside = d.root.join("opencode.json").to_string_lossy().into_owned();
    assert!(found.looked_at.iter().all(|l| l.source.path != outside));
    let top = repo.join("opencode.json").to_string_lossy().into_owned();
    assert!(found.looked_at.iter().any(|l| l.source.path == top));
}

#[test]
fn codex_project_files_from_the_root_down_merge_key_by_key_over_the_users() {
    let d = dirs();
    let repo = d.project.parent().unwrap().to_path_buf();
    fs::create_dir_all(repo.join(".git")).unwrap();
    write(
        &d.home,
        ".codex/config.toml",
        "[mcp_servers.docs]\ncommand = \"docs-server\"\nargs = [\"--port\", \"4000\"]\n\
         [mcp_servers.docs.env]\nTOKEN_NAME = \"user\"\n\
         [mcp_servers.slow]\ncommand = \"slow\"\n",
    );
    write(
        &repo,
        ".codex/config.toml",
        "[mcp_servers.docs]\nargs = [\"--port\", \"5000\"]\ntool_timeout_sec = 30\n\
         [mcp_servers.slow]\nenabled = false\n",
    );
    write(
        &d.project,
        ".codex/config.toml",
        "[mcp_servers.docs.env]\nEXTRA = \"nearest\"\n",
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["docs"], "{:#?}", found.errors);
    let docs = server(&found, "docs");
    assert_eq!(docs.config.command.as_deref(), Some("docs-server"));
    assert_eq!(docs.config.args, ["--port", "5000"]);
    assert_eq!(docs.config.call_timeout_ms, Some(30_000));
    assert_eq!(
        docs.config.env,
        [("EXTRA", "nearest"), ("TOKEN_NAME", "user")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    );
    assert!(docs.source.path.ends_with("repo/app/.codex/config.toml"));
    assert!(found
        .skipped
        .iter()
        .any(|s| s.server == "slow" && s.reason == SkipReason::Disabled));
}

#[test]
fn copilot_cli_local_servers_and_tool_lists() {
    let d = dirs();
    write(
        &d.home,
        ".copilot/mcp-config.json",
        r#"{"mcpServers": {
            "pw": {"type": "local", "command": "npx", "args": ["@playwright/mcp@latest"],
                   "tools": ["browser_navigate"]},
            "all": {"type": "http", "url": "https://mcp.context7.com/mcp", "tools": ["*"]}
        }}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["all", "pw"], "{:#?}", found.errors);
    let pw = server(&found, "pw");
    assert_eq!(
        pw.config.enabled_tools.as_deref(),
        Some(&["browser_navigate".to_string()][..])
    );
    assert!(server(&found, "all").config.enabled_tools.is_none());
    assert!(found.warnings.is_empty(), "{:#?}", found.warnings);
}
