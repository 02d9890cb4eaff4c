//! Namespaces as kube-apiserver serves them: the `kubernetes.io/metadata.name` label it sets
//! on every one (since 1.21, whatever the client wrote there), the `kubernetes` finalizer, and
//! the `Terminating` phase a deleted one passes through while its contents go.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::cluster::Assigned;
use super::field_errors::{invalid, quoted};
use super::names;

/// The label the server keeps equal to the namespace's name.
pub(super) const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What is wrong with a namespace called `name` labelled `labels`, as field errors.
pub(super) fn problems(name: &str, labels: &BTreeMap<String, String>) -> Vec<String> {
    let mut errors: Vec<String> = names::dns_label(name)
        .into_iter()
        .map(|problem| invalid("metadata.name", &quoted(name), &problem))
        .collect();
    errors.extend(names::labels("metadata.labels", labels));
    errors
}

/// The Namespace `name`, `Active`, with `labels` and the name label.
pub(super) fn render(name: &str, labels: &BTreeMap<String, String>, meta: &Assigned) -> Value {
    let mut labels = labels.clone();
    labels.insert(NAME_LABEL.into(), name.into());
    json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version.to_string(),
            "creationTimestamp": meta.created,
            "labels": labels,
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

/// `namespace` as deleting it leaves it until its contents are gone: a `deletionTimestamp`
/// and the `Terminating` phase.
pub(super) fn terminating(namespace: &Value, now: &str) -> Value {
    let mut namespace = namespace.clone();
    namespace["metadata"]["deletionTimestamp"] = json!(now);
    namespace["status"]["phase"] = json!("Terminating");
    namespace
}
