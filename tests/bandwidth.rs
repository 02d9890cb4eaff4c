//! Native bandwidth limits end to end: a pod limited to 10 Mbit/s each way receives and sends
//! TCP at that rate (a pod without limits far faster), its tbf qdiscs and IFB exist while it is
//! attached and are gone after detach, `knictl check` names a deleted qdisc, and the limits
//! arrive through knid-cni (the `bandwidth` capability, in the CNI and in go-cni's spelling)
//! and through KNI (the pod's bandwidth annotations).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use knid_core::names::{host_ifname, ifb_ifname};
use knid_netops::NetnsHandle;
use knid_transport::client::oneshot::OneshotClient;
use knid_transport::pb::{self, kni};
use protobuf::MessageField;
use serde_json::json;
use testkit::cli::knictl_exits;
use testkit::cni::{cni_env, knid_conf, shim, tool_in};
use testkit::{TestNode, RPC};

/// 10 Mbit/s.
const LIMIT: u64 = 10_000_000;
/// 100 ms at the limit.
const BURST: u64 = 1_000_000;
/// How long each transfer sends.
const TRANSFER: Duration = Duration::from_millis(3500);
/// knictl's exit code for a difference found.
const PROBLEMS: i32 = 5;

/// Sends bulk data for [`TRANSFER`] from netns `from` to a listener on `to_ip` in netns `to`;
/// returns the rate the receiver saw, in bits/s, from its first byte to its last.
fn throughput(from: &Path, to: &Path, to_ip: IpAddr) -> f64 {
    let server = NetnsHandle::open(to).expect("open receiver netns");
    let client = NetnsHandle::open(from).expect("open sender netns");
    let listener = knid_netops::run_in(&server, || TcpListener::bind((to_ip, 0)))
        .expect("enter receiver netns")
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("address");
    let receiver = std::thread::spawn(move || {
        let (mut inbound, _) = listener.accept().expect("accept");
        inbound
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        let mut first: Option<Instant> = None;
        loop {
            let n = inbound.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            first.get_or_insert_with(Instant::now);
            total += n as u64;
        }
        let elapsed = first.map_or(Duration::ZERO, |f| f.elapsed());
        total as f64 * 8.0 / elapsed.as_secs_f64()
    });
    let mut outbound = knid_netops::run_in(&client, || {
        TcpStream::connect_timeout(&addr, Duration::from_secs(20))
    })
    .expect("enter sender netns")
    .expect("connect");
    outbound
        .set_write_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let chunk = vec![0x5au8; 64 * 1024];
    let started = Instant::now();
    while started.elapsed() < TRANSFER {
        outbound.write_all(&chunk).expect("send");
    }
    drop(outbound);
    receiver.join().expect("receiver")
}

fn assert_near_limit(rate: f64, what: &str) {
    let limit = LIMIT as f64;
    assert!(
        (limit * 0.8..=limit * 1.2).contains(&rate),
        "{what}: {:.2} Mbit/s, not within 20 % of {:.0} Mbit/s",
        rate / 1e6,
        limit / 1e6
    );
}

fn pod_ip(sandbox: &pb::Sandbox) -> IpAddr {
    let net: ipnet::IpNet = sandbox.interfaces[0]
        .ips
        .iter()
        .map(|ip| ip.address.parse::<ipnet::IpNet>().expect("cidr"))
        .find(|n| n.addr().is_ipv4())
        .expect("an IPv4 address");
    net.addr()
}

fn attach(
    node: &TestNode,
    id: &str,
    bandwidth: Option<pb::Bandwidth>,
) -> (std::path::PathBuf, pb::Sandbox) {
    let netns = node.netns(id);
    let mut req = node.attach_req(id, &netns, "eth0");
    req.interfaces[0].bandwidth = MessageField::from_option(bandwidth);
    let sandbox = node.client().attach(&req, RPC).expect("Attach");
    (netns, sandbox)
}

fn inspect_bandwidth(node: &TestNode, id: &str) -> Option<pb::Bandwidth> {
    let sandbox = node.inspect(id);
    sandbox.interfaces[0].bandwidth.clone().into_option()
}

#[test]
fn a_limited_pod_is_shaped_both_ways_and_its_qdiscs_go_with_it() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let limits = pb::Bandwidth {
        ingress_rate: LIMIT,
        ingress_burst: BURST,
        egress_rate: LIMIT,
        egress_burst: BURST,
        ..Default::default()
    };
    let (a_ns, a) = attach(&node, "bw-a", Some(limits.clone()));
    let (b_ns, b) = attach(&node, "bw-b", None);
    let (c_ns, c) = attach(&node, "bw-c", None);
    assert_eq!(
        a.interfaces[0].bandwidth.as_ref(),
        Some(&limits),
        "the result"
    );
    assert_eq!(b.interfaces[0].bandwidth.as_ref(), None);

    let host = host_ifname("bw-a", "eth0");
    let ifb = ifb_ifname("bw-a", "eth0");
    let qdiscs = node.host_qdiscs(&host);
    assert!(
        qdiscs.contains(&"tbf".to_owned()) && qdiscs.contains(&"ingress".to_owned()),
        "{host}: {qdiscs:?}"
    );
    assert_eq!(node.host_qdiscs(&ifb), vec!["tbf".to_owned()], "{ifb}");
    assert_eq!(
        node.host_link_alias(&ifb),
        Some(node.link_mark()),
        "{ifb} is marked"
    );
    let shown = tool_in(
        node.host_path(),
        "tc",
        &["-j", "qdisc", "show", "dev", &host],
    );
    assert!(
        shown.contains("\"rate\":1250000"),
        "tc sees 10 Mbit/s: {shown}"
    );

    let into_a = throughput(&b_ns, &a_ns, pod_ip(&a));
    assert_near_limit(into_a, "into the limited pod (ingress)");
    let out_of_a = throughput(&a_ns, &b_ns, pod_ip(&b));
    assert_near_limit(out_of_a, "out of the limited pod (egress)");
    let free = throughput(&b_ns, &c_ns, pod_ip(&c));
    assert!(
        free > 3.0 * LIMIT as f64,
        "without limits: {:.1} Mbit/s",
        free / 1e6
    );
    eprintln!(
        "ingress {:.2} Mbit/s, egress {:.2} Mbit/s, unlimited {:.0} Mbit/s",
        into_a / 1e6,
        out_of_a / 1e6,
        free / 1e6
    );

    // Someone deletes the ingress limit: check names it.
    tool_in(
        node.host_path(),
        "tc",
        &["qdisc", "del", "dev", &host, "root"],
    );
    let out = knictl_exits(&node, PROBLEMS, &["check", "bw-a"]);
    assert!(
        out.contains("bw-a: differs") && out.contains("bandwidth") && out.contains(&host),
        "check: {out}"
    );

    // Detach takes the qdiscs and the IFB along.
    for id in ["bw-a", "bw-b", "bw-c"] {
        node.client()
            .detach(&testkit::requests::detach_req(id), RPC)
            .expect("Detach");
    }
    assert!(
        node.host_links_with_prefix(&ifb).is_empty(),
        "the ifb is gone at once"
    );
    node.wait_no_kn_links();
    assert!(node.host_qdiscs(&host).is_empty());
}

#[test]
fn a_changed_limit_is_a_different_attach() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let limits = pb::Bandwidth {
        ingress_rate: LIMIT,
        ..Default::default()
    };
    let (netns, first) = attach(&node, "bw-same", Some(limits.clone()));
    let filled = first.interfaces[0]
        .bandwidth
        .clone()
        .into_option()
        .expect("limits");
    assert_eq!(
        filled.ingress_burst, BURST,
        "the default burst: 100 ms at the rate"
    );
    assert!(
        node.host_links_with_prefix(&ifb_ifname("bw-same", "eth0"))
            .is_empty(),
        "no ifb without an egress limit"
    );
    let mut req = node.attach_req("bw-same", &netns, "eth0");
    req.interfaces[0].bandwidth = MessageField::some(limits);
    let again = node.client().attach(&req, RPC).expect("the same Attach");
    assert_eq!(again, first, "the same request: the same answer");
    req.interfaces[0].bandwidth = MessageField::some(pb::Bandwidth {
        ingress_rate: 2 * LIMIT,
        ..Default::default()
    });
    let err = node.client().attach(&req, RPC).expect_err("changed limits");
    assert!(format!("{err}").contains("bandwidth"), "{err}");
}

#[test]
fn knid_cni_gives_the_interface_the_bandwidth_capability() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    // The CNI spelling, and go-cni's (its BandWidth struct has no JSON tags).
    for (id, bandwidth) in [
        (
            "cni-bw",
            json!({"ingressRate": LIMIT, "ingressBurst": BURST, "egressRate": 2 * LIMIT, "egressBurst": BURST}),
        ),
        (
            "gocni-bw",
            json!({"IngressRate": LIMIT, "IngressBurst": BURST, "EgressRate": 2 * LIMIT, "EgressBurst": BURST}),
        ),
    ] {
        let netns = node.netns(id);
        let mut conf = knid_conf("1.1.0", "default", node.socket());
        conf["runtimeConfig"] = json!({ "bandwidth": bandwidth });
        shim(&node, &cni_env("ADD", id, Some(&netns), "eth0"), &conf).ok("ADD");
        let got = inspect_bandwidth(&node, id).expect("limits recorded");
        assert_eq!(
            (
                got.ingress_rate,
                got.ingress_burst,
                got.egress_rate,
                got.egress_burst
            ),
            (LIMIT, BURST, 2 * LIMIT, BURST),
            "{id}"
        );
        let host = host_ifname(id, "eth0");
        assert!(node.host_qdiscs(&host).contains(&"tbf".to_owned()), "{id}");
        assert_eq!(
            node.host_qdiscs(&ifb_ifname(id, "eth0")),
            vec!["tbf".to_owned()]
        );
        shim(&node, &cni_env("DEL", id, Some(&netns), "eth0"), &conf).ok("DEL");
        assert!(node
            .host_links_with_prefix(&ifb_ifname(id, "eth0"))
            .is_empty());
    }
    // Without the capability, the pod's annotations say it.
    let netns = node.netns("cni-annot");
    let mut conf = knid_conf("1.1.0", "default", node.socket());
    conf["runtimeConfig"] = json!({
        "io.kubernetes.cri.pod-annotations": {"kubernetes.io/egress-bandwidth": "5M"}
    });
    shim(
        &node,
        &cni_env("ADD", "cni-annot", Some(&netns), "eth0"),
        &conf,
    )
    .ok("ADD");
    let got = inspect_bandwidth(&node, "cni-annot").expect("limits recorded");
    assert_eq!((got.ingress_rate, got.egress_rate), (0, 5_000_000));
    assert_eq!(got.egress_burst, i32::MAX as u64, "the dockershim's burst");
}

#[test]
fn kni_attach_interface_takes_the_bandwidth_annotations() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("kni-bw");
    let req = kni::AttachInterfaceRequest {
        id: "kni-bw".into(),
        namespace: "test".into(),
        name: "kni-bw".into(),
        isolation: MessageField::some(kni::Isolation {
            path: netns.display().to_string(),
            ..Default::default()
        }),
        annotations: HashMap::from([
            (
                "kubernetes.io/ingress-bandwidth".to_owned(),
                "10M".to_owned(),
            ),
            (
                "kubernetes.io/egress-bandwidth".to_owned(),
                "1Mi".to_owned(),
            ),
        ]),
        ..Default::default()
    };
    let mut client = OneshotClient::connect(node.socket(), RPC).expect("connect");
    let _: kni::AttachInterfaceResponse = client
        .call("kni.KNI", "AttachInterface", &req, RPC)
        .expect("AttachInterface");
    let got = inspect_bandwidth(&node, "kni-bw").expect("limits recorded");
    assert_eq!((got.ingress_rate, got.egress_rate), (LIMIT, 1 << 20));
    assert!(node
        .host_qdiscs(&host_ifname("kni-bw", "eth0"))
        .contains(&"tbf".to_owned()));

    let mut bad = req.clone();
    bad.id = "kni-bad".into();
    bad.isolation = MessageField::some(kni::Isolation {
        path: node.netns("kni-bad").display().to_string(),
        ..Default::default()
    });
    bad.annotations = HashMap::from([(
        "kubernetes.io/ingress-bandwidth".to_owned(),
        "fast".to_owned(),
    )]);
    let err = client
        .call::<_, kni::AttachInterfaceResponse>("kni.KNI", "AttachInterface", &bad, RPC)
        .expect_err("not a quantity");
    assert!(
        format!("{err}").contains("annotations[kubernetes.io/ingress-bandwidth]"),
        "{err}"
    );
}
