//! The step count a run reports (the explorer's "events", and what the runaway budget is
//! charged) covers every step of the world, the gateway's included.
//!
//! Invariant, in words: every step a run's trace shows — each input the manager handled (a
//! line `[  t ms] > …` or `[  t ms] timer …`) and each frame a downstream client handed the
//! gateway (a line `[  t ms] ds> …`) — is counted in `RunResult::events`; a world without the
//! gateway counts exactly its manager steps.

use switchboard_sim::{run_scenario, scenario_for_seed};

/// `(manager steps, gateway frames)` shown in a run's trace.
fn traced_steps(trace: &str) -> (u64, u64) {
    let steps = trace.lines().filter(|l| l.starts_with('['));
    steps.fold((0, 0), |(m, g), l| {
        if l.contains("ms] ds> ") {
            (m, g + 1)
        } else {
            (m + 1, g)
        }
    })
}

#[test]
fn a_run_counts_every_step_its_trace_shows_the_gateways_included() {
    let (mut plain, mut served) = (0, 0);
    for seed in 1000..1040 {
        let sc = scenario_for_seed(seed);
        let run = run_scenario(&sc, true);
        assert!(run.violation.is_none(), "seed {seed}: {:?}", run.violation);
        let (manager, frames) = traced_steps(run.trace.as_deref().unwrap_or_default());
        if sc.options.gateway.is_some() {
            served += 1;
            assert!(
                frames > 0,
                "seed {seed}: a gateway world whose clients sent nothing"
            );
            assert!(
                run.events >= manager + frames,
                "seed {seed}: {} steps counted, the trace shows {manager} of the manager and {frames} of the gateway",
                run.events
            );
        } else {
            plain += 1;
            assert_eq!(
                frames, 0,
                "seed {seed}: gateway frames in a world without one"
            );
            assert_eq!(
                run.events, manager,
                "seed {seed}: steps counted against the trace"
            );
        }
    }
    // Both kinds of world were run, so both assertions above were reached.
    assert!(plain > 0 && served > 0, "plain {plain}, served {served}");
}
