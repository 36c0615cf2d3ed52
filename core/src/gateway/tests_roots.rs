//! Roots, mirrored from the downstream client that declared them.

use super::*;
use serde_json::json;

const X: ExchangeId = ExchangeId(3);

fn drain(g: &mut Gateway) -> Vec<GatewayOutput> {
    std::iter::from_fn(|| g.poll_output()).collect()
}

fn roots_gateway() -> Gateway {
    let mut g = Gateway::new(GatewayOptions {
        first_call: 100,
        roots: vec![crate::protocol::Root {
            uri: "file:///configured".into(),
            name: None,
        }],
        ..GatewayOptions::default()
    });
    for session in [SessionId(1), SessionId(2)] {
        g.handle(GatewayInput::Opened {
            session,
            strict: false,
        });
    }
    g
}

fn frame_on(g: &mut Gateway, session: SessionId, msg: Value) -> Vec<GatewayOutput> {
    g.handle(GatewayInput::Frame {
        session,
        exchange: X,
        frame: Bytes::from(msg.to_string()),
    });
    drain(g)
}

/// The `roots/list` the gateway sent `session`, by its id.
fn roots_asked(outs: &[GatewayOutput], session: SessionId) -> Option<Value> {
    outs.iter().find_map(|o| match o {
        GatewayOutput::Send {
            session: s, frame, ..
        } if *s == session => {
            let v: Value = serde_json::from_slice(frame).ok()?;
            (v["method"] == "roots/list").then(|| v["id"].clone())
        }
        _ => None,
    })
}

fn roots_set(outs: &[GatewayOutput]) -> Option<Vec<String>> {
    outs.iter().find_map(|o| match o {
        GatewayOutput::Manager(Input::SetRoots { roots }) => {
            Some(roots.iter().map(|r| r.uri.clone()).collect())
        }
        _ => None,
    })
}

fn init(g: &mut Gateway, session: SessionId, caps: Value) -> Vec<GatewayOutput> {
    frame_on(
        g,
        session,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": caps}}),
    );
    frame_on(
        g,
        session,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
}

#[test]
fn a_client_that_declared_roots_is_asked_and_its_roots_become_the_managers() {
    let mut g = roots_gateway();
    // A client without the capability is never asked.
    assert_eq!(
        roots_asked(&init(&mut g, SessionId(1), json!({})), SessionId(1)),
        None
    );
    let outs = init(
        &mut g,
        SessionId(2),
        json!({"roots": {"listChanged": true}}),
    );
    let id = roots_asked(&outs, SessionId(2)).expect("asked once initialized");
    let outs = frame_on(
        &mut g,
        SessionId(2),
        json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": "file:///work/a", "name": "a"}]}}),
    );
    assert_eq!(roots_set(&outs), Some(vec!["file:///work/a".to_string()]));
    // Its change is asked again and passed on; the same roots again change nothing.
    let outs = frame_on(
        &mut g,
        SessionId(2),
        json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
    );
    let id = roots_asked(&outs, SessionId(2)).expect("asked again after list_changed");
    let outs = frame_on(
        &mut g,
        SessionId(2),
        json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": "file:///work/b"}]}}),
    );
    assert_eq!(roots_set(&outs), Some(vec!["file:///work/b".to_string()]));
    // A late second answer to the same question is not taken.
    let outs = frame_on(
        &mut g,
        SessionId(2),
        json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": "file:///work/c"}]}}),
    );
    assert_eq!(roots_set(&outs), None);
    // The session ends: the configured roots apply again.
    g.handle(GatewayInput::Closed {
        session: SessionId(2),
    });
    assert_eq!(
        roots_set(&drain(&mut g)),
        Some(vec!["file:///configured".to_string()])
    );
}
