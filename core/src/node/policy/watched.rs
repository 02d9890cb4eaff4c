//! The three kinds policy lists and watches, as the reflector reads them: NetworkPolicies
//! (always, in cluster mode), Namespaces and Pods (only while a NetworkPolicy exists). Each
//! object is parsed to what policy keeps the moment it arrives; the rest is dropped.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;

use super::objects::{parse_namespace, Key, PodInfo, Policy};
use super::selector::Labels;
use crate::cluster::reflector::Resource;

/// Where NetworkPolicies are.
pub const NETWORK_POLICIES: &str = "/apis/networking.k8s.io/v1/networkpolicies";
/// Where Namespaces are.
pub const NAMESPACES: &str = "/api/v1/namespaces";
/// Where Pods are.
pub const PODS: &str = "/api/v1/pods";

/// A NetworkPolicy as read: parsed, or refused with the reason (the key, for a deletion).
#[derive(Debug, Clone)]
pub struct PolicyFact {
    /// Its namespace and name.
    pub key: Key,
    /// The policy, or why it cannot be enforced.
    pub policy: Result<Policy, String>,
}

impl Resource for NetworkPolicy {
    const PATH: &'static str = NETWORK_POLICIES;
    const WHAT: &'static str = "networkpolicies";
    type Facts = PolicyFact;

    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    fn facts(self) -> Option<PolicyFact> {
        let key = (
            self.metadata.namespace.clone()?,
            self.metadata.name.clone()?,
        );
        Some(PolicyFact {
            key,
            policy: Policy::parse(&self),
        })
    }
}

impl Resource for Namespace {
    const PATH: &'static str = NAMESPACES;
    const WHAT: &'static str = "namespaces";
    type Facts = (String, Labels);

    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    fn facts(self) -> Option<(String, Labels)> {
        parse_namespace(&self)
    }
}

impl Resource for Pod {
    const PATH: &'static str = PODS;
    const WHAT: &'static str = "pods";
    type Facts = (Key, PodInfo);

    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    fn facts(self) -> Option<(Key, PodInfo)> {
        PodInfo::parse(&self)
    }
}
