use super::*;
use crate::model::{AttachmentState, IfName, InterfaceKind, IpConfig, MacAddr, RouteInfo, TapInfo};

#[test]
fn a_device_has_kata_host_tap_fields() {
    let iface = InterfaceResult {
        name: IfName::parse("eth0").expect("ifname"),
        network: "vm".into(),
        kind: InterfaceKind::Tap,
        state: AttachmentState::Attached,
        mac: MacAddr([0x02, 0, 0, 0, 0, 5]),
        mtu: 1400,
        host_ifname: "kn0123456789".into(),
        ips: vec![IpConfig {
            address: "10.88.0.5/16".parse().expect("cidr"),
            gateway: Some("10.88.0.1".parse().expect("ip")),
        }],
        routes: vec![RouteInfo {
            dst: "0.0.0.0/0".parse().expect("cidr"),
            gateway: Some("10.88.0.1".parse().expect("ip")),
            mtu: None,
            scope: RouteScope::Universe,
            table: 254,
            metric: Some(100),
        }],
        neighbors: vec![crate::model::Neighbor {
            ip: "169.254.1.1".parse().expect("ip"),
            mac: MacAddr([0x02, 1, 2, 3, 4, 5]),
        }],
        tap: Some(TapInfo {
            name: "kn0123456789".into(),
            netns_path: None,
            queue_pairs: 2,
            multi_queue: true,
            vnet_hdr: true,
            no_pi: true,
            vhost_net_ok: false,
            owner_uid: None,
            owner_gid: None,
            redirect_peer: String::new(),
            dan: true,
        }),
        device: None,
        dan_path: None,
        parent: None,
        mode: None,
        cni: None,
        bandwidth: None,
    };
    let d = device(&iface, &mut DefaultRoutes::default());
    assert_eq!(d["name"], "eth0");
    assert_eq!(d["guest_mac"], "02:00:00:00:00:05");
    assert_eq!(d["device"]["type"], "host-tap");
    assert_eq!(d["device"]["tap_name"], "kn0123456789");
    assert_eq!(d["device"]["queue_num"], 2);
    let info = &d["network_info"];
    assert_eq!(info["interface"]["ip_addresses"][0], "10.88.0.5/16");
    assert_eq!(info["interface"]["mtu"], 1400);
    assert_eq!(info["routes"][0]["dest"], "0.0.0.0/0");
    assert_eq!(info["routes"][0]["gateway"], "10.88.0.1");
    assert_eq!(info["neighbors"][0]["ip_address"], "169.254.1.1/32");
    assert_eq!(info["neighbors"][0]["state"], NUD_PERMANENT);
}

#[test]
fn files_are_dan_files_and_temp_files_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["a.json", ".b.json.tmp", "notes.txt", "bad id.json"] {
        fs::write(dir.path().join(name), "{}").expect("write");
    }
    let mut found: Vec<(String, String, bool)> = files(dir.path())
        .expect("list")
        .into_iter()
        .map(|f| {
            let file = Path::new(&f.path)
                .file_name()
                .expect("name")
                .to_string_lossy();
            (f.sandbox_id, file.into_owned(), f.temp)
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("a".to_owned(), "a.json".to_owned(), false),
            ("b".to_owned(), ".b.json.tmp".to_owned(), true)
        ]
    );
    assert!(files(&dir.path().join("missing"))
        .expect("missing dir is empty")
        .is_empty());
}
