//! The one error type of knid-netops.
//!
//! Messages are short and lower-case and never repeat their source: print the chain
//! (`Display` of each `source()`) once, at the top.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong talking to the kernel.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel refused a netlink request.
    #[error("{op} {target}{}", extack.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Netlink {
        /// What was asked (`create veth`, `add address`, …).
        op: &'static str,
        /// What it was asked of (a link name, `index 7`, an address).
        target: String,
        /// The errno the kernel answered with.
        #[source]
        source: io::Error,
        /// The kernel's extended-ack text (NLMSGERR_ATTR_MSG), when it sent one.
        extack: Option<String>,
    },
    /// A path that must be a network namespace is not one (not on nsfs).
    #[error("{} is not a network namespace", path.display())]
    NotNetns {
        /// The offending path.
        path: PathBuf,
    },
    /// A network namespace path (other than `/proc/<pid>/ns/net`) is a symbolic link: knid
    /// never follows one, so a caller cannot point it at a namespace it may not name.
    #[error("{} is a symbolic link; a network namespace path must name the namespace file itself", path.display())]
    NetnsSymlink {
        /// The offending path.
        path: PathBuf,
    },
    /// A network namespace path does not exist.
    #[error("network namespace {} does not exist", path.display())]
    NetnsMissing {
        /// The missing path.
        path: PathBuf,
    },
    /// Other I/O: opening files, sysctls, the netlink socket itself.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A netlink reply that is malformed or not what the request calls for.
    #[error("{op}: unexpected netlink reply: {detail}")]
    Protocol {
        /// The request being answered.
        op: &'static str,
        /// What was wrong with the reply.
        detail: String,
    },
    /// Another process holds the claim `name` on this network namespace ([`crate::netns_claim`]).
    #[error(
        "another process holds the abstract socket @{name} in this network namespace \
         (`ss -xap | grep @{name}` names it)"
    )]
    NetnsClaimed {
        /// The claim's name.
        name: String,
    },
    /// A scoped namespace thread could not be started, could not enter the namespace, or panicked.
    #[error("{context}")]
    Netns {
        /// What was being done.
        context: String,
        /// The underlying error (the setns errno, or a description of the panic).
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// The raw errno behind this error, for the kernel and I/O variants.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Netlink { source, .. } | Self::Io { source, .. } | Self::Netns { source, .. } => {
                source.raw_os_error()
            }
            Self::NotNetns { .. }
            | Self::NetnsSymlink { .. }
            | Self::NetnsMissing { .. }
            | Self::NetnsClaimed { .. }
            | Self::Protocol { .. } => None,
        }
    }

    /// The object already exists (EEXIST).
    pub fn is_exists(&self) -> bool {
        self.errno() == Some(libc::EEXIST)
    }

    /// A bridge has no free port number left for another port (EXFULL).
    pub fn is_bridge_full(&self) -> bool {
        self.errno() == Some(libc::EXFULL)
    }

    /// The object does not exist (ENOENT, ENODEV, ESRCH).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self.errno(),
            Some(libc::ENOENT | libc::ENODEV | libc::ESRCH)
        )
    }

    /// Puts our own explanation where the kernel's extended-ack text goes, when it sent none
    /// (a bare errno that means something specific in context), keeping the errno.
    pub(crate) fn explained(self, why: &str) -> Self {
        match self {
            Self::Netlink {
                op,
                target,
                source,
                extack: None,
            } => Self::Netlink {
                op,
                target,
                source,
                extack: Some(why.to_owned()),
            },
            other => other,
        }
    }

    /// Wraps an I/O error with context.
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    /// A netlink refusal from a positive errno.
    pub(crate) fn netlink(
        op: &'static str,
        target: impl Into<String>,
        errno: i32,
        extack: Option<String>,
    ) -> Self {
        Self::Netlink {
            op,
            target: target.into(),
            source: io::Error::from_raw_os_error(errno),
            extack,
        }
    }

    /// A malformed or unexpected reply.
    pub(crate) fn protocol(op: &'static str, detail: impl Into<String>) -> Self {
        Self::Protocol {
            op,
            detail: detail.into(),
        }
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests;
