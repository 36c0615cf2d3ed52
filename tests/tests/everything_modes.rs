//! The whole client surface against the reference server, `server-everything`, over each of
//! its three transports (stdio, Streamable HTTP, legacy SSE), with every handler installed:
//! through the library and through the CLI, all 17 tools are listed and each is called, every
//! resource is read, each template is read through a URI it makes, every prompt is fetched,
//! prompt arguments and template variables are completed, and each feature is used —
//! elicitation in form mode (also inside a task) and URL mode, sampling, roots, a
//! subscription and its update, the server's log at a level we set, and a long-running
//! tool's progress reaching its caller. Gated on `SWITCHBOARD_PEERS=1`.

use crate::demo_server::peers_enabled;
use crate::http_peers::PeerProcess;
use crate::support::{repo_root, switchboard_bin};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use switchboard::core::catalog::{CompletionRef, LogLevel};
use switchboard::core::config::{ServerConfig, ServerSpec, TransportKind};
use switchboard::{
    Builder, CallOptions, Event, PeerAnswer, PeerFuture, PeerRequest, PeerRequestKind, Root,
    Switchboard,
};

/// The 17 tools server-everything offers a client that answers elicitation, sampling and roots.
const TOOLS: [&str; 17] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-roots-list",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "simulate-research-query",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-elicitation-request",
    "trigger-long-running-operation",
    "trigger-sampling-request",
    "trigger-url-elicitation",
];

/// Arguments for each tool, and a piece of text its result must hold (`""`: any successful
/// result). The toggles and the long-running operation are used on their own below.
fn tool_calls(roots: &str, sampled: &str, research: &str) -> Vec<(&'static str, Value, String)> {
    vec![
        (
            "echo",
            json!({"message": "hello everything"}),
            "hello everything".into(),
        ),
        (
            "get-annotated-message",
            json!({"messageType": "success", "includeImage": true}),
            "".into(),
        ),
        ("get-env", json!({}), "".into()),
        ("get-resource-links", json!({"count": 2}), "".into()),
        ("get-resource-reference", json!({}), "".into()),
        ("get-roots-list", json!({}), roots.into()),
        (
            "get-structured-content",
            json!({"location": "Chicago"}),
            "".into(),
        ),
        ("get-sum", json!({"a": 2, "b": 3}), "5".into()),
        ("get-tiny-image", json!({}), "".into()),
        (
            "gzip-file-as-resource",
            json!({"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ=",
                "outputType": "resource"}),
            "".into(),
        ),
        // A task (`taskSupport: required`) that asks for a clarification inside the task.
        (
            "simulate-research-query",
            json!({"topic": "rust", "ambiguous": true}),
            research.into(),
        ),
        ("trigger-elicitation-request", json!({}), "".into()),
        (
            "trigger-sampling-request",
            json!({"prompt": "p", "maxTokens": 5}),
            sampled.into(),
        ),
        (
            "trigger-url-elicitation",
            json!({"url": "https://example.com/verify"}),
            "".into(),
        ),
    ]
}

/// Prompts and their arguments, and what the fetched prompt must mention.
fn prompt_gets() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        ("simple-prompt", json!({}), ""),
        (
            "args-prompt",
            json!({"city": "Lisbon", "state": "Lisboa"}),
            "Lisbon",
        ),
        (
            "completable-prompt",
            json!({"department": "Engineering", "name": "Alice"}),
            "Alice",
        ),
        (
            "resource-prompt",
            json!({"resourceType": "Text", "resourceId": "1"}),
            "demo://",
        ),
    ]
}

/// The embedder's elicitation answers: a form gets a name, and the first choice of any
/// choice-only field it requires; a URL is taken as opened.
fn elicit(r: PeerRequest) -> PeerFuture {
    Box::pin(async move {
        match r.kind {
            PeerRequestKind::ElicitForm {
                requested_schema, ..
            } => {
                let mut content = serde_json::Map::new();
                content.insert("name".into(), "Ada".into());
                let props = requested_schema["properties"].as_object().cloned();
                for (field, prop) in props.into_iter().flatten() {
                    if let Some(first) = prop["oneOf"][0].get("const") {
                        content.insert(field, first.clone());
                    }
                }
                PeerAnswer::Accept {
                    content: Some(content),
                }
            }
            PeerRequestKind::ElicitUrl { .. } => PeerAnswer::Accept { content: None },
            _ => PeerAnswer::Decline,
        }
    })
}

fn sample(_r: PeerRequest) -> PeerFuture {
    Box::pin(async move {
        PeerAnswer::Result {
            result: json!({"role": "assistant", "model": "test",
                "content": {"type": "text", "text": "sampled by the embedder"}}),
        }
    })
}

/// The next event that `pick` accepts, within `limit` (a bound on a hang, not a timing claim).
async fn wait_for<T>(
    events: &switchboard::Events,
    limit: Duration,
    mut pick: impl FnMut(&Event) -> Option<T>,
) -> Option<T> {
    let found = async {
        loop {
            match events.recv().await {
                Ok(e) => {
                    if let Some(t) = pick(&e) {
                        return Some(t);
                    }
                }
                Err(switchboard::RecvError::Lagged { .. }) => continue,
                Err(_) => return None,
            }
        }
    };
    let give_up = async {
        smol::Timer::after(limit).await;
        None
    };
    futures_lite::future::or(found, give_up).await
}

fn exercise(spec: ServerSpec) {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            .elicitation_handler(Arc::new(elicit))
            .sampling_handler(Arc::new(sample))
            .roots(vec![Root {
                uri: "file:///project".into(),
                name: Some("project".into()),
            }])
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["everything"], "{report:?}");
        let mut tools: Vec<String> = sb.tools().iter().map(|t| t.def.name.clone()).collect();
        tools.sort();
        assert_eq!(tools, TOOLS, "the tool view");
        assert_eq!(sb.resources().len(), 7, "{:?}", sb.resources());
        assert_eq!(sb.resource_templates().len(), 2);
        assert_eq!(sb.prompts().len(), 4, "{:?}", sb.prompts());

        // Every tool, called with arguments it takes.
        for (tool, args, expect) in tool_calls(
            "file:///project",
            "sampled by the embedder",
            // The clarification the task asked for inside the task, as the embedder chose it.
            "rust (technical)",
        ) {
            let name = format!("mcp_everything_{}", tool.replace('-', "_"));
            let r = sb
                .call(&name, args)
                .await
                .unwrap_or_else(|e| panic!("{tool}: {e}"));
            assert!(!r.is_error, "{tool}: {r:?}");
            assert!(
                r.render_text().contains(&expect),
                "{tool}: {}",
                r.render_text()
            );
            if tool == "get-structured-content" {
                assert!(r.structured_content.is_some(), "{r:?}");
            }
        }

        // A long-running operation reports progress to the call that asked for it.
        let mut call = sb.call_with(
            "mcp_everything_trigger_long_running_operation",
            json!({"duration": 1, "steps": 4}),
            CallOptions {
                progress: true,
                ..Default::default()
            },
        );
        let progress = call.progress().cloned().expect("progress was asked for");
        let result = (&mut call).await.unwrap();
        assert!(!result.is_error, "{result:?}");
        let mut updates = 0;
        while progress.try_recv().is_ok() {
            updates += 1;
        }
        assert!(updates >= 1, "no progress reached the caller");

        // Every resource read, and a URI made from each template.
        for r in sb.resources().iter() {
            let read = sb.read_resource(&r.def.uri, None).await.unwrap();
            assert_eq!(read.contents[0].uri, r.def.uri, "{read:?}");
        }
        for t in sb.resource_templates().iter() {
            let uri = t.def.uri_template.replace("{resourceId}", "2");
            let read = sb.read_resource(&uri, Some("everything")).await.unwrap();
            assert_eq!(read.contents[0].uri, uri, "{read:?}");
            let c = sb
                .complete(
                    CompletionRef::Resource {
                        uri: t.def.uri_template.clone(),
                        server: None,
                    },
                    "resourceId",
                    "12",
                    BTreeMap::new(),
                )
                .await
                .unwrap();
            // The server completes a resource id by validating it.
            assert_eq!(c.values, ["12"], "{c:?}");
        }

        // Every prompt, with its arguments; a prompt argument completed with the context of
        // the one chosen before it.
        for (prompt, args, expect) in prompt_gets() {
            let args: BTreeMap<String, String> = serde_json::from_value(args).unwrap();
            let name = format!("mcp_everything_{}", prompt.replace('-', "_"));
            let got = sb.get_prompt(&name, args).await.unwrap();
            assert!(!got.messages.is_empty(), "{prompt}: {got:?}");
            assert!(format!("{got:?}").contains(expect), "{prompt}: {got:?}");
        }
        let reference = CompletionRef::Prompt {
            name: "mcp_everything_completable_prompt".into(),
        };
        let c = sb
            .complete(reference.clone(), "department", "Eng", BTreeMap::new())
            .await
            .unwrap();
        assert_eq!(c.values, ["Engineering"]);
        let context = BTreeMap::from([("department".to_string(), "Sales".to_string())]);
        let c = sb.complete(reference, "name", "", context).await.unwrap();
        assert_eq!(c.values, ["David", "Eve", "Frank"]);

        // The server's log at the level we ask for, and a subscription's update: both
        // toggles send one at once.
        let events = sb.events();
        sb.set_log_level("everything", LogLevel::Debug)
            .await
            .unwrap();
        sb.call("mcp_everything_toggle_simulated_logging", json!({}))
            .await
            .unwrap();
        let logged = wait_for(&events, Duration::from_secs(30), |e| {
            matches!(e, Event::ServerLog { server, .. } if server == "everything").then_some(())
        })
        .await;
        assert!(logged.is_some(), "no log message reached the events");
        let uri = sb.resources()[0].def.uri.clone();
        sb.subscribe(&uri, None).await.unwrap();
        sb.call("mcp_everything_toggle_subscriber_updates", json!({}))
            .await
            .unwrap();
        let updated = wait_for(&events, Duration::from_secs(30), |e| match e {
            Event::ResourceUpdated { uri, .. } => Some(uri.clone()),
            _ => None,
        })
        .await;
        assert_eq!(updated.as_deref(), Some(uri.as_str()));
        sb.unsubscribe(&uri, None).await.unwrap();
        shut_down(sb).await;
    });
}

async fn shut_down(sb: Switchboard) {
    sb.shutdown().await;
    assert!(sb.live_processes().is_empty());
}

/// The same surface through the CLI: `tools`, `call` (every tool), `resources`, `read`,
/// `prompts`, `prompt` and `complete`, with the form's defaults accepted and sampling
/// answered by a command.
fn exercise_cli(server: Value) {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"everything": server}});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
    let script = repo_root().join("tests/scripts/sampling-reply.sh");
    let run = |args: &[&str]| -> Value {
        let out = Command::new(switchboard_bin())
            .current_dir(dir.path())
            .env_remove("RUST_LOG")
            .env("HOME", dir.path())
            .args(["--config", "mcp.json", "--no-project-config", "--no-cache"])
            .args(["--elicit", "accept-defaults"])
            .args(["--sampling-command", &script.to_string_lossy()])
            .args(args)
            .output()
            .expect("run switchboard");
        assert!(
            out.status.success(),
            "switchboard {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    };
    let text = |v: &Value| v.to_string();

    let tools = run(&["tools", "--json"]);
    let mut names: Vec<String> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let expected: Vec<String> = TOOLS
        .iter()
        .map(|t| format!("mcp_everything_{}", t.replace('-', "_")))
        .collect();
    assert_eq!(names, expected);

    let project = dir.path().canonicalize().unwrap();
    let roots = format!("file://{}", project.display());
    for (tool, args, expect) in tool_calls(&roots, "sampled", "rust (") {
        let name = format!("mcp_everything_{}", tool.replace('-', "_"));
        let r = run(&["call", "--json", &name, &args.to_string()]);
        assert_ne!(r["isError"], json!(true), "{tool}: {r}");
        assert!(text(&r).contains(&expect), "{tool}: {r}");
    }
    let r = run(&[
        "call",
        "--json",
        "mcp_everything_trigger_long_running_operation",
        r#"{"duration": 1, "steps": 2}"#,
    ]);
    assert_ne!(r["isError"], json!(true), "{r}");

    let listed = run(&["resources", "--json"]);
    let resources = listed["resources"].as_array().unwrap().clone();
    assert_eq!(resources.len(), 7, "{listed}");
    for r in &resources {
        let uri = r["uri"].as_str().unwrap();
        let read = run(&["read", uri, "--json"]);
        assert!(text(&read).contains(uri), "{read}");
    }
    let templates = listed["templates"].as_array().unwrap().clone();
    assert_eq!(templates.len(), 2, "{listed}");
    for t in &templates {
        let template = t["uriTemplate"].as_str().unwrap();
        let uri = template.replace("{resourceId}", "3");
        let read = run(&["read", &uri, "--server", "everything", "--json"]);
        assert!(text(&read).contains(&uri), "{read}");
        let c = run(&[
            "complete",
            "resourceId",
            "7",
            "--resource",
            template,
            "--json",
        ]);
        assert_eq!(c["values"], json!(["7"]), "{c}");
    }

    let prompts = run(&["prompts", "--json"]);
    assert_eq!(
        prompts["prompts"].as_array().map(Vec::len),
        Some(4),
        "{prompts}"
    );
    for (prompt, args, expect) in prompt_gets() {
        let name = format!("mcp_everything_{}", prompt.replace('-', "_"));
        let got = run(&["prompt", &name, &args.to_string(), "--json"]);
        assert!(!got["messages"].as_array().unwrap().is_empty(), "{got}");
        assert!(text(&got).contains(expect), "{prompt}: {got}");
    }
    let c = run(&[
        "complete",
        "department",
        "Sa",
        "--prompt",
        "mcp_everything_completable_prompt",
        "--json",
    ]);
    assert_eq!(c["values"], json!(["Sales"]));
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn the_whole_surface_over_stdio() {
    if !peers_enabled("the_whole_surface_over_stdio") {
        return;
    }
    let entry = repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    exercise(ServerSpec::new(
        "everything",
        ServerConfig::stdio("node", &[&entry.to_string_lossy(), "stdio"]),
    ));
    exercise_cli(json!({"command": "node", "args": [entry.to_string_lossy(), "stdio"]}));
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn the_whole_surface_over_streamable_http() {
    if !peers_enabled("the_whole_surface_over_streamable_http") {
        return;
    }
    let peer = PeerProcess::everything("streamableHttp");
    exercise(ServerSpec::new(
        "everything",
        ServerConfig::http(peer.url("/mcp")),
    ));
    exercise_cli(json!({"type": "http", "url": peer.url("/mcp")}));
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn the_whole_surface_over_legacy_sse() {
    if !peers_enabled("the_whole_surface_over_legacy_sse") {
        return;
    }
    let peer = PeerProcess::everything("sse");
    let mut config = ServerConfig::http(peer.url("/sse"));
    config.kind = Some(TransportKind::Sse.as_str().to_string());
    exercise(ServerSpec::new("everything", config));
    exercise_cli(json!({"type": "sse", "url": peer.url("/sse")}));
}

/// `status`, `tools` and `call` as a newcomer would run them against the reference server.
#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn cli_status_and_call_work_against_the_reference_typescript_server() {
    if !crate::demo_server::peers_enabled("cli against server-everything") {
        return;
    }
    let p = crate::cli::Project::new(&[]);
    let entry = crate::support::repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let config = json!({"mcpServers": {"everything": {"command": "node", "args": [entry.to_string_lossy(), "stdio"]}}});
    std::fs::write(p.path().join("everything.json"), config.to_string()).unwrap();
    let out = p.run_with_configs(&["everything.json"], &["status", "--json"]);
    assert_eq!(crate::cli::code(&out), 0, "{}", crate::cli::stderr(&out));
    let v = crate::cli::json_stdout(&out);
    assert_eq!(v["servers"][0]["status"], "connected", "{v}");
    assert!(v["servers"][0]["tools"].as_u64().unwrap() >= 10, "{v}");
    let out = p.run_with_configs(&["everything.json"], &["tools", "--json"]);
    assert_eq!(crate::cli::code(&out), 0, "{}", crate::cli::stderr(&out));
    let tools = crate::cli::json_stdout(&out);
    let echo = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp_everything_echo")
        .unwrap_or_else(|| panic!("no echo tool: {tools}"));
    assert_eq!(echo["server"], "everything");
    assert_eq!(echo["tool"], "echo");
    assert!(
        echo["input_schema"]["properties"]["message"].is_object(),
        "{echo}"
    );
    assert_eq!(tools["errors"], json!({}));
    let out = p.run_with_configs(
        &["everything.json"],
        &[
            "call",
            "mcp_everything_echo",
            r#"{"message": "from the CLI"}"#,
        ],
    );
    assert_eq!(crate::cli::code(&out), 0, "{}", crate::cli::stderr(&out));
    assert_eq!(crate::cli::stdout(&out).trim(), "Echo: from the CLI");
}
