//! A cluster's NetworkPolicy objects at scale, as the NetworkPolicy bench feeds them to the
//! stand-in API server: namespaces `ns-00`, `ns-01`, ... labelled by team and environment;
//! Pods spread over them and over remote nodes, labelled as Deployments label them (`app`,
//! `tier`, `version`, `pod-template-hash`), with named container ports and an address in
//! 10.200.0.0/16; and NetworkPolicies of the shapes clusters use (default deny, same-app,
//! namespace and pod selectors, address blocks with exceptions, port ranges, named ports,
//! DNS egress). Everything is derived from indices, so a run is reproducible.

use serde_json::{json, Value};

use crate::kube_api::{ContainerPort, KubeApi, PodSpec};

/// Apps per namespace; pod `i` of a namespace runs app `i % APPS`.
pub const APPS: usize = 10;
/// Tiers, by app: app `k` is of tier `TIERS[k % TIERS.len()]`.
pub const TIERS: [&str; 4] = ["web", "api", "db", "cache"];
/// Policies per namespace, of which the first two are its default denials.
const PER_NAMESPACE: usize = 20;

/// Namespace `n`'s name.
pub fn namespace(n: usize) -> String {
    format!("ns-{n:02}")
}

/// Namespace `n`'s labels (besides the automatic `kubernetes.io/metadata.name`).
pub fn namespace_labels(n: usize) -> Vec<(String, String)> {
    vec![
        ("team".into(), format!("team-{}", n % 5)),
        (
            "env".into(),
            if n % 2 == 0 { "prod" } else { "staging" }.into(),
        ),
    ]
}

/// The labels of a pod of app `app`, as its Deployment gives them.
pub fn app_labels(app: usize) -> Vec<(String, String)> {
    vec![
        ("app".into(), format!("app-{app}")),
        ("tier".into(), TIERS[app % TIERS.len()].into()),
        ("version".into(), format!("v{}", 1 + app % 2)),
        (
            "pod-template-hash".into(),
            format!("{:x}", 0x5f7d_9c00 + app),
        ),
    ]
}

/// Creates `count` namespaces.
pub fn put_namespaces(api: &KubeApi, count: usize) {
    for n in 0..count {
        let labels = namespace_labels(n);
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        api.put_namespace(&namespace(n), &labels);
    }
}

/// Remote pod `i` of `namespaces`: in namespace `i % namespaces`, on node `remote-<i % 100>`,
/// at `10.200.<i / 250>.<1 + i % 250>` (so `i` < 64,000).
pub fn remote_pod(i: usize, namespaces: usize) -> PodSpec {
    let n = i % namespaces;
    let app = (i / namespaces) % APPS;
    PodSpec {
        namespace: namespace(n),
        name: format!("app-{app}-{i:05}"),
        labels: app_labels(app).into_iter().collect(),
        node: format!("remote-{}", i % 100),
        ips: vec![format!("10.200.{}.{}", i / 250, 1 + i % 250)],
        ports: vec![
            ContainerPort {
                name: Some("http".into()),
                port: 8080,
                protocol: "TCP".into(),
            },
            ContainerPort {
                name: Some("metrics".into()),
                port: 9090,
                protocol: "TCP".into(),
            },
        ],
        host_network: false,
    }
}

/// Policy `i` of `namespaces`: its namespace, name and spec. Namespace `i % namespaces` gets
/// policies `0..20` of its own in turn (index `j = i / namespaces`): a default deny of ingress
/// (`j` = 0) and of egress with DNS allowed (1), then one per app (2..12) letting in its peers
/// by pod selector, by namespace and pod selector, by address block or from a whole
/// environment, then egress rules (12..20) to another app, to teams' namespaces, to the
/// internet outside private ranges, or to a block of pods.
pub fn policy(i: usize, namespaces: usize) -> (String, String, Value) {
    let n = i % namespaces;
    let j = (i / namespaces) % PER_NAMESPACE;
    let round = i / (namespaces * PER_NAMESPACE);
    let name = format!("p{j:02}-{round}");
    let app = |k: usize| json!({"matchLabels": {"app": format!("app-{}", k % APPS)}});
    let spec = match j {
        0 => json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        1 => json!({
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{
                "to": [{"namespaceSelector": {"matchLabels":
                    {"kubernetes.io/metadata.name": "kube-system"}}}],
                "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
            }]
        }),
        2..=11 => {
            let k = j - 2;
            let from = match k % 4 {
                0 => json!([{"podSelector": app(k)}]),
                1 => json!([{
                    "namespaceSelector": {"matchLabels": {"team": format!("team-{}", (n + 1) % 5)}},
                    "podSelector": {"matchLabels": {"tier": "api"}}
                }]),
                2 => json!([{"ipBlock": {
                    "cidr": "10.0.0.0/8",
                    "except": [format!("10.200.{}.0/24", (n * 7 + k) % 20)]
                }}]),
                _ => json!([{"namespaceSelector": {"matchLabels": {"env": "prod"}}}]),
            };
            let ports = match k % 3 {
                0 => json!([{"port": 8080, "protocol": "TCP"}]),
                1 => json!([{"port": "http"}]),
                _ => json!([{"port": 8080, "endPort": 8090, "protocol": "TCP"}, {"port": 9090}]),
            };
            json!({"podSelector": app(k), "ingress": [{"from": from, "ports": ports}]})
        }
        _ => {
            let k = j - 12;
            let to = match k % 4 {
                0 => json!([{"podSelector": app(k + 1)}]),
                1 => json!([{"namespaceSelector": {"matchExpressions": [{
                    "key": "team", "operator": "In",
                    "values": [format!("team-{}", n % 5), format!("team-{}", (n + 2) % 5)]
                }]}}]),
                2 => json!([{"ipBlock": {
                    "cidr": "0.0.0.0/0",
                    "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
                }}]),
                _ => json!([{"ipBlock": {"cidr": format!("10.200.{}.0/24", (n + k) % 20)}}]),
            };
            let ports = if k % 2 == 0 {
                json!([{"port": "http"}])
            } else {
                json!([{"port": 443, "protocol": "TCP"}])
            };
            json!({
                "podSelector": {"matchLabels": {"tier": TIERS[k % TIERS.len()]}},
                "policyTypes": ["Egress"],
                "egress": [{"to": to, "ports": ports}]
            })
        }
    };
    (namespace(n), name, spec)
}

/// Creates policy `i` of `namespaces` ([`policy`]).
pub fn put_policy(api: &KubeApi, i: usize, namespaces: usize) {
    let (ns, name, spec) = policy(i, namespaces);
    api.put_network_policy(&ns, &name, spec)
        .unwrap_or_else(|e| panic!("put policy {ns}/{name}: {e}"));
}
