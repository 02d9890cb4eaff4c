//! Bytes knid reads back, read as knid reads them: the entries of its store (the store's own
//! readers, then the mapping to the domain model) and a CNI plugin's printed result. One function
//! per input, so that the fuzz targets (`fuzz/`) and their seed replay (`tests/fuzz_seeds.rs`)
//! run exactly what the daemon runs. The daemon's configuration is [`crate::Config::from_toml`]
//! and a configuration list [`crate::cni::ConfList::parse`], already functions of their text.

use knid_store::{codec, Reservation};
use serde_json::Value;

use crate::cni::error::DECODE;
use crate::cni::{CniError, CniResult};
use crate::error::Result;
use crate::extension::ExtensionInfo;
use crate::model::{InterfaceResult, NetnsInfo, Sandbox};

/// The trees [`stored_record`]'s first byte picks from, in that order.
pub const STORE_TREES: [&str; 5] = ["sandboxes", "attachments", "netns", "extensions", "ipam"];

/// The key a record is read under (it only names the record in errors), and the network of a
/// reservation.
const KEY: &str = "fuzz";

/// A store entry in the domain model.
#[derive(Debug)]
pub enum StoredRecord {
    /// A `sandboxes` record (its interfaces are `attachments` records of their own).
    Sandbox(Sandbox),
    /// An `attachments` record.
    Attachment(InterfaceResult),
    /// A `netns` record.
    Netns(NetnsInfo),
    /// An `extensions` record.
    Extension(ExtensionInfo),
    /// An entry of an `ipam/<network>` tree.
    Reservation(Reservation),
}

/// Reads one store entry as knid reads it back. The first byte of `input` picks the tree
/// ([`STORE_TREES`], modulo their number). For `ipam` the next byte is the key's length (modulo
/// 17), the key follows and the rest is the value; for the other trees the rest is the value.
/// Empty input, bytes that do not decode and records that do not map back are errors (the
/// store's `Decode` and `Corrupt`, the core's `Corrupt`).
pub fn stored_record(input: &[u8]) -> Result<StoredRecord> {
    let (&tree, value) = input.split_first().unwrap_or((&0, &[]));
    let key = KEY.as_bytes();
    Ok(match usize::from(tree) % STORE_TREES.len() {
        0 => StoredRecord::Sandbox(crate::records::sandbox_from_records(
            &codec::sandbox(key, value)?,
            Vec::new(),
        )?),
        1 => StoredRecord::Attachment(crate::records::attachment_from_record(&codec::attachment(
            key, value,
        )?)?),
        2 => StoredRecord::Netns(crate::netns::info(&codec::netns(key, value)?, false)),
        3 => StoredRecord::Extension(
            crate::extension::Registered::from_record(&codec::extension(key, value)?)?.info(),
        ),
        _ => {
            let (&len, rest) = value.split_first().unwrap_or((&0, &[]));
            let (key, value) = rest.split_at((usize::from(len) % 17).min(rest.len()));
            StoredRecord::Reservation(codec::reservation(KEY, key, value)?)
        }
    })
}

/// Reads a CNI plugin's printed result (the `cni` driver's chain reads each plugin's stdout
/// so, and the final one again from the attachment's record): JSON, then [`CniResult::parse`].
/// Text that is not JSON is error 6, like a result that does not parse.
pub fn cni_result(bytes: &[u8]) -> std::result::Result<CniResult, CniError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| CniError::new(DECODE, format!("result is not JSON: {e}")))?;
    CniResult::parse(&value)
}
