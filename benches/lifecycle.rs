//! Attach/detach latency of the real knid over its socket, in a private network namespace.
//!
//! `KNID_BENCH_N` (default 200) sequential cycles of: create a sandbox netns (not timed), Attach
//! (timed), Detach (timed). Prints p50/p90/p99/max of each in ms and the cycles per second of
//! the timed part. Numbers are reported, never asserted.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{TestNode, RPC};

/// Cycles run before measuring, so first-use costs (bridge port set-up, sled pages) are excluded.
const WARM_UP: usize = 5;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    // Nearest-rank percentile.
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    println!(
        "{what:<7} p50 {:>7.3} ms   p90 {:>7.3} ms   p99 {:>7.3} ms   max {:>7.3} ms",
        ms(percentile(samples, 50.0)),
        ms(percentile(samples, 90.0)),
        ms(percentile(samples, 99.0)),
        ms(*samples.last().expect("at least one sample")),
    );
}

fn main() {
    if !common::privileged() {
        return;
    }
    let cycles: usize = std::env::var("KNID_BENCH_N")
        .ok()
        .map(|v| v.parse().expect("KNID_BENCH_N must be a number"))
        .unwrap_or(200)
        .max(1);
    let node = TestNode::start("");
    let client = node.client();
    let mut attach = Vec::with_capacity(cycles);
    let mut detach = Vec::with_capacity(cycles);
    for i in 0..WARM_UP + cycles {
        let id = format!("bench-{i}");
        let netns = node.netns(&id);
        let req = node.attach_req(&id, &netns, "eth0");
        let started = Instant::now();
        client.attach(&req, RPC).expect("Attach");
        let attached = Instant::now();
        client
            .detach(&common::detach_req(&id), RPC)
            .expect("Detach");
        let detached = Instant::now();
        if i >= WARM_UP {
            attach.push(attached - started);
            detach.push(detached - attached);
        }
    }
    let busy: Duration = attach.iter().chain(&detach).sum();
    println!(
        "knid lifecycle: {cycles} sequential attach+detach cycles (veth on bridge, dual stack)"
    );
    report("attach", &mut attach);
    report("detach", &mut detach);
    println!(
        "churn   {:.0} cycles/s (attach + detach, netns creation excluded)",
        cycles as f64 / busy.as_secs_f64()
    );
    assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
}
