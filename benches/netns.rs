//! Creating and deleting a sandbox network namespace, side by side in one run:
//! - knid's CreateNetns / DeleteNetns over ttrpc (a spare namespace bind-mounted, the record
//!   durable before the reply; DeleteNetns detaches first, here there is nothing attached), with
//!   the ttrpc crate's client (a reader and a writer thread) and with knid's thread-free one;
//! - `ip netns add` / `ip netns delete` (iproute2, one exec each: the peer of the baseline);
//! - the in-process floor: knid-netops creating a namespace on a scoped thread and
//!   bind-mounting it, no store, no RPC, no spare.
//!
//! `KNID_BENCH_N` (default 200) sequential create+delete cycles per subject after 5 warm-up
//! cycles, then a burst of `KNID_BENCH_N` CreateNetns without deletes (the spare pool drains and
//! each create pays for its own namespace), then their deletes. Prints p50/p90/p99/max; numbers
//! are reported, never asserted.
//!
//! The bench first moves itself into a private mount namespace with its own tmpfs on /run, so `ip netns add` never touches the machine's /run/netns; everything it mounted
//! goes with it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use knid_transport::pb;
use testkit::measure::{env_count, ms, percentile, report};
use testkit::{TestNode, RPC};

const WARM_UP: usize = 5;
const RUNTIME: &str = knid_transport::client::oneshot::RUNTIME_SERVICE;
const PEERS: &str =
    "baseline (docs/comparison.md#latency-and-throughput, p50): `ip netns add` 1.5 ms; knid target \
     (docs/performance.md#targets) <= 0.5 ms";

fn main() {
    if !testkit::privileged() {
        return;
    }
    private_run_netns();
    let cycles = env_count("KNID_BENCH_N", 200);
    let node = TestNode::start(r#"gc_interval = "0s""#);
    let client = node.client();
    let create_req = |id: &str| pb::CreateNetnsRequest {
        sandbox_id: id.to_owned(),
        ..Default::default()
    };
    let delete_req = |id: &str| pb::DeleteNetnsRequest {
        sandbox_id: id.to_owned(),
        ..Default::default()
    };

    let (mut create, mut delete) = cycle(cycles, |i| {
        let id = format!("bench-{i}");
        (
            timed(|| {
                drop(
                    client
                        .create_netns(&create_req(&id), RPC)
                        .expect("CreateNetns"),
                )
            }),
            timed(|| {
                client
                    .delete_netns(&delete_req(&id), RPC)
                    .expect("DeleteNetns")
            }),
        )
    });

    // The same calls over one thread-free connection (no client reader/writer threads to wake).
    let mut oneshot = knid_transport::client::oneshot::OneshotClient::connect(node.socket(), RPC)
        .expect("connect oneshot");
    let (mut lean_create, mut lean_delete) = cycle(cycles, |i| {
        let id = format!("lean-{i}");
        let created = timed(|| {
            let _: pb::CreateNetnsResponse = oneshot
                .call(RUNTIME, "CreateNetns", &create_req(&id), RPC)
                .expect("CreateNetns");
        });
        let deleted = timed(|| {
            let _: pb::DeleteNetnsResponse = oneshot
                .call(RUNTIME, "DeleteNetns", &delete_req(&id), RPC)
                .expect("DeleteNetns");
        });
        (created, deleted)
    });

    let ids: Vec<String> = (0..cycles).map(|i| format!("burst-{i}")).collect();
    let mut burst: Vec<Duration> = ids
        .iter()
        .map(|id| {
            timed(|| {
                drop(
                    client
                        .create_netns(&create_req(id), RPC)
                        .expect("CreateNetns"),
                )
            })
        })
        .collect();
    let mut burst_delete: Vec<Duration> = ids
        .iter()
        .map(|id| {
            timed(|| {
                client
                    .delete_netns(&delete_req(id), RPC)
                    .expect("DeleteNetns")
            })
        })
        .collect();

    let (mut ip_add, mut ip_del) = cycle(cycles, |i| {
        let name = format!("knid-bench-{i}");
        (
            time_ip(&["netns", "add", &name]),
            time_ip(&["netns", "delete", &name]),
        )
    });

    let floor_dir = tempfile::tempdir().expect("tempdir");
    let (mut floor_add, mut floor_del) = cycle(cycles, |i| {
        let path = floor_dir.path().join(format!("floor-{i}"));
        (
            timed(|| drop(knid_netops::netns::create_bound(&path).expect("create_bound"))),
            timed(|| {
                knid_netops::netns::remove_bound(&path).expect("remove_bound");
            }),
        )
    });

    println!("netns create/delete, {cycles} cycles each; {PEERS}");
    println!("knid CreateNetns / DeleteNetns over ttrpc (sequential, spare pool of 4):");
    report("create", &mut create);
    report("delete", &mut delete);
    println!("the same over one thread-free ttrpc connection (transport::oneshot):");
    report("create", &mut lean_create);
    report("delete", &mut lean_delete);
    println!("knid CreateNetns burst without deletes (spares drained), then the deletes:");
    report("create", &mut burst);
    report("delete", &mut burst_delete);
    println!("ip netns add / delete (exec):");
    report("add", &mut ip_add);
    report("delete", &mut ip_del);
    println!("in-process floor (netops create_bound / remove_bound, no store, no RPC):");
    report("create", &mut floor_add);
    report("delete", &mut floor_del);
    let p50 = |s: &[Duration]| ms(percentile(s, 50.0));
    println!(
        "create p50: knid {:.3} ms ({:.3} ms thread-free) = {:.2}x `ip netns add` ({:.3} ms); \
         floor {:.3} ms",
        p50(&create),
        p50(&lean_create),
        p50(&create) / p50(&ip_add),
        p50(&ip_add),
        p50(&floor_add)
    );
    node.assert_host_clean();
}

/// Runs `one` for WARM_UP + `cycles` cycles and returns the (create, delete) times of the
/// measured ones.
fn cycle(
    cycles: usize,
    mut one: impl FnMut(usize) -> (Duration, Duration),
) -> (Vec<Duration>, Vec<Duration>) {
    (0..WARM_UP + cycles).map(&mut one).skip(WARM_UP).unzip()
}

/// How long `f` takes.
fn timed(f: impl FnOnce()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

/// `ip ARGS` from spawn to exit; panics if it fails.
fn time_ip(args: &[&str]) -> Duration {
    let started = Instant::now();
    let status = Command::new("ip").args(args).status().expect("run ip");
    let took = started.elapsed();
    assert!(status.success(), "ip {args:?}: {status}");
    took
}

/// Gives this process (still single-threaded) a private mount namespace with a tmpfs of its own
/// on /run, where `ip netns add` mounts.
fn private_run_netns() {
    use nix::mount::{mount, MsFlags};
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).expect("unshare a mount namespace");
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .expect("make / private");
    // On /run itself: creating /run/netns first would leave a directory on the machine.
    mount(
        Some("tmpfs"),
        Path::new("/run"),
        Some("tmpfs"),
        MsFlags::empty(),
        Some("mode=755"),
    )
    .expect("mount a private tmpfs on /run");
}
