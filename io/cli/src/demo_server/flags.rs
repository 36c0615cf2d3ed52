//! mcp-demo-server's command line: `--help`'s text and the flags it documents, parsed by hand
//! (no argument-parser dependency, so the demo server stays a second, independent program).

const HELP: &str = "\
mcp-demo-server: a small stdio MCP server (protocol 2025-11-25) for tests, demos and benchmarks.

Speaks newline-delimited JSON-RPC 2.0 on stdin/stdout; logs go to stderr. Exits 0 on stdin EOF.

Tools: echo {text}, add {a, b}, sleep {ms} (honours notifications/cancelled: no response).

USAGE: mcp-demo-server [FLAGS]

FLAGS:
  --name NAME                serverInfo.name (default: mcp-demo-server)
  --tools N                  add N generated echo-like tools tool_0 .. tool_{N-1}
  --page-size N              paginate tools/list, N tools per page, with an opaque nextCursor
  --init-delay-ms N          wait N ms before answering initialize
  --list-delay-ms N          wait N ms before answering tools/list
  --call-delay-ms N          wait N ms before running each tools/call (cancellable)
  --fail-init                answer initialize with a JSON-RPC error
  --fail-list                answer tools/list with a JSON-RPC error (after a good initialize)
  --hang-init                never answer initialize (ping still works; EOF still exits 0)
  --crash-after-ms N         exit(1) N ms after start, with a message on stderr
  --stall-after-ms N         after N ms answer nothing more and ignore stdin EOF
                             (stdin/stdout stay open; only a signal ends the process)
  --garbage-stdout           print non-JSON lines on stdout at start and before each message
  --oversized-frame          answer tools/list with one line larger than 16 MiB
  --ignore-sigterm           ignore SIGTERM (only SIGKILL ends the process)
  --spawn-grandchild         spawn `sleep 3600` in the same process group and keep it; its pid
                             is logged on stderr as `grandchild pid=<pid>`
  --list-changed-after-ms N  N ms after notifications/initialized, add tool `late_tool` and
                             send notifications/tools/list_changed
  --remove-on-change NAME    with --list-changed-after-ms: also withdraw tool NAME then
  --progress-every-ms N      `sleep` sends notifications/progress every N ms when the call's
                             `_meta.progressToken` is set
  --crash-after-list-ms N    exit(1) N ms after answering the first tools/list (a crash of
                             an established connection, however slow the start-up)
  --fail-init-once PATH      if PATH does not exist: create it and fail initialize; else
                             start normally (the first start fails, later ones succeed)
  --garbage-lines N          print N non-JSON lines on stdout at start (a client gives up
                             after 100 in a row)
  --stats-tool               add tool `stats`: counters of what the server received
                             (cancellations, progress sent) as JSON text
  --catalog                  offer resources (demo://readme, demo://logo, demo://numbers), the
                             template demo://greeting/{name}, prompts greet and summary,
                             completion, subscriptions and logging/setLevel
  --bad-output MODE          `add` breaks its outputSchema: `mismatch` returns the sum as a
                             string in structuredContent, `missing` returns none
  -h, --help                 print this help and exit
";

#[derive(Debug, Default, Clone)]
pub(super) struct Flags {
    pub(super) name: Option<String>,
    pub(super) tools: usize,
    pub(super) page_size: Option<usize>,
    pub(super) init_delay_ms: u64,
    pub(super) list_delay_ms: u64,
    pub(super) call_delay_ms: u64,
    pub(super) fail_init: bool,
    pub(super) fail_list: bool,
    pub(super) hang_init: bool,
    pub(super) crash_after_ms: Option<u64>,
    pub(super) stall_after_ms: Option<u64>,
    pub(super) garbage_stdout: bool,
    pub(super) oversized_frame: bool,
    pub(super) ignore_sigterm: bool,
    pub(super) spawn_grandchild: bool,
    pub(super) list_changed_after_ms: Option<u64>,
    pub(super) remove_on_change: Option<String>,
    pub(super) progress_every_ms: Option<u64>,
    pub(super) crash_after_list_ms: Option<u64>,
    pub(super) fail_init_once: Option<String>,
    pub(super) garbage_lines: usize,
    pub(super) stats_tool: bool,
    pub(super) catalog: bool,
    pub(super) bad_output: Option<BadOutput>,
}

/// How `add` breaks its output schema (`--bad-output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BadOutput {
    /// `structuredContent` with the sum as a string.
    Mismatch,
    /// No `structuredContent`.
    Missing,
}

pub(super) fn parse_flags(args: impl IntoIterator<Item = String>) -> Result<Flags, String> {
    fn number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
        value
            .parse()
            .map_err(|_| format!("{flag}: not a non-negative integer: {value:?}"))
    }
    let mut flags = Flags::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, mut inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || inline.take().or_else(|| args.next());
        match flag.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            "--name" => flags.name = Some(value().ok_or("--name needs a value")?),
            "--tools" => flags.tools = number(&flag, value())?,
            "--page-size" => {
                let n: usize = number(&flag, value())?;
                if n == 0 {
                    return Err("--page-size must be at least 1".into());
                }
                flags.page_size = Some(n);
            }
            "--init-delay-ms" => flags.init_delay_ms = number(&flag, value())?,
            "--list-delay-ms" => flags.list_delay_ms = number(&flag, value())?,
            "--call-delay-ms" => flags.call_delay_ms = number(&flag, value())?,
            "--crash-after-ms" => flags.crash_after_ms = Some(number(&flag, value())?),
            "--stall-after-ms" => flags.stall_after_ms = Some(number(&flag, value())?),
            "--list-changed-after-ms" => {
                flags.list_changed_after_ms = Some(number(&flag, value())?)
            }
            "--remove-on-change" => {
                flags.remove_on_change = Some(value().ok_or("--remove-on-change needs a value")?)
            }
            "--progress-every-ms" => {
                let n: u64 = number(&flag, value())?;
                if n == 0 {
                    return Err("--progress-every-ms must be at least 1".into());
                }
                flags.progress_every_ms = Some(n);
            }
            "--crash-after-list-ms" => flags.crash_after_list_ms = Some(number(&flag, value())?),
            "--fail-init-once" => {
                flags.fail_init_once = Some(value().ok_or("--fail-init-once needs a value")?)
            }
            "--garbage-lines" => flags.garbage_lines = number(&flag, value())?,
            "--stats-tool" => flags.stats_tool = true,
            "--catalog" => flags.catalog = true,
            "--bad-output" => {
                flags.bad_output = match value().as_deref() {
                    Some("mismatch") => Some(BadOutput::Mismatch),
                    Some("missing") => Some(BadOutput::Missing),
                    other => {
                        return Err(format!("--bad-output: mismatch or missing, not {other:?}"))
                    }
                }
            }
            "--fail-init" => flags.fail_init = true,
            "--fail-list" => flags.fail_list = true,
            "--hang-init" => flags.hang_init = true,
            "--garbage-stdout" => flags.garbage_stdout = true,
            "--oversized-frame" => flags.oversized_frame = true,
            "--ignore-sigterm" => flags.ignore_sigterm = true,
            "--spawn-grandchild" => flags.spawn_grandchild = true,
            _ => return Err(format!("unknown argument {arg:?} (see --help)")),
        }
        if inline.is_some() {
            return Err(format!("{flag} takes no value"));
        }
    }
    Ok(flags)
}
