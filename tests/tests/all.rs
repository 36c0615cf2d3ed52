//! The one test binary: integration, property and snapshot tests. Each module protects one
//! area; snapshots live in the top-level `snapshots/` folder.

mod demo_server;
mod support;

mod core_traces;
mod disk_cache;
mod protocol;
mod script;
mod secrets;
mod stdio;
