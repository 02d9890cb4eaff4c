use std::net::TcpListener;

use serde_json::json;
use testkit::kube_api::{KubeApi, NodeSpec};

use super::*;
use crate::config::Credentials;

fn client_of(api: &KubeApi) -> Client {
    let endpoint = super::super::credentials::endpoint(
        &Credentials::Kubeconfig(api.kubeconfig_path()),
        |_| None,
    )
    .expect("endpoint");
    Client::new(endpoint)
}

fn started() -> (KubeApi, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let api =
        KubeApi::start(TcpListener::bind("127.0.0.1:0").expect("bind"), dir.path()).expect("start");
    api.add_node(NodeSpec {
        name: "n1".into(),
        pod_cidrs: vec!["10.244.1.0/24".into()],
        internal_ips: vec!["192.0.2.1".into()],
    });
    (api, dir)
}

#[test]
fn a_status_patch_is_sent_as_a_strategic_merge_and_returns_the_node() {
    let (api, _dir) = started();
    let client = client_of(&api);
    let patch = json!({"status": {"conditions": [
        {"type": "NetworkUnavailable", "status": "False", "reason": "KnidNetworkReady", "message": "m"}
    ]}});
    let node = client
        .patch_node("n1", true, STRATEGIC_MERGE_PATCH, &patch)
        .expect("patched");
    let condition = node
        .status
        .conditions
        .iter()
        .find(|c| c.kind == "NetworkUnavailable")
        .expect("the condition");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "KnidNetworkReady")
    );
    assert!(node.status.conditions.iter().any(|c| c.kind == "Ready"));
    let sent = api.patches();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/api/v1/nodes/n1/status");
    assert_eq!(sent[0].query, "fieldValidation=Strict");
    assert_eq!(sent[0].content_type, STRATEGIC_MERGE_PATCH);
}

#[test]
fn a_lost_race_is_a_conflict_and_other_errors_are_not() {
    let (api, _dir) = started();
    let client = client_of(&api);
    let node = client.get_node("n1").expect("get");
    let stale = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]}
    ]);
    let failed = client
        .patch_node("n1", false, JSON_PATCH, &stale)
        .expect_err("a stale test fails");
    assert!(failed.is_conflict(), "{failed}");

    api.conflict_next_patches(1);
    let fresh = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": node.metadata.resource_version},
        {"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]}
    ]);
    let forced = client
        .patch_node("n1", false, JSON_PATCH, &fresh)
        .expect_err("409");
    assert!(
        matches!(forced, ApiError::Status { code: 409, .. }),
        "{forced}"
    );
    let node = client
        .patch_node("n1", false, JSON_PATCH, &fresh)
        .expect("applies");
    assert_eq!(node.spec.taints.len(), 1);
    assert_eq!(node.spec.taints[0].key, "k");

    let missing = client.get_node("ghost").expect_err("404");
    assert!(!missing.is_conflict());
    assert!(
        matches!(missing, ApiError::Status { code: 404, .. }),
        "{missing}"
    );
}
