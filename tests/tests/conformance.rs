//! The official MCP conformance suite as a referee for the `switchboard` client: runs
//! scripts/conformance.sh (both requirement sets and the 2025-03-26 back-compatibility
//! scenarios, the suite's client leg, driven through
//! tests/conformance/client) and asserts that every scenario listed in
//! tests/conformance/expected-pass.txt passes. The list is the floor: a scenario that starts
//! passing is reported so it can be added, and one that stops passing fails the test.
//! Gated on `SWITCHBOARD_PEERS=1` (the suite and its Node 22 come from
//! scripts/install-peers.sh); with it set, a missing suite is a failure.

use crate::http_peers::peers_enabled;
use crate::support::{repo_root, switchboard_bin};
use std::collections::BTreeMap;
use std::process::Command;

/// `(requirement set, scenario)` → verdict (`pass`, `warn` or `fail`), from the script's
/// one-line-per-scenario output; the total lines and anything else are skipped.
fn verdicts(stdout: &str) -> BTreeMap<(String, String), String> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (set, verdict, scenario) = (words.next()?, words.next()?, words.next()?);
            let is_set = set == "backcompat"
                || (set.len() == 10 && set.bytes().all(|b| b.is_ascii_digit() || b == b'-'));
            (is_set && matches!(verdict, "pass" | "warn" | "fail"))
                .then(|| ((set.to_owned(), scenario.to_owned()), verdict.to_owned()))
        })
        .collect()
}

fn expected_passes() -> Vec<(String, String)> {
    let path = repo_root().join("tests/conformance/expected-pass.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
    text.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some(set), Some(scenario), None) => (set.to_owned(), scenario.to_owned()),
                _ => panic!(
                    "{}: expected `<set> <scenario>`, got {line:?}",
                    path.display()
                ),
            }
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn official_conformance_suite_passes_every_expected_client_scenario() {
    if !peers_enabled("official_conformance_suite") {
        return;
    }
    let expected = expected_passes();
    let output = Command::new(repo_root().join("scripts/conformance.sh"))
        .arg("--bin")
        .arg(switchboard_bin())
        .output()
        .expect("running scripts/conformance.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The whole table, so a failure (or a new pass) can be read from the test's output.
    eprintln!("{stdout}{stderr}");
    assert!(
        output.status.success(),
        "scripts/conformance.sh failed: {}",
        output.status
    );

    let got = verdicts(&stdout);
    let regressions: Vec<String> = expected
        .iter()
        .filter_map(|key| match got.get(key).map(String::as_str) {
            Some("pass") => None,
            Some(verdict) => Some(format!("{} {}: {verdict}", key.0, key.1)),
            None => Some(format!("{} {}: not run", key.0, key.1)),
        })
        .collect();
    assert!(
        regressions.is_empty(),
        "expected to pass (tests/conformance/expected-pass.txt) but did not:\n  {}",
        regressions.join("\n  ")
    );

    let new: Vec<String> = got
        .iter()
        .filter(|(key, verdict)| *verdict == "pass" && !expected.contains(key))
        .map(|((set, scenario), _)| format!("{set} {scenario}"))
        .collect();
    if !new.is_empty() {
        eprintln!(
            "passing but not in tests/conformance/expected-pass.txt (add them):\n  {}",
            new.join("\n  ")
        );
    }
}
