//! A claim, under a name, on the network namespace the calling thread is in: an abstract unix
//! socket `@<name>` bound there. Abstract socket names belong to the network namespace of their
//! socket, so the claim covers exactly that namespace, and a name is free again the moment its
//! socket closes: a claim ends with its process however that ends (exit, crash, SIGKILL),
//! leaving no stale lock and nothing on disk. The socket never listens; nothing can connect to
//! it.

use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{bind, socket, AddressFamily, SockFlag, SockType, UnixAddr};

use crate::error::{Error, Result};

/// A held claim: released when dropped, or when the process ends.
#[derive(Debug)]
pub struct NetnsClaim {
    _socket: OwnedFd,
}

/// Claims the calling thread's network namespace under `name`; [`Error::NetnsClaimed`] when a
/// socket in this namespace, of this process or another, holds it.
pub fn claim(name: &str) -> Result<NetnsClaim> {
    let io = |e: Errno| Error::Io {
        context: format!("claim the network namespace as @{name}"),
        source: e.into(),
    };
    // Close-on-exec: a child that outlived knid (a CNI plugin) would hold the claim on.
    let socket = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io)?;
    let addr = UnixAddr::new_abstract(name.as_bytes()).map_err(io)?;
    match bind(socket.as_raw_fd(), &addr) {
        Ok(()) => Ok(NetnsClaim { _socket: socket }),
        Err(Errno::EADDRINUSE) => Err(Error::NetnsClaimed {
            name: name.to_owned(),
        }),
        Err(e) => Err(io(e)),
    }
}
