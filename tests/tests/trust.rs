//! Trust: a server from a project file starts only once approved — by `switchboard trust`
//! (bound to its config, so an edit needs approval again), by `--trust-project`, or by the
//! client's own approval state (Claude Code, Codex, Gemini CLI), where a client's rejection
//! always wins. Through discovery and through the command line.

use crate::support::{demo_server_bin, switchboard_bin};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use switchboard::{discover, Discovered, DiscoveryOptions, TrustEntry, TrustStore};
use switchboard_core::config::{
    ApprovedBy, DenyList, RejectedBy, SkipReason, SourceLevel, TransportKind,
};

struct Dirs {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
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

fn write(base: &Path, rel: &str, text: &str) {
    let path = base.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn store_path(d: &Dirs) -> PathBuf {
    d.home.join(".local/share/switchboard/trust.json")
}

/// Discovery as a user gets it: nothing approved up front.
fn options(d: &Dirs) -> DiscoveryOptions {
    DiscoveryOptions {
        project_dir: d.project.clone(),
        home_dir: Some(d.home.clone()),
        project_configs: true,
        explicit_files: Vec::new(),
        deny: DenyList::default(),
        trust_project: false,
        trust_store: Some(store_path(d)),
        env: Default::default(),
        inputs: Default::default(),
    }
}

fn running(found: &Discovered) -> Vec<&str> {
    found.servers.iter().map(|s| s.name.as_str()).collect()
}

fn awaiting(found: &Discovered) -> Vec<&str> {
    found.awaiting.iter().map(|a| a.server.as_str()).collect()
}

fn approved_by(found: &Discovered, name: &str) -> Option<ApprovedBy> {
    found
        .approved
        .iter()
        .find(|a| a.server == name)
        .map(|a| a.by)
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

#[test]
fn project_servers_wait_for_approval_and_an_approval_binds_to_the_config() {
    let d = dirs();
    write(
        &d.project,
        ".mcp.json",
        r#"{"mcpServers": {"a": {"command": "a-bin"}}}"#,
    );
    write(
        &d.project,
        ".cursor/mcp.json",
        r#"{"mcpServers": {"b": {"command": "b-bin"}}}"#,
    );
    write(
        &d.project,
        ".vscode/mcp.json",
        r#"{"servers": {"v": {"type": "http", "url": "https://v/mcp"}}}"#,
    );
    write(
        &d.home,
        ".cursor/mcp.json",
        r#"{"mcpServers": {"mine": {"command": "mine-bin"}}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(found.errors, []);
    // User-level files are the user's own: they start.
    assert_eq!(running(&found), ["mine"]);
    assert_eq!(awaiting(&found), ["a", "b", "v"]);
    assert!(found
        .awaiting
        .iter()
        .all(|a| a.source.level == SourceLevel::Project && !a.changed));

    // Approve `a` as `switchboard trust a` does: its hash, for this project.
    let a = found.awaiting.iter().find(|a| a.server == "a").unwrap();
    let store = TrustStore::new(store_path(&d));
    let key = options(&d).project_key();
    store
        .approve(
            &key,
            [(
                "a".to_string(),
                TrustEntry {
                    config_hash: a.config_hash.clone(),
                    source: None,
                },
            )],
        )
        .unwrap();
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["a", "mine"]);
    assert_eq!(approved_by(&found, "a"), Some(ApprovedBy::Switchboard));
    assert_eq!(awaiting(&found), ["b", "v"]);

    // An edited command is another config: it waits again, and says it changed.
    write(
        &d.project,
        ".mcp.json",
        r#"{"mcpServers": {"a": {"command": "a-bin", "args": ["--evil"]}}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["mine"]);
    let a = found.awaiting.iter().find(|a| a.server == "a").unwrap();
    assert!(a.changed);

    // The same approval means nothing in another project.
    let other = d.project.parent().unwrap().join("other");
    fs::create_dir_all(&other).unwrap();
    write(
        &other,
        ".mcp.json",
        r#"{"mcpServers": {"a": {"command": "a-bin"}}}"#,
    );
    let found = discover(&DiscoveryOptions {
        project_dir: other,
        ..options(&d)
    });
    assert_eq!(awaiting(&found), ["a"]);

    // `trust_project` approves the lot for one discovery.
    let found = discover(&DiscoveryOptions {
        trust_project: true,
        ..options(&d)
    });
    assert_eq!(running(&found), ["a", "b", "mine", "v"]);
    assert_eq!(approved_by(&found, "v"), Some(ApprovedBy::TrustProject));
}

#[test]
fn claude_code_approvals_are_honoured_and_its_rejections_always_win() {
    let d = dirs();
    write(
        &d.project,
        ".mcp.json",
        r#"{"mcpServers": {"named": {"command": "n"}, "other": {"command": "o"},
            "refused": {"command": "r"}}}"#,
    );
    let claude_json = |folder_trusted: bool| {
        json!({
            "mcpServers": {"personal": {"command": "p"}},
            "projects": {d.project.to_string_lossy(): {
                "hasTrustDialogAccepted": folder_trusted,
                "enabledMcpjsonServers": ["named"],
                "disabledMcpServers": ["personal"],
            }}
        })
        .to_string()
    };
    write(&d.home, ".claude.json", &claude_json(false));
    // A repository's own settings: its approval must not count in an untrusted folder, its
    // rejection always does.
    write(
        &d.project,
        ".claude/settings.local.json",
        r#"{"enableAllProjectMcpServers": true, "disabledMcpjsonServers": ["refused"]}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(found.errors, []);
    assert_eq!(running(&found), ["named"]);
    assert_eq!(
        approved_by(&found, "named"),
        Some(ApprovedBy::ClaudeEnabled)
    );
    assert_eq!(awaiting(&found), ["other"]);
    assert_eq!(
        rejected(&found),
        [
            ("personal", RejectedBy::ClaudeDisabledMcpServers),
            ("refused", RejectedBy::ClaudeDisabledMcpjsonServers),
        ]
    );
    // Rejections win even over the switch that approves everything else.
    let found = discover(&DiscoveryOptions {
        trust_project: true,
        ..options(&d)
    });
    assert_eq!(running(&found), ["named", "other"]);
    assert_eq!(rejected(&found).len(), 2);

    // Once the user trusted the folder in Claude Code, the project's settings approve too.
    write(&d.home, ".claude.json", &claude_json(true));
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["named", "other"]);
    assert_eq!(
        approved_by(&found, "other"),
        Some(ApprovedBy::ClaudeEnableAll)
    );
    assert_eq!(rejected(&found).len(), 2);

    // The user's own settings approve in any folder.
    write(&d.home, ".claude.json", &claude_json(false));
    write(
        &d.home,
        ".claude/settings.json",
        r#"{"enabledMcpjsonServers": ["other"]}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["named", "other"]);
}

#[test]
fn codex_trusted_projects_and_gemini_trusted_folders_decide_for_their_files() {
    let d = dirs();
    let project = d.project.to_string_lossy().into_owned();
    write(
        &d.project,
        ".codex/config.toml",
        "[mcp_servers.cx]\ncommand = \"cx\"\n",
    );
    write(
        &d.project,
        ".gemini/settings.json",
        r#"{"mcpServers": {"gm": {"httpUrl": "https://g/mcp"}}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(awaiting(&found), ["cx", "gm"]);

    write(
        &d.home,
        ".codex/config.toml",
        &format!("[projects.\"{project}\"]\ntrust_level = \"trusted\"\n"),
    );
    write(
        &d.home,
        ".gemini/trustedFolders.json",
        &json!({ project.clone(): "DO_NOT_TRUST" }).to_string(),
    );
    let found = discover(&options(&d));
    assert_eq!(found.errors, []);
    assert_eq!(running(&found), ["cx"]);
    assert_eq!(
        approved_by(&found, "cx"),
        Some(ApprovedBy::CodexTrustedProject)
    );
    assert_eq!(
        rejected(&found),
        [("gm", RejectedBy::GeminiUntrustedFolder)]
    );
    // A rejection wins over `--trust-project` too.
    let all = discover(&DiscoveryOptions {
        trust_project: true,
        ..options(&d)
    });
    assert_eq!(rejected(&all), [("gm", RejectedBy::GeminiUntrustedFolder)]);
    let cx = &found.servers[0];
    assert_eq!(cx.source.level, SourceLevel::Project);
    assert_eq!(cx.config.transport_kind(), Ok(TransportKind::Stdio));

    write(
        &d.home,
        ".codex/config.toml",
        &format!("[projects.\"{project}\"]\ntrust_level = \"untrusted\"\n"),
    );
    write(
        &d.home,
        ".gemini/trustedFolders.json",
        &json!({ d.project.join("x").to_string_lossy(): "TRUST_PARENT" }).to_string(),
    );
    let found = discover(&options(&d));
    assert_eq!(running(&found), ["gm"]);
    assert_eq!(
        approved_by(&found, "gm"),
        Some(ApprovedBy::GeminiTrustedFolder)
    );
    assert_eq!(
        rejected(&found),
        [("cx", RejectedBy::CodexUntrustedProject)]
    );
}

#[test]
fn trust_store_keeps_approvals_per_project_and_revokes_by_name_or_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = TrustStore::new(dir.path().join("sub/trust.json"));
    let entry = |h: &str| TrustEntry {
        config_hash: h.into(),
        source: None,
    };
    assert!(store.approvals("/p").unwrap().is_empty());
    store
        .approve("/p", [("a".into(), entry("h1")), ("b".into(), entry("h2"))])
        .unwrap();
    store.approve("/q", [("a".into(), entry("h3"))]).unwrap();
    assert_eq!(store.approvals("/p").unwrap()["a"].config_hash, "h1");
    assert_eq!(store.approvals("/q").unwrap()["a"].config_hash, "h3");
    assert_eq!(store.revoke("/p", Some(&["a".into()])).unwrap(), ["a"]);
    assert_eq!(store.approvals("/p").unwrap().len(), 1);
    assert_eq!(store.revoke("/p", None).unwrap(), ["b"]);
    assert!(store.approvals("/p").unwrap().is_empty());
    assert_eq!(store.approvals("/q").unwrap().len(), 1);
}

#[test]
fn a_trust_store_that_does_not_parse_is_an_error_and_is_not_overwritten() {
    let d = dirs();
    let path = store_path(&d);
    write(&d.home, ".local/share/switchboard/trust.json", "not json");
    let store = TrustStore::new(&path);
    assert!(store.approvals("/p").is_err());
    let entry = TrustEntry {
        config_hash: "h".into(),
        source: None,
    };
    assert!(store.approve("/p", [("a".into(), entry)]).is_err());
    assert_eq!(fs::read_to_string(&path).unwrap(), "not json");
    // Discovery reports it and approves nothing from it.
    write(
        &d.project,
        ".mcp.json",
        r#"{"mcpServers": {"a": {"command": "a"}}}"#,
    );
    let found = discover(&options(&d));
    assert_eq!(awaiting(&found), ["a"]);
    assert!(found.errors[0]
        .to_string()
        .contains("cannot read the approvals"));
}

// --- the command line ---------------------------------------------------------------------

fn cli(d: &Dirs, args: &[&str]) -> Output {
    Command::new(switchboard_bin())
        .current_dir(&d.project)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("HOME", &d.home)
        .env("XDG_DATA_HOME", d.home.join(".local/share"))
        .env("XDG_CACHE_HOME", d.home.join(".cache"))
        .arg("--no-cache")
        .args(args)
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn write_demo(d: &Dirs, args: &[&str]) {
    let mut argv = vec!["--name", "proj"];
    argv.extend(args);
    let doc = json!({"mcpServers": {"proj": {
        "command": demo_server_bin().to_string_lossy(), "args": argv}}});
    write(&d.project, ".mcp.json", &doc.to_string());
}

#[test]
fn status_shows_awaiting_approval_with_the_command_and_trust_starts_the_server() {
    let d = dirs();
    write_demo(&d, &[]);
    let out = cli(&d, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json_of(&out);
    assert_eq!(v["servers"], json!([]), "{v}");
    assert_eq!(v["awaiting_approval"][0]["server"], "proj");
    assert_eq!(
        v["awaiting_approval"][0]["approve"],
        "switchboard trust proj"
    );
    assert_eq!(v["awaiting_approval"][0]["changed"], false);
    let human = cli(&d, &["status"]);
    let shown = text(&human);
    assert!(shown.contains("proj: awaiting approval"), "{shown}");
    assert!(
        shown.contains("approve with: switchboard trust proj"),
        "{shown}"
    );

    let out = cli(&d, &["trust", "proj"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).starts_with("approved proj (claude-code "),
        "{}",
        text(&out)
    );
    let v = json_of(&cli(&d, &["status", "--json"]));
    assert_eq!(v["servers"][0]["status"], "connected", "{v}");
    assert_eq!(v["servers"][0]["approved_by"], "switchboard trust", "{v}");
    assert_eq!(v["awaiting_approval"], json!([]));

    // Edited: waits again, and says so.
    write_demo(&d, &["--tools", "3"]);
    let v = json_of(&cli(&d, &["status", "--json"]));
    assert_eq!(v["servers"], json!([]), "{v}");
    assert_eq!(v["awaiting_approval"][0]["changed"], true, "{v}");
    // `trust` with no names approves everything awaiting.
    let out = cli(&d, &["trust"]);
    assert!(text(&out).contains("approved proj"), "{}", text(&out));
    let v = json_of(&cli(&d, &["status", "--json"]));
    assert_eq!(v["servers"][0]["status"], "connected", "{v}");

    let out = cli(&d, &["untrust"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("withdrew the approval of proj"));
    let v = json_of(&cli(&d, &["status", "--json"]));
    assert_eq!(v["awaiting_approval"][0]["changed"], false, "{v}");

    // For one run, without recording anything.
    let v = json_of(&cli(&d, &["--trust-project", "status", "--json"]));
    assert_eq!(v["servers"][0]["status"], "connected", "{v}");
    assert_eq!(v["servers"][0]["approved_by"], "--trust-project", "{v}");
    let v = json_of(&cli(&d, &["status", "--json"]));
    assert_eq!(v["servers"], json!([]), "{v}");
}

#[test]
fn trust_and_untrust_refuse_names_they_cannot_act_on() {
    let d = dirs();
    write_demo(&d, &[]);
    let out = cli(&d, &["trust", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("\"nope\" is not a project server awaiting approval"));
    let out = cli(&d, &["untrust", "proj"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // From elsewhere, the printed command names the project.
    let elsewhere = d.home.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let out = Command::new(switchboard_bin())
        .current_dir(&elsewhere)
        .env("HOME", &d.home)
        .env("XDG_DATA_HOME", d.home.join(".local/share"))
        .arg("--project")
        .arg(&d.project)
        .args(["--no-cache", "status", "--json"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(
        v["awaiting_approval"][0]["approve"],
        format!("switchboard --project {} trust proj", d.project.display())
    );
}
