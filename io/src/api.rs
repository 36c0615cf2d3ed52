//! The library handle: [`Switchboard`] and its [`Builder`].

pub use crate::driver::link::Error;

mod catalog;

use crate::cache::ToolCache;
use crate::call::{Call, CallOptions};
use crate::driver::link::{ConfigReport, Request, RoundKind, Shared};
use crate::driver::{Clock, Driver, DriverConfig};
use crate::events::{Events, Subscribers, EVENT_QUEUE_LEN};
use crate::rt::Spawner;
use crate::secrets::CredentialProvider;
use crate::stdio::{ProcessRegistry, StdioOptions};
use async_channel::Sender;
use async_executor::Task;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_core::config::ServerSpec;
use switchboard_core::manager::{CallId, Manager, ManagerOptions};
use switchboard_core::protocol::Root;
use switchboard_core::{NamingScheme, ServerState, ServerStatus, StartupReport, Tool, ToolResult};

/// Where the server set comes from.
#[derive(Debug, Clone)]
pub enum ServerSource {
    /// A fixed list (the embedder did its own discovery).
    Specs(Vec<ServerSpec>),
    /// Discover from the usual config files (see [`crate::discover`]).
    Discover(crate::discovery::DiscoveryOptions),
}

/// Builds a [`Switchboard`]. Every setting has a default, noted on its method.
pub struct Builder {
    source: ServerSource,
    options: ManagerOptions,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    stdio: StdioOptions,
    http: crate::http::HttpOptions,
    credentials: Option<Arc<dyn CredentialProvider>>,
    authorization: crate::auth::AuthContext,
    env: Option<BTreeMap<String, String>>,
    seeded: bool,
    project_dir: Option<PathBuf>,
    max_frame_len: Option<usize>,
    spawner: Spawner,
    queues: QueueOptions,
    adopt_orphans: bool,
    peer: crate::driver::PeerHandlers,
    discovered: Option<crate::discovery::Discovered>,
}

/// The bounds of the queues between the handle, the driver and the transports. `Default`
/// gives the values noted on each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueOptions {
    /// Requests from the handles waiting for the driver (1024): past that, callers wait.
    pub requests: usize,
    /// Transport events waiting for the driver (1024): past that, the transports wait, and a
    /// server that floods us is held back at its pipe or socket.
    pub inbound: usize,
    /// Events waiting for each subscriber of [`Switchboard::events`] (1024): past that, the
    /// subscriber misses events and reads [`RecvError::Lagged`](crate::RecvError::Lagged).
    pub events: usize,
    /// Progress notifications waiting for each [`Call::progress`] reader (64): past that,
    /// notifications are dropped (later ones supersede them).
    pub progress: usize,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            requests: 1024,
            inbound: 1024,
            events: EVENT_QUEUE_LEN,
            progress: 64,
        }
    }
}

/// A seed that differs between processes and runs (the core itself never draws one).
fn entropy_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9E37_79B9_7F4A_7C15
}

impl Builder {
    /// Run exactly these servers.
    pub fn servers(servers: Vec<ServerSpec>) -> Self {
        Self::with_source(ServerSource::Specs(servers))
    }

    /// Discover servers from config files.
    pub fn discover(options: crate::discovery::DiscoveryOptions) -> Self {
        Self::with_source(ServerSource::Discover(options))
    }

    fn with_source(source: ServerSource) -> Self {
        // The library speaks both revisions: each attempt probes with `server/discover` unless
        // the server's revision is remembered (`manager_options` can turn the probe off).
        let mut options = ManagerOptions::default();
        options.protocol.probe = true;
        Builder {
            source,
            options: ManagerOptions {
                output_validator: Some(crate::JsonSchemaValidator::shared()),
                ..options
            },
            cache_dir: None,
            no_cache: false,
            stdio: StdioOptions::default(),
            http: crate::http::HttpOptions::default(),
            credentials: None,
            authorization: crate::auth::AuthContext {
                store: crate::auth::TokenStore::default_location(),
                handler: None,
            },
            env: None,
            seeded: false,
            project_dir: None,
            max_frame_len: None,
            spawner: Spawner::default(),
            queues: QueueOptions::default(),
            adopt_orphans: false,
            peer: crate::driver::PeerHandlers::default(),
            discovered: None,
        }
    }

    /// What the embedder's own discovery found, when it gives the servers it found as a
    /// fixed list (the CLI asks for `${input:id}` answers first): reported by
    /// [`Switchboard::discovery`] until [`Switchboard::sync_discovered`] replaces it. With
    /// [`discover`](Self::discover), the library's own discovery wins.
    pub fn discovered(mut self, found: crate::discovery::Discovered) -> Self {
        self.discovered = Some(found);
        self
    }

    /// The project directory: the working directory of stdio servers whose config sets none
    /// and, with discovery, where project-level config files are looked for (it replaces
    /// [`DiscoveryOptions::project_dir`](crate::discovery::DiscoveryOptions::project_dir)).
    ///
    /// Without this call: with discovery, `DiscoveryOptions::project_dir`; with a fixed
    /// list, [`StdioOptions::default_cwd`] (default: the embedder's working directory).
    pub fn project_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.project_dir = Some(dir.into());
        self
    }

    /// Keep the tool cache here instead of `$XDG_CACHE_HOME/switchboard/tools`.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// No tool cache: nothing read, nothing written (no deferred tools either).
    pub fn no_cache(mut self) -> Self {
        self.no_cache = true;
        self
    }

    /// The startup gate (default 250 ms).
    pub fn gate(mut self, gate: Duration) -> Self {
        self.options.gate = gate;
        self
    }

    /// Bound the wait for uncached servers past the gate (default: wait until they settle).
    pub fn uncached_wait(mut self, wait: Duration) -> Self {
        self.options.uncached_wait = Some(wait);
        self
    }

    /// Default per-call timeout (60 s).
    pub fn call_timeout(mut self, t: Duration) -> Self {
        self.options.call_timeout = t;
        self
    }

    /// Timeout of `tools/list` pages and other requests after `initialize` (30 s).
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.options.request_timeout = t;
        self
    }

    /// How qualified tool names are built (default `mcp_<server>_<tool>`, sanitised and
    /// deduplicated).
    pub fn naming(mut self, scheme: NamingScheme) -> Self {
        self.options.naming = scheme;
        self
    }

    /// Roots answered to `roots/list`: declares the `roots` capability (with
    /// `listChanged`; [`Switchboard::set_roots`] replaces them later). Default: none, and the
    /// capability is not declared.
    pub fn roots(mut self, roots: Vec<Root>) -> Self {
        self.options.roots = roots;
        self.options.client_features.roots = true;
        self
    }

    /// Answer servers' `elicitation/create` requests with `handler`: declares the
    /// `elicitation` capability, in the modes the handler offers
    /// ([`ElicitationHandler::form_mode`](crate::ElicitationHandler::form_mode),
    /// [`url_mode`](crate::ElicitationHandler::url_mode)). Without one, elicitation is not
    /// offered and such requests are refused.
    pub fn elicitation_handler(mut self, handler: Arc<dyn crate::ElicitationHandler>) -> Self {
        self.options.client_features.elicitation_form = handler.form_mode();
        self.options.client_features.elicitation_url = handler.url_mode();
        self.peer.elicitation = Some(handler);
        self
    }

    /// Answer servers' `sampling/createMessage` requests with `handler`: declares the
    /// `sampling` capability. Without one, sampling is not offered and such requests are
    /// refused.
    pub fn sampling_handler(mut self, handler: Arc<dyn crate::SamplingHandler>) -> Self {
        self.options.client_features.sampling = true;
        self.peer.sampling = Some(handler);
        self
    }

    /// Answer the roots a stateless server asks for as an input of one request with
    /// `handler` instead of from [`roots`](Self::roots) (a gateway asks the client whose
    /// request it is): declares the `roots` capability. A server's own `roots/list` request
    /// is still answered from the roots.
    pub fn roots_handler(mut self, handler: Arc<dyn crate::RootsHandler>) -> Self {
        self.options.roots_inputs = switchboard_core::manager::RootsInputs::Embedder;
        self.peer.roots = Some(handler);
        self
    }

    /// Supplies bearer tokens for servers whose config has an `auth` section (see
    /// [`CredentialProvider`]).
    pub fn credential_provider(mut self, p: Arc<dyn CredentialProvider>) -> Self {
        self.credentials = Some(p);
        self
    }

    /// Who sends the user to an authorization server when an HTTP server needs OAuth
    /// authorization (open this URL, hand back the redirect): for example a
    /// [`LoopbackAuthorizer`](crate::auth::LoopbackAuthorizer). Without one (the default) the
    /// library never waits for a person: a server with no usable stored credentials fails
    /// with [`ServerErrorKind::NeedsLogin`](crate::ServerErrorKind::NeedsLogin).
    pub fn authorization_handler(mut self, h: Arc<dyn crate::auth::AuthorizationHandler>) -> Self {
        self.authorization.handler = Some(h);
        self
    }

    /// Where OAuth tokens are kept (default:
    /// [`TokenStore::default_location`](crate::auth::TokenStore::default_location)); `None`
    /// keeps them in memory only.
    pub fn token_store(mut self, store: Option<crate::auth::TokenStore>) -> Self {
        self.authorization.store = store;
        self
    }

    /// Start stdio servers with only [`MINIMAL_ENV`](crate::MINIMAL_ENV) of this
    /// process's environment plus each config's own `env` (default: `false`, they inherit
    /// all of it).
    pub fn minimal_env(mut self, on: bool) -> Self {
        self.stdio.minimal_env = on;
        self
    }

    /// Variables for `${VAR}` expansion (default: the process environment).
    pub fn env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = Some(env);
        self
    }

    /// The largest message a server may send, in bytes (default 16 MiB), for every
    /// transport: it sets [`StdioOptions::max_frame_len`],
    /// [`HttpOptions::max_message_len`](crate::http::HttpOptions::max_message_len) and
    /// [`ManagerOptions::max_frame_len`] together, whatever order the other setters are
    /// called in. A bigger message fails its server (stdio) or its request (HTTP) with an
    /// error naming the limit.
    pub fn max_frame_len(mut self, bytes: usize) -> Self {
        self.max_frame_len = Some(bytes);
        self
    }

    /// Tuning of stdio transports (frame limit, close waits).
    pub fn stdio_options(mut self, o: StdioOptions) -> Self {
        self.stdio = o;
        self
    }

    /// The bounds of the library's queues (see [`QueueOptions`]).
    pub fn queue_options(mut self, o: QueueOptions) -> Self {
        self.queues = o;
        self
    }

    /// Tuning of HTTP transports (message limit, request ceiling, close wait, resumption).
    pub fn http_options(mut self, o: crate::http::HttpOptions) -> Self {
        self.http = o;
        self
    }

    /// Seed of the core's PRNG (reconnect jitter).
    pub fn seed(mut self, seed: u64) -> Self {
        self.options.seed = seed;
        self.seeded = true;
        self
    }

    /// Run the library's tasks (the driver that owns the core, and every transport's reader,
    /// writer and supervisor) on `executor` instead of the library's own executor thread.
    ///
    /// The embedder must keep running `executor` for as long as the [`Switchboard`] is in
    /// use (timers, health pings and reconnects run there too), typically by wrapping the
    /// program's main future: `smol::block_on(ex.run(main(ex.clone())))`. When the callers
    /// of [`Switchboard::call`] run on the same thread as `executor`, a call never crosses
    /// threads: that is the fastest setup (see BENCHMARKS.md, "Shell"). Without this option
    /// the tasks run on the library's own executor thread, and every call from
    /// another thread pays two thread hand-offs.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use switchboard::{Builder, core::config::{ServerConfig, ServerSpec}};
    /// let ex = Arc::new(smol::Executor::new());
    /// smol::block_on(ex.run(async {
    ///     let spec = ServerSpec::new("demo", ServerConfig::stdio("mcp-demo-server", &[] as &[&str]));
    ///     let (sb, _report) = Builder::servers(vec![spec])
    ///         .executor(ex.clone())
    ///         .start()
    ///         .await
    ///         .unwrap();
    ///     let r = sb.call("mcp_demo_echo", serde_json::json!({"text": "hi"})).await;
    ///     println!("{:?}", r.map(|r| r.render_text()));
    ///     sb.shutdown().await;
    /// }));
    /// ```
    ///
    /// This is [`spawner`](Self::spawner)`(move |task| ex.spawn(task).detach())`, with the
    /// tasks handed to the executor's queue directly.
    pub fn executor(mut self, executor: Arc<async_executor::Executor<'static>>) -> Self {
        self.spawner = Spawner::on(executor);
        self
    }

    /// Run the library's tasks (the driver and every transport's tasks) on any executor:
    /// `spawn` is called once per task and must run the [`TaskFuture`] to completion (each
    /// ends by itself when the library is done with it). Timers and sockets work under any
    /// executor (the IO reactor has a thread of its own when nobody else drives it).
    ///
    /// `spawn` may be called from any thread, so it must not depend on a thread-local
    /// runtime context: with tokio, capture a `Handle`, as below. Callers of
    /// [`Switchboard::call`] on the same runtime then never pay a hand-off to smol's threads.
    ///
    /// ```no_run
    /// # async fn run() {
    /// use switchboard::{Builder, ServerConfig, ServerSpec};
    /// let tokio = tokio::runtime::Handle::current();
    /// let spec = ServerSpec::new("demo", ServerConfig::stdio("mcp-demo-server", &[] as &[&str]));
    /// let (sb, _report) = Builder::servers(vec![spec])
    ///     .spawner(move |task| {
    ///         tokio.spawn(task);
    ///     })
    ///     .start()
    ///     .await
    ///     .unwrap();
    /// sb.shutdown().await;
    /// # }
    /// ```
    ///
    /// [`TaskFuture`]: crate::TaskFuture
    pub fn spawner(mut self, spawn: impl Fn(crate::TaskFuture) + Send + Sync + 'static) -> Self {
        self.spawner = Spawner::with(spawn);
        self
    }

    /// Make this process a child subreaper and end every escaped descendant (Linux; off by
    /// default): a server's grandchild that left its process group with `setsid` is
    /// reparented to this process when its parent exits, and is killed and reaped after
    /// each server closes and at shutdown. Every child of this process that the library did
    /// not start counts as escaped, so turn this on only in a program that starts no
    /// children of its own (the `switchboard` command line does). See
    /// [`process`](crate::process).
    pub fn adopt_orphans(mut self, on: bool) -> Self {
        self.adopt_orphans = on;
        self
    }

    /// Check structured results against their tool's `outputSchema` (on by default, with
    /// [`JsonSchemaValidator`](crate::JsonSchemaValidator)): a result without `isError`
    /// whose `structuredContent` is missing or does not conform fails its call with
    /// [`CallError::OutputSchema`](crate::CallError::OutputSchema). Off: results are passed
    /// on unchecked.
    pub fn check_output_schemas(mut self, on: bool) -> Self {
        self.options.output_validator = on.then(crate::JsonSchemaValidator::shared);
        self
    }

    /// Full access to the core's policies.
    pub fn manager_options(mut self, f: impl FnOnce(&mut ManagerOptions)) -> Self {
        f(&mut self.options);
        self
    }

    /// Start the driver, connect every server, and return at the startup gate.
    ///
    /// With discovery, the report also carries the config files' problems
    /// ([`StartupReport::config_errors`], invalid entries under their server's name in
    /// `errors` too) and shadowed entries ([`StartupReport::shadowed`]).
    pub async fn start(mut self) -> Result<(Switchboard, StartupReport), Error> {
        if self.adopt_orphans {
            if let Err(e) = crate::process::become_subreaper() {
                tracing::warn!(target: "switchboard", "cannot adopt orphaned descendants: {e}");
            }
        }
        if let Some(dir) = &self.project_dir {
            self.stdio.default_cwd = Some(dir.clone());
            if let ServerSource::Discover(o) = &mut self.source {
                o.project_dir = dir.clone();
            }
        } else if let ServerSource::Discover(o) = &self.source {
            if self.stdio.default_cwd.is_none() {
                self.stdio.default_cwd = Some(o.project_dir.clone());
            }
        }
        let mut options = self.options;
        if let Some(n) = self.max_frame_len {
            self.stdio.max_frame_len = n;
            self.http.max_message_len = n;
            options.max_frame_len = n;
        }
        if !self.seeded {
            // Jitter exists so that many clients do not reconnect in lockstep: unless the
            // embedder pins a seed (tests, replays), each process draws its own.
            options.seed = entropy_seed();
        }
        let explicit_env = self.env.is_some();
        options.env = self.env.unwrap_or_else(|| std::env::vars().collect());
        if let (true, ServerSource::Discover(o)) = (explicit_env, &mut self.source) {
            o.env = options.env.clone();
        }
        let cache = if self.no_cache {
            None
        } else {
            match self.cache_dir {
                Some(d) => Some(ToolCache::new(d)),
                None => ToolCache::in_default_dir(),
            }
        };
        let (servers, discovery) = match &self.source {
            ServerSource::Specs(s) => (s.clone(), self.discovered.take()),
            ServerSource::Discover(o) => {
                let o = o.clone();
                let d = blocking::unblock(move || crate::discovery::discover(&o)).await;
                (d.servers.clone(), Some(d))
            }
        };
        if let Some(d) = &discovery {
            // `${input:id}` answers and `${file:…}` contents the translated configs name.
            options
                .env
                .extend(d.variables.0.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let config = discovery.as_ref().map(config_report).unwrap_or_default();
        let registry = ProcessRegistry::new();
        let clock = Clock::new();
        let manager = Manager::new(options, clock.now());
        let queues = self.queues;
        let (req_tx, req_rx) = async_channel::bounded(queues.requests.max(1));
        let shared = Arc::new(Mutex::new(Shared::default()));
        let subscribers = Subscribers::with_capacity(queues.events);
        let driver = Driver::new(
            manager,
            clock,
            DriverConfig {
                stdio: self.stdio,
                http: self.http,
                cache,
                credentials: self.credentials,
                authorization: self.authorization,
                registry: registry.clone(),
                spawner: self.spawner.clone(),
                inbound_capacity: queues.inbound,
                peer: self.peer,
            },
            shared.clone(),
            subscribers.clone(),
            req_rx,
        );
        let task = self.spawner.spawn(driver.run());
        let sb = Switchboard {
            inner: Arc::new(Inner {
                requests: req_tx,
                shared,
                subscribers,
                registry,
                next_call: AtomicU64::new(1),
                progress_capacity: queues.progress.max(1),
                source: Mutex::new(self.source),
                discovery: Mutex::new(discovery),
                driver: Mutex::new(Some(task)),
            }),
        };
        let report = sb
            .round(RoundKind::Connect, servers, config)
            .await?
            .ok_or(Error::Stopped)?;
        Ok((sb, report))
    }
}

/// What discovery found wrong, for the startup report.
fn config_report(d: &crate::discovery::Discovered) -> ConfigReport {
    ConfigReport {
        errors: d.errors.clone(),
        shadowed: d.shadowed.clone(),
        awaiting: d.awaiting.clone(),
    }
}

struct Inner {
    requests: Sender<Request>,
    shared: Arc<Mutex<Shared>>,
    subscribers: Subscribers,
    registry: ProcessRegistry,
    next_call: AtomicU64,
    progress_capacity: usize,
    source: Mutex<ServerSource>,
    discovery: Mutex<Option<crate::discovery::Discovered>>,
    driver: Mutex<Option<Task<()>>>,
}

impl Drop for Inner {
    /// The last handle is gone without `shutdown()`: kill every child process group now,
    /// synchronously — never rely on a runtime that may already be gone.
    fn drop(&mut self) {
        self.registry.kill_all_now();
        if let Ok(mut d) = self.driver.lock() {
            if let Some(task) = d.take() {
                // Let the driver finish its own teardown if an executor is still running.
                task.detach();
            }
        }
    }
}

/// A running set of MCP servers. Cheap to clone; clones share one set of connections
/// (subagents and tasks of an agent can share their parent's).
///
/// ```no_run
/// use switchboard::{Builder, core::config::{ServerConfig, ServerSpec}};
/// smol::block_on(async {
///     let spec = ServerSpec::new("everything", ServerConfig::stdio("npx", &["-y", "@modelcontextprotocol/server-everything"]));
///     let (sb, report) = Builder::servers(vec![spec]).start().await.unwrap();
///     println!("{} tools after {:?}", report.tools.len(), report.elapsed);
///     let result = sb.call("mcp_everything_echo", serde_json::json!({"message": "hi"})).await;
///     println!("{:?}", result.map(|r| r.render_text()));
///     sb.shutdown().await;
/// });
/// ```
#[derive(Clone)]
pub struct Switchboard {
    inner: Arc<Inner>,
}

impl Switchboard {
    async fn round(
        &self,
        round: RoundKind,
        servers: Vec<ServerSpec>,
        config: ConfigReport,
    ) -> Result<Option<StartupReport>, Error> {
        let (tx, rx) = async_channel::bounded(1);
        self.inner
            .requests
            .send(Request::Round {
                round,
                servers,
                config,
                reply: tx,
            })
            .await
            .map_err(|_| Error::Stopped)?;
        rx.recv().await.map_err(|_| Error::Stopped)
    }

    /// The tool view (live and deferred marked), ordered by qualified name.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.inner
            .shared
            .lock()
            .map(|s| s.tools.clone())
            .unwrap_or_default()
    }

    /// Every known server's state.
    pub fn servers(&self) -> Vec<ServerState> {
        self.inner
            .shared
            .lock()
            .map(|s| s.servers.clone())
            .unwrap_or_default()
    }

    /// One server's full state (status, phase, last error, timings, server info); `None` if
    /// no server of that name is known.
    pub fn server_state(&self, name: &str) -> Option<ServerState> {
        self.servers().into_iter().find(|s| s.name == name)
    }

    /// A server's status, derived from its phase: `Connected`, `Connecting` (opening,
    /// initializing, listing tools, or waiting to reconnect) or `Disconnected` (also for an
    /// unknown name).
    pub fn status(&self, name: &str) -> ServerStatus {
        self.server_state(name)
            .map_or(ServerStatus::Disconnected, |s| s.status)
    }

    /// What discovery found (sources read, shadowed entries, config errors), if the server set
    /// came from discovery.
    pub fn discovery(&self) -> Option<crate::discovery::Discovered> {
        self.inner.discovery.lock().ok().and_then(|d| d.clone())
    }

    /// Call a tool by qualified name with the default timeout. Waits for a deferred tool's
    /// server. A result with `isError` is `Ok`; transport and protocol failures are `Err`.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<ToolResult, Error> {
        self.call_with(tool, arguments, CallOptions::default())
            .await
    }

    /// [`call`](Self::call) with its own timeout. Dropping the future cancels the call and
    /// sends `notifications/cancelled` to the server.
    pub async fn call_with_timeout(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<ToolResult, Error> {
        let options = CallOptions {
            timeout,
            ..CallOptions::default()
        };
        self.call_with(tool, arguments, options).await
    }

    /// Start a call with these options and return its handle at once: [`Call::id`] names
    /// it (as `Event::CallCompleted` and `Event::Progress` do), [`Call::progress`] gives its
    /// progress when asked for, and awaiting it gives the result. Dropping the handle before
    /// it completed cancels the call (`notifications/cancelled` to the server).
    pub fn call_with(&self, tool: &str, arguments: Value, options: CallOptions) -> Call {
        let call = CallId(self.inner.next_call.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = crate::rt::oneshot();
        let (progress_tx, progress) = match options.progress {
            true => {
                let (tx, rx) = async_channel::bounded(self.inner.progress_capacity);
                (Some(tx), Some(rx))
            }
            false => (None, None),
        };
        let request = Request::Call {
            call,
            tool: tool.to_string(),
            arguments: Some(arguments),
            timeout: options.timeout,
            progress: progress_tx,
            reply: tx,
            meta: options.meta,
        };
        Call::start(self.inner.requests.clone(), call, request, rx, progress)
    }

    async fn ask<T>(
        &self,
        request: impl FnOnce(Sender<Result<T, Error>>) -> Request,
    ) -> Result<T, Error> {
        let (tx, rx) = async_channel::bounded(1);
        self.inner
            .requests
            .send(request(tx))
            .await
            .map_err(|_| Error::Stopped)?;
        rx.recv().await.map_err(|_| Error::Stopped)?
    }

    /// Disconnect one server: withdraw its tools, fail its calls, close its transport, and
    /// return once the transport is closed (for stdio: the process group is gone and the
    /// server reaped). [`Error::UnknownServer`] if no server of that name is known.
    pub async fn disconnect(&self, name: &str) -> Result<(), Error> {
        self.ask(|reply| Request::Disconnect {
            server: Some(name.to_string()),
            reply,
        })
        .await
    }

    /// Disconnect every server (pending ones too) and return once every transport is closed.
    pub async fn disconnect_all(&self) -> Result<(), Error> {
        self.ask(|reply| Request::Disconnect {
            server: None,
            reply,
        })
        .await
    }

    /// Re-discover (when the set came from discovery), disconnect all, connect the new set;
    /// returns at the gate. With a fixed list, the set is the builder's list or the last one
    /// given to [`sync`](Self::sync).
    pub async fn reload(&self) -> Result<StartupReport, Error> {
        let source = self
            .inner
            .source
            .lock()
            .map(|s| s.clone())
            .map_err(|_| Error::Stopped)?;
        let (servers, config) = match source {
            ServerSource::Specs(s) => (s, ConfigReport::default()),
            ServerSource::Discover(o) => {
                let d = blocking::unblock(move || crate::discovery::discover(&o)).await;
                let servers = d.servers.clone();
                let config = config_report(&d);
                if let Ok(mut slot) = self.inner.discovery.lock() {
                    *slot = Some(d);
                }
                (servers, config)
            }
        };
        self.round(RoundKind::Reload, servers, config)
            .await?
            .ok_or(Error::Stopped)
    }

    /// Connect more servers (skipping those already connected or pending); returns at the gate.
    pub async fn connect(&self, servers: Vec<ServerSpec>) -> Result<StartupReport, Error> {
        self.round(RoundKind::Connect, servers, ConfigReport::default())
            .await?
            .ok_or(Error::Stopped)
    }

    /// Reconcile to this set: start new servers, restart changed ones and stopped ones it
    /// lists, stop removed ones; every other connection, call and tool is left alone.
    ///
    /// When it started servers, returns at their round's gate with its report, like
    /// [`connect`](Self::connect); when it started none, returns `None` at once (removed
    /// servers are being closed in the background; [`disconnect`](Self::disconnect) waits
    /// for a close).
    ///
    /// With a fixed list (see [`Builder::servers`]), this set becomes the list that
    /// [`reload`](Self::reload) connects. With discovery, `reload` still re-reads the config
    /// files: that is what it is for.
    pub async fn sync(&self, servers: Vec<ServerSpec>) -> Result<Option<StartupReport>, Error> {
        {
            let mut source = self.inner.source.lock().map_err(|_| Error::Stopped)?;
            if let ServerSource::Specs(list) = &mut *source {
                list.clone_from(&servers);
            }
        }
        self.round(RoundKind::Sync, servers, ConfigReport::default())
            .await
    }

    /// Re-read the config files (when the set came from discovery) and [`sync`](Self::sync)
    /// to what they say now: servers whose config did not change keep running (their
    /// connections, calls and tools untouched), new ones start, changed ones restart,
    /// removed ones stop; [`discovery`](Self::discovery) then reports the new reading. With a
    /// fixed list of servers there is nothing to re-read: `Ok(None)`. What `serve` runs when
    /// a config file it read changes.
    pub async fn rediscover(&self) -> Result<Option<StartupReport>, Error> {
        let source = self
            .inner
            .source
            .lock()
            .map(|s| s.clone())
            .map_err(|_| Error::Stopped)?;
        let ServerSource::Discover(o) = source else {
            return Ok(None);
        };
        let d = blocking::unblock(move || crate::discovery::discover(&o)).await;
        self.sync_discovered(d).await
    }

    /// [`sync`](Self::sync) to what a discovery found: [`discovery`](Self::discovery) reports
    /// it from now on (what awaits approval among it), and its config problems go into the
    /// report. The second half of [`rediscover`](Self::rediscover), for an embedder that
    /// discovers by itself: discovered again with the same
    /// [`DiscoveryOptions`](crate::discovery::DiscoveryOptions) — the `${input:id}` answers
    /// given once in its `inputs`, every `${file:…}` read again — a server whose values
    /// changed restarts and the others keep running.
    pub async fn sync_discovered(
        &self,
        found: crate::discovery::Discovered,
    ) -> Result<Option<StartupReport>, Error> {
        let servers = found.servers.clone();
        let config = config_report(&found);
        if let Ok(mut slot) = self.inner.discovery.lock() {
            *slot = Some(found);
        }
        self.round(RoundKind::Sync, servers, config).await
    }

    /// Re-list one server's tools and return once the new list is in the view (a server that
    /// is still connecting: once its first list is). Errors: [`Error::UnknownServer`],
    /// [`Error::NotConnected`] for a failed, stopped or backing-off server, [`Error::Refresh`]
    /// with the [`RefreshError`](crate::RefreshError) when the list fails (the previous list
    /// stays) or the connection is lost.
    pub async fn refresh_tools(&self, name: &str) -> Result<(), Error> {
        self.ask(|reply| Request::Refresh {
            server: name.to_string(),
            reply,
        })
        .await
    }

    /// A new subscription to the core's events (tool and status changes, diagnostics,
    /// startup reports, request completions, ...), from now on. Bounded: a subscriber that
    /// does not keep up reads [`RecvError::Lagged`](crate::RecvError::Lagged) where it
    /// missed some (see [`QueueOptions::events`]).
    pub fn events(&self) -> Events {
        self.inner.subscribers.subscribe()
    }

    /// Close every transport (stdin, SIGTERM, SIGKILL to each process group) and return when
    /// every process is reaped.
    pub async fn shutdown(&self) {
        let (tx, rx) = async_channel::bounded(1);
        if self
            .inner
            .requests
            .send(Request::Shutdown { reply: tx })
            .await
            .is_ok()
        {
            let _ = rx.recv().await;
        }
        let task = self.inner.driver.lock().ok().and_then(|mut d| d.take());
        if let Some(task) = task {
            task.await;
        }
        crate::process::sweep_after_close().await;
    }

    /// Replace the roots answered to `roots/list`; every initialized server is sent
    /// `notifications/roots/list_changed` (when the `roots` capability was declared, see
    /// [`Builder::roots`]).
    pub async fn set_roots(&self, roots: Vec<Root>) -> Result<(), Error> {
        self.inner
            .requests
            .send(Request::Input(switchboard_core::Input::SetRoots { roots }))
            .await
            .map_err(|_| Error::Stopped)
    }

    /// Process ids of every live child process group (for tests and `status`).
    pub fn live_processes(&self) -> Vec<u32> {
        self.inner.registry.pids()
    }
}
