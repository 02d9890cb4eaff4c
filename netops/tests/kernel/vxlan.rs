use std::net::IpAddr;

use knid_netops::VxlanSpec;

use crate::common::{in_private_netns, rtnl};

#[test]
fn a_vxlan_device_is_created_unicast_only_and_its_fdb_entries_are_added_listed_and_deleted() {
    in_private_netns("vxlan_fdb", || {
        let mut rt = rtnl();
        rt.create_bridge("ul0", Some(1500))
            .expect("create underlay");
        let ul = rt.link_by_name("ul0").unwrap().unwrap().index;
        rt.set_up(ul).unwrap();
        rt.add_address(ul, "192.168.100.1/24".parse().unwrap())
            .unwrap();
        let spec = VxlanSpec {
            name: "vxlan.knid".into(),
            vni: 7,
            port: 8472,
            local: "192.168.100.1".parse().unwrap(),
            underlay: ul,
            mtu: 1450,
            mac: [0x02, 0x11, 0x22, 0x33, 0x44, 0x55],
        };
        rt.create_vxlan(&spec).expect("create vxlan");
        let err = rt.create_vxlan(&spec).expect_err("a second one");
        assert!(err.is_exists(), "{err}");
        let got = rt.vxlan_by_name("vxlan.knid").unwrap().expect("found");
        assert_eq!(got.link.kind.as_deref(), Some("vxlan"));
        assert_eq!(got.link.mtu, 1450);
        assert_eq!(got.link.mac, Some(spec.mac));
        assert!(got.matches(&spec), "{got:?}");
        let other = VxlanSpec {
            vni: 8,
            ..spec.clone()
        };
        assert!(!got.matches(&other));
        let dummy = rt.vxlan_by_name("ul0").unwrap().expect("a link");
        assert_eq!(dummy.vni, None);
        assert!(rt.vxlan_by_name("nothere").unwrap().is_none());

        let index = got.link.index;
        let mac = [0x02, 0xaa, 0, 0, 0, 3];
        let dst: IpAddr = "192.168.101.3".parse().unwrap();
        rt.add_fdb(index, mac, dst).expect("add fdb");
        rt.add_fdb(index, mac, dst).expect("adding again replaces");
        let moved: IpAddr = "192.168.101.4".parse().unwrap();
        rt.add_fdb(index, mac, moved)
            .expect("replace the destination");
        let entries = rt.fdb(index).expect("dump fdb");
        let ours: Vec<_> = entries.iter().filter(|e| e.mac == mac).collect();
        assert_eq!(ours.len(), 1, "{entries:?}");
        assert_eq!(ours[0].dst, Some(moved));
        assert!(ours[0].permanent);
        assert!(rt.delete_fdb(index, mac, Some(moved)).unwrap());
        assert!(!rt.delete_fdb(index, mac, Some(moved)).unwrap());
        assert!(rt.fdb(index).unwrap().iter().all(|e| e.mac != mac));
    });
}
