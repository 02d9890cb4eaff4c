//! knid's threads exist while they have work: idle, knid holds its main thread and sled's own.
//! The main thread is the API server's thread in epoll whenever knid is idle, and the signals
//! and the periodic jobs are served from that same epoll wait; a call starts an API thread to
//! take the epoll over while the main thread runs it (kept warm while calls come), an attach
//! starts the store's flusher, a detach the reaper, and each ends again once idle. In cluster
//! mode, three more however many Nodes it watches: the Node watch, the NetworkPolicy watch and
//! the cluster thread; the Namespace and Pod watches only while a NetworkPolicy exists. Read
//! from the kernel (`/proc/<pid>/task/*/comm`), not from knid.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use serde_json::json;
use testkit::cluster_node::{
    api_on_lan, knid_routes, node_spec, start_cluster_node, watched_node, Creds, WATCHED_LAN,
};
use testkit::cni::tool_in;
use testkit::give_back::Footprint;
use testkit::threads::{self, Threads, CLUSTER_IDLE};
use testkit::wait::wait_until;
use testkit::{TestNode, RPC, TWO_NETWORKS};

/// How long an idle knid's on-demand threads may take to end: the warm API thread's 30 s
/// without a call, a surplus one's 5 s after it, and a margin.
const IDLE_WITHIN: Duration = Duration::from_secs(45);

fn all_threads(node: &TestNode) -> Threads {
    threads::of(node.pid().as_raw())
}

/// knid's own threads (sled's left out).
fn own_threads(node: &TestNode) -> Threads {
    threads::own(&all_threads(node))
}

fn set(names: &[(&str, usize)]) -> Threads {
    names
        .iter()
        .map(|(n, count)| (n.to_string(), *count))
        .collect()
}

/// Waits (up to `limit`) until knid's own threads are `want`.
fn wait_threads(node: &TestNode, want: &Threads, limit: Duration) {
    if !wait_until(limit, Duration::from_millis(100), || {
        own_threads(node) == *want
    }) {
        let now = own_threads(node);
        panic!("knid's threads after {limit:?}: {now:?}, expected {want:?}");
    }
}

/// Waits (up to `limit`) until knid holds exactly an idle knid's threads: its main thread and
/// sled's 8, no `knid-api` among them. Returns how long it took.
fn wait_idle(node: &TestNode, limit: Duration) -> Duration {
    let started = Instant::now();
    if !wait_until(limit, Duration::from_millis(100), || {
        threads::are_idle(&all_threads(node))
    }) {
        panic!(
            "knid's threads after {limit:?}: {:?}, expected main (knid) and sled's {}",
            all_threads(node),
            threads::SLEDS
        );
    }
    started.elapsed()
}

/// Whether Status's `PodInterfacesReady` is true.
fn pod_interfaces_ready(node: &TestNode) -> bool {
    node.condition("PodInterfacesReady").status
}

#[test]
fn threads_run_while_they_have_work_and_an_idle_knid_keeps_one_of_its_own() {
    if !testkit::privileged() {
        return;
    }
    // A reconciler round every 200 ms: the periodic jobs run on the API's threads, the main
    // thread at idle.
    let node = TestNode::start(r#"gc_interval = "200ms""#);
    // Start-up starts no flusher (only attaches and detaches do); the API thread started when
    // the readiness polls came stays warm for 30 s (waited for at the end).
    wait_threads(
        &node,
        &set(&[("knid", 1), ("knid-api", 1)]),
        Duration::from_secs(15),
    );

    let netns = node.netns("threads");
    let attached = node
        .client()
        .attach(&node.attach_req("pod-threads", &netns, "eth0"), RPC)
        .expect("Attach");
    node.assert_host_side(&attached.interfaces[0]);
    let after_attach = own_threads(&node);
    assert!(
        after_attach.get("knid-api").is_some_and(|n| *n >= 1),
        "no API thread kept warm after a call: {after_attach:?}"
    );
    assert!(
        !after_attach.contains_key("knid-reaper"),
        "a reaper before any detach: {after_attach:?}"
    );
    // The attach started the store's flusher, which stays for the next pod a few seconds later
    // (30 s, as the warm API thread).
    std::thread::sleep(Duration::from_secs(3));
    let later = own_threads(&node);
    // `knid-store-flush` as the kernel keeps it: 15 bytes.
    assert!(
        later.contains_key("knid-store-flus"),
        "no flusher 3 s after an attach: {later:?}"
    );

    // The reconciler still runs, with no thread of its own: it sees the pod end set down.
    assert!(pod_interfaces_ready(&node));
    let mut pod = testkit::rtnl_in(&netns);
    let eth0 = pod.link_by_name("eth0").expect("look up").expect("eth0");
    pod.set_down(eth0.index).expect("set eth0 down");
    testkit::wait_for(
        "the reconciler to see eth0 down",
        Duration::from_secs(20),
        || !pod_interfaces_ready(&node),
    );
    let now = own_threads(&node);
    assert!(
        now.keys().all(|t| !t.contains("periodic")),
        "a thread for the periodic jobs: {now:?}"
    );

    node.client()
        .detach(&testkit::detach_req("pod-threads"), RPC)
        .expect("Detach");
    let started = Instant::now();
    let mut saw_reaper = false;
    while !saw_reaper && started.elapsed() < Duration::from_secs(5) {
        saw_reaper = own_threads(&node).contains_key("knid-reaper");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(saw_reaper, "no reaper thread after a detach");
    // The reaper did its work (the link and the addresses are gone). It stays for the next
    // detach a few seconds later (30 s, as the warm API thread), then everything ends, while a
    // reconciler round still comes every 200 ms.
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    std::thread::sleep(Duration::from_secs(12).saturating_sub(started.elapsed()));
    let later = own_threads(&node);
    assert!(
        later.contains_key("knid-reaper"),
        "no reaper 12 s after a detach: {later:?}"
    );
    wait_idle(&node, IDLE_WITHIN);
    assert!(node.list_ids().is_empty());
}

#[test]
fn a_bursts_api_threads_end_while_one_client_keeps_calling_and_all_once_it_stops() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let api_threads = |node: &TestNode| own_threads(node).get("knid-api").copied().unwrap_or(0);
    // A burst: 16 clients calling at once, each on its own connection, for a second.
    let burst_end = Instant::now() + Duration::from_secs(1);
    let mut peak = 0;
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| {
                let client = node.client();
                while Instant::now() < burst_end {
                    client.status(RPC).expect("Status in the burst");
                }
            });
        }
        while Instant::now() < burst_end {
            peak = peak.max(api_threads(&node));
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    assert!(peak > 3, "the burst started only {peak} API threads");
    // One well-behaved client calls every 10 ms: the threads the burst started end after
    // their idle time all the same (the follower woken is the main thread when it waits, else
    // the one idle last; woken in turn, each would stay for as long as the client calls), down
    // to the main thread and the one API thread kept warm while calls come.
    let warm = set(&[("knid", 1), ("knid-api", 1)]);
    let client = node.client();
    let started = Instant::now();
    let mut now = own_threads(&node);
    while now != warm && started.elapsed() < Duration::from_secs(20) {
        client.status(RPC).expect("Status");
        std::thread::sleep(Duration::from_millis(10));
        now = own_threads(&node);
    }
    assert_eq!(
        now,
        warm,
        "knid's threads {:?} after a burst that started {peak} API threads, with one client \
         calling",
        started.elapsed()
    );
    let light = started.elapsed();
    // The client stops: the warm thread ends too, and the API's epoll is the main thread's
    // again, whichever thread held it last.
    let quiet = wait_idle(&node, IDLE_WITHIN);
    println!(
        "API threads: {peak} at the burst's peak, 1 after {:.1} s of one client calling, none \
         {:.1} s after it stopped",
        light.as_secs_f64(),
        quiet.as_secs_f64()
    );
}

/// Holds each attach long enough for a SIGTERM to come while it runs.
const SLOW_ATTACH: &str = "attach.veth_created=sleep(1500)";

fn has_link(netns: &Path, name: &str) -> bool {
    testkit::link_names(netns).iter().any(|l| l == name)
}

#[test]
fn an_idle_knid_is_its_main_thread_and_sleds_and_still_reloads_on_sighup_and_stops_on_sigterm() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    let mut node = TestNode::start_with("", &[("KNID_FAILPOINTS", SLOW_ATTACH)], &[]);
    let client = node.client();
    for _ in 0..5 {
        client.status(RPC).expect("Status");
    }
    let quiet = wait_idle(&node, IDLE_WITHIN);
    println!("idle {:.1} s after the last call", quiet.as_secs_f64());

    // SIGHUP at idle: the main thread hands the epoll to a thread for the time of the reload,
    // which hands it back and ends. Seen in the kernel, with no call that would keep a thread.
    node.write_config(TWO_NETWORKS);
    kill(node.pid(), Signal::SIGHUP).expect("SIGHUP");
    testkit::wait_for(
        "SIGHUP's reload to set up bridge brx1",
        testkit::SETTLE,
        || has_link(node.host_path(), "brx1"),
    );
    // The reload's thread ends once the reload is done; its writes start no flusher.
    wait_idle(&node, Duration::from_secs(10));

    // SIGTERM while an attach runs: the attach is answered, and knid exits 0 after it.
    let netns = node.netns("in-flight");
    let req = node.attach_req("pod-in-flight", &netns, "eth0");
    let host_name = knid_core::names::host_ifname("pod-in-flight", "eth0");
    let attached = std::thread::scope(|s| {
        let attach = s.spawn(|| client.attach(&req, RPC));
        testkit::wait_for("the attach to create its veth", testkit::SETTLE, || {
            has_link(node.host_path(), &host_name)
        });
        let status = node.stop();
        assert_eq!(status.code(), Some(0), "knid exit status {status}");
        attach.join().expect("the attach's thread")
    });
    let attached = attached.expect("the attach in flight at SIGTERM");
    assert!(
        node.log_text().contains("signal 15: shutting down"),
        "SIGTERM not logged"
    );
    // It was finished, not cut short: knid started again has it as answered.
    node.restart();
    assert_eq!(node.inspect("pod-in-flight"), attached);
}

#[test]
fn a_metrics_scrape_at_idle_leaves_the_main_thread_no_socket() {
    if !testkit::privileged() {
        return;
    }
    // Its network guards sources (the default): a scrape reads the guards' drop counters.
    let node = TestNode::start("");
    let pid = u32::try_from(node.pid().as_raw()).expect("pid");
    wait_idle(&node, IDLE_WITHIN);
    let before = Footprint::of(pid).fds;
    // At idle the main thread reads the request and runs it.
    let scrape = testkit::cli::knictl(&node, &["metrics", "knid_antispoof_dropped_total"]);
    assert!(scrape.status.success(), "knictl metrics: {scrape:?}");
    // The client gone, its connection closes: the open files are those of before, not one
    // more (the main thread lives on, so a socket it kept would stay for good).
    let settled = wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
        Footprint::of(pid).fds <= before
    });
    assert!(
        settled,
        "knid holds {} files after a scrape at idle, {before} before",
        Footprint::of(pid).fds
    );
}

/// The Namespace and Pod watches, while a NetworkPolicy exists.
const POLICY_PEERS: [&str; 2] = ["knid-kube-ns", "knid-kube-pods"];
/// Every thread of an idle knid in cluster mode: sled's 8, the main thread (the API server's)
/// and cluster mode's three.
const CLUSTER_IDLE_BUDGET: usize = 12;

/// What is wrong with `threads` for an idle cluster-mode knid, if anything: they must be
/// exactly sled's, the main thread, [`threads::CLUSTER_IDLE`] and `more`, one of each, within
/// [`CLUSTER_IDLE_BUDGET`] (and `more`).
fn idle_cluster_problem(threads: &Threads, more: &[&str]) -> Option<String> {
    let names: Vec<&str> = CLUSTER_IDLE.iter().chain(more).copied().collect();
    let want = threads::idle_own(&names);
    let own = threads::own(threads);
    let sleds = threads::sleds(threads);
    let all: usize = threads.values().sum();
    if own != want || sleds != threads::SLEDS {
        return Some(format!(
            "knid's own {own:?} and {sleds} of sled's, expected {want:?} and {}",
            threads::SLEDS
        ));
    }
    (all > CLUSTER_IDLE_BUDGET + more.len())
        .then(|| format!("{all} threads, over the budget of {CLUSTER_IDLE_BUDGET}"))
}

/// Waits (up to `limit`) until `node`'s threads are those of an idle cluster-mode knid, with
/// `more`; panics listing them all otherwise.
fn wait_idle_cluster(node: &TestNode, more: &[&str], limit: Duration) {
    let ok = wait_until(limit, Duration::from_millis(100), || {
        idle_cluster_problem(&all_threads(node), more).is_none()
    });
    if !ok {
        let threads = all_threads(node);
        let problem = idle_cluster_problem(&threads, more).unwrap_or_default();
        panic!(
            "after {limit:?}: {problem}; knid's {} threads: {threads:?}",
            threads.values().sum::<usize>()
        );
    }
}

#[test]
fn an_idle_cluster_mode_knid_watching_a_thousand_nodes_keeps_three_threads_for_cluster_mode() {
    if !testkit::privileged() {
        return;
    }
    const WATCHED: usize = 1000;
    let (lan, _api_dir, api, _port) = api_on_lan();
    api.add_node(node_spec("node-a", 1));
    for i in 0..WATCHED {
        api.add_node(watched_node(i));
    }
    let node = start_cluster_node(&lan, &api, "node-a", 1, Creds::InCluster);
    // The watched Nodes' InternalIPs directly connected: a route to each of them.
    tool_in(
        node.host_path(),
        "ip",
        &["addr", "add", WATCHED_LAN, "dev", "eth0"],
    );
    testkit::wait_for(
        "a route to every watched Node",
        Duration::from_secs(120),
        || knid_routes(node.host_path()).len() == WATCHED,
    );
    // The start-up sweep, the store's flusher, the first Node writes and the API thread kept
    // warm after the start's readiness polls all end.
    wait_idle_cluster(&node, &[], IDLE_WITHIN);
    let idle = all_threads(&node);
    println!(
        "idle in cluster mode, {} Nodes watched: {} threads {idle:?}",
        WATCHED + 1,
        idle.values().sum::<usize>()
    );

    // A NetworkPolicy: Namespaces and Pods are watched while it exists, and only then.
    api.put_namespace("x", &[]);
    let deny = json!({"podSelector": {}, "policyTypes": ["Ingress"]});
    api.put_network_policy("x", "deny", deny)
        .expect("put the policy");
    wait_idle_cluster(&node, &POLICY_PEERS, Duration::from_secs(30));
    api.delete_network_policy("x", "deny");
    // Each ends at its watch's next event or bookmark (the stand-in sends one every second).
    wait_idle_cluster(&node, &[], Duration::from_secs(30));
    assert_eq!(
        knid_routes(node.host_path()).len(),
        WATCHED,
        "routes lost meanwhile"
    );
}

/// A light load: a pod attached and detached, one call at a time on one connection, so no
/// burst, whose end would release knid's code.
fn light_load(node: &TestNode) {
    let netns = node.netns("light");
    let client = node.client();
    client
        .attach(&node.attach_req("pod-light", &netns, "eth0"), RPC)
        .expect("Attach");
    client
        .detach(&testkit::detach_req("pod-light"), RPC)
        .expect("Detach");
}

#[test]
fn the_code_a_light_load_ran_goes_back_once_its_calls_are_over() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let pid = u32::try_from(node.pid().as_raw()).expect("pid");
    let code = || {
        testkit::measure::memory_parts(pid)
            .expect("knid's smaps")
            .code_kib
    };
    // Start-up and its readiness polls over.
    wait_idle(&node, IDLE_WITHIN);
    light_load(&node);
    let busy = code();
    // The warm API thread, the store's flusher and the reaper end 30 s after the calls; the code
    // the calls ran goes a few seconds later, as read in the kernel's map of knid.
    wait_idle(&node, IDLE_WITHIN);
    let mut now = code();
    let released = wait_until(Duration::from_secs(20), Duration::from_millis(200), || {
        now = code();
        now * 3 <= busy * 2
    });
    let log = node.log_text();
    let releases: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("knid's binary"))
        .collect();
    assert!(
        released,
        "knid's code still {now} KiB resident after its calls ended ({busy} KiB after them); \
         releases: {releases:#?}"
    );
}

/// A reconciler round every 6 s: more than the 5 s knid leaves between two releases of its
/// code, so that each round's can come.
const ROUND_EVERY_6S: &str = r#"gc_interval = "6s""#;

/// How knid's debug log says it released its code after a reconciler round, the KiB resident
/// before the release (read from its smaps) at the line's end.
const ROUND_RELEASE: &str = "of knid's binary after a reconciler round, ";
/// How knid's debug log says it released its code after calls (a burst's end, or a light
/// load's), the KiB resident before the release at the line's end.
const CALLS_RELEASE: &str = "of knid's binary after calls, ";

/// The lines of knid's log that say a release of its code, `what` (`ROUND_RELEASE`,
/// `CALLS_RELEASE`), in order.
fn release_lines(node: &TestNode, what: &str) -> Vec<String> {
    node.log_text()
        .lines()
        .filter(|l| l.contains(what))
        .map(str::to_owned)
        .collect()
}

/// The KiB of knid's code resident before the release a `what` line says.
fn resident_before(line: &str, what: &str) -> u64 {
    let kib = line
        .split(what)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no KiB in {line:?}"));
    kib.parse().unwrap_or_else(|_| panic!("KiB in {line:?}"))
}

#[test]
fn the_code_a_reconciler_round_ran_goes_back_after_the_round() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(ROUND_EVERY_6S);
    let pid = u32::try_from(node.pid().as_raw()).expect("pid");
    let code = || testkit::measure::releasable_kib(pid).expect("knid's smaps");
    // Pods for the rounds' audit to look at, attached one call at a time.
    let client = node.client();
    for i in 0..3 {
        let id = format!("pod-round-{i}");
        let netns = node.netns(&id);
        client
            .attach(&node.attach_req(&id, &netns, "eth0"), RPC)
            .expect("Attach");
    }
    drop(client);
    wait_idle(&node, IDLE_WITHIN);
    // Two rounds' releases, each checked in the kernel's map of knid as soon as the log shows it
    // (no call to knid meanwhile): less is resident than before the release, which without a
    // release only grows. What runs right after a release maps its pages back at once, 64 KiB
    // at a time: in a debug build, whose code is neither optimized nor ordered, about half of it
    // (measured: 14,708 KiB before, 7,156 after). Not a share: the release after calls, checked
    // the same way below, maps back ~3 MiB more one time in three to seven.
    let releases = || release_lines(&node, ROUND_RELEASE);
    let seen = releases().len();
    for n in 1..=2 {
        let mut lines = Vec::new();
        let logged = wait_until(Duration::from_secs(40), Duration::from_millis(20), || {
            lines = releases();
            lines.len() >= seen + n
        });
        assert!(
            logged,
            "release {n} of knid's code after a reconciler round not logged within 40 s: {lines:#?}"
        );
        let after = code();
        let before = resident_before(&lines[seen + n - 1], ROUND_RELEASE);
        println!("round release {n}: {before} KiB of code resident before it, {after} KiB after");
        assert!(
            after < before,
            "knid's code {after} KiB resident after the round's release, {before} KiB before it: \
             nothing went"
        );
    }
}

/// A reconciler round that releases knid's code between a light load's last call and the end of
/// the threads it kept (the warm API thread, the flusher, the reaper, 30 s after it) leaves what
/// those ends map to the release after calls, which still comes 5 s after them. knid's round
/// comes every 60 s from its start: the calls come 45 s after it, so the first round 15 s after
/// the calls.
#[test]
fn a_round_between_the_last_call_and_its_threads_ends_leaves_the_release_after_calls_to_come() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let started = Instant::now();
    let pid = u32::try_from(node.pid().as_raw()).expect("pid");
    wait_idle(&node, IDLE_WITHIN);
    std::thread::sleep(Duration::from_secs(45).saturating_sub(started.elapsed()));
    let (rounds, calls) = (
        release_lines(&node, ROUND_RELEASE).len(),
        release_lines(&node, CALLS_RELEASE).len(),
    );
    light_load(&node);
    let called = Instant::now();
    assert!(
        wait_until(Duration::from_secs(40), Duration::from_millis(20), || {
            release_lines(&node, ROUND_RELEASE).len() > rounds
        }),
        "no reconciler round released knid's code within 40 s of the calls"
    );
    let round_after = called.elapsed();
    assert!(
        round_after < Duration::from_secs(25),
        "the round came {round_after:?} after the calls, not before their threads' end 30 s \
         after them: this test's premise failed"
    );
    let mut lines = Vec::new();
    let released = wait_until(Duration::from_secs(50), Duration::from_millis(20), || {
        lines = release_lines(&node, CALLS_RELEASE);
        lines.len() > calls
    });
    let after = testkit::measure::releasable_kib(pid).expect("knid's smaps");
    assert!(
        released,
        "no release after calls within 50 s of the round's, {round_after:?} after the calls: \
         what the calls' threads ran at their end stays mapped until the next round"
    );
    let before = resident_before(&lines[calls], CALLS_RELEASE);
    println!(
        "round {round_after:?} after the calls; the release after calls: {before} KiB of code \
         resident before it, {after} KiB after"
    );
    // Without a release knid's code only grows. Not a share of it, as after a round: this
    // release comes 20 s after a round took the calls' code, so it finds little more than what
    // the threads' ends and the idle loop mapped since, and what runs right after it maps back
    // 4,020-4,652 KiB, or 7,476-7,748 KiB one time in three to seven (measured: 9,388-9,668 KiB
    // before it).
    assert!(
        after < before,
        "knid's code {after} KiB resident after the release after calls, {before} KiB before it: \
         nothing went"
    );
}
