//! The store's error type.

use std::net::IpAddr;
use std::path::PathBuf;

use crate::reservation::Owner;

/// Result of a store operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The filesystem under the store failed a write (full, read-only, an I/O error). sled 0.34
    /// keeps the first such error and fails every later write with it until the database is
    /// opened anew: see [`crate::Store::failure`].
    #[error("{op} {}", path.display())]
    Io {
        /// What the store was doing: `write`.
        op: &'static str,
        /// Directory of the database.
        path: PathBuf,
        /// The operating system's error, errno included.
        #[source]
        source: std::io::Error,
    },
    /// sled failed otherwise (a read, a corruption it detected).
    #[error("sled")]
    Sled(#[source] sled::Error),
    /// The database could not be opened, e.g. because another process holds its lock.
    #[error("cannot open store at {}", path.display())]
    Open {
        /// Directory of the database.
        path: PathBuf,
        /// What sled reported.
        #[source]
        source: sled::Error,
    },
    /// A stored record does not parse.
    #[error("cannot decode {what} record {key:?}")]
    Decode {
        /// The tree the record was read from.
        what: &'static str,
        /// Its key, printable.
        key: String,
        /// What the parser reported.
        #[source]
        source: protobuf::Error,
    },
    /// A record could not be serialized.
    #[error("cannot encode {what} record {key:?}")]
    Encode {
        /// The tree the record was meant for.
        what: &'static str,
        /// Its key, printable.
        key: String,
        /// What the serializer reported.
        #[source]
        source: protobuf::Error,
    },
    /// A batch reserves an address that another owner holds. Nothing of a batch applied in one
    /// transaction was applied; of one applied in order, the writes before the reservation were.
    #[error("address {addr} in network {network} is held by {holder}")]
    Conflict {
        /// Network of the reservation.
        network: String,
        /// The contested address.
        addr: IpAddr,
        /// Who holds it.
        holder: Owner,
    },
    /// A batch given to [`crate::Store::apply_in_order`] holds a write that reads other keys to
    /// decide (a release, a conditional forget): it needs a transaction. Nothing was applied.
    #[error("{op} cannot be applied one key at a time: it needs a transaction")]
    NeedsTransaction {
        /// The write: "release", "forget attachment" or "release if unowned".
        op: &'static str,
    },
    /// The store was written with a schema this build cannot read (a newer one): refused
    /// before anything in it changed.
    #[error(
        "store schema {found} is not supported: this build reads schemas {oldest} to \
         {supported}; the store was left as it is (a newer knid wrote it: run that one or a later)"
    )]
    Schema {
        /// Version found in `meta/schema`.
        found: u32,
        /// [`crate::SCHEMA_VERSION`].
        supported: u32,
        /// [`crate::migrate::OLDEST_READABLE`].
        oldest: u32,
    },
    /// The store holds something no version of knid writes.
    #[error("store is corrupt: {detail}")]
    Corrupt {
        /// What is wrong, naming the tree and key.
        detail: String,
    },
    /// A batch names a record by an id that cannot be a key (empty, or containing `/`).
    #[error("invalid {what} {key:?}: must be non-empty and free of '/'")]
    InvalidKey {
        /// Which id: "sandbox id", "ifname" or "network".
        what: &'static str,
        /// The offending id.
        key: String,
    },
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Self {
        Error::Sled(e)
    }
}
