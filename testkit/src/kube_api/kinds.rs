//! The kinds the stand-in serves: where each lives in the API, what it and its list are called,
//! whether it is namespaced, and the empty object a `BOOKMARK` event of its watch carries.

use serde_json::json;

/// A resource the stand-in serves (its collection, in the API's words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Resource {
    Nodes,
    Namespaces,
    Pods,
    NetworkPolicies,
}

impl Resource {
    /// Every resource served.
    pub(super) const ALL: [Resource; 4] = [
        Resource::Nodes,
        Resource::Namespaces,
        Resource::Pods,
        Resource::NetworkPolicies,
    ];

    /// The path of its group and version: `/api/v1` for the core group.
    pub(super) fn group_version_path(self) -> &'static str {
        match self.group() {
            None => "/api/v1",
            Some(_) => "/apis/networking.k8s.io/v1",
        }
    }

    /// Its API group; `None` for the core group.
    pub(super) fn group(self) -> Option<&'static str> {
        match self {
            Resource::Nodes | Resource::Namespaces | Resource::Pods => None,
            Resource::NetworkPolicies => Some("networking.k8s.io"),
        }
    }

    /// The `apiVersion` of its objects.
    pub(super) fn api_version(self) -> &'static str {
        match self.group() {
            None => "v1",
            Some(_) => "networking.k8s.io/v1",
        }
    }

    /// The collection's name in paths: `pods`.
    pub(super) fn plural(self) -> &'static str {
        match self {
            Resource::Nodes => "nodes",
            Resource::Namespaces => "namespaces",
            Resource::Pods => "pods",
            Resource::NetworkPolicies => "networkpolicies",
        }
    }

    /// The `kind` of its objects: `Pod`.
    pub(super) fn kind(self) -> &'static str {
        match self {
            Resource::Nodes => "Node",
            Resource::Namespaces => "Namespace",
            Resource::Pods => "Pod",
            Resource::NetworkPolicies => "NetworkPolicy",
        }
    }

    /// The `kind` of its lists: `PodList`.
    pub(super) fn list_kind(self) -> &'static str {
        match self {
            Resource::Nodes => "NodeList",
            Resource::Namespaces => "NamespaceList",
            Resource::Pods => "PodList",
            Resource::NetworkPolicies => "NetworkPolicyList",
        }
    }

    /// Whether its objects live in a namespace.
    pub(super) fn namespaced(self) -> bool {
        matches!(self, Resource::Pods | Resource::NetworkPolicies)
    }

    /// How errors name it: `pods`, `networkpolicies.networking.k8s.io`.
    pub(super) fn qualified(self) -> String {
        match self.group() {
            None => self.plural().to_string(),
            Some(group) => format!("{}.{group}", self.plural()),
        }
    }

    /// The object of a `BOOKMARK` event: an empty object of the kind carrying only the
    /// resourceVersion, with the zero values Go's serialisation leaves in
    /// (`creationTimestamp: null`, a Pod's `containers: null`, a Node's empty nodeInfo).
    pub(super) fn bookmark(self, resource_version: u64) -> String {
        let mut object = json!({
            "kind": self.kind(),
            "apiVersion": self.api_version(),
            "metadata": {"resourceVersion": resource_version.to_string(), "creationTimestamp": null},
        });
        let (spec, status) = match self {
            Resource::Nodes => (
                json!({}),
                Some(json!({
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                    "nodeInfo": {
                        "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                        "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                        "kubeProxyVersion": "", "operatingSystem": "", "architecture": ""
                    }
                })),
            ),
            Resource::Namespaces => (json!({}), Some(json!({}))),
            Resource::Pods => (json!({"containers": null}), Some(json!({}))),
            // NetworkPolicy has had no status since 1.27; its podSelector is not a pointer.
            Resource::NetworkPolicies => (json!({"podSelector": {}}), None),
        };
        object["spec"] = spec;
        if let Some(status) = status {
            object["status"] = status;
        }
        object.to_string()
    }
}
