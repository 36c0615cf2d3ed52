//! `shell_bench`: the shell against real `mcp-demo-server` processes.
//!
//! ```sh
//! ./scripts/install-peers.sh   # once: the TypeScript SDK for the reference client
//! cargo run --release -p switchboard --example shell_bench
//! ```
//!
//! Options: `--runs N` (3; every figure is the median of N runs), `--calls N` (5000 calls per
//! throughput run), `--only startup|calls|memory|seq` and `--client
//! embedded|own-thread|executor|ts|raw` (both repeatable; `--client` picks the clients).
//! `--only seq` (never run by default) makes only the warm-up and `--calls` sequential calls
//! (`embedded` unless `--client` says otherwise) and prints calls/s: for `strace -c` and
//! callgrind, run it with two `--calls` and subtract.
//!
//! Measures, and prints as one markdown table:
//!
//! 1. Time to `StartupComplete` (`Builder::start().await`: `report.elapsed` and wall time) with
//!    1, 10 and 50 servers: cold cache (fresh directory), warm cache (same directory, second
//!    start), and warm cache with servers that take 1 s to answer `initialize`, so the start
//!    returns at the 250 ms gate with deferred tools.
//! 2. The servers' own start-up, measured by a minimal raw client (`std::process`, blocking
//!    line I/O, no parsing beyond a substring check): spawn all N, `initialize` answered,
//!    `tools/list` answered. The shell's overhead per server is (cold start − raw) / N.
//! 3. `echo` call throughput to one server, sequential and 64 in flight, through
//!    `Switchboard::call` (three placements: the driver on an executor given to
//!    `Builder::executor` and run by the callers' own thread; the default builder with callers
//!    on their own thread; the default builder with callers on smol's global executor, where
//!    the driver runs), through the official TypeScript SDK client
//!    (`tests/peers/bench_ts_client.mjs`, run with `node`), and through a raw blocking client
//!    (the floor this server allows), each against its own instance of the same binary. Client
//!    and server CPU time per call are reported too.
//! 4. VmRSS of a process with 50 servers × 100 extra tools connected (measured in a child
//!    process, so earlier sections do not inflate it), and the demo servers' own RSS.
//!
//! The example builds `mcp-demo-server` with the same profile and target directory first
//! (cargo does not build a package's binaries for its examples).

use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, StartupReport};

const SIZES: [usize; 3] = [1, 10, 50];
const GATE: Duration = Duration::from_millis(250);
const SLOW_INIT_MS: u64 = 1000;
#[path = "load/mod.rs"]
mod load;
use load::{callers, echo, IN_FLIGHT};

/// The echo tool every measured call goes to.
const ECHO: &str = "mcp_bench_echo";
const WARMUP_CALLS: usize = 200;

struct Options {
    runs: usize,
    calls: usize,
    only: Vec<String>,
    clients: Vec<String>,
    memory_child: bool,
}

fn parse_options() -> Options {
    let mut o = Options {
        runs: 3,
        calls: 5000,
        only: Vec::new(),
        clients: Vec::new(),
        memory_child: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = value().parse().expect("--runs N"),
            "--calls" => o.calls = value().parse().expect("--calls N"),
            "--only" => o.only.push(value()),
            "--client" => o.clients.push(value()),
            "--memory-child" => o.memory_child = true,
            _ => panic!(
                "unknown argument {a:?} (--runs N, --calls N, --only startup|calls|memory, \
                 --client embedded|own-thread|executor|ts|raw)"
            ),
        }
    }
    o
}

fn main() {
    let o = parse_options();
    let bin = demo_server_bin();
    if o.memory_child {
        memory_child(&bin);
        return;
    }
    let want = |s: &str| o.only.is_empty() || o.only.iter().any(|x| x == s);
    let mut rows: Vec<Row> = Vec::new();
    eprintln!(
        "shell_bench: {} run(s) per figure, demo server {}",
        o.runs,
        bin.display()
    );
    if want("startup") {
        startup_section(&bin, o.runs, &mut rows);
    }
    if o.only.iter().any(|x| x == "seq") {
        seq_section(&bin, &o);
        return;
    }
    if want("calls") {
        calls_section(&bin, &o, &mut rows);
    }
    if want("memory") {
        memory_section(o.runs, &mut rows);
    }
    println!();
    println!(
        "| Measurement | Median of {} | Runs | Goal | Met? |",
        o.runs
    );
    println!("|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.what, r.median, r.runs, r.goal, r.met
        );
    }
}

struct Row {
    what: String,
    median: String,
    runs: String,
    goal: String,
    met: String,
}

fn row(what: impl Into<String>, median: impl Into<String>, runs: impl Into<String>) -> Row {
    Row {
        what: what.into(),
        median: median.into(),
        runs: runs.into(),
        goal: "—".into(),
        met: "—".into(),
    }
}

impl Row {
    fn goal(mut self, goal: impl Into<String>, met: bool) -> Self {
        self.goal = goal.into();
        self.met = if met { "yes" } else { "**no**" }.into();
        self
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn fmt_runs(v: &[f64], digits: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.digits$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// --- The demo server -------------------------------------------------------------------------

/// `mcp-demo-server` next to this example's profile directory, built first (same profile, same
/// target directory) when the example runs under cargo.
fn demo_server_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("path of this example");
    // target/<profile>/examples/shell_bench
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the example lives in target/<profile>/examples")
        .to_path_buf();
    let bin = profile_dir.join(format!("mcp-demo-server{}", std::env::consts::EXE_SUFFIX));
    if let (Ok(cargo), Some(target_dir)) = (std::env::var("CARGO"), profile_dir.parent()) {
        if std::env::args().all(|a| a != "--memory-child") {
            let profile = profile_dir
                .file_name()
                .and_then(|p| p.to_str())
                .unwrap_or("release");
            let profile = if profile == "debug" { "dev" } else { profile };
            let status = Command::new(cargo)
                .args(["build", "--quiet", "-p", "switchboard-cli", "--bin"])
                .arg("mcp-demo-server")
                .args(["--profile", profile, "--target-dir"])
                .arg(target_dir)
                .status()
                .expect("run cargo to build mcp-demo-server");
            assert!(status.success(), "building mcp-demo-server failed");
        }
    }
    assert!(
        bin.is_file(),
        "{} is missing: `cargo build --release -p switchboard-cli --bins`",
        bin.display()
    );
    bin
}

fn demo(bin: &Path, name: &str, extra: &[&str]) -> ServerSpec {
    let mut args = vec!["--name", name];
    args.extend_from_slice(extra);
    ServerSpec::new(name, ServerConfig::stdio(bin.to_string_lossy(), &args))
}

fn demos(bin: &Path, n: usize, extra: &[&str]) -> Vec<ServerSpec> {
    (0..n).map(|i| demo(bin, &format!("s{i}"), extra)).collect()
}

/// A fresh, empty directory under the system temp dir.
fn temp_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "shell-bench-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temp dir");
    dir
}

// --- 1 and 2: startup ------------------------------------------------------------------------

struct Started {
    wall: Duration,
    report: StartupReport,
}

/// One `Builder::start()` with this cache dir; shut down before returning.
fn start(specs: Vec<ServerSpec>, cache: &Path) -> Started {
    smol::block_on(async {
        let t0 = Instant::now();
        let (sb, report) = Builder::servers(specs)
            .cache_dir(cache)
            .start()
            .await
            .expect("start");
        let wall = t0.elapsed();
        assert!(
            report.errors.is_empty(),
            "servers failed: {:?}",
            report.errors
        );
        sb.shutdown().await;
        Started { wall, report }
    })
}

/// The servers' own start-up for N servers, by the most direct client there is: spawn all N
/// (writing `initialize` to each at once), then per server in order read the `initialize`
/// answer and send `notifications/initialized` + `tools/list`, then read every `tools/list`
/// answer. Returns the time from the first spawn to the last answer.
fn raw_startup(bin: &Path, n: usize) -> Duration {
    const INIT: &str = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","#,
        r#""capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
        "\n"
    );
    const LIST: &str = concat!(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        "\n"
    );
    let t0 = Instant::now();
    let mut kids = Vec::with_capacity(n);
    for i in 0..n {
        let mut child = Command::new(bin)
            .args(["--name", &format!("s{i}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mcp-demo-server");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(INIT.as_bytes()).expect("write initialize");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        kids.push((child, stdin, stdout));
    }
    let mut line = String::new();
    for (_, stdin, stdout) in &mut kids {
        line.clear();
        stdout.read_line(&mut line).expect("read initialize answer");
        assert!(line.contains(r#""protocolVersion""#), "initialize: {line}");
        stdin.write_all(LIST.as_bytes()).expect("write tools/list");
    }
    for (_, _, stdout) in &mut kids {
        line.clear();
        stdout.read_line(&mut line).expect("read tools/list answer");
        assert!(line.contains(r#""tools""#), "tools/list: {line}");
    }
    let took = t0.elapsed();
    for (mut child, stdin, stdout) in kids {
        drop(stdin);
        drop(stdout);
        let _ = child.wait();
    }
    took
}

#[derive(Default)]
struct StartupRuns {
    raw: Vec<f64>,
    cold_wall: Vec<f64>,
    cold_elapsed: Vec<f64>,
    warm_wall: Vec<f64>,
    warm_elapsed: Vec<f64>,
    slow_cold_wall: Vec<f64>,
    slow_warm_wall: Vec<f64>,
    slow_warm_elapsed: Vec<f64>,
    slow_warm_deferred: Vec<usize>,
}

fn startup_section(bin: &Path, runs: usize, rows: &mut Vec<Row>) {
    let mut all: Vec<StartupRuns> = SIZES.iter().map(|_| StartupRuns::default()).collect();
    let slow_flag = SLOW_INIT_MS.to_string();
    // Interleaved, so the shared machine's noise hits every figure alike.
    for run in 0..runs {
        for (k, &n) in SIZES.iter().enumerate() {
            let r = &mut all[k];
            r.raw.push(ms(raw_startup(bin, n)));

            let dir = temp_dir();
            let cold = start(demos(bin, n, &[]), &dir);
            assert_eq!(cold.report.connected.len(), n);
            r.cold_wall.push(ms(cold.wall));
            r.cold_elapsed.push(ms(cold.report.elapsed));
            let warm = start(demos(bin, n, &[]), &dir);
            assert_eq!(warm.report.connected.len(), n);
            r.warm_wall.push(ms(warm.wall));
            r.warm_elapsed.push(ms(warm.report.elapsed));
            let _ = std::fs::remove_dir_all(&dir);

            let dir = temp_dir();
            let slow = ["--init-delay-ms", slow_flag.as_str()];
            let cold = start(demos(bin, n, &slow), &dir);
            assert_eq!(cold.report.connected.len(), n);
            r.slow_cold_wall.push(ms(cold.wall));
            let warm = start(demos(bin, n, &slow), &dir);
            r.slow_warm_wall.push(ms(warm.wall));
            r.slow_warm_elapsed.push(ms(warm.report.elapsed));
            r.slow_warm_deferred.push(warm.report.deferred.len());
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!(
                "startup run {} N={n}: raw {:.1} ms, cold {:.1} ms, warm {:.1} ms, slow warm {:.1} ms ({} deferred)",
                run + 1,
                r.raw[run],
                r.cold_wall[run],
                r.warm_wall[run],
                r.slow_warm_wall[run],
                r.slow_warm_deferred[run],
            );
        }
    }
    for (k, &n) in SIZES.iter().enumerate() {
        let r = &all[k];
        rows.push(row(
            format!("Cold cache, N={n}: `start()` wall (`report.elapsed`)"),
            format!(
                "{:.1} ms ({:.1} ms)",
                median(&r.cold_wall),
                median(&r.cold_elapsed)
            ),
            fmt_runs(&r.cold_wall, 1),
        ));
    }
    for (k, &n) in SIZES.iter().enumerate() {
        let r = &all[k];
        rows.push(row(
            format!("Warm cache, N={n}: `start()` wall (`report.elapsed`)"),
            format!(
                "{:.1} ms ({:.1} ms)",
                median(&r.warm_wall),
                median(&r.warm_elapsed)
            ),
            fmt_runs(&r.warm_wall, 1),
        ));
    }
    for (k, &n) in SIZES.iter().enumerate() {
        let r = &all[k];
        rows.push(row(
            format!("Slow servers (`--init-delay-ms {SLOW_INIT_MS}`), cold cache, N={n}: wall"),
            format!("{:.1} ms", median(&r.slow_cold_wall)),
            fmt_runs(&r.slow_cold_wall, 1),
        ));
    }
    for (k, &n) in SIZES.iter().enumerate() {
        let r = &all[k];
        let wall = median(&r.slow_warm_wall);
        let all_deferred = r.slow_warm_deferred.iter().all(|&d| d == n);
        let mut line = row(
            format!(
                "Slow servers, warm cache, N={n}: wall (`report.elapsed`), deferred {:?}",
                r.slow_warm_deferred
            ),
            format!("{wall:.1} ms ({:.1} ms)", median(&r.slow_warm_elapsed)),
            fmt_runs(&r.slow_warm_wall, 1),
        );
        if n == 50 {
            let limit = ms(GATE) + 20.0;
            line = line.goal(
                format!("≤ {limit:.0} ms (gate + 20 ms), all deferred"),
                wall <= limit && all_deferred,
            );
        }
        rows.push(line);
    }
    for (k, &n) in SIZES.iter().enumerate() {
        let r = &all[k];
        rows.push(row(
            format!("Servers' own start-up, raw client, N={n}: spawn → `tools/list` answered"),
            format!("{:.1} ms", median(&r.raw)),
            fmt_runs(&r.raw, 1),
        ));
    }
    for (k, &n) in SIZES.iter().enumerate() {
        let r = &all[k];
        // Per run (the two were measured back to back), then the median.
        let per: Vec<f64> = r
            .raw
            .iter()
            .zip(&r.cold_wall)
            .map(|(raw, sb)| (sb - raw) / n as f64)
            .collect();
        let med = median(&per);
        rows.push(
            row(
                format!("Shell overhead per server, N={n}: (cold `start()` wall − raw) / N"),
                format!("{med:.2} ms"),
                fmt_runs(&per, 2),
            )
            .goal("< 2 ms", med < 2.0),
        );
    }
}

// --- 3: call throughput -----------------------------------------------------------------------

struct Throughput {
    sequential: f64,
    concurrent: f64,
    /// Client CPU time per call (all of the client's threads), in µs.
    sequential_cpu_us: f64,
    concurrent_cpu_us: f64,
    /// The server's CPU time per call (sequential and 64 in flight), in µs, when known.
    server_cpu_us: Option<(f64, f64)>,
}

impl Throughput {
    /// From (wall, client CPU) of each phase.
    fn new(calls: usize, seq: (Duration, Duration), conc: (Duration, Duration)) -> Self {
        let n = calls as f64;
        Throughput {
            sequential: n / seq.0.as_secs_f64(),
            concurrent: n / conc.0.as_secs_f64(),
            sequential_cpu_us: seq.1.as_secs_f64() * 1e6 / n,
            concurrent_cpu_us: conc.1.as_secs_f64() * 1e6 / n,
            server_cpu_us: None,
        }
    }

    fn with_server(mut self, calls: usize, seq: Duration, conc: Duration) -> Self {
        let n = calls as f64;
        self.server_cpu_us = Some((seq.as_secs_f64() * 1e6 / n, conc.as_secs_f64() * 1e6 / n));
        self
    }
}

/// CPU time (user + system, every thread, dead ones too) of another process, from
/// /proc/<pid>/stat; clock-tick resolution (usually 10 ms).
fn pid_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(ticks * 1_000_000_000 / hz)
}

/// CPU time of this whole process (every thread) so far.
fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Where the benchmark's callers run.
#[derive(Clone, Copy, PartialEq)]
enum Callers {
    /// On the thread that called `smol::block_on` (a `LocalExecutor` for the 64 callers): every
    /// call crosses to the driver's thread (smol's global executor) and back.
    OwnThread,
    /// As tasks on smol's global executor, where the driver also runs.
    DriverExecutor,
    /// On the thread that called `smol::block_on`, which also runs the executor given to
    /// `Builder::executor`: the driver, the transports and the callers share one thread.
    Embedded,
}

fn switchboard_calls(bin: &Path, calls: usize, placement: Callers, conc: bool) -> Throughput {
    let ex = Arc::new(smol::Executor::new());
    smol::block_on(ex.run(async {
        let mut builder = Builder::servers(vec![demo(bin, "bench", &[])]).no_cache();
        if placement == Callers::Embedded {
            builder = builder.executor(ex.clone());
        }
        let (sb, report) = builder.start().await.expect("start");
        assert_eq!(report.connected, vec!["bench"]);
        let server = sb.live_processes()[0];
        let mut server_cpu = Vec::new();
        let sequential = {
            let sb = sb.clone();
            let run = async move {
                for i in 0..WARMUP_CALLS {
                    echo(&sb, ECHO, i).await;
                }
                let (t0, c0, s0) = (Instant::now(), process_cpu(), pid_cpu(server));
                for i in 0..calls {
                    echo(&sb, ECHO, i).await;
                }
                (t0.elapsed(), process_cpu() - c0, pid_cpu(server) - s0)
            };
            match placement {
                Callers::OwnThread | Callers::Embedded => run.await,
                Callers::DriverExecutor => smol::spawn(run).await,
            }
        };
        server_cpu.push(sequential.2);
        let sequential = (sequential.0, sequential.1);
        let (t0, c0, s0) = (Instant::now(), process_cpu(), pid_cpu(server));
        match placement {
            _ if !conc => {}
            Callers::OwnThread => {
                let ex = smol::LocalExecutor::new();
                let tasks: Vec<_> = callers(&sb, ECHO, calls)
                    .into_iter()
                    .map(|f| ex.spawn(f))
                    .collect();
                ex.run(async {
                    for t in tasks {
                        t.await;
                    }
                })
                .await;
            }
            Callers::DriverExecutor => {
                let tasks: Vec<_> = callers(&sb, ECHO, calls)
                    .into_iter()
                    .map(smol::spawn)
                    .collect();
                for t in tasks {
                    t.await;
                }
            }
            Callers::Embedded => {
                let tasks: Vec<_> = callers(&sb, ECHO, calls)
                    .into_iter()
                    .map(|f| ex.spawn(f))
                    .collect();
                for t in tasks {
                    t.await;
                }
            }
        }
        let concurrent = (t0.elapsed(), process_cpu() - c0);
        server_cpu.push(pid_cpu(server) - s0);
        sb.shutdown().await;
        Throughput::new(calls, sequential, concurrent).with_server(
            calls,
            server_cpu[0],
            server_cpu[1],
        )
    }))
}

/// The floor: the same calls from a raw blocking client (one thread, `std::process`, line I/O,
/// a substring check instead of parsing): sequential, then 64 requests kept in flight.
fn raw_calls(bin: &Path, calls: usize) -> Throughput {
    let mut child = Command::new(bin)
        .args(["--name", "bench"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mcp-demo-server");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let mut read = |line: &mut String| {
        line.clear();
        stdout.read_line(line).expect("read an answer");
    };
    stdin
        .write_all(
            concat!(
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","#,
                r#""capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
                "\n",
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                "\n"
            )
            .as_bytes(),
        )
        .expect("write initialize");
    read(&mut line);
    let request = |i: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"call {i}"}}}}}}"#,
            i + 1
        ) + "\n"
    };
    for i in 0..WARMUP_CALLS {
        stdin.write_all(request(i).as_bytes()).expect("write");
        read(&mut line);
    }
    let server = child.id();
    let (t0, c0, s0) = (Instant::now(), process_cpu(), pid_cpu(server));
    for i in 0..calls {
        stdin.write_all(request(i).as_bytes()).expect("write");
        read(&mut line);
        assert!(line.contains(&format!("\"call {i}\"")), "{line}");
    }
    let sequential = (t0.elapsed(), process_cpu() - c0);
    let server_seq = pid_cpu(server) - s0;
    let (t0, c0, s0) = (Instant::now(), process_cpu(), pid_cpu(server));
    let mut sent = 0;
    while sent < IN_FLIGHT.min(calls) {
        stdin.write_all(request(sent).as_bytes()).expect("write");
        sent += 1;
    }
    for _ in 0..calls {
        read(&mut line);
        assert!(line.contains("call "), "{line}");
        if sent < calls {
            stdin.write_all(request(sent).as_bytes()).expect("write");
            sent += 1;
        }
    }
    let concurrent = (t0.elapsed(), process_cpu() - c0);
    let server_conc = pid_cpu(server) - s0;
    drop(stdin);
    let _ = child.wait();
    Throughput::new(calls, sequential, concurrent).with_server(calls, server_seq, server_conc)
}

fn ts_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers/bench_ts_client.mjs")
}

/// The TypeScript SDK client's figures, or why they are missing.
fn ts_calls(bin: &Path, calls: usize) -> Result<Throughput, String> {
    let script = ts_script();
    let sdk = script.with_file_name("node_modules/@modelcontextprotocol/sdk");
    if !sdk.is_dir() {
        return Err("the TypeScript SDK is not installed: run ./scripts/install-peers.sh".into());
    }
    let out = Command::new("node")
        .arg(&script)
        .arg(bin)
        .arg(calls.to_string())
        .arg(IN_FLIGHT.to_string())
        .arg(WARMUP_CALLS.to_string())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not run node: {e}"))?;
    if !out.status.success() {
        return Err(format!("bench_ts_client.mjs failed: {}", out.status));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("bench_ts_client.mjs printed no JSON: {e}"))?;
    let get = |k: &str| {
        v[k].as_f64()
            .ok_or_else(|| format!("bench_ts_client.mjs: no {k}"))
    };
    Ok(Throughput {
        sequential: get("sequential_calls_per_s")?,
        concurrent: get("concurrent_calls_per_s")?,
        sequential_cpu_us: get("sequential_cpu_us_per_call")?,
        concurrent_cpu_us: get("concurrent_cpu_us_per_call")?,
        server_cpu_us: None,
    })
}

fn calls_section(bin: &Path, o: &Options, rows: &mut Vec<Row>) {
    let (runs, calls) = (o.runs, o.calls);
    let want = |c: &str| o.clients.is_empty() || o.clients.iter().any(|x| x == c);
    // (label, runs); the Switchboard figure compared with the SDK is the first one.
    let mut clients: Vec<(&str, Vec<Throughput>)> = vec![
        (
            "`Switchboard::call`, `Builder::executor` run by the callers' thread",
            vec![],
        ),
        (
            "`Switchboard::call`, default builder, callers on their own thread",
            vec![],
        ),
        (
            "`Switchboard::call`, default builder, callers on smol's global executor",
            vec![],
        ),
        ("TypeScript SDK client `callTool`", vec![]),
        ("Raw blocking client (the floor)", vec![]),
    ];
    const SWITCHBOARD: [(usize, &str); 3] = [
        (0, "`Builder::executor`, callers' thread"),
        (1, "default, callers on their own thread"),
        (2, "default, callers on the global executor"),
    ];
    const TS: usize = 3;
    const RAW: usize = 4;
    let mut ts_error = None;
    // Interleaved, so the shared machine's noise hits every client alike.
    for run in 0..runs {
        let figures = [
            want("embedded").then(|| Ok(switchboard_calls(bin, calls, Callers::Embedded, true))),
            want("own-thread").then(|| Ok(switchboard_calls(bin, calls, Callers::OwnThread, true))),
            want("executor")
                .then(|| Ok(switchboard_calls(bin, calls, Callers::DriverExecutor, true))),
            want("ts").then(|| ts_calls(bin, calls)),
            want("raw").then(|| Ok(raw_calls(bin, calls))),
        ];
        for ((label, all), t) in clients.iter_mut().zip(figures) {
            match t {
                None => {}
                Some(Ok(t)) => {
                    eprintln!(
                        "calls run {}: {label}: {:.0}/s sequential ({:.1} µs CPU/call), {:.0}/s x{IN_FLIGHT} ({:.1} µs CPU/call)",
                        run + 1,
                        t.sequential,
                        t.sequential_cpu_us,
                        t.concurrent,
                        t.concurrent_cpu_us
                    );
                    all.push(t);
                }
                Some(Err(e)) => ts_error = Some(e),
            }
        }
    }
    let have = |k: usize| !clients[k].1.is_empty();
    type Pick = fn(&Throughput) -> f64;
    type PickServer = fn(&(f64, f64)) -> f64;
    let phases: [(&str, Pick, Pick, PickServer); 2] = [
        (
            "sequential",
            |t| t.sequential,
            |t| t.sequential_cpu_us,
            |s| s.0,
        ),
        (
            "64 in flight",
            |t| t.concurrent,
            |t| t.concurrent_cpu_us,
            |s| s.1,
        ),
    ];
    for (phase, rate, cpu, server_cpu) in phases {
        for (label, all) in &clients {
            if all.is_empty() {
                continue;
            }
            let r: Vec<f64> = all.iter().map(rate).collect();
            let c: Vec<f64> = all.iter().map(cpu).collect();
            let server: Vec<f64> = all
                .iter()
                .filter_map(|t| t.server_cpu_us.as_ref().map(server_cpu))
                .collect();
            let server = if server.is_empty() {
                String::new()
            } else {
                format!(", server {:.0} µs", median(&server))
            };
            rows.push(row(
                format!("{label}: `echo`, {phase}, {calls} calls"),
                format!(
                    "{:.0} calls/s; CPU/call: client {:.0} µs{server}",
                    median(&r),
                    median(&c)
                ),
                fmt_runs(&r, 0),
            ));
        }
        let ts = &clients[TS].1;
        if !have(TS) {
            continue;
        }
        if let Some(e) = &ts_error {
            rows.push(row(
                format!("Switchboard ÷ TypeScript SDK, {phase}"),
                format!("not measured: {e}"),
                "",
            ));
            continue;
        }
        for (k, what) in SWITCHBOARD.into_iter().filter(|&(k, _)| have(k)) {
            // Ratio per run (they ran back to back), then the median.
            let ratio: Vec<f64> = clients[k]
                .1
                .iter()
                .zip(ts)
                .map(|(s, t)| rate(s) / rate(t))
                .collect();
            let m = median(&ratio);
            rows.push(
                row(
                    format!("Switchboard ({what}) ÷ TypeScript SDK, {phase}"),
                    format!("{m:.2}×"),
                    fmt_runs(&ratio, 2),
                )
                .goal("≥ 3×", m >= 3.0),
            );
        }
        if !have(RAW) {
            continue;
        }
        let floor: Vec<f64> = clients[RAW]
            .1
            .iter()
            .zip(ts)
            .map(|(s, t)| rate(s) / rate(t))
            .collect();
        rows.push(row(
            format!("Raw floor ÷ TypeScript SDK, {phase}: the best any client could do here"),
            format!("{:.2}×", median(&floor)),
            fmt_runs(&floor, 2),
        ));
    }
}

/// `--only seq`: sequential calls only; per client one line, the median and the runs.
fn seq_section(bin: &Path, o: &Options) {
    for (name, placement) in [
        ("embedded", Callers::Embedded),
        ("own-thread", Callers::OwnThread),
        ("executor", Callers::DriverExecutor),
    ] {
        if o.clients.iter().any(|x| x == name) || (o.clients.is_empty() && name == "embedded") {
            let r: Vec<f64> = (0..o.runs)
                .map(|_| switchboard_calls(bin, o.calls, placement, false).sequential)
                .collect();
            println!(
                "{name}: {:.0} sequential calls/s ({})",
                median(&r),
                fmt_runs(&r, 0)
            );
        }
    }
}

// --- 4: memory --------------------------------------------------------------------------------

/// A `kB` field of /proc/<pid>/status, in KiB.
fn status_kib(pid: &str, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs in a fresh process (`--memory-child`): 50 servers × 100 extra tools, cold cache.
/// Prints one JSON line.
fn memory_child(bin: &Path) {
    let before = status_kib("self", "VmRSS").unwrap_or(0);
    let dir = temp_dir();
    let out = smol::block_on(async {
        let (sb, report) = Builder::servers(demos(bin, 50, &["--tools", "100"]))
            .cache_dir(&dir)
            .start()
            .await
            .expect("start");
        assert_eq!(report.connected.len(), 50, "{:?}", report.errors);
        let after = status_kib("self", "VmRSS").unwrap_or(0);
        // Let the cache writes finish, then read again.
        async_io::Timer::after(Duration::from_millis(500)).await;
        let settled = status_kib("self", "VmRSS").unwrap_or(0);
        let hwm = status_kib("self", "VmHWM").unwrap_or(0);
        let servers: Vec<u64> = sb
            .live_processes()
            .iter()
            .filter_map(|p| status_kib(&p.to_string(), "VmRSS"))
            .collect();
        let tools = sb.tools().len();
        sb.shutdown().await;
        json!({
            "before_kib": before,
            "after_start_kib": after,
            "settled_kib": settled,
            "hwm_kib": hwm,
            "tools": tools,
            "servers": servers.len(),
            "servers_total_kib": servers.iter().sum::<u64>(),
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
    println!("{out}");
}

fn memory_section(runs: usize, rows: &mut Vec<Row>) {
    let exe = std::env::current_exe().expect("path of this example");
    let mut samples = Vec::new();
    for run in 0..runs {
        let out = Command::new(&exe)
            .arg("--memory-child")
            .stderr(Stdio::inherit())
            .output()
            .expect("run the memory child");
        assert!(out.status.success(), "memory child failed");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("memory JSON");
        eprintln!("memory run {}: {v}", run + 1);
        samples.push(v);
    }
    let mib = |k: &str| -> Vec<f64> {
        samples
            .iter()
            .map(|v| v[k].as_f64().unwrap_or(f64::NAN) / 1024.0)
            .collect()
    };
    let tools = samples
        .first()
        .map_or(0, |v| v["tools"].as_u64().unwrap_or(0));
    let before = mib("before_kib");
    let after = mib("after_start_kib");
    let settled = mib("settled_kib");
    let hwm = mib("hwm_kib");
    let servers = mib("servers_total_kib");
    let per_server: Vec<f64> = servers.iter().map(|t| t / 50.0).collect();
    let label = format!("50 servers × 100 tools ({tools} tools in the view)");
    rows.push(row(
        format!("VmRSS before `start()`, {label}"),
        format!("{:.1} MiB", median(&before)),
        fmt_runs(&before, 1),
    ));
    rows.push(row(
        format!("VmRSS right after `start()`, {label}"),
        format!("{:.1} MiB", median(&after)),
        fmt_runs(&after, 1),
    ));
    rows.push(row(
        "VmRSS 500 ms later (cache writes done) / VmHWM",
        format!("{:.1} / {:.1} MiB", median(&settled), median(&hwm)),
        fmt_runs(&settled, 1),
    ));
    rows.push(row(
        "Demo servers' VmRSS, total of 50 (per server)",
        format!(
            "{:.1} MiB ({:.2} MiB)",
            median(&servers),
            median(&per_server)
        ),
        fmt_runs(&servers, 1),
    ));
}
