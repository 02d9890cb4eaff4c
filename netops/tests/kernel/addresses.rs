use ipnet::IpNet;
use knid_netops::{sysctl, Address};

use crate::common::{in_private_netns, rtnl};

fn net(s: &str) -> IpNet {
    s.parse().expect("valid cidr")
}

#[test]
fn v4_and_v6_addresses_are_added_idempotently_and_read_back() {
    in_private_netns("v4_and_v6_addresses_are_added_idempotently", || {
        let mut rt = rtnl();
        rt.create_bridge("kab0", None).unwrap();
        let br = rt.link_by_name("kab0").unwrap().unwrap();
        rt.set_up(br.index).unwrap();
        let lo = rt.link_by_name("lo").unwrap().unwrap();

        let v4 = net("10.88.0.1/16");
        let v6 = net("fd00:88::1/64");
        for n in [v4, v6] {
            rt.add_address(br.index, n).expect("add");
            rt.add_address(br.index, n)
                .expect("adding the same address again is success");
        }
        let ours = rt.addresses(Some(br.index)).unwrap();
        for n in [v4, v6] {
            let want = Address {
                index: br.index,
                net: n,
            };
            assert_eq!(
                ours.iter().filter(|a| **a == want).count(),
                1,
                "{n} in {ours:?}"
            );
        }
        assert!(
            ours.iter().all(|a| a.index == br.index),
            "kernel-side filter: {ours:?}"
        );
        let on_lo = rt.addresses(Some(lo.index)).unwrap();
        assert!(on_lo.iter().all(|a| a.index == lo.index));
        assert!(
            on_lo.iter().any(|a| a.net == net("127.0.0.1/8")),
            "{on_lo:?}"
        );
        let all = rt.addresses(None).unwrap();
        assert!(all.len() >= ours.len() + on_lo.len(), "{all:?}");

        // The same IPv6 address with another prefix is a real conflict, not "already done".
        let err = rt
            .add_address(br.index, net("fd00:88::1/80"))
            .expect_err("conflict");
        assert!(err.is_exists(), "{err:?}");

        for n in [v4, v6] {
            assert!(rt.delete_address(br.index, n).unwrap());
            assert!(
                !rt.delete_address(br.index, n).unwrap(),
                "second delete of {n}"
            );
        }
        let left = rt.addresses(Some(br.index)).unwrap();
        assert!(!left.iter().any(|a| a.net == v4 || a.net == v6), "{left:?}");
        assert!(rt.delete_link(br.index).unwrap());
        assert!(
            !rt.delete_address(br.index, v4).unwrap(),
            "link gone counts as gone"
        );
    });
}

#[test]
fn ipv6_address_on_a_link_with_ipv6_disabled_says_so() {
    in_private_netns("ipv6_address_on_a_link_with_ipv6_disabled_says_so", || {
        let mut rt = rtnl();
        rt.create_bridge("kab1", None).unwrap();
        let br = rt.link_by_name("kab1").unwrap().unwrap();
        sysctl::write("net/ipv6/conf/kab1/disable_ipv6", "1").unwrap();

        let err = rt
            .add_address(br.index, net("fd00:99::1/64"))
            .expect_err("ipv6 disabled");
        assert_eq!(err.errno(), Some(libc::EACCES), "{err:?}");
        // Recent kernels explain in the extack; older ones only say EACCES and we fill in the text.
        let text = err.to_string().to_lowercase();
        assert!(text.contains("ipv6 is disabled"), "{err}");
        assert!(rt.delete_link(br.index).unwrap());
    });
}
