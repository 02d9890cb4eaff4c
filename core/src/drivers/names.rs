//! Deterministic host-side names and random octets.
//!
//! Host names derive from (sandbox id, ifname) so that recovery can find a link even when knid died
//! between the kernel call and the next store write (docs/architecture.md#the-attachment-lifecycle-attach--detach--gone).

/// Prefix of every host-side link knid creates; the reconciler recognises orphans by it.
pub const HOST_LINK_PREFIX: &str = "kn";

/// FNV-1a, 64 bit: stable across releases and platforms, unlike `DefaultHasher`.
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            // A separator that cannot occur in ids or ifnames keeps ("a","bc") apart from ("ab","c").
            hash ^= u64::from(b'/');
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        for byte in part.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The host end of a veth for (sandbox, ifname): `kn` + 10 hex digits (12 bytes, under IFNAMSIZ).
pub fn host_ifname(sandbox_id: &str, ifname: &str) -> String {
    let hash = stable_hash(&[sandbox_id, ifname]);
    format!("{HOST_LINK_PREFIX}{:010x}", hash >> 24)
}

/// The IFB that shapes what the interface (sandbox, ifname) sends: of [`host_ifname`]'s form
/// (`kn` + 10 hex digits), so the link sweeps know it as knid's.
pub fn ifb_ifname(sandbox_id: &str, ifname: &str) -> String {
    let hash = stable_hash(&["ifb", sandbox_id, ifname]);
    format!("{HOST_LINK_PREFIX}{:010x}", hash >> 24)
}

/// The tap beside interface `ifname` in a VM sandbox's netns: `kt` + 10 hex digits.
pub fn tap_ifname(sandbox_id: &str, ifname: &str) -> String {
    let hash = stable_hash(&["tap", sandbox_id, ifname]);
    format!("kt{:010x}", hash >> 24)
}

/// The link group the veth host ends of the store whose mark is `mark` are created in, until
/// their attach completes (`drivers::mark`): 32-bit FNV-1a of the mark with the top bit set, so
/// two stores on a node differ (but for a 2^-31 chance) and it is never 0 nor knid's default
/// `reaper_group`.
pub fn attaching_group(mark: &str) -> u32 {
    let hash = mark.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    hash | 0x8000_0000
}

/// What a detached veth's pod end is renamed to until the reaper deletes it, freeing its name in
/// the pod's netns: `kx` + 10 hex digits, derived from its host end's name.
pub fn retired_pod_ifname(host_ifname: &str) -> String {
    let hash = stable_hash(&["retired", host_ifname]);
    format!("kx{:010x}", hash >> 24)
}

/// A fixed, locally administered unicast MAC for a host link, derived from its name: routed pods
/// point static neighbour entries for their gateways at it.
pub fn host_mac(host_ifname: &str) -> crate::model::MacAddr {
    let hash = stable_hash(&["host-mac", host_ifname]).to_be_bytes();
    crate::model::MacAddr([0x02, hash[0], hash[1], hash[2], hash[3], hash[4]])
}

/// Whether `name` has the form of [`host_ifname`]'s names (`kn` + 10 lower-case hex digits),
/// the reconciler's test for knid's links. The bridge `knid0` shares the prefix, not the form.
pub fn is_host_ifname(name: &str) -> bool {
    name.len() == HOST_LINK_PREFIX.len() + 10
        && name.starts_with(HOST_LINK_PREFIX)
        && name[HOST_LINK_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests;
