//! What the `server/discover` probe costs a legacy stdio server: the time from `start()` to
//! live tools for `mcp-demo-server` (which speaks the 2025 revisions only, so it refuses the
//! probe with "method not found" and `initialize` follows on the same process), measured three
//! ways, interleaved run by run:
//!
//! - `no probe`: the probe turned off (`initialize` at once), the floor;
//! - `probe, cold`: no cache, so every attempt probes first;
//! - `probe, remembered`: a warm cache that remembers the server spoke the legacy revision, so
//!   the probe is skipped.
//!
//! `cargo run --release -p switchboard --example probe_bench -- [--runs N] [--servers N]`
//! (defaults: 15 runs, 1 and 10 servers). It builds `mcp-demo-server` with the same profile.
//! A server connects well within the startup gate, so `start()` returns once it is live.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::Builder;

fn demo_server_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("path of this example");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the example lives in target/<profile>/examples")
        .to_path_buf();
    let bin = profile_dir.join(format!("mcp-demo-server{}", std::env::consts::EXE_SUFFIX));
    if let (Ok(cargo), Some(target_dir)) = (std::env::var("CARGO"), profile_dir.parent()) {
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
    assert!(bin.is_file(), "{} is missing", bin.display());
    bin
}

#[derive(Clone, Copy)]
enum Mode {
    NoProbe,
    ProbeCold,
    ProbeRemembered,
}

/// One `start()` of `n` demo servers; the time until it returned with all of them live.
fn start(bin: &Path, n: usize, mode: Mode, cache: &Path) -> Duration {
    let specs: Vec<ServerSpec> = (0..n)
        .map(|i| {
            let name = format!("s{i}");
            let args = ["--name", name.as_str()];
            ServerSpec::new(&name, ServerConfig::stdio(bin.to_string_lossy(), &args))
        })
        .collect();
    smol::block_on(async {
        let mut b = Builder::servers(specs);
        b = match mode {
            Mode::NoProbe => b.no_cache().manager_options(|o| o.protocol.probe = false),
            Mode::ProbeCold => b.no_cache(),
            Mode::ProbeRemembered => b.cache_dir(cache),
        };
        let t0 = Instant::now();
        let (sb, report) = b.start().await.expect("start");
        let wall = t0.elapsed();
        assert_eq!(report.connected.len(), n, "{report:?}");
        assert!(report.deferred.is_empty(), "not live yet: {report:?}");
        sb.shutdown().await;
        wall
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut runs = 15;
    let mut sizes = vec![1, 10];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse().ok()).expect("a number");
        match a.as_str() {
            "--runs" => runs = value(),
            "--servers" => sizes = vec![value()],
            other => panic!("unknown argument {other:?} (--runs N, --servers N)"),
        }
    }
    let bin = demo_server_bin();
    let cache = std::env::temp_dir().join(format!("probe-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).expect("create the cache dir");
    println!("| servers | no probe | probe, cold | probe, remembered | cold − no probe |");
    println!("|---|---|---|---|---|");
    for &n in &sizes {
        // Fill the cache (and remember the revision) once; warm up the page cache.
        start(&bin, n, Mode::ProbeRemembered, &cache);
        let (mut off, mut cold, mut warm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            off.push(start(&bin, n, Mode::NoProbe, &cache).as_secs_f64() * 1e3);
            cold.push(start(&bin, n, Mode::ProbeCold, &cache).as_secs_f64() * 1e3);
            warm.push(start(&bin, n, Mode::ProbeRemembered, &cache).as_secs_f64() * 1e3);
        }
        let (off, cold, warm) = (median(&mut off), median(&mut cold), median(&mut warm));
        println!(
            "| {n} | {off:.2} ms | {cold:.2} ms | {warm:.2} ms | {:.2} ms |",
            cold - off
        );
    }
    let _ = std::fs::remove_dir_all(&cache);
}
