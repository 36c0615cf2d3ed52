//! The network around an HTTP server: proxies from `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY`
//! (a `CONNECT` tunnel for https, absolute-form requests for http, credentials never shown)
//! and the platform's trust store beside the bundled roots (a private CA named by
//! `SSL_CERT_FILE`). The `switchboard` binary runs as a child process, so the variables it
//! reads are its own; the server and the proxy are the Python scripts under `tests/scripts/`,
//! and the proxy's log says what it forwarded.

use crate::support::{repo_root, switchboard_bin};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const PROXY_VARS: [&str; 8] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// A script that prints its port first and serves until its stdin closes (or it is killed).
struct Script {
    child: Child,
    port: u16,
}

impl Script {
    fn start(script: &str, args: &[&str]) -> Script {
        let mut child = Command::new("python3")
            .arg(repo_root().join("tests/scripts").join(script))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the script prints its port");
        Script { child, port }
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `switchboard call mcp_py_echo {"text": "through"}` against `url`, with `env` and none of
/// the caller's proxy variables.
fn call(dir: &Path, url: &str, env: &[(&str, String)]) -> Output {
    let config = dir.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"py": {"type": "http", "url": url}}}).to_string(),
    )
    .unwrap();
    let mut cmd = Command::new(switchboard_bin());
    cmd.current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .env("HOME", dir.join("home"))
        .env("XDG_CACHE_HOME", dir.join("xdg-cache"));
    for v in PROXY_VARS {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.arg("--config")
        .arg(&config)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(["-vvv", "call", "mcp_py_echo", r#"{"text": "through"}"#])
        .output()
        .expect("run switchboard")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn proxy_log(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn ca_file() -> String {
    repo_root()
        .join("tests/fixtures/tls/ca.pem")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn https_goes_through_a_connect_tunnel_with_credentials_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("proxy.log");
    let server = Script::start("mcp_http_server.py", &["--tls"]);
    let proxy = Script::start(
        "counting_proxy.py",
        &[log.to_str().unwrap(), "--require", "alice:s3cret-pw"],
    );
    let url = format!("https://localhost:{}/mcp", server.port);
    let out = call(
        dir.path(),
        &url,
        &[
            (
                "HTTPS_PROXY",
                format!("http://alice:s3cret-pw@127.0.0.1:{}", proxy.port),
            ),
            ("SSL_CERT_FILE", ca_file()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("through"));
    // The proxy's credentials went to the proxy only, never to a log line or the output.
    assert!(!text(&out).contains("s3cret-pw"), "{}", text(&out));
    assert!(
        !text(&out).contains("YWxpY2U6czNjcmV0LXB3"),
        "{}",
        text(&out)
    );
    let lines = proxy_log(&log);
    let tunnel = format!(
        "CONNECT localhost:{} auth=Basic YWxpY2U6czNjcmV0LXB3",
        server.port
    );
    assert!(
        !lines.is_empty() && lines.iter().all(|l| *l == tunnel),
        "{lines:?}"
    );
}

#[test]
fn a_private_ca_is_trusted_only_through_the_platform_trust_store() {
    let dir = tempfile::tempdir().unwrap();
    let server = Script::start("mcp_http_server.py", &["--tls"]);
    let url = format!("https://localhost:{}/mcp", server.port);
    // The CA is not among the bundled roots nor in the system's store.
    let refused = call(dir.path(), &url, &[]);
    assert!(!refused.status.success(), "{}", text(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("TLS handshake with localhost:") && stderr.contains("certificate"),
        "{}",
        text(&refused)
    );
    // Named in SSL_CERT_FILE, as the platform reader honours it, the CA is trusted.
    let accepted = call(dir.path(), &url, &[("SSL_CERT_FILE", ca_file())]);
    assert!(accepted.status.success(), "{}", text(&accepted));
    assert!(String::from_utf8_lossy(&accepted.stdout).contains("through"));
}

#[test]
fn plain_http_goes_through_the_proxy_in_absolute_form_unless_no_proxy_names_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("proxy.log");
    let server = Script::start("mcp_http_server.py", &[]);
    let proxy = Script::start("counting_proxy.py", &[log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let via = format!("http://127.0.0.1:{}", proxy.port);
    let out = call(dir.path(), &url, &[("http_proxy", via.clone())]);
    assert!(out.status.success(), "{}", text(&out));
    let lines = proxy_log(&log);
    let posts = format!("FORWARD POST {url} auth=-");
    let get = format!("FORWARD GET {url} auth=-");
    assert!(
        lines.iter().filter(|l| **l == posts).count() >= 3
            && lines.iter().all(|l| *l == posts || *l == get),
        "{lines:?}"
    );
    // NO_PROXY names the host: nothing more goes through the proxy.
    let direct = call(
        dir.path(),
        &url,
        &[
            ("HTTP_PROXY", via),
            ("NO_PROXY", "example.com,127.0.0.1".into()),
        ],
    );
    assert!(direct.status.success(), "{}", text(&direct));
    assert_eq!(proxy_log(&log), lines);
}

#[test]
fn a_proxy_that_refuses_the_tunnel_is_named_without_the_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("proxy.log");
    let server = Script::start("mcp_http_server.py", &["--tls"]);
    let proxy = Script::start(
        "counting_proxy.py",
        &[log.to_str().unwrap(), "--require", "alice:right"],
    );
    let url = format!("https://localhost:{}/mcp", server.port);
    let out = call(
        dir.path(),
        &url,
        &[
            (
                "HTTPS_PROXY",
                format!("http://alice:wrong-pw@127.0.0.1:{}", proxy.port),
            ),
            ("SSL_CERT_FILE", ca_file()),
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains(&format!(
            "proxy http://127.0.0.1:{} refused the tunnel to localhost:{}: HTTP 407",
            proxy.port, server.port
        )),
        "{all}"
    );
    assert!(!all.contains("wrong-pw"), "{all}");
}
