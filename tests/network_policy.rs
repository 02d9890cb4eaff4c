//! Kubernetes NetworkPolicy across three knid nodes, modelled on the upstream e2e netpol suite
//! (kubernetes/kubernetes test/e2e/network/netpol: its model and truth tables, testkit's
//! [`Model`]): namespaces x, y and z with pods a, b and c each, spread over the nodes (x/a, y/a
//! and z/a share node-a's bridge, and so on; the other pairs cross nodes), every pod serving TCP
//! and UDP on ports 80 and 81. For each case the stand-in API server (testkit's, strict as
//! kube-apiserver; no real one runs here) serves the policies, and the whole reachability
//! matrix is probed with real traffic over IPv4 and IPv6 and compared with the case's truth
//! table, written out by hand as upstream writes them. Rows are sources, columns destinations,
//! both in the order x/a, x/b, x/c, y/a, ... z/c; a pod always reaches itself.
//!
//! The nodes' namespaces have `bridge-nf-call-iptables` off: traffic between pods of one bridge
//! is enforced through knid's own bridge setting alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use knid_netops::nft::Nft;
use serde_json::{json, Value};
use testkit::cli::{knictl_exits, knictl_explain, knictl_metric, knictl_ok};
use testkit::kube_api::KubeApi;
use testkit::netpol::{add_pod, three_nodes, Model, CONVERGE, NODES};
use testkit::reachability::{probe, Probe, Proto};
use testkit::{wait_for, TestNode};

const TABLE: &str = "knid-policy";

fn policy(api: &KubeApi, ns: &str, name: &str, spec: Value) {
    api.put_network_policy(ns, name, spec)
        .unwrap_or_else(|e| panic!("put policy {ns}/{name}: {e}"));
}

/// A matrix where `closed(row, col)` says which flows are denied (the diagonal never is).
fn table(closed: impl Fn(usize, usize) -> bool) -> Vec<String> {
    (0..9)
        .map(|r| {
            (0..9)
                .map(|c| if r != c && closed(r, c) { 'X' } else { '.' })
                .collect()
        })
        .collect()
}

fn rows(t: &[String]) -> Vec<&str> {
    t.iter().map(String::as_str).collect()
}

const OPEN: [&str; 9] = [
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
];

/// Three nodes with the model's pods, every node's pod CIDR known.
fn cluster() -> (testkit::lan::Lan, tempfile::TempDir, KubeApi, Vec<TestNode>) {
    three_nodes(|_| {})
}

#[test]
fn network_policy_truth_tables_hold_across_three_nodes_for_ipv4_and_ipv6() {
    if !testkit::privileged() {
        return;
    }
    let (_lan, _dir, api, nodes) = cluster();
    let model = Model::start(&api, &nodes, &NODES);
    let x = |i: usize| i < 3;
    let y = |i: usize| (3..6).contains(&i);

    model.expect("no policy", Proto::Tcp, 80, &OPEN);

    // Default deny ingress in x: nothing reaches x's pods, on one bridge or across nodes.
    policy(&api, "x", "deny-ingress", json!({"podSelector": {}}));
    let deny_x_in = table(|_, c| x(c));
    model.expect("default deny ingress", Proto::Tcp, 80, &rows(&deny_x_in));
    // node-a holds x/a: its dropped connections count for the policy, and the kernel's table
    // isolates exactly x/a's addresses there.
    wait_for("node-a counts x/deny-ingress's drops", CONVERGE, || {
        denied(&nodes[0], "x/deny-ingress", "ingress") > 0
    });
    assert_eq!(denied(&nodes[0], "x/deny-ingress", "egress"), 0);
    let mut nft = Nft::open_in(&nodes[0].host()).expect("nft in node-a");
    let state = nft
        .policy_state(TABLE)
        .expect("read")
        .expect("node-a's table");
    let isolated: Vec<_> = state
        .isolated
        .iter()
        .map(|(d, ip)| (d.as_str(), *ip))
        .collect();
    let x_a = model.pod("x/a");
    assert_eq!(
        isolated,
        vec![("ingress", x_a.ip(false)), ("ingress", x_a.ip(true))]
    );
    // The answers for the person on call, from node-a: explain names the deciding policy on
    // each side, ls what selects the pod, doctor finds the kernel's table as knid installed it.
    let verdict = knictl_explain(&nodes[0], "y/a", "x/a", "80/tcp");
    assert_eq!(verdict["allowed"], false, "{verdict}");
    assert_eq!(verdict["egress"]["decision"], "NOT_ISOLATED", "{verdict}");
    assert_eq!(verdict["ingress"]["decision"], "DENIED", "{verdict}");
    assert_eq!(
        verdict["ingress"]["isolated_by"][0]["name"], "deny-ingress",
        "{verdict}"
    );
    assert_eq!(
        verdict["to"]["local"], true,
        "x/a runs on node-a: {verdict}"
    );
    let to_a = knictl_explain(&nodes[1], "x/b", &x_a.ip(true).to_string(), "81/udp");
    assert_eq!(to_a["allowed"], false, "{to_a}");
    assert_eq!(
        to_a["to"]["pod"]["name"], "a",
        "an address is matched to its pod: {to_a}"
    );
    let ls = knictl_ok(&nodes[0], &["policy", "ls", "--pod", "x/a"]);
    assert!(ls.contains("x/deny-ingress") && ls.contains("x/a"), "{ls}");
    let doctor = knictl_ok(&nodes[0], &["doctor"]);
    assert!(
        doctor.contains("the kernel's table holds what knid installed"),
        "{doctor}"
    );

    // Allow all ingress stacked on it: open again (the union of policies).
    policy(
        &api,
        "x",
        "allow-all",
        json!({"podSelector": {}, "ingress": [{}]}),
    );
    model.expect("allow all", Proto::Tcp, 80, &OPEN);
    api.delete_network_policy("x", "allow-all");

    // podSelector OR namespaceSelector (matchExpressions on the automatic name label).
    policy(
        &api,
        "x",
        "allow-a",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [
                {"podSelector": {"matchLabels": {"pod": "b"}}},
                {"namespaceSelector": {"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["y"]}]}}
            ]}]
        }),
    );
    let or = table(|r, c| x(c) && !(c == 0 && (r == 1 || y(r))));
    model.expect(
        "podSelector or namespaceSelector",
        Proto::Tcp,
        80,
        &rows(&or),
    );
    let verdict = knictl_explain(&nodes[2], "y/c", "x/a", "80/tcp");
    assert_eq!(verdict["allowed"], true, "{verdict}");
    assert_eq!(verdict["ingress"]["decision"], "ALLOWED", "{verdict}");
    assert_eq!(verdict["ingress"]["policy"]["name"], "allow-a", "{verdict}");
    assert_eq!(verdict["ingress"]["rule"], 0, "{verdict}");

    // podSelector AND namespaceSelector in one peer (matchLabels): only y/b.
    policy(
        &api,
        "x",
        "allow-a",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{
                "podSelector": {"matchLabels": {"pod": "b"}},
                "namespaceSelector": {"matchLabels": {"ns": "y"}}
            }]}]
        }),
    );
    let and = table(|r, c| x(c) && !(c == 0 && r == 4));
    model.expect(
        "podSelector and namespaceSelector (policy updated)",
        Proto::Tcp,
        80,
        &rows(&and),
    );

    // Pod relabelled: x/b's Pod becomes pod=b in namespace... it is in x, so the AND above
    // still excludes it; relabel y/c to pod=b instead and it comes in.
    api.put_pod(pod_spec_relabelled(&model, &api, "y", "c", "b"));
    let relabelled = table(|r, c| x(c) && !(c == 0 && (r == 4 || r == 5)));
    model.expect("pod relabelled", Proto::Tcp, 80, &rows(&relabelled));
    api.put_pod(pod_spec_relabelled(&model, &api, "y", "c", "c"));

    // Namespace relabelled: z becomes ns=y, so z/b comes in too.
    api.put_namespace("z", &[("ns", "y")]);
    let ns_relabelled = table(|r, c| x(c) && !(c == 0 && (r == 4 || r == 7)));
    model.expect(
        "namespace relabelled",
        Proto::Tcp,
        80,
        &rows(&ns_relabelled),
    );
    api.put_namespace("z", &[("ns", "z")]);
    model.expect("namespace labelled back", Proto::Tcp, 80, &rows(&and));

    // A new pod matching the selector: y/d, labelled pod=b, on node-c.
    let new_pod = add_pod(&api, (&nodes[2], NODES[2], 2), "y", "d", &[("pod", "b")]);
    let x_a = model.pod("x/a");
    for v6 in [false, true] {
        let to = std::net::SocketAddr::new(x_a.ip(v6), 80);
        let reaches = || {
            probe(&Probe {
                from: new_pod.netns.clone(),
                to,
                proto: Proto::Tcp,
            })
        };
        wait_for("the new pod y/d reaches x/a", CONVERGE, reaches);
        let to_b = std::net::SocketAddr::new(model.pod("x/b").ip(v6), 80);
        assert!(
            !probe(&Probe {
                from: new_pod.netns.clone(),
                to: to_b,
                proto: Proto::Tcp
            }),
            "y/d must not reach x/b (v6={v6})"
        );
    }
    drop(new_pod);
    api.delete_pod("y", "d");
    api.delete_network_policy("x", "allow-a");

    // Ports, by name and by number; a protocol alone; endPort.
    policy(
        &api,
        "x",
        "allow-81",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"ports": [{"port": "serve-81-tcp"}, {"port": 81, "protocol": "UDP"}]}]
        }),
    );
    let only_a = table(|_, c| c == 1 || c == 2);
    model.expect("named port 81/tcp", Proto::Tcp, 81, &rows(&only_a));
    model.expect("port 81/udp", Proto::Udp, 81, &rows(&only_a));
    model.expect("port 80 still denied", Proto::Tcp, 80, &rows(&deny_x_in));
    policy(
        &api,
        "x",
        "allow-81",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"ports": [{"protocol": "UDP"}]}]
        }),
    );
    model.expect("UDP only: UDP passes", Proto::Udp, 80, &rows(&only_a));
    model.expect("UDP only: no TCP", Proto::Tcp, 80, &rows(&deny_x_in));
    policy(
        &api,
        "x",
        "allow-81",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"ports": [{"port": 81, "endPort": 82}]}]
        }),
    );
    model.expect("endPort: 81 in the range", Proto::Tcp, 81, &rows(&only_a));
    model.expect("endPort: 80 outside", Proto::Tcp, 80, &rows(&deny_x_in));
    api.delete_network_policy("x", "allow-81");

    // Default deny all (ingress and egress) in x.
    policy(
        &api,
        "x",
        "deny-ingress",
        json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    );
    let deny_x_all = table(|r, c| x(r) || x(c));
    model.expect("default deny all", Proto::Tcp, 80, &rows(&deny_x_all));
    api.delete_network_policy("x", "deny-ingress");
    model.expect("policy deleted", Proto::Tcp, 80, &OPEN);

    // Egress denied on the client side; then a named port on egress, resolved against each
    // destination pod.
    policy(
        &api,
        "y",
        "deny-egress",
        json!({"podSelector": {}, "policyTypes": ["Egress"]}),
    );
    let deny_y_out = table(|r, _| y(r));
    model.expect("default deny egress", Proto::Tcp, 80, &rows(&deny_y_out));
    policy(
        &api,
        "y",
        "egress-81",
        json!({
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"ports": [{"port": "serve-81-tcp"}]}]
        }),
    );
    model.expect("egress named port: 81/tcp", Proto::Tcp, 81, &OPEN);
    model.expect(
        "egress named port: not 80/tcp",
        Proto::Tcp,
        80,
        &rows(&deny_y_out),
    );
    model.expect(
        "egress named port: not 81/udp",
        Proto::Udp,
        81,
        &rows(&deny_y_out),
    );
    api.delete_network_policy("y", "egress-81");

    // ipBlock with except: y's egress to every pod but x/b, by address.
    let x_b = model.pod("x/b");
    policy(
        &api,
        "y",
        "to-blocks",
        json!({
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [
                {"ipBlock": {"cidr": "10.244.0.0/16", "except": [format!("{}/32", x_b.ip(false))]}},
                {"ipBlock": {"cidr": "fd00:10:244::/48", "except": [format!("{}/128", x_b.ip(true))]}}
            ]}]
        }),
    );
    let blocks = table(|r, c| y(r) && c == 1);
    model.expect("ipBlock except", Proto::Tcp, 80, &rows(&blocks));
    api.delete_network_policy("y", "to-blocks");
    api.delete_network_policy("y", "deny-egress");

    // Ingress and egress in one policy: z/a takes from x only and sends to y only.
    policy(
        &api,
        "z",
        "both",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "x"}}}]}],
            "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]
        }),
    );
    let both = table(|r, c| (c == 6 && !x(r)) || (r == 6 && !y(c)));
    model.expect("ingress and egress", Proto::Tcp, 80, &rows(&both));
    api.delete_network_policy("z", "both");
    model.expect("all deleted", Proto::Tcp, 80, &OPEN);
}

/// `knid_policy_denied_total{policy, direction}` on `node`.
fn denied(node: &TestNode, policy: &str, direction: &str) -> u64 {
    let text = knictl_ok(node, &["metrics", "knid_policy_denied_total"]);
    let want =
        format!("knid_policy_denied_total{{direction=\"{direction}\",policy=\"{policy}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&want))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The PodSpec of model pod `ns/name` with label `pod=<label>`.
fn pod_spec_relabelled(
    model: &Model,
    api: &KubeApi,
    ns: &str,
    name: &str,
    label: &str,
) -> testkit::kube_api::PodSpec {
    let pod = model.pod(&format!("{ns}/{name}"));
    let object = api.pod(ns, name).expect("the Pod object");
    let mut spec = testkit::kube_api::PodSpec {
        namespace: ns.into(),
        name: name.into(),
        labels: [("pod".to_string(), label.to_string())].into(),
        node: NODES[pod.node].into(),
        ips: pod.ips.iter().map(ToString::to_string).collect(),
        ..Default::default()
    };
    for p in object["spec"]["containers"][0]["ports"]
        .as_array()
        .into_iter()
        .flatten()
    {
        spec.ports.push(testkit::kube_api::ContainerPort {
            name: p["name"].as_str().map(str::to_owned),
            port: p["containerPort"]
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .expect("port"),
            protocol: p["protocol"].as_str().unwrap_or("TCP").into(),
        });
    }
    spec
}

/// A node whose knid restarts keeps its pods isolated all along: a prober running across the
/// stop and the start never gets through. Then, with the API server gone and the policy table
/// deleted while knid was down (as a reboot loses it), the table is back the moment knid
/// serves, rebuilt from the objects it recorded, and the last known policies hold.
#[test]
fn isolation_holds_across_restarts_without_the_api_and_over_a_lost_table() {
    if !testkit::privileged() {
        return;
    }
    let (_lan, _dir, api, mut nodes) = cluster();
    let model = Model::start(&api, &nodes, &NODES);
    policy(&api, "x", "deny-ingress", json!({"podSelector": {}}));
    let x = |i: usize| i < 3;
    let deny_x_in = table(|_, c| x(c));
    model.expect("default deny ingress", Proto::Tcp, 80, &rows(&deny_x_in));
    // The policy thread records the objects within a few seconds of a change.
    std::thread::sleep(Duration::from_secs(3));

    // y/a -> x/a share node-a's bridge; z/b -> x/a cross from node-b.
    let x_a = model.pod("x/a").ip(false);
    let to = std::net::SocketAddr::new(x_a, 80);
    let probes = vec![
        Probe {
            from: model.pod("y/a").netns.clone(),
            to,
            proto: Proto::Tcp,
        },
        Probe {
            from: model.pod("z/b").netns.clone(),
            to,
            proto: Proto::Tcp,
        },
    ];
    let through = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(1));
    let prober = {
        let (through, running) = (Arc::clone(&through), Arc::clone(&running));
        std::thread::spawn(move || {
            let mut sent = 0usize;
            while running.load(Ordering::SeqCst) == 1 {
                for p in &probes {
                    sent += 1;
                    if probe(p) {
                        through.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            sent
        })
    };
    let node_a = &mut nodes[0];
    node_a.stop();
    node_a.restart();
    std::thread::sleep(Duration::from_secs(2));
    running.store(0, Ordering::SeqCst);
    let sent = prober.join().expect("prober");
    assert!(sent >= 2, "the prober ran: {sent} probes");
    assert_eq!(
        through.load(Ordering::SeqCst),
        0,
        "a denied flow got through during the restart"
    );

    api.stop();
    node_a.stop();
    let mut nft = Nft::open_in(&node_a.host()).expect("nft in node-a");
    nft.delete_table(TABLE)
        .expect("delete the policy table behind knid's back");
    assert!(
        nft.policy_state(TABLE).expect("read").is_none(),
        "the table is gone"
    );
    node_a.restart();
    let state = nft
        .policy_state(TABLE)
        .expect("read")
        .expect("rebuilt before knid served");
    assert!(
        state.isolated.iter().any(|(_, ip)| *ip == x_a),
        "x/a is isolated again: {:?}",
        state.isolated
    );
    // Without the API server, the last known policies stay: still denied, other flows open.
    model.expect(
        "after the restart, API gone",
        Proto::Tcp,
        80,
        &rows(&deny_x_in),
    );

    // A table deleted under a running knid: doctor says so, and knid puts it back.
    nft.delete_table(TABLE)
        .expect("delete the table under knid");
    let doctor = knictl_exits(node_a, 5, &["doctor"]);
    assert!(
        doctor.contains("table inet knid-policy is missing"),
        "{doctor}"
    );
    wait_for("the table put back", Duration::from_secs(60), || {
        // A read can meet knid's repair between its requests and, even after its rereads, find
        // a set missing from the table just listed (CI, 2026-11-30): not back yet, read again.
        match nft.policy_state(TABLE) {
            Ok(state) => state.is_some(),
            Err(e) if e.is_not_found() => false,
            Err(e) => panic!("read: {e}"),
        }
    });
    assert_eq!(knictl_metric(node_a, "knid_policy_table_repairs_total"), 1);
    model.expect("after the repair", Proto::Tcp, 80, &rows(&deny_x_in));

    // NetworkPolicy turned off on node-a: the table it left goes at the next start, so no
    // stale isolation waits for the next pod to get x/a's address.
    node_a.stop();
    let config = std::fs::read_to_string(node_a.config_path()).expect("read the config");
    let off = config.replacen("[cluster]\n", "[cluster]\nnetwork_policy = false\n", 1);
    assert_ne!(off, config, "the config has a [cluster] table");
    std::fs::write(node_a.config_path(), off).expect("write the config");
    node_a.restart();
    assert!(
        nft.policy_state(TABLE).expect("read").is_none(),
        "table removed at start-up"
    );
    let out = testkit::cli::knictl(node_a, &["policy", "ls"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not enforced here"), "{stderr}");
}
