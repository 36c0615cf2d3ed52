//! Reading a `tools/call` answer in one pass gives what reading it the general way gives: its
//! `resultType` from [`result_type`], then, for a complete answer, the result from
//! [`parse_call_tool_result`] (the same parts, structured content, error flag and raw text, or
//! the same error). The property compares the two on generated answers, plain or not: parts of
//! every kind, members repeated, missing or of the wrong type, values a `Value` cannot hold.

use super::call_result::read_plain;
use super::{parse_call_tool_result, read_call_answer, result_type, CallAnswer, ResultType};
use crate::test_json::{nested, object};
use crate::tool::ToolResult;
use proptest::prelude::*;
use serde_json::value::RawValue;

/// What an answer reads as, with the result's raw text: comparable.
#[derive(Debug, PartialEq)]
enum Read {
    Complete(Result<(ToolResult, Option<String>), String>),
    InputRequired(String),
    Unknown(String),
}

/// The general reading: the `resultType` scan, then the whole result.
fn read_in_two_passes(raw: &RawValue) -> Read {
    match result_type(raw) {
        ResultType::Complete => Read::Complete(
            parse_call_tool_result(raw)
                .map(|r| {
                    let text = r.raw.as_ref().map(|t| t.get().to_string());
                    (r, text)
                })
                .map_err(|e| e.to_string()),
        ),
        ResultType::InputRequired => Read::InputRequired(raw.get().to_string()),
        ResultType::Unknown(t) => Read::Unknown(t),
    }
}

fn read_in_one_pass(raw: Box<RawValue>) -> Read {
    match read_call_answer(raw) {
        CallAnswer::Complete(r) => Read::Complete(
            r.map(|r| {
                let text = r.raw.as_ref().map(|t| t.get().to_string());
                (r, text)
            })
            .map_err(|e| e.to_string()),
        ),
        CallAnswer::InputRequired(raw) => Read::InputRequired(raw.get().to_string()),
        CallAnswer::Unknown(t) => Read::Unknown(t),
    }
}

/// A JSON value as text: the shapes the members take, and the wrong ones.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("0".to_string()),
        Just("-7".to_string()),
        Just("1.5".to_string()),
        Just("1e400".to_string()),
        Just("18446744073709551616".to_string()),
        Just("\"text\"".to_string()),
        Just("\"te\\u0078t\"".to_string()),
        Just("\"\\ud800\"".to_string()),
        Just("\"complete\"".to_string()),
        Just("\"input_required\"".to_string()),
        "[a-z ]{0,6}".prop_map(|s| format!("\"{s}\"")),
    ];
    nested(leaf, "[a-z]{1,3}", 0..3)
}

/// One content part: mostly a text part, sometimes another kind or a broken one.
fn part() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        4 => Just("type"),
        4 => Just("text"),
        1 => Just("ty\\u0070e"),
        1 => Just("annotations"),
        1 => Just("mimeType"),
        1 => Just("data"),
        1 => Just("uri"),
    ];
    let member = key.prop_flat_map(|k| {
        let likely: BoxedStrategy<String> = match k {
            "type" | "ty\\u0070e" => prop_oneof![
                6 => Just("\"text\"".to_string()),
                1 => Just("\"image\"".to_string()),
                1 => Just("\"resource_link\"".to_string()),
                1 => Just("\"chart\"".to_string()),
                1 => Just("0".to_string()),
            ]
            .boxed(),
            "text" => "[a-z \\\\\"]{0,8}"
                .prop_map(|s| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")))
                .boxed(),
            _ => value().boxed(),
        };
        (Just(k.to_string()), prop_oneof![6 => likely, 1 => value()])
    });
    prop_oneof![
        8 => prop::collection::vec(member, 0..5).prop_map(|m| object(&m)),
        1 => value(),
    ]
}

/// One member of a result: a key, and a value mostly of the shape that key takes.
fn member() -> impl Strategy<Value = (String, String)> {
    let key = prop_oneof![
        6 => Just("content"),
        1 => Just("con\\u0074ent"),
        2 => Just("structuredContent"),
        2 => Just("isError"),
        2 => Just("resultType"),
        1 => Just("_meta"),
        1 => Just("inputRequests"),
        1 => Just("other"),
    ];
    key.prop_flat_map(|k| {
        let likely: BoxedStrategy<String> = match k {
            "content" | "con\\u0074ent" => prop::collection::vec(part(), 0..4)
                .prop_map(|parts| format!("[{}]", parts.join(",")))
                .boxed(),
            "isError" => prop_oneof![Just("true".to_string()), Just("false".to_string())].boxed(),
            "resultType" => prop_oneof![
                Just("\"complete\"".to_string()),
                Just("\"input_required\"".to_string()),
                Just("\"later\"".to_string()),
                Just("null".to_string()),
            ]
            .boxed(),
            _ => value().boxed(),
        };
        (Just(k.to_string()), prop_oneof![6 => likely, 1 => value()])
    })
}

/// A result: an object of members (repeated, missing or of the wrong type), or a bare value.
fn answer() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::collection::vec(member(), 0..6).prop_map(|m| object(&m)),
        1 => value(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Whatever the answer, reading it in one pass gives what the `resultType` scan followed
    /// by the whole result's reading gives.
    #[test]
    fn one_pass_agrees_with_the_general_reading(text in answer()) {
        // Only valid JSON reaches a reader (the frame's decoding checked it).
        if let Ok(raw) = RawValue::from_string(text) {
            prop_assert_eq!(read_in_one_pass(raw.clone()), read_in_two_passes(&raw));
        }
    }
}

#[test]
fn the_generated_answers_reach_both_readings_and_every_kind() {
    // The property above is only as good as its answers: each way and kind, by hand.
    let cases: [(&str, bool, &str); 9] = [
        (r#"{"content":[{"type":"text","text":"a"}]}"#, true, "ok"),
        (
            r#"{"content":[{"text":"a","type":"text","annotations":{"x":1}}],"isError":true,"structuredContent":{"n":1}}"#,
            true,
            "ok",
        ),
        (
            r#"{"content":[{"type":"image","data":"","mimeType":"image/png"}]}"#,
            false,
            "ok",
        ),
        (
            r#"{"content":[{"type":"text","text":"a","x":1e400}]}"#,
            false,
            "error",
        ),
        (
            r#"{"content":[{"type":"text","type":"text","text":"a"}]}"#,
            false,
            "ok",
        ),
        (r#"{"content":[],"content":[]}"#, false, "error"),
        (
            r#"{"resultType":"input_required","inputRequests":{}}"#,
            true,
            "input",
        ),
        (r#"{"resultType":"later"}"#, true, "unknown"),
        (
            r#"{"resultType":1,"resultType":"complete","content":[]}"#,
            false,
            "ok",
        ),
    ];
    for (text, plain, kind) in cases {
        let raw = RawValue::from_string(text.to_string()).unwrap();
        assert_eq!(read_plain(raw.get()).is_some(), plain, "{text}");
        let got = read_in_one_pass(raw.clone());
        assert_eq!(got, read_in_two_passes(&raw), "{text}");
        let got_kind = match got {
            Read::Complete(Ok(_)) => "ok",
            Read::Complete(Err(_)) => "error",
            Read::InputRequired(_) => "input",
            Read::Unknown(_) => "unknown",
        };
        assert_eq!(got_kind, kind, "{text}");
    }
}
