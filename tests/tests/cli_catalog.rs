//! `switchboard resources`, `read`, `prompts`, `prompt` and `complete` as real processes
//! against `mcp-demo-server --catalog`: the lists (live, then deferred from the cache), one
//! read of text and of binary contents, a prompt with arguments, a completion, and the exit
//! statuses of an ambiguous URI and an unknown prompt.

use crate::cli::{code, json_stdout, redact, stderr, stdout, Project};
use crate::support::with_snapshots;
use serde_json::{json, Value};

fn uris(v: &Value) -> Vec<String> {
    v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["server"].as_str().unwrap(),
                r["uri"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn resources_and_prompts_list_live_then_deferred_from_the_cache() {
    let project = Project::new(&[
        ("docs", &["--catalog", "--page-size", "1"]),
        ("slow", &["--catalog", "--init-delay-ms", "4000"]),
    ]);
    // Cold: every server is waited for (nothing cached), and the catalog is cached with the
    // tools.
    let cold = project.run(&["resources", "--json"]);
    assert_eq!(code(&cold), 0, "stderr:\n{}", stderr(&cold));
    let cold = json_stdout(&cold);
    assert_eq!(
        uris(&cold),
        [
            "docs demo://logo",
            "slow demo://logo",
            "docs demo://numbers",
            "slow demo://numbers",
            "docs demo://readme",
            "slow demo://readme",
        ]
    );
    assert!(cold["resources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["deferred"] == json!(false)));
    assert_eq!(cold["templates"].as_array().unwrap().len(), 2);
    // Warm: the slow server's resources come from the cache, deferred, at the gate.
    let warm = project.run(&["resources", "--json", "--server", "slow"]);
    assert_eq!(code(&warm), 0, "stderr:\n{}", stderr(&warm));
    let mut warm = json_stdout(&warm);
    redact(&mut warm, project.path());
    with_snapshots(|| insta::assert_json_snapshot!("cli_resources_json_warm_slow", warm));

    let prompts = project.run(&["prompts", "--json", "--server", "docs"]);
    assert_eq!(code(&prompts), 0, "stderr:\n{}", stderr(&prompts));
    let mut prompts = json_stdout(&prompts);
    redact(&mut prompts, project.path());
    with_snapshots(|| insta::assert_json_snapshot!("cli_prompts_json", prompts));

    // The table form names the same prompts.
    let table = project.run(&["prompts", "--server", "docs"]);
    assert_eq!(code(&table), 0);
    let text = stdout(&table);
    assert!(text.contains("mcp_docs_greet"), "{text}");
    assert!(text.contains("name [style]"), "{text}");
}

#[test]
fn read_prints_text_and_an_ambiguous_uri_asks_for_the_server() {
    let project = Project::new(&[("docs", &["--catalog"]), ("more", &["--catalog"])]);
    let ambiguous = project.run(&["read", "demo://readme"]);
    assert_eq!(code(&ambiguous), 1);
    let err = stderr(&ambiguous);
    assert!(
        err.contains("listed by several servers (docs, more)"),
        "{err}"
    );

    let out = project.run(&["read", "demo://readme", "--server", "docs"]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    assert_eq!(stdout(&out), "mcp-demo-server: echo, add, sleep.\n");

    // A templated URI no server lists, read from the server named.
    let out = project.run(&["read", "demo://greeting/ada", "--server", "more", "--json"]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    let v = json_stdout(&out);
    assert_eq!(v["server"], "more");
    assert_eq!(v["contents"][0]["text"], "Hello, ada!");

    let blob = project.run(&["read", "demo://logo", "--server", "docs"]);
    assert_eq!(code(&blob), 0);
    assert!(stdout(&blob).contains("base64 characters of image/png"));

    // The server's own error for a resource it does not have.
    let missing = project.run(&["read", "demo://nope", "--server", "docs"]);
    assert_eq!(code(&missing), 1);
    assert!(
        stderr(&missing).contains("MCP error -32002"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn prompt_takes_json_arguments_and_complete_suggests_values() {
    let project = Project::new(&[("docs", &["--catalog"])]);
    let out = project.run(&[
        "prompt",
        "mcp_docs_greet",
        r#"{"name": "ada", "style": "formal"}"#,
    ]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "# Say hello to a person\nuser: Say hello to ada, formally.\n"
    );
    let json = project.run(&["prompt", "mcp_docs_summary", "--json"]);
    assert_eq!(code(&json), 0);
    let v = json_stdout(&json);
    assert_eq!(v["messages"].as_array().unwrap().len(), 2);
    assert_eq!(v["messages"][0]["content"]["type"], "resource");

    // A missing required argument is the server's error; an unknown prompt is ours.
    let bad = project.run(&["prompt", "mcp_docs_greet"]);
    assert_eq!(code(&bad), 1);
    assert!(
        stderr(&bad).contains("MCP error -32602"),
        "{}",
        stderr(&bad)
    );
    let unknown = project.run(&["prompt", "mcp_docs_nope"]);
    assert_eq!(code(&unknown), 1);
    assert!(
        stderr(&unknown).contains("unknown prompt"),
        "{}",
        stderr(&unknown)
    );
    let args = project.run(&["prompt", "mcp_docs_greet", "[1]"]);
    assert_eq!(code(&args), 2);

    let out = project.run(&["complete", "name", "al", "--prompt", "mcp_docs_greet"]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    assert_eq!(stdout(&out), "alice\nalbert\n");
    let out = project.run(&[
        "complete",
        "name",
        "b",
        "--resource",
        "demo://greeting/{name}",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    let v = json_stdout(&out);
    assert_eq!(v["values"], json!(["bob"]));
    assert_eq!(v["server"], "docs");
    let usage = project.run(&["complete", "name"]);
    assert_eq!(code(&usage), 2);
}
