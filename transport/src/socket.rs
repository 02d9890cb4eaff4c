//! The daemon's listening socket: directory, stale-socket takeover, permissions. ttrpc's own
//! `bind` neither removes a stale socket nor sets permissions, so knid binds here and hands the
//! listener to [`crate::server::Server::start`]. A directory every user may write in is refused.

use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::client::{ClientError, RuntimeClient};

/// Mode of a socket directory knid creates.
pub const DIR_MODE: u32 = 0o750;
/// How long an existing socket's server gets to answer `Status` before it is deemed stale.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Errors of [`bind_listener`].
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The socket's directory could not be created.
    #[error("create socket directory {}", path.display())]
    CreateDir {
        /// Directory path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Another knid holds the instance lock of this socket.
    #[error(
        "another knid holds {} (it serves this socket): refusing to start, touching nothing; \
         stop it first",
        path.display()
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The instance lock could not be opened or taken.
    #[error("lock {}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A live server answers on the socket.
    #[error("{} is in use by a running server", path.display())]
    InUse {
        /// Socket path.
        path: PathBuf,
    },
    /// Something other than a socket is at the path; it is never removed.
    #[error("{} exists and is not a socket", path.display())]
    NotSocket {
        /// The path.
        path: PathBuf,
    },
    /// The existing path could not be examined or connected to.
    #[error("probe existing socket {}", path.display())]
    Probe {
        /// Socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// The existing path could not be examined.
    #[error("stat {}", path.display())]
    Stat {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The stale socket could not be removed.
    #[error("remove stale socket {}", path.display())]
    RemoveStale {
        /// Socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The socket's directory is writable by every user, who could replace the socket.
    #[error("{}", unsafe_dir_message(path, *mode))]
    UnsafeDir {
        /// Directory path.
        path: PathBuf,
        /// Its mode.
        mode: u32,
    },
    /// The socket could not be bound.
    #[error("bind {}", path.display())]
    Bind {
        /// Socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Mode, group or non-blocking flag could not be set on the new socket.
    #[error("set {what} of {}", path.display())]
    Setup {
        /// Socket path.
        path: PathBuf,
        /// `mode`, `group` or `non-blocking flag`.
        what: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The instance lock of the knid serving `socket`: held (an exclusive `flock` on
/// `<socket>.lock`) for as long as the process lives, so a second knid started on the same socket
/// refuses to start before it touches anything: its start-up recovery and sweeps would treat the
/// running knid's links as orphans and delete them.
#[derive(Debug)]
pub struct InstanceLock {
    /// Released when dropped (or when the process ends, however it ends).
    _held: nix::fcntl::Flock<fs::File>,
}

/// Takes the instance lock of `socket` (see [`InstanceLock`]), creating the socket's directory
/// as [`bind_listener`] does; [`SocketError::Locked`] when another process holds it.
pub fn lock_instance(socket: &Path) -> Result<InstanceLock, SocketError> {
    use std::os::unix::fs::OpenOptionsExt;
    prepare_dir(socket)?;
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    let path = PathBuf::from(name);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|source| SocketError::Lock {
            path: path.clone(),
            source,
        })?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(held) => Ok(InstanceLock { _held: held }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(SocketError::Locked { path }),
        Err((_, errno)) => Err(SocketError::Lock {
            path,
            source: errno.into(),
        }),
    }
}

/// Creates the directory of the socket at `path` (0750) when missing, and refuses one every
/// user can write in.
fn prepare_dir(path: &Path) -> Result<(), SocketError> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if !dir.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)
            .map_err(|source| SocketError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
    }
    if let Some(mode) = world_writable(dir).map_err(|source| SocketError::Stat {
        path: dir.to_owned(),
        source,
    })? {
        return Err(SocketError::UnsafeDir {
            path: dir.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Binds the API socket at `path` with `mode` (e.g. 0o660) and, if given, group `gid`.
///
/// Creates the parent directory (0750) when missing. An existing socket is probed: a server that
/// answers a `Status` call at all (even with an error status) is live and the call fails with
/// [`SocketError::InUse`]; a refused connection or no answer within [`PROBE_TIMEOUT`] means
/// stale, and the socket is replaced. Anything else at the path is refused, never deleted.
///
/// The listener is non-blocking; hand it to [`crate::server::Server::start`].
pub fn bind_listener(
    path: &Path,
    mode: u32,
    gid: Option<u32>,
) -> Result<UnixListener, SocketError> {
    prepare_dir(path)?;
    remove_if_stale(path)?;

    let listener = UnixListener::bind(path).map_err(|source| SocketError::Bind {
        path: path.to_owned(),
        source,
    })?;
    let setup = |what, source| SocketError::Setup {
        path: path.to_owned(),
        what,
        source,
    };
    fs::set_permissions(path, Permissions::from_mode(mode)).map_err(|e| setup("mode", e))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(|e| setup("group", e))?;
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| setup("non-blocking flag", e))?;
    Ok(listener)
}

/// The mode of `dir` when every user may write in it (sticky or not), `None` when not.
pub fn world_writable(dir: &Path) -> io::Result<Option<u32>> {
    use std::os::unix::fs::MetadataExt;
    let mode = fs::metadata(dir)?.mode() & 0o7777;
    Ok(Some(mode).filter(|m| m & 0o002 != 0))
}

/// What to tell the operator about a world-writable directory knid refuses to use.
pub fn unsafe_dir_message(dir: &Path, mode: u32) -> String {
    format!(
        "{} is writable by every user (mode {mode:o}): refusing to use it; \
         give knid a directory of its own or run `chmod o-w {}`",
        dir.display(),
        dir.display()
    )
}

/// Removes a stale socket at `path`; fails if a live server answers there or it is not a socket.
fn remove_if_stale(path: &Path) -> Result<(), SocketError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SocketError::Stat {
                path: path.to_owned(),
                source,
            })
        }
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotSocket {
            path: path.to_owned(),
        });
    }
    if is_live(path)? {
        return Err(SocketError::InUse {
            path: path.to_owned(),
        });
    }
    log::info!("removing stale socket {}", path.display());
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        // Someone else removed it meanwhile: the bind decides who wins.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SocketError::RemoveStale {
            path: path.to_owned(),
            source,
        }),
    }
}

/// True when a server answers on the socket at `path`.
fn is_live(path: &Path) -> Result<bool, SocketError> {
    let client = match RuntimeClient::connect(path) {
        Ok(client) => client,
        Err(ClientError::Connect { source, .. })
            if matches!(
                source.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound
            ) =>
        {
            return Ok(false)
        }
        Err(source) => {
            return Err(SocketError::Probe {
                path: path.to_owned(),
                source,
            })
        }
    };
    match client.status(PROBE_TIMEOUT) {
        Ok(_) | Err(ClientError::Rpc { .. }) => Ok(true),
        // Accepted by the kernel's backlog but never answered (or hung up): nobody serves it.
        Err(err) => {
            log::warn!(
                "socket {} accepted a connection but did not answer: {err}",
                path.display()
            );
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests;
