//! Network namespaces knid creates (CreateNetns, KNI CreateNetwork): the request, the record, the
//! lookup of KNI DeleteNetwork, and the owner key of a KNI pod's netns.

use super::validate::Invalid;
use super::{PodRef, SandboxId};

/// A network namespace to create (CreateNetns, KNI CreateNetwork).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetnsRequest {
    /// Key of the netns: the sandbox id of CreateNetns, or [`kni_netns_owner`] of a KNI pod.
    pub owner: SandboxId,
    /// File name under `netns_dir`; `None` means `knid-<owner>`.
    pub name: Option<String>,
    /// The KNI pod it is for, when known.
    pub pod: Option<PodRef>,
    /// Pod labels (recorded).
    pub labels: std::collections::BTreeMap<String, String>,
    /// Pod annotations (recorded).
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// A network namespace knid created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetnsInfo {
    /// Key of the netns (see [`NetnsRequest::owner`]).
    pub owner: String,
    /// Path of the bind mount.
    pub path: std::path::PathBuf,
    /// nsfs inode of the namespace.
    pub inode: u64,
    /// Whether this call created it (false for a repeat).
    pub created: bool,
    /// The sandbox attached in it, when linked (KNI AttachInterface); the owner for CreateNetns.
    pub sandbox_id: String,
    /// The KNI pod it was created for, if any.
    pub pod: Option<PodRef>,
}

/// How to find the netns a KNI DeleteNetwork means: the first of these that names a recorded
/// netns wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetnsLookup {
    /// A sandbox id: the owner, or the sandbox linked to the netns.
    pub sandbox_id: Option<String>,
    /// The netns path.
    pub path: Option<std::path::PathBuf>,
    /// Pod (namespace, name): matches only when exactly one recorded netns has it.
    pub pod: Option<(String, String)>,
}

/// The owner key of the netns of a KNI pod: `kni-<uid>`, or `kni-<namespace>.<name>` without a
/// uid. Errors name the KNI field at fault.
pub fn kni_netns_owner(
    uid: &str,
    namespace: &str,
    name: &str,
) -> Result<SandboxId, crate::error::Error> {
    let key = if uid.is_empty() {
        if namespace.is_empty() || name.is_empty() {
            return Err(Invalid::new("uid, or both namespace and name, must be set").at("uid"));
        }
        format!("kni-{namespace}.{name}")
    } else {
        format!("kni-{uid}")
    };
    SandboxId::parse(&key).map_err(|e| e.at(if uid.is_empty() { "name" } else { "uid" }))
}
