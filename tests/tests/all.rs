//! The one test binary: integration, property and snapshot tests. Each module protects one
//! area; snapshots live in the top-level `snapshots/` folder.

mod core_traces;
mod script;
mod sim_explore;
mod sim_fuzz_corpus;
mod sim_prop;
mod sim_snapshots;
mod support;
