//! The fixture corpus: each client's documented examples, verbatim in shape, laid out in one
//! home directory and one project (`tests/fixtures/configs/{home,project}`), and what
//! discovery makes of them all at once: servers, sources, transports, arguments, environment,
//! working directories, headers, filters, timeouts, approvals, and every file looked at,
//! shadowed entry, skipped entry, error and warning. The snapshot is the expected result.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use switchboard::{discover, Discovered, DiscoveryOptions};
use switchboard_core::config::{expand_vars, DenyList};

struct Corpus {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

fn copy_tree(from: &Path, to: &Path, project: &str) {
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target, project);
        } else {
            let text = fs::read_to_string(entry.path()).unwrap();
            fs::write(&target, text.replace("@PROJECT@", project)).unwrap();
        }
    }
}

/// The corpus in a fresh temporary home and project (`@PROJECT@` in a fixture is the
/// project's path, as `~/.claude.json` and Gemini's trusted folders key it).
fn corpus() -> Corpus {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let project = root.join("work/app");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&project).unwrap();
    // The project is a repository: clients that walk up from the working directory stop here.
    fs::create_dir_all(project.join(".git")).unwrap();
    let fixtures = crate::support::repo_root().join("tests/fixtures/configs");
    let key = project.to_string_lossy().into_owned();
    copy_tree(&fixtures.join("home"), &home, &key);
    copy_tree(&fixtures.join("project"), &project, &key);
    // System-wide files (Claude Code's managed settings) under their own root.
    fs::create_dir_all(root.join("system")).unwrap();
    copy_tree(&fixtures.join("system"), &root.join("system"), &key);
    Corpus {
        _tmp: tmp,
        root,
        home,
        project,
    }
}

/// The environment the corpus is read with: some of the variables its examples name are
/// set, some are not (those are warnings).
fn env(c: &Corpus) -> BTreeMap<String, String> {
    [
        ("HOME", c.home.to_string_lossy().as_ref()),
        ("PATH", "/usr/bin:/bin"),
        ("API_KEY", "from-env"),
        ("MY_SERVICE_TOKEN", "service-token"),
        ("DB_CONNECTION_STRING", "postgres://db"),
        ("LOCAL_TOKEN", "local-token"),
        ("COPILOT_TOKEN", ""),
        (
            "SWITCHBOARD_SYSTEM_ROOT",
            c.root.join("system").to_string_lossy().as_ref(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn options(c: &Corpus) -> DiscoveryOptions {
    DiscoveryOptions {
        project_dir: c.project.clone(),
        home_dir: Some(c.home.clone()),
        project_configs: true,
        explicit_files: Vec::new(),
        deny: DenyList::default(),
        trust_project: false,
        trust_store: Some(c.home.join(".local/share/switchboard/trust.json")),
        env: env(c),
        inputs: BTreeMap::new(),
    }
}

/// Paths relative to the corpus: `@HOME@/…`, `@PROJECT@/…`.
fn rel(c: &Corpus, text: &str) -> String {
    text.replace(&*c.project.to_string_lossy(), "@PROJECT@")
        .replace(&*c.home.to_string_lossy(), "@HOME@")
        .replace(&*c.root.to_string_lossy(), "@ROOT@")
}

/// What each server will be started with: every value as the manager expands it.
fn summary(c: &Corpus, d: &Discovered) -> Value {
    let mut vars = env(c);
    vars.extend(d.variables.0.clone());
    let x = |s: &str| rel(c, &expand_vars(s, &vars));
    let map = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter().map(|(k, v)| (k.clone(), x(v))).collect()
    };
    let servers: Vec<Value> = d
        .servers
        .iter()
        .map(|s| {
            let cfg = &s.config;
            json!({
                "name": s.name,
                "source": format!("{} {:?} {}", s.source.provider, s.source.level,
                    rel(c, &s.source.path)),
                "transport": cfg.transport_kind().unwrap().as_str(),
                "command": cfg.command.as_deref().map(x),
                "args": cfg.args.iter().map(|a| x(a)).collect::<Vec<_>>(),
                "env": map(&cfg.env),
                "cwd": cfg.cwd.as_deref().map(x),
                "url": cfg.url.as_deref().map(x),
                "headers": map(&cfg.headers),
                "enabled_tools": cfg.enabled_tools,
                "disabled_tools": cfg.disabled_tools,
                "connect_timeout_ms": cfg.timeout_ms,
                "call_timeout_ms": cfg.call_timeout_ms,
                "approved_by": d.approved.iter().find(|a| a.server == s.name)
                    .map(|a| a.by.as_str()),
            })
        })
        .collect();
    json!({
        "servers": servers,
        "awaiting_approval": d.awaiting.iter()
            .map(|a| format!("{} ({})", a.server, rel(c, &a.source.path)))
            .collect::<Vec<_>>(),
        "skipped": d.skipped.iter()
            .map(|s| format!("{} ({}): {:?}", s.server, rel(c, &s.source.path), s.reason))
            .collect::<Vec<_>>(),
        "shadowed": d.shadowed.iter()
            .map(|s| format!("{}: {} loses to {}", s.server, rel(c, &s.shadowed.path),
                rel(c, &s.winner.path)))
            .collect::<Vec<_>>(),
        "errors": d.errors.iter().map(|e| rel(c, &e.to_string())).collect::<Vec<_>>(),
        "warnings": d.warnings.iter()
            .map(|w| format!("{} ({})", w, rel(c, &w.source.path)))
            .collect::<Vec<_>>(),
        "inputs_needed": d.inputs_needed.iter().map(|i| i.id.clone()).collect::<Vec<_>>(),
        "looked_at": d.looked_at.iter()
            .map(|l| format!("{} {:?} {} {}", l.source.provider, l.source.level,
                rel(c, &l.source.path), if l.found { "found" } else { "-" }))
            .collect::<Vec<_>>(),
    })
}

#[test]
fn every_clients_documented_examples_at_once() {
    let c = corpus();
    let found = discover(&options(&c));
    crate::support::with_snapshots(|| {
        insta::assert_json_snapshot!("config_corpus", summary(&c, &found));
    });
}

#[test]
fn an_answered_input_runs_its_server_with_the_answer() {
    let c = corpus();
    let mut o = options(&c);
    o.inputs
        .insert("perplexity-key".into(), "typed-by-a-person".into());
    o.trust_project = true;
    let found = discover(&o);
    assert!(found.inputs_needed.is_empty());
    let s = found
        .servers
        .iter()
        .find(|s| s.name == "perplexity")
        .expect("perplexity runs");
    // The config keeps the reference; the answer is a variable, never in a report.
    assert_eq!(
        s.config.env["PERPLEXITY_API_KEY"],
        "${input:perplexity-key}"
    );
    assert_eq!(
        found.variables.0["input:perplexity-key"],
        "typed-by-a-person"
    );
    assert!(!format!("{found:?}").contains("typed-by-a-person"));
}

fn cli(c: &Corpus, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    let mut cmd = std::process::Command::new(crate::support::switchboard_bin());
    cmd.current_dir(&c.project)
        .env_clear()
        .envs(env(c))
        .env("XDG_CACHE_HOME", c.home.join("cache"))
        .env("XDG_DATA_HOME", c.home.join(".local/share"))
        .args(args);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn config_lists_every_file_looked_at_and_what_it_gave() {
    let c = corpus();
    let out = cli(&c, &["config", "--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    let file = |suffix: &str| {
        files
            .iter()
            .find(|f| f["source"]["path"].as_str().unwrap().ends_with(suffix))
            .unwrap_or_else(|| panic!("{suffix} in {files:#?}"))
    };
    // Looked at and not there.
    assert_eq!(file(".switchboard/mcp.json")["found"], false);
    let codex = file("home/.codex/config.toml");
    assert_eq!(codex["found"], true);
    // The project's file (Codex trusts the project) changes keys of two user servers: the
    // merged entries are the project's.
    assert_eq!(codex["used"], json!(["figma"]));
    let project_codex = file("work/app/.codex/config.toml");
    assert_eq!(project_codex["used"], json!(["context7"]));
    let cline = file("cline_mcp_settings.json");
    assert_eq!(cline["shadowed"].as_array().unwrap().len(), 2, "{cline:#}");
    let cursor = file("work/app/.cursor/mcp.json");
    assert_eq!(cursor["awaiting_approval"], json!(["local-server"]));
    let vscode = file("work/app/.vscode/mcp.json");
    assert!(
        vscode["errors"][0]
            .as_str()
            .unwrap()
            .contains("input:perplexity-key"),
        "{vscode:#}"
    );
    let roo = file(".roo/mcp.json");
    assert_eq!(roo["warnings"][0]["warning"], "ignored_field");
    assert_eq!(roo["warnings"][0]["field"], "alwaysAllow");
    // Environment and header values are never shown, only their names.
    let server = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "context7")
        .unwrap();
    assert_eq!(server["env"], json!(["LOCAL_TOKEN", "MY_ENV_VAR"]));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("local-token"));
    let text = cli(&c, &["config"], &[]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("not found"), "{text}");
    assert!(text.contains("awaiting approval: local-server"), "{text}");
}

/// With `--minimal-env`, a stdio server sees only the minimal set of the parent's variables
/// plus its config's own `env` and Codex `env_vars`; without it, everything.
#[test]
fn minimal_env_passes_only_the_allowlist_and_the_configs_own() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let project = root.join("p");
    fs::create_dir_all(home.join(".codex")).unwrap();
    fs::create_dir_all(&project).unwrap();
    let demo = crate::support::demo_server_bin();
    let seen = root.join("seen");
    // The server writes its environment, then is the demo server.
    let script = format!(
        "env > '{}'; exec '{}' --name e",
        seen.display(),
        demo.display()
    );
    let toml = format!(
        "[mcp_servers.e]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n\
         env_vars = [\"FORWARDED\", \"NOT_SET_ANYWHERE\"]\n[mcp_servers.e.env]\nOWN = \"mine\"\n"
    );
    fs::write(home.join(".codex/config.toml"), toml).unwrap();
    let run = |minimal: bool| {
        let mut cmd = std::process::Command::new(crate::support::switchboard_bin());
        cmd.current_dir(&project)
            .env("HOME", &home)
            .env("GH_TOKEN", "must-not-leak")
            .env("FORWARDED", "forwarded-value")
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env_remove("CODEX_HOME")
            .args(["status", "--json", "--no-cache"]);
        if minimal {
            cmd.arg("--minimal-env");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["servers"][0]["status"], "connected", "{v:#}");
        // An `env_vars` name that is unset is not forwarded, and `status` says so.
        assert_eq!(
            v["config_warnings"][0]["warning"], "empty_variable",
            "{v:#}"
        );
        assert_eq!(v["config_warnings"][0]["variable"], "NOT_SET_ANYWHERE");
        let text = fs::read_to_string(&seen).unwrap();
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    let all = run(false);
    assert_eq!(all["GH_TOKEN"], "must-not-leak");
    let minimal = run(true);
    assert!(!minimal.contains_key("GH_TOKEN"), "{minimal:?}");
    assert_eq!(minimal["OWN"], "mine");
    assert_eq!(minimal["FORWARDED"], "forwarded-value");
    assert_eq!(minimal["HOME"], home.to_string_lossy());
    assert!(minimal.contains_key("PATH"));
    let unexpected: Vec<_> = minimal
        .keys()
        .filter(|k| {
            !switchboard::MINIMAL_ENV.contains(&k.as_str())
                && !["OWN", "FORWARDED", "PWD", "SHLVL", "_", "OLDPWD"].contains(&k.as_str())
        })
        .collect();
    assert!(unexpected.is_empty(), "{unexpected:?}");
}

/// Every read of a config file or a file a config names is bounded: a FIFO, a device or a
/// huge file is an error at once for that file, never a hang.
#[test]
fn fifos_devices_and_huge_files_are_refused_at_once() {
    let c = corpus();
    let fifo = c.project.join("envfifo");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    fs::write(
        c.project.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"f": {"command": "x", "envFile": "envfifo"},
            "z": {"command": "x", "envFile": "/dev/zero"},
            "big": {"command": "x", "envFile": "big.env"}}}"#,
    )
    .unwrap();
    let big = fs::File::create(c.project.join("big.env")).unwrap();
    big.set_len(1 << 30).unwrap();
    // A config file that is a FIFO.
    fs::remove_file(c.project.join(".roo/mcp.json")).unwrap();
    let roo = std::ffi::CString::new(c.project.join(".roo/mcp.json").to_str().unwrap()).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::mkfifo(roo.as_ptr(), 0o600) }, 0);
    let found = discover(&options(&c));
    let errors: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
    let has = |needle: &str| errors.iter().any(|e| e.contains(needle));
    assert!(has("Server \"f\": envFile"), "{errors:#?}");
    assert!(has("FIFO"), "{errors:#?}");
    assert!(has("character device"), "{errors:#?}");
    assert!(has("larger than the 1 MiB"), "{errors:#?}");
    assert!(
        has(".roo/mcp.json: cannot read: not a regular file (a FIFO)"),
        "{errors:#?}"
    );
}

/// An approval binds to the config, which keeps `${input:id}` as a reference: a server whose
/// input nobody answered yet can still be approved without a terminal, and runs once
/// answered.
#[test]
fn a_server_waiting_for_an_input_can_be_approved_without_a_terminal() {
    let c = corpus();
    let out = cli(&c, &["trust", "perplexity"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut o = options(&c);
    o.inputs.insert("perplexity-key".into(), "answer".into());
    let found = discover(&o);
    let approved = found.approved.iter().find(|a| a.server == "perplexity");
    assert_eq!(
        approved.map(|a| a.by.as_str()),
        Some("switchboard trust"),
        "{found:#?}"
    );
    assert!(found.servers.iter().any(|s| s.name == "perplexity"));
}
