//! Tests of config parsing, validation, expansion, hashing and merging, through the
//! module's public paths.

use super::*;
use serde_json::Value;
use std::collections::BTreeMap;

#[test]
fn validation_messages_match_the_documented_wording() {
    let mut both = ServerConfig::stdio("node", &[]);
    both.url = Some("http://x".into());
    assert_eq!(
        validate("x", &both).unwrap_err().to_string(),
        r#"Server "x": both "command" and "url" are set"#
    );
    let no_cmd = ServerConfig {
        kind: Some("stdio".into()),
        ..Default::default()
    };
    assert_eq!(
        validate("x", &no_cmd).unwrap_err().to_string(),
        r#"Server "x": stdio server requires "command" field"#
    );
    let sse = ServerConfig {
        kind: Some("sse".into()),
        ..Default::default()
    };
    assert_eq!(
        validate("x", &sse).unwrap_err().to_string(),
        r#"Server "x": sse server requires "url" field"#
    );
    let mut odd = ServerConfig::stdio("a", &[]);
    odd.kind = Some("carrier-pigeon".into());
    assert_eq!(
        validate("x", &odd).unwrap_err().to_string(),
        r#"Server "x": unknown server type "carrier-pigeon""#
    );
}

#[test]
fn expansion_uses_the_given_map_and_defaults() {
    let env: BTreeMap<_, _> = [("A".to_string(), "1".to_string())].into();
    assert_eq!(expand_vars("x${A}y${B:-two}z${C}", &env), "x1ytwoz");
    assert_eq!(expand_vars("${unclosed", &env), "${unclosed");
}

#[test]
fn config_hash_is_stable_and_sensitive() {
    let a = ServerConfig::stdio("node", &["server.js"]);
    let mut b = a.clone();
    assert_eq!(config_hash(&a), config_hash(&b));
    b.args.push("--flag".into());
    assert_ne!(config_hash(&a), config_hash(&b));
    assert_eq!(config_hash(&a).len(), 64);
}

#[test]
fn config_hash_is_pinned_so_serialization_changes_are_noticed() {
    // SHA-256 of `{"args":["server.js"],"command":"node"}`. If this changes, every user's
    // tool cache is invalidated: change it only on purpose.
    assert_eq!(
        config_hash(&ServerConfig::stdio("node", &["server.js"])),
        "aae5909971f4c15bb28893e09f9ff19884c9578148b991864e9c45e95c6f9718"
    );
    // Keys sorted at every level, including `auth` and unknown fields.
    let mut c = ServerConfig::stdio("node", &[]);
    c.kind = Some("stdio".into());
    c.env.insert("A".into(), "1".into());
    c.timeout_ms = Some(5000);
    c.auth = Some(serde_json::json!({"b": 2, "a": 1}));
    c.extra.insert("x-extra".into(), Value::Bool(true));
    assert_eq!(
        config_hash(&c),
        "8f4f3166caf420a8ed6159664da46330d94f4258323e6de04f8d5626dda6eda5"
    );
}

fn parse_ok(path: &str, text: &str) -> ParsedDocument {
    parse_document(path, text).expect("document parses")
}

fn only(doc: &ParsedDocument) -> &ServerConfig {
    assert_eq!(doc.servers.len(), 1, "{doc:?}");
    assert!(doc.errors.is_empty(), "{doc:?}");
    &doc.servers[0].1
}

#[test]
fn mcp_servers_document_gives_every_field() {
    let doc = parse_ok(
        "/p/.mcp.json",
        r#"{"mcpServers": {"fs": {
            "type": "stdio", "command": "npx", "args": ["-y", "fs", 3], "env": {"A": "1", "PORT": 80},
            "cwd": "/tmp", "enabled": true, "timeout": 5000, "auth": {"kind": "oauth"},
            "alwaysAllow": ["read"]
        }}}"#,
    );
    let c = only(&doc);
    assert_eq!(c.kind.as_deref(), Some("stdio"));
    assert_eq!(c.command.as_deref(), Some("npx"));
    assert_eq!(c.args, ["-y", "fs", "3"]);
    assert_eq!(c.env.get("PORT").map(String::as_str), Some("80"));
    assert_eq!(c.cwd.as_deref(), Some("/tmp"));
    assert_eq!(c.timeout_ms, Some(5000));
    assert_eq!(c.auth, Some(serde_json::json!({"kind": "oauth"})));
    assert_eq!(
        c.extra.get("alwaysAllow"),
        Some(&serde_json::json!(["read"]))
    );
}

#[test]
fn servers_are_returned_in_name_order() {
    let doc = parse_ok(
        "a.json",
        r#"{"mcpServers": {"zeta": {"command": "z"}, "alpha": {"command": "a"}}}"#,
    );
    let names: Vec<_> = doc.servers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["alpha", "zeta"]);
}

#[test]
fn vscode_servers_key_with_inputs_and_comments_is_accepted() {
    let doc = parse_ok(
        "/p/.vscode/mcp.json",
        "{\n  // VS Code allows comments\n  \"inputs\": [{\"id\": \"key\"}],\n  \"servers\": {\n    \"gh\": {\"type\": \"http\", \"url\": \"https://x/mcp\", /* c */ \"envFile\": \".env\",},\n  },\n}",
    );
    let c = only(&doc);
    assert_eq!(c.transport_kind(), Ok(TransportKind::Http));
    assert_eq!(c.extra.get("envFile"), Some(&Value::String(".env".into())));
}

#[test]
fn comment_markers_inside_strings_are_kept() {
    let doc = parse_ok(
        "a.json",
        r#"{"mcpServers": {"w": {"url": "https://x//y/*z*/", "headers": {"a": "b,}"}}}}"#,
    );
    let c = only(&doc);
    assert_eq!(c.url.as_deref(), Some("https://x//y/*z*/"));
    assert_eq!(c.headers.get("a").map(String::as_str), Some("b,}"));
}

#[test]
fn streamable_http_spellings_mean_http() {
    for t in ["streamable-http", "streamableHttp", "http"] {
        let doc = parse_ok(
            "a.json",
            &format!(r#"{{"mcpServers": {{"s": {{"type": "{t}", "url": "https://x"}}}}}}"#),
        );
        assert_eq!(only(&doc).transport_kind(), Ok(TransportKind::Http), "{t}");
    }
}

#[test]
fn type_is_inferred_from_command_or_url() {
    let doc = parse_ok(
        "a.json",
        r#"{"mcpServers": {"a": {"command": "x"}, "b": {"url": "https://x"}}}"#,
    );
    assert_eq!(doc.servers[0].1.transport_kind(), Ok(TransportKind::Stdio));
    assert_eq!(doc.servers[1].1.transport_kind(), Ok(TransportKind::Http));
}

#[test]
fn gemini_plain_url_is_http_with_fallback_and_http_url_is_http() {
    // Gemini CLI tries Streamable HTTP first for a `url` without `type`, then SSE: so does
    // the HTTP transport.
    let doc = parse_ok(
        "/home/u/.gemini/settings.json",
        r#"{"theme": "dark", "mcpServers": {
            "a": {"url": "https://a/sse"},
            "b": {"httpUrl": "https://b/mcp", "timeout": 1000},
            "c": {"url": "https://c/sse", "httpUrl": "https://c/mcp"}
        }}"#,
    );
    assert!(doc.errors.is_empty());
    let kinds: Vec<_> = doc
        .servers
        .iter()
        .map(|(_, c)| (c.transport_kind(), c.url.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        kinds,
        [
            (Ok(TransportKind::Http), "https://a/sse".to_string()),
            (Ok(TransportKind::Http), "https://b/mcp".to_string()),
            (Ok(TransportKind::Http), "https://c/mcp".to_string()),
        ]
    );
    // Outside Gemini a plain url is Streamable HTTP.
    let doc = parse_ok(
        "/p/.cursor/mcp.json",
        r#"{"mcpServers": {"a": {"url": "https://a"}}}"#,
    );
    assert_eq!(only(&doc).transport_kind(), Ok(TransportKind::Http));
}

#[test]
fn windsurf_server_url_and_cline_disabled_are_understood() {
    let doc = parse_ok(
        "mcp_config.json",
        r#"{"mcpServers": {"w": {"serverUrl": "https://w", "disabled": true}}}"#,
    );
    let c = only(&doc);
    assert_eq!(c.url.as_deref(), Some("https://w"));
    assert!(!c.enabled);
}

#[test]
fn codex_toml_maps_its_own_spellings() {
    let doc = parse_ok(
        "/home/u/.codex/config.toml",
        r#"
model = "o3"

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "4000"]
env = { TOKEN = "x" }
startup_timeout_sec = 12.5
tool_timeout_sec = 60

[mcp_servers.remote]
url = "https://r/mcp"
http_headers = { "X-Key" = "k" }
startup_timeout_ms = 3000
enabled = false
"#,
    );
    assert!(doc.errors.is_empty(), "{doc:?}");
    let docs = &doc.servers[0].1;
    assert_eq!(doc.servers[0].0, "docs");
    assert_eq!(docs.timeout_ms, Some(12_500));
    assert_eq!(docs.args, ["--port", "4000"]);
    // The per-call limit, in seconds there.
    assert_eq!(docs.call_timeout_ms, Some(60_000));
    assert!(docs.extra.is_empty());
    let remote = &doc.servers[1].1;
    assert_eq!(remote.headers.get("X-Key").map(String::as_str), Some("k"));
    assert_eq!(remote.timeout_ms, Some(3000));
    assert!(!remote.enabled);
    assert_eq!(remote.transport_kind(), Ok(TransportKind::Http));
}

#[test]
fn canonical_field_wins_over_an_alias_which_stays_in_extra() {
    let doc = parse_ok(
        "a.json",
        r#"{"mcpServers": {"s": {"url": "https://a", "serverUrl": "https://b", "timeout": 10, "startup_timeout_sec": 3}}}"#,
    );
    let c = only(&doc);
    assert_eq!(c.url.as_deref(), Some("https://a"));
    assert_eq!(c.timeout_ms, Some(10));
    assert!(c.extra.contains_key("serverUrl"));
    assert!(c.extra.contains_key("startup_timeout_sec"));
}

#[test]
fn one_malformed_entry_does_not_fail_the_document() {
    let doc = parse_ok(
        "a.json",
        r#"{"mcpServers": {
            "bad-args": {"command": "x", "args": "not-a-list"},
            "bad-entry": 7,
            "bad-env": {"command": "x", "env": {"A": []}},
            "good": {"command": "x"}
        }}"#,
    );
    assert_eq!(doc.servers.len(), 1);
    assert_eq!(doc.servers[0].0, "good");
    let messages: Vec<_> = doc.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            r#"Server "bad-args": "args" must be an array of strings, got a string"#,
            r#"Server "bad-entry": the entry must be an object, got a number"#,
            r#"Server "bad-env": "env"."A" must be a string, got an array"#,
        ]
    );
}

#[test]
fn a_timeout_that_is_not_whole_milliseconds_is_a_server_error() {
    let doc = parse_ok(
        "a.json",
        r#"{"mcpServers": {
            "f": {"command": "x", "timeout": 1.5},
            "s": {"command": "x", "timeout": "soon"},
            "n": {"command": "x", "timeout": "2500"},
            "w": {"command": "x", "timeout": 3000.0}
        }}"#,
    );
    let ok: Vec<_> = doc
        .servers
        .iter()
        .map(|(n, c)| (n.as_str(), c.timeout_ms))
        .collect();
    assert_eq!(ok, [("n", Some(2500)), ("w", Some(3000))]);
    let messages: Vec<_> = doc.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            r#"Server "f": "timeout" must be a whole number of milliseconds, got 1.5"#,
            r#"Server "s": "timeout" must be a whole number of milliseconds, got "soon""#,
        ]
    );
}

#[test]
fn empty_and_whitespace_documents_are_empty_configs() {
    for text in ["", "  \n\t", "\u{feff}"] {
        assert_eq!(parse_ok("a.json", text), ParsedDocument::default());
        assert_eq!(parse_ok("a.toml", text), ParsedDocument::default());
    }
    assert_eq!(parse_ok("a.json", "{}"), ParsedDocument::default());
}

#[test]
fn json_syntax_error_reports_line_and_column() {
    let err = parse_document(
        "/p/.mcp.json",
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\" \"x\"}\n}",
    )
    .unwrap_err();
    match &err {
        ConfigError::Syntax {
            path,
            line,
            column,
            message,
        } => {
            assert_eq!(path, "/p/.mcp.json");
            assert_eq!((*line, *column), (3, 21));
            assert_eq!(message, "expected `:`");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.to_string(), "/p/.mcp.json:3:21: expected `:`");
}

#[test]
fn toml_syntax_error_reports_line_and_column() {
    let err =
        parse_document("c.toml", "[mcp_servers.a]\ncommand = \"x\"\nargs = [1,\n").unwrap_err();
    match err {
        ConfigError::Syntax { line, column, .. } => {
            assert!(line >= 3 && column >= 1, "{line}:{column}")
        }
        other => panic!("{other:?}"),
    }
    let err = parse_document("c.toml", "[mcp_servers.a]\ncommand = = \"x\"\n").unwrap_err();
    match err {
        ConfigError::Syntax { line, column, .. } => assert_eq!((line, column), (2, 11)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn wrong_document_shapes_are_document_errors() {
    for (path, text) in [
        ("a.json", "[1, 2]"),
        ("a.json", "\"hi\""),
        ("a.json", r#"{"mcpServers": []}"#),
        ("a.json", r#"{"servers": "x"}"#),
        ("a.toml", "mcp_servers = 3"),
    ] {
        assert!(
            matches!(
                parse_document(path, text),
                Err(ConfigError::Document { .. })
            ),
            "{text}"
        );
    }
}

#[test]
fn claude_json_has_user_and_project_servers() {
    let text = r#"{
        "numStartups": 3,
        "mcpServers": {"u": {"command": "user"}},
        "projects": {
            "/work/app/": {"mcpServers": {"p": {"command": "proj"}}},
            "/work/other": {"mcpServers": {"o": {"command": "other"}}}
        }
    }"#;
    let cj = parse_claude_json("/h/.claude.json", text, Some("/work/app")).unwrap();
    assert_eq!(cj.user.servers[0].0, "u");
    assert_eq!(cj.project.servers.len(), 1);
    assert_eq!(cj.project.servers[0].0, "p");
    let none = parse_claude_json("/h/.claude.json", text, None).unwrap();
    assert!(none.project.servers.is_empty());
    let elsewhere = parse_claude_json("/h/.claude.json", text, Some("/nope")).unwrap();
    assert!(elsewhere.project.servers.is_empty());
}

fn meta(provider: &str, level: SourceLevel) -> SourceMeta {
    SourceMeta {
        provider: provider.into(),
        level,
        path: format!("/{provider}.json"),
    }
}

#[test]
fn first_source_wins_and_every_duplicate_is_reported() {
    let a = meta("a", SourceLevel::Project);
    let b = meta("b", SourceLevel::User);
    let c = meta("c", SourceLevel::User);
    let merged = merge(
        vec![
            Source::new(
                a.clone(),
                vec![("s".into(), ServerConfig::stdio("from-a", &[]))],
            ),
            Source::new(
                b.clone(),
                vec![
                    ("s".into(), ServerConfig::stdio("from-b", &[])),
                    ("t".into(), ServerConfig::stdio("t", &[])),
                ],
            ),
            Source::new(
                c.clone(),
                vec![("s".into(), ServerConfig::stdio("from-c", &[]))],
            ),
        ],
        // Precedence, not trust: the project-level winner is approved.
        &FilterOptions {
            approvals: Approvals {
                trust_project: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let names: Vec<_> = merged.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s", "t"]);
    assert_eq!(merged.servers[0].config.command.as_deref(), Some("from-a"));
    assert_eq!(merged.servers[0].source, a);
    assert_eq!(
        merged.shadowed,
        [
            Shadowed {
                server: "s".into(),
                winner: a.clone(),
                shadowed: b
            },
            Shadowed {
                server: "s".into(),
                winner: a,
                shadowed: c
            },
        ]
    );
}

#[test]
fn invalid_servers_give_one_error_each_and_the_rest_run() {
    let src = meta("a", SourceLevel::User);
    let mut both = ServerConfig::stdio("x", &[]);
    both.url = Some("https://x".into());
    let merged = merge(
        vec![Source::new(
            src.clone(),
            vec![
                ("both".into(), both),
                ("bad name!".into(), ServerConfig::stdio("x", &[])),
                ("ok".into(), ServerConfig::stdio("x", &[])),
            ],
        )],
        &FilterOptions::default(),
    );
    assert_eq!(merged.servers.len(), 1);
    assert_eq!(merged.errors.len(), 2);
    assert_eq!(
        merged.errors[1].to_string(),
        r#"/a.json: Server "both": both "command" and "url" are set"#
    );
}

#[test]
fn a_disabled_winner_switches_the_server_off_and_is_skipped_not_an_error() {
    let top = meta("top", SourceLevel::User);
    let mut off = ServerConfig::stdio("x", &[]);
    off.enabled = false;
    // Disabled entries are not validated either.
    off.kind = Some("nonsense".into());
    let merged = merge(
        vec![
            Source::new(top.clone(), vec![("s".into(), off)]),
            Source::new(
                meta("low", SourceLevel::User),
                vec![("s".into(), ServerConfig::stdio("x", &[]))],
            ),
        ],
        &FilterOptions::default(),
    );
    assert!(merged.servers.is_empty());
    assert!(merged.errors.is_empty());
    assert_eq!(
        merged.skipped,
        [Skipped {
            server: "s".into(),
            source: top,
            reason: SkipReason::Disabled
        }]
    );
    assert_eq!(merged.shadowed.len(), 1);
}

#[test]
fn project_configs_off_drops_project_sources_before_precedence() {
    let proj = meta("proj", SourceLevel::Project);
    let user = meta("user", SourceLevel::User);
    let merged = merge(
        vec![
            Source::new(
                proj.clone(),
                vec![("s".into(), ServerConfig::stdio("p", &[]))],
            ),
            Source::new(
                user.clone(),
                vec![("s".into(), ServerConfig::stdio("u", &[]))],
            ),
        ],
        &FilterOptions {
            project_configs: false,
            ..Default::default()
        },
    );
    assert_eq!(merged.servers.len(), 1);
    assert_eq!(merged.servers[0].source, user);
    assert!(merged.shadowed.is_empty());
    assert_eq!(
        merged.skipped,
        [Skipped {
            server: "s".into(),
            source: proj,
            reason: SkipReason::ProjectConfigsOff
        }]
    );
}

#[test]
fn deny_list_removes_matching_names_and_urls() {
    let src = meta("a", SourceLevel::User);
    let options = FilterOptions {
        project_configs: true,
        deny: DenyList::exa(),
        ..Default::default()
    };
    let merged = merge(
        vec![Source::new(
            src,
            vec![
                ("exa".into(), ServerConfig::stdio("x", &[])),
                (
                    "search".into(),
                    ServerConfig::http("https://mcp.exa.ai/mcp?key=${K}"),
                ),
                ("fs".into(), ServerConfig::stdio("fs", &[])),
            ],
        )],
        &options,
    );
    let names: Vec<_> = merged.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fs"]);
    let reasons: Vec<_> = merged
        .skipped
        .iter()
        .map(|s| (s.server.as_str(), s.reason.clone()))
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "exa",
                SkipReason::DeniedName {
                    pattern: "exa".into()
                }
            ),
            (
                "search",
                SkipReason::DeniedUrl {
                    pattern: "*.exa.ai*".into()
                }
            ),
        ]
    );
}

#[test]
fn a_broken_entry_still_claims_its_name() {
    let top = meta("top", SourceLevel::User);
    let doc = parse_document("/top.json", r#"{"mcpServers": {"s": {"command": 1}}}"#).unwrap();
    let merged = merge(
        vec![
            Source::from_document(top.clone(), doc),
            Source::new(
                meta("low", SourceLevel::User),
                vec![("s".into(), ServerConfig::stdio("x", &[]))],
            ),
        ],
        &FilterOptions::default(),
    );
    assert!(merged.servers.is_empty());
    assert_eq!(merged.errors.len(), 1);
    assert_eq!(merged.errors[0].source, top);
    assert_eq!(merged.shadowed.len(), 1);
}

#[test]
fn glob_matches_whole_text_with_stars_ignoring_case() {
    assert!(glob_match("exa", "EXA"));
    assert!(!glob_match("exa", "exa2"));
    assert!(glob_match("*exa*", "my-exa-server"));
    assert!(glob_match("a*b*c", "aXXbYYc"));
    assert!(!glob_match("a*b*c", "aXXbYY"));
    assert!(glob_match("*", ""));
    assert!(glob_match("**a", "a"));
}

#[test]
fn codex_toml_written_by_the_toml_crate_round_trips() {
    let mut c = ServerConfig::stdio("node", &["a b", "${HOME}/x"]);
    c.env.insert("K".into(), "v".into());
    c.timeout_ms = Some(1500);
    c.enabled = false;
    c.extra
        .insert("x_tools".into(), serde_json::json!(["a", "b"]));
    let mut servers = BTreeMap::new();
    servers.insert("docs".to_string(), c.clone());
    let mut root = BTreeMap::new();
    root.insert("mcp_servers", servers);
    let text = toml::to_string(&root).unwrap();
    let doc = parse_ok("/h/.codex/config.toml", &text);
    assert_eq!(doc.servers, [("docs".to_string(), c)]);
}
