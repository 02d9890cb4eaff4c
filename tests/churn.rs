//! Sustained churn: thousands of attach/detach cycles from many clients leave nothing behind —
//! no link, no port, no address, no record — and the store does not grow with the number of
//! sandboxes that ever lived, across a restart.

use std::time::{Duration, Instant};

use testkit::{TestNode, BRIDGE, RPC};

/// Client threads, each with its own connection.
const THREADS: usize = 8;
/// Cycles per run when `KNID_CHURN_N` is not set.
const DEFAULT_CYCLES: usize = 1000;
/// sled 0.34's segment size: its log file grows and shrinks in these steps.
const SLED_SEGMENT: u64 = 512 * 1024;
/// How much the store may grow from the first churn run to the second. Measured (debug build,
/// 8 threads, ~20 pairs of runs of 8 to 20,000 cycles): 0.5 MiB after 8 cycles, then 2 to 5
/// segments (1.0-2.5 MiB) at the end of every run of 300 cycles or more, however many cycles
/// ran, because sled reclaims the segments of dead records; where in that range a run ends
/// depends on where sled's background flush and segment GC stood (the largest growth seen from
/// one run to the next: 2 segments). sled writes ~3.3 MB per 1,000 cycles (pwrite64 bytes,
/// strace), so a store that kept its history would grow by 6+ segments per 1,000 cycles, twice
/// this bound: from ~500 cycles per run up, linear growth cannot pass.
const GROWTH_BOUND: u64 = 3 * SLED_SEGMENT;

/// Cycles per run: `KNID_CHURN_N`, or [`DEFAULT_CYCLES`].
fn cycles() -> usize {
    std::env::var("KNID_CHURN_N").map_or(DEFAULT_CYCLES, |v| {
        v.parse()
            .unwrap_or_else(|e| panic!("KNID_CHURN_N={v:?}: {e}"))
    })
}

/// Wall time of one churn run and the time its threads spent in each step, summed.
#[derive(Debug, Default)]
struct Timings {
    wall: Duration,
    netns: Duration,
    attach: Duration,
    detach: Duration,
}

/// Runs `n` create-netns/attach/detach/remove-netns cycles spread over [`THREADS`] threads
/// (each with its own connection); sandbox ids carry `run` so no two runs share one. Every RPC
/// must succeed.
fn churn(node: &TestNode, run: usize, n: usize) -> Timings {
    let started = Instant::now();
    let mut total = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut spent = Timings::default();
                    let client = node.client();
                    for k in (t..n).step_by(THREADS) {
                        let id = format!("churn-{run}-{k}");
                        let step = Instant::now();
                        let netns = node.netns(&id);
                        spent.netns += step.elapsed();
                        let step = Instant::now();
                        let sandbox = client
                            .attach(&node.attach_req(&id, &netns, "eth0"), RPC)
                            .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
                        spent.attach += step.elapsed();
                        assert_eq!(sandbox.interfaces.len(), 1, "{id}: {sandbox:?}");
                        let step = Instant::now();
                        client
                            .detach(&testkit::detach_req(&id), RPC)
                            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
                        spent.detach += step.elapsed();
                        let step = Instant::now();
                        node.remove_netns(&netns);
                        spent.netns += step.elapsed();
                    }
                    spent
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|h| h.join().expect("churn thread"))
            .fold(Timings::default(), |sum, t| Timings {
                wall: Duration::ZERO,
                netns: sum.netns + t.netns,
                attach: sum.attach + t.attach,
                detach: sum.detach + t.detach,
            })
    });
    total.wall = started.elapsed();
    total
}

/// After a run: nothing left in the API or the kernel, then (stopped) nothing in the store.
/// Returns the store's size on disk.
fn assert_nothing_left(node: &mut TestNode) -> u64 {
    node.wait_capacity_used("default", 0);
    assert!(node.list_ids().is_empty(), "List not empty after churn");
    node.assert_host_clean();
    assert!(node.bridge_ports(BRIDGE).is_empty());
    node.stop_with_empty_store("default")
        .size_on_disk()
        .expect("size on disk")
}

#[test]
fn churn_leaves_nothing_behind_and_the_store_stays_bounded() {
    if !testkit::privileged() {
        return;
    }
    let n = cycles();
    let mut node = TestNode::start("");
    let mut sizes = Vec::new();
    for run in 0..2 {
        if run > 0 {
            node.restart();
        }
        let took = churn(&node, run, n);
        let size = assert_nothing_left(&mut node);
        let per_cycle = |d: Duration| d / u32::try_from(n.max(1)).expect("cycles fit u32");
        println!(
            "churn run {run}: {n} cycles in {:.2?} ({:.0} cycles/s); mean latency: \
             attach {:.2?}, detach {:.2?}, netns create+remove {:.2?}; store {size} bytes on disk",
            took.wall,
            n as f64 / took.wall.as_secs_f64(),
            per_cycle(took.attach),
            per_cycle(took.detach),
            per_cycle(took.netns),
        );
        sizes.push(size);
    }
    let bound = sizes[0] + GROWTH_BOUND;
    assert!(
        sizes[1] <= bound,
        "the store grew from {} to {} bytes over a second run of {n} cycles (bound {bound})",
        sizes[0],
        sizes[1]
    );
}
