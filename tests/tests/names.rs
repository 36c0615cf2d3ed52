//! Qualified tool names (`switchboard_core::names`): validity, uniqueness, order independence,
//! routing and removal by identity, checked against a naive model of the naming rule.
//!
//! The generators aim at collisions: server names that sanitize alike (`a`, `A`, `a-`, `_a`)
//! or prefix each other (`a`, `a_b`, `a-b`), tools that repeat the server prefix, over-long and
//! non-ASCII names, and "bait" tools shaped like a suffixed name (`b_1`, `b_0f`). Tables with one
//! or two hex digits of suffix make suffix-vs-suffix and suffix-vs-base collisions common, and
//! exhaust the one-digit suffix space.

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use switchboard_core::names::{base_name, sanitize, NameTable, NamingScheme, MAX_NAME_LEN};

/// server → raw tool names.
type View = BTreeMap<String, BTreeSet<String>>;
type Named = Vec<(String, String, String)>;

const SERVERS: &[&str] = &[
    "a", "A", "a-", "_a", "a_b", "a-b", "A_B", "b", "s3", "S3", "ü", "工具", "🚀", "",
];

/// Servers that all sanitize to `a` (the dense scenario).
const DENSE_SERVERS: &[&str] = &["a", "A", "_a", "a-"];

/// 55 characters: with a 9-character suffix, over-long tools that share it share their head.
const LONG_PREFIX: &str = "a_very_long_tool_name_prefix_that_is_shared_by_many_too";

fn server() -> impl Strategy<Value = String> {
    proptest::sample::select(SERVERS).prop_map(str::to_string)
}

fn dense_server() -> impl Strategy<Value = String> {
    proptest::sample::select(DENSE_SERVERS).prop_map(str::to_string)
}

/// Few tools, many collisions: one shared base (`b`), bait shaped like its suffixed names
/// (`b_3`, `b_0f`), and over-long names that differ only after the cut.
fn dense_tool() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just("b".to_string()),
        3 => "b_[0-9a-f]{1,2}",
        3 => "[ab]{1,3}".prop_map(|tail| format!("{LONG_PREFIX}{tail}")),
    ]
}

fn tool() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[aAb_\\-01]{0,4}",
        2 => "(a|a_b|a-b|A|_a)_[ab01]{1,2}",
        2 => "b_[0-9a-f]{1,2}",
        1 => "[ab]{58,70}",
        1 => "(ü|工具|🚀|über|x🚀y)",
    ]
}

fn view() -> impl Strategy<Value = View> {
    prop_oneof![
        proptest::collection::btree_map(
            server(),
            proptest::collection::btree_set(tool(), 0..7),
            0..7,
        ),
        proptest::collection::btree_map(
            dense_server(),
            proptest::collection::btree_set(dense_tool(), 0..9),
            0..4,
        ),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Set(String, Vec<String>),
    Remove(String),
    /// Add, to the server of the `pick`-th suffixed pair, a tool whose base is exactly that
    /// pair's current name (with `twins`, two tools that sanitize alike, so the bait base is
    /// contested and held by nobody).
    Bait {
        pick: usize,
        twins: bool,
    },
}

/// Tools whose base name (under `table`'s scheme, on `server`) is exactly `name`, if any.
fn bait_tools(table: &NameTable, server: &str, name: &str, twins: bool) -> Vec<String> {
    let probe = base_name(table.scheme(), server, "x");
    let Some(prefix) = probe.strip_suffix('x') else {
        return Vec::new();
    };
    let Some(rest) = name.strip_prefix(prefix) else {
        return Vec::new();
    };
    if base_name(table.scheme(), server, rest) != name {
        return Vec::new();
    }
    let mut tools = vec![rest.to_string()];
    if twins {
        tools.push(rest.replace('_', "-"));
    }
    tools
}

fn noise() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (server(), proptest::collection::vec(tool(), 0..6)).prop_map(|(s, t)| Op::Set(s, t)),
        3 => (dense_server(), proptest::collection::vec(dense_tool(), 0..9))
            .prop_map(|(s, t)| Op::Set(s, t)),
        1 => server().prop_map(Op::Remove),
    ];
    proptest::collection::vec(op, 0..10)
}

fn table_kind() -> impl Strategy<Value = (NamingScheme, usize)> {
    (
        prop_oneof![
            Just(NamingScheme::Seed),
            Just(NamingScheme::DoubleUnderscore)
        ],
        prop_oneof![Just(1usize), Just(2), Just(8)],
    )
}

/// One way of arriving at `view`: some noise, then every server of the universe set to its
/// final tools (or removed) in the given order, tools passed in either order, with a duplicate.
#[derive(Debug, Clone)]
struct History {
    noise: Vec<Op>,
    order: Vec<&'static str>,
    reverse_tools: bool,
    remove_when_empty: bool,
}

fn history() -> impl Strategy<Value = History> {
    (
        noise(),
        Just(SERVERS.to_vec()).prop_shuffle(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(noise, order, reverse_tools, remove_when_empty)| History {
            noise,
            order,
            reverse_tools,
            remove_when_empty,
        })
}

fn build(kind: (NamingScheme, usize), view: &View, history: &History) -> NameTable {
    let mut table = NameTable::with_suffix_digits(kind.0, kind.1);
    for op in &history.noise {
        match op {
            Op::Set(s, tools) => table.set_server_tools(s, tools.iter().map(String::as_str)),
            Op::Remove(s) => table.remove_server(s),
            Op::Bait { .. } => {}
        }
    }
    for s in &history.order {
        let mut tools: Vec<&str> = view
            .get(*s)
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if history.reverse_tools {
            tools.reverse();
        }
        if let Some(first) = tools.first().copied() {
            tools.push(first);
        }
        if tools.is_empty() && history.remove_when_empty {
            table.remove_server(s);
        } else {
            table.set_server_tools(s, tools);
        }
    }
    table
}

fn named(table: &NameTable) -> Named {
    table
        .iter()
        .map(|(n, s, t)| (n.to_string(), s.to_string(), t.to_string()))
        .collect()
}

fn pairs(view: &View) -> BTreeSet<(String, String)> {
    view.iter()
        .flat_map(|(s, tools)| tools.iter().map(|t| (s.clone(), t.clone())))
        .collect()
}

/// The naming rule written the slow, obvious way over the whole set (module docs of
/// `switchboard_core::names`): a pair alone on a base that fits keeps it; every other pair, in
/// raw (server, tool) order, takes its first candidate that is nobody's base and not yet taken.
fn reference(table: &NameTable, view: &View) -> Named {
    let scheme = table.scheme();
    let mut groups: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for p in pairs(view) {
        groups
            .entry(base_name(scheme, &p.0, &p.1))
            .or_default()
            .push(p);
    }
    let mut taken: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut suffixed = BTreeSet::new();
    for (base, group) in &groups {
        if group.len() == 1 && base.len() <= MAX_NAME_LEN {
            taken.insert(base.clone(), group[0].clone());
        } else {
            suffixed.extend(group.iter().cloned());
        }
    }
    for p in suffixed {
        let name = (0u64..)
            .map(|attempt| table.candidate_name(&p.0, &p.1, attempt))
            .find(|n| !groups.contains_key(n) && !taken.contains_key(n))
            .expect("candidates never run out");
        taken.insert(name, p);
    }
    taken.into_iter().map(|(n, (s, t))| (n, s, t)).collect()
}

fn is_valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && name.starts_with("mcp_")
}

/// `sanitize` spelled out character by character (what it did before it learned to return an
/// already clean part unchanged without looking at each character twice).
fn sanitize_slowly(part: &str) -> String {
    let mut out = String::new();
    for c in part.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out.trim_matches('_').to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // Invariant: sanitizing is the character-by-character rule, clean parts included.
    #[test]
    fn names_sanitize_follows_the_rule(part in "[a-z0-9_A-Z. ü-]{0,12}") {
        prop_assert_eq!(sanitize(&part), sanitize_slowly(&part));
    }

    // Invariant 1: every minted name matches ^[a-z0-9_]{1,64}$ and starts with `mcp_`, whatever
    // the raw names (non-ASCII, empty, over-long, server-prefixed).
    #[test]
    fn names_every_minted_name_is_valid(kind in table_kind(), view in view(), h in history()) {
        let table = build(kind, &view, &h);
        for (name, s, t) in table.iter() {
            prop_assert!(is_valid_name(name), "{name:?} for ({s:?}, {t:?})");
        }
    }

    // Invariant 2: names are unique across the table, and the table holds exactly one name per
    // distinct (server, tool) pair: len() equals the number of distinct pairs.
    #[test]
    fn names_are_unique_one_per_pair(kind in table_kind(), view in view(), h in history()) {
        let table = build(kind, &view, &h);
        let names: BTreeSet<&str> = table.iter().map(|(n, _, _)| n).collect();
        let got: BTreeSet<(String, String)> =
            table.iter().map(|(_, s, t)| (s.to_string(), t.to_string())).collect();
        prop_assert_eq!(names.len(), table.len());
        prop_assert_eq!(table.len(), pairs(&view).len());
        prop_assert_eq!(got, pairs(&view));
    }

    // Invariant 3: the names depend only on the set of pairs. Two histories (different noise,
    // server order, tool order, remove vs set-empty) that end in the same set give identical
    // iter() output, and both equal the naive model of the rule computed over the whole set.
    #[test]
    fn names_do_not_depend_on_insertion_order(
        kind in table_kind(),
        view in view(),
        h1 in history(),
        h2 in history(),
    ) {
        let a = build(kind, &view, &h1);
        let b = build(kind, &view, &h2);
        prop_assert_eq!(named(&a), named(&b));
        prop_assert_eq!(named(&a), reference(&a, &view));
    }

    // Invariant 3b: the incremental table never drifts from the rule. After every single
    // set_server_tools / remove_server, the table equals the naive model over its current set
    // (this is where moves are exercised: a pair bumped off a name that became someone's base,
    // a pair moving back to an earlier candidate when the pair or base blocking it leaves).
    #[test]
    fn names_match_the_rule_after_every_change(
        kind in table_kind(),
        ops in proptest::collection::vec(prop_oneof![
            3 => (dense_server(), proptest::collection::vec(dense_tool(), 0..9))
                .prop_map(|(s, t)| Op::Set(s, t)),
            1 => (server(), proptest::collection::vec(tool(), 0..6))
                .prop_map(|(s, t)| Op::Set(s, t)),
            1 => dense_server().prop_map(Op::Remove),
            2 => (any::<usize>(), any::<bool>()).prop_map(|(pick, twins)| Op::Bait { pick, twins }),
        ], 1..24),
    ) {
        let mut table = NameTable::with_suffix_digits(kind.0, kind.1);
        let mut view = View::new();
        for op in &ops {
            match op {
                Op::Set(s, tools) => {
                    table.set_server_tools(s, tools.iter().map(String::as_str));
                    view.insert(s.clone(), tools.iter().cloned().collect());
                }
                Op::Remove(s) => {
                    table.remove_server(s);
                    view.remove(s);
                }
                Op::Bait { pick, twins } => {
                    let suffixed: Vec<(String, String)> = table
                        .iter()
                        .filter(|(n, s, t)| *n != base_name(table.scheme(), s, t))
                        .map(|(n, s, _)| (n.to_string(), s.to_string()))
                        .collect();
                    if suffixed.is_empty() {
                        continue;
                    }
                    let (name, s) = &suffixed[pick % suffixed.len()];
                    let tools = view.entry(s.clone()).or_default();
                    tools.extend(bait_tools(&table, s, name, *twins));
                    table.set_server_tools(s, tools.iter().map(String::as_str));
                }
            }
            prop_assert_eq!(named(&table), reference(&table, &view), "after {:?}", op);
        }
    }

    // Invariant 4: routing round-trips: for every pair in the view, qualified(s, t) exists and
    // resolve(qualified(s, t)) == (s, t); server_tools(s) lists exactly s's pairs.
    #[test]
    fn names_route_back_to_their_pair(kind in table_kind(), view in view(), h in history()) {
        let table = build(kind, &view, &h);
        for (s, t) in pairs(&view) {
            let q = table.qualified(&s, &t);
            prop_assert!(q.is_some(), "no name for ({s:?}, {t:?})");
            let q = q.unwrap_or_default();
            prop_assert_eq!(table.resolve(q), Some((s.as_str(), t.as_str())));
        }
        for s in SERVERS {
            let listed: Vec<(String, String)> = table
                .server_tools(s)
                .map(|(q, t)| (q.to_string(), t.to_string()))
                .collect();
            let expected: Vec<(String, String)> = view
                .get(*s)
                .into_iter()
                .flatten()
                .map(|t| (table.qualified(s, t).unwrap_or_default().to_string(), t.clone()))
                .collect();
            prop_assert_eq!(listed, expected);
        }
    }

    // Invariant 5: removing a server removes exactly its pairs (by identity): every other
    // server's pairs stay, including servers whose sanitized name has the removed one as a
    // prefix (`a` vs `a_b`, `a-b`), and the remaining names are those of the smaller set.
    #[test]
    fn names_remove_server_removes_exactly_its_pairs(
        kind in table_kind(),
        view in view(),
        h in history(),
        victim in server(),
    ) {
        let mut table = build(kind, &view, &h);
        table.remove_server(&victim);
        let mut rest = view.clone();
        rest.remove(&victim);
        let got: BTreeSet<(String, String)> =
            table.iter().map(|(_, s, t)| (s.to_string(), t.to_string())).collect();
        prop_assert_eq!(got, pairs(&rest));
        prop_assert_eq!(named(&table), reference(&table, &rest));
        prop_assert_eq!(table.server_tools(&victim).count(), 0);
    }
}

#[test]
fn names_prefix_sharing_servers_survive_removal() {
    let mut table = NameTable::new(NamingScheme::Seed);
    table.set_server_tools("a", ["b_c", "x"]);
    table.set_server_tools("a_b", ["c"]);
    table.set_server_tools("a-b", ["c", "y"]);
    table.remove_server("a");
    let left: Vec<(&str, &str)> = table.iter().map(|(_, s, t)| (s, t)).collect();
    assert_eq!(left.len(), 3);
    assert!(left.iter().all(|(s, _)| *s != "a"));
}
