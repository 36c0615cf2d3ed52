//! `Sync`, the whole set of servers the embedder wants, driven through the manager's inputs:
//! a server wanted unchanged and running is left alone, one wanted unchanged but stopped is
//! started again, one whose config (or a value read for it) changed is restarted under it, and
//! one no longer wanted is stopped and forgotten; a call to a tool of a server restarting
//! under a new config is an unknown tool until the server lists again.

use super::era_tests::{closed, drain};
use super::legacy_tests::connected;
use super::*;
use crate::config::{ServerConfig, ServerSpec};
use crate::time::Instant;
use serde_json::json;

fn sync(m: &mut Manager, at: u64, servers: Vec<ServerSpec>) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::Sync {
            request: RequestId(9),
            servers,
        },
    );
    drain(m)
}

fn spec(command: &str) -> ServerSpec {
    ServerSpec::new("s", ServerConfig::stdio(command, &[]))
}

/// (attempts opened, attempts closed, whether the sync completed on its own) in `outs`.
fn effects(outs: &[Output]) -> (Vec<ConnId>, Vec<ConnId>, bool) {
    let opened = outs
        .iter()
        .filter_map(|o| match o {
            Output::OpenTransport { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect();
    let closed = outs
        .iter()
        .filter_map(|o| match o {
            Output::CloseTransport { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect();
    let completed = outs.iter().any(|o| {
        matches!(
            o,
            Output::Event(Event::SyncCompleted {
                request: RequestId(9)
            })
        )
    });
    (opened, closed, completed)
}

fn server(o: ManagerOptions) -> (Manager, ConnId) {
    connected(o, json!({"tools": {}}), json!([{"name": "t"}]))
}

/// Server `s`, connected with reconnects off, then lost: stopped for good.
fn stopped() -> (Manager, ConnId) {
    let o = ManagerOptions {
        reconnect: ReconnectPolicy::never(),
        ..ManagerOptions::default()
    };
    let (mut m, conn) = server(o);
    closed(&mut m, 3, conn);
    (m, conn)
}

#[test]
fn a_running_server_wanted_unchanged_is_left_alone() {
    let (mut m, _) = server(ManagerOptions::default());
    let outs = sync(&mut m, 3, vec![spec("srv")]);
    assert_eq!(effects(&outs), (vec![], vec![], true), "{outs:?}");
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    assert_eq!(m.counters().syncs_restarted_stopped, 0);
}

#[test]
fn a_stopped_server_wanted_unchanged_is_started_again() {
    let (mut m, conn) = stopped();
    assert_ne!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    let (opened, closed, completed) = effects(&sync(&mut m, 4, vec![spec("srv")]));
    assert_eq!((opened.len(), closed, completed), (1, vec![], false));
    assert_ne!(opened[0], conn);
    assert_eq!(m.counters().syncs_restarted_stopped, 1);
}

#[test]
fn a_stopped_server_no_longer_wanted_is_forgotten_and_the_phases_move() {
    let (mut m, _) = stopped();
    // An observer that keeps the server states skips them while this number stays.
    let before = m.phase_generation();
    let outs = sync(&mut m, 4, vec![]);
    assert_eq!(effects(&outs), (vec![], vec![], true), "{outs:?}");
    assert!(m.server_state("s").is_none());
    assert_ne!(m.phase_generation(), before);
}

#[test]
fn a_server_whose_config_changed_is_restarted_and_one_no_longer_wanted_is_forgotten() {
    let (mut m, conn) = server(ManagerOptions::default());
    let (opened, closed, completed) = effects(&sync(&mut m, 3, vec![spec("srv2")]));
    assert_eq!((opened.len(), closed, completed), (1, vec![conn], false));
    let outs = sync(&mut m, 4, vec![]);
    assert_eq!(effects(&outs), (vec![], opened, true), "{outs:?}");
    assert!(m.server_state("s").is_none());
    assert_eq!(m.counters().syncs_restarted_stopped, 0);
}

#[test]
fn a_server_whose_read_values_changed_is_restarted_though_its_config_reads_the_same() {
    // A `${file:…}` whose content changed: the config as written is the same, and the hash
    // (which leaves secrets out) too, but the server must run with the new value.
    let (mut m, conn) = server(ManagerOptions::default());
    let mut changed = spec("srv");
    changed
        .config
        .values
        .0
        .insert("file:token".into(), "new".into());
    let (opened, closed, completed) = effects(&sync(&mut m, 3, vec![changed]));
    assert_eq!((opened.len(), closed, completed), (1, vec![conn], false));
}

#[test]
fn a_call_to_a_tool_of_a_server_restarting_under_a_new_config_is_an_unknown_tool() {
    // Its tools left the view with the old config, and the new one has listed nothing yet:
    // the tool is not known to be gone from the server, so it is unknown for now, not retired.
    let (mut m, _) = server(ManagerOptions::default());
    sync(&mut m, 3, vec![spec("srv2")]);
    assert_eq!(
        m.server_state("s").unwrap().status,
        ServerStatus::Connecting
    );
    let outs = super::legacy_tests::call(&mut m, 4, 1, None);
    assert_eq!(
        super::legacy_tests::call_outcome(&outs),
        Some(CallOutcome::Err(CallError::UnknownTool {
            tool: "mcp_s_t".into()
        }))
    );
    assert_eq!(m.counters().calls_to_retired_tools, 0);
}
