//! Tests of the trust decision and of the clients' approval files.

use super::*;

fn meta(provider: &str, level: SourceLevel) -> SourceMeta {
    SourceMeta {
        provider: provider.into(),
        level,
        path: format!("/{provider}.json"),
    }
}

fn merge_one(provider: &str, level: SourceLevel, approvals: Approvals) -> Merged {
    merge(
        vec![Source::new(
            meta(provider, level),
            vec![("s".into(), ServerConfig::stdio("run-me", &[]))],
        )],
        &FilterOptions {
            approvals,
            ..Default::default()
        },
    )
}

#[test]
fn a_project_server_awaits_approval_and_a_user_server_does_not() {
    let merged = merge_one("cursor", SourceLevel::Project, Approvals::default());
    assert!(merged.servers.is_empty());
    assert_eq!(
        merged.awaiting,
        [AwaitingApproval {
            server: "s".into(),
            source: meta("cursor", SourceLevel::Project),
            config_hash: config_hash(&ServerConfig::stdio("run-me", &[])),
            changed: false,
        }]
    );
    let merged = merge_one("cursor", SourceLevel::User, Approvals::default());
    assert_eq!(merged.servers.len(), 1);
    assert!(merged.awaiting.is_empty() && merged.approved.is_empty());
}

#[test]
fn a_switchboard_approval_holds_only_for_the_config_it_approved() {
    let hash = config_hash(&ServerConfig::stdio("run-me", &[]));
    let approvals = |h: &str| Approvals {
        approved: [("s".to_string(), h.to_string())].into(),
        ..Default::default()
    };
    let merged = merge_one("vscode", SourceLevel::Project, approvals(&hash));
    assert_eq!(merged.servers.len(), 1);
    assert_eq!(
        merged.approved,
        [Approved {
            server: "s".into(),
            by: ApprovedBy::Switchboard
        }]
    );
    // Approved with another command: edited since, so it waits again, saying so.
    let other = config_hash(&ServerConfig::stdio("something-else", &[]));
    let merged = merge_one("vscode", SourceLevel::Project, approvals(&other));
    assert!(merged.servers.is_empty());
    assert!(merged.awaiting[0].changed);
}

#[test]
fn claude_code_approvals_apply_to_its_project_file_and_rejections_always_win() {
    let claude = |f: &dyn Fn(&mut ClaudeApprovals)| {
        let mut a = Approvals::default();
        f(&mut a.claude);
        a
    };
    let all = claude(&|c| c.enable_all = true);
    let merged = merge_one("claude-code", SourceLevel::Project, all.clone());
    assert_eq!(merged.approved[0].by, ApprovedBy::ClaudeEnableAll);
    // Claude Code's approval is for its own file only.
    assert_eq!(
        merge_one("cursor", SourceLevel::Project, all)
            .awaiting
            .len(),
        1
    );
    let named = claude(&|c| {
        c.enabled.insert("s".into());
    });
    let merged = merge_one("claude-code", SourceLevel::Project, named);
    assert_eq!(merged.approved[0].by, ApprovedBy::ClaudeEnabled);
    let mut rejected = claude(&|c| {
        c.enable_all = true;
        c.enabled.insert("s".into());
        c.rejected.insert("s".into());
    });
    rejected.trust_project = true;
    let merged = merge_one("claude-code", SourceLevel::Project, rejected);
    assert!(merged.servers.is_empty() && merged.awaiting.is_empty());
    assert_eq!(
        merged.skipped[0].reason,
        SkipReason::Rejected {
            by: RejectedBy::ClaudeDisabledMcpjsonServers
        }
    );
    // `disabledMcpServers` switches a Claude Code server off in this project, any scope.
    let disabled = claude(&|c| {
        c.disabled.insert("s".into());
    });
    let merged = merge_one("claude-code", SourceLevel::User, disabled);
    assert_eq!(
        merged.skipped[0].reason,
        SkipReason::Rejected {
            by: RejectedBy::ClaudeDisabledMcpServers
        }
    );
}

#[test]
fn codex_and_gemini_folder_trust_approve_or_reject_their_own_project_files() {
    for (provider, trusted, rejected) in [
        (
            "codex",
            ApprovedBy::CodexTrustedProject,
            RejectedBy::CodexUntrustedProject,
        ),
        (
            "gemini",
            ApprovedBy::GeminiTrustedFolder,
            RejectedBy::GeminiUntrustedFolder,
        ),
    ] {
        let with = |t: FolderTrust| {
            let mut a = Approvals::default();
            if provider == "codex" {
                a.codex = Some(t);
            } else {
                a.gemini = Some(t);
            }
            a
        };
        let merged = merge_one(provider, SourceLevel::Project, with(FolderTrust::Trusted));
        assert_eq!(merged.approved[0].by, trusted);
        let mut untrusted = with(FolderTrust::Untrusted);
        untrusted.trust_project = true;
        let merged = merge_one(provider, SourceLevel::Project, untrusted);
        assert_eq!(
            merged.skipped[0].reason,
            SkipReason::Rejected { by: rejected }
        );
        // Another client's trust approves nothing here.
        let merged = merge_one("cursor", SourceLevel::Project, with(FolderTrust::Trusted));
        assert_eq!(merged.awaiting.len(), 1);
    }
}

#[test]
fn trust_project_approves_every_project_server() {
    let merged = merge_one(
        "switchboard",
        SourceLevel::Project,
        Approvals {
            trust_project: true,
            ..Default::default()
        },
    );
    assert_eq!(merged.approved[0].by, ApprovedBy::TrustProject);
}

#[test]
fn claude_settings_files_are_read_and_bad_keys_are_errors() {
    let s = parse_claude_settings(
        "/p/.claude/settings.local.json",
        r#"{"enableAllProjectMcpServers": true, "enabledMcpjsonServers": ["a"],
            "disabledMcpjsonServers": ["b"], "permissions": {}}"#,
    )
    .unwrap();
    assert!(s.enable_all);
    assert_eq!(
        (s.enabled, s.rejected),
        (vec!["a".into()], vec!["b".into()])
    );
    let err = parse_claude_settings("/p/s.json", r#"{"disabledMcpjsonServers": "b"}"#);
    assert_eq!(
        err.unwrap_err().to_string(),
        r#"/p/s.json: "disabledMcpjsonServers" must be an array of server names"#
    );
    let claude = parse_claude_json(
        "/h/.claude.json",
        r#"{"projects": {"/w/app": {"hasTrustDialogAccepted": true,
            "disabledMcpServers": ["x"], "enabledMcpjsonServers": ["y"]}}}"#,
        Some("/w/app"),
    )
    .unwrap();
    assert!(claude.project_settings.folder_trusted);
    assert_eq!(claude.project_settings.disabled, ["x"]);
    assert_eq!(claude.project_settings.enabled, ["y"]);
}

#[test]
fn codex_trust_comes_from_the_nearest_listed_project_or_ancestor() {
    let text = r#"
[projects."/w"]
trust_level = "trusted"
[projects."/w/app/vendor"]
trust_level = "untrusted"
[projects."/w/other"]
trust_level = "untrusted"
"#;
    let t = |dir| codex_project_trust("/h/.codex/config.toml", text, dir).unwrap();
    assert_eq!(t("/w/app"), Some(FolderTrust::Trusted));
    assert_eq!(t("/w/app/vendor/x"), Some(FolderTrust::Untrusted));
    assert_eq!(t("/w/other"), Some(FolderTrust::Untrusted));
    assert_eq!(t("/elsewhere"), None);
    // `/w/application` is not inside `/w/app`.
    let text = "[projects.\"/w/app\"]\ntrust_level = \"trusted\"\n";
    assert_eq!(
        codex_project_trust("/c.toml", text, "/w/application").unwrap(),
        None
    );
}

#[test]
fn gemini_trusted_folders_follow_the_most_specific_rule() {
    let text = r#"{"/w/app/file.txt": "TRUST_PARENT", "/w/app/secret": "DO_NOT_TRUST",
                   "/x": "TRUST_FOLDER"}"#;
    let t = |dir| gemini_folder_trust("/h/.gemini/trustedFolders.json", text, dir).unwrap();
    assert_eq!(t("/w/app"), Some(FolderTrust::Trusted));
    assert_eq!(t("/w/app/secret/deeper"), Some(FolderTrust::Untrusted));
    assert_eq!(t("/x/y"), Some(FolderTrust::Trusted));
    assert_eq!(t("/w"), None);
}

#[test]
fn tool_filters_are_read_in_every_clients_spelling() {
    let doc = parse_document(
        "/p/.gemini/settings.json",
        r#"{"mcpServers": {
            "codex": {"command": "x", "enabled_tools": ["a", "b"], "disabled_tools": ["b"]},
            "gemini": {"command": "x", "includeTools": ["a"], "excludeTools": ["c"]},
            "roo": {"command": "x", "disabledTools": ["c"]},
            "none": {"command": "x"}
        }}"#,
    )
    .unwrap();
    let get = |n: &str| &doc.servers.iter().find(|(name, _)| name == n).unwrap().1;
    let allowed = |n: &str| -> Vec<&str> {
        ["a", "b", "c"]
            .into_iter()
            .filter(|t| get(n).tool_allowed(t))
            .collect()
    };
    // Deny is applied after allow: `b` is in both and hidden.
    assert_eq!(allowed("codex"), ["a"]);
    assert_eq!(allowed("gemini"), ["a"]);
    assert_eq!(allowed("roo"), ["a", "b"]);
    assert_eq!(allowed("none"), ["a", "b", "c"]);
    assert!(get("roo").extra.is_empty());
    // A config without filters hashes as before they existed (its tool cache is kept).
    let plain = ServerConfig::stdio("x", &[]);
    assert!(!serde_json::to_string(&plain).unwrap().contains("tools"));
}

#[test]
fn each_clients_timeout_means_what_that_client_makes_of_it() {
    let from = |provider: &str, path: &str, text: &str| {
        let doc = parse_document(path, text).unwrap();
        let source = Source::from_document(meta(provider, SourceLevel::User), doc);
        source.servers[0].1.clone()
    };
    // Claude Code: `timeout` limits each call, in ms; under 1000 it is ignored.
    let c = from(
        "claude-code",
        "/p/.mcp.json",
        r#"{"mcpServers": {"s": {"command": "x", "timeout": 5000}}}"#,
    );
    assert_eq!((c.timeout_ms, c.call_timeout_ms), (None, Some(5000)));
    let c = from(
        "claude-code",
        "/p/.mcp.json",
        r#"{"mcpServers": {"s": {"command": "x", "timeout": 500}}}"#,
    );
    assert_eq!((c.timeout_ms, c.call_timeout_ms), (None, None));
    // Gemini CLI: per request, in ms.
    let c = from(
        "gemini",
        "/p/.gemini/settings.json",
        r#"{"mcpServers": {"s": {"command": "x", "timeout": 15000}}}"#,
    );
    assert_eq!((c.timeout_ms, c.call_timeout_ms), (None, Some(15000)));
    // Codex: startup and tool timeouts in seconds.
    let c = from(
        "codex",
        "/h/.codex/config.toml",
        "[mcp_servers.s]\ncommand = \"x\"\nstartup_timeout_sec = 20\ntool_timeout_sec = 45\n",
    );
    assert_eq!(
        (c.timeout_ms, c.call_timeout_ms),
        (Some(20_000), Some(45_000))
    );
    // Switchboard's own: `timeout` is the connect timeout, `call_timeout_ms` the call's.
    let c = from(
        "switchboard",
        "/h/.config/switchboard/mcp.json",
        r#"{"mcpServers": {"s": {"command": "x", "timeout": 100, "call_timeout_ms": 700}}}"#,
    );
    assert_eq!((c.timeout_ms, c.call_timeout_ms), (Some(100), Some(700)));
    assert_eq!(
        c.call_timeout(),
        Some(std::time::Duration::from_millis(700))
    );
    let mut bad = c.clone();
    bad.call_timeout_ms = Some(0);
    assert_eq!(
        validate("s", &bad).unwrap_err().to_string(),
        r#"Server "s": the call timeout must be a positive number of milliseconds, got 0"#
    );
}

#[test]
fn an_untrusted_codex_or_gemini_project_entry_leaves_the_users_server_of_that_name_running() {
    for (provider, untrusted) in [("codex", true), ("gemini", false)] {
        let mut approvals = Approvals::default();
        if untrusted {
            approvals.codex = Some(FolderTrust::Untrusted);
        } else {
            approvals.gemini = Some(FolderTrust::Untrusted);
        }
        let merged = merge(
            vec![
                Source::new(
                    meta(provider, SourceLevel::Project),
                    vec![("s".into(), ServerConfig::stdio("project-one", &[]))],
                ),
                Source::new(
                    meta(provider, SourceLevel::User),
                    vec![("s".into(), ServerConfig::stdio("users-own", &[]))],
                ),
            ],
            &FilterOptions {
                approvals,
                ..Default::default()
            },
        );
        // The client never reads the project's file: the user's entry is the one it runs.
        assert_eq!(merged.servers.len(), 1, "{provider}");
        assert_eq!(merged.servers[0].source.level, SourceLevel::User);
        assert!(merged.shadowed.is_empty(), "{provider}");
        assert!(matches!(
            merged.skipped[0].reason,
            SkipReason::Rejected { by } if by.file_unread()
        ));
    }
}
