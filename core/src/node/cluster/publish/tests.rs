use std::net::TcpListener;
use std::sync::Mutex;

use testkit::kube_api::{KubeApi, NodeSpec};

use super::*;
use crate::config::{Credentials, WaterMarks};
use crate::model::{BridgePorts, Capacity, Family, NodeRoute};

impl Publisher {
    /// A round as the cluster thread and the writer make it, on the test's thread.
    fn round(&mut self, now: Instant) {
        if let Some(writes) = self.compare(now) {
            self.write(&writes);
        }
    }
}

fn network(name: &str, free: u64) -> NetworkInfo {
    NetworkInfo {
        name: name.into(),
        kind: "bridge".into(),
        subnets: vec!["10.244.1.0/29".parse().expect("cidr")],
        gateways: vec!["10.244.1.1".parse().expect("ip")],
        mtu: 1500,
        bridge: "knid0".into(),
        parent: String::new(),
        mode: String::new(),
        capacity: vec![Capacity {
            family: Family::V4,
            total: 5,
            used: 5 - free,
            free,
        }],
        ports: Some(BridgePorts {
            bridge: "knid0".into(),
            total: 1023,
            used: 5 - free,
            free: 1023 - (5 - free),
        }),
        ready: true,
        schedulable: free > 0,
        reason: String::new(),
        message: String::new(),
        subnets_from: String::new(),
    }
}

#[test]
fn the_condition_says_what_breaks_the_pod_network_and_ready_otherwise() {
    let pods = network("pods", 3);
    let ready = signal(&PodCidr::InUse, &[], &[&pods]);
    assert_eq!(
        (ready.unavailable, ready.reason.as_str()),
        (false, "KnidNetworkReady")
    );
    let mut broken = network("pods", 3);
    broken.ready = false;
    broken.message = "bridge knid0 is missing".into();
    let s = signal(&PodCidr::InUse, &[], &[&broken]);
    assert_eq!(
        (s.unavailable, s.reason.as_str()),
        (true, "KnidNodeNetworkBroken")
    );
    assert!(
        s.message.contains("bridge knid0 is missing"),
        "{}",
        s.message
    );
    let s = signal(&PodCidr::Changed("moved".into()), &[], &[&pods]);
    assert_eq!(
        (s.unavailable, s.reason.as_str()),
        (true, "KnidPodCIDRChanged")
    );
    let route = |state| NodeRoute {
        node: "b".into(),
        dst: "10.244.2.0/24".parse().expect("cidr"),
        via: None,
        state,
        message: "refused".into(),
        backend: crate::model::RouteBackend::HostGw,
        overlay: None,
    };
    let s = signal(&PodCidr::InUse, &[route(RouteState::Failed)], &[&pods]);
    assert_eq!(
        (s.unavailable, s.reason.as_str()),
        (true, "KnidRoutesFailed")
    );
    // A thousand failed routes are named three, counted the rest: the message stays small.
    let many: Vec<NodeRoute> = (0..1000)
        .map(|i| NodeRoute {
            node: format!("n{i}"),
            ..route(RouteState::Failed)
        })
        .collect();
    let s = signal(&PodCidr::InUse, &many, &[&pods]);
    assert!(
        s.message.len() < 512
            && s.message
                .ends_with("and 997 more route(s) (knictl node lists them)"),
        "{}",
        s.message
    );
    assert!(
        s.message
            .starts_with("node n0 10.244.2.0/24: refused; node n1 "),
        "{}",
        s.message
    );
    // A peer without a reachable InternalIP is its problem, not this node's network's.
    let s = signal(&PodCidr::InUse, &[route(RouteState::Unreachable)], &[&pods]);
    assert!(!s.unavailable);
}

#[test]
fn the_fewest_free_counts_addresses_and_bridge_ports_and_skips_networks_without_a_pool() {
    let mut ports_short = network("a", 4);
    if let Some(p) = ports_short.ports.as_mut() {
        p.free = 2;
    }
    let mut cni = network("cni", 0);
    cni.capacity.clear();
    cni.ports = None;
    assert_eq!(fewest_free(&[&ports_short]), Some(2));
    assert_eq!(fewest_free(&[&ports_short, &network("b", 1)]), Some(1));
    assert_eq!(fewest_free(&[&cni]), None);
}

#[test]
fn the_annotation_is_small_json_with_each_networks_free_capacity() {
    let text = annotation(&[network("pods", 2)]);
    let value: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(value["version"], 1);
    let net = &value["networks"][0];
    assert_eq!(net["name"], "pods");
    assert_eq!(net["kind"], "bridge");
    assert_eq!(net["subnets"], json!(["10.244.1.0/29"]));
    assert_eq!(net["free"], json!({"ipv4": 2}));
    assert_eq!(net["freeBridgePorts"], 1020);
    assert_eq!(
        (net["ready"].clone(), net["schedulable"].clone()),
        (json!(true), json!(true))
    );
    assert!(text.len() < 300, "{text}");
}

#[test]
fn times_are_written_as_kubernetes_writes_them() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400_999), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_700_000_000_000), "2023-11-14T22:13:20Z");
}

/// A stand-in with Node `n1`, and a publisher of it whose networks a test sets.
struct Fixture {
    api: KubeApi,
    _dir: tempfile::TempDir,
    networks: Arc<Mutex<Vec<NetworkInfo>>>,
    view: Arc<View>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = KubeApi::start(TcpListener::bind("127.0.0.1:0").expect("bind"), dir.path())
            .expect("start");
        api.add_node(NodeSpec {
            name: "n1".into(),
            pod_cidrs: vec!["10.244.1.0/29".into()],
            internal_ips: vec!["192.0.2.1".into()],
        });
        let view = Arc::new(View::new("n1", "https://stand-in"));
        view.update(|info, pod| {
            *pod = PodCidr::InUse;
            info.pod_cidr_network = "pods".into();
        });
        Fixture {
            api,
            _dir: dir,
            networks: Arc::new(Mutex::new(vec![network("pods", 3)])),
            view,
        }
    }

    fn publisher(&self, marks: Option<WaterMarks>) -> Publisher {
        let endpoint = super::super::credentials::endpoint(
            &Credentials::Kubeconfig(self.api.kubeconfig_path()),
            |_| None,
        )
        .expect("endpoint");
        let config = Cluster {
            node_name: "n1".into(),
            credentials: Credentials::Kubeconfig(self.api.kubeconfig_path()),
            cluster_cidrs: Vec::new(),
            routes: true,
            route_resync: Duration::from_secs(30),
            publish_interval: Duration::from_millis(100),
            annotation_interval: Duration::from_secs(10),
            full_taint: marks,
            backend: crate::config::Backend::HostGw,
            vxlan: crate::config::VxlanSettings {
                vni: 1,
                port: crate::config::VXLAN_PORT,
                device: None,
            },
            backend_note: None,
            network_policy: true,
        };
        let networks = Arc::clone(&self.networks);
        Publisher::new(
            Arc::new(Client::new(endpoint)),
            Arc::clone(&self.view),
            config,
            Box::new(move || networks.lock().expect("lock").clone()),
        )
    }

    fn free(&self, free: u64) {
        *self.networks.lock().expect("lock") = vec![network("pods", free)];
    }

    fn node(&self) -> Value {
        self.api.node("n1").expect("n1")
    }

    fn condition(&self) -> Value {
        self.node()["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .find(|c| c["type"] == NETWORK_UNAVAILABLE)
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn taint_keys(&self) -> Vec<String> {
        self.node()["spec"]["taints"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| {
                        format!(
                            "{}:{}",
                            t["key"].as_str().unwrap_or(""),
                            t["effect"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

const MARKS: Option<WaterMarks> = Some(WaterMarks { low: 0, high: 2 });

#[test]
fn a_round_sets_the_condition_and_annotation_and_leaves_other_conditions() {
    let f = Fixture::new();
    let before = f.node()["status"]["conditions"].clone();
    let mut publisher = f.publisher(MARKS);
    publisher.round(Instant::now());
    let condition = f.condition();
    assert_eq!(condition["status"], "False", "{condition}");
    assert_eq!(condition["reason"], "KnidNetworkReady");
    let after = f.node()["status"]["conditions"].clone();
    let others: Vec<&Value> = after
        .as_array()
        .expect("conditions")
        .iter()
        .filter(|c| c["type"] != NETWORK_UNAVAILABLE)
        .collect();
    assert_eq!(
        others,
        before
            .as_array()
            .expect("conditions")
            .iter()
            .collect::<Vec<_>>()
    );
    let published = f.node()["metadata"]["annotations"][NETWORKS_ANNOTATION].clone();
    assert_eq!(
        published.as_str(),
        Some(annotation(&[network("pods", 3)]).as_str())
    );
    assert!(f.node()["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"].is_string());
    let info = f.view.info();
    assert_eq!(info.published.network_unavailable, Some(false));
    assert!(info.published.condition_ms > 0 && info.published.annotation_ms > 0);

    // Nothing changed: nothing is written.
    let writes = f.api.patches().len();
    publisher.round(Instant::now());
    assert_eq!(f.api.patches().len(), writes);
}

#[test]
fn a_broken_network_is_published_only_once_it_stays_broken() {
    let f = Fixture::new();
    let mut publisher = f.publisher(MARKS);
    let start = Instant::now();
    publisher.round(start);
    let mut broken = network("pods", 3);
    broken.ready = false;
    broken.message = "bridge knid0 is missing".into();
    *f.networks.lock().expect("lock") = vec![broken];
    publisher.round(start + Duration::from_secs(1));
    assert_eq!(f.condition()["status"], "False", "within the grace");
    publisher.round(start + Duration::from_secs(5));
    assert_eq!(f.condition()["status"], "True");
    assert_eq!(f.condition()["reason"], "KnidNodeNetworkBroken");
    f.free(3);
    publisher.round(start + Duration::from_secs(6));
    assert_eq!(f.condition()["status"], "False", "repaired: at once");
}

#[test]
fn the_taint_follows_the_water_marks_and_leaves_other_taints() {
    let f = Fixture::new();
    f.api.edit_node("n1", |node| {
        node["spec"]["taints"] = json!([
            {"key": "other.io/maintenance", "effect": "NoSchedule"},
            {"key": "other.io/evict", "effect": "NoExecute"}
        ]);
    });
    let mut publisher = f.publisher(MARKS);
    let mut now = Instant::now();
    let mut round = |p: &mut Publisher| {
        now += Duration::from_secs(1);
        p.round(now);
    };
    f.free(1);
    round(&mut publisher);
    assert!(!f.taint_keys().iter().any(|k| k.starts_with(FULL_TAINT)));
    f.free(0);
    round(&mut publisher);
    assert_eq!(
        f.taint_keys(),
        [
            "other.io/maintenance:NoSchedule",
            "other.io/evict:NoExecute",
            "knid.io/pod-network-full:NoSchedule"
        ]
    );
    assert!(f.view.info().published.tainted);
    f.free(1);
    round(&mut publisher);
    assert!(
        f.taint_keys().contains(&format!("{FULL_TAINT}:NoSchedule")),
        "one free is below the high water mark"
    );
    f.free(2);
    round(&mut publisher);
    assert_eq!(
        f.taint_keys(),
        [
            "other.io/maintenance:NoSchedule",
            "other.io/evict:NoExecute"
        ]
    );
}

#[test]
fn a_taint_write_that_loses_a_race_is_redone_from_a_fresh_read() {
    let f = Fixture::new();
    let mut publisher = f.publisher(MARKS);
    f.free(0);
    f.api.conflict_next_patches(1);
    // The first PATCH of the round (the condition) is the one refused: the round fails and is
    // retried after its backoff; then the taint's own conflict.
    publisher.round(Instant::now());
    assert!(!f.view.info().published.error.is_empty());
    publisher.round(Instant::now() + Duration::from_secs(1));
    assert_eq!(f.condition()["status"], "False");
    assert!(f.view.info().published.error.is_empty());
    // Another writer's taint lands between knid's read and its write.
    f.free(2);
    publisher.round(Instant::now() + Duration::from_secs(2));
    assert!(f.taint_keys().is_empty());
    f.free(0);
    f.api.conflict_next_patches(1);
    publisher.round(Instant::now() + Duration::from_secs(3));
    assert_eq!(f.taint_keys(), [format!("{FULL_TAINT}:NoSchedule")]);
    let codes: Vec<u16> = f.api.patches().iter().map(|p| p.status).collect();
    assert_eq!(codes.iter().filter(|&&c| c == 409).count(), 2, "{codes:?}");
    assert!(f.view.info().published.error.is_empty());
}

#[test]
fn a_new_publisher_takes_off_a_stale_taint_of_its_own_only() {
    let f = Fixture::new();
    f.api.edit_node("n1", |node| {
        node["spec"]["taints"] = json!([
            {"key": FULL_TAINT, "effect": "NoSchedule"},
            {"key": FULL_TAINT, "effect": "NoExecute"}
        ]);
    });
    f.free(3);
    f.publisher(MARKS).round(Instant::now());
    assert_eq!(
        f.taint_keys(),
        [format!("{FULL_TAINT}:NoExecute")],
        "not knid's effect: left"
    );

    // With the taint off, a stale one of knid's is taken off all the same.
    f.api.edit_node("n1", |node| {
        node["spec"]["taints"] = json!([{"key": FULL_TAINT, "effect": "NoSchedule"}]);
    });
    f.free(0);
    f.publisher(None).round(Instant::now());
    assert!(f.taint_keys().is_empty());
}

#[test]
fn knids_condition_changed_by_another_writer_is_written_again_at_the_next_read_back() {
    let f = Fixture::new();
    let mut publisher = f.publisher(None);
    let start = Instant::now();
    publisher.round(start);
    assert_eq!(f.condition()["reason"], "KnidNetworkReady");
    // Another writer flips knid's condition.
    f.api.edit_node("n1", |node| {
        for c in node["status"]["conditions"]
            .as_array_mut()
            .expect("conditions")
        {
            if c["type"] == NETWORK_UNAVAILABLE {
                c["status"] = "True".into();
                c["reason"] = "SomeoneElse".into();
            }
        }
    });
    // Before the read-back nothing is written; at it, the drift is seen, and the next round
    // puts knid's condition back.
    publisher.round(start + Duration::from_secs(1));
    assert_eq!(f.condition()["reason"], "SomeoneElse");
    publisher.round(start + TAINT_RECHECK + Duration::from_secs(1));
    publisher.round(start + TAINT_RECHECK + Duration::from_secs(2));
    let condition = f.condition();
    assert_eq!(
        (condition["status"].as_str(), condition["reason"].as_str()),
        (Some("False"), Some("KnidNetworkReady")),
        "{condition}"
    );
}
