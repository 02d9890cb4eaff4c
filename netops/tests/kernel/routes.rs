use std::net::IpAddr;

use ipnet::IpNet;
use knid_netops::{Route, RouteScope, Rtnl};

use crate::common::{in_private_netns, rtnl};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("valid ip")
}

/// A link that is up with an address, so gateways in its prefix are reachable.
fn uplink(rt: &mut Rtnl, name: &str, nets: &[&str]) -> u32 {
    rt.create_bridge(name, None).expect("create bridge");
    let index = rt.link_by_name(name).expect("get").expect("exists").index;
    rt.set_up(index).expect("set up");
    for n in nets {
        let n = n.parse().expect("valid cidr");
        rt.add_address(index, n).expect("add address");
    }
    index
}

#[test]
fn default_routes_v4_and_v6_are_added_read_back_and_deleted() {
    in_private_netns("default_routes_v4_and_v6", || {
        let mut rt = rtnl();
        let oif = uplink(&mut rt, "krt0", &["10.88.0.5/16", "fd00:88::5/64"]);

        for (gw, v6) in [(ip("10.88.0.1"), false), (ip("fd00:88::1"), true)] {
            let mut route = Route::default_via(gw, oif);
            route.mtu = Some(1400);
            rt.add_route(&route).expect("add default route");
            rt.add_route(&route).expect("adding again replaces it");

            let defaults: Vec<Route> = rt
                .routes(v6)
                .unwrap()
                .into_iter()
                .filter(|r| r.dst.prefix_len() == 0)
                .collect();
            assert_eq!(defaults.len(), 1, "{defaults:?}");
            let got = &defaults[0];
            assert_eq!(got.dst, route.dst);
            assert_eq!(got.gateway, Some(gw));
            assert_eq!(got.oif, Some(oif));
            assert_eq!(got.mtu, Some(1400));
            assert_eq!(got.table, 254);
            assert_eq!(got.protocol, 4);
            assert_eq!(got.scope, RouteScope::Universe);
            // Only the requested family comes back.
            assert!(rt
                .routes(v6)
                .unwrap()
                .iter()
                .all(|r| r.dst.addr().is_ipv6() == v6));

            assert!(rt.delete_route(&route).unwrap());
            assert!(
                !rt.delete_route(&route).unwrap(),
                "second delete reports gone"
            );
            assert!(!rt
                .routes(v6)
                .unwrap()
                .iter()
                .any(|r| r.dst.prefix_len() == 0));
        }
        assert!(rt.delete_link(oif).unwrap());
    });
}

#[test]
fn link_scope_route_and_table_above_255_work() {
    in_private_netns("link_scope_route_and_table_above_255_work", || {
        let mut rt = rtnl();
        let oif = uplink(&mut rt, "krt1", &[]);
        let onlink = Route {
            dst: "10.99.1.7/32".parse::<IpNet>().unwrap(),
            gateway: None,
            oif: Some(oif),
            table: 254,
            mtu: None,
            scope: RouteScope::Link,
            protocol: 4,
            metric: Some(50),
            onlink: false,
        };
        rt.add_route(&onlink).unwrap();
        assert!(rt.routes(false).unwrap().contains(&onlink));

        let mut far = onlink.clone();
        far.table = 1000;
        rt.add_route(&far).unwrap();
        // routes() lists the main table only.
        assert_eq!(
            rt.routes(false)
                .unwrap()
                .iter()
                .filter(|r| r.dst == onlink.dst)
                .count(),
            1
        );
        assert!(rt.delete_route(&far).unwrap());
        assert!(!rt.delete_route(&far).unwrap());
        assert!(rt.delete_route(&onlink).unwrap());
        assert!(rt.delete_link(oif).unwrap());
    });
}

#[test]
fn an_onlink_route_needs_no_route_to_its_gateway_and_reads_back_onlink() {
    in_private_netns("an_onlink_route_needs_no_route_to_its_gateway", || {
        let mut rt = rtnl();
        // Up (onlink wants its device up) but without addresses or carrier (a bridge with no
        // port): no prefix route, as on an IPv6 link not yet ready.
        rt.create_bridge("krt9", None).expect("create bridge");
        let oif = rt.link_by_name("krt9").expect("get").expect("exists").index;
        rt.set_up(oif).expect("set up");
        for gw in [ip("10.77.0.1"), ip("fd00:77::1")] {
            let mut route = Route::default_via(gw, oif);
            let err = rt.add_route(&route).expect_err("no route to the gateway");
            assert!(
                matches!(err.errno(), Some(libc::ENETUNREACH | libc::EHOSTUNREACH)),
                "{err}"
            );
            route.onlink = true;
            rt.add_route(&route).expect("onlink route");
            let got: Vec<Route> = rt
                .routes(gw.is_ipv6())
                .expect("dump")
                .into_iter()
                .filter(|r| r.dst.prefix_len() == 0)
                .collect();
            assert_eq!(got.len(), 1, "{got:?}");
            assert!(got[0].onlink, "read back without onlink: {got:?}");
            assert_eq!(got[0].gateway, Some(gw));
        }
    });
}
