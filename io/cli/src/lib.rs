//! The code the package's two binaries share: the demo MCP server, which runs both as
//! `mcp-demo-server` and as the hidden `switchboard __demo-server` subcommand (so that
//! `cargo run -- demo`, which builds only `switchboard`, needs no second binary).
//!
//! The command line itself lives in the `switchboard` binary (`src/main.rs`, `src/cli/`): it is
//! an embedder of the `switchboard` library like any other, through its public API only.

pub mod demo_server;
