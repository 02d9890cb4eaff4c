//! knid under sustained load: the driver of tests/load.rs (testkit/src/load.rs) — 64 client
//! threads, each with its own connection, running a random mix of Attach, Detach, Inspect,
//! List, Status and GarbageCollect on 48 shared sandbox ids, with its watchdog — for
//! `KNID_LOAD_SECS` (default 60) seconds. Prints the throughput, each operation's latency
//! (p50, p90, p99, max) and results by code, and knid's threads and VmRSS before and after
//! the load.
//!
//! Numbers are reported, never asserted. What is asserted is correctness, as in the test:
//! every answer is one the races allow, no stall, records agree with the kernel afterwards,
//! and nothing is left once everything is detached. Without root it prints a skip line and
//! exits 0.

use testkit::load::{self, LoadConfig};
use testkit::measure::{ms, percentile, proc_status};
use testkit::TestNode;

/// Seconds of load when `KNID_LOAD_SECS` is not set.
const DEFAULT_SECS: u64 = 60;

fn main() {
    if !testkit::privileged() {
        return;
    }
    let cfg = LoadConfig::from_env(DEFAULT_SECS);
    let node = TestNode::start(load::LOAD_CONFIG);
    let pods = load::make_pods(&node, cfg.sandboxes);
    let pid = u32::try_from(node.pid().as_raw()).expect("pid is positive");
    let footprint = || {
        let field = |f| proc_status(pid, f).map_or("?".to_owned(), |v| v.to_string());
        format!(
            "{} threads, VmRSS {} KiB, VmHWM {} KiB",
            field("Threads"),
            field("VmRSS"),
            field("VmHWM")
        )
    };
    println!("knid before the load: {}", footprint());
    println!(
        "knid load: {} client threads on {} shared sandboxes for {:?} (KNID_LOAD_SECS), seed \
         {:#x} (KNID_LOAD_SEED), watchdog {:?}",
        cfg.threads, cfg.sandboxes, cfg.duration, cfg.seed, cfg.stall
    );

    let mut report = load::run(&node, &pods, &cfg);
    report.print();
    println!(
        "\n{:<15} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "latency", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"
    );
    for (op, stats) in &mut report.ops {
        stats.latencies.sort();
        let at = |p| ms(percentile(&stats.latencies, p));
        println!(
            "{:<15} {:>9} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            format!("{op:?}"),
            stats.latencies.len(),
            at(50.0),
            at(90.0),
            at(99.0),
            at(100.0),
        );
    }
    if report.stall.is_none() {
        println!("\nknid after the load: {}", footprint());
    }
    report.assert_clean();

    let attached = load::check_invariants(&node, &pods);
    println!("{attached} sandboxes attached at the end; records and kernel agree");
    let leaks = load::detach_all_and_count_leaks(&node, &pods);
    println!("leaked objects: {} ({leaks:?})", leaks.total());
    assert_eq!(leaks.total(), 0, "leaked after detaching everything");
    node.assert_host_clean();
}
