//! A short exploration inside the simulator's own test command: every invariant checked after
//! every step of a few hundred seeds. It is what `cargo mutants` runs beside the core's unit
//! tests (see `.cargo/mutants.toml`): cheap enough to run once per mutant, where the full
//! suite's 2,000-seed exploration (with its coverage check) is not.

use switchboard_sim::explore::{explore, ExploreOptions};
use switchboard_sim::replay_command;

/// How many seeds; `SWITCHBOARD_SHORT_SEEDS` changes it.
fn seeds() -> u64 {
    std::env::var("SWITCHBOARD_SHORT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

#[test]
fn a_short_exploration_keeps_every_invariant() {
    let report = explore(&ExploreOptions {
        start: 0,
        seeds: seeds(),
        jobs: 1,
        check_determinism: false,
        shrink: false,
    });
    let failures: Vec<String> = report
        .failures
        .iter()
        .map(|f| {
            format!(
                "seed {}: {}\n  rerun: {}",
                f.seed,
                f.violation,
                replay_command(f.seed)
            )
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(report.seeds, seeds());
}
