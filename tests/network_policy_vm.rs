//! NetworkPolicy for VM pods, as for runc pods: a QEMU guest (testkit's, TCG here) on a pod tap
//! (a tap beside the veth end in the sandbox, tc redirecting between them) and one on a DAN tap
//! (on the bridge in the host netns, described by Kata's DAN file), both in namespace `vms` of a
//! cluster-mode knid. A default-deny ingress policy cuts every client off the guests' echo
//! servers; an allow rule lets one client back in and not the other. Checked with real TCP
//! connections over IPv4 and IPv6.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use knid_transport::pb;
use protobuf::MessageField;
use serde_json::json;
use testkit::cluster_node::{api_on_lan, node_spec, start_cluster_node_configured, POD_NETWORK};
use testkit::dan::{read_dan, DanDeviceKind};
use testkit::guest::{self, Guest, GuestKernel, GuestNic, GuestSpec, ECHO_PORT};
use testkit::kube_api::{KubeApi, PodSpec};
use testkit::netpol::CONVERGE;
use testkit::reachability::connects;
use testkit::{wait_for, TestNode, RPC};

/// Attaches `ns/name` to the pod network (a tap when `tap` is given) and publishes its Pod.
fn pod(
    api: &KubeApi,
    node: &TestNode,
    (ns, name, role): (&str, &str, &str),
    tap: Option<pb::TapRequest>,
) -> (PathBuf, pb::Sandbox) {
    let id = format!("{ns}-{name}");
    let netns = node.netns(&id);
    let mut req = node.attach_req(&id, &netns, "eth0");
    req.interfaces[0].network = POD_NETWORK.to_owned();
    if let Some(tap) = tap {
        req.interfaces[0].kind = "tap".to_owned();
        req.interfaces[0].tap = MessageField::some(tap);
    }
    req.pod = MessageField::some(pb::PodRef {
        name: name.to_owned(),
        namespace: ns.to_owned(),
        uid: id.clone(),
        ..Default::default()
    });
    req.labels.insert("role".into(), role.into());
    let sandbox = node
        .client()
        .attach(&req, RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    api.put_pod(PodSpec {
        namespace: ns.into(),
        name: name.into(),
        labels: [("role".to_string(), role.to_string())].into(),
        node: "node-a".into(),
        ips: sandbox.interfaces[0]
            .ips
            .iter()
            .map(|ip| ip.address.split('/').next().expect("address").to_owned())
            .collect(),
        ..Default::default()
    });
    (netns, sandbox)
}

/// Boots a guest on the tap of `sandbox` (a DAN tap from its file when `dan`).
fn boot(
    kernel: &GuestKernel,
    node: &TestNode,
    vm_ns: &Path,
    sandbox: &pb::Sandbox,
    dan: bool,
    peers: &[IpAddr],
) -> (Guest, GuestNic) {
    let iface = &sandbox.interfaces[0];
    let tap = iface.tap.as_ref().expect("a tap result");
    let (nic, netns, tap_name, queue_pairs, vhost) = if dan {
        let file = read_dan(Path::new(&iface.dan_path));
        let dev = &file.devices[0];
        let DanDeviceKind::HostTap { tap_name, .. } = &dev.device;
        (
            GuestNic::from_dan(dev),
            node.host_path(),
            tap_name.clone(),
            1,
            false,
        )
    } else {
        (
            GuestNic::from_result(iface),
            vm_ns,
            tap.name.clone(),
            tap.queue_pairs,
            tap.vhost_net_ok,
        )
    };
    let guest = Guest::boot(
        kernel,
        &GuestSpec {
            netns,
            tap: &tap_name,
            queue_pairs,
            vhost,
            nic: &nic,
            ping: peers,
        },
    );
    guest.first_reply(peers);
    guest.expect_line("UP");
    (guest, nic)
}

#[test]
fn guests_on_a_pod_tap_and_a_dan_tap_are_isolated_and_let_through_like_any_pod() {
    let Some(kernel) = guest::kernel_for_test() else {
        return;
    };
    let dans = tempfile::Builder::new()
        .prefix("knid-e2e-dans-")
        .tempdir()
        .expect("DAN dir");
    let (lan, _dir, api, _port) = api_on_lan();
    api.add_node(node_spec("node-a", 1));
    let node = start_cluster_node_configured(
        &lan,
        &api,
        ("node-a", 1),
        &format!("dan_dir = \"{}\"", dans.path().display()),
    );
    wait_for("the pod CIDR", CONVERGE, || {
        node.condition("PodCIDR").status
    });
    api.put_namespace("vms", &[]);
    api.put_namespace("clients", &[]);
    let (client_ns, client) = pod(&api, &node, ("clients", "client", "client"), None);
    let (other_ns, _) = pod(&api, &node, ("clients", "other", "other"), None);
    let peers: Vec<IpAddr> = client.interfaces[0]
        .ips
        .iter()
        .map(|ip| {
            ip.address
                .split('/')
                .next()
                .expect("address")
                .parse()
                .expect("ip")
        })
        .collect();

    for dan in [false, true] {
        let name = if dan { "vm-dan" } else { "vm-tap" };
        let tap = pb::TapRequest {
            queue_pairs: 1,
            dan,
            ..Default::default()
        };
        let (vm_ns, vm) = pod(&api, &node, ("vms", name, "vm"), Some(tap));
        let (mut guest, nic) = boot(&kernel, &node, &vm_ns, &vm, dan, &peers);
        let reaches = |from: &Path, v6: bool| {
            let addr = nic.address(v6).expect("the guest's address");
            connects(from, SocketAddr::new(addr, ECHO_PORT))
        };
        for v6 in [false, true] {
            assert!(
                reaches(&client_ns, v6),
                "{name}: open before any policy (v6={v6})"
            );
        }

        api.put_network_policy("vms", "deny", json!({"podSelector": {}}))
            .expect("deny");
        for v6 in [false, true] {
            wait_for(&format!("{name} isolated (v6={v6})"), CONVERGE, || {
                !reaches(&client_ns, v6) && !reaches(&other_ns, v6)
            });
        }
        api.put_network_policy("vms", "from-client", json!({
            "podSelector": {"matchLabels": {"role": "vm"}},
            "ingress": [{"from": [{
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "clients"}},
                "podSelector": {"matchLabels": {"role": "client"}}
            }], "ports": [{"port": ECHO_PORT}]}]
        }))
        .expect("allow");
        for v6 in [false, true] {
            wait_for(
                &format!("{name} lets the client in (v6={v6})"),
                CONVERGE,
                || reaches(&client_ns, v6),
            );
            assert!(
                !reaches(&other_ns, v6),
                "{name}: the other client stays out (v6={v6})"
            );
            let addr = nic.address(v6).expect("address");
            assert_eq!(guest.echo(&client_ns, addr, "through"), "guest through");
        }
        api.delete_network_policy("vms", "from-client");
        api.delete_network_policy("vms", "deny");
        let v4 = nic.address(false).expect("v4");
        wait_for(&format!("{name} open again"), CONVERGE, || {
            reaches(&client_ns, false)
        });
        guest.power_off(&client_ns, v4);
        drop(guest);
        node.client()
            .detach(&testkit::detach_req(&format!("vms-{name}")), RPC)
            .expect("detach the VM pod");
        api.delete_pod("vms", name);
    }
    drop(node);
    drop(dans);
}
