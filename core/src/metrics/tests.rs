use super::*;
use crate::model::Family;

fn parse(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .expect("exposition parses")
}

fn sample<'a>(
    scrape: &'a prometheus_parse::Scrape,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<&'a prometheus_parse::Value> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| &s.value)
}

fn snapshot(networks: &[(&str, u64, u64)]) -> Snapshot {
    Snapshot {
        ipam: networks
            .iter()
            .map(|(name, total, used)| {
                let capacity = vec![Capacity {
                    family: Family::V4,
                    total: *total,
                    used: *used,
                    free: total - used,
                }];
                ((*name).to_owned(), capacity)
            })
            .collect(),
        ports: Vec::new(),
        sandboxes: 3,
        host_ports: 2,
        nat_elements: 4,
        antispoof_drops: vec![("mac", 2), ("ip", 5)],
        reaper_queue: 7,
        store_bytes: Some(4096),
        cluster: None,
        policy: None,
    }
}

#[test]
fn operations_count_by_code_and_fill_the_histogram() {
    let m = Metrics::new();
    m.observe_operation("attach", "OK", Duration::from_micros(800));
    m.observe_operation("attach", "OK", Duration::from_millis(3));
    m.observe_operation("attach", "InvalidArgument", Duration::from_micros(50));
    let text = m.render(&snapshot(&[]));
    let scrape = parse(&text);
    match sample(
        &scrape,
        "knid_operations_total",
        &[("op", "attach"), ("code", "OK")],
    ) {
        Some(prometheus_parse::Value::Counter(v)) => assert_eq!(*v, 2.0),
        other => panic!("attach OK counter: {other:?}\n{text}"),
    }
    match sample(
        &scrape,
        "knid_operation_duration_seconds",
        &[("op", "attach"), ("code", "OK")],
    ) {
        Some(prometheus_parse::Value::Histogram(buckets)) => {
            let le = |bound: f64| {
                buckets
                    .iter()
                    .find(|b| b.less_than == bound)
                    .map(|b| b.count)
            };
            assert_eq!(le(0.001), Some(1.0), "800 µs falls in le=0.001");
            assert_eq!(le(0.005), Some(2.0), "3 ms falls in le=0.005");
        }
        other => panic!("attach histogram: {other:?}\n{text}"),
    }
    assert!(
        text.contains("knid_operations_total{code=\"InvalidArgument\",op=\"attach\"} 1"),
        "{text}"
    );
}

#[test]
fn a_scrape_during_operations_sees_counter_and_histogram_agree() {
    let m = Metrics::new();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let labels = [("op", "attach"), ("code", "OK")];
    let pairs = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                m.observe_operation("attach", "OK", Duration::from_micros(700));
            }
        });
        let pairs = (0..200)
            .map(|_| parse(&m.render(&snapshot(&[]))))
            .map(|scrape| {
                let value = |name| match sample(&scrape, name, &labels) {
                    Some(
                        prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v),
                    ) => Some(*v),
                    _ => None,
                };
                (
                    value("knid_operations_total"),
                    value("knid_operation_duration_seconds_count"),
                )
            })
            .collect::<Vec<_>>();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        pairs
    });
    let disagreed: Vec<_> = pairs
        .iter()
        .filter(|(counter, count)| counter != count)
        .collect();
    assert!(
        pairs
            .iter()
            .any(|(counter, _)| counter.is_some_and(|v| v > 0.0)),
        "no scrape saw an operation"
    );
    assert!(
        disagreed.is_empty(),
        "one scrape, two answers: {disagreed:?}"
    );
}

#[test]
fn gauges_mirror_the_snapshot_and_a_removed_network_disappears() {
    let m = Metrics::new();
    let text = m.render(&snapshot(&[("default", 254, 10), ("edge", 30, 29)]));
    let scrape = parse(&text);
    match sample(
        &scrape,
        "knid_ipam_used_addresses",
        &[("network", "edge"), ("family", "ipv4")],
    ) {
        Some(prometheus_parse::Value::Gauge(v)) => assert_eq!(*v, 29.0),
        other => panic!("edge used: {other:?}\n{text}"),
    }
    for (name, want) in [
        ("knid_sandboxes", 3.0),
        ("knid_host_ports", 2.0),
        ("knid_nat_map_elements", 4.0),
        ("knid_reaper_queue_length", 7.0),
        ("knid_store_size_bytes", 4096.0),
    ] {
        match sample(&scrape, name, &[]) {
            Some(prometheus_parse::Value::Gauge(v)) => assert_eq!(*v, want, "{name}"),
            other => panic!("{name}: {other:?}\n{text}"),
        }
    }
    let resident = sample(&scrape, "process_resident_memory_bytes", &[]);
    assert!(
        matches!(resident, Some(prometheus_parse::Value::Gauge(v)) if *v > 0.0),
        "{resident:?}"
    );

    for (reason, want) in [("mac", 2.0), ("ip", 5.0), ("dhcp", 0.0)] {
        match sample(
            &scrape,
            "knid_antispoof_dropped_total",
            &[("reason", reason)],
        ) {
            Some(prometheus_parse::Value::Counter(v)) => assert_eq!(*v, want, "{reason}"),
            other => panic!("{reason}: {other:?}\n{text}"),
        }
    }

    let text = m.render(&snapshot(&[("default", 254, 11)]));
    assert!(!text.contains("network=\"edge\""), "edge lingers:\n{text}");
    // Rendered again with the same kernel counts: the counters do not double.
    assert!(
        text.contains("knid_antispoof_dropped_total{reason=\"ip\"} 5"),
        "{text}"
    );
    assert!(
        text.contains("knid_ipam_used_addresses{family=\"ipv4\",network=\"default\"} 11"),
        "{text}"
    );
}

#[test]
fn gc_reaper_and_extension_observations_are_exported() {
    let m = Metrics::new();
    m.observe_gc(true, ["link", "link"].into_iter(), 0);
    m.observe_gc(false, ["reservation"].into_iter(), 2);
    m.observe_reaper_batch(5, 4);
    m.observe_extension("mesh", "post-attach", Duration::from_millis(2), false);
    let text = m.render(&snapshot(&[]));
    assert!(text.contains("knid_reconciler_rounds_total 0"), "{text}");
    m.observe_reconciler_round();
    m.observe_reconciler_round();
    let text = m.render(&snapshot(&[]));
    for want in [
        "knid_reconciler_rounds_total 2",
        "knid_gc_findings_total{mode=\"dry_run\",what=\"link\"} 2",
        "knid_gc_findings_total{mode=\"real\",what=\"reservation\"} 1",
        "knid_gc_errors_total 2",
        "knid_reaper_reaped_total 4",
        "knid_reaper_batch_size_bucket{le=\"4\"} 0",
        "knid_reaper_batch_size_bucket{le=\"8\"} 1",
        "knid_extension_call_failures_total{extension=\"mesh\",phase=\"post-attach\"} 1",
        "knid_extension_call_duration_seconds_count{extension=\"mesh\",phase=\"post-attach\"} 1",
        "knid_build_info{version=\"",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
    parse(&text);
}

#[test]
fn changed_interfaces_are_counted_per_round_and_a_cleared_kind_drops_to_zero() {
    let m = Metrics::new();
    let scrape = parse(&m.render(&snapshot(&[])));
    let count = |scrape: &prometheus_parse::Scrape, kind: &str| match sample(
        scrape,
        "knid_pod_interfaces_changed",
        &[("difference", kind)],
    ) {
        Some(prometheus_parse::Value::Gauge(v)) => *v,
        other => panic!("no gauge for {kind}: {other:?}"),
    };
    assert_eq!(count(&scrape, "missing"), 0.0, "exported from the start");
    m.set_changed_interfaces(["missing", "down", "missing"].into_iter());
    let scrape = parse(&m.render(&snapshot(&[])));
    assert_eq!(count(&scrape, "missing"), 2.0);
    assert_eq!(count(&scrape, "down"), 1.0);
    m.set_changed_interfaces(["down"].into_iter());
    let scrape = parse(&m.render(&snapshot(&[])));
    assert_eq!(count(&scrape, "missing"), 0.0);
    assert_eq!(count(&scrape, "down"), 1.0);
}

#[test]
fn cluster_mode_reports_routes_by_state_and_the_api_server() {
    let metrics = Metrics::new();
    let text = metrics.render(&snapshot(&[]));
    assert!(
        !text.contains("knid_cluster_node_routes{"),
        "nothing without cluster mode"
    );
    let route = |node: &str, state| crate::model::NodeRoute {
        node: node.into(),
        dst: "10.244.1.0/24".parse().expect("net"),
        via: None,
        state,
        message: String::new(),
        backend: crate::model::RouteBackend::HostGw,
        overlay: None,
    };
    let mut snap = snapshot(&[]);
    snap.cluster = Some(crate::model::ClusterInfo {
        api_server: "https://10.96.0.1:443".into(),
        api_reachable: false,
        routes: vec![
            route("b", RouteState::Installed),
            route("c", RouteState::Installed),
            route("d", RouteState::Unreachable),
            route("e", RouteState::AwaitingVtep),
        ],
        ..Default::default()
    });
    let text = metrics.render(&snap);
    let parsed = parse(&text);
    let get = |name: &str, labels: &[(&str, &str)]| match sample(&parsed, name, labels) {
        Some(prometheus_parse::Value::Gauge(v)) => *v,
        other => panic!("{name} {labels:?}: {other:?}"),
    };
    assert_eq!(
        get("knid_cluster_node_routes", &[("state", "installed")]),
        2.0
    );
    assert_eq!(
        get("knid_cluster_node_routes", &[("state", "unreachable")]),
        1.0
    );
    assert_eq!(get("knid_cluster_node_routes", &[("state", "failed")]), 0.0);
    assert_eq!(
        get("knid_cluster_node_routes", &[("state", "awaiting-vtep")]),
        1.0
    );
    assert_eq!(
        get(
            "knid_cluster_api_reachable",
            &[("server", "https://10.96.0.1:443")]
        ),
        0.0
    );
}

#[test]
fn a_bridge_with_no_free_port_makes_its_network_not_schedulable() {
    let m = Metrics::new();
    let mut snap = snapshot(&[("default", 254, 10), ("edge", 30, 1)]);
    snap.ports = vec![
        ("default".to_owned(), BridgePorts::of("knid0", 1023)),
        ("edge".to_owned(), BridgePorts::of("knid1", 3)),
    ];
    let scrape = parse(&m.render(&snap));
    let gauge = |name, labels: &[(&str, &str)]| match sample(&scrape, name, labels) {
        Some(prometheus_parse::Value::Gauge(v)) => *v,
        other => panic!("{name} {labels:?}: {other:?}"),
    };
    assert_eq!(
        gauge("knid_network_schedulable", &[("network", "default")]),
        0.0
    );
    assert_eq!(
        gauge("knid_network_schedulable", &[("network", "edge")]),
        1.0
    );
    let used = [
        ("network", "default"),
        ("bridge", "knid0"),
        ("state", "used"),
    ];
    assert_eq!(gauge("knid_bridge_ports", &used), 1023.0);
    let total = [("network", "edge"), ("bridge", "knid1"), ("state", "total")];
    assert_eq!(gauge("knid_bridge_ports", &total), 1023.0);
}
