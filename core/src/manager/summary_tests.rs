//! `server_summary` and `phase_generation`: the summary is the lifecycle part of
//! `server_state`, field for field, and the generation moves with every phase replaced and
//! every server started or forgotten, and with nothing else.

use super::era_tests::{answer, drain, open, sent};
use super::*;
use crate::time::Instant;
use serde_json::json;
use std::time::Duration;

fn legacy() -> ManagerOptions {
    ManagerOptions {
        client_version: "test".into(),
        ..ManagerOptions::default()
    }
}

/// The summary of `s` must equal the same fields of its full state.
fn agrees(m: &Manager) -> Option<ServerSummary> {
    let sum = m.server_summary("s");
    let full = m.server_state("s");
    assert_eq!(full.map(|f| f.summary()), sum);
    sum
}

#[test]
fn the_summary_follows_server_state_and_the_generation_follows_the_phase() {
    let mut m = Manager::new(legacy(), Instant::ZERO);
    assert_eq!(m.phase_generation(), 0);
    assert_eq!(agrees(&m), None);
    let (conn, outs) = open(&mut m, 0);
    let s = agrees(&m).expect("known once started");
    assert_eq!(s.phase, Phase::Initializing);
    assert_eq!((s.conn, s.attempts), (Some(conn), 1));
    let g = m.phase_generation();
    assert!(g >= 3, "known, opening, initializing: {g}");
    let init = sent(&outs)[0].1;
    let outs = answer(
        &mut m,
        1,
        conn,
        json!({"jsonrpc": "2.0", "id": init, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}}),
    );
    assert_eq!(agrees(&m).unwrap().phase, Phase::ListingTools);
    let g = {
        let now = m.phase_generation();
        assert!(now > g);
        now
    };
    let list = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "tools/list")
        .expect("tools/list")
        .1;
    answer(
        &mut m,
        2,
        conn,
        json!({"jsonrpc": "2.0", "id": list, "result": {"tools": [
            {"name": "t", "inputSchema": {"type": "object"}}]}}),
    );
    let s = agrees(&m).unwrap();
    assert_eq!((s.status, s.tool_count), (ServerStatus::Connected, 1));
    assert_eq!(s.time_to_ready, Some(Duration::from_millis(2)));
    let g = {
        let now = m.phase_generation();
        assert!(now > g);
        now
    };
    // An answer to no request changes no phase: the generation stands.
    answer(
        &mut m,
        3,
        conn,
        json!({"jsonrpc": "2.0", "id": 999, "result": {}}),
    );
    assert_eq!(m.phase_generation(), g);
    assert_eq!(agrees(&m), Some(s));
    // Forgotten: no summary, and the generation moved.
    m.handle(
        Instant::from_millis(4),
        Input::Disconnect {
            request: RequestId(9),
            server: "s".into(),
        },
    );
    drain(&mut m);
    assert_eq!(agrees(&m), None);
    assert!(m.phase_generation() > g);
}
