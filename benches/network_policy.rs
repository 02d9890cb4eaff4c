//! NetworkPolicy's costs, on the three-node cluster of tests/network_policy.rs (three knids in
//! private node namespaces, the model's nine pods, the stand-in Kubernetes API server), every
//! knid at its deployed log level (info):
//! 1. `KNID_BENCH_N` (default 30) policy changes, one API write each, cycling through: default
//!    deny ingress in namespace x; an allow from y/b for every pod of x; the allow changed to
//!    y/c; the allow deleted; the deny deleted. Each is timed from the write until every node's
//!    kernel table (`policy_state`, each node read every millisecond) shows the change for the
//!    x pod it holds. Then `KNID_BENCH_PROBE_CYCLES` (default 2) cycles of the same changes
//!    timed to the first TCP connection attempt that the change lets through or drops, across
//!    nodes (y/b or y/c on node-b and node-c to x/a on node-a).
//! 2. Data path: TCP throughput (`KNID_BENCH_MIB`, default 512 MiB over one connection) and
//!    new connections per second (connect, then close with a reset, for
//!    `KNID_BENCH_CONNECT_SECS`, default 3 s) between two pods on node-a's bridge and two pods
//!    across nodes, with no policy and with `KNID_BENCH_POLICIES` (default 500) policies of
//!    which a tenth isolate the pods measured (server for ingress, clients for egress) and let
//!    them through, the rest select pods on no node here; `KNID_BENCH_ROUNDS` (default 3)
//!    rounds, the two states in turn.
//! 3. Memory at scale: a fourth knid with `KNID_BENCH_LOCAL_PODS` (default 4) pods, while the
//!    API server holds `KNID_BENCH_PODS` (default 5,000) Pods in `KNID_BENCH_NAMESPACES` (default
//!    50) namespaces and `KNID_BENCH_SCALE_POLICIES` (default 1,000) NetworkPolicies
//!    (testkit::netpol_scale): knid's VmRSS, RssAnon and threads idle before any policy and once
//!    the table is applied, the time from the first policy written to the table applied, and
//!    the table's size.
//!
//! `KNID_BENCH_ONLY=change|datapath|memory` runs one part. Numbers are reported, never asserted.
//! Without root it prints a skip line and exits 0.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use knid_netops::nft::{Direction, Nft, PolicyState};
use knid_netops::NetnsHandle;
use nix::unistd::Pid;
use serde_json::{json, Value};
use testkit::cluster_node::{api_on_lan, node_spec, start_cluster_node, Creds};
use testkit::kube_api::KubeApi;
use testkit::measure::{env_count, ms, percentile, proc_status, spread, Spread};
use testkit::netpol::{add_pod, Model, ModelPod};
use testkit::{netpol_scale, TestNode};

const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
const TABLE: &str = "knid-policy";
const POLL: Duration = Duration::from_millis(1);
const TIMEOUT: Duration = Duration::from_secs(120);

fn main() {
    if !testkit::privileged() {
        return;
    }
    let only = std::env::var("KNID_BENCH_ONLY").unwrap_or_default();
    let runs = |part: &str| only.is_empty() || only == part;
    if runs("change") || runs("datapath") {
        let (_lan, _dir, api, nodes) = cluster();
        let model = Model::start(&api, &nodes, &NODES);
        if runs("change") {
            change_to_enforcement(&api, &nodes, &model);
        }
        if runs("datapath") {
            data_path(&api, &nodes, &model);
        }
    }
    if runs("memory") {
        memory_at_scale();
    }
}

/// Three nodes at knid's deployed log level, as in tests/network_policy.rs.
fn cluster() -> (testkit::lan::Lan, tempfile::TempDir, KubeApi, Vec<TestNode>) {
    testkit::netpol::three_nodes(at_info)
}

/// Restarts `node`'s knid at `info`, as deployed (testkit starts it at `debug`).
fn at_info(node: &mut TestNode) {
    node.stop();
    node.set_args(&["--log-level", "info"]);
    node.restart();
}

fn wait(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < TIMEOUT, "timed out waiting for {what}");
        std::thread::sleep(POLL);
    }
}

fn put_policy(api: &KubeApi, ns: &str, name: &str, spec: Value) {
    api.put_network_policy(ns, name, spec)
        .unwrap_or_else(|e| panic!("put policy {ns}/{name}: {e}"));
}

fn state(nft: &mut Nft) -> PolicyState {
    nft.policy_state(TABLE)
        .expect("read the policy table")
        .unwrap_or_default()
}

fn nfts(nodes: &[TestNode]) -> Vec<Nft> {
    nodes
        .iter()
        .map(|n| Nft::open_in(&n.host()).expect("nf_tables socket in the node"))
        .collect()
}

fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    format!(
        "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(percentile(samples, 50.0)),
        ms(percentile(samples, 99.0)),
        ms(*samples.last().expect("a sample"))
    )
}

// ---------------------------------------------------------------------------------------------
// 1. Policy change → enforcement.

/// One step of the change cycle.
#[derive(Clone, Copy, Debug)]
enum Step {
    Deny,
    AllowFrom(&'static str),
    DeleteAllow,
    DeleteDeny,
}

const CYCLE: [Step; 5] = [
    Step::Deny,
    Step::AllowFrom("b"),
    Step::AllowFrom("c"),
    Step::DeleteAllow,
    Step::DeleteDeny,
];

impl Step {
    fn name(self) -> String {
        match self {
            Step::Deny => "default deny ingress in x".into(),
            Step::AllowFrom(p) => format!("allow y/{p} into x"),
            Step::DeleteAllow => "allow deleted".into(),
            Step::DeleteDeny => "deny deleted".into(),
        }
    }

    fn write(self, api: &KubeApi) {
        match self {
            Step::Deny => put_policy(api, "x", "deny", json!({"podSelector": {}})),
            Step::AllowFrom(pod) => put_policy(
                api,
                "x",
                "allow",
                json!({"podSelector": {}, "ingress": [{"from": [{
                    "namespaceSelector": {"matchLabels": {"ns": "y"}},
                    "podSelector": {"matchLabels": {"pod": pod}}
                }]}]}),
            ),
            Step::DeleteAllow => api.delete_network_policy("x", "allow"),
            Step::DeleteDeny => api.delete_network_policy("x", "deny"),
        }
    }

    /// Whether x's pods are isolated after it, and from which pod of y they are allowed.
    fn after(self) -> (bool, Option<&'static str>) {
        match self {
            Step::Deny | Step::DeleteAllow => (true, None),
            Step::AllowFrom(p) => (true, Some(p)),
            Step::DeleteDeny => (false, None),
        }
    }

    /// The flow whose fate the step changes: (source pod in y, whether it gets through).
    fn flow(self) -> (&'static str, bool) {
        match self {
            Step::Deny => ("y/b", false),
            Step::AllowFrom("b") => ("y/b", true),
            Step::AllowFrom(_) => ("y/b", false),
            Step::DeleteAllow => ("y/c", false),
            Step::DeleteDeny => ("y/b", true),
        }
    }
}

/// Whether `state` shows for `pod` (of x) what `step` leaves behind.
fn shows(state: &PolicyState, pod: &ModelPod, model: &Model, step: Step) -> bool {
    let (isolated, from) = step.after();
    let mine = |ip: &IpAddr| pod.ips.contains(ip);
    let have: BTreeSet<(Direction, IpAddr)> = state
        .isolated
        .iter()
        .filter(|(_, ip)| mine(ip))
        .copied()
        .collect();
    let want: BTreeSet<(Direction, IpAddr)> = if isolated {
        pod.ips.iter().map(|ip| (Direction::Ingress, *ip)).collect()
    } else {
        BTreeSet::new()
    };
    let allows: BTreeSet<_> = state
        .allows
        .iter()
        .filter(|a| mine(&a.pod))
        .map(|a| (a.pod, a.peers, a.ports.is_some()))
        .collect();
    let wanted: BTreeSet<_> = from
        .map(|p| model.pod(&format!("y/{p}")))
        .into_iter()
        .flat_map(|peer| [false, true].map(|v6| (pod.ip(v6), (peer.ip(v6), peer.ip(v6)), false)))
        .collect();
    have == want && allows == wanted
}

fn change_to_enforcement(api: &KubeApi, nodes: &[TestNode], model: &Model) {
    let changes = env_count("KNID_BENCH_N", 30);
    let cycles = env_count("KNID_BENCH_PROBE_CYCLES", 2);
    let mut nfts = nfts(nodes);
    // The x pod on each node: x/a on node-a, x/b on node-b, x/c on node-c.
    let watched: Vec<&ModelPod> = (0..nodes.len())
        .map(|i| {
            model
                .pods
                .iter()
                .find(|p| p.node == i && p.name.starts_with("x/"))
                .expect("an x pod on every node")
        })
        .collect();
    let mut all = Vec::with_capacity(changes);
    let mut first = Vec::with_capacity(changes);
    let mut by_step: Vec<Vec<Duration>> = vec![Vec::new(); CYCLE.len()];
    for n in 0..changes {
        let step = CYCLE[n % CYCLE.len()];
        let started = Instant::now();
        step.write(api);
        let mut seen: Vec<Option<Duration>> = vec![None; nodes.len()];
        while seen.iter().any(Option::is_none) {
            for (i, nft) in nfts.iter_mut().enumerate() {
                if seen[i].is_none() && shows(&state(nft), watched[i], model, step) {
                    seen[i] = Some(started.elapsed());
                }
            }
            assert!(
                started.elapsed() < TIMEOUT,
                "timed out on change {n} ({})",
                step.name()
            );
            std::thread::sleep(POLL);
        }
        let times: Vec<Duration> = seen.into_iter().flatten().collect();
        let last = *times.iter().max().expect("three nodes");
        all.push(last);
        first.push(*times.iter().min().expect("three nodes"));
        by_step[n % CYCLE.len()].push(last);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Leave no policy behind, whatever N was.
    for name in ["allow", "deny"] {
        if api.network_policy("x", name).is_some() {
            api.delete_network_policy("x", name);
        }
    }
    wait("x open again", || {
        nfts.iter_mut()
            .zip(&watched)
            .all(|(nft, pod)| shows(&state(nft), pod, model, Step::DeleteDeny))
    });

    let mut traffic = Vec::new();
    let x_a = SocketAddr::new(model.pod("x/a").ip(false), 80);
    for n in 0..cycles * CYCLE.len() {
        let step = CYCLE[n % CYCLE.len()];
        let (from, through) = step.flow();
        let netns = model.pod(from).netns.clone();
        let started = Instant::now();
        step.write(api);
        traffic.push(until_flow(&netns, x_a, through, started));
        std::thread::sleep(Duration::from_millis(50));
    }

    println!("\n## 1. Policy change → enforcement (one API write each, goal ≤ 1 s)\n");
    println!("| what | changes | result |");
    println!("|---|---|---|");
    println!(
        "| write → the change in all 3 nodes' kernel tables | {changes} | {} |",
        summary(&mut all)
    );
    println!(
        "| write → the change in the first node's table | {changes} | {} |",
        summary(&mut first)
    );
    for (step, samples) in CYCLE.iter().zip(&mut by_step) {
        if !samples.is_empty() {
            println!(
                "| … {}: all 3 tables | {} | {} |",
                step.name(),
                samples.len(),
                summary(samples)
            );
        }
    }
    println!(
        "| write → first TCP attempt across nodes that the change lets through or drops | {} | {} |",
        traffic.len(),
        summary(&mut traffic)
    );
}

/// The time from `started` to the first connection attempt from netns `from` to `to` that
/// ends as `through` says (accepted, or dropped: no answer in 200 ms). An attempt that is to
/// get through waits 5 ms at most, so the answer is within 5 ms of the change.
fn until_flow(from: &Path, to: SocketAddr, through: bool, started: Instant) -> Duration {
    let handle = NetnsHandle::open(from).expect("open the client's netns");
    let patience = if through {
        Duration::from_millis(5)
    } else {
        Duration::from_millis(200)
    };
    knid_netops::run_in(&handle, || loop {
        let attempt = Instant::now();
        let connected = connect_and_reset(to, patience);
        if connected == through {
            // A drop is known at the end of the attempt, but happened before its SYN left.
            return if through {
                started.elapsed()
            } else {
                attempt - started
            };
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "the flow to {to} never turned {through}"
        );
    })
    .expect("enter the client's netns")
}

/// Connects to `to` (within `patience`) and closes at once with a reset, leaving no
/// TIME_WAIT socket behind (a loop of them would run out of ports).
fn connect_and_reset(to: SocketAddr, patience: Duration) -> bool {
    match TcpStream::connect_timeout(&to, patience) {
        Ok(stream) => {
            let reset = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            nix::sys::socket::setsockopt(&stream, nix::sys::socket::sockopt::Linger, &reset)
                .expect("SO_LINGER");
            true
        }
        Err(_) => false,
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Data path.

/// The policies of the data path: the first tenth isolate the measured pods (x/a for ingress;
/// y/a and x/b, its clients, for egress) and let them through, with more rules on blocks and
/// ports beside; the rest select pods no node here runs, in x, y, z and ten more namespaces.
fn data_path_policy(i: usize, total: usize) -> (String, String, Value) {
    let some = (total / 10).max(3);
    let name = format!("bench-{i:04}");
    let block = |k: usize| format!("10.200.{}.0/24", k % 250);
    let spec = match i {
        0 => json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [
                {"namespaceSelector": {"matchLabels": {"ns": "y"}},
                 "podSelector": {"matchLabels": {"pod": "a"}}},
                {"podSelector": {"matchLabels": {"pod": "b"}}}
            ]}]
        }),
        1 => json!({
            "podSelector": {"matchLabels": {"pod": "b"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"podSelector": {"matchLabels": {"pod": "a"}}}]}]
        }),
        2 => json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"ns": "x"}},
                                "podSelector": {"matchLabels": {"pod": "a"}}}]}]
        }),
        _ if i < some => {
            let direction = if i % 2 == 0 { "ingress" } else { "egress" };
            let peer = if direction == "ingress" { "from" } else { "to" };
            json!({
                "podSelector": {"matchLabels": {"pod": if i % 3 == 0 { "b" } else { "a" }}},
                "policyTypes": [if direction == "ingress" { "Ingress" } else { "Egress" }],
                direction: [{
                    peer: [{"ipBlock": {"cidr": block(i)}},
                           {"namespaceSelector": {"matchLabels": {"ns": "z"}},
                            "podSelector": {"matchLabels": {"pod": "c"}}}],
                    "ports": [{"port": 8000 + i as u16, "protocol": "TCP"},
                              {"port": 53, "protocol": "UDP"}]
                }]
            })
        }
        _ => json!({
            "podSelector": {"matchLabels": {"app": format!("other-{i}")}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "a"}}},
                                  {"ipBlock": {"cidr": block(i)}}],
                         "ports": [{"port": 8080, "protocol": "TCP"}]}],
            "egress": [{"to": [{"namespaceSelector": {}}]}]
        }),
    };
    let ns = match i {
        0 | 1 => "x".to_owned(),
        2 => "y".to_owned(),
        _ if i < some => if i % 3 == 0 { "x" } else { ["x", "y"][i % 2] }.to_owned(),
        _ if i % 2 == 0 => ["x", "y", "z"][i % 3].to_owned(),
        _ => format!("other-{}", i % 10),
    };
    (ns, name, spec)
}

/// One pair measured: its name, client and server.
struct Pair<'m> {
    name: &'static str,
    client: &'m ModelPod,
    server: &'m ModelPod,
}

/// Throughput (MiB/s) and new connections per second of `pair`, once each.
fn measure(pair: &Pair, mib: usize, secs: Duration) -> (f64, f64) {
    let server_ip = pair.server.ip(false);
    let took = testkit::traffic::tcp_transfer(
        &pair.server.netns,
        server_ip,
        &pair.client.netns,
        mib << 20,
    );
    let rate = mib as f64 / took.as_secs_f64();
    (rate, connection_rate(pair, secs))
}

/// Connections per second from `pair`'s client to a listener of its server, each closed with a
/// reset, for `secs`; the server accepts and drops them.
fn connection_rate(pair: &Pair, secs: Duration) -> f64 {
    let server = NetnsHandle::open(&pair.server.netns).expect("open the server's netns");
    let ip = pair.server.ip(false);
    let listener = knid_netops::run_in(&server, || TcpListener::bind(SocketAddr::new(ip, 0)))
        .expect("enter the server's netns")
        .expect("listen");
    let to = listener.local_addr().expect("address");
    let stop = Arc::new(AtomicBool::new(false));
    let acceptor = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                drop(listener.accept());
            }
        })
    };
    let client = NetnsHandle::open(&pair.client.netns).expect("open the client's netns");
    let count = knid_netops::run_in(&client, || {
        let started = Instant::now();
        let mut count = 0u64;
        while started.elapsed() < secs {
            assert!(
                connect_and_reset(to, Duration::from_secs(5)),
                "a connection of {} failed",
                pair.name
            );
            count += 1;
        }
        count as f64 / started.elapsed().as_secs_f64()
    })
    .expect("enter the client's netns");
    stop.store(true, Ordering::SeqCst);
    knid_netops::run_in(&client, || connect_and_reset(to, Duration::from_secs(1)))
        .expect("enter the client's netns");
    acceptor.join().expect("the acceptor");
    count
}

/// Waits until every node's table has stopped changing (the same for 300 ms) and `ready` holds
/// for node-a's; returns node-a's and node-b's tables.
fn settled(nfts: &mut [Nft], ready: impl Fn(&PolicyState) -> bool) -> Vec<PolicyState> {
    let mut last: Vec<PolicyState> = nfts.iter_mut().map(state).collect();
    let mut since = Instant::now();
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now: Vec<PolicyState> = nfts.iter_mut().map(state).collect();
        if now != last || !ready(&now[0]) {
            last = now;
            since = Instant::now();
        } else if since.elapsed() > Duration::from_millis(300) {
            return now;
        }
        assert!(started.elapsed() < TIMEOUT, "the tables never settled");
    }
}

fn data_path(api: &KubeApi, nodes: &[TestNode], model: &Model) {
    let count = env_count("KNID_BENCH_POLICIES", 500);
    let rounds = env_count("KNID_BENCH_ROUNDS", 3);
    let mib = env_count("KNID_BENCH_MIB", 512);
    let secs = Duration::from_secs(env_count("KNID_BENCH_CONNECT_SECS", 3) as u64);
    let mut nfts = nfts(nodes);
    let policies: Vec<_> = (0..count).map(|i| data_path_policy(i, count)).collect();
    for n in 0..10 {
        api.put_namespace(&format!("other-{n}"), &[("ns", "other")]);
    }
    let x_a = model.pod("x/a");
    let pairs = [
        Pair {
            name: "same bridge (y/a → x/a on node-a)",
            client: model.pod("y/a"),
            server: x_a,
        },
        Pair {
            name: "across nodes (x/b on node-b → x/a on node-a)",
            client: model.pod("x/b"),
            server: x_a,
        },
    ];
    // [pair][0 none, 1 with policies] → samples of (MiB/s, connections/s).
    let mut samples: Vec<[Vec<(f64, f64)>; 2]> = pairs.iter().map(|_| [vec![], vec![]]).collect();
    let isolated = |s: &PolicyState| {
        s.isolated.contains(&(Direction::Ingress, x_a.ip(false)))
            && s.isolated
                .contains(&(Direction::Egress, model.pod("y/a").ip(false)))
    };
    let mut on = false;
    let mut sizes = (0, 0, 0);
    for round in 0..rounds {
        // The two states in turn, one switch per round: off, on | on, off | off, on ...
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for want in order {
            if want != on {
                on = want;
                if on {
                    for (ns, name, spec) in &policies {
                        put_policy(api, ns, name, spec.clone());
                    }
                    let tables = settled(&mut nfts, isolated);
                    sizes = (
                        tables[0].isolated.len(),
                        tables[0].allows.len(),
                        tables[1].allows.len(),
                    );
                } else {
                    for (ns, name, _) in &policies {
                        api.delete_network_policy(ns, name);
                    }
                    settled(&mut nfts, |s| s.isolated.is_empty());
                }
            }
            for (p, pair) in pairs.iter().enumerate() {
                samples[p][usize::from(on)].push(measure(pair, mib, secs));
            }
        }
    }
    // Paired: with the policies in place, pairs the policies isolate against pairs no policy
    // selects, measured in turn many times without changing the cluster, so the machine's
    // drift between rounds falls on both sides alike.
    if !on {
        for (ns, name, spec) in &policies {
            put_policy(api, ns, name, spec.clone());
        }
        settled(&mut nfts, isolated);
        on = true;
    }
    let paired = paired_connection_rates(&mut nfts, model, &pairs);
    if on {
        for (ns, name, _) in &policies {
            api.delete_network_policy(ns, name);
        }
        settled(&mut nfts, |s| s.isolated.is_empty());
    }

    println!(
        "\n## 2. Data path: no policy against {count} policies ({rounds} rounds, goal ≤ 5 %)\n"
    );
    println!(
        "With the policies node-a's table holds {} isolated pod directions and {} allows, \
         node-b's {} allows.\n",
        sizes.0, sizes.1, sizes.2
    );
    println!("| pair | what | no policy | {count} policies | difference |");
    println!("|---|---|---|---|---|");
    for (pair, s) in pairs.iter().zip(&samples) {
        for (what, unit, pick) in [("TCP throughput", "MiB/s", 0), ("new connections", "/s", 1)] {
            let of = |v: &[(f64, f64)]| {
                spread(v.iter().map(|t| if pick == 0 { t.0 } else { t.1 })).unwrap_or(Spread {
                    least: f64::NAN,
                    median: f64::NAN,
                    most: f64::NAN,
                })
            };
            let (off, with) = (of(&s[0]), of(&s[1]));
            println!(
                "| {} | {what} | {:.0} {unit} ({:.0}–{:.0}) | {:.0} {unit} ({:.0}–{:.0}) | \
                 {:+.1} % |",
                pair.name,
                off.median,
                off.least,
                off.most,
                with.median,
                with.least,
                with.most,
                100.0 * (with.median - off.median) / off.median
            );
        }
    }
    println!(
        "\nPaired, with the {count} policies in place: new connections/s of the isolated pair \
         against a pair no policy selects (same kind of path), {} alternations of {} s each; \
         the difference is the median of the per-alternation ratios.\n",
        paired.first().map_or(0, |p| p.ratios.len()),
        PAIRED_SECS.as_secs_f64()
    );
    println!("| path | isolated pair | open pair | difference (median, range) |");
    println!("|---|---|---|---|");
    for p in &paired {
        let Some(ratio) = spread(p.ratios.iter().copied()) else {
            continue;
        };
        println!(
            "| {} | {:.0} /s | {:.0} /s ({}) | {:+.1} % ({:+.1} … {:+.1}) |",
            p.path,
            median(&p.isolated),
            median(&p.open),
            p.open_pair,
            100.0 * (ratio.median - 1.0),
            100.0 * (ratio.least - 1.0),
            100.0 * (ratio.most - 1.0)
        );
    }
}

/// How long each paired sample connects.
const PAIRED_SECS: Duration = Duration::from_secs(1);

/// One path's paired samples.
struct Paired {
    path: &'static str,
    open_pair: &'static str,
    isolated: Vec<f64>,
    open: Vec<f64>,
    ratios: Vec<f64>,
}

fn median(v: &[f64]) -> f64 {
    spread(v.iter().copied()).map_or(f64::NAN, |s| s.median)
}

/// `KNID_BENCH_PAIRED` (default 12) alternations of the isolated pairs of `pairs` and the
/// open pairs: z/b → y/b on node-b's bridge, z/c on node-c → y/b; no policy selects them
/// (checked in the kernel's tables first).
fn paired_connection_rates(nfts: &mut [Nft], model: &Model, pairs: &[Pair]) -> Vec<Paired> {
    let n = env_count("KNID_BENCH_PAIRED", 12);
    let open = [
        Pair {
            name: "same bridge, open (z/b → y/b on node-b)",
            client: model.pod("z/b"),
            server: model.pod("y/b"),
        },
        Pair {
            name: "across nodes, open (z/c on node-c → y/b on node-b)",
            client: model.pod("z/c"),
            server: model.pod("y/b"),
        },
    ];
    for nft in nfts.iter_mut() {
        let state = nft.policy_state(TABLE).expect("read").unwrap_or_default();
        for pod in ["y/b", "z/b", "z/c"] {
            let ip = model.pod(pod).ip(false);
            assert!(
                !state.isolated.iter().any(|(_, i)| *i == ip),
                "{pod} must be selected by no policy for the paired comparison"
            );
        }
    }
    let paths = ["same bridge", "across nodes"];
    let mut out = Vec::new();
    for ((isolated_pair, open_pair), path) in pairs.iter().zip(&open).zip(paths) {
        let mut p = Paired {
            path,
            open_pair: open_pair.name,
            isolated: Vec::new(),
            open: Vec::new(),
            ratios: Vec::new(),
        };
        for i in 0..n {
            let (a, b) = if i % 2 == 0 {
                let a = connection_rate(isolated_pair, PAIRED_SECS);
                (a, connection_rate(open_pair, PAIRED_SECS))
            } else {
                let b = connection_rate(open_pair, PAIRED_SECS);
                (connection_rate(isolated_pair, PAIRED_SECS), b)
            };
            p.isolated.push(a);
            p.open.push(b);
            p.ratios.push(a / b);
        }
        out.push(p);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// 3. Memory at scale.

fn memory_at_scale() {
    let local = env_count("KNID_BENCH_LOCAL_PODS", 4);
    let pods = env_count("KNID_BENCH_PODS", 5000);
    let namespaces = env_count("KNID_BENCH_NAMESPACES", 50);
    let policies = env_count("KNID_BENCH_SCALE_POLICIES", 1000);
    let (lan, _dir, api, _port) = api_on_lan();
    api.add_node(node_spec("node-m", 1));
    let mut node = start_cluster_node(&lan, &api, "node-m", 1, Creds::InCluster);
    at_info(&mut node);
    wait("the pod CIDR", || node.condition("PodCIDR").status);
    netpol_scale::put_namespaces(&api, namespaces);
    let mut attached = Vec::new();
    for i in 0..local {
        let labels = netpol_scale::app_labels(i);
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let ns = netpol_scale::namespace(i % namespaces);
        attached.push(add_pod(
            &api,
            (&node, "node-m", 0),
            &ns,
            &format!("local-{i}"),
            &labels,
        ));
    }
    std::thread::sleep(Duration::from_secs(3));
    let pid = u32::try_from(Pid::as_raw(node.pid())).expect("pid");
    let footprint = || {
        let kib = |f| proc_status(pid, f).unwrap_or(0) as f64 / 1024.0;
        format!(
            "VmRSS {:.1} MiB, RssAnon {:.1} MiB, VmHWM {:.1} MiB, {} threads",
            kib("VmRSS"),
            kib("RssAnon"),
            kib("VmHWM"),
            proc_status(pid, "Threads").unwrap_or(0)
        )
    };
    let idle = footprint();

    for i in 0..pods {
        api.put_pod(netpol_scale::remote_pod(i, namespaces));
    }
    let objects = |node: &TestNode| {
        let text = testkit::cli::knictl_ok(node, &["metrics", "knid_policy_objects"]);
        let get = |kind: &str| {
            let want = format!("knid_policy_objects{{kind=\"{kind}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&want))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0)
        };
        (get("networkpolicies"), get("namespaces"), get("pods"))
    };
    let mut nft = Nft::open_in(&node.host()).expect("nf_tables socket in the node");
    let before = state(&mut nft);
    let started = Instant::now();
    for i in 0..policies {
        netpol_scale::put_policy(&api, i, namespaces);
    }
    let written = started.elapsed();
    // The stand-in serves kube-system and default beside the bench's namespaces.
    wait("every object known", || {
        let (p, ns, pod) = objects(&node);
        p == policies && ns >= namespaces && pod == pods + local
    });
    let known = started.elapsed();
    // The table is final once it has changed from before and stays the same for a second.
    let mut last = state(&mut nft);
    let mut since = Instant::now();
    let mut applied = if last != before { Some(known) } else { None };
    loop {
        std::thread::sleep(Duration::from_millis(5));
        let now = state(&mut nft);
        if now != last {
            applied = Some(started.elapsed());
            last = now;
            since = Instant::now();
        } else if applied.is_some() && since.elapsed() > Duration::from_secs(1) {
            break;
        }
        assert!(started.elapsed() < TIMEOUT, "the table never settled");
    }
    let applied = applied.expect("applied");
    std::thread::sleep(Duration::from_secs(3));
    let loaded = footprint();
    let v6 = last.allows.iter().filter(|a| a.pod.is_ipv6()).count();

    println!(
        "\n## 3. Memory at scale: one knid with {local} pods; the API holds {pods} Pods in \
         {namespaces} namespaces and {policies} NetworkPolicies\n"
    );
    println!("| what | result |");
    println!("|---|---|");
    println!("| idle, no policy ({local} pods attached) | {idle} |");
    println!(
        "| {policies} policies written (from the first) | {:.0} ms |",
        ms(written)
    );
    println!(
        "| first policy written → every object known (metrics) | {:.0} ms |",
        ms(known)
    );
    println!(
        "| first policy written → table applied in the kernel | {:.0} ms |",
        ms(applied)
    );
    println!("| with them all, table applied | {loaded} |");
    println!(
        "| the table | {} isolated pod directions, {} allows ({} IPv6) |",
        last.isolated.len(),
        last.allows.len(),
        v6
    );
    drop(attached);
}
