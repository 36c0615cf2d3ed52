#![no_main]
//! cargo-fuzz target; the logic lives in `switchboard_sim::fuzz::config_parse` so a stable test can
//! replay the committed corpus.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    switchboard_sim::fuzz::config_parse(data);
});
