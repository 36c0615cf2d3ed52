//! The proptest strategies that generate scenarios: server names and tool sets that stress
//! naming, per-attempt fault plans, cache contents, timed embedder actions, the manager's
//! options and the run's fault mix, each weighted by how often its faults strike.

use super::*;
use proptest::prelude::*;
use proptest::strategy::Union;

/// Server names that stress sanitizing, prefixes shared by identity, digits and length.
const NAMES: &[&str] = &[
    "github",
    "git",
    "git_hub",
    "Git-Hub",
    "s3",
    "s",
    "fs",
    "files.v2",
    "a",
    "a_b",
    "A.B",
    "search",
    "slack",
    "db",
    "x9",
    "postgres-prod",
    "very-long-server-name-that-goes-on-and-on-forever-and-ever-yes",
    "ok",
    "web",
    "mail",
];

const TOOLS: &[&str] = &[
    "echo",
    "search",
    "fetch",
    "read_file",
    "github_create_issue",
    "Create Issue",
    "create-issue",
    "list",
    "s3_put",
    "get",
    "a_b_c",
    "UPPER",
    "tool-with-a-name-long-enough-to-push-the-qualified-name-past-sixty-four",
    "run",
];

fn tool_list() -> impl Strategy<Value = Vec<String>> {
    proptest::sample::subsequence(TOOLS, 0..=5)
        .prop_map(|v| v.into_iter().map(str::to_string).collect())
}

fn weighted<T: std::fmt::Debug + Clone + 'static>(
    options: Vec<(u32, BoxedStrategy<T>)>,
) -> BoxedStrategy<T> {
    let options: Vec<_> = options.into_iter().filter(|(w, _)| *w > 0).collect();
    Union::new_weighted(options).boxed()
}

fn spawn_strategy(f: u32) -> BoxedStrategy<Spawn> {
    weighted(vec![
        (
            100,
            (0u64..60).prop_map(|open_ms| Spawn::Ok { open_ms }).boxed(),
        ),
        (
            f / 3,
            (0u64..50)
                .prop_map(|after_ms| Spawn::Fail { after_ms })
                .boxed(),
        ),
        (f / 6, Just(Spawn::NeverOpens).boxed()),
        (
            f / 6,
            (0u64..50)
                .prop_map(|after_ms| Spawn::DropBeforeOpen { after_ms })
                .boxed(),
        ),
    ])
}

fn init_strategy(f: u32) -> BoxedStrategy<Init> {
    weighted(vec![
        (100, (0u64..80).prop_map(|ms| Init::Ok { ms }).boxed()),
        // Slow past the gate: the deferred path.
        (f, (200u64..2_500).prop_map(|ms| Init::Ok { ms }).boxed()),
        (
            f / 4,
            (0u64..80).prop_map(|ms| Init::NoTools { ms }).boxed(),
        ),
        (f / 3, (0u64..600).prop_map(|ms| Init::Error { ms }).boxed()),
        (f / 4, Just(Init::Hang).boxed()),
        (
            f / 5,
            (0u64..400).prop_map(|ms| Init::Unsupported { ms }).boxed(),
        ),
        (f / 5, (0u64..600).prop_map(|ms| Init::Drop { ms }).boxed()),
    ])
}

fn list_strategy(f: u32) -> BoxedStrategy<List> {
    weighted(vec![
        (
            100,
            (0u64..60, 1u8..=1)
                .prop_map(|(ms, pages)| List::Ok { ms, pages })
                .boxed(),
        ),
        (
            f / 2,
            (0u64..300, 2u8..=4)
                .prop_map(|(ms, pages)| List::Ok { ms, pages })
                .boxed(),
        ),
        (
            f / 2,
            (0u64..1_500).prop_map(|ms| List::Error { ms }).boxed(),
        ),
        (f / 5, Just(List::Hang).boxed()),
        (
            f / 5,
            (0u64..200)
                .prop_map(|ms| List::RepeatedCursor { ms })
                .boxed(),
        ),
        (
            f / 6,
            (0u64..200).prop_map(|ms| List::Malformed { ms }).boxed(),
        ),
        (
            f / 4,
            (0u64..1_000).prop_map(|ms| List::Drop { ms }).boxed(),
        ),
    ])
}

fn attempt_strategy(f: u32) -> impl Strategy<Value = AttemptPlan> {
    let drop_after = weighted(vec![
        (100, Just(None).boxed()),
        (f / 3, (0u64..3_000).prop_map(Some).boxed()),
    ]);
    let oversized = weighted(vec![
        (100, Just(None).boxed()),
        (f / 8, (0u64..2_000).prop_map(Some).boxed()),
    ]);
    let drop_on_call = weighted(vec![
        (100, Just(false).boxed()),
        (f / 8, Just(true).boxed()),
    ]);
    let deaf = weighted(vec![
        (100, Just(None).boxed()),
        (f / 4, (0u64..3_000).prop_map(Some).boxed()),
    ]);
    (
        spawn_strategy(f),
        init_strategy(f),
        list_strategy(f),
        drop_after,
        drop_on_call,
        oversized,
        deaf,
    )
        .prop_map(
            |(spawn, init, list, drop_after_ready_ms, drop_on_call, oversized_after_ms, deaf)| {
                AttemptPlan {
                    spawn,
                    init,
                    list,
                    drop_after_ready_ms,
                    drop_on_call,
                    oversized_after_ms,
                    deaf_after_ms: deaf,
                }
            },
        )
}

fn cache_strategy(f: u32) -> BoxedStrategy<CachePlan> {
    weighted(vec![
        (50, Just(CachePlan::Absent).boxed()),
        (60, tool_list().prop_map(CachePlan::Hit).boxed()),
        (10 + f / 4, tool_list().prop_map(CachePlan::Stale).boxed()),
        (5 + f / 6, Just(CachePlan::Corrupt).boxed()),
    ])
}

fn server_strategy(f: u32) -> impl Strategy<Value = ServerPlan> {
    (
        weighted(vec![
            (100, Just(false).boxed()),
            (f / 20 + 1, Just(true).boxed()),
        ]),
        weighted(vec![
            (60, Just(None).boxed()),
            (40, (300i64..4_000).prop_map(Some).boxed()),
        ]),
        tool_list(),
        tool_list(),
        cache_strategy(f),
        weighted(vec![
            (80, (0u64..60).boxed()),
            (10 + f / 3, (200u64..1_200).boxed()),
        ]),
        prop::collection::vec(attempt_strategy(f), 1..=3),
        0u64..400,
        weighted(vec![
            (100, Just(None).boxed()),
            (
                f / 4,
                (
                    0u64..400,
                    prop_oneof![2 => (1u32..4).prop_map(Some), 1 => Just(None)],
                )
                    .prop_map(|(after_ready_ms, recover_after)| {
                        Some(CrashLoop {
                            after_ready_ms,
                            recover_after,
                        })
                    })
                    .boxed(),
            ),
        ]),
    )
        .prop_map(
            |(
                invalid,
                timeout_ms,
                tools,
                alt_tools,
                cache,
                cache_latency_ms,
                attempts,
                call,
                crash_loop,
            )| {
                ServerPlan {
                    name: String::new(),
                    invalid,
                    timeout_ms,
                    tools,
                    alt_tools,
                    cache,
                    cache_latency_ms,
                    attempts,
                    // Derived from a value already drawn (no draw of its own, so the rest of
                    // a seed's scenario is what it was before catalogs existed).
                    catalog: cache_latency_ms % 3 != 0,
                    call_latency_ms: call,
                    crash_loop,
                    era: SimEra::Legacy,
                    hints: SimHints::Missing,
                    slow_discover_ms: 0,
                }
            },
        )
}

fn subset(n: usize) -> impl Strategy<Value = Vec<(usize, u8)>> {
    // Variants 1 and 2 change the config (new hash); 3 disables the server. Duplicates are
    // kept now and then: the manager must use the first and warn.
    (
        prop::collection::vec(
            (
                0..n,
                prop_oneof![16 => Just(0u8), 4 => 1u8..3, 1 => Just(3u8)],
            ),
            0..=n,
        ),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(mut v, keep_duplicates)| {
            v.sort_by_key(|(i, _)| *i);
            if !keep_duplicates {
                v.dedup_by_key(|(i, _)| *i);
            }
            v
        })
}

/// A `Sync` that mostly keeps the config (variant 0), sometimes changes it (1, 2), disables
/// (3) or omits a server: same, changed args, removed, added (a server not running now).
fn sync_edit(n: usize) -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec(
        prop_oneof![14 => Just(Some(0u8)), 3 => (1u8..3).prop_map(Some), 1 => Just(Some(3u8)), 2 => Just(None)],
        n,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .filter_map(|(i, x)| x.map(|x| (i, x)))
            .collect()
    })
}

fn action_kind_strategy(n: usize) -> impl Strategy<Value = ActionKind> {
    let target = prop_oneof![
        5 => Just(CallTarget::Live),
        4 => Just(CallTarget::Deferred),
        1 => Just(CallTarget::Unknown),
        1 => Just(CallTarget::Withdrawn),
    ];
    let timeout = prop_oneof![
        3 => Just(None),
        2 => (50u64..2_000).prop_map(Some),
    ];
    prop_oneof![
        24 => (target, 0usize..64, timeout).prop_map(|(target, pick, timeout_ms)| {
            ActionKind::CallTool { target, pick, timeout_ms }
        }),
        4 => (0usize..8).prop_map(ActionKind::CancelCall),
        3 => subset(n).prop_map(ActionKind::Connect),
        1 => subset(n).prop_map(ActionKind::Reload),
        1 => subset(n).prop_map(ActionKind::Sync),
        2 => sync_edit(n).prop_map(ActionKind::Sync),
        3 => (0..n).prop_map(ActionKind::Disconnect),
        1 => Just(ActionKind::DisconnectAll),
        3 => (0..n).prop_map(ActionKind::RefreshTools),
    ]
}

fn options_strategy() -> impl Strategy<Value = SimOptions> {
    (
        prop_oneof![6 => Just(250u64), 2 => 20u64..600],
        prop_oneof![3 => Just(None), 1 => (50u64..2_000).prop_map(Some)],
        prop_oneof![1 => Just(60_000u64), 2 => 300u64..5_000],
        prop_oneof![1 => Just(30_000u64), 2 => 300u64..5_000],
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.5),
        prop_oneof![
            7 => Just(None),
            3 => (200u64..2_000, 50u64..800, 1u32..4).prop_map(Some),
        ],
        prop::bool::weighted(0.35),
        prop_oneof![1 => Just(600_000u64), 2 => 500u64..5_000],
    )
        .prop_map(
            |(
                gate_ms,
                uncached_wait_ms,
                call_timeout_ms,
                request_timeout_ms,
                du,
                roots,
                health,
                reset_timeout_on_progress,
                max_call_time_ms,
            )| {
                SimOptions {
                    gate_ms,
                    uncached_wait_ms,
                    call_timeout_ms,
                    request_timeout_ms,
                    double_underscore: du,
                    roots,
                    max_frame_len: 4096,
                    health,
                    reset_timeout_on_progress,
                    max_call_time_ms,
                    reconnect: ReconnectMode::On,
                    max_tool_pages: None,
                    peer: None,
                    probe: false,
                    gateway: None,
                }
            },
        )
}

fn peer_strategy() -> impl Strategy<Value = Option<PeerPlan>> {
    let plan = (
        (any::<bool>(), any::<bool>(), any::<bool>()),
        prop_oneof![1 => 100u64..600, 2 => 600u64..4_000],
        1usize..4,
        5u8..60,
        prop_oneof![1 => Just(0u8), 2 => 5u8..40],
        [1u8..8, 0u8..4, 0u8..3, 0u8..3, 0u8..3, 0u8..3],
        prop_oneof![1 => Just(0u8), 1 => 5u8..30],
    )
        .prop_map(
            |(
                (sampling, form, url),
                timeout_ms,
                max_waiting,
                ask_pct,
                cancel_pct,
                answers,
                set_roots_pct,
            )| {
                PeerPlan {
                    sampling,
                    form,
                    url,
                    timeout_ms,
                    max_waiting,
                    ask_pct,
                    cancel_pct,
                    answers,
                    set_roots_pct,
                }
            },
        );
    prop_oneof![2 => Just(None), 3 => plan.prop_map(Some)]
}

fn mix_strategy() -> impl Strategy<Value = FaultMix> {
    (
        prop_oneof![2 => Just(0u32), 3 => 5u32..60, 2 => 60u32..200],
        prop_oneof![1 => Just(0u8), 2 => 5u8..60],
        prop_oneof![1 => Just(0u8), 2 => 5u8..40],
        prop_oneof![2 => Just(0u8), 1 => 2u8..25],
        prop_oneof![1 => Just(0u8), 1 => 10u8..80],
        prop_oneof![1 => Just(0u64), 2 => 1u64..120],
        prop_oneof![2 => Just(0u8), 1 => 20u8..100],
        prop_oneof![1 => Just(0u8), 1 => 20u8..100],
    )
        .prop_map(
            |(
                attempt_faults,
                call_fault_pct,
                chatter_pct,
                frame_fault_pct,
                stale_pct,
                jitter_ms,
                task_pct,
                schema_pct,
            )| {
                FaultMix {
                    attempt_faults,
                    call_fault_pct,
                    chatter_pct,
                    frame_fault_pct,
                    stale_pct,
                    jitter_ms,
                    task_pct,
                    schema_pct,
                }
            },
        )
}

fn client_strategy() -> impl Strategy<Value = ClientPlan> {
    (
        prop_oneof![2 => Just(0u64), 1 => 0u64..3_000],
        prop::bool::weighted(0.3),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        [1u8..8, 0u8..3, 0u8..2, 0u8..2],
        prop_oneof![
            2 => Just(None),
            1 => prop::sample::select(vec!["debug", "info", "warning", "error"])
                .prop_map(|l| Some(l.to_string())),
        ],
    )
        .prop_map(
            |(open_at_ms, strict, (sampling, form, url), answers, log_level)| ClientPlan {
                era: DownstreamEra::Legacy,
                open_at_ms,
                strict,
                sampling,
                form,
                url,
                answers,
                log_level,
                roots: false,
                rounds: [0; 5],
            },
        )
}

fn downstream_kind_strategy() -> impl Strategy<Value = DownstreamKind> {
    prop_oneof![
        12 => (0usize..64, prop::bool::weighted(0.85), any::<bool>()).prop_map(
            |(pick, known, progress)| DownstreamKind::Call { pick, known, progress }
        ),
        3 => (0usize..8).prop_map(DownstreamKind::Cancel),
        2 => (0usize..16).prop_map(DownstreamKind::Read),
        2 => (0usize..16).prop_map(DownstreamKind::Prompt),
        2 => (0usize..16).prop_map(DownstreamKind::Subscribe),
        1 => Just(DownstreamKind::Ping),
        1 => Just(DownstreamKind::Close),
    ]
}

/// A third of the runs put `switchboard serve`'s gateway in front of the manager, with one
/// to three downstream clients acting through it.
fn gateway_strategy(horizon_ms: u64) -> impl Strategy<Value = Option<GatewayPlan>> {
    let plan = (
        prop_oneof![1 => Just(1000usize), 2 => 1usize..4],
        prop_oneof![3 => Just(256usize), 1 => 1usize..4],
        prop::bool::weighted(0.3),
        prop::collection::vec(client_strategy(), 1..=3),
        prop::collection::vec(
            (0..horizon_ms, 0usize..3, downstream_kind_strategy()),
            0..=30,
        ),
    )
        .prop_map(
            |(page_size, max_in_flight, plain_names, clients, actions)| {
                let mut actions: Vec<DownstreamAction> = actions
                    .into_iter()
                    .map(|(at_ms, client, kind)| DownstreamAction {
                        at_ms,
                        client,
                        kind,
                    })
                    .collect();
                actions.sort_by_key(|a| a.at_ms);
                GatewayPlan {
                    page_size,
                    max_in_flight,
                    plain_names,
                    clients,
                    actions,
                }
            },
        );
    prop_oneof![2 => Just(None), 1 => plan.prop_map(Some)]
}

/// Half the runs probe; in those, each server speaks a revision picked from `seed`: legacy
/// (plainly, misleadingly, or silently — the silent ones on stdio only) or stateless.
fn assign_eras(options: &mut SimOptions, servers: &mut [ServerPlan], seed: u64) {
    let mut rng = switchboard_core::rng::SplitMix64::new(seed);
    options.probe = rng.below(2) == 0;
    if !options.probe {
        return;
    }
    for (i, s) in servers.iter_mut().enumerate() {
        // A silent probe is a stdio thing.
        let stdio = !crate::world::is_http(i);
        s.era = match rng.below(10) {
            0..=2 => SimEra::Legacy,
            3 => SimEra::LegacyUnrelatedError,
            4 if stdio => SimEra::LegacySilent,
            4 => SimEra::Legacy,
            5..=8 => SimEra::Modern,
            _ => SimEra::ModernRetry,
        };
    }
    // Drawn apart, so the revisions above stay what they were for every seed.
    let mut rng = switchboard_core::rng::SplitMix64::new(seed ^ 0x7e11_ca5e_5eed_0001);
    for (i, s) in servers.iter_mut().enumerate() {
        if !s.era.is_modern() {
            continue;
        }
        let public = rng.below(2) == 0;
        s.hints = match rng.below(8) {
            0 | 1 => SimHints::Missing,
            2 => SimHints::Zero,
            3 => SimHints::Huge { public },
            _ => SimHints::Short {
                ttl_ms: 500 + rng.below(15_000),
                public,
            },
        };
        // A stateless stdio server slow to start now and then: its discover answer comes
        // after the client's probe timed out (2 s) and sent `initialize`.
        if !crate::world::is_http(i) && rng.below(4) == 0 {
            s.slow_discover_ms = 1_500 + rng.below(2_000);
        }
    }
}

/// In runs with attempt faults, about one attempt in eight of an HTTP server has its handshake
/// refused for its credentials (a third of those until a person logs in). Drawn from `seed`
/// apart from everything else, so every other draw of a seed stays what it was.
fn assign_refusals(mix: &FaultMix, servers: &mut [ServerPlan], seed: u64) {
    if mix.attempt_faults == 0 {
        return;
    }
    let mut rng = switchboard_core::rng::SplitMix64::new(seed ^ 0x0a07_4e5f_5eed_0003);
    let http = servers
        .iter_mut()
        .enumerate()
        .filter(|(i, _)| crate::world::is_http(*i));
    for (_, s) in http {
        for a in s.attempts.iter_mut() {
            if rng.below(8) == 0 {
                a.init = Init::Refused {
                    ms: rng.below(300),
                    login: rng.below(3) == 0,
                };
            }
        }
    }
}

/// Half the runs with a gateway mix stateless downstream clients (at least one) with legacy
/// ones, drawn from `seed` apart from everything else, so the legacy clients of every seed
/// stay what they were.
fn assign_downstream_eras(plan: &mut GatewayPlan, seed: u64) {
    let mut rng = switchboard_core::rng::SplitMix64::new(seed ^ 0x5757_a7e1_e55d_0002);
    if rng.below(2) == 0 {
        return;
    }
    let first = rng.below(plan.clients.len() as u64) as usize;
    for (i, c) in plan.clients.iter_mut().enumerate() {
        if i != first && rng.below(2) == 0 {
            continue;
        }
        c.era = DownstreamEra::Stateless;
        c.roots = rng.below(2) == 0;
        c.rounds = [
            1 + rng.below(6) as u8,
            rng.below(3) as u8,
            rng.below(2) as u8,
            rng.below(2) as u8,
            rng.below(3) as u8,
        ];
    }
}

/// The scenario strategy: a fault mix first, then servers and actions shaped by it.
///
/// The large fixed-shape parts (the mix, the options, the late draws, the gateway) are boxed:
/// their value trees hold a forked runner per option not picked, tens of kilobytes inline,
/// which the tuple, the flat map and the map above them would otherwise move at every
/// level. Boxing draws nothing, so every seed's scenario stays what it was.
pub fn scenario_strategy(p: GenParams) -> impl Strategy<Value = Scenario> {
    (mix_strategy().boxed(), p.min_servers..=p.max_servers)
        .prop_flat_map(move |(mix, n)| {
            let f = mix.attempt_faults;
            (
                Just(mix),
                options_strategy().boxed(),
                proptest::sample::subsequence(NAMES, n),
                prop::collection::vec(server_strategy(f), n),
                prop::collection::vec(
                    (0..p.horizon_ms, action_kind_strategy(n)),
                    0..=p.max_actions,
                ),
                any::<u64>(),
                // Drawn last, so every earlier draw of a seed stays what it was.
                (
                    prop_oneof![
                        6 => Just(ReconnectMode::On),
                        1 => Just(ReconnectMode::Off),
                        1 => Just(ReconnectMode::RetryStartup),
                    ],
                    prop_oneof![5 => Just(None), 1 => (2usize..=3).prop_map(Some)],
                    peer_strategy(),
                )
                    .boxed(),
                // The protocol revisions, drawn after everything else for the same reason.
                any::<u64>(),
                // The gateway and its downstream clients, last of all.
                gateway_strategy(p.horizon_ms).boxed(),
            )
        })
        .prop_map(
            |(mix, mut options, names, mut servers, actions, world_seed, late, eras, gateway)| {
                (options.reconnect, options.max_tool_pages, options.peer) = late;
                options.gateway = gateway;
                assign_eras(&mut options, &mut servers, eras);
                assign_refusals(&mix, &mut servers, eras);
                if let Some(g) = options.gateway.as_mut() {
                    assign_downstream_eras(g, eras);
                }
                for (s, n) in servers.iter_mut().zip(names) {
                    s.name = n.to_string();
                }
                let n = servers.len();
                let mut actions: Vec<Action> = actions
                    .into_iter()
                    .map(|(at_ms, kind)| Action { at_ms, kind })
                    .collect();
                actions.sort_by_key(|a| a.at_ms);
                actions.insert(
                    0,
                    Action {
                        at_ms: 0,
                        kind: ActionKind::Connect((0..n).map(|i| (i, 0)).collect()),
                    },
                );
                Scenario {
                    options,
                    mix,
                    servers,
                    actions,
                    world_seed,
                }
            },
        )
}
