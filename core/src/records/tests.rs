use super::*;
use crate::lifecycle::AttachmentState;
use crate::model::{DeviceInfo, RateLimit};

fn id() -> SandboxId {
    SandboxId::parse("pod-1").expect("id")
}

fn spec(kind: InterfaceKind) -> InterfaceSpec {
    InterfaceSpec {
        name: IfName::parse("eth0").expect("ifname"),
        network: "default".into(),
        kind: Some(kind),
        mac: None,
        mtu: None,
        static_ips: Vec::new(),
        tap: None,
        device: None,
        bandwidth: None,
    }
}

fn iface(kind: InterfaceKind, mac: MacAddr) -> InterfaceResult {
    InterfaceResult {
        name: IfName::parse("eth0").expect("ifname"),
        network: "default".into(),
        kind,
        state: AttachmentState::Pending,
        mac,
        mtu: 1500,
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
            metric: None,
        }],
        neighbors: vec![Neighbor {
            ip: "10.88.0.1".parse().expect("ip"),
            mac: MacAddr([0x02, 1, 2, 3, 4, 5]),
        }],
        tap: None,
        device: None,
        dan_path: None,
        parent: None,
        mode: None,
        cni: None,
        bandwidth: None,
    }
}

const MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 5]);

#[test]
fn every_kind_knid_encodes_decodes_to_the_same_interface() {
    for kind in [
        InterfaceKind::Veth,
        InterfaceKind::Tap,
        InterfaceKind::Macvlan,
        InterfaceKind::Ipvlan,
        InterfaceKind::HostDevice,
    ] {
        let mut want = iface(kind, MAC);
        if kind == InterfaceKind::HostDevice {
            want.device = Some(DeviceInfo {
                pci_address: None,
                original_name: "eth1".into(),
                original_mtu: 1500,
                was_up: true,
            });
        }
        let rec = attachment_to_record(&id(), &want, &spec(kind), 0, 7).expect("encodable");
        assert_eq!(
            attachment_from_record(&rec).expect("decodes"),
            want,
            "{kind:?}"
        );
    }
}

#[test]
fn an_all_zero_mac_is_refused_at_encode_time_naming_the_field() {
    // What a device without an Ethernet address (loopback) reports.
    let iface = iface(InterfaceKind::HostDevice, MacAddr::UNKNOWN);
    let err = attachment_to_record(&id(), &iface, &spec(InterfaceKind::HostDevice), 0, 7)
        .expect_err("refused");
    assert!(
        matches!(&err, Error::FailedPrecondition(m) if m.contains("mac") && m.contains("eth0")),
        "{err:?}"
    );
}

#[test]
fn only_a_cni_interface_may_be_recorded_without_a_mac() {
    let mut iface = iface(InterfaceKind::Cni, MacAddr::UNKNOWN);
    iface.cni = Some(crate::model::CniInfo::default());
    let rec =
        attachment_to_record(&id(), &iface, &spec(InterfaceKind::Cni), 0, 7).expect("encodable");
    assert_eq!(rec.mac, "");
    assert_eq!(
        attachment_from_record(&rec).expect("decodes").mac,
        MacAddr::UNKNOWN
    );
}

#[test]
fn a_value_the_decoder_refuses_is_refused_before_it_is_written() {
    // A multicast neighbour MAC: the encoder writes any octets, the decoder takes unicast only.
    let mut iface = iface(InterfaceKind::Veth, MAC);
    iface.neighbors[0].mac = MacAddr([0x01, 0, 0x5e, 0, 0, 1]);
    let err =
        attachment_to_record(&id(), &iface, &spec(InterfaceKind::Veth), 0, 7).expect_err("refused");
    assert!(
        matches!(&err, Error::FailedPrecondition(m) if m.contains("neighbour mac")),
        "{err:?}"
    );
    let rec = AttachmentRecord {
        mac: "01:00:5e:00:00:01".into(),
        ..attachment_to_record(
            &id(),
            &self::iface(InterfaceKind::Veth, MAC),
            &spec(InterfaceKind::Veth),
            0,
            7,
        )
        .expect("encodable")
    };
    assert!(matches!(
        check_encodable(&rec),
        Err(Error::FailedPrecondition(_))
    ));
}

#[test]
fn a_decode_error_names_the_record_the_field_and_the_value() {
    let rec = AttachmentRecord {
        mac: String::new(),
        ..attachment_to_record(
            &id(),
            &iface(InterfaceKind::HostDevice, MAC),
            &spec(InterfaceKind::HostDevice),
            0,
            7,
        )
        .expect("encodable")
    };
    let err = attachment_from_record(&rec).expect_err("corrupt");
    assert_eq!(
        err.to_string(),
        "corrupt record pod-1/eth0: invalid mac \"\": must be six hex octets like 02:42:ac:11:00:02"
    );
}

fn limits() -> Bandwidth {
    Bandwidth {
        ingress: Some(RateLimit {
            rate: 10_000_000,
            burst: 1_000_000,
        }),
        egress: Some(RateLimit {
            rate: 5_000_000,
            burst: i32::MAX as u64,
        }),
    }
}

#[test]
fn bandwidth_limits_encode_and_decode_to_the_same_interface() {
    let mut want = iface(InterfaceKind::Veth, MAC);
    want.bandwidth = Some(limits());
    let mut wanted_spec = spec(InterfaceKind::Veth);
    wanted_spec.bandwidth = Some(limits());
    let rec = attachment_to_record(&id(), &want, &wanted_spec, 0, 7).expect("encodable");
    assert_eq!(attachment_from_record(&rec).expect("decodes"), want);
    let recorded = rec.spec.as_ref().expect("spec");
    assert_eq!(spec_difference(recorded, &wanted_spec), None);
}

#[test]
fn a_changed_limit_is_a_spec_difference() {
    let mut first = spec(InterfaceKind::Veth);
    first.bandwidth = Some(limits());
    let recorded = spec_to_record(&first);
    let mut changed = first.clone();
    changed.bandwidth = Some(Bandwidth {
        egress: None,
        ..limits()
    });
    assert_eq!(spec_difference(&recorded, &changed), Some("bandwidth"));
    changed.bandwidth = None;
    assert_eq!(spec_difference(&recorded, &changed), Some("bandwidth"));
}

#[test]
fn a_limit_without_a_burst_is_not_recorded() {
    let mut rec = attachment_to_record(
        &id(),
        &iface(InterfaceKind::Veth, MAC),
        &spec(InterfaceKind::Veth),
        0,
        7,
    )
    .expect("encodable");
    rec.bandwidth = Some(BandwidthRecord {
        ingress_rate: 10_000_000,
        ..Default::default()
    })
    .into();
    let err = check_encodable(&rec).expect_err("no burst");
    assert!(err.to_string().contains("bandwidth"), "{err}");
}
