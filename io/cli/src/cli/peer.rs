//! What the command line answers when a server asks the client for something: elicitation
//! (`--elicit decline|accept-defaults`, else an interactive form on the terminal), sampling
//! (`--sampling-command CMD`, else not offered) and roots (the project directory).

use super::term::{line_safe, terminal_safe};
use super::Fatal;
use clap::ValueEnum;
use serde_json::{Map, Value};
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard::core::protocol::{enum_values, property_default};
use switchboard::{
    form_defaults, Builder, ElicitationHandler, PeerAnswer, PeerFuture, PeerRequest,
    PeerRequestKind, Root, SamplingHandler,
};

/// How elicitation requests are answered without asking anyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Elicit {
    /// Decline every request.
    Decline,
    /// Accept a form with the defaults its schema gives (fields without one are left out);
    /// decline URL-mode requests (nobody can open the URL).
    AcceptDefaults,
}

/// The most bytes of a sampling command's stdout read; more fails the request.
const MAX_SAMPLING_OUTPUT: usize = 1024 * 1024;

/// How long a sampling command may run before it is killed.
const SAMPLING_TIMEOUT: Duration = Duration::from_secs(120);

/// Install the handlers and roots the flags ask for.
pub(super) fn install(
    mut builder: Builder,
    elicit: Option<Elicit>,
    sampling_command: Option<&str>,
    project: &Path,
) -> Result<Builder, Fatal> {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let handler: Option<Arc<dyn ElicitationHandler>> = match elicit {
        Some(mode) => Some(Arc::new(Unattended(mode))),
        None if interactive => Some(Arc::new(Interactive {
            lock: Arc::new(Mutex::new(())),
        })),
        None => None,
    };
    if let Some(h) = handler {
        builder = builder.elicitation_handler(h);
    }
    if let Some(cmd) = sampling_command {
        if cmd.trim().is_empty() {
            return Err(Fatal::usage("--sampling-command is empty"));
        }
        builder = builder.sampling_handler(Arc::new(SamplingCommand {
            command: cmd.to_string(),
        }));
    }
    Ok(builder.roots(project_roots(project)))
}

/// The roots the CLI offers servers: the project directory.
pub(super) fn project_roots(project: &Path) -> Vec<Root> {
    let name = project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    vec![Root {
        uri: file_uri(project),
        name,
    }]
}

/// A `file://` URI for an absolute directory, its bytes outside the unreserved set and `/`
/// percent-encoded.
pub(super) fn file_uri(dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut uri = String::from("file://");
    for &b in dir.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

struct Unattended(Elicit);

impl ElicitationHandler for Unattended {
    fn elicit(&self, request: PeerRequest) -> PeerFuture {
        let answer = match (self.0, &request.kind) {
            (
                Elicit::AcceptDefaults,
                PeerRequestKind::ElicitForm {
                    requested_schema, ..
                },
            ) => PeerAnswer::Accept {
                content: Some(form_defaults(requested_schema)),
            },
            _ => PeerAnswer::Decline,
        };
        Box::pin(async move { answer })
    }
}

/// Asks on the terminal: the form's fields one by one on stderr, read from the terminal.
/// One form at a time.
struct Interactive {
    lock: Arc<Mutex<()>>,
}

impl ElicitationHandler for Interactive {
    fn elicit(&self, request: PeerRequest) -> PeerFuture {
        let lock = self.lock.clone();
        Box::pin(blocking::unblock(move || {
            let _one = lock.lock().unwrap_or_else(|e| e.into_inner());
            let tty = std::fs::File::open("/dev/tty").map(std::io::BufReader::new);
            match tty {
                Ok(mut input) => ask(&request, &mut input).unwrap_or(PeerAnswer::Cancel),
                Err(_) => PeerAnswer::Decline,
            }
        }))
    }
}

/// One line from the terminal, trimmed; `None` at end of input.
fn read_line(input: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_string()),
    }
}

/// Run one elicitation on the terminal; `None` when the input ended (cancelled).
pub(super) fn ask(request: &PeerRequest, input: &mut impl BufRead) -> Option<PeerAnswer> {
    let mut err = std::io::stderr().lock();
    match &request.kind {
        PeerRequestKind::ElicitUrl { message, url, .. } => {
            let _ = writeln!(
                err,
                "\n{} asks you to open a URL: {}",
                line_safe(&request.server),
                terminal_safe(message)
            );
            let _ = writeln!(err, "  {}", line_safe(url));
            let _ = write!(err, "Press Enter once done, or type n to decline: ");
            let _ = err.flush();
            let line = read_line(input)?;
            Some(if line.eq_ignore_ascii_case("n") {
                PeerAnswer::Decline
            } else {
                PeerAnswer::Accept { content: None }
            })
        }
        PeerRequestKind::ElicitForm {
            message,
            requested_schema,
        } => {
            let _ = writeln!(
                err,
                "\n{} asks: {}",
                line_safe(&request.server),
                terminal_safe(message)
            );
            let _ = write!(err, "Answer (y), decline (n) or cancel (c)? [y] ");
            let _ = err.flush();
            match read_line(input)?.to_ascii_lowercase().as_str() {
                "" | "y" | "yes" => {}
                "n" | "no" => return Some(PeerAnswer::Decline),
                _ => return Some(PeerAnswer::Cancel),
            }
            let required: Vec<&str> = requested_schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut content = Map::new();
            let empty = Map::new();
            let props = requested_schema
                .get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            for (name, prop) in props {
                let need = required.contains(&name.as_str());
                if let Some(v) = ask_field(&mut err, input, name, prop, need)? {
                    content.insert(name.clone(), v);
                }
            }
            Some(PeerAnswer::Accept {
                content: Some(content),
            })
        }
        PeerRequestKind::Sampling { .. } => Some(PeerAnswer::Decline),
        _ => Some(PeerAnswer::Decline),
    }
}

/// Ask for one field until the answer fits its type; `Ok(None)`: left empty (no default).
fn ask_field(
    err: &mut impl Write,
    input: &mut impl BufRead,
    name: &str,
    prop: &Value,
    required: bool,
) -> Option<Option<Value>> {
    let ty = prop.get("type").and_then(Value::as_str).unwrap_or("string");
    let title = prop.get("title").and_then(Value::as_str).unwrap_or(name);
    let default = property_default(prop);
    let choices = enum_values(prop);
    loop {
        let mut hint = String::new();
        if let Some(c) = &choices {
            hint.push_str(&format!(" ({})", c.join("/")));
        } else if ty == "boolean" {
            hint.push_str(" (y/n)");
        }
        if let Some(d) = &default {
            hint.push_str(&format!(" [{d}]"));
        } else if required {
            hint.push_str(" (required)");
        }
        let about = prop
            .get("description")
            .and_then(Value::as_str)
            .map_or(String::new(), |d| format!(" - {d}"));
        let _ = write!(err, "  {}: ", line_safe(&format!("{title}{about}{hint}")));
        let _ = err.flush();
        let line = read_line(input)?;
        if line.is_empty() {
            match &default {
                Some(d) => return Some(Some(d.clone())),
                None if !required => return Some(None),
                None => continue,
            }
        }
        let parsed = match ty {
            "boolean" => match line.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" => Some(Value::Bool(true)),
                "n" | "no" | "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "integer" => line.parse::<i64>().ok().map(Value::from),
            "number" => line
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
            "array" => {
                let items: Vec<Value> = line
                    .split(',')
                    .map(|s| Value::String(s.trim().to_string()))
                    .collect();
                Some(Value::Array(items))
            }
            _ => match &choices {
                Some(c) if !c.contains(&line.as_str()) => None,
                _ => Some(Value::String(line)),
            },
        };
        match parsed {
            Some(v) => return Some(Some(v)),
            None => {
                let _ = writeln!(err, "  not a valid {ty}; try again");
            }
        }
    }
}

/// Runs a shell command per sampling request: the request's params as JSON on its stdin,
/// its stdout (a JSON `CreateMessageResult`) the answer.
struct SamplingCommand {
    command: String,
}

/// Kills the command's process group if its request is dropped before it finished.
struct KillOnDrop {
    pgid: i32,
    done: Arc<AtomicBool>,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.done.load(Ordering::SeqCst) {
            // SAFETY: a plain syscall on a process group this command started.
            unsafe {
                libc::kill(-self.pgid, libc::SIGKILL);
            }
        }
    }
}

impl SamplingHandler for SamplingCommand {
    fn create_message(&self, request: PeerRequest) -> PeerFuture {
        let command = self.command.clone();
        Box::pin(async move {
            let PeerRequestKind::Sampling { params } = request.kind else {
                return PeerAnswer::Decline;
            };
            match run_sampling(&command, &params).await {
                Ok(result) => PeerAnswer::Result { result },
                Err(message) => PeerAnswer::Error {
                    code: switchboard::core::protocol::codes::INTERNAL_ERROR,
                    message,
                },
            }
        })
    }
}

async fn run_sampling(command: &str, params: &Value) -> Result<Value, String> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // Started by the library's spawner: it dies with us, and the orphan sweep spares it.
    let mut child = switchboard::process::spawn(cmd)
        .map_err(|e| format!("cannot run the sampling command: {e}"))?;
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let _guard = KillOnDrop {
        pgid: child.id() as i32,
        done: done.clone(),
    };
    let input = serde_json::to_vec(params).unwrap_or_default();
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let outcome = blocking::unblock(move || {
        // The input is small; a command that does not read it gets a broken pipe.
        if let Some(mut s) = stdin.take() {
            let _ = s.write_all(&input);
        }
        let reader = std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(s) = stdout.take() {
                let _ = s.take(MAX_SAMPLING_OUTPUT as u64 + 1).read_to_end(&mut out);
            }
            out
        });
        let deadline = Instant::now() + SAMPLING_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) if Instant::now() >= deadline => {
                    // SAFETY: a plain syscall on the group this command started.
                    unsafe {
                        libc::kill(-(child.id() as i32), libc::SIGKILL);
                    }
                    let _ = child.wait();
                    break Err(format!(
                        "the sampling command did not finish within {} s",
                        SAMPLING_TIMEOUT.as_secs()
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => break Err(format!("waiting for the sampling command: {e}")),
            }
        };
        switchboard::process::reaped(pid);
        let out = reader.join().unwrap_or_default();
        status.map(|s| (s, out))
    })
    .await;
    done.store(true, Ordering::SeqCst);
    let (status, out) = outcome?;
    if !status.success() {
        return Err(format!("the sampling command failed ({status})"));
    }
    if out.len() > MAX_SAMPLING_OUTPUT {
        return Err(format!(
            "the sampling command wrote more than {MAX_SAMPLING_OUTPUT} bytes"
        ));
    }
    let v: Value = serde_json::from_slice(&out)
        .map_err(|e| format!("the sampling command's output is not JSON: {e}"))?;
    if !v.is_object() {
        return Err("the sampling command's output is not a JSON object".into());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> PeerRequest {
        PeerRequest {
            server: "s".into(),
            kind: PeerRequestKind::ElicitForm {
                message: "m".into(),
                requested_schema: schema,
            },
            input: None,
        }
    }

    fn answer(request: &PeerRequest, typed: &str) -> Option<PeerAnswer> {
        ask(
            request,
            &mut std::io::Cursor::new(typed.as_bytes().to_vec()),
        )
    }

    #[test]
    fn the_terminal_form_takes_typed_values_defaults_and_retries() {
        let request = form(
            json!({"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer", "default": 30},
                "ok": {"type": "boolean"},
                "color": {"type": "string", "enum": ["red", "blue"]}
            }}),
        );
        // Properties in the schema's order: age, color, name, ok. A bad integer and an
        // unknown enum member are asked again; an empty required field too.
        let typed = "y\nabc\n\ngreen\nblue\n\nAda\nyes\n";
        let mut content = Map::new();
        content.insert("age".into(), json!(30));
        content.insert("color".into(), json!("blue"));
        content.insert("name".into(), json!("Ada"));
        content.insert("ok".into(), json!(true));
        assert_eq!(
            answer(&request, typed),
            Some(PeerAnswer::Accept {
                content: Some(content)
            })
        );
        assert_eq!(answer(&request, "n\n"), Some(PeerAnswer::Decline));
        assert_eq!(answer(&request, "c\n"), Some(PeerAnswer::Cancel));
        // The input ended half way: nothing is sent as if the user had answered.
        assert_eq!(answer(&request, "y\n12\n"), None);
    }

    #[test]
    fn a_url_request_is_accepted_with_enter_or_declined() {
        let request = PeerRequest {
            server: "s".into(),
            kind: PeerRequestKind::ElicitUrl {
                message: "m".into(),
                url: "https://example.com".into(),
                elicitation_id: "e".into(),
            },
            input: None,
        };
        assert_eq!(
            answer(&request, "\n"),
            Some(PeerAnswer::Accept { content: None })
        );
        assert_eq!(answer(&request, "n\n"), Some(PeerAnswer::Decline));
    }

    #[test]
    fn roots_are_file_uris_with_unsafe_bytes_escaped() {
        assert_eq!(
            file_uri(Path::new("/home/me/my project%")),
            "file:///home/me/my%20project%25"
        );
    }
}
