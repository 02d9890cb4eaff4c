use super::*;

/// A Node as the API server serves it (kubeadm-made, trimmed of managed fields).
const NODE: &str = r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-b",
 "uid":"6f0e","resourceVersion":"4711","creationTimestamp":"2026-11-01T10:00:00Z",
 "labels":{"kubernetes.io/hostname":"node-b","kubernetes.io/os":"linux"},
 "annotations":{"node.alpha.kubernetes.io/ttl":"0"}},
 "spec":{"podCIDR":"10.244.1.0/24","podCIDRs":["10.244.1.0/24","fd00:10:244:1::/64"],
 "providerID":"kind://docker/kind/node-b"},
 "status":{"capacity":{"cpu":"2","memory":"24Gi","pods":"110"},
 "conditions":[{"type":"Ready","status":"True","lastHeartbeatTime":"2026-11-01T10:01:00Z",
 "reason":"KubeletReady","message":"kubelet is posting ready status"}],
 "addresses":[{"type":"InternalIP","address":"172.18.0.3"},
 {"type":"InternalIP","address":"fc00:f853:ccd:e793::3"},{"type":"Hostname","address":"node-b"}],
 "daemonEndpoints":{"kubeletEndpoint":{"Port":10250}},
 "nodeInfo":{"kubeletVersion":"v1.34.1","architecture":"amd64"}}}"#;

#[test]
fn a_real_node_object_gives_its_pod_cidrs_and_internal_ips() {
    let node: Node = serde_json::from_str(NODE).expect("node");
    assert_eq!(node.metadata.resource_version, "4711");
    let facts = node.facts();
    assert_eq!(facts.name, "node-b");
    let cidrs: Vec<String> = facts.pod_cidrs.iter().map(|c| c.to_string()).collect();
    assert_eq!(cidrs, ["10.244.1.0/24", "fd00:10:244:1::/64"]);
    let ips: Vec<String> = facts.internal_ips.iter().map(|c| c.to_string()).collect();
    assert_eq!(ips, ["172.18.0.3", "fc00:f853:ccd:e793::3"]);
    assert!(facts.problems.is_empty());
}

#[test]
fn a_node_of_a_single_stack_cluster_has_only_pod_cidr() {
    let node: Node =
        serde_json::from_str(r#"{"metadata":{"name":"a"},"spec":{"podCIDR":"10.244.0.0/24"}}"#)
            .expect("node");
    assert_eq!(node.facts().pod_cidrs.len(), 1);
}

#[test]
fn unusable_values_are_reported_not_kept() {
    let node: Node = serde_json::from_str(
        r#"{"metadata":{"name":"a"},"spec":{"podCIDRs":["10.244.0.1/24","x"]},
        "status":{"addresses":[{"type":"InternalIP","address":"node-a.local"}]}}"#,
    )
    .expect("node");
    let facts = node.facts();
    assert!(facts.pod_cidrs.is_empty() && facts.internal_ips.is_empty());
    assert_eq!(facts.problems.len(), 3, "{:?}", facts.problems);
}

#[test]
fn a_watch_error_carries_a_status() {
    let event: WatchEvent = serde_json::from_str(
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},
        "status":"Failure","message":"too old resource version: 5 (9)","reason":"Expired","code":410}}"#,
    )
    .expect("event");
    assert_eq!(event.kind, "ERROR");
    let status: Status = serde_json::from_value(event.object).expect("status");
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
}
