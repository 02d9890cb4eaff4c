//! Pods as kube-apiserver serves them once the scheduler placed them and the kubelet runs
//! them: the realistic object (defaults included: a hostNetwork pod's ports get `hostPort`),
//! from the little a test says of it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::{json, Map, Value};

use super::cluster::Assigned;
use super::field_errors::{invalid, not_supported, quoted};
use super::names;

/// The one container's name.
const CONTAINER: &str = "app";
/// The one container's image.
const IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.47";

/// A running Pod as a test describes it; the server fills in the rest of a realistic object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSpec {
    /// `metadata.namespace`: a namespace that exists.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.nodeName`; empty for none (then no `status.hostIP` either).
    pub node: String,
    /// `status.podIPs` (and `status.podIP`, the first), at most one per family; a hostNetwork
    /// pod's are its node's.
    pub ips: Vec<String>,
    /// The `ports` of the pod's one container.
    pub ports: Vec<ContainerPort>,
    /// `spec.hostNetwork`.
    pub host_network: bool,
}

/// A container port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerPort {
    /// `name`: an IANA service name, unique in the pod, which policies may name.
    pub name: Option<String>,
    /// `containerPort`.
    pub port: u16,
    /// `protocol`: `TCP`, `UDP` or `SCTP`; empty for the default, `TCP`.
    pub protocol: String,
}

impl ContainerPort {
    /// An unnamed TCP port.
    pub fn tcp(port: u16) -> ContainerPort {
        ContainerPort {
            name: None,
            port,
            protocol: String::new(),
        }
    }

    fn protocol(&self) -> &str {
        if self.protocol.is_empty() {
            "TCP"
        } else {
            &self.protocol
        }
    }
}

/// What is wrong with `spec`, as field errors.
pub(super) fn problems(spec: &PodSpec) -> Vec<String> {
    let mut errors = Vec::new();
    for problem in names::dns_subdomain(&spec.name) {
        errors.push(invalid("metadata.name", &quoted(&spec.name), &problem));
    }
    for problem in names::dns_label(&spec.namespace) {
        errors.push(invalid(
            "metadata.namespace",
            &quoted(&spec.namespace),
            &problem,
        ));
    }
    errors.extend(names::labels("metadata.labels", &spec.labels));
    if !spec.node.is_empty() {
        for problem in names::dns_subdomain(&spec.node) {
            errors.push(invalid("spec.nodeName", &quoted(&spec.node), &problem));
        }
    }
    let mut port_names = BTreeSet::new();
    for (i, port) in spec.ports.iter().enumerate() {
        let path = format!("spec.containers[0].ports[{i}]");
        if let Some(name) = &port.name {
            for problem in names::port_name(name) {
                errors.push(invalid(&format!("{path}.name"), &quoted(name), &problem));
            }
            if !port_names.insert(name) {
                errors.push(format!("{path}.name: Duplicate value: {}", quoted(name)));
            }
        }
        for problem in names::port_number(i64::from(port.port)) {
            errors.push(invalid(&format!("{path}.containerPort"), "0", &problem));
        }
        if !["TCP", "UDP", "SCTP"].contains(&port.protocol()) {
            errors.push(not_supported(
                &format!("{path}.protocol"),
                &quoted(&port.protocol),
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
    let mut families = BTreeSet::new();
    for (i, ip) in spec.ips.iter().enumerate() {
        match ip.parse::<IpAddr>() {
            Ok(parsed) if families.insert(parsed.is_ipv4()) => {}
            Ok(_) => errors.push(invalid(
                "status.podIPs",
                &quoted(ip),
                "may specify no more than one IP for each IP family",
            )),
            Err(_) => errors.push(invalid(
                &format!("status.podIPs[{i}].ip"),
                &quoted(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            )),
        }
    }
    errors
}

/// The Pod of `spec`, running on a node whose addresses are `host_ips`.
pub(super) fn render(spec: &PodSpec, host_ips: &[String], meta: &Assigned) -> Value {
    let mut metadata = json!({
        "name": spec.name,
        "namespace": spec.namespace,
        "uid": meta.uid,
        "resourceVersion": meta.resource_version.to_string(),
        "creationTimestamp": meta.created,
    });
    if !spec.labels.is_empty() {
        metadata["labels"] = json!(spec.labels);
    }
    let mut pod_spec = json!({
        "containers": [container(spec)],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300}
        ],
        "priority": 0,
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority"
    });
    if !spec.node.is_empty() {
        pod_spec["nodeName"] = json!(spec.node);
    }
    if spec.host_network {
        pod_spec["hostNetwork"] = json!(true);
    }
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": metadata,
        "spec": pod_spec,
        "status": status(spec, host_ips, meta),
    })
}

fn container(spec: &PodSpec) -> Value {
    let mut container = json!({
        "name": CONTAINER,
        "image": IMAGE,
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"
    });
    let ports: Vec<Value> = spec
        .ports
        .iter()
        .map(|port| {
            let mut out = Map::new();
            if let Some(name) = &port.name {
                out.insert("name".into(), json!(name));
            }
            // The real defaulting: on the host's network, a port is its host port too.
            if spec.host_network {
                out.insert("hostPort".into(), json!(port.port));
            }
            out.insert("containerPort".into(), json!(port.port));
            out.insert("protocol".into(), json!(port.protocol()));
            Value::Object(out)
        })
        .collect();
    if !ports.is_empty() {
        container["ports"] = Value::Array(ports);
    }
    container
}

fn status(spec: &PodSpec, host_ips: &[String], meta: &Assigned) -> Value {
    let condition = |kind: &str| {
        json!({"type": kind, "status": "True", "lastProbeTime": null,
               "lastTransitionTime": meta.created})
    };
    let container_id: String = meta.uid.replace('-', "").repeat(2);
    let mut status = json!({
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("Ready"),
            condition("ContainersReady"),
            condition("PodScheduled")
        ],
        "startTime": meta.created,
        "containerStatuses": [{
            "name": CONTAINER,
            "state": {"running": {"startedAt": meta.created}},
            "lastState": {},
            "ready": true,
            "restartCount": 0,
            "image": IMAGE,
            "imageID": "registry.k8s.io/e2e-test-images/agnhost@sha256:\
                        7e8bdd271312fd25fc5ff5a8f04727be84044eb3d7d8d03611972a6752e2e11e",
            "containerID": format!("containerd://{container_id}"),
            "started": true
        }],
        "qosClass": "BestEffort"
    });
    let ips = |ips: &[String]| -> Value { ips.iter().map(|ip| json!({"ip": ip})).collect() };
    if let Some(first) = host_ips.first() {
        status["hostIP"] = json!(first);
        status["hostIPs"] = ips(host_ips);
    }
    if let Some(first) = spec.ips.first() {
        status["podIP"] = json!(first);
        status["podIPs"] = ips(&spec.ips);
    }
    status
}
