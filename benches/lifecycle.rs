//! Attach/detach latency of the real knid over its socket, in a private network namespace.
//!
//! 1. `KNID_BENCH_N` (default 200) sequential cycles of: create a sandbox netns (not timed),
//!    Attach (timed), Detach (timed). Prints p50/p90/p99/max of each in ms and the cycles per
//!    second of the timed part.
//! 2. The reaper: `KNID_BENCH_REAP` (default 500) sandboxes attached (not timed), then all
//!    detached by `KNID_BENCH_CLIENTS` (default 8) concurrent clients (each Detach timed), the time from the first Detach until
//!    every address is released (the reaper has deleted every link), and the reaper's own rounds
//!    from knid's debug log: links per second of reaper time.
//!
//! Numbers are reported, never asserted.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "measure/mod.rs"]
mod measure;

use std::time::{Duration, Instant};

use common::{TestNode, RPC};
use measure::{env_count, ms, report};

/// Cycles run before measuring, so first-use costs (bridge port set-up, sled pages) are excluded.
const WARM_UP: usize = 5;
/// Room for thousands of sandboxes.
const BENCH_NETWORK: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/16", "fd00:88::/64"]
"#;

/// Peer numbers measured on this machine class (../shared/reference/baseline-perf.md), p50.
const PEERS: &str = "peers (baseline-perf.md, p50): CNI bridge DEL 20.1 ms, netavark teardown 24.1 ms, kernel per-link delete ~20 ms";

fn main() {
    if !common::privileged() {
        return;
    }
    let cycles = env_count("KNID_BENCH_N", 200);
    let node = TestNode::start(BENCH_NETWORK);
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
    println!("{PEERS}");
    reaper(
        &node,
        env_count("KNID_BENCH_REAP", 500),
        env_count("KNID_BENCH_CLIENTS", 8),
    );
    assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
}

/// Detaches `count` attached sandboxes back to back and times the reaper behind them.
fn reaper(node: &TestNode, count: usize, clients: usize) {
    let client = node.client();
    for i in 0..count {
        let id = format!("reap-{i}");
        let netns = node.netns(&id);
        client
            .attach(&node.attach_req(&id, &netns, "eth0"), RPC)
            .expect("Attach");
    }
    // Only the reaper's rounds of this phase count.
    let log_offset = node.log_text().len();
    let first = Instant::now();
    let mut detach: Vec<Duration> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..clients)
            .map(|w| {
                s.spawn(move || {
                    let client = node.client();
                    (w..count)
                        .step_by(clients)
                        .map(|i| {
                            let started = Instant::now();
                            client
                                .detach(&common::detach_req(&format!("reap-{i}")), RPC)
                                .expect("Detach");
                            started.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("detach client"))
            .collect()
    });
    let replied = first.elapsed();
    while node.capacity_used("default") > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let reaped = first.elapsed();
    println!(
        "knid reaper: {count} attached sandboxes detached by {clients} concurrent clients ({:.0} detaches/s)",
        count as f64 / replied.as_secs_f64()
    );
    report("detach", &mut detach);
    println!(
        "reaper  all {count} links gone {:.0} ms after the first Detach, {:.0} ms after the last reply",
        ms(reaped),
        ms(reaped.saturating_sub(replied)),
    );
    let (links, busy, batches) = reaper_rounds(&node.log_text()[log_offset..]);
    println!(
        "reaper  {links} links in {batches} group deletions (mean {:.1} per batch), {:.0} ms busy: {:.0} links/s of reaper time",
        links as f64 / batches.max(1) as f64,
        ms(busy),
        links as f64 / busy.as_secs_f64().max(1e-9)
    );
}

/// Sums the reaper's rounds from knid's debug log: "reaper: N link(s) gone, … in <Debug
/// duration>" → (links, busy time, rounds).
fn reaper_rounds(log: &str) -> (u64, Duration, u64) {
    let mut links = 0;
    let mut busy = Duration::ZERO;
    let mut rounds = 0;
    for line in log.lines() {
        let Some(rest) = line
            .split("reaper: ")
            .nth(1)
            .filter(|r| r.contains(" gone, "))
        else {
            continue;
        };
        let (Some(n), Some(took)) = (rest.split(' ').next(), rest.rsplit(" in ").next()) else {
            continue;
        };
        let (Ok(n), Some(took)) = (n.parse::<u64>(), parse_debug_duration(took)) else {
            continue;
        };
        links += n;
        busy += took;
        rounds += 1;
    }
    (links, busy, rounds)
}

/// Parses `Duration`'s Debug form: `12.5ms`, `830.1µs`, `1.2s`, `950ns`.
fn parse_debug_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (value, unit) = text.split_at(split);
    let value: f64 = value.parse().ok()?;
    let secs = match unit {
        "s" => value,
        "ms" => value / 1e3,
        "µs" | "us" => value / 1e6,
        "ns" => value / 1e9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}
