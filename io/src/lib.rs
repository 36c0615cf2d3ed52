//! Switchboard: run many MCP servers for an agent runtime.
//!
//! This crate is the smol shell around the sans-IO core ([`core`], crate
//! `switchboard-core`): it runs the core's decisions against real processes, files and the
//! clock, and offers the async library API — [`Builder`] and [`Switchboard`]. It works from
//! any executor; the examples use `smol::block_on`. Its tasks (one driver that owns the core,
//! and each transport's readers, writers and supervisors) run on the library's own executor thread
//! unless the embedder names where they run: [`Builder::spawner`] takes any executor's spawn
//! function (tokio's, for instance: the IO reactor works under any executor), and
//! [`Builder::executor`] a `smol::Executor`. Callers on the threads that run those tasks
//! never hand a call to another thread (the fastest setup).
//!
//! Everything an embedder needs is at the crate root: the builder and handle, calls
//! ([`Call`], [`CallOptions`]), the core's [`Event`] (as the core produced it) and its typed
//! errors ([`CallError`], [`ServerError`], [`RefreshError`]), the API's [`Error`], the server
//! configs ([`ServerSpec`], [`ServerConfig`]), discovery
//! ([`discover`], [`DiscoveryOptions`], [`Discovered`]), transport tuning ([`StdioOptions`],
//! [`HttpOptions`]) and [`CredentialProvider`]. The rest of the core's types are under
//! [`core`]. The transports (stdio process groups; Streamable HTTP and legacy HTTP+SSE on
//! hyper with rustls), the disk tool cache and secret resolution are internal.
//!
//! # Example
//!
//! Every server fails or succeeds on its own: here one command does not exist and the other
//! exits at once, and the switchboard still starts, with each error in the startup report.
//! (The [`Switchboard`] docs show a real server.)
//!
//! ```
//! use switchboard::core::config::{ServerConfig, ServerSpec};
//! use switchboard::{Builder, Error, ServerStatus};
//!
//! smol::block_on(async {
//!     let (sb, report) = Builder::servers(vec![
//!         ServerSpec::new("missing", ServerConfig::stdio("/nonexistent/mcp-server", &[])),
//!         ServerSpec::new("quits", ServerConfig::stdio("sh", &["-c", "echo bye >&2; exit 3"])),
//!     ])
//!     .no_cache()
//!     .start()
//!     .await?;
//!     for (server, error) in &report.errors {
//!         println!("{server}: {error}");
//!     }
//!     assert!(report.errors["missing"].message.contains("/nonexistent/mcp-server"));
//!     assert!(report.errors.contains_key("quits"));
//!     assert_eq!(sb.status("quits"), ServerStatus::Disconnected);
//!     assert!(sb.tools().is_empty());
//!
//!     // A tool nobody offers is an error of that call, not of the switchboard.
//!     let err = sb.call("mcp_quits_echo", serde_json::json!({})).await.unwrap_err();
//!     assert!(matches!(err, Error::Call(_)), "{err}");
//!
//!     sb.shutdown().await;
//!     assert!(sb.live_processes().is_empty());
//!     Ok::<(), Error>(())
//! })
//! .unwrap();
//! ```

#![warn(missing_docs)]

pub use switchboard_core as core;

mod api;
pub mod auth;
mod cache;
mod call;
mod discovery;
mod driver;
mod events;
mod files;
mod http;
mod peer;
mod proc;
pub mod process;
mod rt;
mod schema;
mod secrets;
pub mod serve;
mod stdio;
mod trust;
mod units;

pub use api::{Builder, Error, QueueOptions, ServerSource, Switchboard};
pub use call::{Call, CallOptions};
pub use discovery::{
    discover, Discovered, DiscoveryOptions, LookedAt, Variables, MAX_VARIABLE_FILE_BYTES,
};
pub use driver::link::Progress;
pub use events::{Events, RecvError, EVENT_QUEUE_LEN};
pub use http::HttpOptions;
pub use peer::{
    form_defaults, ElicitationHandler, PeerAnswer, PeerFuture, PeerRequest, PeerRequestKind,
    RootsHandler, SamplingHandler,
};
pub use rt::TaskFuture;
pub use schema::JsonSchemaValidator;
pub use secrets::{CredentialFuture, CredentialProvider};
pub use stdio::{StdioOptions, MINIMAL_ENV};
pub use switchboard_core::config::{DenyList, ServerConfig, ServerSpec, TransportConfig};
pub use switchboard_core::manager::{
    CallError, CallId, CallOutcome, ConnId, Era, Event, Level, ManagerOptions, OutputProblem,
    Phase, ProtocolPolicy, RefreshError, RequestError, RequestId, ServerError, ServerErrorKind,
};
pub use switchboard_core::protocol::Root;
pub use switchboard_core::schema::SchemaMismatch;
pub use switchboard_core::{
    NamingScheme, ServerState, ServerStatus, StartupReport, Tool, ToolResult,
};
pub use trust::{TrustEntry, TrustStore};

/// The internals the workspace's own tests drive directly (transports without a switchboard,
/// the disk cache, secret resolution). Not part of the API: anything here may change in any
/// release.
#[doc(hidden)]
pub mod __test {
    /// See the crate's stdio transport.
    pub mod stdio {
        pub use crate::stdio::*;
    }
    /// See the crate's HTTP transports.
    pub mod http {
        pub use crate::http::*;
    }
    /// See the crate's disk tool cache.
    pub mod cache {
        pub use crate::cache::*;
    }
    /// See the crate's secret resolution.
    pub mod secrets {
        pub use crate::secrets::*;
    }
}
