//! Switchboard's smol shell: runs the sans-IO core against real processes, files and the
//! clock. (Filled in by the shell issue.)

pub use switchboard_core as core;

pub mod cache;
pub mod discovery;
pub mod secrets;
pub mod stdio;
