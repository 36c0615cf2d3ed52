//! The tests that need the real MCP peers (npm and pip servers, the conformance suite) are
//! compiled as ignored unless `SWITCHBOARD_PEERS=1`: a run without them lists them as
//! ignored instead of passing them silently. `./scripts/test.sh` installs the peers and sets
//! the variable.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(peers)");
    println!("cargo::rerun-if-env-changed=SWITCHBOARD_PEERS");
    if std::env::var("SWITCHBOARD_PEERS").as_deref() == Ok("1") {
        println!("cargo::rustc-cfg=peers");
    }
}
