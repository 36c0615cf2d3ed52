//! Config documents and merging: properties over generated documents and sources.

use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use switchboard_core::config::{
    merge, parse_claude_json, parse_document, validate, ConfigError, FilterOptions, ServerConfig,
    Source, SourceLevel, SourceMeta,
};

/// Strings that stress the JSONC comment/trailing-comma scanner as well as ordinary text.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,12}",
        "[/*,}\\]\"\\\\ \n${}:-]{0,8}",
        "[a-z0-9_.-]{1,10}",
    ]
}

fn simple_value() -> impl Strategy<Value = Value> {
    // No floats: serde_json without `float_roundtrip` may be one ULP off, which would be a
    // property of serde_json, not of ours.
    prop_oneof![
        text().prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        prop::collection::btree_map("[a-z]{1,4}", text(), 0..3)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k, v.into())).collect())),
    ]
}

fn server_config() -> impl Strategy<Value = ServerConfig> {
    let kind = prop::option::of(prop_oneof![
        Just("stdio".to_string()),
        Just("http".to_string()),
        Just("sse".to_string()),
        Just("streamable-http".to_string()),
        text(),
    ]);
    let map = || prop::collection::btree_map("[A-Za-z_][A-Za-z0-9_-]{0,6}", text(), 0..3);
    (
        (
            kind,
            prop::option::of(text()),
            prop::collection::vec(text(), 0..4),
            map(),
        ),
        (
            prop::option::of(text()),
            prop::option::of(text()),
            map(),
            any::<bool>(),
        ),
        (
            prop::option::of(any::<i64>()),
            prop::option::of(simple_value()),
            // Unknown fields: any name that is not a field or an alias of one.
            prop::collection::btree_map("x_[a-z]{1,6}", simple_value(), 0..3),
        ),
    )
        .prop_map(
            |(
                (kind, command, args, env),
                (cwd, url, headers, enabled),
                (timeout_ms, auth, extra),
            )| ServerConfig {
                kind,
                command,
                args,
                env,
                cwd,
                url,
                headers,
                enabled,
                timeout_ms,
                call_timeout_ms: None,
                auth,
                enabled_tools: None,
                disabled_tools: Vec::new(),
                extra,
                values: Default::default(),
            },
        )
}

/// Fragments of config-shaped JSON and TOML, so generated garbage reaches the entry parser
/// and not only the tokenizer.
fn config_ish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{"),
        Just("}"),
        Just("["),
        Just("]"),
        Just(":"),
        Just(","),
        Just("\"mcpServers\""),
        Just("\"servers\""),
        Just("\"command\""),
        Just("\"args\""),
        Just("\"timeout\""),
        Just("\"url\""),
        Just("\"httpUrl\""),
        Just("\"env\""),
        Just("\"x\""),
        Just("1.5"),
        Just("-7"),
        Just("null"),
        Just("true"),
        Just("//"),
        Just("/*"),
        Just("*/"),
        Just("\n"),
        Just("[mcp_servers.a]"),
        Just("="),
        Just("startup_timeout_sec"),
        Just("\"\\u12"),
        Just("\u{feff}"),
        Just("é"),
    ];
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

const PATHS: [&str; 4] = [
    "a.json",
    "a.toml",
    "/h/.gemini/settings.json",
    "/p/.vscode/mcp.json",
];

proptest! {
    // Invariant: no input text, however broken, makes parsing panic; it returns a document
    // or an error. (Config files come from outside.)
    #[test]
    fn parsing_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        for path in PATHS {
            let _ = parse_document(path, &text);
        }
        let _ = parse_claude_json("/h/.claude.json", &text, Some("/p"));
    }

    #[test]
    fn parsing_never_panics_on_config_shaped_text(text in config_ish()) {
        for path in PATHS {
            if let Ok(doc) = parse_document(path, &text) {
                // Whatever parsed validates or gives an error; never a panic.
                for (name, config) in &doc.servers {
                    let _ = validate(name, config);
                }
            }
        }
        let _ = parse_claude_json("/h/.claude.json", &text, Some("/p"));
    }

    // Invariant: serializing any set of server configs as `{"mcpServers": {...}}` and parsing
    // it back gives the same servers, in name order, with no errors.
    #[test]
    fn generated_documents_round_trip(
        servers in prop::collection::btree_map("[A-Za-z0-9_.-]{1,12}", server_config(), 0..5),
        vscode in any::<bool>(),
    ) {
        let key = if vscode { "servers" } else { "mcpServers" };
        let text = serde_json::to_string_pretty(&serde_json::json!({ key: &servers })).unwrap();
        let doc = parse_document("/p/.mcp.json", &text).unwrap();
        prop_assert_eq!(&doc.errors, &Vec::<ConfigError>::new());
        let expected: Vec<(String, ServerConfig)> = servers.into_iter().collect();
        prop_assert_eq!(doc.servers, expected);
    }

    // Invariants: merging is a function of its input (same input, same output); every server
    // that runs comes from the first enabled-for-filtering source naming it; the output is
    // sorted by name without duplicates; every entry is accounted for exactly once (run,
    // skipped, invalid, or shadowed).
    #[test]
    fn merge_is_deterministic_and_the_first_source_wins(
        raw in prop::collection::vec(
            (any::<bool>(), prop::collection::vec((prop_oneof![
                Just("a"), Just("b"), Just("c"), Just("bad name"), Just("exa")
            ], 0u8..4), 0..4)),
            0..6,
        ),
        project_configs in any::<bool>(),
        deny_exa in any::<bool>(),
        trust_project in any::<bool>(),
    ) {
        let sources: Vec<Source> = raw
            .iter()
            .enumerate()
            .map(|(i, (project, servers))| Source::new(
                SourceMeta {
                    provider: format!("p{i}"),
                    level: if *project { SourceLevel::Project } else { SourceLevel::User },
                    path: format!("/src{i}.json"),
                },
                servers.iter().map(|(name, shape)| {
                    let mut c = ServerConfig::stdio(format!("from-{i}"), &[]);
                    match shape {
                        0 => c.enabled = false,
                        1 => c.url = Some("https://x".into()), // invalid: both set
                        _ => {}
                    }
                    (name.to_string(), c)
                }).collect(),
            ))
            .collect();
        let options = FilterOptions {
            project_configs,
            deny: if deny_exa { switchboard_core::config::DenyList::exa() } else { Default::default() },
            approvals: switchboard_core::config::Approvals { trust_project, ..Default::default() },
        };
        let once = merge(sources.clone(), &options);
        let twice = merge(sources.clone(), &options);
        prop_assert_eq!(&once, &twice);

        let names: Vec<&str> = once.servers.iter().map(|s| s.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(&names, &sorted);

        let mut first: BTreeMap<&str, &SourceMeta> = BTreeMap::new();
        let mut entries = 0;
        let mut dropped = 0;
        for s in &sources {
            if s.meta.level == SourceLevel::Project && !project_configs {
                dropped += s.servers.len();
                continue;
            }
            for (name, _) in &s.servers {
                entries += 1;
                first.entry(name.as_str()).or_insert(&s.meta);
            }
        }
        for spec in &once.servers {
            // Nothing from a project runs unapproved.
            prop_assert!(trust_project || spec.source.level == SourceLevel::User);
            prop_assert_eq!(Some(&&spec.source), first.get(spec.name.as_str()));
            prop_assert_eq!(spec.config.command.clone(), Some(format!("from-{}", &spec.source.provider[1..])));
        }
        for sh in &once.shadowed {
            prop_assert_eq!(Some(&&sh.winner), first.get(sh.server.as_str()));
        }
        for a in &once.awaiting {
            prop_assert_eq!(a.source.level, SourceLevel::Project);
            prop_assert_eq!(Some(&&a.source), first.get(a.server.as_str()));
        }
        prop_assert_eq!(
            once.servers.len() + once.skipped.len() + once.errors.len() + once.shadowed.len()
                + once.awaiting.len(),
            entries + dropped
        );
    }
}

/// The messages of the validation errors users meet most, word for word as users see them, both
/// from `validate` and through a parsed document merged with a good entry (which survives).
#[test]
fn validation_errors_use_the_exact_messages_and_spare_the_other_servers() {
    let msg = |name: &str, c: &ServerConfig| validate(name, c).unwrap_err().to_string();

    let http = ServerConfig {
        kind: Some("http".into()),
        ..ServerConfig::default()
    };
    assert_eq!(
        msg("web", &http),
        r#"Server "web": http server requires "url" field"#
    );
    let typed = ServerConfig {
        kind: Some("streamable-http".into()),
        url: Some(String::new()),
        ..ServerConfig::default()
    };
    assert_eq!(
        msg("web", &typed),
        r#"Server "web": http server requires "url" field"#
    );

    let good = ServerConfig::stdio("x", &[]);
    assert_eq!(
        msg("bad name!", &good),
        r#"Server "bad name!": invalid server name (use 1-64 letters, digits, '-', '_' or '.')"#
    );
    assert_eq!(
        msg("", &good),
        r#"Server "": invalid server name (use 1-64 letters, digits, '-', '_' or '.')"#
    );
    let long = "a".repeat(65);
    assert!(msg(&long, &good)
        .ends_with("invalid server name (use 1-64 letters, digits, '-', '_' or '.')"));
    assert!(
        validate(&"a".repeat(64), &good).is_ok(),
        "64 characters are allowed"
    );

    for ms in [0, -5] {
        let mut c = good.clone();
        c.timeout_ms = Some(ms);
        assert_eq!(
            msg("slow", &c),
            format!(
                r#"Server "slow": "timeout" must be a positive number of milliseconds, got {ms}"#
            )
        );
    }

    // Through a document and a merge: one error per bad server, the good one kept.
    let doc = parse_document(
        "/home/u/.mcp.json",
        r#"{"mcpServers": {
            "web": {"type": "http"},
            "bad name!": {"command": "x"},
            "slow": {"command": "x", "timeout": 0},
            "ok": {"command": "x"}
        }}"#,
    )
    .unwrap();
    let parse_errors: Vec<String> = doc.errors.iter().map(ToString::to_string).collect();
    let merged = merge(
        vec![Source::new(
            SourceMeta {
                provider: "claude-code".into(),
                level: SourceLevel::Project,
                path: "/home/u/.mcp.json".into(),
            },
            doc.servers,
        )],
        // Validation, not trust: the project is approved.
        &FilterOptions {
            approvals: switchboard_core::config::Approvals {
                trust_project: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let names: Vec<&str> = merged.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ok"]);
    let mut errors: Vec<String> = merged.errors.iter().map(|e| e.error.to_string()).collect();
    errors.extend(parse_errors);
    errors.sort();
    assert_eq!(
        errors,
        [
            r#"Server "bad name!": invalid server name (use 1-64 letters, digits, '-', '_' or '.')"#,
            r#"Server "slow": "timeout" must be a positive number of milliseconds, got 0"#,
            r#"Server "web": http server requires "url" field"#,
        ]
    );
}
