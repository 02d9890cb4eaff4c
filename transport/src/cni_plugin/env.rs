//! The CNI environment (the CNI spec's `CNI_*` variables): the verb and, per verb, the variables
//! it requires, each checked by the rule the spec or knid's API sets for it. A bad or missing
//! variable is error 4 naming it.

use knid_core::cni::error::INVALID_ENV;
use knid_core::cni::CniError;
use knid_core::validate;

/// A CNI verb (`CNI_COMMAND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Create the attachment.
    Add,
    /// Remove it (idempotent).
    Del,
    /// Verify it (0.4.0 and later).
    Check,
    /// Whether ADDs can be serviced (1.1.0).
    Status,
    /// Remove every attachment not in the valid list (1.1.0).
    Gc,
    /// The versions this plugin speaks.
    Version,
}

impl Command {
    /// Reads `CNI_COMMAND`.
    pub fn from_env(env: &impl Fn(&str) -> Option<String>) -> Result<Self, CniError> {
        let value = env("CNI_COMMAND")
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid("CNI_COMMAND", "missing"))?;
        Ok(match value.as_str() {
            "ADD" => Self::Add,
            "DEL" => Self::Del,
            "CHECK" => Self::Check,
            "STATUS" => Self::Status,
            "GC" => Self::Gc,
            "VERSION" => Self::Version,
            other => {
                return Err(invalid(
                    "CNI_COMMAND",
                    format!("{other:?} is not one of ADD, DEL, CHECK, STATUS, GC, VERSION"),
                ))
            }
        })
    }
}

/// The pod a sandbox belongs to, from the Kubernetes keys of `CNI_ARGS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodArgs {
    /// `K8S_POD_NAME`.
    pub name: String,
    /// `K8S_POD_NAMESPACE`.
    pub namespace: String,
    /// `K8S_POD_UID`.
    pub uid: String,
}

/// What ADD, DEL and CHECK are about: one interface of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// `CNI_CONTAINERID`: knid's sandbox id.
    pub container_id: String,
    /// `CNI_IFNAME`: the pod-side interface name.
    pub ifname: String,
    /// `CNI_NETNS`: required for ADD and CHECK, optional for DEL (the netns may be gone).
    pub netns: Option<String>,
    /// From `CNI_ARGS`.
    pub pod: PodArgs,
}

impl Attachment {
    /// Reads and checks the variables of ADD/CHECK (`netns_required`) or DEL.
    pub fn from_env(
        env: &impl Fn(&str) -> Option<String>,
        netns_required: bool,
    ) -> Result<Self, CniError> {
        let container_id = required(env, "CNI_CONTAINERID")?;
        // The CNI container-id rule, bounded in length as knid's sandbox ids are.
        validate::sandbox_id(&container_id)
            .map_err(|e| invalid("CNI_CONTAINERID", format!("{container_id:?} {}", e.rule)))?;
        let ifname = required(env, "CNI_IFNAME")?;
        validate::ifname(&ifname)
            .map_err(|e| invalid("CNI_IFNAME", format!("{ifname:?} {}", e.rule)))?;
        let netns = match env("CNI_NETNS").filter(|v| !v.is_empty()) {
            Some(path) if !path.starts_with('/') => {
                return Err(invalid(
                    "CNI_NETNS",
                    format!("{path:?} must be an absolute path"),
                ))
            }
            Some(path) => Some(path),
            None if netns_required => return Err(invalid("CNI_NETNS", "missing")),
            None => None,
        };
        let pod = pod_args(env("CNI_ARGS").as_deref().unwrap_or_default())?;
        Ok(Self {
            container_id,
            ifname,
            netns,
            pod,
        })
    }
}

fn invalid(var: &str, rule: impl std::fmt::Display) -> CniError {
    CniError::new(INVALID_ENV, format!("invalid {var}: {rule}"))
}

fn required(env: &impl Fn(&str) -> Option<String>, var: &str) -> Result<String, CniError> {
    env(var)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid(var, "missing"))
}

/// Parses `K=V;K=V`. Keys other than the pod's are ignored whether or not `IgnoreUnknown` is
/// set: runtimes add keys of their own, and refusing them would fail a pod for nothing.
fn pod_args(text: &str) -> Result<PodArgs, CniError> {
    let mut pod = PodArgs::default();
    for pair in text.split(';').filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid("CNI_ARGS", format!("{pair:?} is not KEY=VALUE")))?;
        match key {
            "K8S_POD_NAME" => pod.name = value.to_owned(),
            "K8S_POD_NAMESPACE" => pod.namespace = value.to_owned(),
            "K8S_POD_UID" => pod.uid = value.to_owned(),
            _ => {}
        }
    }
    Ok(pod)
}

#[cfg(test)]
mod tests;
