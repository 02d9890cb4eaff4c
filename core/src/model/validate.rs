//! Validation rules for every caller-supplied value (docs/security.md#validation-rules). Each rule returns an
//! [`Invalid`] describing the rule broken; the caller names the field with [`Invalid::at`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;

use crate::error::Error;

/// Longest sandbox id accepted.
pub const MAX_SANDBOX_ID_LEN: usize = 128;
/// Most interfaces in one Attach.
pub const MAX_INTERFACES: usize = 16;
/// Most labels (and, separately, annotations) on one sandbox.
pub const MAX_LABELS: usize = 64;
/// Longest label/annotation key.
pub const MAX_LABEL_KEY_LEN: usize = 253;
/// Longest label/annotation value.
pub const MAX_LABEL_VALUE_LEN: usize = 4096;
/// Longest free-form string (pod name, DNS entries, ...).
pub const MAX_TEXT_LEN: usize = 253;
/// Most DNS servers, searches or options.
pub const MAX_DNS_ENTRIES: usize = 16;
/// Most port mappings.
pub const MAX_PORT_MAPPINGS: usize = 256;
/// Longest netns path.
pub const MAX_PATH_LEN: usize = 4096;
/// Longest unix socket path: `sun_path` holds 108 bytes, NUL included.
pub const MAX_SOCKET_PATH_LEN: usize = 107;
/// Longest network or extension name.
pub const MAX_NAME_LEN: usize = 64;
/// Smallest MTU the kernel accepts for IPv4.
pub const MIN_MTU: u32 = 68;
/// Largest MTU.
pub const MAX_MTU: u32 = 65535;

/// A broken validation rule, not yet tied to a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The rule, phrased to follow the field name ("must be ...").
    pub rule: String,
}

impl Invalid {
    /// A broken rule.
    pub fn new(rule: impl Into<String>) -> Self {
        Self { rule: rule.into() }
    }

    /// Ties the rule to the field it applies to.
    pub fn at(self, field: impl Into<String>) -> Error {
        Error::InvalidArgument {
            field: field.into(),
            rule: self.rule,
        }
    }
}

/// 1–128 chars of `[A-Za-z0-9_.-]`, starting alphanumeric.
pub fn sandbox_id(value: &str) -> Result<(), Invalid> {
    if value.is_empty() {
        return Err(Invalid::new("must not be empty"));
    }
    if value.len() > MAX_SANDBOX_ID_LEN {
        return Err(Invalid::new(format!(
            "must be at most {MAX_SANDBOX_ID_LEN} characters"
        )));
    }
    let mut chars = value.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_alphanumeric()) {
        return Err(Invalid::new("must start with a letter or digit"));
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
        return Err(Invalid::new("may only contain [A-Za-z0-9_.-]"));
    }
    Ok(())
}

/// 1–15 bytes, no `/`, `:`, whitespace or control characters, not `.` or `..`.
pub fn ifname(value: &str) -> Result<(), Invalid> {
    if value.is_empty() {
        return Err(Invalid::new("must not be empty"));
    }
    if value.len() > 15 {
        return Err(Invalid::new("must be at most 15 bytes (IFNAMSIZ)"));
    }
    if value == "." || value == ".." {
        return Err(Invalid::new("must not be '.' or '..'"));
    }
    // The kernel expands a '%' in a new link's name as a template (`eth%d` becomes the first
    // free `eth<N>`), so the link would not get the name knid recorded.
    if value
        .chars()
        .any(|c| c == '/' || c == ':' || c == '%' || c.is_whitespace() || c.is_control())
    {
        return Err(Invalid::new(
            "must not contain '/', ':', '%', whitespace or control characters",
        ));
    }
    Ok(())
}

/// Six hex octets separated by `:` or `-`; unicast and not all-zero.
pub fn mac(value: &str) -> Result<[u8; 6], Invalid> {
    let bad = || Invalid::new("must be six hex octets like 02:42:ac:11:00:02");
    let sep = if value.contains('-') { '-' } else { ':' };
    let mut octets = [0u8; 6];
    let mut parts = value.split(sep);
    for octet in &mut octets {
        let part = parts.next().ok_or_else(bad)?;
        // from_str_radix alone would take a sign: "+2" is no octet (found by fuzzing).
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        *octet = u8::from_str_radix(part, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    if octets[0] & 0x01 != 0 {
        return Err(Invalid::new(
            "must be a unicast address (multicast bit set)",
        ));
    }
    if octets == [0; 6] {
        return Err(Invalid::new("must not be all zeros"));
    }
    Ok(octets)
}

/// 68–65535.
pub fn mtu(value: u32) -> Result<(), Invalid> {
    if (MIN_MTU..=MAX_MTU).contains(&value) {
        Ok(())
    } else {
        Err(Invalid::new(format!(
            "must be between {MIN_MTU} and {MAX_MTU}"
        )))
    }
}

/// A PCI address in sysfs form, `DDDD:BB:DD.F` in lower-case hex (`0000:3b:00.1`): domain 4
/// digits, bus 2, device 2 (00-1f), function 0-7. Nothing else reaches a sysfs path.
pub fn pci_address(value: &str) -> Result<(), Invalid> {
    let rule =
        || Invalid::new("must be a PCI address DDDD:BB:DD.F in lower-case hex, e.g. 0000:3b:00.1");
    let b = value.as_bytes();
    let hex =
        |r: std::ops::Range<usize>| b[r].iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    if b.len() != 12 || b[4] != b':' || b[7] != b':' || b[10] != b'.' {
        return Err(rule());
    }
    if !(hex(0..4) && hex(5..7) && hex(8..10) && matches!(b[11], b'0'..=b'7')) {
        return Err(rule());
    }
    if b[8] > b'1' {
        return Err(Invalid::new("device number must be 00-1f"));
    }
    Ok(())
}

/// An IP address in canonical text form (no zone, no brackets, no leading zeros).
pub fn ip(value: &str) -> Result<IpAddr, Invalid> {
    value
        .parse::<IpAddr>()
        .map_err(|_| Invalid::new("must be an IPv4 or IPv6 address"))
}

/// A CIDR whose address has no host bits set, e.g. `10.88.0.0/16`.
pub fn subnet(value: &str) -> Result<IpNet, Invalid> {
    let net: IpNet = value
        .parse()
        .map_err(|_| Invalid::new("must be a CIDR like 10.88.0.0/16"))?;
    if net.addr() != net.network() {
        return Err(Invalid::new(format!(
            "must not have host bits set (did you mean {}?)",
            net.trunc()
        )));
    }
    Ok(net)
}

/// An absolute, normalised path with no `..`, `.` or empty components, at most 4096 bytes.
pub fn netns_path(value: &str) -> Result<(), Invalid> {
    absolute_path(value, MAX_PATH_LEN)
}

/// The path of a unix socket: absolute and normalised like [`netns_path`], and short enough
/// for `sun_path` (107 bytes).
pub fn socket_path(value: &str) -> Result<(), Invalid> {
    absolute_path(value, MAX_SOCKET_PATH_LEN)
}

/// An absolute, normalised path with no `..`, `.` or empty components, at most `max_len` bytes.
fn absolute_path(value: &str, max_len: usize) -> Result<(), Invalid> {
    if value.is_empty() {
        return Err(Invalid::new("must not be empty"));
    }
    if value.len() > max_len {
        return Err(Invalid::new(format!("must be at most {max_len} bytes")));
    }
    if value.contains('\0') {
        return Err(Invalid::new("must not contain NUL"));
    }
    let path = Path::new(value);
    if !path.is_absolute() {
        return Err(Invalid::new("must be an absolute path"));
    }
    if value.contains("//") || value.ends_with('/') {
        return Err(Invalid::new("must be normalised (no '//' or trailing '/')"));
    }
    // Path::components() silently drops interior `.`: check the raw segments.
    if value.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(Invalid::new("must not contain '.' or '..'"));
    }
    Ok(())
}

/// A network or extension name: 1–64 characters of `[A-Za-z0-9_.-]`.
pub fn name(value: &str) -> Result<(), Invalid> {
    if value.is_empty()
        || value.len() > MAX_NAME_LEN
        || !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return Err(Invalid::new(format!(
            "must be 1-{MAX_NAME_LEN} characters of [A-Za-z0-9_.-]"
        )));
    }
    Ok(())
}

/// True when `path` is under one of `prefixes` (each ending in `/`), or is `/proc/<pid>/ns/net`
/// and `/proc/` is allowed.
pub fn netns_path_allowed(path: &str, prefixes: &[String]) -> bool {
    prefixes.iter().any(|prefix| {
        if prefix == "/proc/" {
            let Some(rest) = path.strip_prefix("/proc/") else {
                return false;
            };
            let Some(pid) = rest.strip_suffix("/ns/net") else {
                return false;
            };
            !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
        } else {
            path.strip_prefix(prefix.as_str())
                .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
        }
    })
}

/// What [`netns_path_allowed`] accepts under `prefixes`, for an error message:
/// `/run/netns/<name>` for a directory, `/proc/<pid>/ns/net` (a numeric pid) for `/proc/`.
pub fn netns_paths_accepted(prefixes: &[String]) -> String {
    let forms: Vec<String> = prefixes
        .iter()
        .map(|prefix| {
            if prefix == "/proc/" {
                "/proc/<pid>/ns/net (a numeric pid: /proc/self and /proc/thread-self name knid's \
                 own namespace)"
                    .to_owned()
            } else {
                format!("{prefix}<name>")
            }
        })
        .collect();
    forms.join(", ")
}

/// A file name for a netns knid creates: 1–64 characters of `[A-Za-z0-9_.-]`, not starting
/// with `.`.
pub fn netns_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > 64 {
        return Err(Invalid::new("must be 1-64 characters"));
    }
    if name.starts_with('.') {
        return Err(Invalid::new("must not start with '.'"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err(Invalid::new("must be characters of [A-Za-z0-9_.-]"));
    }
    Ok(())
}

/// A free-form string of at most `MAX_TEXT_LEN` bytes without control characters.
pub fn text(value: &str) -> Result<(), Invalid> {
    if value.len() > MAX_TEXT_LEN {
        return Err(Invalid::new(format!(
            "must be at most {MAX_TEXT_LEN} bytes"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(Invalid::new("must not contain control characters"));
    }
    Ok(())
}

/// At most `max` entries.
pub fn count(len: usize, max: usize) -> Result<(), Invalid> {
    if len > max {
        Err(Invalid::new(format!("must have at most {max} entries")))
    } else {
        Ok(())
    }
}

/// Labels or annotations: bounded count, key length and value length; keys non-empty.
/// Returns the first broken rule with the offending key.
pub fn labels(map: &BTreeMap<String, String>) -> Result<(), (String, Invalid)> {
    if map.len() > MAX_LABELS {
        return Err((
            String::new(),
            Invalid::new(format!("must have at most {MAX_LABELS} entries")),
        ));
    }
    for (key, value) in map {
        if key.is_empty() || key.len() > MAX_LABEL_KEY_LEN || key.chars().any(char::is_control) {
            return Err((
                key.clone(),
                Invalid::new(format!(
                    "keys must be 1-{MAX_LABEL_KEY_LEN} bytes without control characters"
                )),
            ));
        }
        if value.len() > MAX_LABEL_VALUE_LEN {
            return Err((
                key.clone(),
                Invalid::new(format!(
                    "values must be at most {MAX_LABEL_VALUE_LEN} bytes"
                )),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
