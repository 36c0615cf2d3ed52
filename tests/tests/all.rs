//! The one test binary: integration, property and snapshot tests. Each module protects one
//! area; snapshots live in the top-level `snapshots/` folder.

mod disk_cache;
mod secrets;
mod stdio;
mod support;
