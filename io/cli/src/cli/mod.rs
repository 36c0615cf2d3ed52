//! The `switchboard` command line: `status`, `tools`, `call`, `resources`, `read`, `prompts`,
//! `prompt`, `complete`, `watch` and `demo` over the library API.
//!
//! Every command discovers (or reads `--config` files), connects through a [`Builder`], and
//! shuts everything down before it exits. Human output goes to stdout; progress, logs and
//! errors go to stderr, so `--json` output on stdout is always exactly one JSON object.

mod catalog;
mod config;
mod demo;
mod interrupt;
mod login;
mod output;
mod peer;
mod progress;
mod serve;
mod term;
mod trust;
mod watch;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use futures_lite::future;
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use switchboard::core::config::{ConfigError, DEFAULT_CONNECT_TIMEOUT};
use switchboard::core::manager::HealthPolicy;
use switchboard::core::NamingScheme;
use switchboard::{Builder, Phase, ServerStatus, StartupReport, Switchboard};
use switchboard::{Discovered, DiscoveryOptions};

/// Success; per-server failures are reported, not fatal.
pub const EXIT_OK: u8 = 0;
/// A failed call (an error or a result with `isError`), or `--strict` with a failed server.
pub const EXIT_FAILED: u8 = 1;
/// A usage or config error (bad flags, a config file that does not parse, bad JSON arguments).
pub const EXIT_USAGE: u8 = 2;

const AFTER_HELP: &str = "\
Exit status:
  0    success (a server that fails is reported, not fatal)
  1    a failed call (an error, or a result with isError), or --strict with any server failed
  2    a usage or config error (a config file that does not parse: file, line and column)
  130  interrupted by Ctrl-C (143: SIGTERM); every server was shut down first

Logs go to stderr, filtered by RUST_LOG (e.g. RUST_LOG=switchboard=debug); -v/-vv/-vvv
without RUST_LOG show warn/info/debug. NO_COLOR turns colour off.";

const STATUS_HELP: &str = "\
Exit status:
  0    success, even when servers failed (they are reported in the table)
  1    --strict, and a server failed or a config entry was invalid
  2    a usage or config error (a --config file that does not parse: file, line and column)
  130  interrupted by Ctrl-C (143: SIGTERM); every server was shut down first";

const TOOLS_HELP: &str = "\
Exit status:
  0    success, even when servers failed (their errors follow the list)
  1    --strict, and a server failed or a config entry was invalid
  2    a usage or config error, or --server names no configured server
  130  interrupted by Ctrl-C (143: SIGTERM); every server was shut down first";

const CALL_HELP: &str = "\
Exit status:
  0    the tool ran and its result has no isError
  1    the result has isError (its text is printed), the call failed (the error is on
       stderr), or --strict with any server failed
  2    a usage or config error, or arguments that are not a JSON object
  130  interrupted by Ctrl-C (143: SIGTERM); the call is cancelled, every server shut down";

const OPERATION_HELP: &str = "\
Exit status:
  0    the server answered
  1    the request failed (the error is on stderr), or --strict with any server failed
  2    a usage or config error, or arguments that are not a JSON object
  130  interrupted by Ctrl-C (143: SIGTERM); the request is cancelled, every server shut down";

const DEMO_HELP: &str = "\
Exit status:
  0    every step behaved as narrated and no server process was left running
  1    a step failed or a process was left running (the narration says which)
  130  interrupted by Ctrl-C (143: SIGTERM); every server was shut down first";

const LOGIN_HELP: &str = "\
Exit status:
  0    logged in (logout: the tokens are gone, or there were none)
  1    authorization failed (the error says why)
  2    a usage or config error, or SERVER names no configured HTTP server";
const SERVE_HELP: &str = "\
Exit status:
  0    stdin ended (stdio)
  1    the HTTP address could not be bound, or writing to stdout failed
  2    a usage or config error (a non-loopback --http without a bearer token)
  130  stopped by Ctrl-C (143: SIGTERM); every server was shut down first";

const TRUST_HELP: &str = "\
Approvals are kept in $XDG_DATA_HOME/switchboard/trust.json (else
~/.local/share/switchboard/trust.json), per project directory and server, bound to the
server's config. Claude Code's, Codex's and Gemini CLI's own approvals are honoured too.

Exit status:
  0    done
  2    a usage error: a named server is not a project server awaiting approval (trust) or
       approved (untrust), or the approvals file cannot be read or written";

const WATCH_HELP: &str = "\
Exit status:
  0    stopped after --for-ms
  2    a usage or config error
  130  stopped by Ctrl-C (143: SIGTERM); every server was shut down first";

/// Run many MCP servers: see every server's state and every tool, call tools, or watch the
/// whole lifecycle in `switchboard demo`.
#[derive(Debug, Parser)]
#[command(name = "switchboard", version, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    global: Global,
}

#[derive(Debug, Clone, clap::Args)]
struct Global {
    /// Read servers from this config file instead of discovering them (repeatable; the first
    /// file that names a server wins).
    #[arg(long = "config", value_name = "FILE", global = true)]
    configs: Vec<PathBuf>,
    /// The project directory: where project configs are found and the default working
    /// directory of stdio servers [default: the current directory].
    #[arg(long, value_name = "DIR", global = true)]
    project: Option<PathBuf>,
    /// Ignore project-level config files (they are not even read).
    #[arg(long, global = true)]
    no_project_config: bool,
    /// Start the project's servers without approval, for this run only (for scripts that
    /// vouch for the checkout; a client's own rejection still wins). Without it, a server
    /// from a project file starts only once approved (`switchboard trust`).
    #[arg(long, global = true, conflicts_with = "no_project_config")]
    trust_project: bool,
    /// Keep the tool cache here [default: $XDG_CACHE_HOME/switchboard/tools].
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
    /// No tool cache: nothing read or written, so no deferred tools.
    #[arg(long, global = true, conflicts_with = "cache_dir")]
    no_cache: bool,
    /// The startup gate in milliseconds [default: 250].
    #[arg(long, value_name = "MS", global = true)]
    gate_ms: Option<u64>,
    /// Connect timeout for servers whose config sets none [default: $MCP_TIMEOUT, else
    /// 30000]. Not part of the
    /// tool cache's key, so cached tools stay valid with or without it.
    #[arg(long, value_name = "MS", global = true, value_parser = positive_ms())]
    timeout_ms: Option<u64>,
    /// How long a stdio server may take to answer the `server/discover` probe (the 2026-07-28
    /// revision's handshake) before it is sent `initialize` as well, at most half its connect
    /// timeout [default: 2000]. A server slower to start than this is spoken to in the 2025
    /// revisions when it speaks both.
    #[arg(long, value_name = "MS", global = true, value_parser = positive_ms())]
    probe_timeout_ms: Option<u64>,
    /// Limit of each tool call (and other request) for servers whose config sets none
    /// [default: $MCP_TOOL_TIMEOUT, else 60000].
    #[arg(long, value_name = "MS", global = true, value_parser = positive_ms())]
    call_timeout_ms: Option<u64>,
    /// Health pings: send each connected server a `ping` every MS milliseconds; two in a row
    /// unanswered within MS each close the connection, and it is reconnected [default: off].
    #[arg(long, value_name = "MS", global = true, value_parser = positive_ms())]
    health_ms: Option<u64>,
    /// How tool names are qualified: `mcp_<server>_<tool>` or `mcp__<server>__<tool>`.
    #[arg(long, value_enum, default_value_t = Naming::Seed, global = true)]
    naming: Naming,
    /// Start stdio servers with only a minimal environment (HOME, LOGNAME, PATH, SHELL, USER,
    /// LANG, LC_ALL, TERM, TMPDIR, TZ, as Codex does) plus each config's own `env` (and
    /// Codex `env_vars`), instead of all of switchboard's.
    #[arg(long, global = true)]
    minimal_env: bool,
    /// Exit 1 when any server failed or a config entry was invalid.
    #[arg(long, global = true)]
    strict: bool,
    /// More log output on stderr (-v warn, -vv info, -vvv debug) unless RUST_LOG is set.
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    /// No progress output and no logs.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Answer servers' elicitation requests without asking: `decline` them all, or
    /// `accept-defaults` (a form with the defaults its schema gives; URL requests are
    /// declined) [default: ask on the terminal; not offered when there is none].
    #[arg(long, value_enum, value_name = "HOW", global = true)]
    elicit: Option<peer::Elicit>,
    /// Answer servers' sampling requests by running CMD (with `sh -c`, in its own process
    /// group, killed after 120 s): the request's params as JSON on its stdin, a JSON
    /// CreateMessageResult on its stdout (at most 1 MiB) [default: sampling not offered].
    #[arg(long, value_name = "CMD", global = true)]
    sampling_command: Option<String>,
    /// When an HTTP server needs OAuth authorization, log in on the spot (print the URL,
    /// open it with $BROWSER or the system browser, wait for the redirect) instead of
    /// reporting it as `needs login` [default: never wait for a person]. The browser (and
    /// whatever it starts) must outlive the command, so this run does not sweep descendants
    /// that escaped their process group (servers are still closed by process group).
    #[arg(long, global = true)]
    login: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Naming {
    /// mcp_<server>_<tool>
    Seed,
    /// mcp__<server>__<tool> (Claude Code, Codex)
    DoubleUnderscore,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Connect every server and print one row per server (source, transport, status, tools,
    /// time to ready, error); shadowed duplicates and config errors follow the table.
    #[command(after_help = STATUS_HELP)]
    Status {
        /// One JSON object on stdout (see the README for its fields).
        #[arg(long)]
        json: bool,
    },
    /// Print the tool view an agent gets: qualified name, server, raw name, description, and
    /// whether the tool is deferred (served from the cache while its server connects).
    #[command(after_help = TOOLS_HELP)]
    Tools {
        #[arg(long)]
        json: bool,
        /// Only this server's tools.
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
    },
    /// Call a tool by qualified name; waits for its server if the tool is deferred.
    #[command(after_help = CALL_HELP)]
    Call {
        /// The qualified tool name, e.g. mcp_fast_echo.
        tool: String,
        /// The arguments as a JSON object, or `-` to read them from stdin [default: {}].
        args: Option<String>,
        /// Print the result as JSON (content, structuredContent, isError) instead of its
        /// text rendering.
        #[arg(long)]
        json: bool,
    },
    /// Approve the project's servers (all that await approval, or those named), so they
    /// start from now on. An approval holds for the config as it is: an edited entry waits
    /// for approval again. Nothing is started.
    #[command(after_help = TRUST_HELP)]
    Trust {
        /// The servers to approve [default: every one awaiting approval].
        servers: Vec<String>,
    },
    /// Show what discovery made of every config file, without starting anything: each file
    /// looked at (found or not) and what it gave, shadowed, skipped, left awaiting approval or
    /// warned about; then the servers as they would run.
    Config {
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Withdraw approvals of this project's servers (all, or those named).
    #[command(after_help = TRUST_HELP)]
    Untrust {
        /// The servers [default: every approved one of this project].
        servers: Vec<String>,
    },
    /// Run four demo servers (fast, slow, failing, hanging) cold then warm, and narrate the
    /// gate, deferred tools, the late connection, isolation and teardown. Writes only under a
    /// temporary directory.
    #[command(after_help = DEMO_HELP)]
    Demo,
    /// Connect like `status`, then stay connected and print every status change, tool
    /// change, reconnect attempt and diagnostic as it happens, until Ctrl-C or `--for-ms`.
    #[command(after_help = WATCH_HELP)]
    Watch {
        /// One JSON object per line: `time_ms`, `event`, `server` and the event's fields.
        #[arg(long)]
        json: bool,
        /// Stop after this many milliseconds.
        #[arg(long, value_name = "MS")]
        for_ms: Option<u64>,
    },
    /// Authorize switchboard for an HTTP server with OAuth: prints the URL, opens it with
    /// $BROWSER (else xdg-open/open), receives the redirect on http://127.0.0.1:PORT/callback
    /// and stores the tokens under $XDG_DATA_HOME/switchboard/tokens (mode 0600).
    #[command(after_help = LOGIN_HELP)]
    Login {
        /// The server's name.
        server: String,
        /// Only print the URL; do not open a browser.
        #[arg(long)]
        no_browser: bool,
    },
    /// Forget the stored OAuth tokens of a server.
    #[command(after_help = LOGIN_HELP)]
    Logout {
        /// The server's name.
        server: String,
    },
    /// Print every resource and resource template the servers list: URI, server, name,
    /// MIME type, and whether it is deferred (from the cache while its server connects).
    #[command(after_help = TOOLS_HELP)]
    Resources {
        #[arg(long)]
        json: bool,
        /// Only this server's resources.
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
    },
    /// Read a resource by URI; waits for its server if the resource is deferred.
    #[command(after_help = OPERATION_HELP)]
    Read {
        /// The resource's URI.
        uri: String,
        /// The server to read it from (needed when several list it, or none does).
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
        /// Print the contents as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print every prompt by qualified name, with its arguments ([optional] ones bracketed).
    #[command(after_help = TOOLS_HELP)]
    Prompts {
        #[arg(long)]
        json: bool,
        /// Only this server's prompts.
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
    },
    /// Get a prompt by qualified name; waits for its server if the prompt is deferred.
    #[command(after_help = OPERATION_HELP)]
    Prompt {
        /// The prompt's qualified name, e.g. mcp_everything_simple_prompt.
        name: String,
        /// Its arguments as a JSON object of strings [default: {}].
        args: Option<String>,
        /// Print the messages as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve every configured server as one MCP server: on stdio (for a client to spawn), or
    /// Streamable HTTP at http://ADDR/mcp with --http. Tools, resources and prompts are
    /// answered at once from the gate's view (cached tools included) and kept current with
    /// list_changed notifications.
    #[command(after_help = SERVE_HELP)]
    Serve {
        /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8808) instead of stdio. A
        /// non-loopback address requires a bearer token.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Require `Authorization: Bearer TOKEN` on every HTTP request [default: the
        /// SWITCHBOARD_BEARER_TOKEN environment variable; none on loopback].
        #[arg(long, value_name = "TOKEN", requires = "http")]
        bearer_token: Option<String>,
        /// An Origin allowed besides local ones (repeatable), e.g. https://app.example.
        #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
        allow_origins: Vec<String>,
        /// Serve each tool and prompt under its own name when no other server has one of
        /// that name (the others keep their qualified names); calls may use either.
        #[arg(long)]
        plain_names: bool,
        /// Serve two tools instead of every tool: search_tools (by name and description,
        /// ranked) and call_tool (call one found there), for agents whose context cannot
        /// hold every definition.
        #[arg(long)]
        tool_search: bool,
        /// A file holding a secret (at least 32 bytes) to seal the state of multi round-trip
        /// requests with. Instances that share it continue each other's requests, so a load
        /// balancer needs no sticky sessions [default: a random key per process].
        #[arg(long, value_name = "PATH", requires = "http")]
        state_key_file: Option<std::path::PathBuf>,
    },
    /// Complete an argument of a prompt (--prompt) or of a resource template (--resource).
    #[command(after_help = OPERATION_HELP)]
    Complete {
        /// The argument's name.
        argument: String,
        /// What was typed so far [default: ""].
        #[arg(default_value = "")]
        value: String,
        /// The prompt, by qualified name.
        #[arg(long, value_name = "NAME")]
        prompt: Option<String>,
        /// The resource template, as its server lists it.
        #[arg(long, value_name = "URI")]
        resource: Option<String>,
        /// The template's server (when several list it).
        #[arg(long, value_name = "NAME", requires = "resource")]
        server: Option<String>,
        /// The arguments already chosen, as a JSON object of strings.
        #[arg(long, value_name = "JSON")]
        context: Option<String>,
        /// Print the values as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A number of milliseconds above zero (`0` or a non-number is a usage error, exit 2).
fn positive_ms() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..)
}

/// An error that ends the command with a message on stderr.
#[derive(Debug)]
struct Fatal {
    code: u8,
    message: String,
}

impl Fatal {
    fn usage(message: impl Into<String>) -> Self {
        Fatal {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }
    fn failed(message: impl Into<String>) -> Self {
        Fatal {
            code: EXIT_FAILED,
            message: message.into(),
        }
    }
}

/// The entry point of the `switchboard` binary.
pub fn main() -> ExitCode {
    // The demo's servers are this very binary (`cargo run` builds only `switchboard`).
    let mut args = std::env::args();
    if args.nth(1).as_deref() == Some(demo::DEMO_SERVER_SUBCOMMAND) {
        demo::record_server_pid();
        switchboard_cli::demo_server::run(args);
    }
    let cli = Cli::parse();
    init_logging(&cli.global);
    // Where it cannot be raised, the limit stays what it was; running out of descriptors
    // is then reported where it happens.
    let _ = switchboard::process::raise_open_files_limit();
    let result = smol::block_on(run(cli));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(fatal) => {
            eprintln!("switchboard: {}", term::terminal_safe(&fatal.message));
            ExitCode::from(fatal.code)
        }
    }
}

fn init_logging(g: &Global) {
    use tracing_subscriber::EnvFilter;
    let (filter, by_default) = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() && !g.quiet => (EnvFilter::new(spec), false),
        _ => match (g.quiet, g.verbose) {
            (true, _) => (EnvFilter::new("off"), false),
            // By default, the library's own warnings and errors (a frame that is not
            // JSON-RPC, an answer to a request never sent, a tool skipped, a connection
            // lost): what a server logs is shown only with -v.
            (false, 0) => (EnvFilter::new("switchboard::diagnostic=warn"), true),
            (false, 1) => (EnvFilter::new("warn"), false),
            (false, 2) => (EnvFilter::new("info"), false),
            (false, 3) => (EnvFilter::new("debug"), false),
            _ => (EnvFilter::new("trace"), false),
        },
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(term::stderr_color());
    let _ = if by_default {
        // A plain line per warning, without a timestamp or a module path.
        builder.without_time().with_target(false).try_init()
    } else {
        builder.try_init()
    };
}

/// Run the command, or shut down cleanly when Ctrl-C or SIGTERM arrives first. The handler is
/// installed before anything starts.
async fn run(cli: Cli) -> Result<u8, Fatal> {
    let interrupt = interrupt::Interrupt::install()?;
    let quiet = cli.global.quiet;
    let command = run_command(cli, &interrupt);
    let signal = match future::or(async { Ok(command.await) }, async {
        Err(interrupt.listen().await)
    })
    .await
    {
        Ok(result) => return result,
        Err(signal) => signal,
    };
    // The command's future is gone (a pending call is cancelled with it).
    interrupt.shut_down().await;
    if !quiet {
        eprintln!(
            "switchboard: interrupted ({}); every server was shut down",
            interrupt::name(signal)
        );
    }
    Ok(interrupt::exit_code(signal))
}

async fn run_command(cli: Cli, interrupt: &interrupt::Interrupt) -> Result<u8, Fatal> {
    let g = cli.global;
    match cli.command {
        Command::Demo => demo::run(&g, interrupt).await,
        Command::Watch { json, for_ms } => watch::run(&g, interrupt, json, for_ms).await,
        Command::Login { server, no_browser } => login::login(&g, &server, !no_browser).await,
        Command::Logout { server } => login::logout(&server).await,
        Command::Serve {
            http,
            bearer_token,
            allow_origins,
            plain_names,
            tool_search,
            state_key_file,
        } => {
            let args = serve::ServeArgs {
                http,
                bearer_token,
                allowed_origins: allow_origins,
                plain_names,
                tool_search,
                state_key_file,
            };
            serve::run(&g, interrupt, args).await
        }
        Command::Trust { servers } => trust::trust(&g, servers).await,
        Command::Config { json } => config::run(&g, json).await,
        Command::Untrust { servers } => trust::untrust(&g, servers).await,
        Command::Status { json } => {
            let session = Session::start(&g, interrupt, Settle::All).await?;
            let failed = session.any_failed();
            output::status(&session, json);
            session.sb.shutdown().await;
            Ok(strict_code(&g, failed))
        }
        Command::Tools { json, server } => {
            let session = Session::start(&g, interrupt, Settle::Uncached).await?;
            if let Some(name) = &server {
                if !session.sb.servers().iter().any(|s| &s.name == name) {
                    session.sb.shutdown().await;
                    return Err(Fatal::usage(format!("no server named {name:?}")));
                }
            }
            let failed = session.any_failed();
            output::tools(&session, server.as_deref(), json);
            session.sb.shutdown().await;
            Ok(strict_code(&g, failed))
        }
        Command::Call { tool, args, json } => {
            let arguments = parse_arguments(args.as_deref()).await?;
            let session = Session::start(&g, interrupt, Settle::Uncached).await?;
            let failed = session.any_failed();
            let result =
                progress::call_showing_progress(&session.sb, &tool, arguments, g.quiet).await;
            session.sb.shutdown().await;
            let code = match result {
                Ok(r) => {
                    output::call_result(&r, json);
                    if r.is_error {
                        EXIT_FAILED
                    } else {
                        strict_code(&g, failed)
                    }
                }
                Err(e) => return Err(Fatal::failed(format!("call {tool} failed: {e}"))),
            };
            Ok(code)
        }
        Command::Resources { json, server } => {
            list(&g, interrupt, server, |s, server| {
                catalog::resources(s, server, json)
            })
            .await
        }
        Command::Prompts { json, server } => {
            list(&g, interrupt, server, |s, server| {
                catalog::prompts(s, server, json)
            })
            .await
        }
        Command::Read { uri, server, json } => {
            let session = Session::start(&g, interrupt, Settle::Uncached).await?;
            let failed = session.any_failed();
            let result = session.sb.read_resource(&uri, server.as_deref()).await;
            session.sb.shutdown().await;
            let r = result.map_err(|e| Fatal::failed(format!("read {uri} failed: {e}")))?;
            catalog::read_result(&r, json);
            Ok(strict_code(&g, failed))
        }
        Command::Prompt { name, args, json } => {
            let arguments = catalog::string_map(args.as_deref(), "arguments")?;
            let session = Session::start(&g, interrupt, Settle::Uncached).await?;
            let failed = session.any_failed();
            let result = session.sb.get_prompt(&name, arguments).await;
            session.sb.shutdown().await;
            let p = result.map_err(|e| Fatal::failed(format!("prompt {name} failed: {e}")))?;
            catalog::prompt_result(&p, json);
            Ok(strict_code(&g, failed))
        }
        Command::Complete {
            argument,
            value,
            prompt,
            resource,
            server,
            context,
            json,
        } => {
            let reference = catalog::reference(prompt, resource, server)?;
            let context = catalog::string_map(context.as_deref(), "context arguments")?;
            let session = Session::start(&g, interrupt, Settle::Uncached).await?;
            let failed = session.any_failed();
            let result = session
                .sb
                .complete(reference, &argument, &value, context)
                .await;
            session.sb.shutdown().await;
            let c =
                result.map_err(|e| Fatal::failed(format!("complete {argument} failed: {e}")))?;
            catalog::completion(&c, json);
            Ok(strict_code(&g, failed))
        }
    }
}

/// A listing command (`resources`, `prompts`): connect, check `--server`, print, shut down.
async fn list(
    g: &Global,
    interrupt: &interrupt::Interrupt,
    server: Option<String>,
    print: impl FnOnce(&Session, Option<&str>),
) -> Result<u8, Fatal> {
    let session = Session::start(g, interrupt, Settle::Uncached).await?;
    if let Some(name) = &server {
        if !session.sb.servers().iter().any(|s| &s.name == name) {
            session.sb.shutdown().await;
            return Err(Fatal::usage(format!("no server named {name:?}")));
        }
    }
    let failed = session.any_failed();
    print(&session, server.as_deref());
    session.sb.shutdown().await;
    Ok(strict_code(g, failed))
}

fn strict_code(g: &Global, failed: bool) -> u8 {
    if g.strict && failed {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// The most `call TOOL -` reads from stdin (16 MiB): more is an error, not memory.
const MAX_STDIN_ARGUMENTS: u64 = 16 * 1024 * 1024;

/// `JSON_ARGS`, `-` (stdin) or nothing (`{}`); must be a JSON object.
async fn parse_arguments(arg: Option<&str>) -> Result<Value, Fatal> {
    let text = match arg {
        None => return Ok(Value::Object(Default::default())),
        // On a blocking thread, so that Ctrl-C still ends the command while it waits.
        Some("-") => blocking::unblock(|| {
            let mut s = String::new();
            std::io::stdin()
                .take(MAX_STDIN_ARGUMENTS + 1)
                .read_to_string(&mut s)
                .map(|_| s)
        })
        .await
        .map_err(|e| Fatal::usage(format!("cannot read the arguments from stdin: {e}")))
        .and_then(|s| {
            if s.len() as u64 > MAX_STDIN_ARGUMENTS {
                Err(Fatal::usage(format!(
                    "the arguments on stdin are larger than {} MiB",
                    MAX_STDIN_ARGUMENTS >> 20
                )))
            } else {
                Ok(s)
            }
        })?,
        Some(s) => s.to_string(),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| Fatal::usage(format!("the arguments are not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Fatal::usage("the arguments must be a JSON object"));
    }
    Ok(value)
}

/// A positive number of milliseconds from the environment variable `name` (Claude Code's
/// `MCP_TIMEOUT`, `MCP_TOOL_TIMEOUT`); anything else is ignored with a warning.
fn env_ms(name: &str, quiet: bool) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Some(ms),
        _ => {
            if !quiet {
                eprintln!(
                    "switchboard: ignoring {name}={:?}: not a positive number of milliseconds",
                    term::terminal_safe(&value)
                );
            }
            None
        }
    }
}

/// The project directory and what discovery is asked to do, from the global flags.
fn discovery_options(g: &Global) -> Result<(PathBuf, DiscoveryOptions), Fatal> {
    let project = match &g.project {
        Some(p) => p.clone(),
        None => std::env::current_dir()
            .map_err(|e| Fatal::usage(format!("no current directory: {e}")))?,
    };
    let mut options = DiscoveryOptions::new(&project);
    options.project_configs = !g.no_project_config;
    options.trust_project = g.trust_project;
    // Absolute paths, so the source column says which file even from another directory.
    options.explicit_files = g
        .configs
        .iter()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
        .collect();
    Ok((project, options))
}

/// Which servers a command waits for after the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// None (`watch`: it reports every change after the gate itself).
    Gate,
    /// Every server (`status`: final states).
    All,
    /// Servers without a cache entry (the library's default correctness wait, done here so
    /// the live view can show it); deferred servers keep connecting in the background.
    Uncached,
}

/// A connected switchboard plus what discovery found.
struct Session {
    sb: Switchboard,
    report: StartupReport,
    discovered: Discovered,
    /// The discovery options with the `${input:id}` answers given at start: what a later
    /// discovery in this run uses (`serve`'s config watch), so nothing is asked twice.
    answered: DiscoveryOptions,
    /// The command that approves a server, without its name (`switchboard trust`, with
    /// `--project DIR` when the project was given).
    approve_command: String,
    /// For a watch only (`Settle::Gate`): subscribed as soon as `start` returned, so every
    /// event since the gate is there, unread. Nobody else holds a subscription it does not
    /// read.
    events: Option<switchboard::Events>,
    /// Just before `start`: the library's clock starts inside it, so this is its origin to
    /// well under a millisecond (for the time until a scheduled reconnect).
    clock_origin: Instant,
}

impl Session {
    /// How long until `at` (an instant of the library's clock); zero if past.
    fn until(&self, at: switchboard::core::Instant) -> Duration {
        let now = u64::try_from(self.clock_origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(at.as_nanos().saturating_sub(now))
    }
}

impl Session {
    async fn start(
        g: &Global,
        interrupt: &interrupt::Interrupt,
        settle: Settle,
    ) -> Result<Session, Fatal> {
        Self::start_with(g, interrupt, settle, |b| b).await
    }

    /// [`Session::start`], with `customize` applied to the builder last.
    async fn start_with(
        g: &Global,
        interrupt: &interrupt::Interrupt,
        settle: Settle,
        customize: impl FnOnce(Builder) -> Builder,
    ) -> Result<Session, Fatal> {
        let started = Instant::now();
        let (project, options) = discovery_options(g)?;
        let quiet = g.quiet;
        let (discovered, answered) =
            blocking::unblock(move || config::answered(options, quiet)).await;
        // A file the user named that does not parse or cannot be read is a usage error;
        // a broken file found by discovery is reported with the rest.
        if !g.configs.is_empty() {
            let broken: Vec<String> = discovered
                .errors
                .iter()
                .filter(|e| !matches!(e.error, ConfigError::Server { .. }))
                .map(|e| e.error.to_string())
                .collect();
            if !broken.is_empty() {
                return Err(Fatal::usage(broken.join("\n")));
            }
        }
        let servers = discovered.servers.clone();
        // The flag goes to the manager, not into the configs: a config is part of its tool
        // cache key, so changing it would cost every server its cached tools.
        let default_timeout = g
            .timeout_ms
            .or_else(|| env_ms("MCP_TIMEOUT", g.quiet))
            .map_or(DEFAULT_CONNECT_TIMEOUT, Duration::from_millis);
        let call_timeout = g
            .call_timeout_ms
            .or_else(|| env_ms("MCP_TOOL_TIMEOUT", g.quiet))
            .map(Duration::from_millis);
        // Upper bound of the wait after the gate: the longest connect timeout plus the
        // `tools/list` request timeout.
        let longest = servers
            .iter()
            .map(|s| s.config.connect_timeout_or(default_timeout))
            .max()
            .unwrap_or_default();
        let health = g.health_ms.map(Duration::from_millis);
        let probe_timeout = g.probe_timeout_ms;
        // The environment the configs expand from, plus the values discovery resolved for
        // them (`${input:id}` answers, `${file:…}` contents).
        let mut env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        env.extend(discovered.variables.0.clone());
        let mut builder = Builder::servers(servers)
            .discovered(discovered.clone())
            .env(env)
            .minimal_env(g.minimal_env)
            .adopt_orphans(!g.login)
            .project_dir(&project)
            .naming(naming(g.naming))
            .uncached_wait(Duration::ZERO)
            .manager_options(|o| {
                o.default_connect_timeout = default_timeout;
                if let Some(t) = call_timeout {
                    o.call_timeout = t;
                }
                o.health = health.map(health_policy);
                if let Some(ms) = probe_timeout {
                    o.protocol.probe_timeout = Duration::from_millis(ms);
                }
            });
        if let Some(ms) = g.gate_ms {
            builder = builder.gate(Duration::from_millis(ms));
        }
        builder = peer::install(builder, g.elicit, g.sampling_command.as_deref(), &project)?;
        if g.login {
            builder = builder.authorization_handler(std::sync::Arc::new(
                switchboard::auth::LoopbackAuthorizer::default(),
            ));
        }
        if g.no_cache {
            builder = builder.no_cache();
        } else if let Some(dir) = &g.cache_dir {
            builder = builder.cache_dir(dir);
        }
        let builder = customize(builder);
        let clock_origin = Instant::now();
        let (sb, report) = builder
            .start()
            .await
            .map_err(|e| Fatal::failed(e.to_string()))?;
        interrupt.running(&sb);
        // No await since `start` returned: nothing is missed between the gate and here.
        if settle == Settle::Gate {
            return Ok(Session {
                events: Some(sb.events()),
                sb,
                report,
                discovered,
                answered,
                approve_command: trust::approve_command(g),
                clock_origin,
            });
        }
        // Read by the wait below: every event wakes it to look at the servers again.
        let events = sb.events();
        let mut live = term::LiveView::new(started, g.quiet);
        let deadline = Instant::now() + longest + Duration::from_secs(30);
        loop {
            let servers = sb.servers();
            live.update(&servers);
            let waiting = servers.iter().any(|s| {
                // A server waiting to reconnect has settled for this purpose.
                s.status == ServerStatus::Connecting
                    && s.phase != Phase::Backoff
                    && match settle {
                        Settle::All => true,
                        Settle::Uncached => report.pending.contains(&s.name),
                        Settle::Gate => false,
                    }
            });
            if !waiting || Instant::now() >= deadline {
                break;
            }
            future::or(
                async {
                    async_io::Timer::after(Duration::from_millis(50)).await;
                },
                async {
                    if matches!(events.recv().await, Err(switchboard::RecvError::Closed)) {
                        // The driver stopped: only the timer wakes us now.
                        future::pending::<()>().await;
                    }
                },
            )
            .await;
        }
        live.finish();
        drop(events);
        Ok(Session {
            sb,
            report,
            discovered,
            answered,
            approve_command: trust::approve_command(g),
            events: None,
            clock_origin,
        })
    }

    /// Any server failed, or any config entry was invalid.
    fn any_failed(&self) -> bool {
        !self.discovered.errors.is_empty()
            || self
                .sb
                .servers()
                .iter()
                .any(|s| s.status == ServerStatus::Disconnected && s.last_error.is_some())
    }
}

/// `--health-ms`: a ping every `interval`, each given as long to be answered; two misses in a
/// row close the connection.
fn health_policy(interval: Duration) -> HealthPolicy {
    HealthPolicy {
        interval,
        timeout: interval,
        misses: 2,
    }
}

fn naming(n: Naming) -> NamingScheme {
    match n {
        Naming::Seed => NamingScheme::Seed,
        Naming::DoubleUnderscore => NamingScheme::DoubleUnderscore,
    }
}
