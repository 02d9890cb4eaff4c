//! What host ports add to an attach, side by side in one run:
//! - knid's API (`Attach` over one connection, timed from request to answer) without port
//!   mappings and with two (TCP and UDP): knid adds the map elements to its own nf_tables table
//!   in one netlink transaction;
//! - knid-cni ADD by exec with the `portMappings` capability (the same elements), against
//!   knid-cni without mappings chained with the reference `portmap` plugin (Debian's
//!   /usr/lib/cni/portmap: iptables chains per sandbox), which a runtime execs next with the
//!   capability and knid-cni's result as `prevResult`.
//!
//! `KNID_BENCH_N` (default 100) sequential cycles per set-up after 5 warm-up cycles: create a
//! sandbox netns (not timed), attach or ADD (timed), detach or DEL (not timed). Numbers are
//! reported, never asserted. Without the reference plugin its set-up is skipped, and the bench
//! says so.

use std::path::Path;
use std::time::{Duration, Instant};

use knid_transport::pb;
use serde_json::{json, Value};
use testkit::capability_bench::CapabilityBench;
use testkit::cni_exec::{add_chained_then_del, chained_reference, Subject};
use testkit::measure::report;
use testkit::RPC;

/// The two mappings every set-up with host ports asks for, in the CNI capability's spelling.
fn mappings() -> Value {
    json!([{"hostPort": 18080, "containerPort": 80, "protocol": "tcp"},
           {"hostPort": 15353, "containerPort": 53, "protocol": "udp"}])
}

fn api_mappings() -> Vec<pb::PortMapping> {
    [(18080, 80, "tcp"), (15353, 53, "udp")]
        .into_iter()
        .map(|(host_port, container_port, protocol)| pb::PortMapping {
            host_port,
            container_port,
            protocol: protocol.to_owned(),
            ..Default::default()
        })
        .collect()
}

/// How one set-up adds an interface.
enum SetUp {
    /// knid's API, with these mappings.
    Api(Vec<pb::PortMapping>),
    /// knid-cni, with the capability when true.
    Cni(bool),
    /// knid-cni, then the reference plugin with the capability.
    Chained(Subject),
}

fn main() {
    let Some(bench) = CapabilityBench::start("hp") else {
        return;
    };
    let mut setups = vec![
        (
            "knid API attach, no host ports",
            "api0",
            SetUp::Api(Vec::new()),
        ),
        (
            "knid API attach, 2 host ports",
            "api2",
            SetUp::Api(api_mappings()),
        ),
        ("knid-cni ADD, no host ports", "cni0", SetUp::Cni(false)),
        (
            "knid-cni ADD, 2 host ports (native)",
            "cni2",
            SetUp::Cni(true),
        ),
    ];
    if let Some(plugin) = chained_reference(
        "portmap",
        "CNI portmap",
        CapabilityBench::NETWORK,
        "portMappings",
        mappings(),
    ) {
        setups.push((
            "knid-cni + CNI portmap, 2 host ports",
            "chained",
            SetUp::Chained(plugin),
        ));
    }
    let node = &bench.node;
    let client = node.client();
    for (label, slug, setup) in &setups {
        let mut times = match setup {
            SetUp::Api(mappings) => bench.run(slug, false, |id, ns| {
                let mut req = node.attach_req(id, ns, "eth0");
                req.interfaces[0].network = CapabilityBench::NETWORK.to_owned();
                req.port_mappings.clone_from(mappings);
                let started = Instant::now();
                client.attach(&req, RPC).expect("Attach");
                let took = started.elapsed();
                client
                    .detach(&testkit::detach_req(id), RPC)
                    .expect("Detach");
                took
            }),
            _ => bench.run(slug, true, |id, ns| {
                add_then_del(&bench.knid, setup, id, ns)
            }),
        };
        println!("{label}: {} sequential cycles", bench.cycles);
        report("attach", &mut times);
    }
    node.wait_no_kn_links();
    assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
}

/// One ADD of `setup` (timed), then its DEL in reverse order (not timed).
fn add_then_del(knid: &Subject, setup: &SetUp, id: &str, netns: &Path) -> Duration {
    let mut conf = knid.conf.clone();
    if matches!(setup, SetUp::Cni(true)) {
        conf["runtimeConfig"] = json!({ "portMappings": mappings() });
    }
    let chained = match setup {
        SetUp::Chained(plugin) => Some(plugin),
        _ => None,
    };
    add_chained_then_del(knid, &conf, chained, id, netns)
}
