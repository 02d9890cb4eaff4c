//! Holding knid's answers to what they must be: the pod side in the kernel against what knid
//! reported, an RPC error's code and the field its message names, the parts of an interface
//! result, and the message of a caught panic.

use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use knid_transport::{pb, ClientError};

use crate::kernel::{addresses_in, default_route_in, is_link_local, link_in};

/// Checks, with netlink inside `netns`, that the pod side of `iface` is what knid reported:
/// the link with its MAC and MTU, up; `lo` up; exactly the reported global addresses (prefix
/// lengths included); a default route per family via the reported gateway out of the link.
pub fn assert_pod_side(netns: &Path, iface: &pb::InterfaceResult) {
    let link = link_in(netns, &iface.name)
        .unwrap_or_else(|| panic!("{} missing in {}", iface.name, netns.display()));
    assert_eq!(
        link.mac,
        Some(parse_mac(&iface.mac)),
        "MAC of {}",
        iface.name
    );
    assert_eq!(link.mtu, iface.mtu, "MTU of {}", iface.name);
    assert!(link.up, "{} is down", iface.name);
    let lo = link_in(netns, "lo").expect("lo exists");
    assert!(lo.up, "lo is down in {}", netns.display());

    let (v4, gw4) = ip_of(iface, "ipv4");
    let (v6, gw6) = ip_of(iface, "ipv6");
    let mut global: Vec<IpNet> = addresses_in(netns, &iface.name)
        .into_iter()
        .filter(|a| !is_link_local(a.addr()))
        .collect();
    global.sort();
    let mut want = vec![v4, v6];
    want.sort();
    assert_eq!(global, want, "addresses of {} in the kernel", iface.name);

    for (ipv6, gateway) in [(false, gw4), (true, gw6)] {
        let route = default_route_in(netns, ipv6)
            .unwrap_or_else(|| panic!("no default route (ipv6={ipv6}) in {}", netns.display()));
        assert_eq!(route.gateway, Some(gateway), "default route gateway");
        assert_eq!(
            route.oif,
            Some(link.index),
            "default route leaves through {}",
            iface.name
        );
    }
}

/// `aa:bb:cc:dd:ee:ff` → bytes.
pub fn parse_mac(text: &str) -> [u8; 6] {
    let octets: Vec<u8> = text
        .split(':')
        .map(|o| u8::from_str_radix(o, 16).expect("hex octet"))
        .collect();
    octets.try_into().expect("six octets")
}

/// The address of `family` ("ipv4"/"ipv6") of an interface result, with its prefix length.
pub fn ip_of(iface: &pb::InterfaceResult, family: &str) -> (IpNet, IpAddr) {
    let ip = iface
        .ips
        .iter()
        .find(|ip| ip.family == family)
        .unwrap_or_else(|| panic!("no {family} address in {iface:?}"));
    let net: IpNet = ip.address.parse().expect("address is a CIDR");
    let gateway: IpAddr = ip.gateway.parse().expect("gateway is an IP");
    (net, gateway)
}

/// The status message of an RPC error, after checking its code.
pub fn expect_code<T: std::fmt::Debug>(
    result: Result<T, ClientError>,
    code: ttrpc::Code,
    what: &str,
) -> String {
    match result {
        Ok(value) => panic!("{what}: expected {code:?}, got success: {value:?}"),
        Err(ClientError::Rpc { code: got, message }) => {
            assert_eq!(got, code, "{what}: wrong code, message: {message}");
            message
        }
        Err(other) => panic!("{what}: expected {code:?}, got {other:?}"),
    }
}

/// True when `message` contains the field path `field` as a whole path, not as the start or end
/// of a longer one (`interfaces` does not match inside `interfaces[0].name`).
pub fn names_field(message: &str, field: &str) -> bool {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']');
    message.match_indices(field).any(|(at, _)| {
        let before = message[..at].chars().next_back();
        let after = message[at + field.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ']'))
            && !after.is_some_and(is_path_char)
    })
}

/// The message of a caught panic (`catch_unwind`), for reporting one row of a table test.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else {
        "non-string panic".to_owned()
    }
}
