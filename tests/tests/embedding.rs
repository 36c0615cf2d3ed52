//! The library as an embedder sees it: the tokio example (`io/examples/tokio_embed.rs`) runs
//! the demo server on tokio's threads through `Builder::spawner`, and the library's own
//! dependency tree carries none of the command line's crates.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard::{Builder, ServerConfig, ServerSpec, TaskFuture};

use crate::support::{demo_server_bin, example_bin, repo_root};

fn demo(name: &str, args: &[&str]) -> ServerSpec {
    let bin = demo_server_bin();
    let mut all = vec!["--name", name];
    all.extend_from_slice(args);
    ServerSpec::new(name, ServerConfig::stdio(bin.to_string_lossy(), &all))
}

/// An executor that is not smol's: every task the library spawns gets a thread of its own,
/// polled by `block_on` with that thread's waker. Counts the tasks spawned and still running.
fn thread_per_task(
    spawned: Arc<AtomicUsize>,
    running: Arc<AtomicUsize>,
) -> impl Fn(TaskFuture) + Send + Sync + 'static {
    move |task| {
        spawned.fetch_add(1, Ordering::SeqCst);
        running.fetch_add(1, Ordering::SeqCst);
        let running = running.clone();
        std::thread::spawn(move || {
            futures_lite::future::block_on(task);
            running.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

#[test]
fn on_a_foreign_spawner_calls_cancellation_disconnect_and_shutdown_work_and_every_task_ends() {
    let spawned = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let spawn = thread_per_task(spawned.clone(), running.clone());
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![demo("a", &[]), demo("b", &[])])
            .no_cache()
            .spawner(spawn)
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["a", "b"]);
        // Sequential, then 32 concurrent callers on this thread.
        for i in 0..20 {
            let text = format!("seq {i}");
            let r = sb
                .call("mcp_a_echo", json!({ "text": text }))
                .await
                .unwrap();
            assert_eq!(r.render_text(), text);
        }
        let callers = (0..32).map(|i| {
            let sb = sb.clone();
            async move {
                let tool = if i % 2 == 0 {
                    "mcp_a_echo"
                } else {
                    "mcp_b_echo"
                };
                let text = format!("c {i}");
                let r = sb.call(tool, json!({ "text": text })).await.unwrap();
                assert_eq!(r.render_text(), text);
            }
        });
        let tasks: Vec<_> = callers.map(smol::spawn).collect();
        for t in tasks {
            t.await;
        }
        // A dropped call is cancelled; the server keeps serving.
        let mut slow = Box::pin(sb.call("mcp_a_sleep", json!({"ms": 60000})));
        assert!(futures_lite::future::poll_once(&mut slow).await.is_none());
        drop(slow);
        let r = sb
            .call("mcp_a_echo", json!({"text": "after"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "after");
        // Disconnecting ends b's transport tasks; a's keep running.
        sb.disconnect("b").await.unwrap();
        assert!(sb.call("mcp_b_echo", json!({"text": "x"})).await.is_err());
        let r = sb
            .call("mcp_a_echo", json!({"text": "still"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "still");
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
    // Every task the library handed over ran to its end (none is left parked forever).
    assert!(
        spawned.load(Ordering::SeqCst) >= 5,
        "the driver and two transports' tasks"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while running.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        running.load(Ordering::SeqCst),
        0,
        "tasks still running after shutdown (of {} spawned)",
        spawned.load(Ordering::SeqCst)
    );
}

#[test]
fn tokio_example_calls_the_demo_server_and_shuts_down() {
    let output = Command::new(example_bin("tokio_embed"))
        .arg("--server")
        .arg(demo_server_bin())
        .output()
        .expect("run the tokio_embed example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tokio_embed failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("tools: "), "{stdout}");
    assert!(stdout.contains("mcp_demo_echo"), "{stdout}");
    assert!(stdout.contains("echo: hello from tokio"), "{stdout}");
    assert!(stdout.contains("shut down cleanly"), "{stdout}");
}

/// `cargo tree -p switchboard -e normal` (a fraction of a second, from the lock file): the
/// command line's crates (clap, tracing-subscriber, async-signal) appear nowhere in it, and
/// neither does a process crate that would install a SIGCHLD handler in the embedder's
/// process (the library waits for its children on pidfds).
#[test]
fn library_dependency_tree_has_no_command_line_crates() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .current_dir(repo_root())
        .args(["tree", "-p", "switchboard", "-e", "normal", "--offline"])
        .args(["--prefix", "depth", "--charset", "ascii"])
        .output()
        .expect("run cargo tree");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Each line is `<depth><name> v<version>...`: depth 0 is the library, 1 its direct deps.
    let deps: Vec<(usize, &str)> = tree
        .lines()
        .filter_map(|line| {
            let name_at = line.find(|c: char| !c.is_ascii_digit())?;
            let depth = line[..name_at].parse().ok()?;
            let name = line[name_at..].split_whitespace().next()?;
            Some((depth, name))
        })
        .collect();
    assert_eq!(deps.first(), Some(&(0, "switchboard")), "{tree}");
    assert!(
        deps.iter().any(|&(d, n)| d == 1 && n == "async-io"),
        "{tree}"
    );
    for (_, name) in &deps {
        assert!(
            !matches!(
                *name,
                "clap"
                    | "clap_derive"
                    | "tracing-subscriber"
                    | "async-signal"
                    | "async-process"
                    | "smol"
                    | "switchboard-cli"
                    // The output-schema checker fetches nothing: no HTTP client of its own.
                    | "reqwest"
            ),
            "{name} is in the library's normal dependency tree:\n{tree}"
        );
    }
}
