//! `tokio_embed`: a tokio program embeds a switchboard, whose tasks run on tokio's own threads
//! through [`Builder::spawner`] (nothing of smol's executor runs; the IO reactor works under
//! any executor).
//!
//! ```sh
//! cargo run -p switchboard --example tokio_embed                      # one demo server, one call
//! cargo run --release -p switchboard --example tokio_embed -- --bench 20000
//! ```
//!
//! The plain run starts `mcp-demo-server`, calls its `echo` tool, prints the answer and the
//! tool list, shuts down and checks that no server process is left; it exits non-zero on any
//! failure (the tests run it). `--server PATH` names the demo server binary (default: the one
//! in this example's target directory, built first when the example runs under cargo).
//!
//! `--bench N` measures `echo` calls per second, N sequential calls and then N calls from 64
//! callers in flight, in four setups: tokio's multi-thread runtime with the tokio spawner;
//! tokio's current-thread runtime with the tokio spawner; tokio's multi-thread runtime with the
//! default builder (the tasks on smol's global executor, so every call crosses threads twice);
//! a `smol::Executor` given to `Builder::executor` and run by the callers' thread; and the same
//! executor given to `Builder::spawner` (what the per-task pump costs).
//!
//! Under tokio nothing drives async-io's reactor from the callers' threads, so readiness of
//! the servers' pipes arrives from async-io's own thread: one wake-up across threads per
//! answer that `smol::block_on` (which drives the reactor itself) does not pay.

use serde_json::json;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard::{Builder, ServerConfig, ServerSpec, Switchboard};

#[path = "load/mod.rs"]
mod load;
use load::{callers, echo, IN_FLIGHT};

/// The echo tool every measured call goes to.
const ECHO: &str = "mcp_demo_echo";
const WARMUP_CALLS: usize = 200;

#[tokio::main]
async fn main() -> ExitCode {
    let mut server = None;
    let mut bench = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--server" => server = args.next().map(PathBuf::from),
            "--bench" => bench = args.next().and_then(|n| n.parse::<usize>().ok()),
            _ => {
                eprintln!("usage: tokio_embed [--server PATH] [--bench CALLS]");
                return ExitCode::from(2);
            }
        }
    }
    let bin = server.unwrap_or_else(demo_server_bin);
    if let Some(calls) = bench {
        // Each setup builds its own runtime, which cannot happen on this runtime's threads.
        let bin2 = bin.clone();
        tokio::task::spawn_blocking(move || run_bench(&bin2, calls))
            .await
            .expect("bench thread");
        return ExitCode::SUCCESS;
    }
    match demo(&bin).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tokio_embed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The spawner an embedder writes for tokio: a `Handle` spawns from any thread (tasks woken by
/// the IO reactor are rescheduled from the reactor's thread, outside the runtime).
fn tokio_spawner() -> impl Fn(switchboard::TaskFuture) + Send + Sync + 'static {
    let handle = tokio::runtime::Handle::current();
    move |task| {
        handle.spawn(task);
    }
}

fn spec(bin: &Path) -> ServerSpec {
    ServerSpec::new(
        "demo",
        ServerConfig::stdio(bin.to_string_lossy(), &["--name", "demo"]),
    )
}

async fn demo(bin: &Path) -> Result<(), String> {
    let (sb, report) = Builder::servers(vec![spec(bin)])
        .no_cache()
        .spawner(tokio_spawner())
        .start()
        .await
        .map_err(|e| e.to_string())?;
    if report.connected != ["demo"] {
        return Err(format!("demo server did not connect: {:?}", report.errors));
    }
    let names: Vec<String> = sb
        .tools()
        .iter()
        .map(|t| t.qualified_name.clone())
        .collect();
    println!("tools: {}", names.join(", "));
    let result = sb
        .call("mcp_demo_echo", json!({"text": "hello from tokio"}))
        .await
        .map_err(|e| e.to_string())?;
    println!("echo: {}", result.render_text());
    sb.shutdown().await;
    let left = sb.live_processes();
    if !left.is_empty() {
        return Err(format!("processes left after shutdown: {left:?}"));
    }
    println!("shut down cleanly");
    Ok(())
}

// --- --bench -------------------------------------------------------------------------------

/// Sequential and 64-in-flight wall times of `calls` calls each.
async fn measure(sb: &Switchboard, calls: usize, spawn: impl Fn(Vec<Caller>) -> Joined) -> Times {
    for i in 0..WARMUP_CALLS {
        echo(sb, ECHO, i).await;
    }
    let t0 = Instant::now();
    for i in 0..calls {
        echo(sb, ECHO, i).await;
    }
    let sequential = t0.elapsed();
    let t0 = Instant::now();
    let callers = callers(sb, ECHO, calls)
        .into_iter()
        .map(|f| Box::pin(f) as Caller)
        .collect();
    spawn(callers).await;
    (sequential, t0.elapsed())
}

type Caller = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
type Joined = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
type Times = (Duration, Duration);

/// The 64 callers as tokio tasks.
fn on_tokio(callers: Vec<Caller>) -> Joined {
    let tasks: Vec<_> = callers.into_iter().map(tokio::spawn).collect();
    Box::pin(async move {
        for t in tasks {
            t.await.expect("caller task");
        }
    })
}

fn tokio_run(bin: &Path, calls: usize, runtime: tokio::runtime::Runtime, spawner: bool) -> Times {
    runtime.block_on(async {
        let mut builder = Builder::servers(vec![spec(bin)]).no_cache();
        if spawner {
            builder = builder.spawner(tokio_spawner());
        }
        let (sb, report) = builder.start().await.expect("start");
        assert_eq!(report.connected, ["demo"], "{:?}", report.errors);
        let times = measure(&sb, calls, on_tokio).await;
        sb.shutdown().await;
        times
    })
}

/// `pumped`: the executor behind `Builder::spawner` (one pump per task) instead of
/// `Builder::executor` (tasks straight on its queue), to show what the pump costs.
fn smol_executor_run(bin: &Path, calls: usize, pumped: bool) -> Times {
    let ex = Arc::new(smol::Executor::new());
    smol::block_on(ex.run(async {
        let builder = Builder::servers(vec![spec(bin)]).no_cache();
        let builder = if pumped {
            let ex = ex.clone();
            builder.spawner(move |task| ex.spawn(task).detach())
        } else {
            builder.executor(ex.clone())
        };
        let (sb, report) = builder.start().await.expect("start");
        assert_eq!(report.connected, ["demo"], "{:?}", report.errors);
        let spawn = |callers: Vec<Caller>| -> Joined {
            let tasks: Vec<_> = callers.into_iter().map(|f| ex.spawn(f)).collect();
            Box::pin(async move {
                for t in tasks {
                    t.await;
                }
            })
        };
        let times = measure(&sb, calls, spawn).await;
        sb.shutdown().await;
        times
    }))
}

fn run_bench(bin: &Path, calls: usize) {
    let multi = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    let current = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let rows: [(&str, Times); 5] = [
        (
            "tokio multi-thread, `Builder::spawner` (tokio)",
            tokio_run(bin, calls, multi().expect("runtime"), true),
        ),
        (
            "tokio current-thread, `Builder::spawner` (tokio)",
            tokio_run(bin, calls, current().expect("runtime"), true),
        ),
        (
            "tokio multi-thread, default builder (the library's executor thread)",
            tokio_run(bin, calls, multi().expect("runtime"), false),
        ),
        (
            "`Builder::executor`, run by the callers' thread",
            smol_executor_run(bin, calls, false),
        ),
        (
            "the same smol executor through `Builder::spawner`",
            smol_executor_run(bin, calls, true),
        ),
    ];
    println!("| setup ({calls} echo calls) | sequential calls/s | {IN_FLIGHT} in flight calls/s |");
    println!("| --- | --- | --- |");
    for (name, (sequential, concurrent)) in rows {
        let rate = |d: Duration| calls as f64 / d.as_secs_f64();
        println!(
            "| {name} | {:.0} | {:.0} |",
            rate(sequential),
            rate(concurrent)
        );
    }
}

/// `mcp-demo-server` in this example's target directory (`target/<profile>/examples/..`),
/// built first with the same profile when the example runs under cargo (cargo builds no other
/// package's binaries for an example).
fn demo_server_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("path of this example");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the example lives in target/<profile>/examples")
        .to_path_buf();
    let bin = profile_dir.join(format!("mcp-demo-server{}", std::env::consts::EXE_SUFFIX));
    if let (Ok(cargo), Some(target_dir)) = (std::env::var("CARGO"), profile_dir.parent()) {
        let profile = profile_dir.file_name().and_then(|p| p.to_str());
        let profile = match profile {
            Some("debug") | None => "dev",
            Some(p) => p,
        };
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "switchboard-cli", "--bin"])
            .arg("mcp-demo-server")
            .args(["--profile", profile, "--target-dir"])
            .arg(target_dir)
            .status()
            .expect("run cargo to build mcp-demo-server");
        assert!(status.success(), "building mcp-demo-server failed");
    }
    assert!(
        bin.is_file(),
        "{} is missing: `cargo build -p switchboard-cli --bins`",
        bin.display()
    );
    bin
}
