//! Metrics and logs of a live knid: `curl` on `metrics_addr` while attaches run (inside the
//! node's private netns, so 127.0.0.1 is the node's own loopback), the exposition parsed by an
//! independent Prometheus text-format parser, the `Metrics` RPC, and the per-operation log line
//! in text and JSON.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use prometheus_parse::{Scrape, Value};
use testkit::{TestNode, RPC};

/// The node's metrics port (its netns is private: nothing else listens there).
const PORT: u16 = 9584;
/// Holds each attach long enough for scrapes to see it in flight.
const SLOW_ATTACH: &str = "attach.veth_created=sleep(1500)";

/// `curl http://127.0.0.1:<PORT>/metrics` inside the node's netns; the body.
fn curl_metrics(node: &TestNode) -> String {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", node.host_path().display()))
        .args(["--", "curl", "-sS", "--fail", "--max-time", "10"])
        .arg(format!("http://127.0.0.1:{PORT}/metrics"))
        .output()
        .expect("run nsenter curl (.ci/run installs curl)");
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 exposition")
}

/// Parses with prometheus-parse and checks what that parser does not: every sample's family has
/// HELP and TYPE lines, and every histogram's buckets are cumulative up to +Inf == _count.
fn parse(text: &str) -> Scrape {
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("exposition does not parse: {e}\n{text}"));
    assert!(!scrape.samples.is_empty(), "no samples:\n{text}");
    for sample in &scrape.samples {
        // A histogram's _count and _sum samples belong to its family.
        let family = ["_count", "_sum"]
            .iter()
            .find_map(|suffix| sample.metric.strip_suffix(suffix))
            .filter(|base| scrape.docs.contains_key(*base))
            .unwrap_or(&sample.metric);
        assert!(scrape.docs.contains_key(family), "{family} has no HELP");
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family} has no TYPE"
        );
        if let Value::Histogram(buckets) = &sample.value {
            let counts: Vec<f64> = buckets.iter().map(|b| b.count).collect();
            assert!(
                counts.windows(2).all(|w| w[0] <= w[1]),
                "{} buckets not cumulative: {counts:?}",
                sample.metric
            );
            let inf = buckets.iter().find(|b| b.less_than.is_infinite());
            let count = count_of(&scrape, &sample.metric, &sample.labels);
            assert_eq!(
                inf.map(|b| b.count),
                Some(count),
                "{} +Inf bucket != _count",
                sample.metric
            );
        }
    }
    scrape
}

fn labels_match(labels: &prometheus_parse::Labels, want: &[(&str, &str)]) -> bool {
    want.iter().all(|(k, v)| labels.get(k) == Some(*v))
}

/// The `_count` of histogram `name` with `labels` (prometheus-parse folds it into a
/// `Value::Untyped` sample named `<name>_count`), 0 when absent.
fn count_of(scrape: &Scrape, name: &str, labels: &prometheus_parse::Labels) -> f64 {
    let wanted = format!("{name}_count");
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == wanted && *s.labels == **labels)
        .map(|s| match s.value {
            Value::Untyped(v) | Value::Counter(v) | Value::Gauge(v) => v,
            _ => f64::NAN,
        })
        .next()
        .unwrap_or(0.0)
}

/// The value of counter or gauge `name` with `labels`, 0 when absent.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels_match(&s.labels, labels))
        .map(|s| match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            _ => f64::NAN,
        })
        .unwrap_or(0.0)
}

/// The attach OK counter and its histogram's count.
fn attach_ok(scrape: &Scrape) -> (f64, f64) {
    let labels = [("op", "attach"), ("code", "OK")];
    let counter = value(scrape, "knid_operations_total", &labels);
    let histogram = scrape
        .samples
        .iter()
        .find(|s| s.metric == "knid_operation_duration_seconds" && labels_match(&s.labels, &labels))
        .map(|s| count_of(scrape, &s.metric, &s.labels))
        .unwrap_or(0.0);
    (counter, histogram)
}

#[test]
fn curl_during_attaches_sees_the_attach_counter_and_histogram_move() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    let node = TestNode::start_with(
        &format!("metrics_addr = \"{PORT}\"\n"),
        &[("KNID_FAILPOINTS", SLOW_ATTACH)],
        &[],
    );
    let before = parse(&curl_metrics(&node));
    assert_eq!(attach_ok(&before), (0.0, 0.0));
    let pods = 3;
    let netns: Vec<_> = (0..pods).map(|i| node.netns(&format!("m{i}"))).collect();

    let mut seen = Vec::new();
    std::thread::scope(|s| {
        let attaching = s.spawn(|| {
            let client = node.client();
            for (i, path) in netns.iter().enumerate() {
                client
                    .attach(&node.attach_req(&format!("pod-m{i}"), path, "eth0"), RPC)
                    .expect("attach");
            }
        });
        // Scrapes while the attaches run: each one parses, and the counter and the histogram
        // count agree and never go back.
        while !attaching.is_finished() {
            let scrape = parse(&curl_metrics(&node));
            let (counter, histogram) = attach_ok(&scrape);
            assert_eq!(counter, histogram, "counter and histogram disagree");
            if seen.last() != Some(&counter) {
                seen.push(counter);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        attaching.join().expect("attach thread");
    });
    let after = parse(&curl_metrics(&node));
    assert_eq!(attach_ok(&after), (f64::from(pods), f64::from(pods)));
    seen.push(f64::from(pods));
    seen.dedup();
    println!("attach OK counter as scraped during the attaches: {seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]) && seen.len() >= 3,
        "the counter moved through the attaches one by one: {seen:?}"
    );

    // The histogram's buckets saw ≥ 1.5 s each (the failpoint's pause).
    let slow = after
        .samples
        .iter()
        .find(|s| {
            s.metric == "knid_operation_duration_seconds"
                && labels_match(&s.labels, &[("op", "attach"), ("code", "OK")])
        })
        .expect("attach histogram");
    if let Value::Histogram(buckets) = &slow.value {
        let under_one_s = buckets.iter().find(|b| b.less_than == 1.0).map(|b| b.count);
        assert_eq!(
            under_one_s,
            Some(0.0),
            "no attach was under 1 s: {buckets:?}"
        );
    }

    // State-mirroring gauges: 3 sandboxes, 3 IPv4 and 3 IPv6 addresses in use.
    assert_eq!(value(&after, "knid_sandboxes", &[]), 3.0);
    for family in ["ipv4", "ipv6"] {
        let labels = [("network", "default"), ("family", family)];
        assert_eq!(value(&after, "knid_ipam_used_addresses", &labels), 3.0);
        assert!(value(&after, "knid_ipam_capacity_addresses", &labels) > 3.0);
    }
    assert!(value(&after, "knid_store_size_bytes", &[]) > 0.0);
    assert!(value(&after, "process_resident_memory_bytes", &[]) > 1e6);

    // The RPC serves the same families.
    let rpc = parse(&node.client().metrics(RPC).expect("Metrics RPC"));
    assert_eq!(attach_ok(&rpc), (f64::from(pods), f64::from(pods)));
    let families = |s: &Scrape| {
        let mut names: Vec<String> = s.docs.keys().cloned().collect();
        names.sort();
        names
    };
    assert_eq!(families(&rpc), families(&after));
}

#[test]
fn detach_gc_and_errors_are_counted_by_code() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let client = node.client();
    let netns = node.netns("codes");
    client
        .attach(&node.attach_req("pod-codes", &netns, "eth0"), RPC)
        .expect("attach");
    client
        .detach(&testkit::detach_req("pod-codes"), RPC)
        .expect("detach");
    let mut bad = node.attach_req("pod-bad", &netns, "eth0");
    bad.interfaces[0].mac = "zz:00:00:00:00:01".into();
    client.attach(&bad, RPC).expect_err("bad MAC refused");
    let mut gc = knid_transport::pb::GarbageCollectRequest::new();
    gc.dry_run = true;
    client.garbage_collect(&gc, RPC).expect("gc dry run");
    testkit::wait_for("the reaper to empty its queue", testkit::SETTLE, || {
        let scrape = parse(&client.metrics(RPC).expect("metrics"));
        value(&scrape, "knid_reaper_queue_length", &[]) == 0.0
            && value(&scrape, "knid_reaper_reaped_total", &[]) >= 1.0
    });

    let scrape = parse(&client.metrics(RPC).expect("metrics"));
    let ops: HashMap<(String, String), f64> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "knid_operations_total")
        .map(|s| {
            let key = (
                s.labels.get("op").unwrap_or_default().to_owned(),
                s.labels.get("code").unwrap_or_default().to_owned(),
            );
            (key, counter(&s.value))
        })
        .collect();
    for (op, code) in [
        ("attach", "OK"),
        ("attach", "InvalidArgument"),
        ("detach", "OK"),
        ("garbage_collect", "OK"),
    ] {
        assert_eq!(
            ops.get(&(op.to_owned(), code.to_owned())),
            Some(&1.0),
            "{op} {code}: {ops:?}"
        );
    }
    assert!(value(&scrape, "knid_reaper_batch_size_count", &[]) >= 1.0);
}

fn counter(v: &Value) -> f64 {
    match v {
        Value::Counter(v) => *v,
        _ => f64::NAN,
    }
}

#[test]
fn every_operation_logs_one_line_in_text_or_json() {
    if !testkit::privileged() {
        return;
    }
    for format in ["text", "json"] {
        let node = TestNode::start_with("", &[], &["--log-format", format]);
        let client = node.client();
        let netns = node.netns("logs");
        client
            .attach(&node.attach_req("pod-logs", &netns, "eth0"), RPC)
            .expect("attach");
        let mut inspect = knid_transport::pb::InspectRequest::new();
        inspect.sandbox_id = "pod-unknown".into();
        client.inspect(&inspect, RPC).expect_err("unknown sandbox");
        // An operation's line follows its reply.
        testkit::wait_for("knid logs the inspect", testkit::SETTLE, || {
            node.log_text().contains("pod-unknown")
        });
        let log = node.log_text();
        let lines: Vec<&str> = log.lines().collect();
        match format {
            "text" => {
                let attach: Vec<_> = lines
                    .iter()
                    .filter(|l| l.contains(" op=attach sandbox=pod-logs "))
                    .collect();
                assert_eq!(attach.len(), 1, "one attach line:\n{log}");
                assert!(attach[0].contains("result=OK"), "{}", attach[0]);
                assert!(attach[0].starts_with("[20"), "timestamped: {}", attach[0]);
                let missing = lines
                    .iter()
                    .find(|l| l.contains(" op=inspect sandbox=pod-unknown "))
                    .unwrap_or_else(|| panic!("inspect line:\n{log}"));
                assert!(
                    missing.contains("result=NotFound") && missing.contains("error="),
                    "{missing}"
                );
            }
            _ => {
                let objects: Vec<serde_json::Value> = lines
                    .iter()
                    .map(|l| {
                        serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))
                    })
                    .collect();
                for o in &objects {
                    assert!(o["ts"].is_string() && o["level"].is_string(), "{o}");
                }
                let attach: Vec<_> = objects
                    .iter()
                    .filter(|o| o["op"] == "attach" && o["sandbox"] == "pod-logs")
                    .collect();
                assert_eq!(attach.len(), 1, "one attach line:\n{log}");
                assert_eq!(attach[0]["result"], "OK");
                assert!(attach[0]["duration_ms"].is_number(), "{}", attach[0]);
                let missing = objects
                    .iter()
                    .find(|o| o["op"] == "inspect" && o["sandbox"] == "pod-unknown")
                    .unwrap_or_else(|| panic!("inspect line:\n{log}"));
                assert_eq!(missing["result"], "NotFound");
                assert!(
                    missing["error"]
                        .as_str()
                        .is_some_and(|e| e.contains("not found")),
                    "{missing}"
                );
            }
        }
    }
}
