//! A list page served from the gateway's memo is the frame the page's own writer gives: the
//! page's text (`page_text`) under an id (`result_text`) is byte for byte `tools_page`,
//! `resources_page`, `templates_page` or `prompts_page` of the same entries, names, cursor and
//! id, for generated entries (names and texts with quotes, backslashes, control and non-ASCII
//! characters, optional members present or not) and ids (numbers and strings).

use super::wire::{
    page_text, prompts_page, resources_page, result, result_text, templates_page, tools_page,
    ListPage,
};
use crate::catalog::{
    Prompt, PromptArgument, PromptDef, Resource, ResourceDef, ResourceTemplate, ResourceTemplateDef,
};
use crate::tool::{RawJson, Tool, ToolDef};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::Value;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z_]{1,8}",
        Just("q\"uote\\back\u{1}\u{7f}é☃\n".to_string()),
        any::<String>().prop_map(|s| s.chars().take(6).collect()),
    ]
}

fn raw(s: &str) -> RawJson {
    RawJson::from(RawValue::from_string(s.to_string()).expect("JSON"))
}

fn schema() -> impl Strategy<Value = RawJson> {
    prop_oneof![
        Just(raw("{\"type\":\"object\"}")),
        Just(raw("{ \"b\" : [1, 2.5e3, null], \"a\":\"\\u00e9\" }")),
    ]
}

fn id() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::from),
    ]
}

fn tool() -> impl Strategy<Value = (Tool, String)> {
    (
        text(),
        proptest::option::of(text()),
        proptest::option::of(text()),
        schema(),
        proptest::option::of(schema()),
        text(),
    )
        .prop_map(|(name, title, description, input, meta, served)| {
            let mut def = ToolDef::named(&name);
            def.title = title;
            def.description = description.map(Into::into);
            def.input_schema = input;
            def.meta = meta;
            let tool = Tool {
                qualified_name: format!("mcp_s_{name}"),
                server: "s".into(),
                def,
                deferred: false,
            };
            (tool, served)
        })
}

fn resource() -> impl Strategy<Value = (Resource, ResourceTemplate)> {
    (
        text(),
        text(),
        proptest::option::of(text()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(schema()),
    )
        .prop_map(|(uri, name, description, size, annotations)| {
            let resource = Resource {
                server: "s".into(),
                def: ResourceDef {
                    uri: uri.clone(),
                    name: name.clone(),
                    title: None,
                    description: description.clone(),
                    mime_type: Some("text/plain".into()),
                    size,
                    annotations: annotations.clone(),
                },
                deferred: false,
            };
            let template = ResourceTemplate {
                server: "s".into(),
                def: ResourceTemplateDef {
                    uri_template: format!("{uri}/{{x}}"),
                    name,
                    title: None,
                    description,
                    mime_type: None,
                    annotations,
                },
                deferred: false,
            };
            (resource, template)
        })
}

fn prompt() -> impl Strategy<Value = (Prompt, String)> {
    (
        text(),
        proptest::option::of(text()),
        text(),
        any::<bool>(),
        text(),
    )
        .prop_map(|(name, title, arg, required, served)| {
            let prompt = Prompt {
                qualified_name: format!("mcp_s_{name}"),
                server: "s".into(),
                def: PromptDef {
                    name,
                    title,
                    description: None,
                    arguments: vec![PromptArgument {
                        name: arg,
                        title: None,
                        description: None,
                        required,
                    }],
                },
                deferred: false,
            };
            (prompt, served)
        })
}

proptest! {
    #[test]
    fn a_page_as_text_under_an_id_is_the_page_frame(
        id in id(),
        tools in proptest::collection::vec(tool(), 0..4),
        resources in proptest::collection::vec(resource(), 0..4),
        prompts in proptest::collection::vec(prompt(), 0..4),
        next in proptest::option::of("[0-9]{1,3}"),
    ) {
        let next = next.as_deref();
        let (tools, tool_names): (Vec<Tool>, Vec<String>) = tools.into_iter().unzip();
        let (resources, templates): (Vec<Resource>, Vec<ResourceTemplate>) =
            resources.into_iter().unzip();
        let (prompts, prompt_names): (Vec<Prompt>, Vec<String>) = prompts.into_iter().unzip();
        let pages = [
            (ListPage::Tools(&tools, &tool_names), tools_page(&id, &tools, &tool_names, next)),
            (ListPage::Resources(&resources), resources_page(&id, &resources, next)),
            (ListPage::Templates(&templates), templates_page(&id, &templates, next)),
            (
                ListPage::Prompts(&prompts, &prompt_names),
                prompts_page(&id, &prompts, &prompt_names, next),
            ),
        ];
        for (page, frame) in pages {
            let text = page_text(page, next);
            prop_assert_eq!(&result_text(&id, &text), &frame);
            prop_assert_eq!(&result(&id, &*text), &frame);
        }
    }
}

/// Pages served again come from the memo; a new view keeps the pages of the kinds it left
/// equal and forgets the others. Each answer is the frame its `*_page` writes for the view
/// of the moment (debug builds compare every served page with it too).
#[test]
fn pages_served_again_follow_the_view() {
    use super::View;
    use super::{ExchangeId, Gateway, GatewayInput, GatewayOptions, GatewayOutput, SessionId};
    use bytes::Bytes;
    use std::sync::Arc;

    let mut g = Gateway::new(GatewayOptions {
        page_size: 1,
        ..GatewayOptions::default()
    });
    let session = SessionId(1);
    g.handle(GatewayInput::Opened {
        session,
        strict: false,
    });
    let ask = |g: &mut Gateway, id: u64, method: &str, cursor: Option<&str>| -> Bytes {
        let frame = match cursor {
            Some(c) => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"cursor":"{c}"}}}}"#
            ),
            None => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#),
        };
        g.handle(GatewayInput::Frame {
            session,
            exchange: ExchangeId(id),
            frame: Bytes::from(frame),
        });
        let mut last = None;
        while let Some(o) = g.poll_output() {
            if let GatewayOutput::Send { frame, .. } = o {
                last = Some(frame);
            }
        }
        last.expect("an answer")
    };
    let tool = |name: &str| Tool {
        qualified_name: format!("mcp_s_{name}"),
        server: "s".into(),
        def: ToolDef::named(name),
        deferred: false,
    };
    let resource = |uri: &str| Resource {
        server: "s".into(),
        def: ResourceDef {
            uri: uri.into(),
            name: uri.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            annotations: None,
        },
        deferred: false,
    };
    let names = |tools: &[Tool]| -> Vec<String> {
        tools.iter().map(|t| t.qualified_name.clone()).collect()
    };
    let tools = vec![tool("a"), tool("b")];
    g.handle(GatewayInput::View(View {
        tools: Arc::new(tools.clone()),
        resources: Arc::new(vec![resource("r1")]),
        ..View::default()
    }));
    let n = names(&tools);
    for id in [1, 2] {
        assert_eq!(
            ask(&mut g, id, "tools/list", Some("1")),
            tools_page(&Value::from(id), &tools[1..], &n[1..], None)
        );
    }
    // The resources change, the tools do not (new `Arc`s, equal entries).
    let resources = vec![resource("r2"), resource("r3")];
    g.handle(GatewayInput::View(View {
        tools: Arc::new(tools.clone()),
        resources: Arc::new(resources.clone()),
        ..View::default()
    }));
    assert_eq!(
        ask(&mut g, 3, "tools/list", None),
        tools_page(&Value::from(3), &tools[..1], &n[..1], Some("1"))
    );
    assert_eq!(
        ask(&mut g, 4, "resources/list", None),
        resources_page(&Value::from(4), &resources[..1], Some("1"))
    );
    // Now the tools change: the page at the same cursor is the new one.
    let tools = vec![tool("a"), tool("c")];
    let n = names(&tools);
    g.handle(GatewayInput::View(View {
        tools: Arc::new(tools.clone()),
        resources: Arc::new(resources.clone()),
        ..View::default()
    }));
    assert_eq!(
        ask(&mut g, 5, "tools/list", Some("1")),
        tools_page(&Value::from(5), &tools[1..], &n[1..], None)
    );
}
