//! Property test over generated scenarios with shrinking on: a failure shrinks to a small
//! scenario and is persisted under `tests/proptest-regressions/` (committed; replayed first).
//! `SWITCHBOARD_SEED` pins the generator's seed.

use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestRng, TestRunner,
};
use switchboard_sim::run_scenario;
use switchboard_sim::scenario::{scenario_strategy, GenParams};

fn seed() -> u64 {
    match std::env::var("SWITCHBOARD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) => s,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    }
}

#[test]
fn generated_scenarios_keep_every_invariant() {
    let seed = seed();
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: 64,
        max_shrink_iters: 2_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/sim_prop.txt",
        ))),
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let params = GenParams {
        min_servers: 1,
        max_servers: 8,
        max_actions: 30,
        horizon_ms: 5_000,
    };
    let result = runner.run(&scenario_strategy(params), |sc| {
        match run_scenario(&sc, false).violation {
            None => Ok(()),
            Some(v) => Err(TestCaseError::fail(v.to_string())),
        }
    });
    if let Err(e) = result {
        panic!(
            "{e}\nrerun with SWITCHBOARD_SEED={seed} cargo test -p switchboard-tests generated_scenarios_keep_every_invariant"
        );
    }
}
