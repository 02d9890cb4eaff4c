use super::*;
use netlink_packet_core::DefaultNla;

fn nla(kind: u16, value: &[u8]) -> InfoTun {
    InfoTun::Other(DefaultNla::new(kind, value.to_vec()))
}

#[test]
fn spec_flags_follow_the_booleans() {
    let mut spec = TapSpec {
        name: "tap0".into(),
        multi_queue: false,
        vnet_hdr: false,
        no_pi: false,
        owner: None,
        group: None,
    };
    assert_eq!(spec.flags(), 0x0002);
    spec.no_pi = true;
    spec.vnet_hdr = true;
    assert_eq!(spec.flags(), 0x5002);
    spec.multi_queue = true;
    assert_eq!(spec.flags(), 0x5102);
}

#[test]
fn tun_flags_text_parses_as_hex() {
    assert_eq!(parse_tun_flags("0x5802\n"), Some(0x5802));
    assert_eq!(parse_tun_flags("0x1002"), Some(0x1002));
    assert_eq!(parse_tun_flags("5802"), None);
    assert_eq!(parse_tun_flags("0xzz"), None);
}

#[test]
fn tap_state_rebuilds_tun_flags_from_info_data() {
    // What tun_fill_info sends for a persistent multi-queue vnet_hdr tap without PI, owned
    // by 1000:1001, with 4 queues attached.
    let data = [
        nla(IFLA_TUN_TYPE, &[2]),
        nla(IFLA_TUN_OWNER, &1000u32.to_ne_bytes()),
        nla(IFLA_TUN_GROUP, &1001u32.to_ne_bytes()),
        nla(IFLA_TUN_PI, &[0]),
        nla(IFLA_TUN_VNET_HDR, &[1]),
        nla(IFLA_TUN_PERSIST, &[1]),
        nla(IFLA_TUN_MULTI_QUEUE, &[1]),
        nla(IFLA_TUN_NUM_QUEUES, &4u32.to_ne_bytes()),
        nla(9, &0u32.to_ne_bytes()),
    ];
    assert_eq!(
        tap_state(7, &data),
        TapState {
            index: 7,
            flags: 0x5902,
            owner: Some(1000),
            group: Some(1001),
            queues: Some(4),
        }
    );
    // A plain tun with packet information and no owner.
    let data = [
        nla(IFLA_TUN_TYPE, &[1]),
        nla(IFLA_TUN_PI, &[1]),
        nla(IFLA_TUN_VNET_HDR, &[0]),
        nla(IFLA_TUN_PERSIST, &[0]),
        nla(IFLA_TUN_MULTI_QUEUE, &[0]),
    ];
    let state = tap_state(3, &data);
    assert_eq!(
        (state.flags, state.owner, state.queues),
        (0x0001, None, None)
    );
}

#[test]
fn bad_tap_names_are_refused_before_any_ioctl() {
    for bad in [
        "",
        "sixteen-bytes-xx",
        ".",
        "..",
        "a/b",
        "a:b",
        "tap%d",
        "a b",
    ] {
        let err = check_name(bad).expect_err(bad);
        assert!(err.to_string().contains("tap name"), "{err}");
    }
    check_name("fifteen-bytes-x").expect("15 bytes fit");
}

#[test]
fn ifreq_carries_the_name_nul_terminated_and_the_flags() {
    let req = IfReq::new("tap0", 0x5002);
    assert_eq!(&req.name[..5], b"tap0\0");
    assert_eq!(req.flags, 0x5002);
}
