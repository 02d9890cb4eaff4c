//! The validated names a request is keyed by: sandbox ids, interface names and MAC addresses.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};

use super::validate::{self, Invalid};

/// A sandbox id: 1–128 chars of `[A-Za-z0-9_.-]`, starting alphanumeric (the CNI container-id rule).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SandboxId(pub(super) String);

impl SandboxId {
    /// Validates `value` as a sandbox id.
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        validate::sandbox_id(value).map(|()| Self(value.to_owned()))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Linux interface name: 1–15 bytes, no `/`, `:` or whitespace, not `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IfName(pub(super) String);

impl IfName {
    /// Validates `value` as an interface name.
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        validate::ifname(value).map(|()| Self(value.to_owned()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A unicast Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// Parses `aa:bb:cc:dd:ee:ff` (or `-` separated) and rejects multicast and all-zero addresses.
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        validate::mac(value).map(Self)
    }

    /// The all-zero address: not known yet (a cni interface before its plugins ran).
    pub const UNKNOWN: MacAddr = MacAddr([0; 6]);

    /// A random locally administered unicast address (first octet `x2`, `x6`, `xA` or `xE`).
    pub fn random_local() -> Self {
        let mut octets = random_bytes::<6>();
        octets[0] = (octets[0] & 0xfc) | 0x02;
        Self(octets)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            o[0], o[1], o[2], o[3], o[4], o[5]
        )
    }
}

/// `N` unpredictable bytes. Keyed SipHash from std's per-process random keys; good enough for MAC
/// addresses, not for secrets.
fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_usize(i);
        let value = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&value[..chunk.len()]);
    }
    out
}

#[cfg(test)]
mod tests;
