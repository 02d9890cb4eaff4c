//! Load: 64 client threads, each with its own connection, run a random mix of Attach, Detach,
//! Inspect, List, Status and GarbageCollect on 48 sandbox ids they all share, for
//! `KNID_LOAD_SECS` (default 10) seconds. Every answer must be one the races allow (the driver,
//! testkit/src/load.rs, says which); a watchdog fails the run when no operation completes for
//! 20 s. Afterwards knid's records must agree with the kernel, and once everything is detached
//! nothing may be left: no link, no port, no address, no record.

use testkit::load::{self, LoadConfig};
use testkit::TestNode;

/// Seconds of load when `KNID_LOAD_SECS` is not set.
const DEFAULT_SECS: u64 = 10;

#[test]
fn sixty_four_clients_on_shared_sandboxes_get_only_allowed_answers_and_leak_nothing() {
    if !testkit::privileged() {
        return;
    }
    let cfg = LoadConfig::from_env(DEFAULT_SECS);
    let mut node = TestNode::start(load::LOAD_CONFIG);
    let pods = load::make_pods(&node, cfg.sandboxes);
    println!(
        "load: {} threads on {} shared sandboxes for {:?} (seed {:#x}, KNID_LOAD_SEED)",
        cfg.threads, cfg.sandboxes, cfg.duration, cfg.seed
    );

    let report = load::run(&node, &pods, &cfg);
    report.print();
    report.assert_clean();
    let attaches = &report.ops[&load::Op::Attach];
    assert!(
        attaches.results.get("OK").is_some_and(|n| *n > 0),
        "no Attach succeeded: the load did not exercise knid"
    );

    let attached = load::check_invariants(&node, &pods);
    println!("after the load: {attached} sandboxes attached, records and kernel agree");
    let leaks = load::detach_all_and_count_leaks(&node, &pods);
    println!("leaked objects: {} ({leaks:?})", leaks.total());
    assert_eq!(
        leaks.total(),
        0,
        "leaked after detaching everything: {leaks:?}"
    );
    node.assert_host_clean();
    node.stop_with_empty_store("default");
}
