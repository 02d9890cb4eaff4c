//! What a bandwidth limit adds to a CNI ADD, side by side in one run: knid-cni with the
//! `bandwidth` capability (knid shapes the interface itself: a tbf on the host end, an IFB with
//! a tbf for egress), against knid-cni without limits chained with the reference `bandwidth`
//! plugin (Debian's /usr/lib/cni/bandwidth), which a runtime execs next with the same
//! capability and knid-cni's result as `prevResult`. knid-cni alone, without limits, is the
//! floor of both.
//!
//! `KNID_BENCH_N` (default 100) sequential cycles per set-up after 5 warm-up cycles: create a
//! sandbox netns (not timed), ADD (timed: every plugin process of the ADD, spawn to exit), DEL
//! (not timed). Limits: 10 Mbit/s each way, 1 Mbit bursts. Numbers are reported, never
//! asserted. Without the reference plugin only knid-cni runs, and the bench says so.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use testkit::capability_bench::CapabilityBench;
use testkit::cni_exec::{add_chained_then_del, chained_reference, Subject};
use testkit::measure::report;

fn limits() -> Value {
    json!({"ingressRate": 10_000_000, "ingressBurst": 1_000_000,
           "egressRate": 10_000_000, "egressBurst": 1_000_000})
}

/// How one set-up adds an interface.
enum SetUp {
    /// knid-cni alone, without limits.
    Plain,
    /// knid-cni with the `bandwidth` capability.
    Native,
    /// knid-cni, then the reference plugin with the capability.
    Chained(Subject),
}

fn main() {
    let Some(bench) = CapabilityBench::start("bw") else {
        return;
    };
    let mut setups = vec![
        ("knid-cni, no limits", "plain", SetUp::Plain),
        ("knid-cni, native bandwidth", "native", SetUp::Native),
    ];
    if let Some(plugin) = chained_reference(
        "bandwidth",
        "CNI bandwidth",
        CapabilityBench::NETWORK,
        "bandwidth",
        limits(),
    ) {
        setups.push((
            "knid-cni + CNI bandwidth",
            "chained",
            SetUp::Chained(plugin),
        ));
    }
    for (label, slug, setup) in &setups {
        let mut adds = bench.run(slug, true, |id, ns| {
            add_then_del(&bench.knid, setup, id, ns)
        });
        println!("{label}: {} sequential ADDs by exec", bench.cycles);
        report("ADD", &mut adds);
    }
    assert!(
        bench.node.list_ids().is_empty(),
        "sandboxes left after the bench"
    );
    bench.node.assert_host_clean();
}

/// One ADD of `setup` (timed), then its DEL in reverse order (not timed).
fn add_then_del(knid: &Subject, setup: &SetUp, id: &str, netns: &Path) -> Duration {
    let mut conf = knid.conf.clone();
    if matches!(setup, SetUp::Native) {
        conf["runtimeConfig"] = json!({ "bandwidth": limits() });
    }
    let chained = match setup {
        SetUp::Chained(plugin) => Some(plugin),
        _ => None,
    };
    add_chained_then_del(knid, &conf, chained, id, netns)
}
