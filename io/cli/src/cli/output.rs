//! What `status`, `tools` and `call` print: a table for people, one stable JSON object for
//! scripts. The JSON field names are documented in the README; change them only with care.

use super::term::{first_line, fmt_duration, paint_status, status_word, stdout_color, Style};
use super::Session;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use switchboard::core::config::{ConfigWarning, SkipReason, SourceLevel, SourceMeta, WarningKind};
use switchboard::core::RawJson;
use switchboard::{ServerState, ServerStatus, ToolResult};

/// Where a server's config came from.
#[derive(Debug, Serialize)]
pub struct SourceJson {
    pub provider: String,
    /// `user` or `project`.
    pub level: &'static str,
    pub path: String,
}

impl From<&SourceMeta> for SourceJson {
    fn from(m: &SourceMeta) -> Self {
        SourceJson {
            provider: m.provider.clone(),
            level: level(m.level),
            path: m.path.clone(),
        }
    }
}

pub(super) fn level(l: SourceLevel) -> &'static str {
    match l {
        SourceLevel::User => "user",
        SourceLevel::Project => "project",
    }
}

/// One server in `status --json`.
#[derive(Debug, Serialize)]
pub struct ServerJson {
    pub name: String,
    pub source: SourceJson,
    /// `stdio`, `http`, `sse`, or null when the config is invalid.
    pub transport: Option<&'static str>,
    /// `connected`, `connecting`, `deferred`, `failed` or `disconnected`.
    pub status: &'static str,
    /// The core's phase: `opening`, `initializing`, `listing-tools`, `connected`, `failed`,
    /// `idle`.
    pub phase: &'static str,
    pub tools: usize,
    /// Tools of its last list hidden by the config's tool filters (`enabled_tools`,
    /// `disabled_tools`, `includeTools`, `excludeTools`, `disabledTools`).
    pub filtered_tools: usize,
    /// Milliseconds from the start of the last attempt to tools ready; null if not ready.
    pub time_to_ready_ms: Option<u64>,
    pub attempts: u32,
    /// The reconnect attempt under way or scheduled; null when the server is not reconnecting.
    pub reconnect_attempt: Option<u32>,
    /// Milliseconds until that attempt starts; null unless one is scheduled.
    pub next_attempt_in_ms: Option<u64>,
    pub server_info: Option<ServerInfoJson>,
    pub protocol_version: Option<String>,
    /// The protocol revision family the server speaks (`legacy` or `modern`), once known.
    pub era: Option<&'static str>,
    /// The last error (for a stdio server that exited: with its last stderr lines).
    pub error: Option<String>,
    /// For a server from a project file: what approved it (`switchboard trust`,
    /// `--trust-project`, `Claude Code enabledMcpjsonServers`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<&'static str>,
}

#[derive(Debug, Serialize)]
pub struct ServerInfoJson {
    pub name: String,
    pub version: Option<String>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl ServerJson {
    fn new(s: &ServerState, session: &Session) -> Self {
        ServerJson {
            name: s.name.clone(),
            source: (&s.source).into(),
            transport: s.transport,
            status: status_word(s),
            phase: s.phase.as_str(),
            tools: s.tool_count,
            filtered_tools: s.filtered_tools,
            time_to_ready_ms: s.time_to_ready.map(millis),
            attempts: s.attempts,
            reconnect_attempt: (s.reconnect_attempt > 0).then_some(s.reconnect_attempt),
            next_attempt_in_ms: next_attempt(s, session).map(millis),
            server_info: s.server_name.as_ref().map(|n| ServerInfoJson {
                name: n.clone(),
                version: s.server_version.clone(),
            }),
            protocol_version: s.protocol_version.clone(),
            era: s.era.map(|e| e.as_str()),
            error: s.last_error.as_ref().map(|e| e.to_string()),
            approved_by: session
                .discovered
                .approved
                .iter()
                .find(|a| a.server == s.name)
                .map(|a| a.by.as_str()),
        }
    }
}

/// A project server in `status --json` that was not started: nothing approved it yet.
#[derive(Debug, Serialize)]
pub struct AwaitingJson {
    pub server: String,
    pub source: SourceJson,
    /// It was approved before, with a config that has changed since.
    pub changed: bool,
    /// The command that approves it.
    pub approve: String,
}

#[derive(Debug, Serialize)]
pub struct ShadowedJson {
    pub server: String,
    pub winner: SourceJson,
    pub shadowed: SourceJson,
}

#[derive(Debug, Serialize)]
pub struct SkippedJson {
    pub server: String,
    pub source: SourceJson,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct ConfigErrorJson {
    pub source: SourceJson,
    /// The message; a syntax error reads `<file>:<line>:<column>: <message>`.
    pub message: String,
}

/// `status --json`.
#[derive(Debug, Serialize)]
pub struct StatusJson {
    /// Milliseconds from start to the startup gate.
    pub gate_ms: u64,
    pub servers: Vec<ServerJson>,
    pub shadowed: Vec<ShadowedJson>,
    pub skipped: Vec<SkippedJson>,
    pub config_errors: Vec<ConfigErrorJson>,
    /// Project servers not started because nothing approved them yet.
    pub awaiting_approval: Vec<AwaitingJson>,
    /// What is not applied as written: variables that expand to nothing or are kept as
    /// written, fields read but not applied.
    pub config_warnings: Vec<WarningJson>,
}

/// One config warning in `status --json` and `config --json`.
#[derive(Debug, Serialize)]
pub struct WarningJson {
    pub server: String,
    pub source: SourceJson,
    /// `empty_variable`, `kept_literal`, `unsupported_variable` or `ignored_field`, with its
    /// `field` and `variable` or `text`.
    #[serde(flatten)]
    pub kind: WarningKind,
    pub message: String,
}

impl From<&ConfigWarning> for WarningJson {
    fn from(w: &ConfigWarning) -> Self {
        WarningJson {
            server: w.server.clone(),
            source: (&w.source).into(),
            kind: w.kind.clone(),
            message: w.to_string(),
        }
    }
}

/// The time until a scheduled reconnect attempt.
fn next_attempt(s: &ServerState, session: &Session) -> Option<Duration> {
    (s.reconnect_attempt > 0)
        .then_some(s.next_attempt_at)
        .flatten()
        .map(|at| session.until(at))
}

/// The STATUS cell: the status word, or for a server reconnecting `reconnecting (attempt 3,
/// in 2.0 s)` (`reconnecting (attempt 3)` once the attempt is under way).
fn status_cell(s: &ServerState, next: Option<Duration>) -> String {
    if s.reconnect_attempt == 0 || s.status != ServerStatus::Connecting {
        return status_word(s).to_string();
    }
    match next {
        Some(d) => format!(
            "reconnecting (attempt {}, in {:.1} s)",
            s.reconnect_attempt,
            d.as_secs_f64()
        ),
        None => format!("reconnecting (attempt {})", s.reconnect_attempt),
    }
}

pub(super) fn skip_reason(r: &SkipReason) -> String {
    match r {
        SkipReason::Disabled => "disabled".into(),
        SkipReason::ProjectConfigsOff => "project configs off".into(),
        SkipReason::DeniedName { pattern } => format!("denied name ({pattern})"),
        SkipReason::DeniedUrl { pattern } => format!("denied url ({pattern})"),
        SkipReason::Rejected { by } => format!("rejected ({})", by.as_str()),
    }
}

fn status_json(session: &Session) -> StatusJson {
    let d = &session.discovered;
    StatusJson {
        gate_ms: u64::try_from(session.report.elapsed.as_millis()).unwrap_or(u64::MAX),
        servers: session
            .sb
            .servers()
            .iter()
            .map(|s| ServerJson::new(s, session))
            .collect(),
        shadowed: d
            .shadowed
            .iter()
            .map(|s| ShadowedJson {
                server: s.server.clone(),
                winner: (&s.winner).into(),
                shadowed: (&s.shadowed).into(),
            })
            .collect(),
        skipped: d
            .skipped
            .iter()
            .map(|s| SkippedJson {
                server: s.server.clone(),
                source: (&s.source).into(),
                reason: skip_reason(&s.reason),
            })
            .collect(),
        config_errors: d
            .errors
            .iter()
            .map(|e| ConfigErrorJson {
                source: (&e.source).into(),
                message: e.error.to_string(),
            })
            .collect(),
        awaiting_approval: d
            .awaiting
            .iter()
            .map(|a| AwaitingJson {
                server: a.server.clone(),
                source: (&a.source).into(),
                changed: a.changed,
                approve: format!("{} {}", session.approve_command, a.server),
            })
            .collect(),
        config_warnings: d.warnings.iter().map(WarningJson::from).collect(),
    }
}

pub(super) fn print_json(value: &impl Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("switchboard: cannot render JSON: {e}"),
    }
}

/// Left-aligned columns; the last column is not padded. `paint` colours cell (row, col)
/// after padding, so escape codes never disturb the alignment.
pub(super) fn table(
    header: &[&str],
    rows: &[Vec<String>],
    style: Style,
    paint: impl Fn(usize, usize, String) -> String,
) -> String {
    // Cells hold what servers and configs chose: one line each, nothing a terminal obeys.
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| super::term::line_safe(cell))
                .collect()
        })
        .collect();
    let rows = &rows;
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                out.push_str(&cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count());
                out.push_str(&cell);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = style.bold(&line(header.iter().map(|h| h.to_string()).collect()));
    out.push('\n');
    for (r, row) in rows.iter().enumerate() {
        let painted = row
            .iter()
            .enumerate()
            .map(|(c, cell)| paint(r, c, cell.clone()))
            .collect::<Vec<_>>();
        // Pad on the plain text, then swap in the painted cell.
        let mut text = String::new();
        let last = row.len().saturating_sub(1);
        for (i, (plain, painted)) in row.iter().zip(painted).enumerate() {
            text.push_str(&painted);
            if i != last {
                let pad = widths[i].saturating_sub(plain.chars().count());
                text.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

pub fn status(session: &Session, json: bool) {
    if json {
        print_json(&status_json(session));
        return;
    }
    let style = Style {
        color: stdout_color(),
    };
    let servers = session.sb.servers();
    let mut out = String::new();
    if servers.is_empty() && !session.discovered.awaiting.is_empty() {
        out.push_str("No MCP server started.\n");
    } else if servers.is_empty() {
        out.push_str("No MCP servers configured");
        if session.discovered.files_read.is_empty() {
            out.push_str(
                " (no .mcp.json, ~/.claude.json, ~/.codex/config.toml, .cursor/mcp.json, \
                 .vscode/mcp.json, ... found; see the README).\nTry `switchboard demo`.\n",
            );
        } else {
            out.push_str(" in the config files read.\n");
        }
    } else {
        let rows: Vec<Vec<String>> = servers
            .iter()
            .map(|s| {
                vec![
                    s.name.clone(),
                    format!(
                        "{} {} {}",
                        s.source.provider,
                        level(s.source.level),
                        s.source.path
                    ),
                    s.transport.unwrap_or("-").to_string(),
                    status_cell(s, next_attempt(s, session)),
                    if s.filtered_tools > 0 {
                        format!("{} ({} filtered)", s.tool_count, s.filtered_tools)
                    } else {
                        s.tool_count.to_string()
                    },
                    s.time_to_ready.map(fmt_duration).unwrap_or("-".into()),
                ]
            })
            .collect();
        let header = ["SERVER", "SOURCE", "TRANSPORT", "STATUS", "TOOLS", "READY"];
        let text = table(&header, &rows, style, |r, c, cell| {
            if c == 3 {
                paint_status(style, &servers[r], &cell)
            } else {
                cell
            }
        });
        // Errors go under their row, indented, with every line of a stderr tail.
        for (line, s) in text
            .lines()
            .zip(std::iter::once(None).chain(servers.iter().map(Some)))
        {
            out.push_str(line);
            out.push('\n');
            if let Some(err) = s.and_then(|s| s.last_error.as_ref()) {
                if s.is_some_and(|s| s.status != ServerStatus::Connected) {
                    for (i, l) in err.to_string().lines().enumerate() {
                        let prefix = if i == 0 { "  error: " } else { "         " };
                        out.push_str(&style.red(&format!("{prefix}{l}")));
                        out.push('\n');
                    }
                }
            }
        }
        out.push_str(&style.dim(&format!(
            "startup gate after {}",
            fmt_duration(session.report.elapsed)
        )));
        out.push('\n');
    }
    let d = &session.discovered;
    if !d.shadowed.is_empty() {
        out.push_str("\nShadowed (a higher-priority source names the same server):\n");
        for s in &d.shadowed {
            out.push_str(&format!(
                "  {}: {} {} {} (used: {} {} {})\n",
                s.server,
                s.shadowed.provider,
                level(s.shadowed.level),
                s.shadowed.path,
                s.winner.provider,
                level(s.winner.level),
                s.winner.path
            ));
        }
    }
    if !d.skipped.is_empty() {
        out.push_str("\nSkipped:\n");
        for s in &d.skipped {
            out.push_str(&format!(
                "  {}: {} ({} {})\n",
                s.server,
                skip_reason(&s.reason),
                s.source.provider,
                s.source.path
            ));
        }
    }
    if !d.awaiting.is_empty() {
        out.push_str("\nAwaiting approval (project servers start only once approved):\n");
        for a in &d.awaiting {
            let changed = if a.changed {
                ", changed since it was approved"
            } else {
                ""
            };
            out.push_str(&style.yellow(&format!(
                "  {}: awaiting approval ({} {}{changed})\n    approve with: {} {}",
                a.server, a.source.provider, a.source.path, session.approve_command, a.server
            )));
            out.push('\n');
        }
    }
    if !d.warnings.is_empty() {
        out.push_str("\nConfig warnings (not applied as written):\n");
        for w in &d.warnings {
            out.push_str(&style.yellow(&format!("  {w} ({})", w.source.path)));
            out.push('\n');
        }
    }
    if !d.errors.is_empty() {
        out.push_str("\nConfig errors:\n");
        for e in &d.errors {
            let message = e.error.to_string();
            // A syntax error already starts with its file.
            let line = if message.contains(&e.source.path) {
                format!("  {message}")
            } else {
                format!("  {message} ({})", e.source.path)
            };
            out.push_str(&style.red(&line));
            out.push('\n');
        }
    }
    print!("{}", super::term::terminal_safe(&out));
}

/// A member a server sent, as `--json` prints it: parsed, so it is indented with the rest,
/// when it can be; otherwise the server's text verbatim. A schema nested deeper than the
/// parser's depth limit (128) is thus kept byte for byte, never printed as `null`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Exact {
    Parsed(Value),
    Raw(RawJson),
}

impl Exact {
    pub fn of(raw: &RawJson) -> Self {
        match serde_json::from_str(raw.get()) {
            Ok(v) => Exact::Parsed(v),
            Err(_) => Exact::Raw(raw.clone()),
        }
    }
}

/// One tool in `tools --json`.
#[derive(Debug, Serialize)]
pub struct ToolJson {
    /// The qualified name the agent sees (and `call` takes).
    pub name: String,
    pub server: String,
    /// The tool's name on its server.
    pub tool: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Served from the cache while its server is still connecting; a call waits for it.
    pub deferred: bool,
    pub input_schema: Exact,
    /// The schema of its `structuredContent`, if it declares one.
    pub output_schema: Option<Exact>,
    /// Its behaviour hints (`readOnlyHint`, ...), as the server sent them.
    pub annotations: Option<Exact>,
    /// Its icons, as the server sent them.
    pub icons: Option<Exact>,
    /// Its `_meta` object, as the server sent it.
    #[serde(rename = "_meta")]
    pub meta: Option<Exact>,
    /// How it runs (`{"taskSupport": ...}`), as the server sent it.
    pub execution: Option<Exact>,
}

/// `tools --json`.
#[derive(Debug, Serialize)]
pub struct ToolsJson {
    pub tools: Vec<ToolJson>,
    /// Servers that failed, with their error.
    pub errors: BTreeMap<String, String>,
}

pub fn tools(session: &Session, server: Option<&str>, json: bool) {
    let view = session.sb.tools();
    let selected = view
        .iter()
        .filter(|t| server.is_none() || server == Some(t.server.as_str()))
        .collect::<Vec<_>>();
    let errors: BTreeMap<String, String> = session
        .sb
        .servers()
        .into_iter()
        .filter(|s| server.is_none() || server == Some(s.name.as_str()))
        .filter(|s| s.status == ServerStatus::Disconnected)
        .filter_map(|s| s.last_error.map(|e| (s.name, e.to_string())))
        .collect();
    if json {
        print_json(&ToolsJson {
            tools: selected
                .iter()
                .map(|t| ToolJson {
                    name: t.qualified_name.clone(),
                    server: t.server.clone(),
                    tool: t.def.name.clone(),
                    title: t.def.title.clone(),
                    description: t.def.description.as_deref().map(str::to_string),
                    deferred: t.deferred,
                    input_schema: Exact::of(&t.def.input_schema),
                    output_schema: t.def.output_schema.as_ref().map(Exact::of),
                    annotations: t.def.annotations.as_ref().map(Exact::of),
                    icons: t.def.icons.as_ref().map(Exact::of),
                    meta: t.def.meta.as_ref().map(Exact::of),
                    execution: t.def.execution.as_ref().map(Exact::of),
                })
                .collect(),
            errors,
        });
        return;
    }
    let style = Style {
        color: stdout_color(),
    };
    let mut out = String::new();
    if selected.is_empty() {
        out.push_str("No tools.\n");
    } else {
        let rows: Vec<Vec<String>> = selected
            .iter()
            .map(|t| {
                vec![
                    t.qualified_name.clone(),
                    t.server.clone(),
                    t.def.name.clone(),
                    if t.deferred { "deferred" } else { "" }.to_string(),
                    t.def
                        .description
                        .as_deref()
                        .and_then(|d| d.lines().next())
                        .unwrap_or("")
                        .to_string(),
                ]
            })
            .collect();
        let header = ["TOOL", "SERVER", "RAW NAME", "", "DESCRIPTION"];
        out.push_str(&table(&header, &rows, style, |_, c, cell| {
            if c == 3 {
                style.yellow(&cell)
            } else {
                cell
            }
        }));
        let deferred = selected.iter().filter(|t| t.deferred).count();
        out.push_str(&style.dim(&format!(
            "{} tools ({} deferred: from the cache, their server still connecting)",
            selected.len(),
            deferred
        )));
        out.push('\n');
    }
    for (name, e) in &errors {
        out.push_str(&style.red(&format!("{name} failed: {}", first_line(e))));
        out.push('\n');
    }
    print!("{}", super::term::terminal_safe(&out));
}

pub fn call_result(r: &ToolResult, json: bool) {
    if json {
        // The result object byte for byte as the server sent it.
        match &r.raw {
            Some(raw) => println!("{}", raw.get()),
            None => print_json(r),
        }
    } else {
        println!("{}", super::term::terminal_safe(&r.render_text()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard::core::config::SourceLevel;
    use switchboard::core::Instant;

    fn state(status: ServerStatus, reconnect_attempt: u32) -> ServerState {
        ServerState {
            name: "s".into(),
            status,
            phase: switchboard::Phase::Backoff,
            source: SourceMeta {
                provider: "switchboard".into(),
                level: SourceLevel::Project,
                path: "mcp.json".into(),
            },
            config_hash: String::new(),
            transport: Some("stdio"),
            conn: None,
            last_error: Some(switchboard::ServerError::new(
                switchboard::ServerErrorKind::Closed,
                "stdio server exited (code 1)",
            )),
            attempts: 4,
            started_at: None,
            ready_at: None,
            time_to_ready: None,
            tool_count: 3,
            filtered_tools: 0,
            deferred: true,
            protocol_version: None,
            era: None,
            server_name: None,
            server_version: None,
            reconnect_attempt,
            next_attempt_at: Some(Instant::from_millis(5000)),
            instructions: None,
            capabilities: None,
        }
    }

    #[test]
    fn the_status_cell_shows_the_reconnect_attempt_and_when_it_starts() {
        let s = state(ServerStatus::Connecting, 3);
        assert_eq!(
            status_cell(&s, Some(Duration::from_millis(2000))),
            "reconnecting (attempt 3, in 2.0 s)"
        );
        assert_eq!(status_cell(&s, None), "reconnecting (attempt 3)");
        // Not reconnecting: the plain status word.
        assert_eq!(
            status_cell(&state(ServerStatus::Connecting, 0), None),
            "deferred"
        );
        assert_eq!(
            status_cell(&state(ServerStatus::Disconnected, 2), None),
            "failed"
        );
    }
}
