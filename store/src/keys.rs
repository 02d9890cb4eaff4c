//! Tree names and key layouts.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};

/// Tree of store-wide values.
pub(crate) const META: &str = "meta";
/// `meta` key of the schema version (u32, big-endian).
pub(crate) const META_SCHEMA: &str = "schema";
/// `meta` key of the boot id the records were written under.
pub(crate) const META_BOOT_ID: &str = "boot_id";
/// `meta` key of the store's id: random, written on the first open, never changed.
pub(crate) const META_STORE_ID: &str = "store_id";
/// `meta` key of cluster mode's recorded state (a `ClusterRecord`).
pub(crate) const META_CLUSTER: &str = "cluster";
/// `meta` key of the last known NetworkPolicy objects (a `PolicyRecord`).
pub(crate) const META_POLICY: &str = "policy";
/// `meta` key present (empty value) while a detach's kernel work may have run ahead of its
/// Detaching marks' flush: written durably before the first such detach, removed by a clean
/// shutdown (see [`crate::Store::record_detach_overlap`]).
pub(crate) const META_DETACH_OVERLAP: &str = "detach_overlap";
/// Tree of sandbox records, keyed by sandbox id.
pub(crate) const SANDBOXES: &str = "sandboxes";
/// Tree of attachment records, keyed by `sandbox_id/ifname`.
pub(crate) const ATTACHMENTS: &str = "attachments";
/// Tree of knid-created network namespaces, keyed by owner (see `NetnsRecord`).
pub(crate) const NETNS: &str = "netns";
/// Tree of registered extensions, keyed by name.
pub(crate) const EXTENSIONS: &str = "extensions";
/// Tree of the subnets each network last applied, keyed by network name (schema 2).
pub(crate) const NETWORKS: &str = "networks";
/// Tree of the marks ahead of the round-robin cursors, keyed by `<network>/4` or `<network>/6`.
pub(crate) const IPAM_CURSOR: &str = "ipam_cursor";
/// Prefix of the per-network reservation trees.
pub(crate) const IPAM_PREFIX: &str = "ipam/";
/// Names the `ipam` trees in errors (their real names vary per network).
pub(crate) const IPAM: &str = "ipam";
/// Separator of composite keys; never part of an id.
const SEP: char = '/';
/// [`SEP`], one byte in UTF-8.
const SEP_BYTE: u8 = b'/';

/// Refuses ids that would break the `a/b` key layout or prefix scans.
pub(crate) fn check_id(what: &'static str, id: &str) -> Result<()> {
    if id.is_empty() || id.contains(SEP) {
        return Err(Error::InvalidKey {
            what,
            key: id.to_owned(),
        });
    }
    Ok(())
}

/// Key of one attachment.
pub(crate) fn attachment_key(sandbox_id: &str, ifname: &str) -> String {
    format!("{sandbox_id}{SEP}{ifname}")
}

/// Whether `key` splits into a sandbox id and an ifname (see [`split_attachment_key`]).
pub(crate) fn has_separator(key: &[u8]) -> bool {
    key.contains(&SEP_BYTE)
}

/// Whether `key` is the attachment key of (`sandbox_id`, `ifname`), without building it, and
/// the sandbox id one [`check_id`] takes (a prefix scan of another id never finds it).
pub(crate) fn is_attachment_key(key: &[u8], sandbox_id: &str, ifname: &str) -> bool {
    let (id, ifname) = (sandbox_id.as_bytes(), ifname.as_bytes());
    !id.is_empty()
        && !has_separator(id)
        && key.len() == id.len() + 1 + ifname.len()
        && key.starts_with(id)
        && key.ends_with(ifname)
        && key[id.len()] == SEP_BYTE
}

/// The (sandbox id, ifname) of an attachment key; `None` without the separator.
pub(crate) fn split_attachment_key(key: &str) -> Option<(&str, &str)> {
    key.split_once(SEP)
}

/// Prefix shared by exactly the attachments of one sandbox (the separator keeps "a" from matching "ab").
pub(crate) fn attachment_prefix(sandbox_id: &str) -> String {
    format!("{sandbox_id}{SEP}")
}

/// Name of the reservation tree of `network`.
pub(crate) fn ipam_tree(network: &str) -> String {
    format!("{IPAM_PREFIX}{network}")
}

/// How a reservation is named in errors (`<network>/<address>`): its tree and key together.
pub(crate) fn ipam_key(network: &str, addr: IpAddr) -> String {
    format!("{network}{SEP}{addr}")
}

/// Key of the cursor's mark of `network` for one address family.
pub(crate) fn cursor_key(network: &str, ipv6: bool) -> String {
    format!("{network}{SEP}{}", if ipv6 { 6 } else { 4 })
}

/// Address octets: 4 bytes for IPv4, 16 for IPv6, so keys sort numerically within a family.
pub(crate) fn addr_key(addr: IpAddr) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// Inverse of [`addr_key`]; `None` for any other length.
pub(crate) fn addr_from_key(bytes: &[u8]) -> Option<IpAddr> {
    if let Ok(octets) = <[u8; 4]>::try_from(bytes) {
        return Some(IpAddr::V4(Ipv4Addr::from(octets)));
    }
    if let Ok(octets) = <[u8; 16]>::try_from(bytes) {
        return Some(IpAddr::V6(Ipv6Addr::from(octets)));
    }
    None
}

#[cfg(test)]
mod tests;
