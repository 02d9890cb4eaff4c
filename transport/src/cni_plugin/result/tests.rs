use super::*;
use knid_core::cni::Version;

fn iface(kind: &str) -> pb::InterfaceResult {
    pb::InterfaceResult {
        name: "eth0".into(),
        kind: kind.into(),
        mac: "02:00:00:00:00:05".into(),
        mtu: 1500,
        host_ifname: "kn0123456789".into(),
        ips: vec![pb::IpConfig {
            address: "10.88.0.5/24".into(),
            family: "ipv4".into(),
            gateway: "10.88.0.1".into(),
            ..Default::default()
        }],
        routes: vec![pb::Route {
            dst: "0.0.0.0/0".into(),
            gateway: "10.88.0.1".into(),
            scope: "universe".into(),
            table: 254,
            metric: 100,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn the_host_end_comes_first_and_ips_point_at_the_pod_interface() {
    let sandbox = pb::Sandbox::new();
    let r = from_sandbox(&sandbox, &iface("veth"), "/run/netns/p").expect("converts");
    assert_eq!(r.interfaces.len(), 2);
    assert_eq!(
        (
            r.interfaces[0].name.as_str(),
            r.interfaces[0].sandbox.as_str()
        ),
        ("kn0123456789", "")
    );
    assert_eq!(r.pod_interface("eth0").map(|(i, _)| i), Some(1));
    assert_eq!(r.ips[0].interface, Some(1));
    assert_eq!(r.routes[0].priority, Some(100));
    assert_eq!(r.routes[0].table, None, "main table left implicit");
    let json = r.to_json(Version::V1_1_0);
    assert_eq!(json["interfaces"][1]["mtu"], 1500);
    // A macvlan's host_ifname is its parent, which knid did not create.
    let child = from_sandbox(&sandbox, &iface("macvlan"), "/run/netns/p").expect("converts");
    assert_eq!(child.interfaces.len(), 1);
    assert_eq!(child.ips[0].interface, Some(0));
}

#[test]
fn codes_follow_the_documented_mapping() {
    let socket = Path::new("/run/knid/knid.sock");
    let rpc = |code| OneshotError::Rpc {
        code,
        message: "interfaces[0].mac: bad".into(),
    };
    let cases = [
        (rpc(Code::UNAVAILABLE), CallKind::Operation, TRY_AGAIN),
        (
            rpc(Code::DEADLINE_EXCEEDED),
            CallKind::Status,
            NOT_AVAILABLE,
        ),
        (
            rpc(Code::INVALID_ARGUMENT),
            CallKind::Operation,
            INVALID_CONFIG,
        ),
        (rpc(Code::NOT_FOUND), CallKind::Operation, UNKNOWN_CONTAINER),
        (
            rpc(Code::FAILED_PRECONDITION),
            CallKind::Operation,
            FAILED_PRECONDITION,
        ),
        (
            rpc(Code::RESOURCE_EXHAUSTED),
            CallKind::Operation,
            RESOURCE_EXHAUSTED,
        ),
        (
            rpc(Code::ALREADY_EXISTS),
            CallKind::Operation,
            ALREADY_EXISTS,
        ),
        (rpc(Code::INTERNAL), CallKind::Operation, INTERNAL),
        (rpc(Code::PERMISSION_DENIED), CallKind::Operation, INTERNAL),
    ];
    for (err, kind, want) in cases {
        let e = call_error(&err, socket, kind);
        assert_eq!(e.code, want, "{err:?}");
        assert!(e.msg.contains("interfaces[0].mac"), "{}", e.msg);
    }
    let gone = OneshotError::Connect {
        path: socket.to_owned(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    };
    let e = call_error(&gone, socket, CallKind::Operation);
    assert_eq!(e.code, TRY_AGAIN);
    assert!(e.msg.contains("/run/knid/knid.sock"), "{}", e.msg);
    assert_eq!(
        call_error(&gone, socket, CallKind::Status).code,
        NOT_AVAILABLE
    );
}
