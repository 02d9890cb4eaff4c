use knid_netops::sysctl;

use crate::common::in_private_netns;

#[test]
fn enable_forwarding_in_a_private_netns_reads_back_one() {
    in_private_netns("enable_forwarding_in_a_private_netns", || {
        // New namespaces may inherit forwarding from the host: start from a known 0.
        for key in ["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"] {
            sysctl::write(key, "0").unwrap();
            assert_eq!(sysctl::read(key).unwrap(), "0");
        }
        sysctl::enable_forwarding().unwrap();
        assert_eq!(sysctl::read("net/ipv4/ip_forward").unwrap(), "1");
        assert_eq!(sysctl::read("net/ipv6/conf/all/forwarding").unwrap(), "1");
    });
}
