//! What the fuzz targets assert about accepted input: knid's input rules
//! (docs/security.md#validation-rules)
//! restated here from the text, independently of the validators under test, so a validator
//! that lets something through it should not is caught, not just one that panics.

use std::collections::BTreeMap;

use knid_core::AttachRequest;

/// Sandbox id: 1–128 characters of `[A-Za-z0-9_.-]`, starting with a letter or digit.
pub fn is_sandbox_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id.as_bytes()[0].is_ascii_alphanumeric()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Interface name: 1–15 bytes, no `/`, `:`, `%`, whitespace or control characters, not `.`/`..`.
pub fn is_ifname(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c == '%' || c.is_whitespace() || c.is_control())
}

/// Network or extension name: 1–64 characters of `[A-Za-z0-9_.-]`.
pub fn is_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// An absolute path without `.`, `..` or empty components, at most `max` bytes.
pub fn is_clean_absolute_path(path: &str, max: usize) -> bool {
    path.len() <= max
        && path.starts_with('/')
        && !path.contains('\0')
        && path[1..].split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// MTU 68–65535.
pub fn is_mtu(mtu: u32) -> bool {
    (68..=65535).contains(&mtu)
}

/// A MAC as text: six two-digit hex octets, all separated by `:` or all by `-`.
pub fn is_mac_text(text: &str) -> bool {
    let sep = if text.contains('-') { '-' } else { ':' };
    let octets: Vec<&str> = text.split(sep).collect();
    octets.len() == 6
        && octets
            .iter()
            .all(|o| o.len() == 2 && o.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Labels and annotations: at most 64, keys 1–253 bytes without control characters, values at
/// most 4096 bytes.
pub fn are_labels(map: &BTreeMap<String, String>) -> bool {
    map.len() <= 64
        && map.iter().all(|(k, v)| {
            (1..=253).contains(&k.len()) && !k.chars().any(char::is_control) && v.len() <= 4096
        })
}

/// A free-form text field: at most 253 bytes, no control characters.
pub fn is_text(text: &str) -> bool {
    text.len() <= 253 && !text.chars().any(char::is_control)
}

/// A pod of a NetworkPolicy question: `namespace/name`, both parts non-empty free-form texts
/// without `/`.
pub fn is_pod_key(text: &str) -> bool {
    text.split_once('/').is_some_and(|(ns, name)| {
        !ns.is_empty() && !name.is_empty() && !name.contains('/') && is_text(ns) && is_text(name)
    })
}

/// An end of a flow (`knictl policy explain --from/--to`): an IP address or a pod.
pub fn is_flow_end(text: &str) -> bool {
    text.parse::<std::net::IpAddr>().is_ok() || is_pod_key(text)
}

/// A port of a flow: 1–65535, then optionally `/` and tcp, udp or sctp in any case.
pub fn is_flow_port(text: &str) -> bool {
    let (number, protocol) = text.split_once('/').unwrap_or((text, "tcp"));
    number.parse::<u16>().is_ok_and(|p| p > 0)
        && ["tcp", "udp", "sctp"].contains(&protocol.to_ascii_lowercase().as_str())
}

/// Every rule an accepted Attach request must hold; `macs` are the MAC texts the caller sent,
/// per interface (empty when not sent or not known), to hold the parsed ones against.
pub fn check_attach(req: &AttachRequest, macs: &[&str]) {
    assert!(is_sandbox_id(req.sandbox_id.as_str()), "{req:?}");
    assert!(
        is_clean_absolute_path(&req.netns_path.to_string_lossy(), 4096),
        "{req:?}"
    );
    assert!(is_text(&req.pod.name) && is_text(&req.pod.namespace) && is_text(&req.pod.uid));
    assert!((1..=16).contains(&req.interfaces.len()), "{req:?}");
    for (i, iface) in req.interfaces.iter().enumerate() {
        assert!(is_ifname(iface.name.as_str()), "{iface:?}");
        assert!(
            req.interfaces[..i].iter().all(|o| o.name != iface.name),
            "duplicate interface name accepted: {req:?}"
        );
        assert!(is_name(&iface.network), "{iface:?}");
        assert!(iface.mtu.is_none_or(is_mtu), "{iface:?}");
        if let Some(mac) = iface.mac {
            assert!(mac.0[0] & 1 == 0 && mac.0 != [0; 6], "{mac}");
            if let Some(text) = macs.get(i).filter(|t| !t.is_empty()) {
                assert!(is_mac_text(text), "MAC {text:?} accepted as {mac}");
                assert_eq!(text.to_ascii_lowercase().replace('-', ":"), mac.to_string());
            }
        }
        let v4 = iface.static_ips.iter().filter(|ip| ip.is_ipv4()).count();
        let v6 = iface.static_ips.iter().filter(|ip| ip.is_ipv6()).count();
        assert!(v4 <= 1 && v6 <= 1, "{iface:?}");
        if let Some(tap) = &iface.tap {
            assert!((1..=256).contains(&tap.queue_pairs), "{tap:?}");
        }
    }
    assert!(req.dns.servers.len() <= 16);
    for words in [&req.dns.searches, &req.dns.options] {
        assert!(words.len() <= 16);
        assert!(words
            .iter()
            .all(|w| !w.is_empty() && is_text(w) && !w.chars().any(char::is_whitespace)));
    }
    assert!(req.port_mappings.len() <= 256);
    for m in &req.port_mappings {
        assert!(m.host_port != 0 && m.container_port != 0, "{m:?}");
        assert!(["tcp", "udp", "sctp"].contains(&m.protocol.as_str()), "{m:?}");
    }
    assert!(are_labels(&req.labels) && are_labels(&req.annotations));
}
