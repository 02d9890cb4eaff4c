//! Bytes of the records as stored in sled, and how each tree's entries are read back. The
//! readers are public so that the fuzz target of stored records (fuzz/fuzz_targets/store_record.rs)
//! and its seed replay run the very functions [`crate::Store`] reads with.

use std::net::IpAddr;

use protobuf::Message;

use crate::error::{Error, Result};
use crate::keys::{self, ipam_key};
use crate::reservation::{Owner, Reservation};
use crate::schema::{
    AttachmentRecord, ExtensionRecord, NetnsRecord, NetworkRecord, OwnerRecord, SandboxRecord,
};

/// Encodes a record for the tree `what` (named with `key` in the error).
pub(crate) fn encode<M: Message>(msg: &M, what: &'static str, key: &str) -> Result<Vec<u8>> {
    encode_at(msg, what, || key.to_owned())
}

/// [`encode`] with the key spelled by `key` only if the record does not encode.
pub(crate) fn encode_at<M: Message>(
    msg: &M,
    what: &'static str,
    key: impl FnOnce() -> String,
) -> Result<Vec<u8>> {
    msg.write_to_bytes().map_err(|source| Error::Encode {
        what,
        key: key(),
        source,
    })
}

/// Decodes a record read from the tree `what` at `key`.
pub(crate) fn decode<M: Message>(bytes: &[u8], what: &'static str, key: &[u8]) -> Result<M> {
    decode_at(bytes, what, || String::from_utf8_lossy(key).into_owned())
}

/// [`decode`] with the key spelled by `key` only if the record does not decode.
fn decode_at<M: Message>(
    bytes: &[u8],
    what: &'static str,
    key: impl FnOnce() -> String,
) -> Result<M> {
    M::parse_from_bytes(bytes).map_err(|source| Error::Decode {
        what,
        key: key(),
        source,
    })
}

/// The value at `key` of the `sandboxes` tree.
pub fn sandbox(key: &[u8], value: &[u8]) -> Result<SandboxRecord> {
    decode(value, keys::SANDBOXES, key)
}

/// The value at `key` of the `attachments` tree.
pub fn attachment(key: &[u8], value: &[u8]) -> Result<AttachmentRecord> {
    decode(value, keys::ATTACHMENTS, key)
}

/// The value at `key` of the `netns` tree.
pub fn netns(key: &[u8], value: &[u8]) -> Result<NetnsRecord> {
    decode(value, keys::NETNS, key)
}

/// The value at `key` of the `networks` tree.
pub fn network(key: &[u8], value: &[u8]) -> Result<NetworkRecord> {
    decode(value, keys::NETWORKS, key)
}

/// The value at `key` of the `extensions` tree.
pub fn extension(key: &[u8], value: &[u8]) -> Result<ExtensionRecord> {
    decode(value, keys::EXTENSIONS, key)
}

/// One entry of the reservation tree of `network`: the address its key spells (4 or 16
/// octets), held by the owner its value records.
pub fn reservation(network: &str, key: &[u8], value: &[u8]) -> Result<Reservation> {
    let (addr, owner) = reservation_owner(network, key, value)?;
    Ok(Reservation {
        network: network.to_owned(),
        addr,
        owner,
    })
}

/// [`reservation`] as (address, owner).
pub fn reservation_owner(network: &str, key: &[u8], value: &[u8]) -> Result<(IpAddr, Owner)> {
    let addr: IpAddr = keys::addr_from_key(key).ok_or_else(|| Error::Corrupt {
        detail: format!("ipam/{network} has a key of {} bytes", key.len()),
    })?;
    // Start-up reads every reservation: the key is spelled only for an error.
    let rec: OwnerRecord = decode_at(value, keys::IPAM, || ipam_key(network, addr))?;
    Ok((addr, Owner::from_record(rec)))
}
