//! The one test binary: integration, property and snapshot tests. Each module protects one
//! area; snapshots live in the top-level `snapshots/` folder.

mod sim_explore;
mod sim_fuzz_corpus;
mod sim_prop;
mod sim_snapshots;
mod support;

mod bounds;
mod catalog_traces;
mod cli;
mod cli_catalog;
mod cli_progress;
mod config;
mod conformance;
mod core_traces;
mod demo_server;
mod discovery;
mod disk_cache;
mod embedding;
mod everything_modes;
mod http_bench;
mod http_edge;
mod http_load;
mod http_peers;
mod http_resume;
mod hygiene;
mod input_bounds;
mod names;
mod peer_requests;
mod peers;
mod policies;
mod protocol;
mod script;
mod sdk_examples;
mod secrets;
mod serve;
mod shell;
mod shell_policies;
mod stdio;
mod tasks;
mod terminal_safety;
