//! Whether a path still holds the network namespace knid recorded for it: a namespace is
//! identified by its nsfs (device, inode), and behind knid's back its path can be unmounted,
//! deleted, or mount another namespace.

use std::path::Path;

use knid_netops::NetnsHandle;

use crate::error::{Error, Result};

/// The namespace at `path`, if it is still the recorded `(dev, ino)`; else why not: missing, not
/// a namespace any more, or another namespace at the same path. A failure to look (permissions)
/// is an error, so nothing is ever removed because of a transient failure to look.
pub(crate) fn open(
    path: &Path,
    dev: u64,
    ino: u64,
) -> Result<std::result::Result<NetnsHandle, String>> {
    match NetnsHandle::open(path) {
        Ok(ns) if (ns.id().dev, ns.id().ino) == (dev, ino) => Ok(Ok(ns)),
        Ok(_) => Ok(Err(format!("{} is another namespace now", path.display()))),
        Err(
            knid_netops::Error::NetnsMissing { .. }
            | knid_netops::Error::NotNetns { .. }
            | knid_netops::Error::NetnsSymlink { .. },
        ) => Ok(Err(format!("{} is gone", path.display()))),
        Err(source) => Err(Error::Netns {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Why the recorded namespace `(dev, ino)` is no longer at `path`, or `None` while it is.
pub(crate) fn gone(path: &Path, dev: u64, ino: u64) -> Result<Option<String>> {
    if still_mounted(path, dev, ino) {
        return Ok(None);
    }
    Ok(open(path, dev, ino)?.err())
}

/// Whether `path` (not followed if a symlink) is still the recorded nsfs inode, by one
/// `lstat`: start-up looks at every pod's namespace, and opening each (open, statfs, ioctl,
/// fstat, close) cost more than the rest of its look. The (dev, ino) of a namespace mounted
/// there is that of its nsfs inode, unique while the namespace lives (the mount keeps it
/// alive); anything else, a symlink included, falls to [`open`], which says why not.
fn still_mounted(path: &Path, dev: u64, ino: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|meta| (meta.dev(), meta.ino()) == (dev, ino))
}

/// The recorded namespace at `path`, or `None` when it is gone or cannot be looked at (for
/// removers, which then release what the namespace's end took along).
pub(crate) fn still_there(path: &str, dev: u64, ino: u64) -> Option<NetnsHandle> {
    open(Path::new(path), dev, ino).ok()?.ok()
}
