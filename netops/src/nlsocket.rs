//! A netlink socket the way knid's clients (rtnetlink, nf_tables) open one: extended acks (the
//! kernel's error message comes back), capped acks (an error echoes the request's header only),
//! bound to an automatic port id and connected to the kernel.

use std::io;

use netlink_sys::{Socket, SocketAddr};

use crate::error::{Error, Result};

/// Opens a socket of `protocol` in the calling thread's network namespace; `strict` turns on
/// NETLINK_GET_STRICT_CHK (the kernel filters dumps by the request's header and attributes).
/// Errors name `what` (e.g. `netlink socket`).
pub(crate) fn open(protocol: isize, what: &str, strict: bool) -> Result<Socket> {
    let io = |step: &str, e: io::Error| Error::io(format!("{what}: {step}"), e);
    let mut socket = Socket::new(protocol).map_err(|e| io("open", e))?;
    if strict {
        socket
            .set_netlink_get_strict_chk(true)
            .map_err(|e| io("set NETLINK_GET_STRICT_CHK", e))?;
    }
    socket
        .set_ext_ack(true)
        .map_err(|e| io("set NETLINK_EXT_ACK", e))?;
    socket
        .set_cap_ack(true)
        .map_err(|e| io("set NETLINK_CAP_ACK", e))?;
    socket.bind_auto().map_err(|e| io("bind", e))?;
    socket
        .connect(&SocketAddr::new(0, 0))
        .map_err(|e| io("connect", e))?;
    Ok(socket)
}
