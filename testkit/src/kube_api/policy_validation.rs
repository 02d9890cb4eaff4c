//! kube-apiserver's `ValidateNetworkPolicy`, on a decoded and defaulted spec: what it refuses,
//! each as the field error it words. What it lets through is let through here too: a repeated
//! policy type (two at most), a spec without `podSelector` (every pod).

use std::str::FromStr;

use ipnet::IpNet;

use super::field_errors::{forbidden, invalid, not_supported, quoted, required};
use super::names;
use super::network_policy::{IpBlock, Peer, PolicySpec, Port, PortValue, Rule, Selector};

const INVALID_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// What is wrong with the NetworkPolicy `namespace/name` of `spec`; empty when nothing is.
pub(super) fn validate(namespace: &str, name: &str, spec: &PolicySpec) -> Vec<String> {
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    for problem in names::dns_subdomain(name)
        .into_iter()
        .filter(|_| !name.is_empty())
    {
        errors.push(invalid("metadata.name", &quoted(name), &problem));
    }
    if namespace.is_empty() {
        errors.push(required("metadata.namespace", ""));
    }
    for problem in names::dns_label(namespace)
        .into_iter()
        .filter(|_| !namespace.is_empty())
    {
        errors.push(invalid("metadata.namespace", &quoted(namespace), &problem));
    }
    selector(&mut errors, "spec.podSelector", &spec.pod_selector);
    rules(&mut errors, "spec.ingress", "from", &spec.ingress);
    rules(&mut errors, "spec.egress", "to", &spec.egress);
    policy_types(&mut errors, &spec.policy_types);
    errors
}

fn rules(errors: &mut Vec<String>, path: &str, peers: &str, rules: &[Rule]) {
    for (i, rule) in rules.iter().enumerate() {
        for (j, each) in rule.ports.iter().enumerate() {
            port(errors, &format!("{path}[{i}].ports[{j}]"), each);
        }
        for (j, each) in rule.peers.iter().enumerate() {
            peer(errors, &format!("{path}[{i}].{peers}[{j}]"), each);
        }
    }
}

fn port(errors: &mut Vec<String>, path: &str, port: &Port) {
    if let Some(protocol) = &port.protocol {
        if !["TCP", "UDP", "SCTP"].contains(&protocol.as_str()) {
            errors.push(not_supported(
                &format!("{path}.protocol"),
                &quoted(protocol),
                &["TCP", "UDP", "SCTP"],
            ));
        }
    }
    let end_port = format!("{path}.endPort");
    match &port.port {
        Some(PortValue::Number(number)) => {
            for problem in names::port_number(*number) {
                errors.push(invalid(
                    &format!("{path}.port"),
                    &number.to_string(),
                    &problem,
                ));
            }
            if let Some(end) = port.end_port {
                if end < *number {
                    let detail = "must be greater than or equal to `port`";
                    errors.push(invalid(&end_port, &end.to_string(), detail));
                }
                for problem in names::port_number(end) {
                    errors.push(invalid(&end_port, &end.to_string(), &problem));
                }
            }
        }
        Some(PortValue::Name(name)) => {
            if let Some(end) = port.end_port {
                let detail = "may not be specified when `port` is non-numeric";
                errors.push(invalid(&end_port, &end.to_string(), detail));
            }
            for problem in names::port_name(name) {
                errors.push(invalid(&format!("{path}.port"), &quoted(name), &problem));
            }
        }
        None => {
            if let Some(end) = port.end_port {
                let detail = "may not be specified when `port` is not specified";
                errors.push(invalid(&end_port, &end.to_string(), detail));
            }
        }
    }
}

fn peer(errors: &mut Vec<String>, path: &str, peer: &Peer) {
    let mut kinds = 0;
    if let Some(pods) = &peer.pod_selector {
        kinds += 1;
        selector(errors, &format!("{path}.podSelector"), pods);
    }
    if let Some(namespaces) = &peer.namespace_selector {
        kinds += 1;
        selector(errors, &format!("{path}.namespaceSelector"), namespaces);
    }
    if let Some(block) = &peer.ip_block {
        kinds += 1;
        ip_block(errors, &format!("{path}.ipBlock"), block);
    }
    if kinds == 0 {
        errors.push(required(path, "must specify a peer"));
    } else if kinds > 1 && peer.ip_block.is_some() {
        errors.push(forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

/// apimachinery's `ValidateLabelSelector`.
fn selector(errors: &mut Vec<String>, path: &str, selector: &Selector) {
    errors.extend(names::labels(
        &format!("{path}.matchLabels"),
        &selector.match_labels,
    ));
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let path = format!("{path}.matchExpressions[{i}]");
        let values = format!("{path}.values");
        match requirement.operator.as_str() {
            "In" | "NotIn" if requirement.values.is_empty() => errors.push(required(
                &values,
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !requirement.values.is_empty() => {
                errors.push(forbidden(
                    &values,
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(invalid(
                &format!("{path}.operator"),
                &quoted(other),
                "not a valid selector operator",
            )),
        }
        for problem in names::label_key(&requirement.key) {
            errors.push(invalid(
                &format!("{path}.key"),
                &quoted(&requirement.key),
                &problem,
            ));
        }
        for (j, value) in requirement.values.iter().enumerate() {
            for problem in names::label_value(value) {
                errors.push(invalid(&format!("{values}[{j}]"), &quoted(value), &problem));
            }
        }
    }
}

fn ip_block(errors: &mut Vec<String>, path: &str, block: &IpBlock) {
    let cidr_path = format!("{path}.cidr");
    if block.cidr.is_empty() {
        errors.push(required(&cidr_path, ""));
        return;
    }
    let Ok(cidr) = IpNet::from_str(&block.cidr) else {
        errors.push(invalid(&cidr_path, &quoted(&block.cidr), INVALID_CIDR));
        return;
    };
    for (i, except) in block.except.iter().enumerate() {
        let except_path = format!("{path}.except[{i}]");
        let Ok(inner) = IpNet::from_str(except) else {
            errors.push(invalid(&except_path, &quoted(except), INVALID_CIDR));
            continue;
        };
        // As the real check: the except's network address inside cidr, and a longer prefix.
        if !cidr.contains(&inner.network()) || cidr.prefix_len() >= inner.prefix_len() {
            errors.push(invalid(
                &except_path,
                &quoted(except),
                "must be a strict subset of `cidr`",
            ));
        }
    }
}

fn policy_types(errors: &mut Vec<String>, types: &[String]) {
    let supported = ["Ingress", "Egress"];
    if types.len() > supported.len() {
        let listed: Vec<String> = types.iter().map(|t| quoted(t)).collect();
        errors.push(invalid(
            "spec.policyTypes",
            &format!("[]networking.PolicyType{{{}}}", listed.join(", ")),
            "may not specify more than two policyTypes",
        ));
        return;
    }
    for (i, kind) in types.iter().enumerate() {
        if !supported.contains(&kind.as_str()) {
            errors.push(not_supported(
                &format!("spec.policyTypes[{i}]"),
                &quoted(kind),
                &supported,
            ));
        }
    }
}
