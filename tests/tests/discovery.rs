//! Config discovery against real files in a temporary HOME and project directory.

use std::fs;
use std::path::{Path, PathBuf};
use switchboard::{discover, Discovered, DiscoveryOptions};
use switchboard_core::config::{ConfigError, DenyList, SkipReason, SourceLevel, TransportKind};

pub(crate) struct Dirs {
    _tmp: tempfile::TempDir,
    pub(crate) home: PathBuf,
    pub(crate) project: PathBuf,
}

pub(crate) fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    // Canonical, so the project key written into ~/.claude.json matches what discovery uses.
    let root = fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let project = root.join("work/app");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&project).unwrap();
    Dirs {
        _tmp: tmp,
        home,
        project,
    }
}

pub(crate) fn write(base: &Path, rel: &str, text: &str) {
    let path = base.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// These tests are about formats, places and precedence, so the project is approved
/// (`trust_project`); approval itself is tested in `trust.rs`.
fn options(d: &Dirs) -> DiscoveryOptions {
    DiscoveryOptions {
        project_dir: d.project.clone(),
        home_dir: Some(d.home.clone()),
        project_configs: true,
        explicit_files: Vec::new(),
        deny: DenyList::default(),
        trust_project: true,
        trust_store: Some(d.home.join(".local/share/switchboard/trust.json")),
        env: Default::default(),
        inputs: Default::default(),
    }
}

/// `(name, provider, level, transport)` of every server found.
fn summary(found: &Discovered) -> Vec<(String, String, SourceLevel, TransportKind)> {
    found
        .servers
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.source.provider.clone(),
                s.source.level,
                s.config.transport_kind().unwrap(),
            )
        })
        .collect()
}

fn stdio(name: &str) -> String {
    format!(r#"{{"mcpServers": {{"{name}": {{"command": "{name}-bin"}}}}}}"#)
}

#[test]
fn every_client_format_is_found_in_home_and_project() {
    let d = dirs();
    write(&d.project, ".switchboard/mcp.json", &stdio("sb-project"));
    write(&d.home, ".config/switchboard/mcp.json", &stdio("sb-user"));
    write(&d.project, ".mcp.json", &stdio("claude-project"));
    let claude = format!(
        r#"{{"mcpServers": {{"claude-user": {{"type": "sse", "url": "https://c/sse"}}}},
            "projects": {{"{}": {{"mcpServers": {{"claude-local": {{"command": "x"}}}}}},
                          "/somewhere/else": {{"mcpServers": {{"not-mine": {{"command": "x"}}}}}}}}}}"#,
        d.project.display()
    );
    write(&d.home, ".claude.json", &claude);
    write(
        &d.home,
        ".codex/config.toml",
        "model = \"o3\"\n[mcp_servers.codex-docs]\ncommand = \"docs\"\nstartup_timeout_sec = 20\n",
    );
    write(
        &d.project,
        ".gemini/settings.json",
        r#"{"mcpServers": {"gemini-project": {"httpUrl": "https://g/mcp"}}}"#,
    );
    write(
        &d.home,
        ".gemini/settings.json",
        r#"{"theme": "x", "mcpServers": {"gemini-user": {"url": "https://g/sse"}}}"#,
    );
    write(&d.project, ".cursor/mcp.json", &stdio("cursor-project"));
    write(
        &d.home,
        ".cursor/mcp.json",
        r#"{"mcpServers": {"cursor-user": {"url": "https://cu/mcp"}}}"#,
    );
    write(
        &d.home,
        ".codeium/windsurf/mcp_config.json",
        r#"{"mcpServers": {"windsurf": {"serverUrl": "https://w/mcp"}}}"#,
    );
    write(
        &d.project,
        ".vscode/mcp.json",
        "{\n  // comment\n  \"inputs\": [],\n  \"servers\": {\"vscode\": {\"type\": \"stdio\", \"command\": \"v\", \"envFile\": \".env\"},},\n}\n",
    );
    write(&d.project, ".env", "FROM_ENV_FILE=1\n");

    let found = discover(&options(&d));
    assert_eq!(found.errors, []);
    assert_eq!(found.files_read.len(), 11);
    use SourceLevel::{Project, User};
    use TransportKind::{Http, Sse, Stdio};
    let s = |n: &str, p: &str, l, t| (n.to_string(), p.to_string(), l, t);
    assert_eq!(
        summary(&found),
        [
            s("claude-local", "claude-code", User, Stdio),
            s("claude-project", "claude-code", Project, Stdio),
            s("claude-user", "claude-code", User, Sse),
            s("codex-docs", "codex", User, Stdio),
            s("cursor-project", "cursor", Project, Stdio),
            s("cursor-user", "cursor", User, Http),
            s("gemini-project", "gemini", Project, Http),
            s("gemini-user", "gemini", User, Http),
            s("sb-project", "switchboard", Project, Stdio),
            s("sb-user", "switchboard", User, Stdio),
            s("vscode", "vscode", Project, Stdio),
            s("windsurf", "windsurf", User, Http),
        ]
    );
    let codex = found
        .servers
        .iter()
        .find(|s| s.name == "codex-docs")
        .unwrap();
    assert_eq!(codex.config.timeout_ms, Some(20_000));
    assert!(codex.source.path.ends_with(".codex/config.toml"));
}

#[test]
fn earlier_files_win_and_shadowed_entries_are_reported() {
    let d = dirs();
    write(
        &d.project,
        ".switchboard/mcp.json",
        r#"{"mcpServers": {"gh": {"command": "from-switchboard"}}}"#,
    );
    write(
        &d.project,
        ".mcp.json",
        r#"{"mcpServers": {"gh": {"command": "from-mcp-json"}, "fs": {"command": "fs"}}}"#,
    );
    write(
        &d.home,
        ".cursor/mcp.json",
        r#"{"mcpServers": {"gh": {"command": "from-cursor"}}}"#,
    );

    let found = discover(&options(&d));
    assert_eq!(found.errors, []);
    let gh = found.servers.iter().find(|s| s.name == "gh").unwrap();
    assert_eq!(gh.config.command.as_deref(), Some("from-switchboard"));
    let shadowed: Vec<_> = found
        .shadowed
        .iter()
        .map(|s| {
            (
                s.server.as_str(),
                s.winner.provider.as_str(),
                s.shadowed.provider.as_str(),
            )
        })
        .collect();
    assert_eq!(
        shadowed,
        [
            ("gh", "switchboard", "claude-code"),
            ("gh", "switchboard", "cursor")
        ]
    );
    assert!(found.shadowed[0].shadowed.path.ends_with(".mcp.json"));
}

#[test]
fn a_syntax_error_names_file_line_and_column_and_the_rest_still_loads() {
    let d = dirs();
    write(
        &d.project,
        ".mcp.json",
        "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\" \"args\": []}\n}}\n",
    );
    write(
        &d.home,
        ".codex/config.toml",
        "[mcp_servers.b]\ncommand = = 1\n",
    );
    write(&d.home, ".cursor/mcp.json", &stdio("ok"));

    let found = discover(&options(&d));
    assert_eq!(found.servers.len(), 1);
    assert_eq!(found.servers[0].name, "ok");
    assert_eq!(found.files_read.len(), 3);
    let positions: Vec<_> = found
        .errors
        .iter()
        .map(|e| match &e.error {
            ConfigError::Syntax {
                path, line, column, ..
            } => {
                assert_eq!(path, &e.source.path);
                (
                    Path::new(path)
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                    *line,
                    *column,
                )
            }
            other => panic!("expected a syntax error, got {other:?}"),
        })
        .collect();
    assert_eq!(
        positions,
        [
            (".mcp.json".to_string(), 2, 24),
            ("config.toml".to_string(), 2, 11)
        ]
    );
    assert!(
        found.errors[0]
            .to_string()
            .contains(".mcp.json:2:24: expected `,` or `}`"),
        "{}",
        found.errors[0]
    );
}

#[test]
fn one_bad_entry_is_an_error_naming_its_file_and_the_document_still_loads() {
    let d = dirs();
    write(
        &d.project,
        ".mcp.json",
        r#"{"mcpServers": {"bad": {"command": "x", "args": "oops"}, "both": {"command": "x", "url": "https://x"}, "good": {"command": "x"}}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(found.servers.len(), 1);
    let messages: Vec<_> = found.errors.iter().map(|e| e.to_string()).collect();
    let path = d.project.join(".mcp.json").display().to_string();
    assert_eq!(
        messages,
        [
            format!(r#"{path}: Server "bad": "args" must be an array of strings, got a string"#),
            format!(r#"{path}: Server "both": both "command" and "url" are set"#),
        ]
    );
}

#[test]
fn project_configs_off_reads_only_user_files() {
    let d = dirs();
    write(&d.project, ".mcp.json", "{ not even json");
    write(
        &d.project,
        ".switchboard/mcp.json",
        r#"{"mcpServers": {"gh": {"command": "project"}}}"#,
    );
    write(
        &d.home,
        ".config/switchboard/mcp.json",
        r#"{"mcpServers": {"gh": {"command": "user"}}}"#,
    );
    let claude = format!(
        r#"{{"projects": {{"{}": {{"mcpServers": {{"local": {{"command": "x"}}}}}}}}}}"#,
        d.project.display()
    );
    write(&d.home, ".claude.json", &claude);

    let found = discover(&DiscoveryOptions {
        project_configs: false,
        ..options(&d)
    });
    assert_eq!(found.errors, []);
    assert!(found.shadowed.is_empty());
    let names: Vec<_> = found
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.config.command.as_deref()))
        .collect();
    // Claude's per-project ("local") entries live in the user's own file: kept.
    assert_eq!(names, [("gh", Some("user")), ("local", Some("x"))]);
    assert!(found.files_read.iter().all(|f| f.starts_with(&d.home)));
}

#[test]
fn explicit_files_replace_discovery() {
    let d = dirs();
    write(&d.project, ".mcp.json", &stdio("discovered"));
    write(
        &d.project,
        "first.json",
        r#"{"mcpServers": {"x": {"command": "first"}}}"#,
    );
    write(
        &d.project,
        "second.toml",
        "[mcp_servers.x]\ncommand = \"second\"\n[mcp_servers.y]\ncommand = \"y\"\n",
    );
    let found = discover(&DiscoveryOptions {
        explicit_files: vec![
            d.project.join("first.json"),
            d.project.join("second.toml"),
            d.project.join("missing.json"),
        ],
        ..options(&d)
    });
    let names: Vec<_> = found
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.config.command.as_deref()))
        .collect();
    assert_eq!(names, [("x", Some("first")), ("y", Some("y"))]);
    assert!(found
        .servers
        .iter()
        .all(|s| s.source.provider == "switchboard" && s.source.level == SourceLevel::User));
    assert_eq!(found.shadowed.len(), 1);
    // A missing explicit file is an error (it was asked for), not silence.
    assert_eq!(found.errors.len(), 1);
    assert!(found.errors[0].source.path.ends_with("missing.json"));
}

#[test]
fn missing_files_and_home_are_silently_skipped() {
    let d = dirs();
    let mut found = discover(&options(&d));
    // Every place is looked at, and nothing is there; the approval and policy files looked
    // for are listed too, for a watcher (one that appears changes what is found).
    assert!(found.looked_at.len() > 20 && found.looked_at.iter().all(|l| !l.found));
    assert!(!found.depends_on.is_empty());
    assert!(found.depends_on.iter().all(|p| !p.exists()));
    found.looked_at.clear();
    found.depends_on.clear();
    assert_eq!(found, Discovered::default());
    let mut found = discover(&DiscoveryOptions {
        home_dir: None,
        ..options(&d)
    });
    // Without a home, only the project's files and the system-wide ones.
    let home = d.home.to_string_lossy().into_owned();
    assert!(found
        .looked_at
        .iter()
        .all(|l| !l.source.path.starts_with(&home)));
    assert!(found
        .looked_at
        .iter()
        .any(|l| l.source.level == SourceLevel::Project));
    found.looked_at.clear();
    found.depends_on.clear();
    assert_eq!(found, Discovered::default());
}

#[test]
fn disabled_and_denied_servers_are_reported_as_skipped() {
    let d = dirs();
    write(
        &d.project,
        ".mcp.json",
        r#"{"mcpServers": {"off": {"command": "x", "enabled": false}, "exa": {"command": "x"}, "web": {"url": "https://mcp.exa.ai/mcp"}, "on": {"command": "x"}}}"#,
    );
    let found = discover(&DiscoveryOptions {
        deny: DenyList::exa(),
        ..options(&d)
    });
    let names: Vec<_> = found.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["on"]);
    let skipped: Vec<_> = found
        .skipped
        .iter()
        .map(|s| (s.server.as_str(), s.reason.clone()))
        .collect();
    assert_eq!(
        skipped,
        [
            (
                "exa",
                SkipReason::DeniedName {
                    pattern: "exa".into()
                }
            ),
            ("off", SkipReason::Disabled),
            (
                "web",
                SkipReason::DeniedUrl {
                    pattern: "*.exa.ai*".into()
                }
            ),
        ]
    );
}

#[cfg(unix)]
#[test]
fn an_unreadable_file_is_an_error_and_the_rest_still_loads() {
    let d = dirs();
    // A directory where a file is expected cannot be read as one.
    fs::create_dir_all(d.project.join(".mcp.json")).unwrap();
    write(&d.home, ".cursor/mcp.json", &stdio("ok"));
    let found = discover(&options(&d));
    assert_eq!(found.servers.len(), 1);
    assert_eq!(found.errors.len(), 1);
    assert!(
        matches!(&found.errors[0].error, ConfigError::Document { message, .. } if message.starts_with("cannot read"))
    );
}

#[test]
fn an_explicit_claude_json_is_read_the_claude_way() {
    let d = dirs();
    let claude = format!(
        r#"{{"mcpServers": {{"top": {{"command": "t"}}}},
            "projects": {{"{}": {{"mcpServers": {{"local": {{"command": "l"}}}}}},
                          "/somewhere/else": {{"mcpServers": {{"not-mine": {{"command": "x"}}}}}}}}}}"#,
        d.project.display()
    );
    write(&d.project, "backup/.claude.json", &claude);
    let found = discover(&DiscoveryOptions {
        explicit_files: vec![d.project.join("backup/.claude.json")],
        ..options(&d)
    });
    assert_eq!(found.errors, []);
    let names: Vec<_> = found
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.source.provider.as_str()))
        .collect();
    assert_eq!(names, [("local", "claude-code"), ("top", "claude-code")]);
}

#[test]
fn discovery_fails_as_a_whole_with_no_servers_and_one_error_when_the_project_is_missing() {
    let d = dirs();
    write(&d.home, ".cursor/mcp.json", &stdio("ok"));
    let found = discover(&DiscoveryOptions {
        project_dir: d.project.join("gone"),
        ..options(&d)
    });
    assert_eq!(found.servers, []);
    assert_eq!(found.errors.len(), 1, "{:?}", found.errors);
    let message = found.errors[0].to_string();
    assert!(
        message.contains("gone") && message.contains("config discovery failed"),
        "{message}"
    );
}

mod with_the_shell {
    use super::*;
    use crate::support::demo_server_bin;
    use switchboard::Builder;

    fn demo_entry(name: &str) -> String {
        format!(
            r#""{name}": {{"command": "{}", "args": ["--name", "{name}"]}}"#,
            demo_server_bin().display()
        )
    }

    #[test]
    fn the_startup_report_carries_config_errors_and_shadowed_entries() {
        let d = dirs();
        write(
            &d.project,
            ".mcp.json",
            &format!(r#"{{"mcpServers": {{{}, "bad": {{}}}}}}"#, demo_entry("a")),
        );
        write(&d.home, ".cursor/mcp.json", &stdio("a"));
        write(
            &d.home,
            ".codex/config.toml",
            "[mcp_servers.b]\ncommand = = 1\n",
        );
        smol::block_on(async {
            let (sb, report) = Builder::discover(options(&d))
                .no_cache()
                .start()
                .await
                .unwrap();
            assert_eq!(report.connected, ["a"]);
            assert_eq!(report.shadowed.len(), 1);
            assert_eq!(report.shadowed[0].server, "a");
            assert!(report.shadowed[0]
                .shadowed
                .path
                .ends_with(".cursor/mcp.json"));
            let syntax = report
                .config_errors
                .iter()
                .find_map(|e| match &e.error {
                    ConfigError::Syntax {
                        path, line, column, ..
                    } => Some((path.clone(), *line, *column)),
                    _ => None,
                })
                .expect("the TOML syntax error is reported");
            assert!(syntax.0.ends_with("config.toml"));
            assert_eq!((syntax.1, syntax.2), (2, 11));
            // The invalid entry is also under its name, like every invalid config.
            let bad = report
                .errors
                .get("bad")
                .expect("the invalid entry is an error");
            assert_eq!(bad.kind, switchboard::ServerErrorKind::InvalidConfig);
            assert!(bad.message.contains(".mcp.json"), "{bad}");
            assert_eq!(report.config_errors.len(), 2, "{:?}", report.config_errors);
            sb.shutdown().await;
        });
    }

    #[test]
    fn a_failed_discovery_starts_with_no_tools_and_one_error() {
        let d = dirs();
        write(&d.home, ".cursor/mcp.json", &stdio("ok"));
        smol::block_on(async {
            let (sb, report) = Builder::discover(DiscoveryOptions {
                project_dir: d.project.join("gone"),
                ..options(&d)
            })
            .no_cache()
            .start()
            .await
            .unwrap();
            assert!(report.tools.is_empty() && sb.tools().is_empty());
            assert_eq!(report.config_errors.len(), 1);
            assert!(report.config_errors[0]
                .to_string()
                .contains("config discovery failed"));
            sb.shutdown().await;
        });
    }

    /// The current working directory of a live process.
    fn cwd_of(pid: u32) -> PathBuf {
        fs::read_link(format!("/proc/{pid}/cwd")).unwrap()
    }

    #[test]
    fn discovered_stdio_servers_without_cwd_run_in_the_project_directory() {
        let d = dirs();
        let sub = d.project.join("sub");
        fs::create_dir_all(&sub).unwrap();
        write(
            &d.project,
            ".mcp.json",
            &format!(
                r#"{{"mcpServers": {{{}, "pinned": {{"command": "{}", "args": ["--name", "pinned"], "cwd": "{}"}}}}}}"#,
                demo_entry("free"),
                demo_server_bin().display(),
                sub.display()
            ),
        );
        assert_ne!(std::env::current_dir().unwrap(), d.project);
        smol::block_on(async {
            let (sb, report) = Builder::discover(options(&d))
                .no_cache()
                .start()
                .await
                .unwrap();
            assert_eq!(report.connected, ["free", "pinned"]);
            let mut cwds: Vec<PathBuf> = sb.live_processes().into_iter().map(cwd_of).collect();
            cwds.sort();
            assert_eq!(cwds, [d.project.clone(), sub.clone()]);
            sb.shutdown().await;

            // `project_dir()` moves both: where configs are found and where servers run.
            let other = d.project.join("other");
            write(
                &other,
                ".mcp.json",
                &format!(r#"{{"mcpServers": {{{}}}}}"#, demo_entry("o")),
            );
            let (sb, report) = Builder::discover(options(&d))
                .project_dir(&other)
                .no_cache()
                .start()
                .await
                .unwrap();
            assert_eq!(report.connected, ["o"]);
            let cwds: Vec<PathBuf> = sb.live_processes().into_iter().map(cwd_of).collect();
            assert_eq!(cwds, [other]);
            sb.shutdown().await;
        });
    }

    /// A live process's environment variable, if set.
    fn env_of(pid: u32, name: &str) -> Option<String> {
        let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
        let prefix = format!("{name}=");
        environ
            .split(|b| *b == 0)
            .filter_map(|kv| std::str::from_utf8(kv).ok())
            .find_map(|kv| kv.strip_prefix(&prefix).map(str::to_string))
    }

    /// The process of the live server whose `TAG` is `tag`.
    fn pid_of(sb: &switchboard::Switchboard, tag: &str) -> Option<u32> {
        pids_of(sb, tag).into_iter().next()
    }

    /// Every live process whose `TAG` is `tag`: a server restarted a moment ago may still have
    /// its old process closing beside the new one.
    fn pids_of(sb: &switchboard::Switchboard, tag: &str) -> Vec<u32> {
        (sb.live_processes().into_iter())
            .filter(|pid| env_of(*pid, "TAG").as_deref() == Some(tag))
            .collect()
    }

    #[test]
    fn reload_and_sync_read_file_values_again_and_sync_restarts_only_their_server() {
        let d = dirs();
        let tag = d.home.join("tag.txt");
        fs::write(&tag, "one\n").unwrap();
        // Windsurf's `${file:…}`: the file's trimmed text.
        let entry = |name: &str, tag: &str| {
            format!(
                r#""{name}": {{"command": "{}", "args": ["--name", "{name}"], "env": {{"TAG": "{tag}"}}}}"#,
                demo_server_bin().display()
            )
        };
        write(
            &d.home,
            ".codeium/windsurf/mcp_config.json",
            &format!(
                r#"{{"mcpServers": {{{}, {}}}}}"#,
                entry("filed", &format!("${{file:{}}}", tag.display())),
                entry("fixed", "fixed")
            ),
        );
        smol::block_on(async {
            let (sb, report) = Builder::discover(options(&d))
                .no_cache()
                .start()
                .await
                .unwrap();
            assert_eq!(report.connected, ["filed", "fixed"]);
            assert!(pid_of(&sb, "one").is_some() && pid_of(&sb, "fixed").is_some());
            // The value never reaches a report.
            assert!(!format!("{:?}", sb.discovery()).contains("\"one\""));
            // The file is one a watcher watches.
            assert!(sb.discovery().unwrap().depends_on.contains(&tag));

            // A reload reads the file again (and restarts every server, as reloads do; old
            // processes may still be closing, so only what runs now is checked).
            fs::write(&tag, "two").unwrap();
            let before = pids_of(&sb, "fixed");
            sb.reload().await.unwrap();
            assert!(pid_of(&sb, "two").is_some());
            // The fixed server's new process: its old one may still be closing beside it.
            let fresh: Vec<u32> = (pids_of(&sb, "fixed").into_iter())
                .filter(|pid| !before.contains(pid))
                .collect();
            assert_eq!(fresh.len(), 1, "one new process for the fixed server");
            let fixed = fresh[0];
            // Whatever runs for the fixed server from now on is that process or the old one
            // on its way out: a new pid would mean it was restarted.
            let left_alone = |sb: &switchboard::Switchboard| {
                let now = pids_of(sb, "fixed");
                now.contains(&fixed) && now.iter().all(|p| *p == fixed || before.contains(p))
            };

            // A sync with the entries discovered again restarts only the server whose file
            // changed; the other keeps its process.
            fs::write(&tag, "three").unwrap();
            let servers = discover(&options(&d)).servers;
            sb.sync(servers.clone()).await.unwrap();
            let three = pid_of(&sb, "three").expect("restarted with the new value");
            assert!(left_alone(&sb), "the fixed server is left alone");
            // Nothing changed: nothing restarts.
            assert!(sb.sync(servers).await.unwrap().is_none());
            assert_eq!(pids_of(&sb, "three"), [three]);
            assert!(left_alone(&sb), "nothing restarts");
            sb.shutdown().await;
        });
    }
}

/// `!command` is Switchboard's own syntax: in another client's file a value with a leading
/// `!` is that client's literal text (a password, a header), and it reaches the server as
/// such; only Switchboard's own files run it. End to end: the command line starts a server
/// from each kind of file, and only the one from `.switchboard/mcp.json` runs its command.
#[test]
fn bang_commands_run_only_from_switchboard_files() {
    let d = dirs();
    let ran = d.project.join("ran");
    let demo = crate::support::demo_server_bin();
    let entry = |name: &str, marker: &str| {
        serde_json::json!({"command": demo.to_string_lossy(), "args": ["--name", name],
            "env": {"SECRET": format!("!touch '{}/{marker}'; echo v", ran.display())}})
    };
    fs::create_dir_all(&ran).unwrap();
    for (rel, marker) in [
        (".mcp.json", "claude"),
        (".cursor/mcp.json", "cursor"),
        (".vscode/mcp.json", "vscode"),
        (".switchboard/mcp.json", "switchboard"),
    ] {
        let key = if rel == ".vscode/mcp.json" {
            "servers"
        } else {
            "mcpServers"
        };
        let doc = serde_json::json!({ key: { marker: entry(marker, marker) } });
        write(&d.project, rel, &doc.to_string());
    }
    let found = discover(&options(&d));
    let secret = |name: &str| {
        let s = found.servers.iter().find(|s| s.name == name).unwrap();
        s.config.env["SECRET"].clone()
    };
    assert!(
        secret("claude").starts_with("!!touch"),
        "{}",
        secret("claude")
    );
    assert!(secret("switchboard").starts_with("!touch"));

    let out = std::process::Command::new(crate::support::switchboard_bin())
        .current_dir(&d.project)
        .env("HOME", &d.home)
        .env("XDG_CACHE_HOME", d.home.join("cache"))
        .env_remove("XDG_DATA_HOME")
        .env_remove("RUST_LOG")
        // Approved, so each server starts and only its `!` handling is tested.
        .args(["status", "--json", "--no-cache", "--trust-project"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut markers: Vec<String> = fs::read_dir(&ran)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    markers.sort();
    assert_eq!(
        markers,
        ["switchboard"],
        "only Switchboard's own file runs `!` commands"
    );
}
