//! Exploration: many seeds on several threads, coverage summed, failures shrunk.

use crate::coverage::Coverage;
use crate::scenario::{tree_for_seed, GenParams, Scenario};
use crate::verdict::{Invariant, Violation};
use crate::world::run_scenario;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ExploreOptions {
    pub start: u64,
    pub seeds: u64,
    pub jobs: usize,
    /// Run every seed twice with its trace and compare.
    pub check_determinism: bool,
    /// Shrink failing scenarios (off for quick runs inside tests).
    pub shrink: bool,
}

/// One failing seed.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub violation: Violation,
    /// The smallest scenario found that still fails, and how it fails.
    pub shrunk: Option<(Scenario, Violation)>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub seeds: u64,
    pub failures: Vec<Failure>,
    pub events: u64,
    pub elapsed: Duration,
    pub coverage: Coverage,
}

impl Report {
    pub fn seeds_per_sec(&self) -> f64 {
        self.seeds as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The required last line of `explore`.
    pub fn last_line(&self) -> String {
        format!(
            "explored {} seeds, {} failures, {:.0} seeds/s, {:.0} events/s",
            self.seeds,
            self.failures.len(),
            self.seeds_per_sec(),
            self.events_per_sec()
        )
    }
}

/// Run one seed: `Ok(events)` or the violation (a determinism mismatch is one too).
pub fn check_seed(seed: u64, determinism: bool) -> (u64, Option<Violation>, Coverage) {
    let sc = tree_for_seed(seed, GenParams::default()).current();
    let r = run_scenario(&sc, determinism);
    if determinism && r.violation.is_none() {
        let again = run_scenario(&sc, true);
        if again.trace != r.trace {
            let (a, b) = (r.trace.unwrap_or_default(), again.trace.unwrap_or_default());
            let line = a
                .lines()
                .zip(b.lines())
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            let v = Violation {
                invariant: Invariant::Determinism,
                detail: format!(
                    "two runs of the same seed differ at trace line {}",
                    line + 1
                ),
                at: switchboard_core::Instant::ZERO,
            };
            return (r.events, Some(v), r.coverage);
        }
    }
    (r.events, r.violation, r.coverage)
}

/// Shrink the scenario of a failing seed with proptest's value tree: keep simplifications that
/// still fail (any invariant), undo those that pass.
pub fn shrink(seed: u64, max_steps: usize) -> Option<(Scenario, Violation)> {
    let mut tree = tree_for_seed(seed, GenParams::default());
    let mut best = {
        let sc = tree.current();
        let v = run_scenario(&sc, false).violation?;
        (sc, v)
    };
    for _ in 0..max_steps {
        if !tree.simplify() {
            break;
        }
        let sc = tree.current();
        match run_scenario(&sc, false).violation {
            Some(v) => best = (sc, v),
            None => {
                if !tree.complicate() {
                    break;
                }
                let sc = tree.current();
                if let Some(v) = run_scenario(&sc, false).violation {
                    best = (sc, v);
                }
            }
        }
    }
    Some(best)
}

pub fn explore(o: &ExploreOptions) -> Report {
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let total = Mutex::new((0u64, Coverage::default(), Vec::<(u64, Violation)>::new()));
    let jobs = o.jobs.max(1);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                let mut events = 0;
                let mut cov = Coverage::default();
                let mut fails = Vec::new();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= o.seeds {
                        break;
                    }
                    let seed = o.start.wrapping_add(k);
                    let (e, v, c) = check_seed(seed, o.check_determinism);
                    events += e;
                    cov.add(&c);
                    if let Some(v) = v {
                        fails.push((seed, v));
                    }
                }
                if let Ok(mut t) = total.lock() {
                    t.0 += events;
                    t.1.add(&cov);
                    t.2.extend(fails);
                }
            });
        }
    });
    let elapsed = started.elapsed();
    let (events, coverage, mut fails) = total.into_inner().unwrap_or_default();
    fails.sort_by_key(|(s, _)| *s);
    let failures = fails
        .into_iter()
        .map(|(seed, violation)| Failure {
            seed,
            shrunk: if o.shrink { shrink(seed, 400) } else { None },
            violation,
        })
        .collect();
    Report {
        seeds: o.seeds,
        failures,
        events,
        elapsed,
        coverage,
    }
}
