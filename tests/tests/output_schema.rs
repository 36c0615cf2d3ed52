//! Structured results checked against their tool's `outputSchema`: in the core (scripted,
//! with the library's checker), through the library against the demo server, and in the
//! command line's `call`. A result that breaks the schema is a typed error; a conforming one
//! and one with `isError` pass; a schema that cannot be compiled leaves the tool callable and
//! its results unchecked, with a warning.

use crate::cli::Project;
use crate::script::*;
use crate::support::demo_server_bin;
use serde_json::{json, Value};
use switchboard::{
    Builder, CallError, Error, JsonSchemaValidator, OutputProblem, ServerConfig, ServerSpec,
};
use switchboard_core::manager::{CallOutcome, Event, Level, ManagerOptions, Output};

fn checked() -> ManagerOptions {
    ManagerOptions {
        output_validator: Some(JsonSchemaValidator::shared()),
        ..opts()
    }
}

fn tools_with_schemas() -> Value {
    json!({"tools": [
        {"name": "sum", "inputSchema": {"type": "object"}, "outputSchema": {
            "type": "object",
            "properties": {"sum": {"$ref": "#/$defs/n"}},
            "required": ["sum"],
            "$defs": {"n": {"type": "number"}}}},
        {"name": "remote", "inputSchema": {"type": "object"},
         "outputSchema": {"$ref": "https://example.com/never-fetched.json"}},
        {"name": "plain", "inputSchema": {"type": "object"}}
    ]})
}

fn ready_with_schemas(s: &mut Script) {
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.opened(2, "a");
    s.reply(3, "a", "initialize", init_result());
    s.reply(4, "a", "tools/list", tools_with_schemas());
}

fn call_and_answer(s: &mut Script, ms: u64, call: u64, tool: &str, result: Value) -> CallOutcome {
    s.call(ms, call, tool, json!({}));
    s.reply(ms + 1, "a", "tools/call", result);
    let outcomes = s.outcome(call);
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    outcomes[0].clone()
}

#[test]
fn a_result_that_breaks_its_output_schema_fails_the_call_with_a_typed_error() {
    let mut s = Script::with(checked());
    ready_with_schemas(&mut s);

    // Conforming: Ok.
    let ok = call_and_answer(
        &mut s,
        10,
        1,
        "mcp_a_sum",
        json!({"content": [], "structuredContent": {"sum": 3}}),
    );
    assert!(matches!(ok, CallOutcome::Ok(_)), "{ok:?}");

    // Mismatch: typed, with where and why.
    let bad = call_and_answer(
        &mut s,
        20,
        2,
        "mcp_a_sum",
        json!({"content": [], "structuredContent": {"sum": "3"}}),
    );
    let CallOutcome::Err(CallError::OutputSchema {
        server,
        tool,
        problem: OutputProblem::Mismatch(m),
    }) = &bad
    else {
        panic!("expected an output-schema mismatch, got {bad:?}");
    };
    assert_eq!((server.as_str(), tool.as_str()), ("a", "sum"));
    assert_eq!(m.path, "/sum");
    let text = bad_text(&bad);
    assert!(text.starts_with("MCP error: the structured content returned by tool \"sum\" of server \"a\" does not match its output schema: at /sum: "), "{text}");

    // Missing structuredContent.
    let missing = call_and_answer(
        &mut s,
        30,
        3,
        "mcp_a_sum",
        json!({"content": [{"type": "text", "text": "3"}]}),
    );
    assert!(
        matches!(
            &missing,
            CallOutcome::Err(CallError::OutputSchema {
                problem: OutputProblem::Missing,
                ..
            })
        ),
        "{missing:?}"
    );
    assert!(
        bad_text(&missing).contains("declares an output schema but returned no structured content")
    );

    // isError: passed on as it came, unchecked.
    let is_error = call_and_answer(
        &mut s,
        40,
        4,
        "mcp_a_sum",
        json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
    );
    assert!(
        matches!(&is_error, CallOutcome::Ok(r) if r.is_error),
        "{is_error:?}"
    );

    // No schema: anything goes.
    let plain = call_and_answer(&mut s, 50, 5, "mcp_a_plain", json!({"content": []}));
    assert!(matches!(plain, CallOutcome::Ok(_)), "{plain:?}");

    let c = s.m.counters();
    assert_eq!(
        (
            c.output_schema_passed,
            c.output_schema_refused,
            c.output_schema_error_results
        ),
        (1, 2, 1)
    );
}

#[test]
fn a_schema_that_cannot_be_compiled_keeps_the_tool_unchecked_with_one_warning() {
    let mut s = Script::with(checked());
    ready_with_schemas(&mut s);
    assert!(s.tool_names().contains(&"mcp_a_remote".to_string()));
    for call in 1..=2 {
        let ok = call_and_answer(
            &mut s,
            call * 10,
            call,
            "mcp_a_remote",
            json!({"content": []}),
        );
        assert!(matches!(ok, CallOutcome::Ok(_)), "{ok:?}");
    }
    let warnings: Vec<&String> = s
        .events()
        .filter_map(|e| match e {
            Event::Diagnostic {
                level: Level::Warn,
                message,
                ..
            } if message.contains("output schema cannot be used") => Some(message),
            _ => None,
        })
        .collect();
    // Compiled once per tool list, so one warning for two calls.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("\"remote\""), "{warnings:?}");
    assert_eq!(s.m.counters().output_schema_unusable, 1);
}

#[test]
fn a_new_tool_list_brings_the_new_schema() {
    let mut s = Script::with(checked());
    ready_with_schemas(&mut s);
    let bad = call_and_answer(
        &mut s,
        10,
        1,
        "mcp_a_sum",
        json!({"content": [], "structuredContent": {"sum": "x"}}),
    );
    assert!(
        matches!(bad, CallOutcome::Err(CallError::OutputSchema { .. })),
        "{bad:?}"
    );
    // The server changes `sum` to return strings.
    s.frame_on(
        20,
        s.conn("a"),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    );
    s.reply(
        21,
        "a",
        "tools/list",
        json!({"tools": [{"name": "sum", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"sum": {"type": "string"}}}}]}),
    );
    let ok = call_and_answer(
        &mut s,
        30,
        2,
        "mcp_a_sum",
        json!({"content": [], "structuredContent": {"sum": "x"}}),
    );
    assert!(matches!(ok, CallOutcome::Ok(_)), "{ok:?}");
}

#[test]
fn without_a_validator_the_core_passes_results_on_unchecked() {
    let mut s = Script::new();
    ready_with_schemas(&mut s);
    let ok = call_and_answer(&mut s, 10, 1, "mcp_a_sum", json!({"content": []}));
    assert!(matches!(ok, CallOutcome::Ok(_)), "{ok:?}");
    assert_eq!(
        s.count(|o| matches!(
            o,
            Output::Event(Event::Diagnostic {
                level: Level::Warn,
                ..
            })
        )),
        0
    );
}

fn bad_text(outcome: &CallOutcome) -> String {
    match outcome {
        CallOutcome::Err(e) => e.to_string(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn demo(name: &str, args: &[&str]) -> ServerSpec {
    let bin = demo_server_bin();
    let mut all = vec!["--name", name];
    all.extend_from_slice(args);
    ServerSpec::new(name, ServerConfig::stdio(bin.to_string_lossy(), &all))
}

#[test]
fn the_library_checks_structured_results_against_the_demo_servers_schema() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![
            demo("good", &[]),
            demo("mismatch", &["--bad-output", "mismatch"]),
            demo("missing", &["--bad-output", "missing"]),
        ])
        .no_cache()
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected.len(), 3, "{report:?}");
        let args = json!({"a": 2, "b": 3});
        let good = sb.call("mcp_good_add", args.clone()).await.unwrap();
        assert_eq!(good.structured_content, Some(json!({"sum": 5})));

        let e = sb.call("mcp_mismatch_add", args.clone()).await.unwrap_err();
        assert!(
            matches!(&e, Error::Call(CallError::OutputSchema { problem: OutputProblem::Mismatch(m), .. }) if m.path == "/sum"),
            "{e:?}"
        );
        let e = sb.call("mcp_missing_add", args.clone()).await.unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Call(CallError::OutputSchema {
                    problem: OutputProblem::Missing,
                    ..
                })
            ),
            "{e:?}"
        );

        // A tool error (`isError`) is not checked.
        let r = sb
            .call("mcp_mismatch_add", json!({"a": "x"}))
            .await
            .unwrap();
        assert!(r.is_error, "{r:?}");
        sb.shutdown().await;

        // Turned off, the same result is passed on.
        let (sb, _) = Builder::servers(vec![demo("mismatch", &["--bad-output", "mismatch"])])
            .no_cache()
            .check_output_schemas(false)
            .start()
            .await
            .unwrap();
        let r = sb.call("mcp_mismatch_add", args).await.unwrap();
        assert_eq!(r.structured_content, Some(json!({"sum": "5"})));
        sb.shutdown().await;
    });
}

#[test]
fn cli_call_prints_the_output_schema_error_and_exits_1() {
    let project = Project::new(&[("bad", &["--bad-output", "mismatch"])]);
    let out = project.run(&["call", "mcp_bad_add", r#"{"a": 2, "b": 3}"#]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("does not match its output schema: at /sum:"),
        "stderr:\n{stderr}"
    );
}
