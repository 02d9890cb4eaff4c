use knid_netops::{Rtnl, VethEnd, VethSpec};

use crate::common::{in_private_netns, new_netns, rtnl};

fn end(name: &str, mtu: Option<u32>, mac: Option<[u8; 6]>) -> VethEnd {
    VethEnd {
        name: name.into(),
        mtu,
        mac,
    }
}

#[test]
fn bridge_create_reports_existing_name_as_exists() {
    in_private_netns("bridge_create_reports_existing_name_as_exists", || {
        let mut rt = rtnl();
        rt.create_bridge("kbr0", Some(1400)).expect("create bridge");
        let err = rt.create_bridge("kbr0", None).expect_err("second create");
        assert!(err.is_exists(), "{err:?}");
        assert_eq!(err.errno(), Some(libc::EEXIST));

        let br = rt.link_by_name("kbr0").unwrap().expect("bridge exists");
        assert_eq!(br.kind.as_deref(), Some("bridge"));
        assert_eq!(br.mtu, 1400);
        assert!(!br.up);
        assert_eq!(rt.link_by_index(br.index).unwrap(), Some(br.clone()));
        assert_eq!(rt.link_index_by_name("kbr0").unwrap(), Some(br.index));
        assert!(rt.links().unwrap().iter().any(|l| l == &br));

        assert!(rt.delete_link(br.index).unwrap());
        assert!(
            !rt.delete_link(br.index).unwrap(),
            "second delete reports gone"
        );
        assert_eq!(rt.link_by_name("kbr0").unwrap(), None);
        assert_eq!(rt.link_index_by_name("kbr0").unwrap(), None);
        assert_eq!(rt.link_by_index(br.index).unwrap(), None);
    });
}

#[test]
fn veth_peer_lands_in_pod_netns_with_requested_name_mac_and_mtu() {
    in_private_netns("veth_peer_lands_in_pod_netns", || {
        let mut host = rtnl();
        host.create_bridge("kbr1", None).unwrap();
        let br = host.link_by_name("kbr1").unwrap().unwrap();
        host.set_up(br.index).unwrap();

        let pod_ns = new_netns();
        let pod_mac = [0x02, 0x42, 0x0a, 0x58, 0x00, 0x05];
        let host_mac = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
        let spec = VethSpec {
            host: end("knh1", Some(1400), Some(host_mac)),
            peer: end("pod1", Some(1380), Some(pod_mac)),
            peer_netns: Some(&pod_ns),
            host_controller: Some(br.index),
        };
        host.create_veth(&spec).expect("create veth");

        let h = host.link_by_name("knh1").unwrap().expect("host end");
        assert_eq!(h.kind.as_deref(), Some("veth"));
        assert_eq!(h.mac, Some(host_mac));
        assert_eq!(h.mtu, 1400);
        assert_eq!(h.controller, Some(br.index));
        assert_eq!(
            host.link_by_name("pod1").unwrap(),
            None,
            "peer is not on the host"
        );
        assert_eq!(host.bridge_ports(br.index).unwrap(), vec![h.clone()]);
        assert_eq!(host.bridge_port_counts().unwrap().get(&br.index), Some(&1));
        host.set_up(h.index).unwrap();
        assert!(host.link_by_index(h.index).unwrap().unwrap().up);

        // The peer is seen, and set up, through a socket opened in the pod netns.
        let mut pod = Rtnl::open_in(&pod_ns).expect("open rtnl in pod");
        let p = pod.link_by_name("pod1").unwrap().expect("peer in pod");
        assert_eq!(p.kind.as_deref(), Some("veth"));
        assert_eq!(p.mac, Some(pod_mac));
        assert_eq!(p.mtu, 1380);
        assert_eq!(p.controller, None);
        assert!(!p.up);
        pod.set_up(p.index).expect("set peer up from the pod");
        assert!(pod.link_by_index(p.index).unwrap().unwrap().up);

        assert!(host.delete_link(h.index).unwrap());
        assert_eq!(
            pod.link_by_name("pod1").unwrap(),
            None,
            "peer goes with its pair"
        );
        assert!(host.bridge_ports(br.index).unwrap().is_empty());
        assert_eq!(host.bridge_port_counts().unwrap().get(&br.index), None);
        assert!(host.delete_link_by_name("kbr1").unwrap());
        assert!(!host.delete_link_by_name("kbr1").unwrap());
    });
}

#[test]
fn veth_created_up_has_its_host_end_up_on_the_bridge_and_its_peer_down() {
    in_private_netns("veth_created_up", || {
        let mut host = rtnl();
        host.create_bridge("kbr9", None).unwrap();
        let br = host.link_by_name("kbr9").unwrap().unwrap();
        let pod_ns = new_netns();
        let spec = VethSpec {
            host: end("knh9", None, None),
            peer: end("eth0", None, None),
            peer_netns: Some(&pod_ns),
            host_controller: Some(br.index),
        };
        host.create_veth_up(&spec).expect("create veth up");
        let h = host.link_by_name("knh9").unwrap().expect("host end");
        assert!(h.up, "host end up from the start");
        assert_eq!(h.controller, Some(br.index));
        let mut pod = Rtnl::open_in(&pod_ns).unwrap();
        let p = pod.link_by_name("eth0").unwrap().expect("peer in pod");
        assert!(!p.up, "the peer is left down");
        // Both ends are allocated one queue each way, whatever the CPU count (the kernel's
        // default is one per CPU, then cut down to one in use at a grace period's cost).
        assert_eq!(h.queues, (1, 1), "host end's allocated tx/rx queues");
        assert_eq!(p.queues, (1, 1), "pod end's allocated tx/rx queues");
        let again = host.create_veth_up(&spec).expect_err("names taken");
        assert!(again.is_exists(), "{again:?}");
        assert!(host.delete_link(h.index).unwrap());
        assert!(host.delete_link(br.index).unwrap());
    });
}

#[test]
fn link_settings_are_reflected_by_the_kernel() {
    in_private_netns("link_settings_are_reflected_by_the_kernel", || {
        let mut rt = rtnl();
        rt.create_bridge("kbr2", None).unwrap();
        let br = rt.link_by_name("kbr2").unwrap().unwrap();
        let spec = VethSpec {
            host: end("kva", None, None),
            peer: end("kvb", None, None),
            peer_netns: None,
            host_controller: None,
        };
        rt.create_veth(&spec).unwrap();
        let a = rt.link_by_name("kva").unwrap().unwrap();
        assert_eq!(a.controller, None);

        rt.set_controller(a.index, Some(br.index)).unwrap();
        rt.set_mtu(a.index, 1300).unwrap();
        rt.set_group(a.index, 42).unwrap();
        rt.set_up(a.index).unwrap();
        let got = rt.link_by_index(a.index).unwrap().unwrap();
        assert_eq!(
            (got.controller, got.mtu, got.group, got.up),
            (Some(br.index), 1300, 42, true)
        );

        rt.set_down(a.index).unwrap();
        rt.set_controller(a.index, None).unwrap();
        let got = rt.link_by_index(a.index).unwrap().unwrap();
        assert_eq!((got.controller, got.up), (None, false));

        // The kernel checks and explains: its extended-ack text comes through.
        let err = rt.set_mtu(a.index, 10).expect_err("mtu below minimum");
        assert_eq!(err.errno(), Some(libc::EINVAL));
        assert!(
            extack_of(&err).is_some_and(|m| m.contains("mtu")),
            "{err:?}"
        );

        assert!(rt.delete_link(a.index).unwrap());
        assert!(rt.delete_link(br.index).unwrap());
    });
}

fn extack_of(e: &knid_netops::Error) -> Option<&str> {
    match e {
        knid_netops::Error::Netlink { extack, .. } => extack.as_deref(),
        _ => None,
    }
}

#[test]
fn an_alias_set_after_creation_is_read_back_and_survives_retirement() {
    in_private_netns("an_alias_set_after_creation", || {
        let mut rt = rtnl();
        let spec = VethSpec {
            host: end("kal0", None, None),
            peer: end("kal1", None, None),
            peer_netns: None,
            host_controller: None,
        };
        rt.create_veth(&spec).unwrap();
        assert_eq!(rt.link_by_name("kal0").unwrap().unwrap().alias, None);
        assert!(rt.set_alias_by_name("kal0", "knid:00ff").unwrap());
        let link = rt.link_by_name("kal0").unwrap().unwrap();
        assert_eq!(link.alias.as_deref(), Some("knid:00ff"));
        assert!(rt.retire(link.index, 4_343).unwrap());
        let dumped = rt.links().unwrap();
        let retired = dumped.iter().find(|l| l.name == "kal0").unwrap();
        assert_eq!(retired.alias.as_deref(), Some("knid:00ff"), "in a dump too");
        assert!(
            !rt.set_alias_by_name("kal-none", "x").unwrap(),
            "absent is false"
        );
        rt.delete_group(4_343).unwrap();
    });
}

#[test]
fn delete_group_removes_every_link_of_the_group_and_nothing_else() {
    in_private_netns("delete_group_removes_every_link_of_the_group", || {
        let mut rt = rtnl();
        let pod_ns = new_netns();
        let mut doomed = Vec::new();
        for i in 0..4 {
            let spec = VethSpec {
                host: end(&format!("kgh{i}"), None, None),
                peer: end(&format!("kgp{i}"), None, None),
                peer_netns: Some(&pod_ns),
                host_controller: None,
            };
            rt.create_veth(&spec).unwrap();
            let l = rt.link_by_name(&format!("kgh{i}")).unwrap().unwrap();
            doomed.push(l.index);
        }
        rt.create_bridge("keep0", None).unwrap();
        for index in &doomed {
            rt.set_down(*index).unwrap();
            rt.set_group(*index, 7_000).unwrap();
        }

        rt.delete_group(7_000).expect("delete group");
        for index in &doomed {
            assert_eq!(rt.link_by_index(*index).unwrap(), None, "index {index}");
        }
        assert!(rt.link_by_name("keep0").unwrap().is_some());
        let mut pod = Rtnl::open_in(&pod_ns).unwrap();
        let left: Vec<String> = pod.links().unwrap().into_iter().map(|l| l.name).collect();
        assert_eq!(left, vec!["lo".to_owned()], "peers go with their pairs");

        rt.delete_group(7_000).expect("an empty group is fine");
        assert!(rt.delete_link_by_name("keep0").unwrap());
    });
}

#[test]
fn retire_takes_a_bridge_port_down_out_and_into_the_group() {
    in_private_netns("retire_takes_a_bridge_port_down", || {
        let mut rt = rtnl();
        rt.create_bridge("kbr7", None).unwrap();
        let br = rt.link_by_name("kbr7").unwrap().unwrap();
        let spec = VethSpec {
            host: end("krt0", None, None),
            peer: end("krt1", None, None),
            peer_netns: None,
            host_controller: Some(br.index),
        };
        rt.create_veth(&spec).unwrap();
        let port = rt.link_by_name("krt0").unwrap().unwrap();
        rt.set_up(port.index).unwrap();
        assert_eq!(rt.bridge_ports(br.index).unwrap().len(), 1);

        assert!(rt.retire(port.index, 4_242).expect("retire"));
        let retired = rt.link_by_index(port.index).unwrap().unwrap();
        assert!(!retired.up, "down");
        assert_eq!(retired.controller, None, "off the bridge");
        assert_eq!(retired.group, 4_242);
        assert!(rt.bridge_ports(br.index).unwrap().is_empty());
        // Retiring again, by name too, is harmless; a gone link reports false.
        assert!(rt.retire(port.index, 4_242).unwrap());
        assert!(rt.retire_by_name("krt0", 4_242).unwrap());
        rt.delete_group(4_242).unwrap();
        assert!(!rt.retire(port.index, 4_242).unwrap());
        assert!(!rt.retire_by_name("krt0", 4_242).unwrap());
        assert!(rt.delete_link_by_name("kbr7").unwrap());
    });
}

/// Both ends of a pair on bridges, and one end of another on none: each bridge counts its own,
/// over a dump of many datagrams, as the link dump filtered by the bridge lists them.
#[test]
fn bridge_port_counts_are_per_bridge_and_miss_none() {
    in_private_netns("bridge_port_counts", || {
        let mut rt = rtnl();
        let mut bridges = Vec::new();
        for name in ["kpc0", "kpc1", "kpc2"] {
            rt.create_bridge(name, None).unwrap();
            bridges.push(rt.link_by_name(name).unwrap().unwrap().index);
        }
        let (a, b, idle) = (bridges[0], bridges[1], bridges[2]);
        let pod_ns = new_netns();
        for i in 0..120 {
            let spec = VethSpec {
                host: end(&format!("kpa{i}"), None, None),
                peer: end(&format!("eth{i}"), None, None),
                peer_netns: Some(&pod_ns),
                host_controller: Some(a),
            };
            rt.create_veth(&spec).unwrap();
        }
        for i in 0..30 {
            let spec = VethSpec {
                host: end(&format!("kpb{i}"), None, None),
                peer: end(&format!("kpc{i}x"), None, None),
                peer_netns: None,
                host_controller: Some(b),
            };
            rt.create_veth(&spec).unwrap();
            // The same-namespace peer joins the bridge too: both ends are its ports.
            let peer = rt.link_by_name(&format!("kpc{i}x")).unwrap().unwrap();
            rt.set_controller(peer.index, Some(b)).unwrap();
        }
        let loose = VethSpec {
            host: end("kpl", None, None),
            peer: end("kplp", None, None),
            peer_netns: Some(&pod_ns),
            host_controller: None,
        };
        rt.create_veth(&loose).unwrap();
        let counts = rt.bridge_port_counts().unwrap();
        assert_eq!(counts.get(&a), Some(&120), "{counts:?}");
        assert_eq!(counts.get(&b), Some(&60), "{counts:?}");
        assert_eq!(counts.get(&idle), None, "{counts:?}");
        assert_eq!(counts.len(), 2, "{counts:?}");
        for (bridge, count) in &counts {
            assert_eq!(rt.bridge_ports(*bridge).unwrap().len() as u64, *count);
        }
        for index in bridges {
            assert!(rt.delete_link(index).unwrap());
        }
        assert!(rt.bridge_port_counts().unwrap().is_empty());
        for l in rt.links().unwrap().into_iter().filter(|l| l.kind.is_some()) {
            rt.delete_link(l.index).unwrap();
        }
    });
}

/// procfs's list of the thread's namespace's links names exactly the links a dump finds there,
/// not the process's (the test runs on a thread of its own namespace).
#[test]
fn link_names_are_the_names_a_link_dump_finds_in_the_threads_namespace() {
    in_private_netns("link_names", || {
        let mut rt = rtnl();
        let pod_ns = new_netns();
        for i in 0..40 {
            let spec = VethSpec {
                host: end(&format!("kln{i}"), None, None),
                peer: end(&format!("kpn{i}"), None, None),
                peer_netns: (i % 2 == 0).then_some(&pod_ns),
                host_controller: None,
            };
            rt.create_veth(&spec).unwrap();
        }
        let mut listed = knid_netops::link_names().expect("list names");
        let mut dumped: Vec<String> = rt.links().unwrap().into_iter().map(|l| l.name).collect();
        listed.sort();
        dumped.sort();
        assert_eq!(listed, dumped);
        // lo, 40 host ends, and the 20 peers left here.
        assert_eq!(listed.len(), 61, "{listed:?}");
    });
}

#[test]
fn dump_of_hundreds_of_links_spans_many_datagrams_and_misses_none() {
    in_private_netns("dump_of_hundreds_of_links", || {
        let mut rt = rtnl();
        let pairs = 150;
        for i in 0..pairs {
            let spec = VethSpec {
                host: end(&format!("kda{i}"), None, None),
                peer: end(&format!("kdb{i}"), None, None),
                peer_netns: None,
                host_controller: None,
            };
            rt.create_veth(&spec).unwrap();
        }
        let links = rt.links().unwrap();
        // lo plus both ends of every pair, each exactly once.
        assert_eq!(links.len(), 1 + 2 * pairs, "{} links", links.len());
        let mut names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), links.len());

        for l in links.iter().filter(|l| l.name.starts_with("kda")) {
            rt.set_group(l.index, 9).unwrap();
        }
        rt.delete_group(9).unwrap();
        assert_eq!(rt.links().unwrap().len(), 1, "only lo is left");
    });
}

#[test]
fn set_mac_pins_a_bridge_address_that_ports_do_not_change() {
    in_private_netns("set_mac_pins_a_bridge_address", || {
        let mut rt = rtnl();
        rt.create_bridge("kbr9", None).unwrap();
        let br = rt.link_by_name("kbr9").unwrap().unwrap();
        let pinned = [0x02, 0x6b, 0x6e, 0x00, 0x00, 0x09];
        rt.set_mac(br.index, pinned).expect("set mac");
        // A port with a lower MAC would become the bridge's address if it were not pinned.
        let spec = VethSpec {
            host: end("knp9", None, Some([0x02, 0x00, 0x00, 0x00, 0x00, 0x01])),
            peer: end("knq9", None, None),
            peer_netns: None,
            host_controller: Some(br.index),
        };
        rt.create_veth(&spec).unwrap();
        assert_eq!(rt.link_by_name("kbr9").unwrap().unwrap().mac, Some(pinned));
        assert!(rt.delete_link_by_name("knp9").unwrap());
        assert_eq!(rt.link_by_name("kbr9").unwrap().unwrap().mac, Some(pinned));
        assert!(rt.delete_link(br.index).unwrap());
    });
}

#[test]
fn a_veth_created_in_a_group_leaves_it_with_its_alias_in_one_request() {
    in_private_netns("veth_created_in_a_group", || {
        let mut host = rtnl();
        host.create_bridge("kbr9", None).unwrap();
        let br = host.link_by_name("kbr9").unwrap().unwrap();
        host.set_up(br.index).unwrap();
        let pod_ns = new_netns();
        let spec = VethSpec {
            host: end("knh9", None, None),
            peer: end("pod9", None, None),
            peer_netns: Some(&pod_ns),
            host_controller: Some(br.index),
        };
        host.create_veth_up_in_group(&spec, 0x8123_4567)
            .expect("create veth in a group");
        let h = host.link_by_name("knh9").unwrap().expect("host end");
        assert_eq!(h.group, 0x8123_4567, "in the group from its creation");
        assert!(h.up && h.alias.is_none(), "{h:?}");
        assert_eq!(h.controller, Some(br.index));

        assert!(host
            .set_alias_group_by_name("knh9", "knid:ab", 0, Some(true))
            .expect("alias, group and hairpin"));
        let h = host.link_by_name("knh9").unwrap().expect("host end");
        assert_eq!((h.group, h.alias.as_deref()), (0, Some("knid:ab")));
        assert_eq!(h.controller, Some(br.index), "still a port of its bridge");
        assert!(!host
            .set_alias_group_by_name("nosuch", "knid:ab", 0, None)
            .expect("a missing link is not an error"));
    });
}
