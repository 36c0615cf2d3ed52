//! OAuth against a real peer: the TypeScript SDK's `simpleStreamableHttp --oauth` example
//! (an MCP server and its demo authorization server), through the CLI as a user runs it:
//! `status` says `needs login` without waiting for anybody, `switchboard login` (with
//! tests/conformance/browser as `$BROWSER`, a headless user who clicks "allow") stores the
//! tokens, then `tools`, `call` and `status` use them. The access token, read back from the
//! store, must appear in no output, log (`RUST_LOG=trace`) or error of any of those commands.
//! Gated on `SWITCHBOARD_PEERS=1`.

use crate::http_peers::{peers_enabled, PeerProcess};
use crate::support::{repo_root, switchboard_bin};
use std::path::Path;
use std::process::{Command, Output};

/// Runs the CLI with `args` against the config in `dir`, tokens under `dir/data`, the
/// headless browser, and every log line on.
fn cli(dir: &Path, args: &[&str]) -> Output {
    Command::new(switchboard_bin())
        .args(args)
        .arg("--config")
        .arg(dir.join("mcp.json"))
        .arg("--no-project-config")
        .arg("--no-cache")
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("BROWSER", repo_root().join("tests/conformance/browser"))
        .env("RUST_LOG", "trace")
        .output()
        .expect("run switchboard")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn sdk_oauth_example_login_then_tools_and_the_token_is_never_printed() {
    if !peers_enabled("sdk_oauth_example") {
        return;
    }
    let (peer, _auth_port) = PeerProcess::sdk_oauth_example();
    let dir = std::env::temp_dir().join(format!("switchboard-oauth-peer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The server names its resource with `localhost`; the config says it the same way.
    let url = format!("http://localhost:{}/mcp", peer.port);
    std::fs::write(
        dir.join("mcp.json"),
        serde_json::json!({"mcpServers": {"demo": {"type": "http", "url": url}}}).to_string(),
    )
    .unwrap();

    let mut outputs = Vec::new();
    // Before any login: the typed answer, no browser.
    let before = cli(&dir, &["status"]);
    let t = text(&before);
    assert!(t.contains("needs login"), "{t}");
    assert!(t.contains("switchboard login demo"), "{t}");
    outputs.push(t);

    let login = cli(&dir, &["login", "demo"]);
    let t = text(&login);
    assert!(login.status.success(), "{t}");
    assert!(t.contains("logged in to demo"), "{t}");
    outputs.push(t);

    let tools = cli(&dir, &["tools", "--json", "--strict"]);
    let t = text(&tools);
    assert!(tools.status.success(), "{t}");
    let view: serde_json::Value = serde_json::from_slice(&tools.stdout).expect("JSON view");
    assert!(
        view["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["tool"] == "greet"),
        "{view}"
    );
    outputs.push(t);

    let call = cli(
        &dir,
        &["call", "--json", "mcp_demo_greet", r#"{"name":"oauth"}"#],
    );
    let t = text(&call);
    assert!(call.status.success(), "{t}");
    assert!(t.contains("Hello, oauth"), "{t}");
    outputs.push(t);

    for args in [&["status"][..], &["status", "--json"]] {
        let o = cli(&dir, args);
        let t = text(&o);
        assert!(!t.contains("needs login"), "{t}");
        outputs.push(t);
    }

    // The store: one private file, the token by issuer.
    let file = dir.join("data/switchboard/tokens/demo.json");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let entry: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let creds = entry["credentials"]
        .as_object()
        .expect("credentials by issuer");
    assert_eq!(creds.len(), 1, "{:?}", creds.keys());
    let token = creds.values().next().unwrap()["access_token"]
        .as_str()
        .expect("an access token")
        .to_string();
    assert!(token.len() >= 16, "a real token");
    for (i, out) in outputs.iter().enumerate() {
        assert!(
            !out.contains(&token),
            "command {i} printed the access token:\n{out}"
        );
    }
    // The trace logs were on: the transport did log its requests.
    assert!(
        outputs[2].contains("TRACE") || outputs[2].contains("DEBUG"),
        "{}",
        outputs[2]
    );

    let logout = cli(&dir, &["logout", "demo"]);
    assert!(logout.status.success(), "{}", text(&logout));
    assert!(!file.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
