//! NetworkPolicy semantics on a small cluster like the upstream e2e suite's: namespaces x, y, z
//! with pods a, b, c each, every pod local, checked through `explain` (which checks the
//! compiled rules).

use std::net::IpAddr;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::{json, Value};

use super::compile::{compile, Direction, LocalPod};
use super::explain::{explain, Endpoint, Side};
use super::objects::{NamedPort, PodInfo, Policy, World, TCP, UDP};
use super::selector::Labels;

const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];

fn ip(ns: usize, pod: usize, v6: bool) -> IpAddr {
    if v6 {
        format!("fd00:{}::{}", ns + 1, pod + 1).parse().expect("v6")
    } else {
        format!("10.0.{}.{}", ns + 1, pod + 1).parse().expect("v4")
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

/// The upstream model: `ns=<name>` on namespaces, `pod=<name>` on pods, named ports
/// `serve-80-tcp`, `serve-81-udp`.
fn world() -> (World, Vec<LocalPod>) {
    let mut world = World::default();
    let mut local = Vec::new();
    for (n, ns) in NAMESPACES.iter().enumerate() {
        world.namespaces.insert(
            (*ns).into(),
            labels(&[("ns", ns), ("kubernetes.io/metadata.name", ns)]),
        );
        for (p, pod) in PODS.iter().enumerate() {
            let ips = vec![ip(n, p, false), ip(n, p, true)];
            world.pods.insert(
                ((*ns).into(), (*pod).into()),
                PodInfo {
                    labels: labels(&[("pod", pod)]),
                    ips: ips.clone(),
                    ports: vec![
                        NamedPort {
                            name: "serve-80-tcp".into(),
                            protocol: TCP,
                            port: 80,
                        },
                        NamedPort {
                            name: "serve-81-udp".into(),
                            protocol: UDP,
                            port: 81,
                        },
                    ],
                    node: "n1".into(),
                },
            );
            local.push(LocalPod {
                sandbox: format!("{ns}-{pod}"),
                key: ((*ns).into(), (*pod).into()),
                labels: Labels::new(),
                ips,
            });
        }
    }
    (world, local)
}

fn add(world: &mut World, ns: &str, name: &str, spec: Value) {
    let object: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name},
        "spec": spec,
    }))
    .expect("a NetworkPolicy");
    let policy = Policy::parse(&object).expect("a valid policy");
    world.policies.insert(policy.key(), policy);
}

fn endpoint(name: &str, v6: bool) -> Endpoint {
    let (ns, pod) = name.split_once('/').expect("ns/pod");
    let n = NAMESPACES.iter().position(|x| *x == ns).expect("ns");
    let p = PODS.iter().position(|x| *x == pod).expect("pod");
    Endpoint {
        pod: Some((ns.into(), pod.into())),
        ip: ip(n, p, v6),
    }
}

/// The reachability matrix of `protocol`/`port` over one family, as upstream prints it: a row
/// per source, `.` allowed, `X` denied.
fn matrix(world: &World, local: &[LocalPod], protocol: u8, port: u16, v6: bool) -> Vec<String> {
    let names: Vec<String> = NAMESPACES
        .iter()
        .flat_map(|ns| PODS.iter().map(move |p| format!("{ns}/{p}")))
        .collect();
    names
        .iter()
        .map(|from| {
            names
                .iter()
                .map(|to| {
                    let e = explain(
                        world,
                        local,
                        &endpoint(from, v6),
                        &endpoint(to, v6),
                        protocol,
                        port,
                    );
                    if e.allowed {
                        '.'
                    } else {
                        'X'
                    }
                })
                .collect()
        })
        .collect()
}

/// Both families agree and give `expected`.
fn expect(world: &World, local: &[LocalPod], protocol: u8, port: u16, expected: &[&str]) {
    for v6 in [false, true] {
        assert_eq!(
            matrix(world, local, protocol, port, v6),
            expected,
            "v6={v6} port {port}"
        );
    }
}

const ALL_OPEN: [&str; 9] = [
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

#[test]
fn without_policies_every_pod_reaches_every_pod() {
    let (world, local) = world();
    expect(&world, &local, TCP, 80, &ALL_OPEN);
    assert!(compile(&world, &local).isolated.is_empty());
}

#[test]
fn default_deny_ingress_closes_the_namespace_to_everyone_but_leaves_its_egress() {
    let (mut world, local) = world();
    add(&mut world, "x", "deny", json!({"podSelector": {}}));
    let closed = ["XXX......"; 9];
    expect(&world, &local, TCP, 80, &closed);
    let e = explain(
        &world,
        &local,
        &endpoint("y/a", false),
        &endpoint("x/b", false),
        TCP,
        80,
    );
    assert_eq!(e.egress, Side::NotIsolated);
    assert_eq!(
        e.ingress,
        Side::Denied {
            by: vec![("x".into(), "deny".into())]
        }
    );
}

#[test]
fn default_deny_all_closes_both_directions() {
    let (mut world, local) = world();
    add(
        &mut world,
        "x",
        "deny-all",
        json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    );
    let mut rows = vec!["XXXXXXXXX"; 3];
    rows.extend(["XXX......"; 6]);
    expect(&world, &local, TCP, 80, &rows);
}

#[test]
fn pod_selector_namespace_selector_and_both_in_one_peer() {
    let (mut world, local) = world();
    // x/a: from pods b of its own namespace.
    add(
        &mut world,
        "x",
        "pods",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]
        }),
    );
    // y/a: from every pod of namespaces y and z (matchExpressions on the automatic label).
    add(
        &mut world,
        "y",
        "namespaces",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["y", "z"]}]}}]}]
        }),
    );
    // z/a: from pods c of namespace x only (AND), or (OR) any pod b of its own namespace.
    add(
        &mut world,
        "z",
        "both",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [
                {"namespaceSelector": {"matchLabels": {"ns": "x"}}, "podSelector": {"matchLabels": {"pod": "c"}}},
                {"podSelector": {"matchLabels": {"pod": "b"}}}
            ]}]
        }),
    );
    expect(
        &world,
        &local,
        TCP,
        80,
        &[
            "X..X..X..",
            "...X..X..",
            "X..X.....",
            "X.....X..",
            "X.....X..",
            "X.....X..",
            "X.....X..",
            "X........",
            "X.....X..",
        ],
    );
}

#[test]
fn ports_named_ports_protocols_and_end_ports() {
    let (mut world, local) = world();
    add(
        &mut world,
        "x",
        "ports",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"ports": [{"port": "serve-80-tcp"}, {"port": 81, "protocol": "UDP"}]}]
        }),
    );
    add(
        &mut world,
        "x",
        "range",
        json!({
            "podSelector": {"matchLabels": {"pod": "b"}},
            "ingress": [{"ports": [{"port": 80, "endPort": 81}]}]
        }),
    );
    let x_a_b_open = ["........."; 9];
    expect(&world, &local, TCP, 80, &x_a_b_open);
    expect(&world, &local, TCP, 81, &["X........"; 9]);
    expect(&world, &local, UDP, 80, &["XX......."; 9]);
    expect(
        &world,
        &local,
        UDP,
        81,
        &["X........"; 9].map(|_| ".X......."),
    );
    expect(&world, &local, TCP, 82, &["XX......."; 9]);
}

#[test]
fn egress_named_ports_resolve_against_the_destination_pod() {
    let (mut world, local) = world();
    let mut odd = world.pods[&("y".to_string(), "b".to_string())].clone();
    odd.ports = vec![NamedPort {
        name: "serve-80-tcp".into(),
        protocol: TCP,
        port: 81,
    }];
    world.pods.insert(("y".into(), "b".into()), odd);
    add(
        &mut world,
        "x",
        "egress",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "policyTypes": ["Egress"],
            "egress": [{"ports": [{"port": "serve-80-tcp"}]}]
        }),
    );
    let e = |to: &str, port| {
        explain(
            &world,
            &local,
            &endpoint("x/a", false),
            &endpoint(to, false),
            TCP,
            port,
        )
        .allowed
    };
    assert!(e("x/b", 80));
    assert!(!e("x/b", 81));
    assert!(e("y/b", 81), "y/b serves serve-80-tcp on 81");
    assert!(!e("y/b", 80));
}

#[test]
fn ip_blocks_with_exceptions_and_egress_on_the_client_side() {
    let (mut world, local) = world();
    add(
        &mut world,
        "x",
        "block",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [
                {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.2.0/24"]}},
                {"ipBlock": {"cidr": "fd00::/16", "except": ["fd00:2::/32"]}}
            ]}]
        }),
    );
    expect(
        &world,
        &local,
        TCP,
        80,
        &[
            "...XXX...",
            ".........",
            ".........",
            ".........",
            ".........",
            ".........",
            ".........",
            ".........",
            ".........",
        ],
    );
}

#[test]
fn stacked_policies_are_a_union_and_a_relabelled_pod_moves_in_and_out() {
    let (mut world, mut local) = world();
    add(&mut world, "x", "deny", json!({"podSelector": {}}));
    add(
        &mut world,
        "x",
        "from-y",
        json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]
        }),
    );
    add(
        &mut world,
        "x",
        "from-z-c",
        json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"pod": "c"}}}]}]
        }),
    );
    let allowed = |w: &World, l: &[LocalPod], from: &str| {
        explain(
            w,
            l,
            &endpoint(from, false),
            &endpoint("x/a", false),
            TCP,
            80,
        )
        .allowed
    };
    assert!(!allowed(&world, &local, "x/b"));
    assert!(allowed(&world, &local, "x/c"));
    assert!(allowed(&world, &local, "y/a"));
    assert!(!allowed(&world, &local, "z/a"));
    assert!(allowed(&world, &local, "z/c"));
    // z/a relabelled pod=c: now allowed; a pod unknown to the API is judged by its attach labels.
    world
        .pods
        .get_mut(&("z".to_string(), "a".to_string()))
        .expect("z/a")
        .labels = labels(&[("pod", "c")]);
    assert!(allowed(&world, &local, "z/a"));
    world.pods.remove(&("z".to_string(), "a".to_string()));
    local
        .iter_mut()
        .find(|l| l.key == ("z".to_string(), "a".to_string()))
        .expect("z/a")
        .labels = labels(&[("pod", "a")]);
    assert!(!allowed(&world, &local, "z/a"));
    // Namespace z relabelled ns=y: its pods come in.
    world.namespaces.insert("z".into(), labels(&[("ns", "y")]));
    assert!(allowed(&world, &local, "z/b"));
}

#[test]
fn compiled_rules_name_their_policy_and_isolate_only_selected_directions() {
    let (mut world, local) = world();
    add(
        &mut world,
        "y",
        "web",
        json!({
            "podSelector": {"matchLabels": {"pod": "b"}},
            "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 80}]}]
        }),
    );
    let compiled = compile(&world, &local);
    let isolated: Vec<_> = compiled.isolated.iter().collect();
    assert_eq!(
        isolated,
        vec![
            &(Direction::Ingress, ip(1, 1, false)),
            &(Direction::Ingress, ip(1, 1, true))
        ]
    );
    assert_eq!(
        compiled.selected["y-b"].ingress,
        vec![("y".to_string(), "web".to_string())]
    );
    let e = explain(
        &world,
        &local,
        &endpoint("y/a", true),
        &endpoint("y/b", true),
        TCP,
        80,
    );
    assert_eq!(
        e.ingress,
        Side::Allowed {
            policy: ("y".into(), "web".into()),
            rule: 0
        }
    );
}

#[test]
fn unreadable_rules_allow_nothing_and_say_which_field() {
    let object: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"namespace": "x", "name": "bad"},
        "spec": {"podSelector": {}, "ingress": [
            {"ports": [{"port": 80, "endPort": 79}]},
            {"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]},
            {"ports": [{"port": 80, "protocol": "ICMP"}]}
        ]}
    }))
    .expect("object");
    let policy = Policy::parse(&object).expect("parsed");
    assert_eq!(policy.ingress.as_ref().map(Vec::len), Some(0));
    assert_eq!(policy.refused.len(), 3, "{:?}", policy.refused);
    assert!(
        policy.refused[0].starts_with("spec.ingress[0].ports[0].endPort"),
        "{:?}",
        policy.refused
    );
    assert!(policy.refused[1].starts_with("spec.ingress[1].from[0].ipBlock.cidr"));
    assert!(policy.refused[2].starts_with("spec.ingress[2].ports[0].protocol"));
    let bad_selector: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"namespace": "x", "name": "bad"},
        "spec": {"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}
    }))
    .expect("object");
    let refused = Policy::parse(&bad_selector).expect_err("refused");
    assert!(
        refused.starts_with("spec.podSelector.matchExpressions[0].values"),
        "{refused}"
    );
}
