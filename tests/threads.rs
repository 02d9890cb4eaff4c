//! knid's threads exist while they have work: idle, knid holds its main thread (signals and the
//! periodic jobs), one API thread (in epoll) and sled's own; a call starts a second API thread to
//! take the epoll over while the first runs it, an attach starts the store's flusher, a detach
//! the reaper, and each ends again once idle. Read from the kernel (`/proc/<pid>/task/*/comm`),
//! not from knid.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use testkit::wait::wait_until;
use testkit::{TestNode, RPC};

/// sled 0.34's threads: its I/O pool (kept for good) and its periodic flusher.
fn is_sleds(name: &str) -> bool {
    name.starts_with("sled-io-") || name == "log flusher"
}

/// Threads by name: how many of each.
type Threads = BTreeMap<String, usize>;

/// knid's own threads (sled's left out), by the names the kernel has for them.
fn own_threads(node: &TestNode) -> Threads {
    let tasks = format!("/proc/{}/task", node.pid());
    let mut threads = Threads::new();
    std::fs::read_dir(&tasks)
        .unwrap_or_else(|e| panic!("read {tasks}: {e}"))
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|comm| comm.trim_end().to_owned())
        .filter(|name| !is_sleds(name))
        .for_each(|name| *threads.entry(name).or_default() += 1);
    threads
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

/// Whether Status's `PodInterfacesReady` is true.
fn pod_interfaces_ready(node: &TestNode) -> bool {
    node.condition("PodInterfacesReady").status
}

#[test]
fn threads_run_while_they_have_work_and_an_idle_knid_keeps_two_of_its_own() {
    if !testkit::privileged() {
        return;
    }
    // A reconciler round every 200 ms: the periodic jobs run on the main thread.
    let node = TestNode::start(r#"gc_interval = "200ms""#);
    let idle = set(&[("knid", 1), ("knid-api", 1)]);
    // Start-up's flusher ends 2 s after its last flush; the second API thread, started when the
    // readiness polls came, stays warm for 30 s (waited for at the end).
    wait_threads(
        &node,
        &set(&[("knid", 1), ("knid-api", 2)]),
        Duration::from_secs(15),
    );

    let netns = node.netns("threads");
    let attached = node
        .client()
        .attach(&node.attach_req("pod-threads", &netns, "eth0"), RPC)
        .expect("Attach");
    node.assert_host_side(&attached.interfaces[0]);
    let after_attach = own_threads(&node);
    assert_eq!(
        after_attach.get("knid-api"),
        Some(&2),
        "not one API thread in epoll and one warm: {after_attach:?}"
    );
    assert!(
        !after_attach.contains_key("knid-reaper"),
        "a reaper before any detach: {after_attach:?}"
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
    // The reaper did its work (the link and the addresses are gone), then everything ends.
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    wait_threads(&node, &idle, Duration::from_secs(45));
    let all = std::fs::read_dir(format!("/proc/{}/task", node.pid()))
        .expect("tasks")
        .count();
    assert!(
        all <= 10,
        "{all} threads idle: knid's 2 and more than sled's 8 (7 I/O, 1 flusher)"
    );
    assert!(node.list_ids().is_empty());
}

#[test]
fn a_bursts_surplus_api_threads_end_while_one_client_keeps_calling() {
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
    // their idle time all the same (the follower woken is the one idle last; woken in turn,
    // each would stay for as long as the client calls).
    let client = node.client();
    let started = Instant::now();
    let mut now = api_threads(&node);
    while now > 3 && started.elapsed() < Duration::from_secs(20) {
        client.status(RPC).expect("Status");
        std::thread::sleep(Duration::from_millis(10));
        now = api_threads(&node);
    }
    assert!(
        now <= 3,
        "{now} API threads {:?} after a burst that started {peak}, with one client calling",
        started.elapsed()
    );
    println!(
        "API threads: {peak} at the burst's peak, {now} after {:.1} s of one client calling",
        started.elapsed().as_secs_f64()
    );
}
