//! What a hostile pod sends, built byte by byte and written whole out of its interface through a
//! packet socket (as a process with CAP_NET_RAW in the pod can): UDP datagrams with any source,
//! gratuitous ARP, unsolicited neighbour advertisements, router advertisements, DHCP server
//! replies; and how a test tells whether one got through (a UDP socket, a packet socket, a
//! neighbour entry).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use knid_netops::NetnsHandle;

use crate::traffic::{packet_socket, read_ready};

/// How long a test waits for a frame the guard must stop (or let through).
pub const SPOOF_WAIT: Duration = Duration::from_secs(3);
/// The Ethernet broadcast address.
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// One's-complement sum of `parts`, folded, complemented: the IPv4, UDP and ICMPv6 checksum.
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    let bytes: Vec<u8> = parts.concat();
    for pair in bytes.chunks(2) {
        let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// An IPv6 packet's header and payload, its next header `next`, hop limit `hops`.
fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hops: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    p.extend_from_slice(&[next, hops]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(payload);
    p
}

fn v6_pseudo(src: Ipv6Addr, dst: Ipv6Addr, next: u8, len: usize) -> Vec<u8> {
    let mut p = src.octets().to_vec();
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&(len as u32).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, next]);
    p
}

/// An Ethernet frame `src_mac` -> `dst_mac` carrying a UDP datagram `src` -> `dst` (one family)
/// with `payload`, checksums right.
pub fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: SocketAddr,
    dst: SocketAddr,
    payload: &[u8],
) -> Vec<u8> {
    let mut udp = src.port().to_be_bytes().to_vec();
    udp.extend_from_slice(&dst.port().to_be_bytes());
    udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            // The UDP checksum is optional over IPv4: 0.
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let sum = checksum(&[&ip]);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            ip.extend_from_slice(&udp);
            ethernet(dst_mac, src_mac, 0x0800, &ip)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let sum = checksum(&[&v6_pseudo(s, d, 17, udp.len()), &udp]);
            udp[6..8].copy_from_slice(&sum.to_be_bytes());
            ethernet(dst_mac, src_mac, 0x86dd, &ipv6(s, d, 17, 64, &udp))
        }
        _ => panic!("udp_frame: {src} and {dst} are of two families"),
    }
}

/// A gratuitous ARP request from `sha` claiming `ip` (sender and target address both `ip`),
/// broadcast.
pub fn gratuitous_arp(sha: [u8; 6], ip: Ipv4Addr) -> Vec<u8> {
    let mut arp = vec![0, 1, 0x08, 0, 6, 4, 0, 1];
    arp.extend_from_slice(&sha);
    arp.extend_from_slice(&ip.octets());
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&ip.octets());
    ethernet(BROADCAST, sha, 0x0806, &arp)
}

/// The multicast MAC of an IPv6 multicast address.
fn multicast_mac(group: Ipv6Addr) -> [u8; 6] {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

fn icmpv6_frame(src_mac: [u8; 6], src: Ipv6Addr, dst: Ipv6Addr, mut icmp: Vec<u8>) -> Vec<u8> {
    let sum = checksum(&[&v6_pseudo(src, dst, 58, icmp.len()), &icmp]);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    ethernet(
        multicast_mac(dst),
        src_mac,
        0x86dd,
        &ipv6(src, dst, 58, 255, &icmp),
    )
}

/// All nodes (ff02::1).
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// An unsolicited neighbour advertisement from `src_mac` (at `src`) saying `target` is at
/// `src_mac` (override flag set), to all nodes.
pub fn unsolicited_na(src_mac: [u8; 6], src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    // type 136, code 0, checksum, flags O (0x20), reserved
    let mut icmp = vec![136, 0, 0, 0, 0x20, 0, 0, 0];
    icmp.extend_from_slice(&target.octets());
    // Target link-layer address option.
    icmp.extend_from_slice(&[2, 1]);
    icmp.extend_from_slice(&src_mac);
    icmpv6_frame(src_mac, src, ALL_NODES, icmp)
}

/// A router advertisement from `src_mac` (at `src`, link-local) to all nodes: a default
/// router for 1800 s.
pub fn router_advertisement(src_mac: [u8; 6], src: Ipv6Addr) -> Vec<u8> {
    // type 134, code 0, checksum, hop limit 64, flags 0, lifetime 1800, reachable 0, retrans 0
    let mut icmp = vec![134, 0, 0, 0, 64, 0, 0x07, 0x08];
    icmp.extend_from_slice(&[0; 8]);
    icmp.extend_from_slice(&[1, 1]);
    icmp.extend_from_slice(&src_mac);
    icmpv6_frame(src_mac, src, ALL_NODES, icmp)
}

/// A DHCP server's reply (an offer of `offered`, BOOTP op 2) from `src` port 67, broadcast to
/// port 68; `marker` in its server host name.
pub fn dhcp_offer(src_mac: [u8; 6], src: Ipv4Addr, offered: Ipv4Addr, marker: &[u8]) -> Vec<u8> {
    let mut bootp = vec![2, 1, 6, 0, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0];
    bootp.extend_from_slice(&[0; 4]); // ciaddr
    bootp.extend_from_slice(&offered.octets()); // yiaddr
    bootp.extend_from_slice(&src.octets()); // siaddr
    bootp.extend_from_slice(&[0; 4]); // giaddr
    bootp.extend_from_slice(&[0; 16]); // chaddr
    let mut sname = marker.to_vec();
    sname.resize(64, 0);
    bootp.extend_from_slice(&sname);
    bootp.extend_from_slice(&[0; 128]); // file
    bootp.extend_from_slice(&[99, 130, 83, 99, 53, 1, 2, 255]); // cookie, offer, end
    udp_frame(
        src_mac,
        BROADCAST,
        SocketAddr::new(src.into(), 67),
        SocketAddr::new(Ipv4Addr::BROADCAST.into(), 68),
        &bootp,
    )
}

/// A packet socket on link `ifname` of netns `path`, to send whole frames out of it (or catch
/// what it receives).
pub fn wire(path: &Path, ifname: &str) -> OwnedFd {
    let ns = NetnsHandle::open(path).expect("open netns");
    let index = crate::kernel::link_in(path, ifname)
        .unwrap_or_else(|| panic!("no {ifname} in {}", path.display()))
        .index;
    packet_socket(&ns, index)
}

/// Writes `frame` on `fd`.
pub fn send(fd: &OwnedFd, frame: &[u8]) {
    nix::unistd::write(fd, frame).expect("send a frame");
}

/// A UDP socket bound to `listen` in netns `path`, non-blocking reads with a short timeout.
pub fn udp_listener(path: &Path, listen: SocketAddr) -> UdpSocket {
    let ns = NetnsHandle::open(path).expect("open netns");
    let socket = knid_netops::run_in(&ns, || UdpSocket::bind(listen))
        .expect("enter netns")
        .unwrap_or_else(|e| panic!("bind {listen} in {}: {e}", path.display()));
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("read timeout");
    socket
}

/// Sends `frame` on `fd` every 250 ms until `caught` says it arrived (true) or [`SPOOF_WAIT`]
/// passed (false).
pub fn delivered(fd: &OwnedFd, frame: &[u8], mut caught: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    let mut last: Option<Instant> = None;
    while started.elapsed() < SPOOF_WAIT {
        if last.is_none_or(|t| t.elapsed() >= Duration::from_millis(250)) {
            send(fd, frame);
            last = Some(Instant::now());
        }
        if caught() {
            return true;
        }
    }
    false
}

/// Whether `socket` received a datagram carrying `marker` (reads what is queued, waiting up to
/// 100 ms); returns the sender of the first one.
pub fn received_from(socket: &UdpSocket, marker: &[u8]) -> Option<SocketAddr> {
    let mut buf = [0u8; 2048];
    while let Ok((n, from)) = socket.recv_from(&mut buf) {
        if buf[..n].windows(marker.len()).any(|w| w == marker) {
            return Some(from);
        }
    }
    None
}

/// Whether the packet socket `fd` caught a frame for which `matches` holds (reads what is
/// queued, waiting up to 50 ms for each).
pub fn caught(fd: &OwnedFd, matches: impl Fn(&[u8]) -> bool) -> bool {
    let mut buf = vec![0u8; 4096];
    while let Some(n) = read_ready(fd.as_fd(), &mut buf) {
        if matches(&buf[..n]) {
            return true;
        }
    }
    false
}

/// The link-layer address of neighbour `ip` on any link of netns `path`, as `ip neigh` shows
/// it; `None` when there is no entry with one.
pub fn neighbour_mac(path: &Path, ip: IpAddr) -> Option<String> {
    let out = crate::cni::tool_in(path, "ip", &["neigh", "show", "to", &ip.to_string()]);
    let words: Vec<&str> = out.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == "lladdr")
        .and_then(|i| words.get(i + 1))
        .map(|m| (*m).to_owned())
}

/// The EUI-64 link-local address of `mac`, as a pod derives it.
pub fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    let m = mac;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 2,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

/// `mac` as `ip neigh` prints it.
pub fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// How many frames `node`'s source guards dropped for `reason` (`knid_antispoof_dropped_total`,
/// through `knictl metrics`).
pub fn dropped(node: &crate::node::TestNode, reason: &str) -> u64 {
    let name = "knid_antispoof_dropped_total";
    let text = crate::cli::knictl_ok(node, &["metrics", name]);
    let prefix = format!("{name}{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {reason} count in:\n{text}"))
}
