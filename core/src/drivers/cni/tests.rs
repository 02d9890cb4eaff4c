use super::*;

#[test]
fn a_result_fills_the_record_with_the_pod_interface() {
    let mut rec = AttachmentRecord {
        ifname: "eth0".into(),
        network: "pods".into(),
        mac: String::new(),
        mtu: 1500,
        ..Default::default()
    };
    let result = json!({
        "cniVersion": "1.0.0",
        "interfaces": [
            {"name": "cni0", "mac": "02:00:00:00:00:01"},
            {"name": "veth1234", "mac": "02:00:00:00:00:02"},
            {"name": "eth0", "mac": "0A:58:0A:01:00:05", "sandbox": "/run/netns/p"}
        ],
        "ips": [
            {"address": "10.1.0.5/24", "gateway": "10.1.0.1", "interface": 2},
            {"address": "10.9.0.5/24", "interface": 0}
        ],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"}]
    });
    record_result(&mut rec, &result).unwrap();
    assert_eq!(rec.mac, "0a:58:0a:01:00:05");
    assert_eq!(rec.ips.len(), 1, "only the pod interface's addresses");
    assert_eq!(
        (rec.ips[0].address.as_str(), rec.ips[0].gateway.as_str()),
        ("10.1.0.5/24", "10.1.0.1")
    );
    assert_eq!(
        (rec.routes[0].dst.as_str(), rec.routes[0].table),
        ("0.0.0.0/0", MAIN_TABLE)
    );
    let cni = rec.cni.as_ref().unwrap();
    assert_eq!(cni.host_interface, "veth1234");
    assert_eq!(cni.result, result.to_string());
}
