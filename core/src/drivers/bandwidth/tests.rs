use super::*;

#[test]
fn tbf_converts_bits_to_bytes() {
    let limit = RateLimit {
        rate: 10_000_000,
        burst: 1_000_000,
    };
    assert_eq!(
        tbf(&limit),
        Tbf {
            rate: 1_250_000,
            burst: 125_000
        }
    );
}

#[test]
fn tbf_never_asks_for_zero() {
    let tiny = RateLimit { rate: 7, burst: 7 };
    assert_eq!(tbf(&tiny), Tbf { rate: 1, burst: 1 });
}

#[test]
fn only_a_record_with_an_egress_limit_has_an_ifb() {
    let mut rec = AttachmentRecord {
        sandbox_id: "sb".into(),
        ifname: "eth0".into(),
        kind: "veth".into(),
        mac: "02:00:00:00:00:01".into(),
        ..Default::default()
    };
    assert_eq!(ifb_of(&rec), None);
    rec.bandwidth = Some(knid_store::BandwidthRecord {
        ingress_rate: 1_000_000,
        ingress_burst: 100_000,
        ..Default::default()
    })
    .into();
    assert_eq!(ifb_of(&rec), None, "ingress alone needs no ifb");
    rec.bandwidth = Some(knid_store::BandwidthRecord {
        egress_rate: 1_000_000,
        egress_burst: 100_000,
        ..Default::default()
    })
    .into();
    assert_eq!(ifb_of(&rec), Some(names::ifb_ifname("sb", "eth0")));
}

#[test]
fn only_veth_tap_and_cni_take_limits() {
    use crate::model::{IfName, InterfaceKind, InterfaceSpec};
    let spec = InterfaceSpec {
        name: IfName::parse("eth0").expect("ifname"),
        network: "default".into(),
        kind: None,
        mac: None,
        mtu: None,
        static_ips: Vec::new(),
        tap: None,
        device: None,
        bandwidth: Some(Bandwidth {
            ingress: Some(RateLimit {
                rate: 10_000_000,
                burst: 1_000_000,
            }),
            egress: None,
        }),
    };
    for kind in [InterfaceKind::Veth, InterfaceKind::Tap, InterfaceKind::Cni] {
        assert_eq!(super::super::check_request(kind, &spec), Ok(()), "{kind:?}");
    }
    for kind in [
        InterfaceKind::Macvlan,
        InterfaceKind::Ipvlan,
        InterfaceKind::HostDevice,
    ] {
        let (field, _) = super::super::check_request(kind, &spec).expect_err("refused");
        assert_eq!(field, "bandwidth", "{kind:?}");
    }
}
