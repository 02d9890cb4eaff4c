//! The JSON the stand-in API server sends, shaped as kube-apiserver's core/v1 serialisation:
//! `Node` objects (realistic, with the fields a kubelet fills in), `NodeList`, `Status` errors and
//! watch events.

use serde_json::{json, Map, Value};

/// A Node as a test describes it; the server fills in the rest of a realistic object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSpec {
    /// `metadata.name` (and the Hostname address, and the `kubernetes.io/hostname` label).
    pub name: String,
    /// `spec.podCIDRs` (and `spec.podCIDR`, the first); both absent when empty.
    pub pod_cidrs: Vec<String>,
    /// The `InternalIP` entries of `status.addresses`, in order.
    pub internal_ips: Vec<String>,
}

/// What the server knows of a Node beyond the caller's [`NodeSpec`].
pub(super) struct NodeMeta<'a> {
    pub uid: &'a str,
    pub created: &'a str,
    pub resource_version: u64,
    /// When the kubelet last posted status: the time of the last add or update.
    pub heartbeat: &'a str,
}

/// A `Node` as `GET /api/v1/nodes/{name}` returns it (one line, no trailing newline).
pub(super) fn node(spec: &NodeSpec, meta: &NodeMeta) -> String {
    let name = spec.name.as_str();
    let mut node_spec = Map::new();
    // The real server omits empty fields: a node whose CIDRs are not allocated yet has neither.
    if let Some(first) = spec.pod_cidrs.first() {
        node_spec.insert("podCIDR".into(), json!(first));
        node_spec.insert("podCIDRs".into(), json!(spec.pod_cidrs));
    }
    node_spec.insert(
        "providerID".into(),
        json!(format!("kind://docker/knid/{name}")),
    );

    let mut addresses: Vec<Value> = spec
        .internal_ips
        .iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip}))
        .collect();
    addresses.push(json!({"type": "Hostname", "address": name}));

    let machine_id = meta.uid.replace('-', "");
    let resources = json!({
        "cpu": "8",
        "ephemeral-storage": "263174212Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "32827816Ki",
        "pods": "110"
    });
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": kind,
            "status": status,
            "lastHeartbeatTime": meta.heartbeat,
            "lastTransitionTime": meta.created,
            "reason": reason,
            "message": message
        })
    };
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version.to_string(),
            "creationTimestamp": meta.created,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/worker": ""
            },
            "annotations": {
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"
            },
            "managedFields": [{
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": meta.heartbeat,
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/hostname": {}}},
                    "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {"f:status": {}}}}
                },
                "subresource": "status"
            }]
        },
        "spec": node_spec,
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
            ],
            "addresses": addresses,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine_id,
                "systemUUID": meta.uid.to_uppercase(),
                "bootID": meta.uid,
                "kernelVersion": "6.1.0-18-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.30.0",
                "kubeProxyVersion": "v1.30.0",
                "operatingSystem": "linux",
                "architecture": "amd64"
            },
            "images": [{
                "names": [
                    "registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097",
                    "registry.k8s.io/pause:3.9"
                ],
                "sizeBytes": 321520
            }]
        }
    })
    .to_string()
}

/// A `NodeList` page around `items` (each a rendered [`node`]).
pub(super) fn node_list<'a>(
    resource_version: u64,
    items: impl Iterator<Item = &'a str>,
    more: Option<(String, usize)>,
) -> String {
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if let Some((token, remaining)) = more {
        metadata["continue"] = json!(token);
        metadata["remainingItemCount"] = json!(remaining);
    }
    let mut body =
        format!(r#"{{"kind":"NodeList","apiVersion":"v1","metadata":{metadata},"items":["#);
    for (i, item) in items.enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(item);
    }
    body.push_str("]}");
    body
}

/// A `Status` failure as the API server answers errors with (`details` only when given).
pub(super) fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> String {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status.to_string()
}

/// The 404 for a node that does not exist.
pub(super) fn node_not_found(name: &str) -> String {
    status(
        404,
        "NotFound",
        &format!("nodes {name:?} not found"),
        Some(json!({"name": name, "kind": "nodes"})),
    )
}

/// One watch event: `{"type":..,"object":..}` and its newline.
pub(super) fn watch_event(kind: &str, object: &str) -> String {
    format!(r#"{{"type":"{kind}","object":{object}}}"#) + "\n"
}

/// The object of a `BOOKMARK` event: an empty Node carrying only the resourceVersion, with the
/// zero values Go's serialisation leaves in (`creationTimestamp: null`, empty nodeInfo).
pub(super) fn bookmark(resource_version: u64) -> String {
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": resource_version.to_string(), "creationTimestamp": null},
        "spec": {},
        "status": {
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                "kubeProxyVersion": "", "operatingSystem": "", "architecture": ""
            }
        }
    })
    .to_string()
}

/// The `ERROR` event's object for a watch from a resourceVersion older than the history kept.
pub(super) fn too_old(requested: u64, oldest: u64) -> String {
    status(
        410,
        "Expired",
        &format!("too old resource version: {requested} ({oldest})"),
        None,
    )
}
