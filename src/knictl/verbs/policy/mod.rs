//! `knictl policy ls` ([`ls`]) and `knictl policy explain` ([`explain`]): Kubernetes
//! NetworkPolicy as knid enforces it on this node. Both exit 1 where it is not enforced (knid
//! answers Unavailable, saying why); a denied connection is an answer, so explain exits 0.

pub mod explain;
pub mod ls;

use knid_transport::pb;

/// A policy or pod as kubectl names it: `namespace/name`.
fn qualified(name: &pb::NamespacedName) -> String {
    format!("{}/{}", name.namespace, name.name)
}
