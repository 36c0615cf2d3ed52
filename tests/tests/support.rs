//! Shared helpers for the tests.
#![allow(dead_code)]

/// Run `f` with insta configured to keep snapshots in the top-level `snapshots/` folder.
pub fn with_snapshots<R>(f: impl FnOnce() -> R) -> R {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(f)
}
