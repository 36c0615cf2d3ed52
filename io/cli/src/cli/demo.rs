//! `switchboard demo`: the whole lifecycle on an embedded default, with nothing configured.
//!
//! Four demo MCP servers — fast, slow, failing, hanging — run twice against a tool cache in a
//! fresh temporary directory: cold (empty cache), then warm. The narration shows the gate,
//! live and deferred tools, the slow server connecting after the gate, a deferred call that
//! waits and succeeds, the failing server's error, the hanging server's timeout, and the
//! teardown with the number of processes left (checked with `kill(pid, 0)` as well, for every
//! server process the run spawned: each one writes its pid into the demo's directory as it
//! starts, so a process that exited early is counted too).
//!
//! The servers are this very binary in its hidden `__demo-server` mode (the code of
//! `mcp-demo-server`): `cargo run -- demo` builds only the `switchboard` binary, so relying on
//! a second binary would fail on a fresh checkout.

use super::interrupt::Interrupt;
use super::term::{first_line, fmt_duration, Style};
use super::{naming, Fatal, Global, EXIT_FAILED, EXIT_OK};
use futures_lite::future;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, Event, ServerStatus, StartupReport, Switchboard};

/// The hidden subcommand that turns `switchboard` into `mcp-demo-server`.
pub const DEMO_SERVER_SUBCOMMAND: &str = "__demo-server";

/// Set in each demo server's environment: the directory where it records its pid.
const PID_DIR_ENV: &str = "SWITCHBOARD_DEMO_PID_DIR";

/// In a demo server (before it runs): record this process's pid as an empty file named after
/// it in `$SWITCHBOARD_DEMO_PID_DIR`, if set, so the demo can check every process it spawned.
pub fn record_server_pid() {
    if let Some(dir) = std::env::var_os(PID_DIR_ENV) {
        let path = Path::new(&dir).join(std::process::id().to_string());
        if let Err(e) = std::fs::write(&path, b"") {
            eprintln!("cannot record the pid in {}: {e}", path.display());
        }
    }
}

/// The pids recorded in `dir` by [`record_server_pid`].
fn recorded_pids(dir: &Path) -> BTreeSet<u32> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

const SLOW_INIT_MS: u64 = 1500;
const HANGING_TIMEOUT_MS: i64 = 2000;
/// Longest the demo waits for the servers to settle after a gate.
const SETTLE_LIMIT: Duration = Duration::from_secs(8);

/// A temporary directory removed on drop (the demo writes nowhere else).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("switchboard-demo-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn spec(exe: &Path, pid_dir: &Path, name: &str, args: &[&str]) -> ServerSpec {
    let mut all = vec![DEMO_SERVER_SUBCOMMAND, "--name", name];
    all.extend_from_slice(args);
    let mut config = ServerConfig::stdio(exe.to_string_lossy(), &all);
    config
        .env
        .insert(PID_DIR_ENV.into(), pid_dir.to_string_lossy().into_owned());
    ServerSpec::new(name, config)
}

fn demo_servers(exe: &Path, pid_dir: &Path) -> Vec<ServerSpec> {
    let slow_ms = SLOW_INIT_MS.to_string();
    let mut hanging = spec(exe, pid_dir, "hanging", &["--hang-init"]);
    hanging.config.timeout_ms = Some(HANGING_TIMEOUT_MS);
    vec![
        spec(exe, pid_dir, "fast", &[]),
        spec(exe, pid_dir, "slow", &["--init-delay-ms", &slow_ms]),
        spec(exe, pid_dir, "failing", &["--fail-list"]),
        hanging,
    ]
}

/// Whether a process with this pid still exists (a zombie counts as gone).
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

struct Narrator {
    style: Style,
}

impl Narrator {
    fn at(&self, since: Instant, text: &str) {
        let stamp = format!("{:>8}", format!("+{}", fmt_duration(since.elapsed())));
        println!("  {}  {text}", self.style.dim(&stamp));
    }

    fn line(&self, text: &str) {
        println!("  {text}");
    }
}

/// What one run left behind.
struct RunOutcome {
    started: usize,
    left: usize,
    still_alive: usize,
    ok: bool,
}

pub async fn run(g: &Global, interrupt: &Interrupt) -> Result<u8, Fatal> {
    let total = Instant::now();
    let style = Style {
        color: super::term::stdout_color(),
    };
    let n = Narrator { style };
    let exe = std::env::current_exe()
        .map_err(|e| Fatal::failed(format!("cannot find the switchboard binary: {e}")))?;
    if !exe.is_file() {
        return Err(Fatal::failed(format!(
            "{} is missing: build it with `cargo build --release` and run it again",
            exe.display()
        )));
    }
    let dir = TempDir::new()
        .map_err(|e| Fatal::failed(format!("cannot create a temporary directory: {e}")))?;
    let cache = dir.0.join("cache");
    // One directory for both runs (it is in the servers' config, which keys the cache).
    let pid_dir = dir.0.join("pids");
    std::fs::create_dir_all(&pid_dir)
        .map_err(|e| Fatal::failed(format!("cannot create {}: {e}", pid_dir.display())))?;
    let servers = demo_servers(&exe, &pid_dir);
    let mut seen = BTreeSet::new();

    println!(
        "{}",
        style.bold("Switchboard demo: four stdio MCP servers, run cold and then warm")
    );
    n.line(&format!(
        "server binary: {} {DEMO_SERVER_SUBCOMMAND} (the mcp-demo-server code)",
        exe.display()
    ));
    n.line(&format!("tool cache:    {}", cache.display()));
    n.line("fast     answers at once");
    n.line(&format!(
        "slow     answers initialize after {SLOW_INIT_MS} ms"
    ));
    n.line("failing  initializes, then answers tools/list with an error");
    n.line(&format!(
        "hanging  never answers initialize; its connect timeout is {HANGING_TIMEOUT_MS} ms"
    ));
    let gate = Duration::from_millis(g.gate_ms.unwrap_or(250));
    n.line(&format!(
        "startup gate {}; servers without cached tools are not waited for past it",
        fmt_duration(gate)
    ));

    let mut outcomes = Vec::new();
    for (round, title) in [
        (1, "Cold run: the cache is empty"),
        (2, "Warm run: the cache holds what run 1 listed"),
    ] {
        println!();
        println!("{}", style.bold(&format!("{round}. {title}")));
        let (sb, report) = Builder::servers(servers.clone())
            .adopt_orphans(true)
            .cache_dir(&cache)
            .project_dir(&dir.0)
            .naming(naming(g.naming))
            .gate(gate)
            .uncached_wait(Duration::ZERO)
            .start()
            .await
            .map_err(|e| Fatal::failed(e.to_string()))?;
        interrupt.running(&sb);
        let round_start = Instant::now() - report.elapsed;
        let events = sb.events();
        describe_gate(&n, &sb, &report, style);

        let mut ok = true;
        if round == 2 {
            ok &= isolation_call(&n, &sb, round_start).await;
            let deferred_call = deferred_call(&n, &sb, &report, round_start);
            let watch = watch(&n, &sb, &events, round_start);
            let (call_ok, ()) = future::zip(deferred_call, watch).await;
            ok &= call_ok;
        } else {
            watch(&n, &sb, &events, round_start).await;
        }

        let teardown = Instant::now();
        sb.shutdown().await;
        let took = teardown.elapsed();
        // Every live process below this one, escaped descendants included.
        let left = switchboard::process::descendants().len();
        // Read after the shutdown reaped everything: every process of this run has started
        // (and recorded its pid) or never will.
        let pids: BTreeSet<u32> = recorded_pids(&pid_dir).difference(&seen).copied().collect();
        seen.extend(&pids);
        let still_alive = pids.iter().filter(|p| process_alive(**p)).count();
        n.line(&format!(
            "teardown: shutdown() took {}; processes left: {left} (descendants of this process); \
             still alive by kill(pid, 0): {} of the {} server processes this run spawned",
            fmt_duration(took),
            still_alive,
            pids.len()
        ));
        outcomes.push(RunOutcome {
            started: pids.len(),
            left,
            still_alive,
            ok,
        });
    }

    let started: usize = outcomes.iter().map(|o| o.started).sum();
    let left: usize = outcomes.iter().map(|o| o.left + o.still_alive).sum();
    let ok = outcomes.iter().all(|o| o.ok) && left == 0;
    println!();
    let summary = format!(
        "Done in {}: {started} server processes spawned and checked, {left} left running.",
        fmt_duration(total.elapsed())
    );
    println!(
        "{}",
        if ok {
            style.green(&summary)
        } else {
            style.red(&summary)
        }
    );
    Ok(if ok { EXIT_OK } else { EXIT_FAILED })
}

fn describe_gate(n: &Narrator, sb: &Switchboard, report: &StartupReport, style: Style) {
    let live: Vec<&str> = report
        .tools
        .iter()
        .filter(|t| !t.deferred)
        .map(|t| t.qualified_name.as_str())
        .collect();
    let deferred: Vec<&str> = report
        .tools
        .iter()
        .filter(|t| t.deferred)
        .map(|t| t.qualified_name.as_str())
        .collect();
    n.line(&format!(
        "gate opened after {}: {} tools handed to the agent",
        style.bold(&fmt_duration(report.elapsed)),
        report.tools.len()
    ));
    let list = |v: &[&str]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    n.line(&format!(
        "  live     ({}): {}",
        report.connected.join(", "),
        list(&live)
    ));
    n.line(&format!(
        "  deferred ({}): {}",
        if report.deferred.is_empty() {
            "-".to_string()
        } else {
            report.deferred.join(", ")
        },
        style.yellow(&list(&deferred))
    ));
    if !report.deferred.is_empty() {
        n.line("    (from the cache; their server is still connecting, a call waits for it)");
    }
    for (server, error) in &report.errors {
        let error = error.to_string();
        let mut lines = error.lines();
        n.line(&style.red(&format!(
            "  failed   {server}: {}",
            lines.next().unwrap_or("")
        )));
        for l in lines {
            n.line(&style.red(&format!("           {l}")));
        }
    }
    let pending: Vec<String> = sb
        .servers()
        .into_iter()
        .filter(|s| s.status == ServerStatus::Connecting && !s.deferred)
        .map(|s| s.name)
        .collect();
    if !pending.is_empty() {
        n.line(&format!(
            "  still connecting, no cached tools: {}",
            pending.join(", ")
        ));
    }
}

/// Print what happens after the gate until no server is connecting any more.
async fn watch(n: &Narrator, sb: &Switchboard, events: &switchboard::Events, since: Instant) {
    let deadline = Instant::now() + SETTLE_LIMIT;
    let connecting = |sb: &Switchboard| {
        sb.servers()
            .iter()
            .any(|s| s.status == ServerStatus::Connecting)
    };
    while connecting(sb) && Instant::now() < deadline {
        let next = future::or(async { events.recv().await.ok() }, async {
            async_io::Timer::after(Duration::from_millis(100)).await;
            None
        })
        .await;
        let Some(Event::StatusChanged { server, status }) = next else {
            continue;
        };
        let Some(state) = sb.server_state(&server) else {
            continue;
        };
        match status {
            ServerStatus::Connected => n.at(
                since,
                &format!(
                    "{server} connected after the gate: {} live tools replace its entry \
                     (ready in {}); its tool list is now cached",
                    state.tool_count,
                    state.time_to_ready.map(fmt_duration).unwrap_or_default()
                ),
            ),
            ServerStatus::Disconnected => n.at(
                since,
                &format!(
                    "{server} failed: {}",
                    state
                        .last_error
                        .map(|e| first_line(&e.to_string()).to_string())
                        .unwrap_or_else(|| "disconnected".to_string())
                ),
            ),
            _ => {}
        }
    }
    if connecting(sb) {
        n.at(since, "gave up waiting for the servers to settle");
    }
}

/// The fast server answers while the others are slow, failing or hanging.
async fn isolation_call(n: &Narrator, sb: &Switchboard, since: Instant) -> bool {
    let Some(tool) = find_tool(sb, "fast", "add") else {
        n.at(since, "fast's add tool is missing");
        return false;
    };
    let t = Instant::now();
    match sb.call(&tool, json!({"a": 2, "b": 3})).await {
        Ok(r) if !r.is_error => {
            n.at(
                since,
                &format!(
                    "call {tool} {{a: 2, b: 3}} -> {} in {} (isolation: the other servers do \
                     not hold it up)",
                    r.render_text(),
                    fmt_duration(t.elapsed())
                ),
            );
            true
        }
        other => {
            n.at(since, &format!("call {tool} failed: {other:?}"));
            false
        }
    }
}

/// Call the slow server's deferred `echo`: it waits for the connection, then succeeds.
async fn deferred_call(
    n: &Narrator,
    sb: &Switchboard,
    report: &StartupReport,
    since: Instant,
) -> bool {
    let Some(tool) = report
        .tools
        .iter()
        .find(|t| t.server == "slow" && t.def.name == "echo" && t.deferred)
        .map(|t| t.qualified_name.clone())
    else {
        n.at(since, "slow's echo tool was not deferred at the gate");
        return false;
    };
    n.at(
        since,
        &format!("call {tool} (deferred): waits for slow to connect..."),
    );
    let t = Instant::now();
    match sb
        .call(&tool, json!({"text": "hello from a deferred call"}))
        .await
    {
        Ok(r) if !r.is_error => {
            n.at(
                since,
                &format!(
                    "call {tool} -> {:?} after waiting {}",
                    r.render_text(),
                    fmt_duration(t.elapsed())
                ),
            );
            true
        }
        other => {
            n.at(since, &format!("call {tool} failed: {other:?}"));
            false
        }
    }
}

fn find_tool(sb: &Switchboard, server: &str, raw: &str) -> Option<String> {
    sb.tools()
        .iter()
        .find(|t| t.server == server && t.def.name == raw)
        .map(|t| t.qualified_name.clone())
}
