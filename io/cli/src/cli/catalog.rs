//! `resources`, `read`, `prompts`, `prompt` and `complete`: what servers offer besides
//! tools, over the library's catalog API. Each prints a table or text, or with `--json`
//! exactly one JSON object on stdout.

use super::output::{print_json, table};
use super::term::{first_line, stdout_color, Style};
use super::term::{line_safe, terminal_safe};
use super::{Fatal, Session};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use switchboard::core::catalog::{
    Completion, CompletionRef, Prompt, PromptResult, ReadResult, Resource, ResourceTemplate,
};
use switchboard::ServerStatus;

/// Servers that failed (and are not connecting), with their errors, for the lists.
fn failures(session: &Session, server: Option<&str>) -> BTreeMap<String, String> {
    session
        .sb
        .servers()
        .into_iter()
        .filter(|s| server.is_none() || server == Some(s.name.as_str()))
        .filter(|s| s.status == ServerStatus::Disconnected)
        .filter_map(|s| s.last_error.map(|e| (s.name, e.to_string())))
        .collect()
}

fn push_errors(out: &mut String, style: Style, errors: &BTreeMap<String, String>) {
    for (name, e) in errors {
        out.push_str(&style.red(&format!("{name} failed: {}", first_line(e))));
        out.push('\n');
    }
}

fn deferred_cell(deferred: bool) -> String {
    if deferred { "deferred" } else { "" }.to_string()
}

fn short(text: &Option<String>) -> String {
    text.as_deref()
        .and_then(|d| d.lines().next())
        .unwrap_or("")
        .to_string()
}

#[derive(Serialize)]
struct ResourcesJson<'a> {
    resources: Vec<&'a Resource>,
    templates: Vec<&'a ResourceTemplate>,
    errors: BTreeMap<String, String>,
}

/// `switchboard resources`: every resource and resource template.
pub(super) fn resources(session: &Session, server: Option<&str>, json: bool) {
    let resources = session.sb.resources();
    let templates = session.sb.resource_templates();
    let mine = |s: &str| server.is_none() || server == Some(s);
    let resources: Vec<&Resource> = resources.iter().filter(|r| mine(&r.server)).collect();
    let templates: Vec<&ResourceTemplate> = templates.iter().filter(|t| mine(&t.server)).collect();
    let errors = failures(session, server);
    if json {
        print_json(&ResourcesJson {
            resources,
            templates,
            errors,
        });
        return;
    }
    let style = Style {
        color: stdout_color(),
    };
    let mut out = String::new();
    if resources.is_empty() {
        out.push_str("No resources.\n");
    } else {
        let rows: Vec<Vec<String>> = resources
            .iter()
            .map(|r| {
                vec![
                    r.def.uri.clone(),
                    r.server.clone(),
                    r.def.name.clone(),
                    r.def.mime_type.clone().unwrap_or_default(),
                    deferred_cell(r.deferred),
                    short(&r.def.description),
                ]
            })
            .collect();
        let header = ["URI", "SERVER", "NAME", "MIME TYPE", "", "DESCRIPTION"];
        out.push_str(&table(&header, &rows, style, |_, _, cell| cell));
        out.push_str(&style.dim(&format!("{} resources", resources.len())));
        out.push('\n');
    }
    if !templates.is_empty() {
        let rows: Vec<Vec<String>> = templates
            .iter()
            .map(|t| {
                vec![
                    t.def.uri_template.clone(),
                    t.server.clone(),
                    t.def.name.clone(),
                    deferred_cell(t.deferred),
                    short(&t.def.description),
                ]
            })
            .collect();
        out.push('\n');
        let header = ["URI TEMPLATE", "SERVER", "NAME", "", "DESCRIPTION"];
        out.push_str(&table(&header, &rows, style, |_, _, cell| cell));
        out.push_str(&style.dim(&format!("{} resource templates", templates.len())));
        out.push('\n');
    }
    push_errors(&mut out, style, &errors);
    print!("{}", terminal_safe(&out));
}

#[derive(Serialize)]
struct PromptsJson<'a> {
    prompts: Vec<&'a Prompt>,
    errors: BTreeMap<String, String>,
}

/// `switchboard prompts`: every prompt by qualified name.
pub(super) fn prompts(session: &Session, server: Option<&str>, json: bool) {
    let view = session.sb.prompts();
    let prompts: Vec<&Prompt> = view
        .iter()
        .filter(|p| server.is_none() || server == Some(p.server.as_str()))
        .collect();
    let errors = failures(session, server);
    if json {
        print_json(&PromptsJson { prompts, errors });
        return;
    }
    let style = Style {
        color: stdout_color(),
    };
    let mut out = String::new();
    if prompts.is_empty() {
        out.push_str("No prompts.\n");
    } else {
        let rows: Vec<Vec<String>> = prompts
            .iter()
            .map(|p| {
                let args: Vec<String> = p
                    .def
                    .arguments
                    .iter()
                    .map(|a| {
                        if a.required {
                            a.name.clone()
                        } else {
                            format!("[{}]", a.name)
                        }
                    })
                    .collect();
                vec![
                    p.qualified_name.clone(),
                    p.server.clone(),
                    p.def.name.clone(),
                    args.join(" "),
                    deferred_cell(p.deferred),
                    short(&p.def.description),
                ]
            })
            .collect();
        let header = [
            "PROMPT",
            "SERVER",
            "RAW NAME",
            "ARGUMENTS",
            "",
            "DESCRIPTION",
        ];
        out.push_str(&table(&header, &rows, style, |_, _, cell| cell));
        out.push_str(&style.dim(&format!("{} prompts", prompts.len())));
        out.push('\n');
    }
    push_errors(&mut out, style, &errors);
    print!("{}", terminal_safe(&out));
}

/// `switchboard read`: the contents, text as it is, binary as a note (or all of it as JSON).
pub(super) fn read_result(r: &ReadResult, json: bool) {
    if json {
        print_json(r);
        return;
    }
    for c in &r.contents {
        match (&c.text, &c.blob) {
            (Some(text), _) => println!("{}", terminal_safe(text)),
            (None, Some(blob)) => println!(
                "({} base64 characters of {})",
                blob.len(),
                c.mime_type.as_deref().unwrap_or("binary data")
            ),
            (None, None) => println!("(no contents for {})", line_safe(&c.uri)),
        }
    }
}

/// `switchboard prompt`: each message as `role: text`.
pub(super) fn prompt_result(p: &PromptResult, json: bool) {
    if json {
        print_json(p);
        return;
    }
    if let Some(d) = &p.description {
        println!("# {}", terminal_safe(d));
    }
    for m in &p.messages {
        let text = match m.content.get("text").and_then(Value::as_str) {
            Some(t) => t.to_string(),
            None => m.content.to_string(),
        };
        println!("{}: {}", line_safe(&m.role), terminal_safe(&text));
    }
}

/// `switchboard complete`: one value per line.
pub(super) fn completion(c: &Completion, json: bool) {
    if json {
        print_json(c);
        return;
    }
    for v in &c.values {
        println!("{}", line_safe(v));
    }
    if c.has_more {
        let more = c.total.map_or(String::new(), |t| format!(" ({t} in all)"));
        eprintln!("(more values{more})");
    }
}

/// `JSON_ARGS` of `prompt` or `--context` of `complete`: a JSON object of strings.
pub(super) fn string_map(
    text: Option<&str>,
    what: &str,
) -> Result<BTreeMap<String, String>, Fatal> {
    let Some(text) = text else {
        return Ok(BTreeMap::new());
    };
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Fatal::usage(format!("the {what} are not valid JSON: {e}")))?;
    let Value::Object(o) = value else {
        return Err(Fatal::usage(format!("the {what} must be a JSON object")));
    };
    o.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            other => Ok((k, other.to_string())),
        })
        .collect()
}

/// What `complete` completes: `--prompt NAME` or `--resource URI [--server S]`.
pub(super) fn reference(
    prompt: Option<String>,
    resource: Option<String>,
    server: Option<String>,
) -> Result<CompletionRef, Fatal> {
    match (prompt, resource) {
        (Some(name), None) => Ok(CompletionRef::Prompt { name }),
        (None, Some(uri)) => Ok(CompletionRef::Resource { uri, server }),
        _ => Err(Fatal::usage(
            "give exactly one of --prompt NAME or --resource URI",
        )),
    }
}
