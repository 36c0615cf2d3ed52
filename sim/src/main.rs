//! `switchboard-sim`: explore many seeds, or replay one with its full trace.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// The simulator allocates a little on every step (views, frames, reports); mimalloc keeps
/// that from dominating a run (about a third of the time under glibc's allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use switchboard_sim::explore::{explore, shrink, ExploreOptions};
use switchboard_sim::{replay_command, run_seed, scenario_for_seed};

#[derive(Parser)]
#[command(
    name = "switchboard-sim",
    about = "Seeded deterministic simulator for Switchboard"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run seeds START..START+N and check every invariant after every step.
    Explore {
        #[arg(long)]
        seeds: u64,
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Threads (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run every seed twice and compare the traces byte for byte.
        #[arg(long)]
        check_determinism: bool,
        /// Print the coverage counters.
        #[arg(long)]
        quiet: bool,
    },
    /// Rerun one seed.
    Replay {
        #[arg(long)]
        seed: u64,
        /// Print the full trace (virtual times, inputs, outputs, invariant checks).
        #[arg(long)]
        trace: bool,
        /// Also print the scenario.
        #[arg(long)]
        scenario: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Cmd::Explore {
            seeds,
            start,
            jobs,
            check_determinism,
            quiet,
        } => {
            let jobs = jobs.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
            });
            let report = explore(&ExploreOptions {
                start,
                seeds,
                jobs,
                check_determinism,
                shrink: true,
            });
            for f in &report.failures {
                println!("FAIL seed {}: {}", f.seed, f.violation);
                if let Some((sc, v)) = &f.shrunk {
                    println!("  shrunk: {v}");
                    println!(
                        "  shrunk scenario: {}",
                        serde_json::to_string(sc).unwrap_or_default()
                    );
                }
                println!("  replay: {}", replay_command(f.seed));
            }
            let mut unreached = Vec::new();
            if !quiet {
                println!("coverage ({} seeds):", report.seeds);
            }
            for (name, n, doc) in report.coverage.entries() {
                if !quiet {
                    println!("  {name:<34} {n:>9}  {doc}");
                }
                if n == 0 {
                    unreached.push(name);
                }
            }
            let coverage_failed = report.seeds >= 1000 && !unreached.is_empty();
            if coverage_failed {
                println!(
                    "never reached in {} seeds: {}",
                    report.seeds,
                    unreached.join(", ")
                );
            }
            println!("{}", report.last_line());
            if report.failures.is_empty() && !coverage_failed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Cmd::Replay {
            seed,
            trace,
            scenario,
        } => {
            if scenario {
                println!("{:#?}", scenario_for_seed(seed));
            }
            let r = run_seed(seed, trace);
            if let Some(t) = &r.trace {
                print!("{t}");
            }
            match r.violation {
                Some(v) => {
                    println!("seed {seed}: {v}");
                    if let Some((sc, sv)) = shrink(seed, 400) {
                        println!("shrunk: {sv}");
                        println!(
                            "shrunk scenario: {}",
                            serde_json::to_string(&sc).unwrap_or_default()
                        );
                    }
                    println!("replay: {}", replay_command(seed));
                    ExitCode::FAILURE
                }
                None => {
                    println!("seed {seed}: ok, {} events", r.events);
                    ExitCode::SUCCESS
                }
            }
        }
    }
}
