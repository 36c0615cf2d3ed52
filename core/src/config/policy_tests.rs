use super::*;

fn meta(provider: &str, path: &str) -> SourceMeta {
    SourceMeta {
        provider: provider.into(),
        level: SourceLevel::User,
        path: path.into(),
    }
}

#[test]
fn an_extensions_last_matching_override_decides_and_subdirectories_need_a_star() {
    let e = GeminiExtensionEnablement::parse(
        "/h/.gemini/extensions/extension-enablement.json",
        r#"{"ext": {"overrides": ["/*", "!/work/secret/*", "/work/secret/ok/"]},
            "other": {"overrides": ["!/work/app/"]}}"#,
    )
    .unwrap();
    assert!(e.enabled("ext", "/work/app"));
    assert!(!e.enabled("ext", "/work/secret"));
    assert!(!e.enabled("ext", "/work/secret/deep/er"));
    // Without `*` a rule is the directory alone.
    assert!(e.enabled("ext", "/work/secret/ok"));
    assert!(!e.enabled("ext", "/work/secret/ok/below"));
    assert!(!e.enabled("other", "/work/app/"));
    assert!(e.enabled("other", "/work/app/sub"));
    // Unknown extensions are on.
    assert!(e.enabled("unlisted", "/anywhere"));
    assert!(GeminiExtensionEnablement::parse("/x", r#"{"ext": {"overrides": "all"}}"#).is_err());
}

#[test]
fn claude_rules_match_a_name_an_exact_command_line_or_a_url_pattern() {
    let s = parse_claude_policy(
        "/etc/claude-code/managed-settings.json",
        r#"{"deniedMcpServers": [{"serverName": "bad"}, {"serverCommand": ["npx", "evil"]},
                                  {"serverUrl": "https://*.untrusted.com/*"}]}"#,
    )
    .unwrap();
    let mut p = ClientPolicies::default();
    p.claude.add(s, true, false);
    let claude = meta("claude-code", "/h/.claude.json");
    let blocked = |name: &str, c: &ServerConfig| p.blocked(name, &claude, c);
    let denied = Some(RejectedBy::ClaudeDeniedMcpServers);
    assert_eq!(blocked("bad", &ServerConfig::stdio("x", &[])), denied);
    assert_eq!(blocked("a", &ServerConfig::stdio("npx", &["evil"])), denied);
    assert_eq!(
        blocked("a", &ServerConfig::stdio("npx", &["evil", "--more"])),
        None
    );
    assert_eq!(
        blocked("a", &ServerConfig::http("https://x.untrusted.com/mcp")),
        denied
    );
    assert_eq!(
        blocked("a", &ServerConfig::http("https://untrusted.com.evil/mcp")),
        None
    );
    // Another client's server is not Claude Code's to refuse.
    let cursor = meta("cursor", "/h/.cursor/mcp.json");
    assert_eq!(
        p.blocked("bad", &cursor, &ServerConfig::stdio("x", &[])),
        None
    );
    // A malformed entry is an error, not an empty list.
    assert!(parse_claude_policy("/s", r#"{"deniedMcpServers": [{"serverNam": "x"}]}"#).is_err());
}

#[test]
fn an_empty_allow_list_admits_nothing_and_an_absent_one_everything() {
    let mut p = ClientPolicies::default();
    let claude = meta("claude-code", "/h/.claude.json");
    let c = ServerConfig::stdio("x", &[]);
    assert_eq!(p.blocked("s", &claude, &c), None);
    let s = parse_claude_policy("/m", r#"{"allowedMcpServers": []}"#).unwrap();
    p.claude.add(s, true, false);
    assert_eq!(
        p.blocked("s", &claude, &c),
        Some(RejectedBy::ClaudeNotInAllowedMcpServers)
    );
}

#[test]
fn codex_layers_merge_key_by_key_and_the_nearer_keys_win() {
    let user = "[mcp_servers.a]\ncommand = \"run\"\nargs = [\"1\"]\n[mcp_servers.a.env]\nX = \"u\"\nY = \"u\"\n[mcp_servers.only_user]\ncommand = \"u\"\n";
    let project = "[mcp_servers.a]\nargs = [\"2\"]\n[mcp_servers.a.env]\nY = \"p\"\n";
    let below = vec![("/h/.codex/config.toml".to_string(), user.to_string())];
    let doc = parse_layer_over("/p/.codex/config.toml", project, Dialect::Toml, &below).unwrap();
    assert_eq!(doc.servers.len(), 1, "only the entries this layer names");
    let a = &doc.servers[0].1;
    assert_eq!(a.command.as_deref(), Some("run"));
    assert_eq!(a.args, ["2"], "arrays are replaced, not appended");
    assert_eq!(a.env["X"], "u");
    assert_eq!(a.env["Y"], "p");
}

#[test]
fn opencodes_servers_shape_replaces_an_entry_whole() {
    let below = vec![(
        "/h/opencode.json".to_string(),
        r#"{"mcp": {"servers": {"s": {"type": "local", "command": ["a"], "environment": {"X": "1"}}}}}"#
            .to_string(),
    )];
    let doc = parse_layer_over(
        "/p/opencode.json",
        r#"{"mcp": {"servers": {"s": {"type": "remote", "url": "https://x/mcp"}}}}"#,
        Dialect::Opencode,
        &below,
    )
    .unwrap();
    let s = &doc.servers[0].1;
    assert!(s.command.is_none() && s.env.is_empty());
    assert_eq!(s.url.as_deref(), Some("https://x/mcp"));
}

#[test]
fn read_values_win_over_the_environment_and_never_show() {
    let mut c = ServerConfig::stdio("run", &["${file:/t}"]);
    c.values = ReadValues([("file:/t".to_string(), "fresh".to_string())].into());
    let env = [("file:/t".to_string(), "stale".to_string())].into();
    match resolve("s", &c, &env).unwrap() {
        TransportConfig::Stdio { args, .. } => assert_eq!(args, ["fresh"]),
        other => panic!("{other:?}"),
    }
    assert!(!format!("{c:?}").contains("fresh"));
    assert_eq!(
        config_hash(&c),
        config_hash(&ServerConfig::stdio("run", &["${file:/t}"]))
    );
}
