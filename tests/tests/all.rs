//! The one test binary: integration, property and snapshot tests. Each module protects one
//! area; snapshots live in the top-level `snapshots/` folder.

mod support;

mod names;
