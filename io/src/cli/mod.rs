//! The `switchboard` command line: `status`, `tools`, `call` and `demo` over the library API.
//!
//! Every command discovers (or reads `--config` files), connects through a [`Builder`], and
//! shuts everything down before it exits. Human output goes to stdout; progress, logs and
//! errors go to stderr, so `--json` output on stdout is always exactly one JSON object.

mod demo;
mod output;
mod term;
mod watch;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use futures_lite::future;
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use switchboard::core::config::ConfigError;
use switchboard::core::NamingScheme;
use switchboard::discovery::{discover, Discovered, DiscoveryOptions};
use switchboard::{Builder, ServerStatus, StartupReport, Switchboard};

/// Success; per-server failures are reported, not fatal.
pub const EXIT_OK: u8 = 0;
/// A failed call (an error or a result with `isError`), or `--strict` with a failed server.
pub const EXIT_FAILED: u8 = 1;
/// A usage or config error (bad flags, a config file that does not parse, bad JSON arguments).
pub const EXIT_USAGE: u8 = 2;

const AFTER_HELP: &str = "\
Exit status:
  0  success (a server that fails is reported, not fatal)
  1  a failed call (an error, or a result with isError), or --strict with any server failed
  2  a usage or config error (a config file that does not parse: file, line and column)

Logs go to stderr, filtered by RUST_LOG (e.g. RUST_LOG=switchboard=debug); -v/-vv/-vvv
without RUST_LOG show warn/info/debug. NO_COLOR turns colour off.";

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
    /// Keep the tool cache here [default: $XDG_CACHE_HOME/switchboard/tools].
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
    /// No tool cache: nothing read or written, so no deferred tools.
    #[arg(long, global = true, conflicts_with = "cache_dir")]
    no_cache: bool,
    /// The startup gate in milliseconds [default: 250].
    #[arg(long, value_name = "MS", global = true)]
    gate_ms: Option<u64>,
    /// Connect timeout for servers whose config sets none [default: 30000].
    #[arg(long, value_name = "MS", global = true)]
    timeout_ms: Option<u64>,
    /// How tool names are qualified: `mcp_<server>_<tool>` or `mcp__<server>__<tool>`.
    #[arg(long, value_enum, default_value_t = Naming::Seed, global = true)]
    naming: Naming,
    /// Exit 1 when any server failed or a config entry was invalid.
    #[arg(long, global = true)]
    strict: bool,
    /// More log output on stderr (-v warn, -vv info, -vvv debug) unless RUST_LOG is set.
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    /// No progress output and no logs.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
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
    Status {
        /// One JSON object on stdout (see the README for its fields).
        #[arg(long)]
        json: bool,
    },
    /// Print the tool view an agent gets: qualified name, server, raw name, description, and
    /// whether the tool is deferred (served from the cache while its server connects).
    Tools {
        #[arg(long)]
        json: bool,
        /// Only this server's tools.
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
    },
    /// Call a tool by qualified name; waits for its server if the tool is deferred.
    Call {
        /// The qualified tool name, e.g. mcp_fast_echo.
        tool: String,
        /// The arguments as a JSON object, or `-` to read them from stdin [default: {}].
        args: Option<String>,
        /// Print the raw result as JSON instead of its text rendering.
        #[arg(long)]
        json: bool,
    },
    /// Run four demo servers (fast, slow, failing, hanging) cold then warm, and narrate the
    /// gate, deferred tools, the late connection, isolation and teardown. Writes only under a
    /// temporary directory.
    Demo,
    /// Connect like `status`, then stay connected and print every status change, tool
    /// change, reconnect attempt and diagnostic as it happens, until Ctrl-C or `--for-ms`.
    Watch {
        /// One JSON object per line: `time_ms`, `event`, `server` and the event's fields.
        #[arg(long)]
        json: bool,
        /// Stop after this many milliseconds.
        #[arg(long, value_name = "MS")]
        for_ms: Option<u64>,
    },
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
        switchboard::demo_server::run(args);
    }
    let cli = Cli::parse();
    init_logging(&cli.global);
    let result = smol::block_on(run(cli));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(fatal) => {
            eprintln!("switchboard: {}", fatal.message);
            ExitCode::from(fatal.code)
        }
    }
}

fn init_logging(g: &Global) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() && !g.quiet => EnvFilter::new(spec),
        _ => EnvFilter::new(match (g.quiet, g.verbose) {
            (true, _) | (false, 0) => "off",
            (false, 1) => "warn",
            (false, 2) => "info",
            (false, 3) => "debug",
            _ => "trace",
        }),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(term::stderr_color())
        .try_init();
}

async fn run(cli: Cli) -> Result<u8, Fatal> {
    let g = cli.global;
    match cli.command {
        Command::Demo => demo::run(&g).await,
        Command::Watch { json, for_ms } => watch::run(&g, json, for_ms).await,
        Command::Status { json } => {
            let session = Session::start(&g, Settle::All).await?;
            let failed = session.any_failed();
            output::status(&session, json);
            session.sb.shutdown().await;
            Ok(strict_code(&g, failed))
        }
        Command::Tools { json, server } => {
            let session = Session::start(&g, Settle::Uncached).await?;
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
            let arguments = parse_arguments(args.as_deref())?;
            let session = Session::start(&g, Settle::Uncached).await?;
            let failed = session.any_failed();
            let result = session.sb.call(&tool, arguments).await;
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
    }
}

fn strict_code(g: &Global, failed: bool) -> u8 {
    if g.strict && failed {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// `JSON_ARGS`, `-` (stdin) or nothing (`{}`); must be a JSON object.
fn parse_arguments(arg: Option<&str>) -> Result<Value, Fatal> {
    let text = match arg {
        None => return Ok(Value::Object(Default::default())),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Fatal::usage(format!("cannot read the arguments from stdin: {e}")))?;
            s
        }
        Some(s) => s.to_string(),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| Fatal::usage(format!("the arguments are not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Fatal::usage("the arguments must be a JSON object"));
    }
    Ok(value)
}

/// Which servers a command waits for after the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
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
}

impl Session {
    async fn start(g: &Global, settle: Settle) -> Result<Session, Fatal> {
        let started = Instant::now();
        let project = match &g.project {
            Some(p) => p.clone(),
            None => std::env::current_dir()
                .map_err(|e| Fatal::usage(format!("no current directory: {e}")))?,
        };
        let mut options = DiscoveryOptions::new(&project);
        options.project_configs = !g.no_project_config;
        // Absolute paths, so the source column says which file even from another directory.
        options.explicit_files = g
            .configs
            .iter()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            .collect();
        let discovered = blocking::unblock(move || discover(&options)).await;
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
        let mut servers = discovered.servers.clone();
        if let Some(ms) = g.timeout_ms {
            let ms = i64::try_from(ms).unwrap_or(i64::MAX);
            for s in &mut servers {
                s.config.timeout_ms.get_or_insert(ms);
            }
        }
        // Upper bound of the wait after the gate: the longest connect timeout plus the
        // `tools/list` request timeout.
        let longest = servers
            .iter()
            .map(|s| s.config.connect_timeout())
            .max()
            .unwrap_or_default();
        let mut builder = Builder::servers(servers)
            .project_dir(&project)
            .naming(naming(g.naming))
            .uncached_wait(Duration::ZERO);
        if let Some(ms) = g.gate_ms {
            builder = builder.gate(Duration::from_millis(ms));
        }
        if g.no_cache {
            builder = builder.no_cache();
        } else if let Some(dir) = &g.cache_dir {
            builder = builder.cache_dir(dir);
        }
        let (sb, report) = builder
            .start()
            .await
            .map_err(|e| Fatal::failed(e.to_string()))?;
        let mut live = term::LiveView::new(started, g.quiet);
        let deadline = Instant::now() + longest + Duration::from_secs(30);
        let events = sb.events();
        loop {
            let servers = sb.servers();
            live.update(&servers);
            let waiting = servers.iter().any(|s| {
                // A server waiting to reconnect has settled for this purpose.
                s.status == ServerStatus::Connecting
                    && s.phase != "backoff"
                    && match settle {
                        Settle::All => true,
                        Settle::Uncached => report.pending.contains(&s.name),
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
                    if events.recv().await.is_err() {
                        // The driver stopped: only the timer wakes us now.
                        future::pending::<()>().await;
                    }
                },
            )
            .await;
        }
        live.finish();
        Ok(Session {
            sb,
            report,
            discovered,
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

fn naming(n: Naming) -> NamingScheme {
    match n {
        Naming::Seed => NamingScheme::Seed,
        Naming::DoubleUnderscore => NamingScheme::DoubleUnderscore,
    }
}
