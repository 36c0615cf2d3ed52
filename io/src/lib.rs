//! Switchboard: run many MCP servers for an agent runtime.
//!
//! This crate is the smol shell around the sans-IO core ([`core`], crate
//! `switchboard-core`): it runs the core's decisions against real processes, files and the
//! clock, and offers the async library API — [`Builder`] and [`Switchboard`]. It works from
//! any executor; the examples use `smol::block_on`. Its tasks run on smol's global executor
//! unless the embedder hands it an executor of its own with [`Builder::executor`]; callers on
//! the thread that runs that executor then never cross threads (the fastest setup).
//!
//! - [`driver`]-internal: one task owns the core `Manager`, performs its commands, and feeds
//!   back what it observes.
//! - [`stdio`]: child processes in their own process groups, newline-delimited JSON, the MCP
//!   close sequence, and a synchronous kill of every group when the handle is dropped.
//! - [`http`]: Streamable HTTP and legacy HTTP+SSE on hyper's HTTP/1.1 client, driven by
//!   smol, with rustls; per-transport connection pools, sessions, resumable SSE.
//! - [`cache`]: the on-disk tool cache (atomic writes, TTL, config-hash keyed).
//! - [`discovery`]: where each client keeps its MCP config.
//! - [`secrets`]: `!command` values and the credential provider.
//! - [`demo_server`]: the standalone demo MCP server (binary `mcp-demo-server`, and
//!   `switchboard __demo-server`).
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
//!     assert!(report.errors["missing"].contains("/nonexistent/mcp-server"));
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
pub mod cache;
pub mod demo_server;
pub mod discovery;
mod driver;
pub mod http;
mod rt;
pub mod secrets;
pub mod stdio;

pub use api::{Builder, Error, ServerSource, Switchboard};
pub use driver::Event;
pub use switchboard_core::{ServerState, ServerStatus, StartupReport, Tool, ToolResult};
