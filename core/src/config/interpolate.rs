//! Each client's own variable syntax, in its own files only.
//!
//! Claude Code writes `${VAR}` and `${VAR:-default}` (an unset variable without a default
//! stays as written); Gemini CLI also the bare `$VAR` (unset is empty); Cursor, VS Code, Roo
//! Code and Windsurf `${env:VAR}`, `${workspaceFolder}`, `${userHome}` and their kin, VS Code
//! `${input:id}` (answered by a person), Windsurf `${file:/path}`; opencode `{env:VAR}` and
//! `{file:path}`; a Gemini CLI extension's manifest also `${extensionPath}`, `${workspacePath}`
//! and `${/}`; Codex, Claude Desktop, Zed and Cline expand nothing. A file is read in the
//! syntax of the client that owns it, and translated into Switchboard's own (`${VAR}`,
//! `${VAR:-default}`, `$${` for a literal `${`), which is what the manager expands at connect
//! time. So a `${env:TOKEN}` in a Cursor file is the variable `TOKEN`, while the same text in a
//! Codex file is sent as written.
//!
//! Pure: the shell passes the environment, the project and home directories, the answers to
//! `${input:id}` prompts and the text of the files named by `envFile` and `${file:…}` (it
//! reads them, bounded, after a first pass says which). Every variable that comes out empty,
//! every reference kept as written and every field that is read but not applied is a
//! [`ConfigWarning`].

use super::expand::{literal, split_default};
use super::{ConfigError, ParsedDocument, ServerConfig, Source, SourceMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Whose variable syntax a file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Syntax {
    /// Switchboard's own: `${VAR}`, `${VAR:-default}`, `$${` (and `!command` secrets).
    Switchboard,
    /// Claude Code: `${VAR}`, `${VAR:-default}`; unset without a default stays as written.
    ClaudeCode,
    /// Gemini CLI: `$VAR`, `${VAR}`, `${VAR:-default}`; unset is empty.
    Gemini,
    /// goose: `$VAR`, `${VAR}`.
    Goose,
    /// Cursor: `${env:VAR}`, `${userHome}`, `${workspaceFolder}`,
    /// `${workspaceFolderBasename}`, `${pathSeparator}`, `${/}`.
    Cursor,
    /// VS Code: Cursor's set plus `${input:id}`.
    VsCode,
    /// Roo Code: `${env:VAR}`, `${workspaceFolder}`, `${workspaceFolderBasename}`.
    Roo,
    /// Windsurf: `${env:VAR}`, `${file:/path}`.
    Windsurf,
    /// opencode: `{env:VAR}`, `{file:path}`.
    Opencode,
    /// No variables at all (Codex, Claude Desktop, Zed, Cline, Continue).
    Literal,
}

impl Syntax {
    /// The syntax of a provider's files (the `provider` of a [`SourceMeta`]).
    pub fn of_provider(provider: &str) -> Syntax {
        match provider {
            "switchboard" => Syntax::Switchboard,
            "claude-code" | "copilot" | "jetbrains" => Syntax::ClaudeCode,
            "gemini" => Syntax::Gemini,
            "goose" => Syntax::Goose,
            "cursor" => Syntax::Cursor,
            "vscode" => Syntax::VsCode,
            "roo" => Syntax::Roo,
            "windsurf" => Syntax::Windsurf,
            "opencode" => Syntax::Opencode,
            _ => Syntax::Literal,
        }
    }

    /// Whether the client reads `envFile` (VS Code, Cursor; Continue's JSON files).
    fn has_env_file(self) -> bool {
        matches!(self, Syntax::VsCode | Syntax::Cursor)
    }
}

/// What the shell supplies for translating one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterpolationContext {
    /// The environment the servers will see (for `${env:VAR}`, and to tell which variables
    /// are unset).
    pub env: BTreeMap<String, String>,
    /// The project (workspace) directory: `${workspaceFolder}`, and what a relative `cwd` or
    /// `envFile` is relative to.
    pub workspace: Option<String>,
    /// The user's home directory: `${userHome}`, and `~` in an opencode `{file:~/…}`.
    pub home: Option<String>,
    /// Answers to VS Code `${input:id}` prompts, by id.
    pub inputs: BTreeMap<String, String>,
    /// The text of each file named by `envFile` or `${file:…}`, by absolute path, or why it
    /// could not be read. A file not here yet is listed in [`Interpolated::files_needed`].
    pub files: BTreeMap<String, Result<String, String>>,
    /// Variables particular files define besides the environment, by the file's path (a
    /// Claude Code plugin's `${CLAUDE_PLUGIN_ROOT}`, `${CLAUDE_PLUGIN_DATA}`,
    /// `${CLAUDE_PROJECT_DIR}`): replaced by their value as the file is read.
    pub file_vars: BTreeMap<String, BTreeMap<String, String>>,
}

/// A VS Code `inputs` entry: a value a person is asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InputSpec {
    /// What `${input:<id>}` names.
    pub id: String,
    /// `promptString`, `pickString` or `command`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The prompt shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The value when the person just presses Enter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Do not echo what is typed.
    #[serde(default)]
    pub password: bool,
    /// The choices of a `pickString`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// Something about a server's config that is not applied as written. Not an error: the
/// server still runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "warning", rename_all = "snake_case")]
pub enum WarningKind {
    /// A variable is unset or empty: the value it is in expands without it.
    EmptyVariable {
        /// The field (`env.API_KEY`, `args[2]`, `url`, ...).
        field: String,
        /// The variable.
        variable: String,
    },
    /// A variable is unset and the client keeps such a reference as written (Claude Code):
    /// so does Switchboard.
    KeptLiteral {
        /// The field.
        field: String,
        /// The variable.
        variable: String,
    },
    /// A reference this client's syntax does not define (or Switchboard cannot resolve):
    /// kept as written.
    UnsupportedVariable {
        /// The field.
        field: String,
        /// The reference as written.
        text: String,
    },
    /// A field Switchboard reads but does not apply.
    IgnoredField {
        /// The field's name.
        field: String,
    },
}

/// A [`WarningKind`] about one server of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigWarning {
    /// The server's name.
    pub server: String,
    /// The file.
    pub source: SourceMeta,
    /// What is not applied.
    #[serde(flatten)]
    pub kind: WarningKind,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let server = &self.server;
        match &self.kind {
            WarningKind::EmptyVariable { field, variable } => write!(
                f,
                "server \"{server}\": {field}: ${{{variable}}} is unset or empty, so it expands to nothing"
            ),
            WarningKind::KeptLiteral { field, variable } => write!(
                f,
                "server \"{server}\": {field}: ${{{variable}}} is unset and kept as written"
            ),
            WarningKind::UnsupportedVariable { field, text } => write!(
                f,
                "server \"{server}\": {field}: {text} is not a variable this file's client defines; kept as written"
            ),
            WarningKind::IgnoredField { field } => {
                write!(f, "server \"{server}\": \"{field}\" is not applied")
            }
        }
    }
}

/// One file's servers in Switchboard's syntax, with what the translation found.
#[derive(Debug, Clone, PartialEq)]
pub struct Interpolated {
    /// The servers, translated; entries that cannot be (an unanswered `${input:id}`, an
    /// unreadable `envFile`) are errors of the source.
    pub source: Source,
    /// Everything not applied as written.
    pub warnings: Vec<ConfigWarning>,
    /// Files to read (absolute paths) before translating again: they are not in
    /// [`InterpolationContext::files`] yet.
    pub files_needed: Vec<String>,
    /// `${input:id}` references without an answer, with their `inputs` entry (a bare id when
    /// the document declares none).
    pub inputs_needed: Vec<InputSpec>,
    /// Values the manager's variable map must hold for the translated configs: `input:<id>`
    /// answers and `file:<path>` contents.
    pub variables: BTreeMap<String, String>,
}

/// Fields other helpers of the config read (credentials and OAuth): not reported here.
const CREDENTIAL_FIELDS: &[&str] = &[
    "oauth",
    "headersHelper",
    "bearer_token_env_var",
    "bearer_token",
    "env_http_headers",
    "scopes",
    "oauth_resource",
    "authProviderType",
    "targetAudience",
    "targetServiceAccount",
    "auth",
    "apiKey",
];

/// Translate one parsed file into Switchboard's syntax (see the module documentation).
/// `meta.provider` decides the syntax; `!command` values outside Switchboard's own files are
/// kept as text afterwards ([`Source::from_document`]).
pub fn interpolate(
    meta: SourceMeta,
    doc: ParsedDocument,
    ctx: &InterpolationContext,
) -> Interpolated {
    let syntax = Syntax::of_provider(&meta.provider);
    let dir = parent_dir(&meta.path);
    // A Gemini CLI extension's manifest also knows its own directory and the workspace.
    let extension_dir = (syntax == Syntax::Gemini && meta.path.ends_with("/gemini-extension.json"))
        .then(|| dir.clone())
        .flatten();
    let mut warnings = Vec::new();
    let mut files_needed = BTreeSet::new();
    let mut inputs_needed = BTreeMap::new();
    let mut variables = BTreeMap::new();
    let mut servers = Vec::new();
    let mut errors = doc.errors;
    for (name, config) in doc.servers {
        let mut t = Translator {
            syntax,
            ctx,
            config_dir: dir.clone(),
            extension_dir: extension_dir.clone(),
            file_vars: ctx.file_vars.get(&meta.path),
            found: Vec::new(),
            errors: Vec::new(),
            files: BTreeSet::new(),
            inputs: BTreeSet::new(),
            variables: BTreeMap::new(),
        };
        let mut config = t.config(config);
        for kind in t.found {
            warnings.push(ConfigWarning {
                server: name.clone(),
                source: meta.clone(),
                kind,
            });
        }
        files_needed.extend(t.files);
        for id in &t.inputs {
            let spec = doc.inputs.iter().find(|i| &i.id == id).cloned();
            inputs_needed.insert(
                id.clone(),
                spec.unwrap_or_else(|| InputSpec {
                    id: id.clone(),
                    ..InputSpec::default()
                }),
            );
        }
        if let Some(message) = t.errors.into_iter().next() {
            errors.push(ConfigError::server(&name, message));
            continue;
        }
        config.values = super::ReadValues(t.variables.clone());
        variables.extend(t.variables);
        servers.push((name, config));
    }
    let doc = ParsedDocument {
        servers,
        errors,
        inputs: doc.inputs,
    };
    Interpolated {
        source: Source::from_document(meta, doc),
        warnings,
        files_needed: files_needed.into_iter().collect(),
        inputs_needed: inputs_needed.into_values().collect(),
        variables,
    }
}

fn parent_dir(path: &str) -> Option<String> {
    let normalized = path.trim_end_matches('/');
    normalized
        .rfind('/')
        .map(|i| if i == 0 { "/" } else { &normalized[..i] }.to_string())
}

fn is_absolute(path: &str) -> bool {
    path.starts_with('/') || path.as_bytes().get(1) == Some(&b':')
}

fn join(dir: &str, rel: &str) -> String {
    let rel = rel.strip_prefix("./").unwrap_or(rel);
    if dir.ends_with('/') {
        format!("{dir}{rel}")
    } else {
        format!("{dir}/{rel}")
    }
}

fn valid_var(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

struct Translator<'a> {
    syntax: Syntax,
    ctx: &'a InterpolationContext,
    /// The directory of the file being read (opencode's `{file:…}` is relative to it).
    config_dir: Option<String>,
    /// A Gemini CLI extension's directory (`${extensionPath}`), when the file is its manifest.
    extension_dir: Option<String>,
    /// The variables this file defines ([`InterpolationContext::file_vars`]).
    file_vars: Option<&'a BTreeMap<String, String>>,
    found: Vec<WarningKind>,
    errors: Vec<String>,
    files: BTreeSet<String>,
    inputs: BTreeSet<String>,
    variables: BTreeMap<String, String>,
}

impl Translator<'_> {
    fn config(&mut self, mut c: ServerConfig) -> ServerConfig {
        c.command = c.command.map(|s| self.text("command", &s));
        c.args = (c.args.iter().enumerate())
            .map(|(i, a)| self.text(&format!("args[{i}]"), a))
            .collect();
        c.env = (c.env.iter())
            .map(|(k, v)| (k.clone(), self.text(&format!("env.{k}"), v)))
            .collect();
        c.url = c.url.map(|s| self.text("url", &s));
        c.headers = (c.headers.iter())
            .map(|(k, v)| (k.clone(), self.text(&format!("headers.{k}"), v)))
            .collect();
        c.cwd = c.cwd.map(|s| {
            let cwd = self.text("cwd", &s);
            match &self.ctx.workspace {
                // A relative working directory is the project's, as the client has it.
                Some(ws) if self.syntax != Syntax::Switchboard && !is_absolute(&cwd) => {
                    join(&literal(ws), &cwd)
                }
                _ => cwd,
            }
        });
        if let Some(value) = c.extra.remove("env_vars") {
            self.env_vars(&mut c, value);
        }
        if let Some(value) = c.extra.remove("envFile") {
            if self.syntax.has_env_file() {
                self.env_file(&mut c, value);
            } else {
                self.found.push(WarningKind::IgnoredField {
                    field: "envFile".into(),
                });
            }
        }
        for field in c.extra.keys() {
            if !CREDENTIAL_FIELDS.contains(&field.as_str()) {
                self.found.push(WarningKind::IgnoredField {
                    field: field.clone(),
                });
            }
        }
        c
    }

    /// Codex `env_vars`: names forwarded from the environment (strings, or `{ name, source }`
    /// where only `local` is meaningful here). An unset one is not forwarded.
    fn env_vars(&mut self, c: &mut ServerConfig, value: Value) {
        let Value::Array(items) = value else {
            self.errors
                .push("\"env_vars\" must be an array of variable names".into());
            return;
        };
        for item in items {
            let name = match &item {
                Value::String(s) => s.clone(),
                Value::Object(o) => {
                    if o.get("source").and_then(Value::as_str) == Some("remote") {
                        self.found.push(WarningKind::IgnoredField {
                            field: "env_vars (source = \"remote\")".into(),
                        });
                        continue;
                    }
                    match o.get("name").and_then(Value::as_str) {
                        Some(n) => n.to_string(),
                        None => {
                            self.errors.push("an \"env_vars\" entry has no name".into());
                            return;
                        }
                    }
                }
                _ => {
                    self.errors
                        .push("\"env_vars\" must be an array of variable names".into());
                    return;
                }
            };
            if !valid_var(&name) {
                self.errors
                    .push(format!("\"env_vars\": {name:?} is not a variable name"));
                return;
            }
            if c.env.contains_key(&name) {
                continue;
            }
            match self.ctx.env.get(&name) {
                Some(v) if !v.is_empty() => {
                    c.env.insert(name.clone(), format!("${{{name}}}"));
                }
                _ => self.found.push(WarningKind::EmptyVariable {
                    field: "env_vars".into(),
                    variable: name,
                }),
            }
        }
    }

    /// `envFile`: `KEY=value` lines under the config's own `env` (which wins).
    fn env_file(&mut self, c: &mut ServerConfig, value: Value) {
        let Value::String(path) = value else {
            self.errors.push("\"envFile\" must be a string".into());
            return;
        };
        // The path in the client's syntax, then as plain text.
        let path = self.text("envFile", &path);
        let path = super::expand_vars(&path, &self.ctx.env);
        let path = match (&self.ctx.workspace, is_absolute(&path)) {
            (Some(ws), false) => join(ws, &path),
            _ => path,
        };
        match self.ctx.files.get(&path) {
            None => {
                self.files.insert(path);
            }
            Some(Err(e)) => self
                .errors
                .push(format!("envFile \"{path}\" cannot be read: {e}")),
            Some(Ok(text)) => {
                for (k, v) in parse_env_file(text) {
                    c.env.entry(k).or_insert_with(|| literal(&v));
                }
            }
        }
    }

    /// One value, translated.
    fn text(&mut self, field: &str, s: &str) -> String {
        if self.syntax == Syntax::Switchboard {
            self.check_own(field, s);
            return s.to_string();
        }
        let bare = matches!(self.syntax, Syntax::Gemini | Syntax::Goose);
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            let rest = &s[i..];
            if let Some(after) = rest.strip_prefix("${") {
                match after.find('}') {
                    Some(end) => {
                        let whole = &rest[..end + 3];
                        let piece = self.braced(field, &after[..end], whole);
                        out.push_str(&piece);
                        i += end + 3;
                    }
                    None => {
                        out.push_str(&literal(rest));
                        i = s.len();
                    }
                }
                continue;
            }
            if self.syntax == Syntax::Opencode && rest.starts_with('{') {
                if let Some(end) = rest.find('}') {
                    let inner = &rest[1..end];
                    if let Some(name) = inner.strip_prefix("env:") {
                        let piece = self.var(field, name.trim(), None);
                        out.push_str(&piece);
                        i += end + 1;
                        continue;
                    }
                    if let Some(path) = inner.strip_prefix("file:") {
                        let piece = self.file(field, path.trim());
                        out.push_str(&piece);
                        i += end + 1;
                        continue;
                    }
                }
            }
            if bare && rest.starts_with('$') {
                let name: String = rest[1..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if valid_var(&name) {
                    let piece = self.var(field, &name, None);
                    out.push_str(&piece);
                    i += 1 + name.len();
                    continue;
                }
            }
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
        out
    }

    /// `${inner}` as written (`whole`), in this file's syntax.
    fn braced(&mut self, field: &str, inner: &str, whole: &str) -> String {
        let editor = matches!(
            self.syntax,
            Syntax::Cursor | Syntax::VsCode | Syntax::Roo | Syntax::Windsurf
        );
        if let Some(ext) = &self.extension_dir {
            match inner {
                "extensionPath" => return literal(ext),
                "workspacePath" => {
                    if let Some(ws) = &self.ctx.workspace {
                        return literal(ws);
                    }
                }
                "/" | "pathSeparator" => return "/".into(),
                _ => {}
            }
        }
        match self.syntax {
            Syntax::ClaudeCode | Syntax::Gemini | Syntax::Goose => {
                let (name, default) = split_default(inner);
                if valid_var(name) {
                    return self.var(field, name, default);
                }
            }
            _ if editor => {
                if let Some(name) = inner.strip_prefix("env:") {
                    if valid_var(name) {
                        return self.var(field, name, None);
                    }
                }
                let workspace_vars = self.syntax != Syntax::Windsurf;
                match inner {
                    "workspaceFolder" if workspace_vars => {
                        if let Some(ws) = &self.ctx.workspace {
                            return literal(ws);
                        }
                    }
                    "workspaceFolderBasename" if workspace_vars => {
                        if let Some(ws) = &self.ctx.workspace {
                            let base = ws.trim_end_matches('/').rsplit('/').next().unwrap_or("");
                            return literal(base);
                        }
                    }
                    "userHome" if matches!(self.syntax, Syntax::Cursor | Syntax::VsCode) => {
                        if let Some(home) = &self.ctx.home {
                            return literal(home);
                        }
                    }
                    "pathSeparator" | "/" if self.syntax != Syntax::Windsurf => {
                        return "/".into();
                    }
                    _ => {}
                }
                if let Some(id) = inner.strip_prefix("input:") {
                    if self.syntax == Syntax::VsCode {
                        if self.ctx.inputs.contains_key(id) {
                            let key = format!("input:{id}");
                            self.variables
                                .insert(key.clone(), self.ctx.inputs[id].clone());
                            return format!("${{{key}}}");
                        }
                        self.inputs.insert(id.to_string());
                        self.errors.push(format!(
                            "{field} needs the value of ${{input:{id}}}, asked of a person: run \
                             switchboard on a terminal to answer it"
                        ));
                        return String::new();
                    }
                }
                if let Some(path) = inner.strip_prefix("file:") {
                    if self.syntax == Syntax::Windsurf {
                        return self.file(field, path.trim());
                    }
                }
            }
            _ => {}
        }
        self.found.push(WarningKind::UnsupportedVariable {
            field: field.to_string(),
            text: whole.to_string(),
        });
        literal(whole)
    }

    /// An environment variable reference, in Switchboard's syntax.
    fn var(&mut self, field: &str, name: &str, default: Option<&str>) -> String {
        if let Some(value) = self.file_vars.and_then(|vars| vars.get(name)) {
            return literal(value);
        }
        let set = self.ctx.env.get(name).is_some_and(|v| !v.is_empty());
        if let Some(d) = default {
            let d = literal(d);
            return format!("${{{name}:-{d}}}");
        }
        if set {
            return format!("${{{name}}}");
        }
        // Claude Code keeps only an unset one as written; a set, empty one is empty.
        if self.syntax == Syntax::ClaudeCode && !self.ctx.env.contains_key(name) {
            self.found.push(WarningKind::KeptLiteral {
                field: field.to_string(),
                variable: name.to_string(),
            });
            return format!("$${{{name}}}");
        }
        self.found.push(WarningKind::EmptyVariable {
            field: field.to_string(),
            variable: name.to_string(),
        });
        format!("${{{name}}}")
    }

    /// A file's trimmed text (Windsurf `${file:/path}`, opencode `{file:path}`), as the
    /// variable `file:<absolute path>`.
    fn file(&mut self, field: &str, path: &str) -> String {
        let path = match (path.strip_prefix("~/"), &self.ctx.home, &self.config_dir) {
            (Some(rest), Some(home), _) => join(home, rest),
            (None, _, Some(dir)) if !is_absolute(path) => join(dir, path),
            _ => path.to_string(),
        };
        let key = format!("file:{path}");
        match self.ctx.files.get(&path) {
            None => {
                self.files.insert(path);
            }
            Some(Err(e)) => self
                .errors
                .push(format!("{field}: the file \"{path}\" cannot be read: {e}")),
            Some(Ok(text)) => {
                let value = text.trim().to_string();
                if value.is_empty() {
                    self.found.push(WarningKind::EmptyVariable {
                        field: field.to_string(),
                        variable: key.clone(),
                    });
                }
                self.variables.insert(key.clone(), value);
            }
        }
        format!("${{{key}}}")
    }

    /// Switchboard's own syntax: only the warnings (unset variables without a default).
    fn check_own(&mut self, field: &str, s: &str) {
        let mut rest = s;
        while let Some(i) = rest.find('$') {
            let at = &rest[i..];
            if let Some(after) = at.strip_prefix("$${") {
                rest = after;
            } else if let Some(after) = at.strip_prefix("${") {
                let Some(end) = after.find('}') else { return };
                let (name, default) = split_default(&after[..end]);
                if default.is_none() && self.ctx.env.get(name).is_none_or(|v| v.is_empty()) {
                    self.found.push(WarningKind::EmptyVariable {
                        field: field.to_string(),
                        variable: name.to_string(),
                    });
                }
                rest = &after[end + 1..];
            } else {
                rest = &at[1..];
            }
        }
    }
}

/// `KEY=value` lines of an env file (`#` comments, blank lines, an `export ` prefix, single
/// or double quotes around the value). Lines that are none of these are skipped.
pub fn parse_env_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if !valid_var(key) {
            continue;
        }
        let value = value.trim();
        let value = if value.len() >= 2
            && ((value.starts_with('"') && value.ends_with('"'))
                || (value.starts_with('\'') && value.ends_with('\'')))
        {
            let inner = &value[1..value.len() - 1];
            if value.starts_with('"') {
                inner.replace("\\n", "\n").replace("\\\"", "\"")
            } else {
                inner.to_string()
            }
        } else {
            // An unquoted value ends at a comment.
            match value.find(" #") {
                Some(i) => value[..i].trim_end().to_string(),
                None => value.to_string(),
            }
        };
        out.push((key.to_string(), value));
    }
    out
}
