//! The core's error type. Each variant maps to one API error code ([`ErrorKind`]); the transport
//! turns kinds into ttrpc codes in one place.

use std::net::IpAddr;
use std::path::PathBuf;

/// The API-level class of an error (docs/api.md#error-codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bad field.
    InvalidArgument,
    /// Unknown sandbox.
    NotFound,
    /// Same sandbox+ifname with a different spec.
    AlreadyExists,
    /// The netns is missing or not a netns, or a kernel object is in the way.
    FailedPrecondition,
    /// No free address.
    ResourceExhausted,
    /// Queue full or shutting down.
    Unavailable,
    /// The caller's deadline passed.
    DeadlineExceeded,
    /// Kernel or store failure.
    Internal,
}

/// Errors of the core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A caller-supplied field broke a validation rule.
    #[error("invalid {field}: {rule}")]
    InvalidArgument {
        /// Field path, e.g. `interfaces[0].mac`.
        field: String,
        /// The rule broken.
        rule: String,
    },
    /// The sandbox is not known.
    #[error("sandbox {0} not found")]
    NotFound(String),
    /// An attachment with the same key exists with a different spec.
    #[error("sandbox {sandbox_id} interface {ifname} already exists with a different {field}")]
    AlreadyExists {
        /// Sandbox id.
        sandbox_id: String,
        /// Interface name.
        ifname: String,
        /// The field that differs.
        field: String,
    },
    /// A host port of the request is held by another sandbox.
    #[error("{field}: host port {port} is held by sandbox {holder}")]
    HostPortTaken {
        /// The field (`port_mappings[i]`).
        field: String,
        /// Protocol, port and host address.
        port: String,
        /// The sandbox that holds it.
        holder: String,
    },
    /// The netns path CreateNetns would use is taken.
    #[error("netns {}: {why}", path.display())]
    NetnsTaken {
        /// The path.
        path: PathBuf,
        /// By what.
        why: String,
    },
    /// A precondition on the node does not hold.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A network's node side is broken (its bridge deleted or down behind knid's back).
    #[error(
        "network {network}: {problem}; SetupNodeNetwork (knid.v1 or KNI, `knictl \
         setup-node-network`) or a restart of knid sets it up again and reconnects its pods"
    )]
    NodeNetwork {
        /// The network.
        network: String,
        /// What is wrong, naming the device.
        problem: String,
    },
    /// The network's pool has no free address of a family.
    #[error("network {network}: {family} pool exhausted, no free address")]
    Exhausted {
        /// Network name.
        network: String,
        /// `ipv4` or `ipv6`.
        family: &'static str,
    },
    /// A bridge network's bridge has all the ports a Linux bridge can take.
    #[error(
        "network {network}: bridge {bridge} has all {limit} ports a Linux bridge can take in \
         use: no more pods can be attached to this network; its attached pods are unaffected"
    )]
    BridgeFull {
        /// Network name.
        network: String,
        /// The bridge.
        bridge: String,
        /// [`crate::model::BridgePorts::LIMIT`].
        limit: u64,
    },
    /// A requested static address is already taken.
    #[error("network {network}: address {addr} is already in use by sandbox {holder}")]
    AddressInUse {
        /// Network name.
        network: String,
        /// The address.
        addr: IpAddr,
        /// Sandbox holding it.
        holder: String,
    },
    /// A configured limit (e.g. `max_sandboxes`) is reached.
    #[error("{0}")]
    LimitReached(String),
    /// The runtime cannot take the request now.
    #[error("{0}")]
    Unavailable(String),
    /// The caller's deadline passed before the operation could run.
    #[error("deadline exceeded before {0}")]
    DeadlineExceeded(&'static str),
    /// A kernel operation failed.
    #[error("{context}")]
    Kernel {
        /// What knid was doing.
        context: String,
        /// The netops error (errno and extack).
        #[source]
        source: knid_netops::Error,
    },
    /// The netns could not be used.
    #[error("netns {path}")]
    Netns {
        /// The path given.
        path: PathBuf,
        /// Why.
        #[source]
        source: knid_netops::Error,
    },
    /// The store failed.
    #[error("store")]
    Store(#[from] knid_store::Error),
    /// An earlier write failed and the store refuses writes until knid restarts (see
    /// `Store::failure`): work that writes is refused meanwhile.
    #[error("knid is not ready, its store failed")]
    StoreFailed(#[source] knid_store::Error),
    /// The configuration is invalid.
    #[error("config: {0}")]
    Config(String),
    /// A failpoint armed with `error` fired (crash tests only).
    #[cfg(feature = "failpoints")]
    #[error("failpoint {0}")]
    Injected(&'static str),
    /// A `cni` network's plugin failed.
    #[error("network {network}")]
    Cni {
        /// Network name.
        network: String,
        /// The plugin's error object.
        #[source]
        source: crate::cni::CniError,
    },
    /// A required extension refused a call or did not answer it in time.
    #[error("extension {name}: {message}")]
    Extension {
        /// The extension's name.
        name: String,
        /// Its message, or why it gave none (`no answer within 200ms`).
        message: String,
    },
    /// A record in the store could not be understood.
    #[error("corrupt record {key}: {detail}")]
    Corrupt {
        /// Record key.
        key: String,
        /// What is wrong.
        detail: String,
    },
}

/// The API class of a CNI plugin's failure.
fn cni_error_kind(err: &crate::cni::CniError) -> ErrorKind {
    use crate::cni::error::{DECODE, INCOMPATIBLE_VERSION, INVALID_CONFIG, TRY_AGAIN};
    match err.code {
        TRY_AGAIN => ErrorKind::Unavailable,
        INCOMPATIBLE_VERSION | INVALID_CONFIG | 2 | 4 | DECODE => ErrorKind::FailedPrecondition,
        _ => ErrorKind::Internal,
    }
}

impl Error {
    /// The API-level class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidArgument { .. } | Self::Config(_) => ErrorKind::InvalidArgument,
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::AlreadyExists { .. }
            | Self::AddressInUse { .. }
            | Self::NetnsTaken { .. }
            | Self::HostPortTaken { .. } => ErrorKind::AlreadyExists,
            Self::FailedPrecondition(_) | Self::NodeNetwork { .. } | Self::Extension { .. } => {
                ErrorKind::FailedPrecondition
            }
            Self::Netns { source, .. } => match source {
                knid_netops::Error::NotNetns { .. }
                | knid_netops::Error::NetnsSymlink { .. }
                | knid_netops::Error::NetnsMissing { .. } => ErrorKind::FailedPrecondition,
                _ => ErrorKind::Internal,
            },
            Self::Exhausted { .. } | Self::BridgeFull { .. } | Self::LimitReached(_) => {
                ErrorKind::ResourceExhausted
            }
            Self::Unavailable(_) | Self::StoreFailed(_) => ErrorKind::Unavailable,
            Self::Cni { source, .. } => cni_error_kind(source),
            Self::DeadlineExceeded(_) => ErrorKind::DeadlineExceeded,
            Self::Kernel { .. } | Self::Store(_) | Self::Corrupt { .. } => ErrorKind::Internal,
            #[cfg(feature = "failpoints")]
            Self::Injected(_) => ErrorKind::Internal,
        }
    }

    /// Wraps a kernel error with what knid was doing.
    pub fn kernel(context: impl Into<String>, source: knid_netops::Error) -> Self {
        Self::Kernel {
            context: context.into(),
            source,
        }
    }

    /// The full cause chain on one line: `create veth: File exists (os error 17)`.
    pub fn chain(&self) -> String {
        chain(self)
    }
}

/// Any error with its causes on one line, each printed once, separated by `: `.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}

/// Result with the core's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
