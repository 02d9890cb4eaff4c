use ipnet::IpNet;
use knid_netops::{Address, Error, Route, Rtnl, Step};

use crate::common::{in_private_netns, rtnl};

fn bridge(rt: &mut Rtnl, name: &str) -> u32 {
    rt.create_bridge(name, None).expect("create bridge");
    rt.link_by_name(name).expect("get").expect("exists").index
}

fn net(s: &str) -> IpNet {
    s.parse().expect("valid cidr")
}

/// Addresses, up and default routes of both families, in the order knid configures a pod.
fn pod_steps(index: u32) -> Vec<Step> {
    vec![
        Step::Address {
            index,
            net: net("10.77.0.5/16"),
        },
        Step::Address {
            index,
            net: net("fd00:77::5/64"),
        },
        Step::Up(index),
        Step::Route(Route::default_via("10.77.0.1".parse().expect("ip"), index)),
        Step::Route(Route::default_via("fd00:77::1".parse().expect("ip"), index)),
    ]
}

#[test]
fn steps_in_one_batch_are_applied_in_order_and_again_idempotently() {
    in_private_netns("steps_in_one_batch", || {
        let mut rt = rtnl();
        let index = bridge(&mut rt, "kst0");
        // The routes need the addresses and the link up first: the order is what makes it work.
        rt.apply_steps(&pod_steps(index)).expect("first batch");
        let link = rt.link_by_name("kst0").unwrap().unwrap();
        assert!(link.up);
        let addrs = rt.addresses(Some(index)).unwrap();
        for n in ["10.77.0.5/16", "fd00:77::5/64"] {
            assert!(
                addrs.contains(&Address { index, net: net(n) }),
                "{n} in {addrs:?}"
            );
        }
        for v6 in [false, true] {
            let defaults = rt
                .routes(v6)
                .unwrap()
                .into_iter()
                .filter(|r| r.dst.prefix_len() == 0 && r.oif == Some(index))
                .count();
            assert_eq!(defaults, 1, "one default route (ipv6 {v6})");
        }
        // Again: the addresses now fail with EEXIST in the batch, the replay accepts them.
        rt.apply_steps(&pod_steps(index)).expect("repeated batch");
        assert_eq!(rt.addresses(Some(index)).unwrap().len(), addrs.len());
    });
}

#[test]
fn a_failing_step_gives_the_error_of_its_single_call_and_later_steps_still_apply() {
    in_private_netns("a_failing_step", || {
        let mut rt = rtnl();
        let index = bridge(&mut rt, "kst1");
        // No address yet: the route's gateway is unreachable.
        let unreachable = Route::default_via("10.66.0.1".parse().expect("ip"), index);
        let single = rt.add_route(&unreachable).expect_err("unreachable gateway");
        let steps = [
            Step::Up(index),
            Step::Route(unreachable.clone()),
            // Unrelated to the route: it does not make its gateway reachable.
            Step::Address {
                index,
                net: net("10.55.0.5/16"),
            },
        ];
        let failed = rt.apply_steps(&steps).expect_err("the route fails");
        assert_eq!(failed.step, 1, "the route is named");
        let batched = failed.error;
        assert!(matches!(batched, Error::Netlink { .. }), "{batched:?}");
        assert_eq!(batched.errno(), single.errno());
        assert_eq!(batched.to_string(), single.to_string());
        // The address after the failed route was applied by the kernel anyway.
        assert!(rt.addresses(Some(index)).unwrap().contains(&Address {
            index,
            net: net("10.55.0.5/16")
        }));
    });
}
