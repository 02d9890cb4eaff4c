//! The daemon's configuration file: parsing never panics, an accepted file's networks check
//! again and hold the rules (names, MTU, one subnet per family, a gateway inside its subnet,
//! bridges not shared), and a refusal is InvalidArgument.
#![no_main]

use knid_core::config::Driver;
use knid_core::{Config, ErrorKind};
use knid_fuzz::{is_ifname, is_mtu, is_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // knid reads the file with read_to_string: text that is not UTF-8 never gets here.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = match Config::from_toml(text) {
        Ok(config) => config,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            return;
        }
    };
    let networks = config.networks().expect("accepted, so its networks check");
    assert_eq!(networks.len(), config.networks.len());
    config.gc_interval().expect("checked");
    config.extension_health_interval().expect("checked");
    assert!(!config.cni_timeout().expect("checked").is_zero());
    let mut bridges = Vec::new();
    for net in &networks {
        assert!(is_name(&net.name), "{net:?}");
        assert!(is_mtu(net.mtu), "{net:?}");
        assert!(net.subnets.len() <= 2);
        if let [(a, _), (b, _)] = net.subnets.as_slice() {
            assert!(a.addr().is_ipv4() && b.addr().is_ipv6(), "{net:?}");
        }
        for (subnet, gateway) in &net.subnets {
            assert_eq!(subnet.addr(), subnet.network(), "host bits set: {net:?}");
            if !matches!(net.driver, Driver::Routed) {
                assert!(subnet.contains(gateway) && *gateway != subnet.network(), "{net:?}");
            }
        }
        if let Some(bridge) = net.bridge() {
            assert!(is_ifname(bridge), "{net:?}");
            assert!(!bridges.contains(&bridge), "bridge {bridge} shared");
            bridges.push(bridge);
        }
        if let Some(parent) = net.parent() {
            assert!(is_ifname(parent), "{net:?}");
        }
    }
});
