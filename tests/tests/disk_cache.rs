//! The disk tool cache: round trips, every kind of miss (TTL, another config, another version,
//! corruption), and atomic writes under concurrent writers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchboard::__test::cache::{ToolCache, DEFAULT_TTL};
use switchboard_core::{CacheKey, RawJson, ToolDef};

const NOW: u64 = 1_700_000_000_000;

fn key(server: &str, hash: &str) -> CacheKey {
    CacheKey {
        server: server.to_string(),
        config_hash: hash.to_string(),
    }
}

const HASH_A: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// Shares HASH_A's first 16 hex digits, so both keys map to the same file.
const HASH_A2: &str = "0123456789abcdefffffffffffffffffffffffffffffffffffffffffffffffff";

fn tools(names: &[&str]) -> Vec<ToolDef> {
    names
        .iter()
        .map(|n| {
            let mut t = ToolDef::named(*n);
            t.description = Some(format!("the {n} tool").into());
            t
        })
        .collect()
}

#[test]
fn stored_tools_load_back() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path().join("tools"));
    let k = key("git hub", HASH_A);
    assert_eq!(cache.load(&k, NOW), None, "empty cache is a miss");
    let stored = tools(&["search", "open_issue"]);
    cache.store(&k, &stored, NOW).unwrap();
    assert_eq!(cache.load(&k, NOW + 1), Some(stored.clone()));

    // The file is the documented format.
    let path = cache.path_for(&k);
    assert_eq!(
        path.file_name().unwrap().to_str().unwrap(),
        "git_hub-0123456789abcdef.json"
    );
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(file["version"], 1);
    assert_eq!(file["server"], "git hub");
    assert_eq!(file["config_hash"], HASH_A);
    assert_eq!(file["written_at_unix_ms"], NOW);
    assert_eq!(file["tools"].as_array().unwrap().len(), 2);

    // A second store replaces the entry.
    let newer = tools(&["search"]);
    cache.store(&k, &newer, NOW + 5).unwrap();
    assert_eq!(cache.load(&k, NOW + 6), Some(newer));
}

#[test]
fn entries_older_than_the_ttl_are_misses() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    assert_eq!(cache.ttl(), DEFAULT_TTL);
    let k = key("s", HASH_A);
    cache.store(&k, &tools(&["t"]), NOW).unwrap();
    let ttl_ms = DEFAULT_TTL.as_millis() as u64;
    assert!(
        cache.load(&k, NOW + ttl_ms).is_some(),
        "exactly the TTL old"
    );
    assert_eq!(cache.load(&k, NOW + ttl_ms + 1), None, "older than the TTL");
    assert!(
        cache.load(&k, NOW - 10_000).is_some(),
        "clock went back: still fresh"
    );

    let short = ToolCache::new(dir.path()).with_ttl(Duration::from_secs(60));
    assert!(short.load(&k, NOW + 60_000).is_some());
    assert_eq!(short.load(&k, NOW + 60_001), None);
}

#[test]
fn another_config_hash_or_server_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    cache.store(&key("s", HASH_A), &tools(&["t"]), NOW).unwrap();
    // Same file name (same 16-digit prefix), different full hash.
    assert_eq!(
        cache.path_for(&key("s", HASH_A)),
        cache.path_for(&key("s", HASH_A2))
    );
    assert_eq!(cache.load(&key("s", HASH_A2), NOW), None);
    // Different prefix: different file, also a miss.
    assert_eq!(cache.load(&key("s", &"f".repeat(64)), NOW), None);
    // Servers whose names sanitize alike never see each other's tools.
    assert_eq!(
        cache.path_for(&key("s", HASH_A)),
        cache.path_for(&key("s", HASH_A))
    );
    cache
        .store(&key("a.b", HASH_A), &tools(&["dot"]), NOW)
        .unwrap();
    assert_eq!(cache.load(&key("a_b", HASH_A), NOW), None);
    assert_eq!(cache.load(&key("a.b", HASH_A), NOW), Some(tools(&["dot"])));
}

#[test]
fn entries_of_another_version_are_misses() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    let k = key("s", HASH_A);
    let entry = serde_json::json!({
        "version": 2,
        "server": "s",
        "config_hash": HASH_A,
        "written_at_unix_ms": NOW,
        "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
    });
    std::fs::write(cache.path_for(&k), serde_json::to_vec(&entry).unwrap()).unwrap();
    assert_eq!(cache.load(&k, NOW), None);
}

/// Schemas are kept as the server sent them (raw JSON text). Version 1 entries written before
/// that (schemas re-serialized from a `Value`, keys sorted) load as they are, and a stored
/// schema comes back byte for byte, key order included.
#[test]
fn schemas_round_trip_as_text_and_older_version_1_entries_load() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    let k = key("s", HASH_A);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    });
    let older = serde_json::json!({
        "version": 1,
        "server": "s",
        "config_hash": HASH_A,
        "written_at_unix_ms": NOW,
        "tools": [{
            "name": "t",
            "description": "d",
            "inputSchema": schema,
            "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true},
        }],
    });
    std::fs::write(cache.path_for(&k), serde_json::to_vec(&older).unwrap()).unwrap();
    let loaded = cache.load(&k, NOW).expect("a version 1 entry loads");
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].input_schema.to_value(), schema);
    assert_eq!(
        loaded[0].annotations.as_ref().map(RawJson::to_value),
        Some(serde_json::json!({"readOnlyHint": true}))
    );

    let mut t = ToolDef::named("u");
    let text = r#"{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}"#;
    t.input_schema = serde_json::from_str(text).unwrap();
    cache.store(&k, &[t.clone()], NOW).unwrap();
    let back = cache.load(&k, NOW).unwrap();
    assert_eq!(back, vec![t]);
    assert_eq!(back[0].input_schema.get(), text);
}

/// Every part of a listed tool the view keeps (title, schemas, annotations, icons, `_meta`,
/// `execution`) is stored and comes back byte for byte, as the server wrote it.
#[test]
fn every_tool_field_round_trips_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    let k = key("s", HASH_A);
    let raw = |text: &str| -> Option<RawJson> { Some(serde_json::from_str(text).unwrap()) };
    let t = ToolDef {
        title: Some("Tee".into()),
        description: Some("d".into()),
        output_schema: raw(r#"{"type":"object","properties":{"z":{},"a":{}}}"#),
        annotations: raw(r#"{"readOnlyHint":true,"title":"x"}"#),
        icons: raw(r#"[{"src":"https://example.com/i.png","sizes":["48x48"]}]"#),
        meta: raw(r#"{"vendor/z":1,"vendor/a":{"n":2.50}}"#),
        execution: raw(r#"{"taskSupport":"required"}"#),
        ..ToolDef::named("t")
    };
    cache.store(&k, std::slice::from_ref(&t), NOW).unwrap();
    let back = cache.load(&k, NOW).unwrap();
    assert_eq!(back, vec![t.clone()]);
    assert_eq!(
        back[0].meta.as_ref().unwrap().get(),
        r#"{"vendor/z":1,"vendor/a":{"n":2.50}}"#
    );
    assert_eq!(back[0].icons, t.icons);
    assert_eq!(
        back[0].task_support(),
        switchboard_core::TaskSupport::Required
    );
}

#[test]
fn corrupt_or_unreadable_files_are_misses_not_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    let k = key("s", HASH_A);
    cache.store(&k, &tools(&["t"]), NOW).unwrap();
    let path = cache.path_for(&k);
    let good = std::fs::read(&path).unwrap();

    for bad in [
        &good[..good.len() / 2],
        b"not json at all".as_slice(),
        b"".as_slice(),
        br#"{"version":1,"server":"s","config_hash":"x","tools":"nope"}"#.as_slice(),
        br#"[1,2,3]"#.as_slice(),
    ] {
        std::fs::write(&path, bad).unwrap();
        assert_eq!(
            cache.load(&k, NOW),
            None,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }

    // A directory where the file should be: unreadable, still a miss.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    assert_eq!(cache.load(&k, NOW), None);
    assert!(cache.store(&k, &tools(&["t"]), NOW).is_err());
    // The failed store left no temp file behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn concurrent_writers_never_leave_a_torn_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    let k = key("busy", HASH_A);
    // Each writer stores its own internally consistent list, big enough that a torn write
    // would be visible.
    let list_for = |writer: usize| -> Vec<ToolDef> {
        (0..40)
            .map(|i| {
                let mut t = ToolDef::named(format!("w{writer}_tool{i}"));
                t.description = Some(format!("writer {writer} ").repeat(50).into());
                t
            })
            .collect()
    };
    cache.store(&k, &list_for(0), NOW).unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (cache, k, done) = (cache.clone(), k.clone(), done.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !done.load(Ordering::Relaxed) || reads < 10 {
                let got = cache
                    .load(&k, NOW)
                    .expect("an entry exists from the start: every read must see a whole one");
                let writer = got[0].name.split('_').next().unwrap().to_string();
                assert_eq!(got.len(), 40);
                assert!(got
                    .iter()
                    .all(|t| t.name.starts_with(&format!("{writer}_"))));
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (1..=6)
        .map(|w| {
            let (cache, k) = (cache.clone(), k.clone());
            let list = list_for(w);
            std::thread::spawn(move || {
                for i in 0..40 {
                    cache.store(&k, &list, NOW + i).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().unwrap();
    assert!(reads >= 10);

    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["busy-0123456789abcdef.json".to_string()]);
}

#[test]
fn stale_temp_files_of_dead_writers_are_removed_and_live_ones_kept() {
    use std::fs;
    use std::time::SystemTime;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tools");
    fs::create_dir_all(&root).unwrap();
    let two_hours_ago = SystemTime::now() - Duration::from_secs(2 * 60 * 60);
    let file = |name: &str, old: bool| {
        let path = root.join(name);
        let f = fs::File::create(&path).unwrap();
        if old {
            f.set_modified(two_hours_ago).unwrap();
        }
        path
    };
    // A writer that died before its rename two hours ago, and one writing right now.
    let dead = file(".a-0123456789abcdef.json.4242.0.tmp", true);
    let live = file(".a-0123456789abcdef.json.4243.0.tmp", false);
    // Old files that are not our temp files are never touched.
    let entry = file("b-0123456789abcdef.json", true);
    let other = file(".notes.tmp", true);

    let cache = ToolCache::new(&root);
    cache
        .store(
            &key("a", HASH_A),
            &tools(&["x"]),
            switchboard::__test::cache::now_unix_ms(),
        )
        .unwrap();
    assert!(!dead.exists(), "the dead writer's temp file is removed");
    assert!(live.exists(), "a live writer's temp file is kept");
    assert!(entry.exists() && other.exists());
    assert_eq!(
        cache.load(&key("a", HASH_A), switchboard::__test::cache::now_unix_ms()),
        Some(tools(&["x"]))
    );
    // Nothing else is stale now.
    assert_eq!(
        cache.remove_stale_temp_files(switchboard::__test::cache::now_unix_ms()),
        0
    );
}

#[test]
fn the_catalog_is_kept_beside_the_tools_and_entries_without_one_still_load() {
    use switchboard_core::catalog::{Catalog, PromptArgument, PromptDef, ResourceDef};
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    let k = key("docs", HASH_A);
    let catalog = Catalog {
        resources: vec![ResourceDef {
            uri: "file:///readme".into(),
            name: "readme".into(),
            title: Some("Read me".into()),
            description: None,
            mime_type: Some("text/plain".into()),
            size: Some(12),
            annotations: Some(RawJson::from_value(&serde_json::json!({"priority": 1}))),
        }],
        templates: Vec::new(),
        prompts: vec![PromptDef {
            name: "greet".into(),
            title: None,
            description: Some("Say hello".into()),
            arguments: vec![PromptArgument {
                name: "who".into(),
                title: None,
                description: None,
                required: true,
            }],
        }],
        handshake: None,
        freshness: None,
    };
    let stored = tools(&["search"]);
    cache.store_entry(&k, &stored, Some(&catalog), NOW).unwrap();
    assert_eq!(
        cache.load_entry(&k, NOW + 1),
        Some((stored.clone(), Some(catalog)))
    );
    // `load` still reads the tools of such an entry.
    assert_eq!(cache.load(&k, NOW + 1), Some(stored.clone()));
    // An entry written without a catalog (by `store`, as before it was kept) loads with none.
    cache.store(&k, &stored, NOW).unwrap();
    let text = std::fs::read_to_string(cache.path_for(&k)).unwrap();
    assert!(!text.contains("catalog"), "{text}");
    assert_eq!(cache.load_entry(&k, NOW + 1), Some((stored, None)));
}

#[test]
fn a_freshness_hint_is_loaded_with_the_entry_s_age_taken_off() {
    use switchboard_core::catalog::Catalog;
    use switchboard_core::manager::Freshness;
    use switchboard_core::protocol::CacheScope;
    let dir = tempfile::tempdir().unwrap();
    let cache = ToolCache::new(dir.path());
    let k = key("docs", HASH_A);
    let fresh = |ttl_ms| Catalog {
        freshness: Some(Freshness {
            ttl_ms,
            scope: CacheScope::Private,
            identity: Some("abc".into()),
        }),
        ..Catalog::default()
    };
    let stored = tools(&["search"]);
    cache
        .store_entry(&k, &stored, Some(&fresh(10_000)), NOW)
        .unwrap();
    // Three seconds later, seven are left; past its hint, none (the entry itself still loads:
    // it may serve deferred tools, and the core lists the server at once).
    assert_eq!(
        cache.load_entry(&k, NOW + 3_000),
        Some((stored.clone(), Some(fresh(7_000))))
    );
    assert_eq!(
        cache.load_entry(&k, NOW + 60_000),
        Some((stored, Some(fresh(0))))
    );
}
