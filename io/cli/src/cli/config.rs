//! `switchboard config`: what discovery made of every config file, without starting
//! anything; and the answers to VS Code `${input:id}` prompts, asked on the terminal.

use super::output::{print_json, skip_reason, SourceJson, WarningJson};
use super::{discovery_options, Fatal, Global, EXIT_OK};
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};
use switchboard::core::config::{InputSpec, ServerSpec, SourceMeta};
use switchboard::{discover, Discovered, DiscoveryOptions};

/// Discover; when servers need `${input:id}` answers and stdin is a terminal, ask for them
/// (on stderr) and discover again with the answers. Without a terminal those servers stay
/// errors that say how to answer.
pub(super) fn discover_answered(options: DiscoveryOptions, quiet: bool) -> Discovered {
    answered(options, quiet).0
}

/// [`discover_answered`], and the options with the answers given (in `inputs`): what a
/// discovery later in the run uses, so each input is asked once per run.
pub(super) fn answered(
    mut options: DiscoveryOptions,
    quiet: bool,
) -> (Discovered, DiscoveryOptions) {
    let found = discover(&options);
    if found.inputs_needed.is_empty() || !std::io::stdin().is_terminal() {
        return (found, options);
    }
    for input in &found.inputs_needed {
        match ask(input, quiet) {
            Some(answer) => {
                options.inputs.insert(input.id.clone(), answer);
            }
            None => return (found, options),
        }
    }
    (discover(&options), options)
}

/// One answer from the terminal; `None` at end of input.
fn ask(input: &InputSpec, quiet: bool) -> Option<String> {
    let mut prompt = input
        .description
        .clone()
        .unwrap_or_else(|| format!("Value for ${{input:{}}}", input.id));
    if !input.options.is_empty() {
        prompt.push_str(&format!(" [{}]", input.options.join(", ")));
    }
    if let Some(d) = &input.default {
        if !input.password {
            prompt.push_str(&format!(" (default: {d})"));
        }
    }
    if !quiet || input.password {
        eprint!("{}: ", super::term::terminal_safe(&prompt));
        let _ = std::io::stderr().flush();
    }
    let echo = EchoOff::new(input.password);
    let mut line = String::new();
    let read = std::io::stdin().lock().read_line(&mut line);
    drop(echo);
    if input.password {
        eprintln!();
    }
    match read {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            let line = line.trim_end_matches(['\n', '\r']).to_string();
            match (&input.default, line.is_empty()) {
                (Some(d), true) => Some(d.clone()),
                _ => Some(line),
            }
        }
    }
}

/// The terminal's echo switched off while a password is typed; restored on drop.
struct EchoOff {
    #[cfg(unix)]
    saved: Option<libc::termios>,
}

impl EchoOff {
    fn new(on: bool) -> Self {
        #[cfg(unix)]
        {
            if !on {
                return EchoOff { saved: None };
            }
            // SAFETY: tcgetattr/tcsetattr on stdin with a termios we own.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                if libc::tcgetattr(0, &mut t) != 0 {
                    return EchoOff { saved: None };
                }
                let saved = t;
                t.c_lflag &= !libc::ECHO;
                libc::tcsetattr(0, libc::TCSANOW, &t);
                EchoOff { saved: Some(saved) }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = on;
            EchoOff {}
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(saved) = &self.saved {
            // SAFETY: restores the attributes read in `new`.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, saved);
            }
        }
    }
}

/// One file in `config --json`.
#[derive(Debug, Serialize)]
struct FileJson {
    source: SourceJson,
    found: bool,
    /// Servers this file gave that run (or await approval).
    used: Vec<String>,
    /// Its entries that lost to a higher-priority file naming the same server.
    shadowed: Vec<String>,
    /// Its entries not run: disabled, denied, rejected, project configs off.
    skipped: Vec<SkippedJson>,
    /// Its project servers nothing approved yet.
    awaiting_approval: Vec<String>,
    errors: Vec<String>,
    warnings: Vec<WarningJson>,
}

#[derive(Debug, Serialize)]
struct SkippedJson {
    server: String,
    reason: String,
}

/// One server in `config --json`: the config as it will run (variables still as written in
/// Switchboard's syntax; environment and header values are not shown, only their names).
#[derive(Debug, Serialize)]
pub(super) struct ServerConfigJson {
    name: String,
    source: SourceJson,
    transport: Option<&'static str>,
    command: Option<String>,
    args: Vec<String>,
    env: Vec<String>,
    cwd: Option<String>,
    url: Option<String>,
    headers: Vec<String>,
    enabled_tools: Option<Vec<String>>,
    disabled_tools: Vec<String>,
    connect_timeout_ms: Option<i64>,
    call_timeout_ms: Option<i64>,
    /// `user-level file` for the user's own files; for project servers what approved them.
    approved_by: &'static str,
}

impl ServerConfigJson {
    fn new(s: &ServerSpec, d: &Discovered) -> Self {
        let c = &s.config;
        ServerConfigJson {
            name: s.name.clone(),
            source: (&s.source).into(),
            transport: c.transport_kind().ok().map(|k| k.as_str()),
            command: c.command.clone(),
            args: c.args.clone(),
            env: c.env.keys().cloned().collect(),
            cwd: c.cwd.clone(),
            url: c.url.clone(),
            headers: c.headers.keys().cloned().collect(),
            enabled_tools: c.enabled_tools.clone(),
            disabled_tools: c.disabled_tools.clone(),
            connect_timeout_ms: c.timeout_ms,
            call_timeout_ms: c.call_timeout_ms,
            approved_by: d
                .approved
                .iter()
                .find(|a| a.server == s.name)
                .map_or("user-level file", |a| a.by.as_str()),
        }
    }
}

#[derive(Debug, Serialize)]
struct AwaitingJson {
    server: String,
    source: SourceJson,
    changed: bool,
    approve: String,
}

/// `config --json`.
#[derive(Debug, Serialize)]
struct ConfigJson {
    files: Vec<FileJson>,
    servers: Vec<ServerConfigJson>,
    awaiting_approval: Vec<AwaitingJson>,
    /// VS Code inputs asked of a person and not answered (no terminal).
    inputs_needed: Vec<InputSpec>,
}

fn same(a: &SourceMeta, b: &SourceMeta) -> bool {
    a.path == b.path && a.provider == b.provider
}

fn config_json(d: &Discovered, approve: &str) -> ConfigJson {
    let mut files: Vec<FileJson> = Vec::new();
    for look in &d.looked_at {
        // `~/.claude.json` is looked at twice (its local and its user servers): once here.
        if files.iter().any(|f| f.source.path == look.source.path) {
            continue;
        }
        let m = &look.source;
        let mine = |s: &SourceMeta| s.path == m.path;
        files.push(FileJson {
            source: m.into(),
            found: look.found,
            used: (d.servers.iter())
                .filter(|s| mine(&s.source))
                .map(|s| s.name.clone())
                .collect(),
            shadowed: (d.shadowed.iter())
                .filter(|s| mine(&s.shadowed))
                .map(|s| format!("{} (used: {})", s.server, s.winner.path))
                .collect(),
            skipped: (d.skipped.iter())
                .filter(|s| mine(&s.source))
                .map(|s| SkippedJson {
                    server: s.server.clone(),
                    reason: skip_reason(&s.reason),
                })
                .collect(),
            awaiting_approval: (d.awaiting.iter())
                .filter(|a| mine(&a.source))
                .map(|a| a.server.clone())
                .collect(),
            errors: (d.errors.iter())
                .filter(|e| same(&e.source, m) || e.source.path == m.path)
                .map(|e| e.error.to_string())
                .collect(),
            warnings: (d.warnings.iter())
                .filter(|w| mine(&w.source))
                .map(WarningJson::from)
                .collect(),
        });
    }
    ConfigJson {
        files,
        servers: d
            .servers
            .iter()
            .map(|s| ServerConfigJson::new(s, d))
            .collect(),
        awaiting_approval: d
            .awaiting
            .iter()
            .map(|a| AwaitingJson {
                server: a.server.clone(),
                source: (&a.source).into(),
                changed: a.changed,
                approve: format!("{approve} {}", a.server),
            })
            .collect(),
        inputs_needed: d.inputs_needed.clone(),
    }
}

/// `switchboard config [--json]`.
pub(super) async fn run(g: &Global, json: bool) -> Result<u8, Fatal> {
    let (_, options) = discovery_options(g)?;
    let quiet = g.quiet;
    let d = blocking::unblock(move || discover_answered(options, quiet)).await;
    let approve = super::trust::approve_command(g);
    let report = config_json(&d, &approve);
    if json {
        print_json(&report);
        return Ok(EXIT_OK);
    }
    let mut out = String::new();
    out.push_str("Files (highest priority first):\n");
    for f in &report.files {
        let state = if f.found { "found" } else { "not found" };
        out.push_str(&format!(
            "  {} {} {} ({state})\n",
            f.source.provider, f.source.level, f.source.path
        ));
        let lists = [
            ("used", f.used.join(", ")),
            ("shadowed", f.shadowed.join(", ")),
            (
                "skipped",
                (f.skipped.iter())
                    .map(|s| format!("{} ({})", s.server, s.reason))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("awaiting approval", f.awaiting_approval.join(", ")),
        ];
        for (what, list) in lists {
            if !list.is_empty() {
                out.push_str(&format!("    {what}: {list}\n"));
            }
        }
        for e in &f.errors {
            out.push_str(&format!("    error: {e}\n"));
        }
        for w in &f.warnings {
            out.push_str(&format!("    warning: {}\n", w.message));
        }
    }
    if !report.servers.is_empty() {
        out.push_str("\nServers:\n");
        for s in &report.servers {
            let what = match (&s.command, &s.url) {
                (Some(c), _) => std::iter::once(c.clone())
                    .chain(s.args.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" "),
                (None, Some(u)) => u.clone(),
                _ => String::new(),
            };
            out.push_str(&format!(
                "  {}: {} {} ({} {})\n",
                s.name,
                s.transport.unwrap_or("-"),
                what,
                s.source.provider,
                s.source.path
            ));
        }
    }
    if !report.awaiting_approval.is_empty() {
        out.push_str("\nAwaiting approval:\n");
        for a in &report.awaiting_approval {
            out.push_str(&format!("  {}: approve with: {}\n", a.server, a.approve));
        }
    }
    for i in &report.inputs_needed {
        out.push_str(&format!(
            "\nInput ${{input:{}}} is needed: run on a terminal to answer it.\n",
            i.id
        ));
    }
    print!("{}", super::term::terminal_safe(&out));
    Ok(EXIT_OK)
}
