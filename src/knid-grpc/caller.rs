//! Who is calling: the peer of an accepted gRPC connection, as the kernel names it, and whether
//! knid's access rule (`allowed_uids`/`allowed_gids`) lets it in. A unix peer is named by
//! SO_PEERCRED, as knid names its own callers; a loopback TCP peer by the uid the kernel records
//! for its socket (`/proc/net/tcp`), so a TCP listener never lets in a user the unix socket
//! would refuse.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use knid_core::config::ApiSettings;

/// The process at the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// A unix-socket peer (SO_PEERCRED, as of connect).
    Unix {
        /// Process id (0 when the kernel does not know it).
        pid: i32,
        /// User id.
        uid: u32,
        /// Primary group id.
        gid: u32,
    },
    /// A loopback TCP peer: its address and the uid owning its socket.
    Tcp {
        /// The peer's address.
        addr: SocketAddr,
        /// Owner of the peer's socket, when the kernel's table lists it.
        uid: Option<u32>,
    },
}

impl Caller {
    /// Whether knid's access rule lets this caller in. A TCP peer has no group the kernel
    /// reports, so only `allowed_uids` applies to it.
    pub fn allowed(&self, rule: &ApiSettings) -> bool {
        match *self {
            Caller::Unix { uid, gid, .. } => rule.allows(uid, gid),
            Caller::Tcp { uid: Some(uid), .. } => rule.allowed_uids.contains(&uid),
            Caller::Tcp { uid: None, .. } => false,
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::Unix { pid, uid, gid } => write!(f, "pid {pid} uid {uid} gid {gid}"),
            Caller::Tcp {
                addr,
                uid: Some(uid),
            } => write!(f, "tcp {addr} uid {uid}"),
            Caller::Tcp { addr, uid: None } => write!(f, "tcp {addr} uid unknown"),
        }
    }
}

/// The uid owning the TCP socket whose local address is `peer` and remote address is `local`
/// (the peer's side of our connection), from the kernel's socket tables of this netns.
pub fn tcp_peer_uid(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let in_table = |table: &str, peer: SocketAddr, local: SocketAddr| {
        uid_in_table(&std::fs::read_to_string(table).ok()?, peer, local)
    };
    match (peer, local) {
        // An IPv6 socket connecting to 127.0.0.1 (grpcio's do) is listed in tcp6 with the
        // IPv4-mapped addresses.
        (SocketAddr::V4(p), SocketAddr::V4(l)) => {
            in_table("/proc/net/tcp", peer, local).or_else(|| {
                in_table(
                    "/proc/net/tcp6",
                    SocketAddr::new(p.ip().to_ipv6_mapped().into(), p.port()),
                    SocketAddr::new(l.ip().to_ipv6_mapped().into(), l.port()),
                )
            })
        }
        _ => in_table("/proc/net/tcp6", peer, local),
    }
}

/// The uid column of the row of `text` (a `/proc/net/tcp{,6}` table) for the socket `local` →
/// `remote`.
fn uid_in_table(text: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    text.lines().skip(1).find_map(|row| {
        let cols: Vec<&str> = row.split_whitespace().collect();
        let (l, r, uid) = (cols.get(1)?, cols.get(2)?, cols.get(7)?);
        (parse_addr(l)? == local && parse_addr(r)? == remote)
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address as 32-bit words in
/// the host's byte order, the port in hex.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = addr.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
    };
    let ip = match addr.len() {
        8 => IpAddr::from(word(0)?),
        32 => {
            let mut octets = [0u8; 16];
            for i in 0..4 {
                octets[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::from(octets)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests;
