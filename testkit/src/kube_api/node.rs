//! Nodes as kube-apiserver serves them: the realistic object a kubelet would have registered,
//! from the little a test says of it.

use serde_json::{json, Map, Value};

use super::cluster::Assigned;

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

/// The fields clients patch, which a test's update of the spec keeps.
const PATCHED: [(&str, &str); 3] = [
    ("status", "conditions"),
    ("spec", "taints"),
    ("metadata", "annotations"),
];

/// A `Node` as `GET /api/v1/nodes/{name}` returns it. The kubelet last posted its status at
/// the time of this change; what clients patched into `previous` is kept.
pub(super) fn render(spec: &NodeSpec, meta: &Assigned, previous: Option<&Value>) -> Value {
    let mut node = fresh(spec, meta);
    if let Some(previous) = previous {
        for (outer, inner) in PATCHED {
            if let Some(value) = previous[outer].get(inner) {
                node[outer][inner] = value.clone();
            }
        }
    }
    node
}

fn fresh(spec: &NodeSpec, meta: &Assigned) -> Value {
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
            "lastHeartbeatTime": meta.now,
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
                "time": meta.now,
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
}

/// The `InternalIP` addresses of a stored Node, in order.
pub(super) fn internal_ips(node: &Value) -> Vec<String> {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|address| address["type"] == "InternalIP")
        .filter_map(|address| address["address"].as_str().map(String::from))
        .collect()
}
