//! The NetworkPolicy table against real traffic: a router namespace forwarding between two pod
//! namespaces (routed over their own veth links, or bridged on one Linux bridge), TCP, UDP
//! and ICMP allowed and denied exactly as the installed state says.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use knid_netops::nft::{Allow, Direction, Nft, PolicyState, PortRange};
use knid_netops::{run_in, sysctl, NetnsHandle, Route, VethEnd, VethSpec};

use crate::common::{in_private_netns, new_netns, rtnl};

const TABLE: &str = "knid-policy";
/// Long enough for an allowed connection on a private link; a denied one is given up then.
const PATIENCE: Duration = Duration::from_millis(800);

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

/// Two pod namespaces and their addresses, of one family.
struct Lab {
    a: NetnsHandle,
    b: NetnsHandle,
    /// Per family (IPv4, IPv6): pod a's and pod b's address.
    addrs: [(IpAddr, IpAddr); 2],
}

impl Lab {
    fn pair(&self, v6: bool) -> (IpAddr, IpAddr) {
        self.addrs[usize::from(v6)]
    }
}

/// Settings of a namespace before its links are made: no DAD (addresses usable at once),
/// ICMP echo sockets for root.
fn quiet_ipv6_and_ping() {
    for key in [
        "net/ipv6/conf/all/accept_dad",
        "net/ipv6/conf/default/accept_dad",
    ] {
        sysctl::write(key, "0").expect("turn DAD off");
    }
    sysctl::write("net/ipv4/ping_group_range", "0 0").expect("allow ping sockets");
}

/// Creates `host` in the router namespace (the calling thread's) with `eth0` in `pod`, up; the
/// pod end gets `addrs`, and default routes via `gateways` when routed.
fn plug(
    host: &str,
    pod: &NetnsHandle,
    controller: Option<u32>,
    addrs: [&str; 2],
    gateways: Option<[IpAddr; 2]>,
) {
    let mut rt = rtnl();
    let end = |name: &str| VethEnd {
        name: name.into(),
        mtu: None,
        mac: None,
    };
    rt.create_veth(&VethSpec {
        host: end(host),
        peer: end("eth0"),
        peer_netns: Some(pod),
        host_controller: controller,
    })
    .expect("create veth");
    let index = rt
        .link_by_name(host)
        .expect("dump links")
        .expect("host end")
        .index;
    rt.set_up(index).expect("host end up");
    run_in(pod, || {
        let mut rt = rtnl();
        let eth0 = rt
            .link_by_name("eth0")
            .expect("dump links")
            .expect("pod end")
            .index;
        rt.set_up(eth0).expect("set link up");
        for a in addrs {
            rt.add_address(eth0, a.parse().expect("valid address"))
                .expect("add address");
        }
        for gw in gateways.into_iter().flatten() {
            let mut route = Route::default_via(gw, eth0);
            route.onlink = true;
            rt.add_route(&route).expect("add route");
        }
    })
    .expect("enter pod netns");
}

fn pods() -> (NetnsHandle, NetnsHandle) {
    quiet_ipv6_and_ping();
    let a = new_netns();
    let b = new_netns();
    for pod in [&a, &b] {
        run_in(pod, quiet_ipv6_and_ping).expect("enter pod netns");
    }
    (a, b)
}

/// The calling thread's namespace routes between pod a (10.0.1.2, fd00:1::2) and pod b
/// (10.0.2.2, fd00:2::2), each on its own veth link.
fn routed() -> Lab {
    let (a, b) = pods();
    sysctl::enable_forwarding().expect("forwarding");
    let mut rt = rtnl();
    for (i, pod) in [(1, &a), (2, &b)] {
        let host = format!("r{i}");
        plug(
            &host,
            pod,
            None,
            [&format!("10.0.{i}.2/24"), &format!("fd00:{i}::2/64")],
            Some([ip(&format!("10.0.{i}.1")), ip(&format!("fd00:{i}::1"))]),
        );
        let index = rt
            .link_by_name(&host)
            .expect("dump links")
            .expect("host end")
            .index;
        for net in [format!("10.0.{i}.1/24"), format!("fd00:{i}::1/64")] {
            rt.add_address(index, net.parse().expect("valid address"))
                .expect("add address");
        }
    }
    Lab {
        a,
        b,
        addrs: [
            (ip("10.0.1.2"), ip("10.0.2.2")),
            (ip("fd00:1::2"), ip("fd00:2::2")),
        ],
    }
}

/// Pods a (10.0.0.2, fd00::2) and b (10.0.0.3, fd00::3) on bridge `br0` of the calling
/// thread's namespace: their traffic is bridged, never routed.
fn bridged() -> Lab {
    let (a, b) = pods();
    let mut rt = rtnl();
    rt.create_bridge("br0", None).expect("create bridge");
    let br = rt
        .link_by_name("br0")
        .expect("dump links")
        .expect("bridge")
        .index;
    rt.set_up(br).expect("set link up");
    for (i, pod) in [(2, &a), (3, &b)] {
        plug(
            &format!("p{i}"),
            pod,
            Some(br),
            [&format!("10.0.0.{i}/24"), &format!("fd00::{i}/64")],
            None,
        );
    }
    Lab {
        a,
        b,
        addrs: [
            (ip("10.0.0.2"), ip("10.0.0.3")),
            (ip("fd00::2"), ip("fd00::3")),
        ],
    }
}

/// A TCP connection from `from` to a listener on `to`:`port` in `server`: the two ends, or
/// `None` when the handshake did not finish in time.
fn tcp(
    from: &NetnsHandle,
    server: &NetnsHandle,
    to: IpAddr,
    port: u16,
) -> Option<(TcpStream, TcpStream)> {
    let addr = SocketAddr::new(to, port);
    let listener = run_in(server, || TcpListener::bind(addr))
        .expect("enter netns")
        .unwrap_or_else(|e| panic!("listen on {addr}: {e}"));
    let client = run_in(from, || TcpStream::connect_timeout(&addr, PATIENCE))
        .expect("enter netns")
        .ok()?;
    let (server_end, _) = listener.accept().expect("accept a finished handshake");
    Some((client, server_end))
}

/// Whether `check` succeeds within a few tries: what must pass is not failed by one slow try
/// on a loaded machine (a denial is still one try: it waits its whole patience anyway).
fn allowed(check: impl Fn() -> bool) -> bool {
    (0..4).any(|_| check())
}

fn tcp_ok(lab: &Lab, from_a: bool, to: IpAddr, port: u16) -> bool {
    let (from, server) = if from_a {
        (&lab.a, &lab.b)
    } else {
        (&lab.b, &lab.a)
    };
    tcp(from, server, to, port).is_some()
}

/// Whether a datagram from a fresh source port in `from` reaches `to`:`port` in `server`.
fn udp_ok(from: &NetnsHandle, server: &NetnsHandle, to: IpAddr, port: u16) -> bool {
    let addr = SocketAddr::new(to, port);
    let rx = run_in(server, || UdpSocket::bind(addr))
        .expect("bind udp socket")
        .expect("bind udp socket");
    rx.set_read_timeout(Some(PATIENCE)).expect("read timeout");
    let unspecified: IpAddr = if to.is_ipv6() {
        ip("::")
    } else {
        ip("0.0.0.0")
    };
    let tx = run_in(from, || UdpSocket::bind(SocketAddr::new(unspecified, 0)))
        .expect("enter netns")
        .expect("bind udp socket");
    tx.send_to(b"policy", addr).expect("send datagram");
    let mut buf = [0; 16];
    rx.recv_from(&mut buf).is_ok()
}

/// Whether an ICMP echo from `from` to `to` is answered.
fn ping_ok(from: &NetnsHandle, to: IpAddr) -> bool {
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockProtocol, SockType};
    let (family, proto, echo) = if to.is_ipv6() {
        (AddressFamily::Inet6, SockProtocol::IcmpV6, 128)
    } else {
        (AddressFamily::Inet, SockProtocol::Icmp, 8)
    };
    let fd = run_in(from, || {
        socket(family, SockType::Datagram, SockFlag::empty(), proto)
    })
    .expect("enter netns")
    .expect("ICMP echo socket");
    let sock = UdpSocket::from(fd);
    sock.set_read_timeout(Some(PATIENCE)).expect("read timeout");
    // The kernel fills in the identifier and checksum of an echo socket's requests.
    sock.send_to(&[echo, 0, 0, 0, 0, 0, 0, 1], SocketAddr::new(to, 0))
        .expect("send echo");
    let mut buf = [0; 64];
    sock.recv(&mut buf).is_ok()
}

fn allow(
    direction: Direction,
    pod: IpAddr,
    peers: (IpAddr, IpAddr),
    ports: Option<(u8, u16, u16)>,
) -> Allow {
    Allow {
        direction,
        pod,
        peers,
        ports: ports.map(|(protocol, first, last)| PortRange {
            protocol,
            first,
            last,
        }),
    }
}

fn state(isolated: &[(Direction, IpAddr)], allows: &[Allow]) -> PolicyState {
    PolicyState {
        isolated: isolated.iter().copied().collect(),
        allows: allows.iter().copied().collect(),
    }
}

fn drops(nft: &mut Nft, direction: Direction, pod: IpAddr) -> Option<u64> {
    nft.policy_drops(TABLE)
        .expect("read drop counters")
        .into_iter()
        .find(|d| d.direction == direction && d.pod == pod)
        .map(|d| d.packets)
}

const TCP: u8 = 6;
const UDP: u8 = 17;
use Direction::{Egress, Ingress};

/// Every case of one family through the routed lab.
fn routed_policy_applies(v6: bool) {
    let lab = routed();
    let (a, b) = lab.pair(v6);
    let mut nft = Nft::open().expect("open nf_tables socket");
    assert_eq!(nft.policy_state(TABLE).expect("read policy table"), None);
    assert_eq!(nft.policy_drops(TABLE).expect("read drop counters"), []);

    // Nothing isolated: everything flows.
    let open = PolicyState::default();
    nft.replace_policy(TABLE, &open)
        .expect("replace policy table");
    assert!(allowed(|| tcp_ok(&lab, true, b, 7000)), "open: a -> b");
    assert!(allowed(|| ping_ok(&lab.a, b)), "open: ping a -> b");

    // Ingress only: b takes TCP 8080-8081 and UDP 5353 from a.
    let s1 = state(
        &[(Ingress, b)],
        &[
            allow(Ingress, b, (a, a), Some((TCP, 8080, 8081))),
            allow(Ingress, b, (a, a), Some((UDP, 5353, 5353))),
        ],
    );
    nft.update_policy(TABLE, &open, &s1)
        .expect("update policy table");
    // nft reads the table back as written (when installed: a cross-check only).
    if let Ok(out) = std::process::Command::new("nft")
        .args(["list", "table", "inet", TABLE])
        .output()
    {
        let listing = String::from_utf8_lossy(&out.stdout);
        for want in [
            format!("{b} . {a} . tcp . 8080-8081"),
            format!("{b} : goto drop-ingress-{b}"),
            "ct state established,related accept".into(),
            "icmpv6 type 133-137 accept".into(),
            "meta l4proto . th dport @ingress-ports".into(),
        ] {
            assert!(listing.contains(&want), "{want:?} in\n{listing}");
        }
    }
    assert_eq!(
        nft.policy_state(TABLE).expect("read policy table"),
        Some(s1.normalized())
    );
    assert_eq!(drops(&mut nft, Ingress, b), Some(0));
    assert!(
        allowed(|| tcp_ok(&lab, true, b, 8080)),
        "ingress: allowed port"
    );
    assert!(
        allowed(|| tcp_ok(&lab, true, b, 8081)),
        "ingress: last port of the range"
    );
    assert!(
        !tcp_ok(&lab, true, b, 8082),
        "ingress: port after the range"
    );
    assert!(
        allowed(|| udp_ok(&lab.a, &lab.b, b, 5353)),
        "ingress: allowed UDP port"
    );
    assert!(!udp_ok(&lab.a, &lab.b, b, 5354), "ingress: other UDP port");
    assert!(!ping_ok(&lab.a, b), "ingress: ping needs an any-port allow");
    assert!(
        allowed(|| tcp_ok(&lab, false, a, 7000)),
        "ingress: b -> a (a not isolated)"
    );
    let dropped = drops(&mut nft, Ingress, b).expect("b's counter");
    // The SYN to 8082, the datagram to 5354, the echo request; retransmits may add.
    assert!(dropped >= 3, "{dropped} drops counted");

    // An allowed connection survives a change that denies new ones.
    let (mut client, mut server) = tcp(&lab.a, &lab.b, b, 8080).expect("allowed connection");
    // Egress only: a may reach b on TCP 9000; b is no longer isolated, its counter goes.
    let s2 = state(
        &[(Egress, a)],
        &[allow(Egress, a, (b, b), Some((TCP, 9000, 9000)))],
    );
    nft.update_policy(TABLE, &s1, &s2)
        .expect("update policy table");
    assert_eq!(
        nft.policy_state(TABLE).expect("read policy table"),
        Some(s2.normalized())
    );
    assert_eq!(drops(&mut nft, Ingress, b), None);
    assert_eq!(drops(&mut nft, Egress, a), Some(0));
    client
        .set_read_timeout(Some(PATIENCE))
        .expect("read timeout");
    server
        .set_read_timeout(Some(PATIENCE))
        .expect("read timeout");
    client
        .write_all(b"still")
        .expect("write to established connection");
    let mut buf = [0; 5];
    server
        .read_exact(&mut buf)
        .expect("established flow goes on");
    server
        .write_all(b"there")
        .expect("write to established connection");
    client.read_exact(&mut buf).expect("and answers");
    assert!(
        !tcp_ok(&lab, true, b, 8080),
        "egress: a new connection to 8080 is denied"
    );
    assert!(
        allowed(|| tcp_ok(&lab, true, b, 9000)),
        "egress: allowed port"
    );
    assert!(!tcp_ok(&lab, true, b, 9001), "egress: other port");
    assert!(
        !udp_ok(&lab.a, &lab.b, b, 9000),
        "egress: UDP to a TCP-only port"
    );
    assert!(!ping_ok(&lab.a, b), "egress: ping");
    assert!(
        allowed(|| tcp_ok(&lab, false, a, 7000)),
        "egress: b -> a, a's replies established"
    );
    assert!(drops(&mut nft, Egress, a).expect("a's counter") >= 4);

    // Both ends isolated: a may send anything to b, b takes TCP 80-90 from a's /24 or /64.
    let peers = if v6 {
        (ip("fd00:1::"), ip("fd00:1::ffff"))
    } else {
        (ip("10.0.1.0"), ip("10.0.1.255"))
    };
    let s3 = state(
        &[(Egress, a), (Ingress, b)],
        &[
            allow(Egress, a, (b, b), None),
            allow(Ingress, b, peers, Some((TCP, 80, 90))),
        ],
    );
    nft.update_policy(TABLE, &s2, &s3)
        .expect("update policy table");
    assert!(
        allowed(|| tcp_ok(&lab, true, b, 85)),
        "both: allowed both ways"
    );
    assert!(
        !tcp_ok(&lab, true, b, 91),
        "both: egress allows, ingress does not"
    );
    assert!(!ping_ok(&lab.a, b), "both: ingress allows ports only");
    let mut s4 = s3.clone();
    s4.allows.insert(allow(Ingress, b, peers, None));
    nft.update_policy(TABLE, &s3, &s4)
        .expect("update policy table");
    assert!(allowed(|| ping_ok(&lab.a, b)), "both: any-port allows ping");
    assert!(
        allowed(|| tcp_ok(&lab, true, b, 91)),
        "both: any-port allows every port"
    );
    // Egress narrowed to TCP 85: ingress allows 86, egress not.
    let s5 = state(
        &[(Egress, a), (Ingress, b)],
        &[
            allow(Egress, a, (b, b), Some((TCP, 85, 85))),
            allow(Ingress, b, peers, Some((TCP, 80, 90))),
        ],
    );
    nft.update_policy(TABLE, &s4, &s5)
        .expect("update policy table");
    assert!(allowed(|| tcp_ok(&lab, true, b, 85)));
    assert!(
        !tcp_ok(&lab, true, b, 86),
        "both: ingress allows, egress does not"
    );
    assert_eq!(
        nft.policy_state(TABLE).expect("read policy table"),
        Some(s5.normalized())
    );

    nft.delete_table(TABLE).expect("delete table");
    assert!(
        allowed(|| tcp_ok(&lab, true, b, 86)),
        "table gone: open again"
    );
}

#[test]
fn routed_ipv4_pods_get_exactly_the_flows_the_policy_allows() {
    in_private_netns("policy_routed_v4", || routed_policy_applies(false));
}

#[test]
fn routed_ipv6_pods_get_exactly_the_flows_the_policy_allows() {
    in_private_netns("policy_routed_v6", || routed_policy_applies(true));
}

#[test]
fn bridged_pod_to_pod_traffic_is_enforced_through_br_netfilter() {
    in_private_netns("policy_bridged", || {
        let lab = bridged();
        // br_netfilter hands bridged IP frames to the inet hooks only while these are on
        // (the default in a new namespace; a host may turn them off).
        for key in [
            "net/bridge/bridge-nf-call-iptables",
            "net/bridge/bridge-nf-call-ip6tables",
        ] {
            assert_eq!(sysctl::read(key).unwrap(), "1", "{key}");
        }
        let mut nft = Nft::open().unwrap();
        let mut isolated = Vec::new();
        let mut allows = Vec::new();
        for v6 in [false, true] {
            let (a, b) = lab.pair(v6);
            isolated.push((Ingress, b));
            allows.push(allow(Ingress, b, (a, a), Some((TCP, 8080, 8080))));
        }
        let s = state(&isolated, &allows);
        nft.replace_policy(TABLE, &s).unwrap();
        for v6 in [false, true] {
            let (_, b) = lab.pair(v6);
            let before = drops(&mut nft, Ingress, b).expect("counter");
            assert!(
                allowed(|| tcp_ok(&lab, true, b, 8080)),
                "bridged v6={v6}: allowed"
            );
            assert!(!tcp_ok(&lab, true, b, 8081), "bridged v6={v6}: denied");
            assert!(!ping_ok(&lab.a, b), "bridged v6={v6}: ping denied");
            let after = drops(&mut nft, Ingress, b).expect("counter");
            assert!(after >= before + 2, "bridged v6={v6}: {before} -> {after}");
            assert!(
                allowed(|| tcp_ok(&lab, false, lab.pair(v6).0, 7000)),
                "bridged v6={v6}: b -> a"
            );
        }
        // The same frames bypass every inet hook once the namespace's switch is off: what
        // enforces bridged traffic is br_netfilter, nothing else.
        let (_, b) = lab.pair(false);
        sysctl::write("net/bridge/bridge-nf-call-iptables", "0").unwrap();
        assert!(
            allowed(|| tcp_ok(&lab, true, b, 8081)),
            "bridge-nf-call-iptables 0: not enforced"
        );
        sysctl::write("net/bridge/bridge-nf-call-iptables", "1").unwrap();
        assert!(!tcp_ok(&lab, true, b, 8081), "back on: enforced");
    });
}

/// A reproducible state over a few pods and overlapping ranges of both families.
fn generated(seed: u64, n: usize) -> PolicyState {
    let mut x = seed;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut s = PolicyState::default();
    for _ in 0..n {
        let v6 = next(2) == 1;
        let pod = if v6 {
            ip(&format!("fd00::{}", 1 + next(4)))
        } else {
            ip(&format!("10.88.0.{}", 1 + next(4)))
        };
        let dir = Direction::ALL[next(2) as usize];
        if next(3) == 0 {
            s.isolated.insert((dir, pod));
        }
        let first = next(64);
        let last = first + next(16);
        let peer = |n: u64| {
            if v6 {
                ip(&format!("fd01::{n:x}"))
            } else {
                ip(&format!("10.99.0.{n}"))
            }
        };
        let ports = match next(3) {
            0 => None,
            _ => {
                let p = 80 + next(20) as u16;
                Some(([TCP, UDP, 132][next(3) as usize], p, p + next(10) as u16))
            }
        };
        s.allows
            .insert(allow(dir, pod, (peer(first), peer(last)), ports));
    }
    s
}

#[test]
fn an_update_leaves_the_kernel_as_a_replace_does_and_a_wrong_from_changes_nothing() {
    in_private_netns("policy_update_equals_replace", || {
        let mut nft = Nft::open().unwrap();
        let mut from = PolicyState::default();
        nft.replace_policy("updated", &from).unwrap();
        for step in 0..6 {
            let to = generated(step * 7919 + 1, 40);
            nft.update_policy("updated", &from, &to).unwrap();
            nft.replace_policy("replaced", &to).unwrap();
            let updated = nft.policy_state("updated").unwrap();
            assert_eq!(updated, Some(to.normalized()), "step {step}");
            assert_eq!(
                updated,
                nft.policy_state("replaced").unwrap(),
                "step {step}"
            );
            let chains = |nft: &mut Nft, t: &str| {
                let mut c = nft.table(t).unwrap().expect("table").chains;
                c.sort();
                c
            };
            assert_eq!(
                chains(&mut nft, "updated"),
                chains(&mut nft, "replaced"),
                "step {step}"
            );
            let counted: Vec<_> = nft
                .policy_drops("updated")
                .unwrap()
                .into_iter()
                .map(|d| (d.direction, d.pod))
                .collect();
            assert_eq!(counted, to.isolated.iter().copied().collect::<Vec<_>>());
            from = to;
        }
        // From a state the table does not hold: refused whole.
        let wrong = generated(4242, 10);
        let err = nft
            .update_policy("updated", &wrong, &PolicyState::default())
            .unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert_eq!(
            nft.policy_state("updated").unwrap(),
            Some(from.normalized())
        );
        // An allow the table cannot hold is refused before anything is sent.
        let mut bad = from.clone();
        bad.allows.insert(allow(
            Egress,
            ip("10.88.0.1"),
            (ip("fd00::1"), ip("fd00::2")),
            None,
        ));
        let err = nft.replace_policy("updated", &bad).unwrap_err();
        assert_eq!(err.errno(), None, "{err}");
        assert_eq!(
            nft.policy_state("updated").unwrap(),
            Some(from.normalized())
        );
    });
}

#[test]
fn twenty_thousand_allows_go_in_one_transaction_and_one_more_in_a_small_update() {
    in_private_netns("policy_twenty_thousand", || {
        let mut s = PolicyState::default();
        for p in 0..100u32 {
            let pod = ip(&format!("10.88.{}.{}", p / 250, 1 + p % 250));
            s.isolated.insert((Ingress, pod));
            s.isolated.insert((Egress, pod));
            for j in 0..200u32 {
                // Peers two apart: no two ranges touch, nothing merges.
                let peer = IpAddr::from((0x0a63_0000u32 + p * 512 + 2 * j).to_be_bytes());
                let (direction, ports) = match j % 4 {
                    0 => (Ingress, None),
                    1 => (Egress, None),
                    2 => (Ingress, Some((TCP, 1000 + j as u16, 1000 + j as u16))),
                    _ => (Egress, Some((UDP, 2000, 2000 + j as u16))),
                };
                s.allows.insert(allow(direction, pod, (peer, peer), ports));
            }
        }
        assert_eq!(s.allows.len(), 20_000);
        assert_eq!(s.normalized().allows.len(), 20_000);
        let mut nft = Nft::open().unwrap();
        let started = Instant::now();
        nft.replace_policy(TABLE, &s).unwrap();
        let replace = started.elapsed();
        let started = Instant::now();
        let read = nft.policy_state(TABLE).unwrap();
        let readback = started.elapsed();
        assert_eq!(read.as_ref().map(|r| r.allows.len()), Some(20_000));
        assert_eq!(read, Some(s.normalized()));
        let mut more = s.clone();
        more.allows.insert(allow(
            Ingress,
            ip("10.88.0.1"),
            (ip("10.77.0.0"), ip("10.77.0.255")),
            Some((TCP, 443, 443)),
        ));
        let started = Instant::now();
        nft.update_policy(TABLE, &s, &more).unwrap();
        let update = started.elapsed();
        assert_eq!(nft.policy_state(TABLE).unwrap(), Some(more.normalized()));
        println!(
            "policy table of 20,000 allows and 200 isolations: replace {replace:?}, \
             read back {readback:?}, update adding one allow {update:?}"
        );
    });
}
