//! Traffic through what knid set up: a TCP exchange between two network namespaces, and raw
//! Ethernet test frames sent and caught with packet sockets, each step bounded by a timeout.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use knid_netops::NetnsHandle;

/// Opens a TCP connection from netns `client_ns` to a listener bound to `server_ip` in
/// `server_ns` (on scoped threads that enter them) and exchanges bytes both ways, every step
/// bounded by a timeout. Returns the client address the server saw.
pub fn tcp_exchange(server_ns: &Path, server_ip: IpAddr, client_ns: &Path) -> IpAddr {
    tcp_via(server_ns, SocketAddr::new(server_ip, 0), client_ns, None)
}

/// A TCP exchange from `client_ns` with a listener on `listen` in `server_ns`, reached at
/// `connect` (a translated address, e.g. a host port) or, when `None`, at the listener's own
/// address. Returns the client address the server saw.
pub fn tcp_via(
    server_ns: &Path,
    listen: SocketAddr,
    client_ns: &Path,
    connect: Option<SocketAddr>,
) -> IpAddr {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    let server = NetnsHandle::open(server_ns).expect("open server netns");
    let client = NetnsHandle::open(client_ns).expect("open client netns");
    // A socket stays in the netns it was created in, whichever thread uses it later.
    let listener = knid_netops::run_in(&server, || TcpListener::bind(listen))
        .expect("enter server netns")
        .unwrap_or_else(|e| panic!("bind a listener to {listen}: {e}"));
    let addr: SocketAddr =
        connect.unwrap_or_else(|| listener.local_addr().expect("listener address"));
    let mut outbound = knid_netops::run_in(&client, || {
        TcpStream::connect_timeout(&addr, Duration::from_secs(20))
    })
    .expect("enter client netns")
    .unwrap_or_else(|e| {
        panic!(
            "connect from {} to {addr} in {}: {e}",
            client_ns.display(),
            server_ns.display()
        )
    });
    let (mut inbound, peer) = listener.accept().expect("accept");
    for stream in [&outbound, &inbound] {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        stream
            .set_write_timeout(Some(Duration::from_secs(20)))
            .expect("write timeout");
    }
    outbound.write_all(b"ping").expect("send ping");
    let mut buf = [0u8; 4];
    inbound.read_exact(&mut buf).expect("receive ping");
    assert_eq!(&buf, b"ping", "bytes received by {addr}");
    inbound.write_all(b"pong").expect("send pong");
    outbound.read_exact(&mut buf).expect("receive pong");
    assert_eq!(&buf, b"pong", "bytes received back from {addr}");
    peer.ip()
}

/// A UDP datagram from `client_ns` to a socket on `listen` in `server_ns`, reached at
/// `connect`, answered back to the client. Returns the client address the server saw, or
/// `None` when nothing arrived within a few seconds (a closed port).
pub fn udp_via(
    server_ns: &Path,
    listen: SocketAddr,
    client_ns: &Path,
    connect: SocketAddr,
) -> Option<IpAddr> {
    let (rx, tx) = udp_sockets(server_ns, listen, client_ns, connect.is_ipv6());
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    tx.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    // Datagrams may be lost while neighbours resolve: send again until one arrives.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        tx.send_to(b"ping", connect).expect("send datagram");
        if let Ok((n, peer)) = rx.recv_from(&mut buf) {
            assert_eq!(&buf[..n], b"ping");
            rx.send_to(b"pong", peer).expect("answer datagram");
            let (n, _) = tx
                .recv_from(&mut buf)
                .expect("answer back through the node");
            assert_eq!(&buf[..n], b"pong");
            return Some(peer.ip());
        }
    }
    None
}

/// A UDP socket bound to `listen` in `server_ns`, and one bound to any address of the family in
/// `client_ns`.
fn udp_sockets(
    server_ns: &Path,
    listen: SocketAddr,
    client_ns: &Path,
    v6: bool,
) -> (std::net::UdpSocket, std::net::UdpSocket) {
    use std::net::UdpSocket;

    let server = NetnsHandle::open(server_ns).expect("open server netns");
    let client = NetnsHandle::open(client_ns).expect("open client netns");
    let rx = knid_netops::run_in(&server, || UdpSocket::bind(listen))
        .expect("enter server netns")
        .unwrap_or_else(|e| panic!("bind UDP {listen}: {e}"));
    let any: SocketAddr = if v6 {
        "[::]:0".parse().expect("address")
    } else {
        "0.0.0.0:0".parse().expect("address")
    };
    let tx = knid_netops::run_in(&client, || UdpSocket::bind(any))
        .expect("enter client netns")
        .expect("bind UDP client");
    (rx, tx)
}

/// IEEE 802 local experimental ethertype of [`test_frame`]s: the stack ignores it, so only test
/// frames carry it.
pub const ETHERTYPE_TEST: [u8; 2] = [0x88, 0xb5];
/// How long a test frame may take to cross; [`exchange_frames`] sends it again every
/// [`FRAME_RESEND`] meanwhile (a bridge port may not forward yet).
pub const FRAME_WAIT: Duration = Duration::from_secs(5);
/// Interval between the sends of [`exchange_frames`].
pub const FRAME_RESEND: Duration = Duration::from_millis(250);

/// A minimum-size Ethernet frame `dst` <- `src` of type [`ETHERTYPE_TEST`] carrying `marker`.
pub fn test_frame(dst: [u8; 6], src: [u8; 6], marker: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE_TEST);
    f.extend_from_slice(marker);
    f.resize(60, 0);
    f
}

/// A non-blocking AF_PACKET socket created in `ns` and bound to its link `ifindex`, receiving
/// every protocol; a write on it sends a whole frame out of that link.
pub fn packet_socket(ns: &NetnsHandle, ifindex: u32) -> std::os::fd::OwnedFd {
    use nix::sys::socket::{
        bind, socket, AddressFamily, LinkAddr, SockFlag, SockProtocol, SockType, SockaddrLike,
    };
    use std::os::fd::AsRawFd;
    knid_netops::run_in(ns, || {
        let fd = socket(
            AddressFamily::Packet,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            SockProtocol::EthAll,
        )
        .expect("AF_PACKET socket");
        // SAFETY: all-zero is a valid sockaddr_ll (plain integers and a byte array).
        let mut ll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        ll.sll_family = libc::AF_PACKET as u16;
        ll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        ll.sll_ifindex = i32::try_from(ifindex).expect("ifindex fits i32");
        let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `ll` is a live, initialised sockaddr_ll of exactly `len` bytes.
        let addr = unsafe { LinkAddr::from_raw((&raw const ll).cast(), Some(len)) }
            .expect("a sockaddr_ll");
        bind(fd.as_raw_fd(), &addr).expect("bind the packet socket");
        fd
    })
    .expect("packet socket thread")
}

/// Reads from `fd` if it becomes readable within 50 ms.
pub fn read_ready(fd: std::os::fd::BorrowedFd<'_>, buf: &mut [u8]) -> Option<usize> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(50u16)) {
        Ok(n) if n > 0 => nix::unistd::read(fd, buf).ok(),
        _ => None,
    }
}

/// Sends with `send` (again every [`FRAME_RESEND`]) until `recv` yields a [`test_frame`] with
/// `marker` (link-up brings IPv6 chatter on the same wires) and returns it; panics after
/// [`FRAME_WAIT`].
pub fn exchange_frames(
    marker: &[u8],
    mut send: impl FnMut(),
    mut recv: impl FnMut(&mut [u8]) -> Option<usize>,
) -> Vec<u8> {
    let started = Instant::now();
    let mut last_send: Option<Instant> = None;
    let mut buf = vec![0; 4096];
    while started.elapsed() < FRAME_WAIT {
        if last_send.is_none_or(|t| t.elapsed() >= FRAME_RESEND) {
            send();
            last_send = Some(Instant::now());
        }
        if let Some(n) = recv(&mut buf) {
            if n >= 14 + marker.len()
                && buf[12..14] == ETHERTYPE_TEST
                && &buf[14..14 + marker.len()] == marker
            {
                return buf[..n].to_vec();
            }
        }
    }
    panic!(
        "no frame {:?} within {FRAME_WAIT:?}",
        String::from_utf8_lossy(marker)
    );
}

/// A UDP datagram whose IP packet is exactly `size` bytes (the payload is `size` minus 28
/// bytes over IPv4, minus 48 over IPv6), from `client_ns` to `server_ip` in `server_ns`, with fragmentation
/// forbidden at the sender (IP_PMTUDISC_DO: a packet larger than the path's MTU is refused,
/// never split). Whether one arrived whole within a few seconds (sent again meanwhile, while
/// neighbours resolve).
pub fn udp_whole(server_ns: &Path, server_ip: IpAddr, client_ns: &Path, size: usize) -> bool {
    use std::os::fd::AsRawFd;

    let header = if server_ip.is_ipv6() { 48 } else { 28 };
    let payload = vec![0x6bu8; size - header];
    let listen = SocketAddr::new(server_ip, 0);
    let (rx, tx) = udp_sockets(server_ns, listen, client_ns, server_ip.is_ipv6());
    let to = rx.local_addr().expect("address");
    let (level, name, value) = if server_ip.is_ipv6() {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        )
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
    };
    // SAFETY: a valid socket fd and a c_int option value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            tx.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(
        rc,
        0,
        "forbid fragmentation: {}",
        std::io::Error::last_os_error()
    );
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut buf = vec![0u8; size + 64];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Err(e) = tx.send_to(&payload, to) {
            panic!("send {size} bytes to {to} without fragmenting: {e}");
        }
        if let Ok((n, _)) = rx.recv_from(&mut buf) {
            return n == payload.len();
        }
    }
    false
}

/// Sends `bytes` bytes over one TCP connection from `client_ns` to a listener on `server_ip`
/// in `server_ns`; how long the transfer took, from the first byte written to the last one
/// read.
pub fn tcp_transfer(
    server_ns: &Path,
    server_ip: IpAddr,
    client_ns: &Path,
    bytes: usize,
) -> Duration {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    let server = NetnsHandle::open(server_ns).expect("open server netns");
    let client = NetnsHandle::open(client_ns).expect("open client netns");
    let listener =
        knid_netops::run_in(&server, || TcpListener::bind(SocketAddr::new(server_ip, 0)))
            .expect("enter server netns")
            .expect("bind a listener");
    let addr = listener.local_addr().expect("address");
    let mut out = knid_netops::run_in(&client, || {
        TcpStream::connect_timeout(&addr, Duration::from_secs(20))
    })
    .expect("enter client netns")
    .expect("connect");
    let (mut inbound, _) = listener.accept().expect("accept");
    inbound
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let started = Instant::now();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut seen = 0;
        while seen < bytes {
            let n = inbound.read(&mut buf).expect("read");
            assert!(n > 0, "the connection closed after {seen} bytes");
            seen += n;
        }
    });
    let chunk = vec![0x5au8; 1 << 16];
    let mut sent = 0;
    while sent < bytes {
        let n = chunk.len().min(bytes - sent);
        out.write_all(&chunk[..n]).expect("write");
        sent += n;
    }
    reader.join().expect("reader");
    started.elapsed()
}
