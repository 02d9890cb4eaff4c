//! What a cluster-mode knid publishes on its own Node, end to end: a knid in a private node
//! namespace reading and patching a stand-in Kubernetes API server (testkit's [`KubeApi`]), as
//! tests/cluster.rs runs them. The `NetworkUnavailable` condition follows the pod network's node
//! side, the `knid.io/pod-network-full:NoSchedule` taint follows its free addresses with
//! hysteresis, the `knid.io/node-networks` annotation says what `knictl networks` says, and
//! nothing else on the Node is touched.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testkit::cli::{knictl_json, knictl_ok};
use testkit::cluster_node::{
    api_on_lan, attach_to_pod_network as attach, detach_pod as detach, node_spec,
    small_node_spec as small_node, start_cluster_node_tuned, POD_NETWORK,
};
use testkit::kube_api::KubeApi;
use testkit::wait::wait_until;
use testkit::{wait_for, TestNode, RPC};

/// How long a change on the node may take to reach the Node object.
const PUBLISH: Duration = Duration::from_secs(20);
const TAINT: &str = "knid.io/pod-network-full";
const ANNOTATION: &str = "knid.io/node-networks";

fn node_object(api: &KubeApi, name: &str) -> Value {
    api.node(name).expect("the Node exists")
}

fn condition(api: &KubeApi, name: &str, kind: &str) -> Value {
    node_object(api, name)["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
        .unwrap_or(Value::Null)
}

fn wait_network_unavailable(api: &KubeApi, name: &str, status: &str, reason: &str) {
    wait_for(
        &format!("NetworkUnavailable={status} ({reason}) on Node {name}"),
        PUBLISH,
        || {
            let c = condition(api, name, "NetworkUnavailable");
            c["status"] == status && c["reason"] == reason
        },
    );
}

/// Waits until `knictl <verb>`'s output holds every one of `needles`, and fails with the last
/// output if it never does.
fn knictl_shows(node: &TestNode, verb: &str, needles: &[&str]) {
    let mut last = String::new();
    let shown = wait_until(PUBLISH, Duration::from_millis(50), || {
        last = knictl_ok(node, &[verb]);
        needles.iter().all(|n| last.contains(n))
    });
    assert!(shown, "knictl {verb} never showed {needles:?}:\n{last}");
}

/// The Node's taints as `key:effect`.
fn taints(api: &KubeApi, name: &str) -> Vec<String> {
    node_object(api, name)["spec"]["taints"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|t| {
                    format!(
                        "{}:{}",
                        t["key"].as_str().unwrap_or_default(),
                        t["effect"].as_str().unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn knid_tainted(api: &KubeApi, name: &str) -> bool {
    taints(api, name).contains(&format!("{TAINT}:NoSchedule"))
}

/// The kubelet's conditions as the stand-in made them, which knid must never change.
fn kubelet_conditions(api: &KubeApi, name: &str) -> Vec<Value> {
    node_object(api, name)["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .filter(|c| c["type"] != "NetworkUnavailable")
        .cloned()
        .collect()
}

#[test]
fn network_unavailable_follows_the_pod_network_and_touches_nothing_else() {
    if !testkit::privileged() {
        return;
    }
    let (lan, _api_dir, api, _) = api_on_lan();
    api.add_node(node_spec("node-a", 1));
    // Another controller's taint and condition, there before knid.
    api.edit_node("node-a", |node| {
        node["spec"]["taints"] =
            json!([{"key": "example.com/maintenance", "effect": "NoSchedule"}]);
        node["status"]["conditions"]
            .as_array_mut()
            .expect("conditions")
            .push(json!({"type": "ExampleProbe", "status": "True", "reason": "Probed"}));
    });
    let kubelet = kubelet_conditions(&api, "node-a");
    let a = start_cluster_node_tuned(&lan, &api, "node-a", 1, "annotation_interval = \"1s\"");

    wait_network_unavailable(&api, "node-a", "False", "KnidNetworkReady");
    let patches = api.patches();
    assert!(
        patches
            .iter()
            .any(|p| p.path == "/api/v1/nodes/node-a/status"
                && p.content_type == "application/strategic-merge-patch+json"),
        "{patches:?}"
    );
    assert!(
        patches
            .iter()
            .all(|p| p.path.starts_with("/api/v1/nodes/node-a")),
        "knid patches its own Node only: {patches:?}"
    );

    // The annotation says what knictl networks says.
    wait_for("the networks annotation", PUBLISH, || {
        node_object(&api, "node-a")["metadata"]["annotations"][ANNOTATION].is_string()
    });
    let text = node_object(&api, "node-a")["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .expect("annotation")
        .to_owned();
    let published: Value = serde_json::from_str(&text).expect("JSON");
    let shown = knictl_json(&a, &["networks"]);
    let net = &published["networks"][0];
    let shown_net = &shown["networks"][0];
    assert_eq!(published["version"], 1);
    assert_eq!(net["name"], shown_net["name"]);
    assert_eq!(net["name"], POD_NETWORK);
    assert_eq!(net["subnets"], shown_net["subnets"], "{text} vs {shown}");
    assert_eq!(net["ready"], true);
    for capacity in shown_net["capacity"].as_array().expect("capacity") {
        let family = capacity["family"].as_str().expect("family");
        assert_eq!(
            net["free"][family].as_u64(),
            capacity["free"]
                .as_u64()
                .or_else(|| capacity["free"].as_str().and_then(|f| f.parse().ok())),
            "{family}: {text} vs {shown}"
        );
    }

    // The bridge goes, and nothing puts it back: the condition turns True.
    assert!(a
        .host_rtnl()
        .delete_link_by_name("kpod0")
        .expect("delete the bridge"));
    wait_network_unavailable(&api, "node-a", "True", "KnidNodeNetworkBroken");
    let c = condition(&api, "node-a", "NetworkUnavailable");
    assert!(
        c["message"].as_str().unwrap_or_default().contains("kpod0"),
        "{c}"
    );
    // knid's own view follows once the writer has the API's answer, a moment after the API
    // holds the write.
    knictl_shows(
        &a,
        "status",
        &["NetworkUnavailable=True KnidNodeNetworkBroken"],
    );

    knictl_ok(&a, &["setup-node-network"]);
    wait_network_unavailable(&api, "node-a", "False", "KnidNetworkReady");
    assert_ne!(
        c["lastTransitionTime"],
        Value::Null,
        "the condition carries its transition time"
    );

    // Through all of it, the kubelet's conditions, the other controller's condition and taint
    // stayed as they were, and knid added no taint.
    assert_eq!(kubelet_conditions(&api, "node-a"), kubelet);
    assert_eq!(
        taints(&api, "node-a"),
        ["example.com/maintenance:NoSchedule"]
    );
    knictl_shows(&a, "doctor", &["node-publish", "NetworkUnavailable=False"]);
}

#[test]
fn a_full_pod_network_taints_the_node_no_schedule_until_room_comes_back() {
    if !testkit::privileged() {
        return;
    }
    let (lan, _api_dir, api, _) = api_on_lan();
    api.add_node(small_node("node-a", 1));
    api.edit_node("node-a", |node| {
        node["spec"]["taints"] =
            json!([{"key": "example.com/maintenance", "effect": "NoSchedule"}]);
    });
    let a = start_cluster_node_tuned(&lan, &api, "node-a", 1, "full_taint_high_water = 2");
    wait_network_unavailable(&api, "node-a", "False", "KnidNetworkReady");

    for i in 0..4 {
        attach(&a, &format!("p{i}"));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(!knid_tainted(&api, "node-a"), "one address is still free");
    // The last free address goes, and a write of the taint loses a race once.
    api.conflict_next_patches(1);
    attach(&a, "p4");
    let full = Instant::now();
    wait_for("the taint", PUBLISH, || knid_tainted(&api, "node-a"));
    eprintln!(
        "taint {:?} after the last address was taken",
        full.elapsed()
    );
    assert!(
        api.patches().iter().any(|p| p.status == 409),
        "the 409 was answered"
    );
    assert_eq!(
        taints(&api, "node-a"),
        [
            "example.com/maintenance:NoSchedule".to_owned(),
            format!("{TAINT}:NoSchedule")
        ],
        "the other taint stays"
    );
    // A full node stays ready, and gets no NoExecute.
    assert!(a.client().status(RPC).expect("Status").ready);
    assert!(!taints(&api, "node-a")
        .iter()
        .any(|t| t.ends_with(":NoExecute")));
    let condition = condition(&api, "node-a", "NetworkUnavailable");
    assert_eq!(
        condition["status"], "False",
        "full is not broken: {condition}"
    );

    // One free is below the high water mark: still tainted; two free: untainted.
    detach(&a, "p4");
    std::thread::sleep(Duration::from_secs(3));
    assert!(knid_tainted(&api, "node-a"), "hysteresis: one free address");
    detach(&a, "p3");
    let room = Instant::now();
    wait_for("the taint to go", PUBLISH, || !knid_tainted(&api, "node-a"));
    eprintln!("taint gone {:?} after the detach", room.elapsed());
    assert_eq!(
        taints(&api, "node-a"),
        ["example.com/maintenance:NoSchedule"]
    );
    for i in 0..3 {
        detach(&a, &format!("p{i}"));
    }
}

#[test]
fn a_restart_takes_off_a_stale_taint_of_its_own_and_sets_the_condition() {
    if !testkit::privileged() {
        return;
    }
    let (lan, _api_dir, api, _) = api_on_lan();
    api.add_node(small_node("node-a", 1));
    let mut a = start_cluster_node_tuned(&lan, &api, "node-a", 1, "");
    wait_network_unavailable(&api, "node-a", "False", "KnidNetworkReady");
    attach(&a, "p0");
    a.stop();
    // While knid is down the Node says it is full and broken (a knid that died before it could
    // say otherwise), and another controller's NoExecute taint of the same key is there.
    api.edit_node("node-a", |node| {
        node["spec"]["taints"] = json!([
            {"key": TAINT, "effect": "NoSchedule"},
            {"key": TAINT, "effect": "NoExecute"}
        ]);
        for c in node["status"]["conditions"]
            .as_array_mut()
            .expect("conditions")
        {
            if c["type"] == "NetworkUnavailable" {
                c["status"] = json!("True");
                c["reason"] = json!("Stale");
            }
        }
    });
    let restarted = Instant::now();
    a.restart();
    wait_for("the stale taint to go", Duration::from_secs(10), || {
        !knid_tainted(&api, "node-a")
    });
    wait_network_unavailable(&api, "node-a", "False", "KnidNetworkReady");
    assert!(
        restarted.elapsed() < Duration::from_secs(10),
        "{:?}",
        restarted.elapsed()
    );
    assert_eq!(
        taints(&api, "node-a"),
        [format!("{TAINT}:NoExecute")],
        "an effect knid never writes is not knid's"
    );
    detach(&a, "p0");
}
