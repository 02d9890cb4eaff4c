use std::time::{Duration, Instant};

use knid_netops::{sysctl, Rtnl, VethEnd, VethSpec};

use testkit::kernel::ipv6_routes_via_ns as routes_via;

use crate::common::{in_private_netns, new_netns, rtnl};

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

/// A bridge port with IPv6 turned off before its peer gives it carrier gets no IPv6 route of
/// its own (the multicast route every link with carrier gets in the local table), while its
/// peer does; a missing link and a link without IPv6 (MTU below 1,280) answer `false`.
#[test]
fn disable_ipv6_keeps_a_bridge_port_out_of_the_ipv6_tables() {
    in_private_netns("disable_ipv6_keeps_a_bridge_port_out", || {
        let mut host = rtnl();
        host.create_bridge("kbr6", None).unwrap();
        let br = host.link_index_by_name("kbr6").unwrap().expect("bridge");
        host.set_up(br).unwrap();
        let pod_ns = new_netns();
        let end = |name: &str, mtu| VethEnd {
            name: name.into(),
            mtu,
            mac: None,
        };
        let spec = |host_end: &str, peer: &str, mtu| VethSpec {
            host: end(host_end, mtu),
            peer: end(peer, mtu),
            peer_netns: Some(&pod_ns),
            host_controller: Some(br),
        };
        // knh6 with IPv6 turned off; knh8 beside it as it was, to show what it would have got.
        host.create_veth_up(&spec("knh6", "pod6", None)).unwrap();
        host.create_veth_up(&spec("knh8", "pod8", None)).unwrap();
        assert!(sysctl::disable_ipv6("knh6").expect("disable_ipv6"));
        assert_eq!(
            sysctl::read("net/ipv6/conf/knh6/disable_ipv6").unwrap(),
            "1"
        );
        let mut pod = Rtnl::open_in(&pod_ns).unwrap();
        for peer in ["pod6", "pod8"] {
            let index = pod.link_index_by_name(peer).unwrap().expect("peer");
            pod.set_up(index).unwrap();
        }
        // Carrier comes through the kernel's link watch, then the routes.
        let here = knid_netops::NetnsHandle::current_thread().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while routes_via(&here, "knh8") == 0 || routes_via(&pod_ns, "pod6") == 0 {
            assert!(
                Instant::now() < deadline,
                "knh8 or pod6 never got an IPv6 route"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(host.link_by_name("knh6").unwrap().expect("knh6").up);
        assert_eq!(routes_via(&here, "knh6"), 0, "knh6 has IPv6 routes");

        assert!(!sysctl::disable_ipv6("knh-none").expect("missing link"));
        host.create_veth_up(&spec("knh7", "pod7", Some(1200)))
            .unwrap();
        assert!(!sysctl::disable_ipv6("knh7").expect("link without IPv6"));
    });
}
