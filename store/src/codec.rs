//! Bytes of the records as stored in sled.

use protobuf::Message;

use crate::error::{Error, Result};

/// Encodes a record for the tree `what` (named with `key` in the error).
pub(crate) fn encode<M: Message>(msg: &M, what: &'static str, key: &str) -> Result<Vec<u8>> {
    msg.write_to_bytes().map_err(|source| Error::Encode {
        what,
        key: key.to_owned(),
        source,
    })
}

/// Decodes a record read from the tree `what` at `key`.
pub(crate) fn decode<M: Message>(bytes: &[u8], what: &'static str, key: &[u8]) -> Result<M> {
    M::parse_from_bytes(bytes).map_err(|source| Error::Decode {
        what,
        key: String::from_utf8_lossy(key).into_owned(),
        source,
    })
}
