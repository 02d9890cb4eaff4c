//! Network namespace handles and the two ways into one.
//!
//! Namespaces are per thread. [`run_in`] enters a namespace on a short-lived scoped thread that
//! exits afterwards: for work of any size, nothing needs switching back. [`visit`] enters it on
//! the calling thread for one short, thread-free step (opening a socket, which stays bound to
//! the namespace) and switches back at once; it saves the ~0.1 ms of a thread spawn on the
//! attach path. A thread that cannot switch back aborts the process rather than go on acting in
//! a pod's namespace.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::sched::{setns, CloneFlags};
use nix::sys::statfs::{fstatfs, statfs, NSFS_MAGIC};

use crate::error::{Error, Result};
use crate::rtnl::Rtnl;

/// The ifindex of `lo` in every network namespace.
pub const LOOPBACK_INDEX: u32 = 1;

/// The identity of a namespace: (st_dev, st_ino) of its nsfs inode. Stable for the namespace's
/// life, so a netns path that was unmounted and reused for another namespace is detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NetnsId {
    /// Device of the nsfs inode.
    pub dev: u64,
    /// Inode number of the nsfs inode.
    pub ino: u64,
}

/// An open network namespace. The open fd pins the namespace: it cannot go away while the
/// handle lives, even if its bind mount is removed.
#[derive(Debug)]
pub struct NetnsHandle {
    file: File,
    path: PathBuf,
    id: NetnsId,
}

// NS_GET_NSTYPE (linux/nsfs.h): _IO(0xb7, 0x3), returns the CLONE_NEW* type of an nsfs fd.
nix::ioctl_none!(
    /// Asks an nsfs fd which kind of namespace it is.
    ns_get_nstype,
    0xb7,
    0x3
);

impl NetnsHandle {
    /// Opens a network namespace by path (`/run/netns/x`, `/proc/<pid>/ns/net`).
    ///
    /// A missing path is [`Error::NetnsMissing`]; anything that is not a network namespace on
    /// nsfs (a regular file, a stale unmounted bind target, a mount namespace) is
    /// [`Error::NotNetns`]. A symbolic link is [`Error::NetnsSymlink`]: only `/proc/...` paths
    /// (whose `ns/net` is the kernel's own magic link) are followed.
    pub fn open(path: &Path) -> Result<Self> {
        let mut options = OpenOptions::new();
        options.read(true);
        if !path.starts_with("/proc") {
            options.custom_flags(libc::O_NOFOLLOW);
        }
        // std opens with O_CLOEXEC.
        let file = options.open(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::NetnsMissing {
                path: path.to_owned(),
            },
            _ if e.raw_os_error() == Some(libc::ELOOP) => Error::NetnsSymlink {
                path: path.to_owned(),
            },
            _ => Error::io(format!("open netns {}", path.display()), e),
        })?;
        let fs = fstatfs(file.as_fd())
            .map_err(|e| Error::io(format!("statfs {}", path.display()), e.into()))?;
        if fs.filesystem_type() != NSFS_MAGIC {
            return Err(Error::NotNetns {
                path: path.to_owned(),
            });
        }
        // SAFETY: NS_GET_NSTYPE takes no argument and only reads the fd, which `file` keeps
        // open for the duration of the call.
        match unsafe { ns_get_nstype(file.as_raw_fd()) } {
            Ok(kind) if kind == CloneFlags::CLONE_NEWNET.bits() => {}
            // Kernels before 4.11 cannot tell; setns will.
            Err(nix::Error::ENOTTY) => {}
            _ => {
                return Err(Error::NotNetns {
                    path: path.to_owned(),
                })
            }
        }
        let meta = file
            .metadata()
            .map_err(|e| Error::io(format!("stat {}", path.display()), e))?;
        Ok(Self {
            file,
            path: path.to_owned(),
            id: NetnsId {
                dev: meta.dev(),
                ino: meta.ino(),
            },
        })
    }

    /// The calling thread's network namespace.
    ///
    /// `/proc/self/ns/net` would name the main thread's namespace, not this thread's.
    pub fn current_thread() -> Result<Self> {
        Self::open(Path::new("/proc/thread-self/ns/net"))
    }

    /// The namespace's (dev, ino) identity.
    pub fn id(&self) -> NetnsId {
        self.id
    }

    /// The path the handle was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The namespace fd, e.g. for IFLA_NET_NS_FD.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

thread_local! {
    /// The calling thread's own namespace, opened on its first [`visit`]: the way back.
    static HOME: std::cell::OnceCell<File> = const { std::cell::OnceCell::new() };
}

/// Switches the thread back to its own namespace when dropped, also when `f` unwinds.
struct ReturnHome<'a>(BorrowedFd<'a>);

impl Drop for ReturnHome<'_> {
    fn drop(&mut self) {
        if let Err(e) = setns(self.0, CloneFlags::CLONE_NEWNET) {
            // With the namespace's fd held open, only resource exhaustion gets here. Going on
            // would create links, sockets and taps in a pod's namespace.
            log::error!("cannot return to the thread's own network namespace: {e}; aborting");
            std::process::abort();
        }
    }
}

/// Runs `f` on the calling thread inside `ns`, then returns the thread to its own namespace.
/// `f` must be short and must not spawn threads or call anything that might (it would inherit
/// `ns`): open a socket, which stays bound to `ns`. A failed setns into `ns` is
/// [`Error::Netns`] and leaves the thread where it was.
pub fn visit<T>(ns: &NetnsHandle, f: impl FnOnce() -> T) -> Result<T> {
    HOME.with(|home| {
        let home = match home.get() {
            Some(file) => file,
            None => {
                let file = File::open("/proc/thread-self/ns/net")
                    .map_err(|e| Error::io("open the thread's own netns", e))?;
                home.get_or_init(|| file)
            }
        };
        setns(ns.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|errno| Error::Netns {
            context: format!("enter netns {}", ns.path().display()),
            source: errno.into(),
        })?;
        let _back = ReturnHome(home.as_fd());
        Ok(f())
    })
}

/// Runs `f` on a short-lived scoped thread that has entered `ns`, and returns `f`'s value.
///
/// The thread exits when `f` returns, so no long-lived thread is ever left in a foreign
/// namespace. A failed setns or a panic in `f` is [`Error::Netns`]. Threads spawned by `f`
/// inherit `ns`: `f` must not start anything long-lived.
pub fn run_in<T: Send>(ns: &NetnsHandle, f: impl FnOnce() -> T + Send) -> Result<T> {
    let fd = ns.as_fd();
    let path = ns.path();
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("knid-netns".into())
            .spawn_scoped(scope, move || {
                setns(fd, CloneFlags::CLONE_NEWNET)?;
                Ok::<T, nix::Error>(f())
            })
            .map_err(|e| Error::Netns {
                context: format!("spawn a thread for netns {}", path.display()),
                source: e,
            })?;
        match thread.join() {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(errno)) => Err(Error::Netns {
                context: format!("enter netns {}", path.display()),
                source: errno.into(),
            }),
            Err(panic) => Err(Error::Netns {
                context: format!("thread in netns {} panicked", path.display()),
                source: io::Error::other(panic_text(panic.as_ref())),
            }),
        }
    })
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Whether `path` is on nsfs (a namespace file or its bind mount), checked by statfs magic
/// without keeping the path open. A missing path is [`Error::NetnsMissing`].
pub fn is_nsfs(path: &Path) -> Result<bool> {
    match statfs(path) {
        Ok(fs) => Ok(fs.filesystem_type() == NSFS_MAGIC),
        Err(nix::Error::ENOENT) => Err(Error::NetnsMissing {
            path: path.to_owned(),
        }),
        Err(e) => Err(Error::io(format!("statfs {}", path.display()), e.into())),
    }
}

impl Rtnl {
    /// Opens a socket inside `ns`. It stays bound to `ns` for its whole life.
    pub fn open_in(ns: &NetnsHandle) -> Result<Self> {
        visit(ns, Self::open)?
    }
}

/// Creates a new network namespace with loopback up, pinned only by the returned handle: it
/// dies with the handle unless [`bind`] mounts it somewhere first.
///
/// A short-lived scoped thread unshares its own network namespace (unshare(CLONE_NEWNET)
/// affects only the calling thread) and opens it — no `ip netns add` exec, no process.
pub fn create_unbound() -> Result<NetnsHandle> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("knid-netns-new".into())
            .spawn_scoped(scope, || -> Result<NetnsHandle> {
                nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(|e| Error::Netns {
                    context: "unshare a new network namespace".into(),
                    source: e.into(),
                })?;
                // A pod expects a working loopback, and nothing else would bring it up.
                Rtnl::open()?.set_up(LOOPBACK_INDEX)?;
                let mut ns = NetnsHandle::current_thread()?;
                ns.path = PathBuf::from("(new netns)");
                Ok(ns)
            })
            .map_err(|e| Error::Netns {
                context: "spawn a thread for a new netns".into(),
                source: e,
            })?;
        thread.join().unwrap_or_else(|panic| {
            Err(Error::Netns {
                context: "thread creating a netns panicked".into(),
                source: io::Error::other(panic_text(panic.as_ref())),
            })
        })
    })
}

/// Bind-mounts `ns` on `path`, which must not exist (its directory must): the empty mount-point
/// file is created exclusively (mode 0444) and removed again if the mount fails. From then on
/// the namespace lives until [`remove_bound`], whatever happens to `ns`. Returns the handle
/// now naming `path`.
pub fn bind(mut ns: NetnsHandle, path: &Path) -> Result<NetnsHandle> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)
        .map_err(|e| Error::io(format!("create netns file {}", path.display()), e))?;
    // The fd's magic link resolves to the nsfs inode itself, whichever thread opened it.
    let source = PathBuf::from(format!("/proc/self/fd/{}", ns.file.as_raw_fd()));
    if let Err(e) = nix::mount::mount(
        Some(&source),
        path,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    ) {
        let _ = std::fs::remove_file(path);
        return Err(Error::io(
            format!("bind-mount a netns on {}", path.display()),
            e.into(),
        ));
    }
    ns.path = path.to_owned();
    Ok(ns)
}

/// [`create_unbound`] then [`bind`] on `path`.
pub fn create_bound(path: &Path) -> Result<NetnsHandle> {
    bind(create_unbound()?, path)
}

/// Unmounts (lazily: open fds keep the namespace alive, the path goes now) and removes a netns
/// bind mount made by [`create_bound`] or `ip netns add`. Returns whether anything was there.
/// A path that is not mounted is just removed; a missing path is success.
pub fn remove_bound(path: &Path) -> Result<bool> {
    let mounted = match nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH) {
        Ok(()) => true,
        // EINVAL: not a mount point; ENOENT: nothing there.
        Err(nix::Error::EINVAL | nix::Error::ENOENT) => false,
        Err(e) => {
            return Err(Error::io(
                format!("unmount netns {}", path.display()),
                e.into(),
            ))
        }
    };
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(mounted),
        Err(e) => Err(Error::io(
            format!("remove netns file {}", path.display()),
            e,
        )),
    }
}

#[cfg(test)]
mod tests;
