//! `switchboard serve` as a downstream client sees it: over stdio (raw JSON-RPC lines) and
//! Streamable HTTP (raw HTTP/1.1 on loopback), in front of demo servers. Answers come from the
//! gate's view at once, deferred tools wait for their server, cancellation reaches the server,
//! a failed server is a tool error naming it, and every change of the view is announced.

use crate::support::{demo_server_bin, switchboard_bin, DemoServer};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// A config of demo servers: `name` → extra args.
    fn new(servers: &[(&str, &[&str])]) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let demo = demo_server_bin();
        let mut entries = serde_json::Map::new();
        for (name, args) in servers {
            let mut all = vec!["--name".to_string(), name.to_string()];
            all.extend(args.iter().map(|a| a.to_string()));
            entries.insert(
                name.to_string(),
                json!({"command": demo.display().to_string(), "args": all}),
            );
        }
        std::fs::write(
            dir.path().join("servers.json"),
            json!({ "mcpServers": entries }).to_string(),
        )
        .unwrap();
        Project { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("servers.json")
    }

    fn args<'a>(&'a self, config: &'a str, cache: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["--config", config, "--cache-dir", cache];
        args.extend_from_slice(extra);
        args
    }

    /// Run `switchboard tools` once so every server's tools are in the cache.
    fn warm_cache(&self, env: &[(&str, &str)]) {
        let out = std::process::Command::new(switchboard_bin())
            .arg("--config")
            .arg(self.config())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .arg("tools")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    fn serve(&self, extra: &[&str], env: &[(&str, &str)]) -> DemoServer {
        let config = self.config().display().to_string();
        let cache = self.dir.path().join("cache").display().to_string();
        let mut args = self.args(&config, &cache, &[]);
        args.push("serve");
        args.extend_from_slice(extra);
        DemoServer::spawn_program(&switchboard_bin(), &args, env)
    }
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn is_list_changed(m: &Value) -> bool {
    m["method"] == "notifications/tools/list_changed"
}

fn shut(mut s: DemoServer) {
    s.close_stdin();
    let status = s.wait_exit(WAIT).expect("serve exits when stdin closes");
    assert!(status.success(), "{status:?}\n{}", s.stderr());
}

#[test]
fn cached_tools_are_served_at_once_and_announced_again_when_their_slow_server_connects() {
    let p = Project::new(&[("fast", &[]), ("slow", &["--init-delay-ms", "2500"])]);
    p.warm_cache(&[]);
    let mut s = p.serve(&[], &[]);
    let init = s.initialize();
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    let list = s.request("tools/list", json!({}));
    let listed = names(&list);
    for t in [
        "mcp_fast_echo",
        "mcp_slow_add",
        "mcp_slow_echo",
        "mcp_slow_sleep",
    ] {
        assert!(listed.contains(&t.to_string()), "{listed:?}");
    }
    // A call to the slow server's (deferred) tool waits for it, then runs there.
    let add = s.request(
        "tools/call",
        json!({"name": "mcp_slow_add", "arguments": {"a": 2, "b": 40}}),
    );
    assert_eq!(add["result"]["structuredContent"]["sum"], 42, "{add}");
    // Its connection turned the cached tools live: announced, and listed the same.
    s.wait_for(WAIT, is_list_changed)
        .expect("list_changed once the slow server connected");
    assert_eq!(names(&s.request("tools/list", json!({}))), listed);
    shut(s);
}

#[test]
fn a_cancelled_call_is_cancelled_at_the_server_and_never_answered() {
    let p = Project::new(&[("demo", &["--stats-tool"])]);
    let mut s = p.serve(&[], &[]);
    s.initialize();
    let sleeping = s.start_request(
        "tools/call",
        json!({"name": "mcp_demo_sleep", "arguments": {"ms": 60000}}),
    );
    // Frames to one server go out in order: once a later call is answered, the server has
    // the sleep.
    s.request(
        "tools/call",
        json!({"name": "mcp_demo_echo", "arguments": {"text": "x"}}),
    );
    s.notify("notifications/cancelled", json!({"requestId": sleeping}));
    let mut cancelled = 0;
    for _ in 0..200 {
        let stats = s.request(
            "tools/call",
            json!({"name": "mcp_demo_stats", "arguments": {}}),
        );
        let text = stats["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        let v: Value = serde_json::from_str(&text).unwrap();
        cancelled = v["cancelled_in_flight"]
            .as_u64()
            .unwrap_or_else(|| panic!("{text}"));
        if cancelled > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(cancelled, 1, "the server saw the cancellation");
    assert!(
        s.backlog.iter().all(|m| m["id"] != json!(sleeping)),
        "the cancelled call was answered: {:?}",
        s.backlog
    );
    shut(s);
}

#[test]
fn a_call_to_a_server_that_failed_is_a_tool_error_naming_it() {
    // `--fail-init-once MARK` fails initialize when MARK does not exist. MARK comes from the
    // environment, which is not part of the cache key: the cache written while it existed
    // serves the tools at the gate while the slow start that fails is still under way.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.json");
    let demo = demo_server_bin().display().to_string();
    std::fs::write(
        &config,
        json!({"mcpServers": {"flaky": {"command": demo, "args": [
            "--name", "flaky", "--init-delay-ms", "800", "--fail-init-once", "${FLAKY_MARK}"
        ]}}})
        .to_string(),
    )
    .unwrap();
    let cache = dir.path().join("cache");
    let exists = dir.path().join("exists");
    std::fs::write(&exists, "").unwrap();
    let out = std::process::Command::new(switchboard_bin())
        .arg("--config")
        .arg(&config)
        .arg("--cache-dir")
        .arg(&cache)
        .arg("tools")
        .env("FLAKY_MARK", &exists)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let missing = dir.path().join("missing").display().to_string();
    let (config, cache) = (config.display().to_string(), cache.display().to_string());
    let mut s = DemoServer::spawn_program(
        &switchboard_bin(),
        &["--config", &config, "--cache-dir", &cache, "serve"],
        &[("FLAKY_MARK", &missing)],
    );
    s.initialize();
    let r = s.request(
        "tools/call",
        json!({"name": "mcp_flaky_echo", "arguments": {"text": "x"}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("\"flaky\""), "{text}");
    shut(s);
}

#[test]
fn stdio_answers_ping_unknown_methods_and_malformed_lines() {
    let p = Project::new(&[("demo", &[])]);
    let mut s = p.serve(&[], &[]);
    s.initialize();
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    assert_eq!(s.request("no/such", json!({}))["error"]["code"], -32601);
    s.send_raw("{not json");
    let e = s
        .wait_for(WAIT, |m| m["error"]["code"] == -32700)
        .expect("a parse error");
    assert_eq!(e["id"], Value::Null);
    assert_eq!(
        s.request("resources/list", json!({}))["result"]["resources"],
        json!([])
    );
    shut(s);
}

/// One HTTP/1.1 exchange on loopback: status, headers (lower-cased names) and body.
fn http(
    port: u16,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut req = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn serve_http(p: &Project) -> (DemoServer, u16) {
    let port = crate::http_peers::free_port();
    let addr = format!("127.0.0.1:{port}");
    let s = p.serve(&["--http", &addr], &[]);
    s.wait_stderr("serving http://", WAIT);
    (s, port)
}

#[test]
fn http_sessions_list_and_call_and_refuse_foreign_hosts_and_origins() {
    let p = Project::new(&[("demo", &["--progress-every-ms", "5"])]);
    let (s, port) = serve_http(&p);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": crate::support::initialize_params("2025-11-25")})
    .to_string();
    let (status, headers, body) = http(port, "POST", &[], &init);
    assert_eq!(status, 200, "{body}");
    let session = header(&headers, "mcp-session-id")
        .expect("a session id")
        .to_string();
    let sid = [("Mcp-Session-Id", session.as_str())];
    let (status, _, _) = http(
        port,
        "POST",
        &sid,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(status, 202);
    let (_, _, body) = http(
        port,
        "POST",
        &sid,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    );
    let list: Value = serde_json::from_str(&body).unwrap();
    assert!(
        names(&list).contains(&"mcp_demo_echo".to_string()),
        "{body}"
    );
    // A call with a progress token answers on an SSE stream: progress, then the result.
    let (status, headers, body) = http(
        port,
        "POST",
        &sid,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp_demo_sleep","arguments":{"ms":50},"_meta":{"progressToken":"t"}}}"#,
    );
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), Some("text/event-stream"));
    assert!(body.contains("notifications/progress"), "{body}");
    assert!(body.contains("slept 50ms"), "{body}");
    // No session: only initialize may start one.
    let (status, _, _) = http(
        port,
        "POST",
        &[],
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#,
    );
    assert_eq!(status, 400);
    // An unknown session id.
    let (status, _, _) = http(
        port,
        "POST",
        &[("Mcp-Session-Id", "nope")],
        r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
    );
    assert_eq!(status, 404);
    // DNS rebinding: a foreign Origin, a foreign Host.
    let (status, _, _) = http(port, "POST", &[("Origin", "http://evil.example")], &init);
    assert_eq!(status, 403);
    let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.write_all(b"POST /mcp HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        .unwrap();
    let mut text = String::new();
    raw.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 403"), "{text}");
    // DELETE ends the session.
    let (status, _, _) = http(port, "DELETE", &sid, "");
    assert_eq!(status, 200);
    let (status, _, _) = http(
        port,
        "POST",
        &sid,
        r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#,
    );
    assert_eq!(status, 404);
    drop(s);
}

#[test]
fn http_on_a_public_address_requires_a_bearer_token() {
    let p = Project::new(&[]);
    let config = p.config().display().to_string();
    let out = std::process::Command::new(switchboard_bin())
        .args([
            "--config",
            &config,
            "--no-cache",
            "serve",
            "--http",
            "0.0.0.0:0",
        ])
        .env_remove("SWITCHBOARD_BEARER_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bearer-token"));
}

#[test]
fn http_with_a_bearer_token_refuses_requests_without_it() {
    let p = Project::new(&[("demo", &[])]);
    let port = crate::http_peers::free_port();
    let addr = format!("127.0.0.1:{port}");
    let s = p.serve(
        &["--http", &addr],
        &[("SWITCHBOARD_BEARER_TOKEN", "s3cret")],
    );
    s.wait_stderr("serving http://", WAIT);
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (status, headers, _) = http(port, "POST", &[], ping);
    assert_eq!(status, 401);
    assert_eq!(header(&headers, "www-authenticate"), Some("Bearer"));
    let (status, _, _) = http(port, "POST", &[("Authorization", "Bearer wrong!")], ping);
    assert_eq!(status, 401);
    let (status, _, _) = http(port, "POST", &[("Authorization", "Bearer s3cret")], ping);
    assert_eq!(status, 200);
    assert!(!s.stderr().contains("s3cret"), "the token reached a log");
    drop(s);
}

/// server-everything and server-memory behind `serve`, as the official TypeScript and Python
/// SDK clients see them over stdio and over HTTP: every tool listed and called
/// (tests/peers/check_serve.mjs, tests/peers/check_serve.py).
#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn the_typescript_and_python_sdk_clients_list_and_call_every_tool_through_serve() {
    if !crate::http_peers::peers_enabled("serve_with_the_typescript_sdk") {
        return;
    }
    let peers = crate::support::repo_root().join("tests/peers");
    let sdk = peers.join("node_modules/@modelcontextprotocol");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "everything": {"command": "node", "args": [
                sdk.join("server-everything/dist/index.js").display().to_string(), "stdio"]},
            "memory": {"command": "node", "args": [
                sdk.join("server-memory/dist/index.js").display().to_string()],
                "env": {"MEMORY_FILE_PATH": dir.path().join("memory.json").display().to_string()}},
        }})
        .to_string(),
    )
    .unwrap();
    let cache = dir.path().join("cache");
    // Each SDK's client: the program and its script.
    let clients = [
        (PathBuf::from("node"), peers.join("check_serve.mjs")),
        (peers.join(".venv/bin/python"), peers.join("check_serve.py")),
    ];
    let check = |args: &[String]| -> Vec<Value> {
        clients
            .iter()
            .map(|(program, script)| {
                let out = std::process::Command::new(program)
                    .arg(script)
                    .args(args)
                    .current_dir(&peers)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{} {args:?}: {}",
                    script.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                serde_json::from_slice(&out.stdout).unwrap()
            })
            .collect()
    };
    let expect_one = |summary: &Value| {
        let called = summary["called"].as_array().unwrap();
        let mut want = crate::peers::everything_tools("everything");
        want.extend(
            [
                "add_observations",
                "create_entities",
                "create_relations",
                "delete_entities",
                "delete_observations",
                "delete_relations",
                "open_nodes",
                "read_graph",
                "search_nodes",
            ]
            .iter()
            .map(|t| format!("mcp_memory_{t}")),
        );
        for tool in want {
            assert!(
                called.contains(&json!(tool)),
                "{tool} not called: {summary}"
            );
        }
    };
    let expect = |summaries: &[Value]| {
        for summary in summaries {
            expect_one(summary);
        }
    };
    let stdio = check(&[
        "stdio".into(),
        switchboard_bin().display().to_string(),
        config.display().to_string(),
        cache.display().to_string(),
    ]);
    expect(&stdio);
    let port = crate::http_peers::free_port();
    let addr = format!("127.0.0.1:{port}");
    let (config, cache) = (config.display().to_string(), cache.display().to_string());
    let s = DemoServer::spawn_program(
        &switchboard_bin(),
        &[
            "--config",
            &config,
            "--cache-dir",
            &cache,
            "serve",
            "--http",
            &addr,
        ],
        &[],
    );
    s.wait_stderr("serving http://", WAIT);
    let http = check(&["http".into(), format!("http://{addr}/mcp")]);
    expect(&http);
    drop(s);
}

#[test]
fn tool_search_serves_two_tools_that_find_and_call_the_servers_tools() {
    let p = Project::new(&[("fast", &[])]);
    let mut s = p.serve(&["--tool-search"], &[]);
    s.initialize();
    let list = s.request("tools/list", json!({}));
    assert_eq!(names(&list), ["search_tools", "call_tool"]);
    let found = s.request(
        "tools/call",
        json!({"name": "search_tools", "arguments": {"query": "add"}}),
    );
    let tools = &found["result"]["structuredContent"]["tools"];
    assert_eq!(tools[0]["name"], "mcp_fast_add", "{found}");
    let sum = s.request(
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "mcp_fast_add", "arguments": {"a": 2, "b": 3}}}),
    );
    assert_eq!(sum["result"]["structuredContent"]["sum"], 5, "{sum}");
    shut(s);
}

#[test]
fn plain_names_serve_a_single_servers_tools_under_their_own_names() {
    let p = Project::new(&[("fast", &[])]);
    let mut s = p.serve(&["--plain-names"], &[]);
    s.initialize();
    let listed = names(&s.request("tools/list", json!({})));
    assert!(listed.contains(&"add".to_string()), "{listed:?}");
    let sum = s.request(
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 40}}),
    );
    assert_eq!(sum["result"]["structuredContent"]["sum"], 42, "{sum}");
    shut(s);
}

#[test]
fn an_edit_of_the_config_under_a_running_serve_starts_the_new_server_and_announces_its_tools() {
    let p = Project::new(&[("first", &[])]);
    let mut s = p.serve(&[], &[]);
    s.initialize();
    let before = names(&s.request("tools/list", json!({})));
    assert!(before.contains(&"mcp_first_echo".to_string()), "{before:?}");
    // The config file serve read gains a server.
    let edited = Project::new(&[("first", &[]), ("second", &[])]);
    std::fs::write(p.config(), std::fs::read(edited.config()).unwrap()).unwrap();
    // Every list_changed: list again, until the new server's tools are there (the wait is
    // only a guard against a hang; what is checked is the order of events).
    let mut now = before.clone();
    for _ in 0..20 {
        if now.contains(&"mcp_second_echo".to_string()) {
            break;
        }
        s.wait_for(WAIT, is_list_changed)
            .expect("list_changed after the config edit");
        now = names(&s.request("tools/list", json!({})));
    }
    assert!(now.contains(&"mcp_second_echo".to_string()), "{now:?}");
    assert!(now.contains(&"mcp_first_echo".to_string()), "{now:?}");
    shut(s);
}

/// A downstream client's roots reach an upstream server through `serve`: server-everything's
/// `get-roots-list` shows the roots the client gave, and a change the client announces.
#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn the_downstream_clients_roots_are_what_an_upstream_server_lists() {
    if !crate::http_peers::peers_enabled("serve_roots") {
        return;
    }
    let sdk = crate::support::repo_root().join("tests/peers/node_modules/@modelcontextprotocol");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"everything": {"command": "node", "args": [
            sdk.join("server-everything/dist/index.js").display().to_string(), "stdio"]}}})
        .to_string(),
    )
    .unwrap();
    let cache = dir.path().join("cache");
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
        "serve",
    ];
    let mut s = DemoServer::spawn_program(&switchboard_bin(), &args, &[]);
    let id = s.start_request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": true}},
               "clientInfo": {"name": "roots-test", "version": "1"}}),
    );
    s.response(id, WAIT).expect("initialize answered");
    s.notify("notifications/initialized", json!({}));
    let answer_roots = |s: &mut DemoServer, uri: &str| {
        let asked = s
            .wait_for(WAIT, |m| m["method"] == "roots/list")
            .expect("serve asks the client for its roots");
        s.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": [{"uri": uri}]}}));
    };
    answer_roots(&mut s, "file:///client/first");
    // server-everything adds the tool once initialized, and says so with list_changed.
    let mut listed = names(&s.request("tools/list", json!({})));
    for _ in 0..10 {
        if listed.iter().any(|t| t.ends_with("get_roots_list")) {
            break;
        }
        s.wait_for(WAIT, is_list_changed)
            .unwrap_or_else(|| panic!("no get-roots-list and no list_changed: {listed:?}"));
        listed = names(&s.request("tools/list", json!({})));
    }
    let tool = listed
        .iter()
        .find(|t| t.ends_with("get_roots_list"))
        .cloned()
        .unwrap_or_else(|| panic!("server-everything offers get-roots-list: {listed:?}"));
    let roots_text = |s: &mut DemoServer| {
        let r = s.request("tools/call", json!({"name": tool, "arguments": {}}));
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    // The server learns of new roots when told they changed; ask until it has.
    let seen = |s: &mut DemoServer, uri: &str| {
        for _ in 0..100 {
            if roots_text(s).contains(uri) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    assert!(
        seen(&mut s, "file:///client/first"),
        "{}",
        roots_text(&mut s)
    );
    s.notify("notifications/roots/list_changed", json!({}));
    answer_roots(&mut s, "file:///client/second");
    assert!(
        seen(&mut s, "file:///client/second"),
        "{}",
        roots_text(&mut s)
    );
    shut(s);
}
