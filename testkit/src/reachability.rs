//! Reachability the way the upstream NetworkPolicy e2e suite probes it: every pod serves TCP
//! and UDP on ports 80 and 81 (both families, one dual-stack socket each), and a probe from one
//! pod's network namespace to another pod's address succeeds when a TCP connection is accepted
//! or a UDP datagram is echoed within [`PROBE_TIMEOUT`]. Many probes run at once, so a matrix
//! of denied flows costs a few timeouts, not one per pair.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use knid_netops::NetnsHandle;

/// The ports every pod serves.
pub const PORTS: [u16; 2] = [80, 81];
/// How long a probe waits for an answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);
/// Probes in flight at once.
const PARALLEL: usize = 96;

/// A transport protocol of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// A TCP connection.
    Tcp,
    /// A UDP datagram and its echo.
    Udp,
}

/// The servers of one pod, stopped when dropped.
pub struct Servers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Servers {
    /// Serves TCP and UDP on [`PORTS`] on every address of netns `ns`.
    pub fn start(ns: &Path) -> Servers {
        let handle = NetnsHandle::open(ns).expect("open the pod's netns");
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for port in PORTS {
            let any = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
            // A socket on [::] takes IPv4 too (net.ipv6.bindv6only is 0 in a new netns).
            let (tcp, udp) =
                knid_netops::run_in(&handle, || (TcpListener::bind(any), UdpSocket::bind(any)))
                    .expect("enter the pod's netns");
            let tcp = tcp.unwrap_or_else(|e| panic!("listen on {any} in {}: {e}", ns.display()));
            let udp = udp.unwrap_or_else(|e| panic!("bind {any} in {}: {e}", ns.display()));
            tcp.set_nonblocking(true).expect("nonblocking listener");
            udp.set_read_timeout(Some(Duration::from_millis(100)))
                .expect("udp timeout");
            let s = Arc::clone(&stop);
            threads.push(std::thread::spawn(move || serve_tcp(&tcp, &s)));
            let s = Arc::clone(&stop);
            threads.push(std::thread::spawn(move || serve_udp(&udp, &s)));
        }
        Servers { stop, threads }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn serve_tcp(listener: &TcpListener, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.write_all(b"ok");
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn serve_udp(socket: &UdpSocket, stop: &AtomicBool) {
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::SeqCst) {
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..n], from);
        }
    }
}

/// One probe: from the pod whose netns is `from` to `to` over `proto`.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The client's netns.
    pub from: PathBuf,
    /// The server's address and port.
    pub to: SocketAddr,
    /// The protocol.
    pub proto: Proto,
}

/// Whether one probe is answered.
pub fn probe(p: &Probe) -> bool {
    let handle = NetnsHandle::open(&p.from).expect("open the client's netns");
    knid_netops::run_in(&handle, || match p.proto {
        Proto::Tcp => TcpStream::connect_timeout(&p.to, PROBE_TIMEOUT).is_ok_and(|mut s| {
            let _ = s.set_read_timeout(Some(PROBE_TIMEOUT));
            let mut buf = [0u8; 2];
            s.read_exact(&mut buf).is_ok() && &buf == b"ok"
        }),
        Proto::Udp => {
            let any: SocketAddr = if p.to.is_ipv6() {
                "[::]:0".parse().expect("v6 any")
            } else {
                "0.0.0.0:0".parse().expect("v4 any")
            };
            let Ok(socket) = UdpSocket::bind(any) else {
                return false;
            };
            let _ = socket.set_read_timeout(Some(PROBE_TIMEOUT));
            if socket.send_to(b"probe", p.to).is_err() {
                return false;
            }
            let mut buf = [0u8; 16];
            matches!(socket.recv_from(&mut buf), Ok((5, from)) if from == p.to && &buf[..5] == b"probe")
        }
    })
    .expect("enter the client's netns")
}

/// Whether a TCP connection from netns `from` to `to` is accepted within [`PROBE_TIMEOUT`]
/// (whatever the server says then).
pub fn connects(from: &Path, to: SocketAddr) -> bool {
    let handle = NetnsHandle::open(from).expect("open the client's netns");
    knid_netops::run_in(&handle, || {
        TcpStream::connect_timeout(&to, PROBE_TIMEOUT).is_ok()
    })
    .expect("enter the client's netns")
}

/// Every probe's answer, in order, [`PARALLEL`] at a time.
pub fn probe_all(probes: &[Probe]) -> Vec<bool> {
    let mut out = Vec::with_capacity(probes.len());
    for chunk in probes.chunks(PARALLEL) {
        let answers: Vec<bool> = std::thread::scope(|scope| {
            let running: Vec<_> = chunk
                .iter()
                .map(|p| scope.spawn(move || probe(p)))
                .collect();
            running
                .into_iter()
                .map(|t| t.join().expect("a probe thread"))
                .collect()
        });
        out.extend(answers);
    }
    out
}
