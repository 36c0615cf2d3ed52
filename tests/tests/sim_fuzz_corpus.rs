//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the same functions the
//! cargo-fuzz targets call, so CI checks every saved input without nightly.

use std::path::Path;

fn replay(target: &str, f: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "empty corpus for {target}");
    for path in files {
        let data = std::fs::read(&path).unwrap_or_default();
        let r = std::panic::catch_unwind(|| f(&data));
        assert!(r.is_ok(), "{target} panicked on {}", path.display());
    }
}

#[test]
fn fuzz_corpus_config_parse_replays_clean() {
    replay("config_parse", switchboard_sim::fuzz::config_parse);
}

#[test]
fn fuzz_corpus_frame_decode_replays_clean() {
    replay("frame_decode", switchboard_sim::fuzz::frame_decode);
}

#[test]
fn fuzz_corpus_manager_inputs_replays_clean() {
    replay("manager_inputs", switchboard_sim::fuzz::manager_inputs);
}
