//! The official MCP conformance suite as a referee. The client leg: runs
//! scripts/conformance.sh (both requirement sets and the 2025-03-26 back-compatibility
//! scenarios, the suite's client leg, driven through
//! tests/conformance/client) and asserts that every scenario listed in
//! tests/conformance/expected-pass.txt passes. The list is the floor: a scenario that starts
//! passing is reported so it can be added, and one that stops passing fails the test.
//! The server leg: runs scripts/conformance-server.sh (the fixture upstream alone, and
//! `switchboard serve` in front of it) against tests/conformance/expected-server.txt, and
//! checks that serve's verdicts equal the fixture's where that file says they must.
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

/// What the suite kept of one scenario's run under `results` (the script's `--output-dir`):
/// its checks that did not succeed, and the end of the client's stderr and stdout.
fn scenario_results(results: &std::path::Path, set: &str, scenario: &str) -> String {
    // The suite writes `<set>/<scenario>-<timestamp>/`; a scenario's name may hold a `/`.
    let (parent, name) = match scenario.rsplit_once('/') {
        Some((dir, name)) => (results.join(set).join(dir), name),
        None => (results.join(set), scenario),
    };
    let prefix = format!("{name}-");
    let run = std::fs::read_dir(&parent).ok().and_then(|entries| {
        entries.flatten().map(|e| e.path()).find(|path| {
            let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
            file.strip_prefix(&prefix)
                .is_some_and(|stamp| stamp.starts_with(|c: char| c.is_ascii_digit()))
        })
    });
    let Some(run) = run else {
        return format!(
            "--- {set} {scenario}: no results under {}",
            parent.display()
        );
    };
    let mut text = format!("--- {set} {scenario} ({})\n", run.display());
    let checks: Vec<serde_json::Value> = std::fs::read(run.join("checks.json"))
        .ok()
        .and_then(|raw| serde_json::from_slice(&raw).ok())
        .unwrap_or_default();
    for check in &checks {
        let status = check["status"].as_str().unwrap_or("");
        if matches!(status, "FAILURE" | "WARNING") {
            let details = check["details"].to_string();
            let details: String = details.chars().take(400).collect();
            text += &format!(
                "{status} {}: {} {details}\n",
                check["id"].as_str().unwrap_or("?"),
                check["description"].as_str().unwrap_or("")
            );
        }
    }
    for file in ["stderr.txt", "stdout.txt"] {
        let body = std::fs::read_to_string(run.join(file)).unwrap_or_default();
        let lines: Vec<&str> = body.lines().collect();
        let tail = &lines[lines.len().saturating_sub(40)..];
        text += &format!("{file} (last {} lines):\n{}\n", tail.len(), tail.join("\n"));
    }
    text
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
    // The suite's per-scenario results (its checks, the client's output), read back when an
    // expected pass fails so the failure explains itself.
    let results = tempfile::tempdir().expect("a directory for the suite's results");
    let output = Command::new(repo_root().join("scripts/conformance.sh"))
        .arg("--bin")
        .arg(switchboard_bin())
        .arg("--output-dir")
        .arg(results.path())
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
    if !regressions.is_empty() {
        for (set, scenario) in &expected {
            if got
                .get(&(set.clone(), scenario.clone()))
                .map(String::as_str)
                != Some("pass")
            {
                eprintln!("{}", scenario_results(results.path(), set, scenario));
            }
        }
    }
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

/// `(requirement set, target, scenario)` → verdict, from scripts/conformance-server.sh's
/// one-line-per-scenario output; the total lines and anything else are skipped.
fn server_verdicts(stdout: &str) -> BTreeMap<(String, String, String), String> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (set, target, verdict, scenario) =
                (words.next()?, words.next()?, words.next()?, words.next()?);
            let is_set = set.len() == 10 && set.bytes().all(|b| b.is_ascii_digit() || b == b'-');
            (is_set
                && matches!(target, "fixture" | "serve")
                && matches!(verdict, "pass" | "warn" | "fail"))
            .then(|| {
                (
                    (set.to_owned(), target.to_owned(), scenario.to_owned()),
                    verdict.to_owned(),
                )
            })
        })
        .collect()
}

/// tests/conformance/expected-server.txt: the expected passes, and the sets whose verdicts
/// must be the same through serve as from the fixture alone.
fn expected_server() -> (Vec<(String, String, String)>, Vec<String>) {
    let path = repo_root().join("tests/conformance/expected-server.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
    let (mut passes, mut same) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            ["same-verdicts", set] => same.push(set.to_string()),
            [set, target @ ("fixture" | "serve"), scenario] => {
                passes.push((set.to_string(), target.to_string(), scenario.to_string()))
            }
            _ => panic!(
                "{}: expected `<set> <fixture|serve> <scenario>` or `same-verdicts <set>`, got {line:?}",
                path.display()
            ),
        }
    }
    (passes, same)
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn official_conformance_suite_server_scenarios_pass_through_serve_as_from_the_fixture() {
    if !peers_enabled("official_conformance_suite_server_leg") {
        return;
    }
    let (expected, same) = expected_server();
    let output = Command::new(repo_root().join("scripts/conformance-server.sh"))
        .arg("--bin")
        .arg(switchboard_bin())
        .output()
        .expect("running scripts/conformance-server.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(
        output.status.success(),
        "scripts/conformance-server.sh failed: {}",
        output.status
    );

    let got = server_verdicts(&stdout);
    let regressions: Vec<String> = expected
        .iter()
        .filter_map(|key| match got.get(key).map(String::as_str) {
            Some("pass") => None,
            Some(verdict) => Some(format!("{} {} {}: {verdict}", key.0, key.1, key.2)),
            None => Some(format!("{} {} {}: not run", key.0, key.1, key.2)),
        })
        .collect();
    assert!(
        regressions.is_empty(),
        "expected to pass (tests/conformance/expected-server.txt) but did not:\n  {}",
        regressions.join("\n  ")
    );

    let differences: Vec<String> = got
        .iter()
        .filter(|((set, target, _), _)| target == "fixture" && same.contains(set))
        .filter_map(|((set, _, scenario), fixture)| {
            let key = (set.clone(), "serve".to_string(), scenario.clone());
            let serve = got.get(&key).map_or("not run", String::as_str);
            (serve != fixture)
                .then(|| format!("{set} {scenario}: fixture {fixture}, serve {serve}"))
        })
        .collect();
    assert!(
        differences.is_empty(),
        "serve's verdicts differ from the fixture's:\n  {}",
        differences.join("\n  ")
    );

    let new: Vec<String> = got
        .iter()
        .filter(|(key, verdict)| *verdict == "pass" && !expected.contains(key))
        .map(|((set, target, scenario), _)| format!("{set} {target} {scenario}"))
        .collect();
    if !new.is_empty() {
        eprintln!(
            "passing but not in tests/conformance/expected-server.txt (add them):\n  {}",
            new.join("\n  ")
        );
    }
}
