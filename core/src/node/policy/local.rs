//! The pods knid attached on this node, as policy sees them: the pod identity and labels each
//! attach carried, and the addresses of its attachments, read from the store.

use std::collections::HashMap;
use std::net::IpAddr;

use knid_store::Store;

use super::compile::LocalPod;
use crate::error::Result;
use crate::records::corrupt;

/// Every sandbox with a pod name and at least one address. An attachment still being set up
/// counts: its pod is isolated before its first packet.
pub fn pods(store: &Store) -> Result<Vec<LocalPod>> {
    let mut ips: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for att in corrupt::all_attachments(store)?.usable {
        let list = ips.entry(att.sandbox_id.clone()).or_default();
        for ip in &att.ips {
            let addr = ip.address.split('/').next().unwrap_or_default();
            if let Ok(addr) = addr.parse::<IpAddr>() {
                if !list.contains(&addr) {
                    list.push(addr);
                }
            }
        }
    }
    let mut out = Vec::new();
    for sandbox in corrupt::sandboxes(store)?.usable {
        let pod = sandbox.pod.as_ref();
        let (Some(namespace), Some(name)) = (
            pod.map(|p| p.namespace.clone()).filter(|n| !n.is_empty()),
            pod.map(|p| p.name.clone()).filter(|n| !n.is_empty()),
        ) else {
            continue;
        };
        let Some(addrs) = ips.remove(&sandbox.id).filter(|a| !a.is_empty()) else {
            continue;
        };
        out.push(LocalPod {
            sandbox: sandbox.id.clone(),
            key: (namespace, name),
            labels: sandbox.labels.into_iter().collect(),
            ips: addrs,
        });
    }
    Ok(out)
}
