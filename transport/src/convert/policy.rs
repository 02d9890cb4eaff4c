//! ListPolicies and ExplainPolicy: the questions checked for their form before knid looks
//! anything up (so a bad `port` is named even where NetworkPolicy is not enforced), and the
//! core's listing and verdict encoded.

use std::net::IpAddr;

use knid_core::policy::objects::{protocol_name, Key};
use knid_core::policy::Side;
use knid_core::runtime::{parse_pod, parse_port};
use knid_core::validate::{self, Invalid};
use knid_core::{Error, KernelCheck, PolicyEntry, PolicyListing, PolicyVerdict, Resolved};
use protobuf::{EnumOrUnknown, MessageField};

use crate::pb;

/// The flow an ExplainPolicy request asks about, as the runtime takes it: each end
/// `namespace/name` or an address, and the port (`80/tcp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowQuestion {
    /// The source.
    pub from: String,
    /// The destination.
    pub to: String,
    /// The port and protocol.
    pub port: String,
}

/// Validates a ListPolicies request: the pod, when one is given, is `namespace/name`.
pub fn list_policies_request(req: &pb::ListPoliciesRequest) -> Result<Option<String>, Error> {
    if req.pod.is_empty() {
        return Ok(None);
    }
    pod_key(&req.pod, "pod")?;
    Ok(Some(req.pod.clone()))
}

/// Validates an ExplainPolicy request: each end an address or `namespace/name`, the port a
/// port with an optional protocol. The error names `from`, `to` or `port`.
pub fn explain_policy_request(req: &pb::ExplainPolicyRequest) -> Result<FlowQuestion, Error> {
    flow_end_text(&req.from, "from")?;
    flow_end_text(&req.to, "to")?;
    validate::text(&req.port).map_err(|e| e.at("port"))?;
    parse_port(&req.port)?;
    Ok(FlowQuestion {
        from: req.from.clone(),
        to: req.to.clone(),
        port: req.port.clone(),
    })
}

/// An end of a flow: an address, or `namespace/name`.
fn flow_end_text(text: &str, field: &str) -> Result<(), Error> {
    if text.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    if parse_pod(text, field).is_err() {
        return Err(Invalid::new(format!(
            "{text:?} is neither namespace/name nor an IP address"
        ))
        .at(field));
    }
    pod_key(text, field).map(drop)
}

/// `namespace/name`, each part a bounded text; the error names `field`.
fn pod_key(text: &str, field: &str) -> Result<Key, Error> {
    let key = parse_pod(text, field)?;
    validate::text(&key.0).map_err(|e| e.at(field))?;
    validate::text(&key.1).map_err(|e| e.at(field))?;
    Ok(key)
}

/// Encodes the ListPolicies response.
pub fn list_policies_response(listing: &PolicyListing) -> pb::ListPoliciesResponse {
    let (policies, namespaces, pods) = listing.counts;
    let mut out = pb::ListPoliciesResponse::new();
    out.synced = listing.synced;
    out.error = listing.error.clone().unwrap_or_default();
    out.applied_at = listing.applied_at_ms;
    out.policies_known = count(policies);
    out.namespaces_known = count(namespaces);
    out.pods_known = count(pods);
    out.policies = listing.policies.iter().map(policy_summary).collect();
    out.refused = listing
        .refused
        .iter()
        .map(|(key, reason)| {
            let mut refused = pb::RefusedPolicy::new();
            refused.policy = MessageField::some(name(key));
            refused.reason = reason.clone();
            refused
        })
        .collect();
    let (check, detail) = match &listing.kernel {
        KernelCheck::Matches => (pb::PolicyTableCheck::MATCHES, ""),
        KernelCheck::NotInstalled => (pb::PolicyTableCheck::NOT_INSTALLED, ""),
        KernelCheck::Differs(why) => (pb::PolicyTableCheck::DIFFERS, why.as_str()),
        KernelCheck::Unreadable(why) => (pb::PolicyTableCheck::UNREADABLE, why.as_str()),
    };
    out.kernel = check.into();
    out.kernel_detail = detail.to_owned();
    out
}

fn policy_summary(entry: &PolicyEntry) -> pb::PolicySummary {
    let mut out = pb::PolicySummary::new();
    out.policy = MessageField::some(name(&entry.key));
    out.selector = entry.selector.clone();
    out.isolates_ingress = entry.ingress_rules.is_some();
    out.ingress_rules = entry.ingress_rules.map_or(0, rules);
    out.isolates_egress = entry.egress_rules.is_some();
    out.egress_rules = entry.egress_rules.map_or(0, rules);
    // The core lists them by sandbox; people look for a pod by its name.
    let mut selects = entry.selects.clone();
    selects.sort();
    out.selects = selects.iter().map(name).collect();
    out.refused_rules = entry.refused_rules.clone();
    out
}

/// Encodes the ExplainPolicy response.
pub fn explain_policy_response(verdict: &PolicyVerdict) -> pb::ExplainPolicyResponse {
    let mut out = pb::ExplainPolicyResponse::new();
    out.from = MessageField::some(flow_end(&verdict.from));
    out.to = MessageField::some(flow_end(&verdict.to));
    out.protocol = protocol_name(verdict.protocol).to_ascii_lowercase();
    out.port = u32::from(verdict.port);
    out.egress = MessageField::some(side(&verdict.explanation.egress));
    out.ingress = MessageField::some(side(&verdict.explanation.ingress));
    out.allowed = verdict.explanation.allowed;
    out
}

fn flow_end(end: &Resolved) -> pb::FlowEnd {
    let mut out = pb::FlowEnd::new();
    out.pod = end.pod.as_ref().map(name).into();
    out.ip = end.ip.to_string();
    out.local = end.local;
    out.node = end.node.clone().unwrap_or_default();
    out
}

fn side(side: &Side) -> pb::PolicySide {
    let mut out = pb::PolicySide::new();
    let decision = match side {
        Side::NotAPod => pb::PolicyDecision::NOT_A_POD,
        Side::NotIsolated => pb::PolicyDecision::NOT_ISOLATED,
        Side::Allowed { policy, rule } => {
            out.policy = MessageField::some(name(policy));
            out.rule = rules(*rule);
            pb::PolicyDecision::ALLOWED
        }
        Side::Denied { by } => {
            out.isolated_by = by.iter().map(name).collect();
            pb::PolicyDecision::DENIED
        }
    };
    out.decision = EnumOrUnknown::new(decision);
    out
}

fn name(key: &Key) -> pb::NamespacedName {
    let mut out = pb::NamespacedName::new();
    out.namespace = key.0.clone();
    out.name = key.1.clone();
    out
}

/// A rule count or index; a policy holds far fewer than 2^32 rules.
fn rules(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
