use super::*;
use std::collections::BTreeMap;

fn ctx() -> InterpolationContext {
    InterpolationContext {
        env: [("SET", "value"), ("EMPTY", ""), ("HOME", "/home/u")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        workspace: Some("/work/proj".into()),
        home: Some("/home/u".into()),
        ..Default::default()
    }
}

fn meta(provider: &str, path: &str) -> SourceMeta {
    SourceMeta {
        provider: provider.into(),
        level: SourceLevel::Project,
        path: path.into(),
    }
}

fn run(provider: &str, path: &str, text: &str, ctx: &InterpolationContext) -> Interpolated {
    let dialect = match provider {
        "codex" => Dialect::Toml,
        "gemini" => Dialect::Gemini,
        "opencode" => Dialect::Opencode,
        _ => Dialect::Json,
    };
    let doc = parse_document_as(path, text, dialect).unwrap();
    interpolate(meta(provider, path), doc, ctx)
}

fn server<'a>(i: &'a Interpolated, name: &str) -> &'a ServerConfig {
    &i.source.servers.iter().find(|(n, _)| n == name).unwrap().1
}

/// The value the manager will hand the server for `text` (Switchboard's syntax).
fn expanded(text: &str, ctx: &InterpolationContext, extra: &BTreeMap<String, String>) -> String {
    let mut vars = ctx.env.clone();
    vars.extend(extra.clone());
    expand_vars(text, &vars)
}

#[test]
fn claude_code_keeps_an_unset_variable_as_written_and_warns() {
    let c = ctx();
    let i = run(
        "claude-code",
        "/work/proj/.mcp.json",
        r#"{"mcpServers": {"api": {"type": "http",
            "url": "${BASE:-https://api.example.com}/mcp",
            "headers": {"Authorization": "Bearer ${API_KEY}", "X": "${SET} $SET"}}}}"#,
        &c,
    );
    let s = server(&i, "api");
    let v = &i.variables;
    assert_eq!(
        expanded(s.url.as_ref().unwrap(), &c, v),
        "https://api.example.com/mcp"
    );
    assert_eq!(
        expanded(&s.headers["Authorization"], &c, v),
        "Bearer ${API_KEY}"
    );
    // A bare `$VAR` is never expanded by Claude Code.
    assert_eq!(expanded(&s.headers["X"], &c, v), "value $SET");
    assert_eq!(
        i.warnings
            .iter()
            .map(|w| w.kind.clone())
            .collect::<Vec<_>>(),
        [WarningKind::KeptLiteral {
            field: "headers.Authorization".into(),
            variable: "API_KEY".into()
        }]
    );
}

#[test]
fn cursor_and_vscode_variables_and_the_same_text_in_codex_is_literal() {
    let c = ctx();
    let cursor = run(
        "cursor",
        "/work/proj/.cursor/mcp.json",
        r#"{"mcpServers": {"local": {"command": "python",
            "args": ["${workspaceFolder}/tools/mcp_server.py", "${userHome}${/}x", "${SET}"],
            "env": {"API_KEY": "${env:SET}", "NONE": "${env:MISSING}"}, "cwd": "srv"}}}"#,
        &c,
    );
    let s = server(&cursor, "local");
    let v = &cursor.variables;
    let args: Vec<String> = s.args.iter().map(|a| expanded(a, &c, v)).collect();
    assert_eq!(
        args,
        ["/work/proj/tools/mcp_server.py", "/home/u/x", "${SET}"]
    );
    assert_eq!(expanded(&s.env["API_KEY"], &c, v), "value");
    assert_eq!(expanded(&s.env["NONE"], &c, v), "");
    assert_eq!(s.cwd.as_deref(), Some("/work/proj/srv"));
    let kinds: Vec<_> = cursor.warnings.iter().map(|w| w.kind.clone()).collect();
    assert!(kinds.contains(&WarningKind::EmptyVariable {
        field: "env.NONE".into(),
        variable: "MISSING".into()
    }));
    assert!(kinds.contains(&WarningKind::UnsupportedVariable {
        field: "args[2]".into(),
        text: "${SET}".into()
    }));
    let codex = run(
        "codex",
        "/home/u/.codex/config.toml",
        "[mcp_servers.c]\ncommand = \"srv\"\nargs = [\"${SET}\", \"${env:SET}\"]\n\
         env_vars = [\"SET\", \"MISSING\", { name = \"R\", source = \"remote\" }]\n",
        &c,
    );
    let s = server(&codex, "c");
    let args: Vec<String> = s
        .args
        .iter()
        .map(|a| expanded(a, &c, &BTreeMap::new()))
        .collect();
    assert_eq!(args, ["${SET}", "${env:SET}"]);
    // `env_vars` forwards what is set.
    assert_eq!(expanded(&s.env["SET"], &c, &BTreeMap::new()), "value");
    assert!(!s.env.contains_key("MISSING"));
}

#[test]
fn gemini_bare_variables_and_relative_cwd() {
    let c = ctx();
    let i = run(
        "gemini",
        "/work/proj/.gemini/settings.json",
        r#"{"mcpServers": {"pythonTools": {"command": "python",
            "args": ["-m", "my_mcp_server"], "cwd": "./mcp-servers/python",
            "env": {"DATABASE_URL": "$SET", "API_KEY": "${EXTERNAL_API_KEY}"},
            "timeout": 15000}}}"#,
        &c,
    );
    let s = server(&i, "pythonTools");
    assert_eq!(s.cwd.as_deref(), Some("/work/proj/mcp-servers/python"));
    assert_eq!(expanded(&s.env["DATABASE_URL"], &c, &i.variables), "value");
    assert_eq!(expanded(&s.env["API_KEY"], &c, &i.variables), "");
    assert_eq!(s.call_timeout_ms, Some(15000));
    assert_eq!(i.warnings.len(), 1, "{:?}", i.warnings);
}

#[test]
fn vscode_inputs_are_asked_for_and_answered() {
    let text = r#"{"inputs": [{"type": "promptString", "id": "perplexity-key",
        "description": "Perplexity API Key", "password": true}],
      "servers": {"perplexity": {"type": "stdio", "command": "npx",
        "args": ["-y", "server-perplexity-ask"],
        "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}}}}"#;
    let mut c = ctx();
    let unanswered = run("vscode", "/work/proj/.vscode/mcp.json", text, &c);
    assert!(unanswered.source.servers.is_empty());
    assert_eq!(unanswered.inputs_needed.len(), 1);
    assert_eq!(unanswered.inputs_needed[0].id, "perplexity-key");
    assert!(unanswered.inputs_needed[0].password);
    let message = unanswered.source.errors[0].to_string();
    assert!(message.contains("${input:perplexity-key}"), "{message}");
    assert!(message.contains("terminal"), "{message}");
    c.inputs.insert("perplexity-key".into(), "s3cret".into());
    let answered = run("vscode", "/work/proj/.vscode/mcp.json", text, &c);
    let s = server(&answered, "perplexity");
    // The config keeps the reference (the answer is not part of its hash or its report).
    assert_eq!(s.env["PERPLEXITY_API_KEY"], "${input:perplexity-key}");
    assert_eq!(
        expanded(&s.env["PERPLEXITY_API_KEY"], &c, &answered.variables),
        "s3cret"
    );
}

#[test]
fn env_files_and_file_variables_are_read_by_the_shell_in_a_second_pass() {
    let mut c = ctx();
    let text = r#"{"mcpServers": {"s": {"command": "srv", "envFile": "${workspaceFolder}/.env",
        "env": {"A": "config wins"}},
      "w": {"serverUrl": "https://x/mcp", "headers": {"K": "${file:/secrets/k}"}}}}"#;
    let first = run("cursor", "/work/proj/.cursor/mcp.json", text, &c);
    assert_eq!(first.files_needed, ["/work/proj/.env"]);
    c.files.insert(
        "/work/proj/.env".into(),
        Ok("# c\nexport A=1\nB=\"two words\"\nC=x ${Y} # note\n".into()),
    );
    let second = run("cursor", "/work/proj/.cursor/mcp.json", text, &c);
    assert!(second.files_needed.is_empty());
    let s = server(&second, "s");
    let env: BTreeMap<_, _> = (s.env.iter())
        .map(|(k, v)| (k.as_str(), expanded(v, &c, &second.variables)))
        .collect();
    assert_eq!(
        env,
        BTreeMap::from([
            ("A", "config wins".to_string()),
            ("B", "two words".to_string()),
            ("C", "x ${Y}".to_string()),
        ])
    );
    // `${file:…}` is Windsurf's: in a Cursor file it is kept, with a warning.
    assert!(second.warnings.iter().any(|w| matches!(
        &w.kind,
        WarningKind::UnsupportedVariable { text, .. } if text == "${file:/secrets/k}"
    )));
    let windsurf = "/home/u/.codeium/windsurf/mcp_config.json";
    let w = run("windsurf", windsurf, text, &c);
    assert_eq!(w.files_needed, ["/secrets/k"]);
    c.files.insert("/secrets/k".into(), Ok("tok\n".into()));
    let w = run("windsurf", windsurf, text, &c);
    let s = server(&w, "w");
    assert_eq!(expanded(&s.headers["K"], &c, &w.variables), "tok");
    // Windsurf has no `envFile`: reported, not read.
    assert!(w.warnings.iter().any(|x| x.kind
        == WarningKind::IgnoredField {
            field: "envFile".into()
        }));
    c.files.insert(
        "/work/proj/.env".into(),
        Err("not a regular file (a FIFO)".into()),
    );
    let broken = run("cursor", "/work/proj/.cursor/mcp.json", text, &c);
    assert!(broken.source.errors[0].to_string().contains("FIFO"));
}

#[test]
fn opencode_both_shapes_and_its_variables() {
    let c = ctx();
    let v1 = run(
        "opencode",
        "/work/proj/opencode.jsonc",
        r#"{"$schema": "https://opencode.ai/config.json", "mcp": {
            "my-local-mcp-server": {"type": "local", "command": ["npx", "-y", "my-mcp-command"],
              "enabled": true, "environment": {"MY_ENV_VAR": "{env:SET}", "S": "$SET"}},
            "r": {"type": "remote", "url": "https://mcp.example.com/mcp", "enabled": false}}}"#,
        &c,
    );
    let s = server(&v1, "my-local-mcp-server");
    assert_eq!(s.command.as_deref(), Some("npx"));
    assert_eq!(s.args, ["-y", "my-mcp-command"]);
    assert_eq!(expanded(&s.env["MY_ENV_VAR"], &c, &v1.variables), "value");
    assert_eq!(expanded(&s.env["S"], &c, &v1.variables), "$SET");
    assert!(!server(&v1, "r").enabled);
    assert_eq!(
        server(&v1, "r").transport_kind(),
        Ok(super::TransportKind::Http)
    );
    let v2 = run(
        "opencode",
        "/work/proj/opencode.json",
        r#"{"mcp": {"servers": {"my-server": {"type": "local",
            "command": ["npx", "-y", "example-mcp-server"], "disabled": true}}}}"#,
        &c,
    );
    let s = server(&v2, "my-server");
    assert_eq!(s.command.as_deref(), Some("npx"));
    assert!(!s.enabled);
}

#[test]
fn a_bang_value_in_another_clients_file_stays_text() {
    let c = ctx();
    for (provider, path) in [
        ("cursor", "/work/proj/.cursor/mcp.json"),
        ("claude-code", "/work/proj/.mcp.json"),
        ("vscode", "/work/proj/.vscode/mcp.json"),
    ] {
        let i = run(
            provider,
            path,
            r#"{"mcpServers": {"s": {"command": "x", "env": {"P": "!touch /tmp/pwned"}}}}"#,
            &c,
        );
        // `!!` is the literal `!`: the shell never runs it.
        assert_eq!(server(&i, "s").env["P"], "!!touch /tmp/pwned", "{provider}");
    }
    let own = run(
        "switchboard",
        "/work/proj/.switchboard/mcp.json",
        r#"{"mcpServers": {"s": {"command": "x", "env": {"P": "!pass show x", "Q": "${NOPE}"}}}}"#,
        &c,
    );
    assert_eq!(server(&own, "s").env["P"], "!pass show x");
    assert_eq!(server(&own, "s").env["Q"], "${NOPE}");
    assert_eq!(own.warnings.len(), 1);
}

#[test]
fn fields_read_but_not_applied_are_warnings_credentials_excepted() {
    let c = ctx();
    let i = run(
        "claude-code",
        "/work/proj/.mcp.json",
        r#"{"mcpServers": {"s": {"type": "http", "url": "https://x", "alwaysLoad": true,
            "headersHelper": "/opt/h.sh", "oauth": {"scopes": "a b"}}}}"#,
        &c,
    );
    let kinds: Vec<_> = i.warnings.iter().map(|w| w.kind.clone()).collect();
    assert_eq!(
        kinds,
        [WarningKind::IgnoredField {
            field: "alwaysLoad".into()
        }]
    );
}

#[test]
fn env_file_lines() {
    assert_eq!(
        parse_env_file("A=1\n\n# x\nexport B='q $x'\nnot a line\n9X=bad\nC=\"a\\nb\"\n"),
        [
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "q $x".to_string()),
            ("C".to_string(), "a\nb".to_string()),
        ]
    );
}

#[test]
fn switchboard_syntax_escapes_a_literal() {
    let env = BTreeMap::from([("A".to_string(), "1".to_string())]);
    assert_eq!(expand_vars("$${A} ${A} $$x $", &env), "${A} 1 $$x $");
}

proptest::proptest! {
    /// Any text, in any client's syntax, translates without panicking, and what comes out
    /// expands without panicking.
    #[test]
    fn any_text_in_any_syntax_translates(text in "[$\\{}a-zA-Z_:/!.~ -]{0,40}|\\PC{0,40}") {
        let c = ctx();
        for provider in ["switchboard", "claude-code", "gemini", "goose", "cursor", "vscode",
                         "roo", "windsurf", "opencode", "codex"] {
            let config = ServerConfig {
                command: Some(text.clone()),
                args: vec![text.clone()],
                env: BTreeMap::from([("E".to_string(), text.clone())]),
                cwd: Some(text.clone()),
                ..ServerConfig::default()
            };
            let doc = ParsedDocument {
                servers: vec![("s".into(), config)],
                ..ParsedDocument::default()
            };
            let out = interpolate(meta(provider, "/work/proj/x.json"), doc, &c);
            for (_, config) in &out.source.servers {
                let _ = expand_vars(config.command.as_deref().unwrap_or(""), &c.env);
            }
        }
    }
}
