//! Every input the command line reads has a bound, and an input that is not a file is refused
//! at once: `--config` naming a device or a FIFO, a discovered `.mcp.json` symlinked to
//! `/dev/zero` (an error for that file; the other configs still count), a config past the
//! size limit, and `call TOOL -` fed more than its limit on stdin.

use crate::support::{demo_server_bin, switchboard_bin};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn switchboard(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(switchboard_bin());
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    cmd.current_dir(dir)
        .env_remove("RUST_LOG")
        .env("HOME", &home)
        .env_remove("XDG_DATA_HOME")
        .env("XDG_CACHE_HOME", dir.join("xdg-cache"))
        .args(args);
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_config_that_is_a_device_or_a_fifo_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = switchboard(dir.path(), &["status", "--config", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/dev/zero: cannot read: not a regular file (a character device)"),
        "{}",
        stderr(&out)
    );
    // A FIFO with no writer: a blocking open would hang here forever.
    let fifo = dir.path().join("mcp.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = switchboard(dir.path(), &["status", "--config", fifo.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a regular file (a FIFO)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_discovered_config_linked_to_dev_zero_is_an_error_for_that_file_only() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join(".mcp.json")).unwrap();
    let cursor = dir.path().join(".cursor");
    std::fs::create_dir_all(&cursor).unwrap();
    let config = json!({"mcpServers": {"fine": {
        "command": demo_server_bin().to_string_lossy(), "args": ["--name", "fine"]}}});
    std::fs::write(cursor.join("mcp.json"), config.to_string()).unwrap();
    let out = switchboard(
        dir.path(),
        &["status", "--json", "--no-cache", "--trust-project"],
    )
    .output()
    .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        )
    });
    let text = report.to_string();
    assert!(
        text.contains("not a regular file (a character device)"),
        "{text}"
    );
    assert!(
        text.contains("\"fine\""),
        "the other config was not used: {text}"
    );
}

#[test]
fn a_config_over_the_size_limit_is_an_error_not_memory() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(5 * 1024 * 1024).unwrap(); // sparse: 5 MiB of zeros
    let out = switchboard(dir.path(), &["status", "--config", big.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("larger than the 4 MiB a file may have"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn call_arguments_on_stdin_past_their_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(&config, json!({"mcpServers": {}}).to_string()).unwrap();
    let mut child = switchboard(
        dir.path(),
        &[
            "call",
            "mcp_x_y",
            "-",
            "--config",
            config.to_str().unwrap(),
            "--no-project-config",
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let chunk = vec![b' '; 1 << 20];
    // 17 MiB, then more until switchboard stops reading (a write error means it closed stdin).
    for _ in 0..64 {
        if stdin.write_all(&chunk).is_err() {
            break;
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the arguments on stdin are larger than 16 MiB"),
        "{}",
        stderr(&out)
    );
}
