//! mcp-demo-server's command line. (Its protocol behaviour is tested in the tests crate; this
//! file also makes `cargo test --workspace` build the binary those tests run.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-demo-server");

#[test]
fn demo_server_help_documents_every_flag() {
    let output = Command::new(BIN)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--name",
        "--tools",
        "--page-size",
        "--init-delay-ms",
        "--list-delay-ms",
        "--call-delay-ms",
        "--fail-init",
        "--fail-list",
        "--hang-init",
        "--crash-after-ms",
        "--stall-after-ms",
        "--garbage-stdout",
        "--oversized-frame",
        "--ignore-sigterm",
        "--spawn-grandchild",
        "--list-changed-after-ms",
    ] {
        assert!(help.contains(flag), "--help does not mention {flag}");
    }
}

#[test]
fn demo_server_rejects_unknown_flags_with_exit_code_two() {
    let output = Command::new(BIN)
        .arg("--no-such-flag")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--no-such-flag"));
}
