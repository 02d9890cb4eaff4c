//! Reading many records of a tree at once: each that decodes, and each that does not with its
//! key, so one undecodable value never hides the others from their readers.

use crate::error::{Error, Result};
use crate::keys;
use crate::reservation::Owner;

/// A stored record that does not decode.
#[derive(Debug)]
pub struct Undecodable {
    /// Its key, printable (`sandbox_id/ifname` in the `attachments` tree).
    pub key: String,
    /// Why it does not decode: [`Error::Decode`], naming its tree and key.
    pub error: Error,
}

impl Undecodable {
    /// The (sandbox id, ifname) its key spells, for a record of the `attachments` tree; `None`
    /// for a key without the separator.
    pub fn attachment_owner(&self) -> Option<Owner> {
        let (sandbox_id, ifname) = keys::split_attachment_key(&self.key)?;
        Some(Owner::new(sandbox_id, ifname))
    }
}

/// The records of one read of a tree (or of one sandbox's attachments), in key order.
#[derive(Debug)]
pub struct Records<M> {
    /// Those that decode.
    pub decoded: Vec<M>,
    /// Those that do not.
    pub undecodable: Vec<Undecodable>,
}

impl<M> Default for Records<M> {
    fn default() -> Self {
        Records {
            decoded: Vec::new(),
            undecodable: Vec::new(),
        }
    }
}

impl<M> Records<M> {
    /// How many records were read, decoded or not.
    pub fn len(&self) -> usize {
        self.decoded.len() + self.undecodable.len()
    }

    /// True if the read found no record at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every record, or the error of the first that does not decode: for readers that cannot
    /// go on without all of them.
    pub fn complete(self) -> Result<Vec<M>> {
        match self.undecodable.into_iter().next() {
            Some(bad) => Err(bad.error),
            None => Ok(self.decoded),
        }
    }
}

/// One record of a streamed read: decoded, or not, with its key.
pub type Decoded<M> = std::result::Result<M, Undecodable>;

/// Decodes the entries one at a time, as they are read: a sled failure is that item's error,
/// an undecodable value comes with its key. A pass over every record then holds one at a time.
pub(crate) fn decode_each<M>(
    entries: impl Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>,
    mut decode: impl FnMut(&[u8], &[u8]) -> Result<M>,
) -> impl Iterator<Item = Result<Decoded<M>>> {
    entries.map(move |entry| {
        let (key, value) = entry?;
        Ok(decode(&key, &value).map_err(|error| Undecodable {
            key: String::from_utf8_lossy(&key).into_owned(),
            error,
        }))
    })
}

/// Decodes every entry with `decode` ([`decode_each`], collected).
pub(crate) fn decode_all<M>(
    entries: impl Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>,
    decode: impl FnMut(&[u8], &[u8]) -> Result<M>,
) -> Result<Records<M>> {
    let mut out = Records::default();
    for item in decode_each(entries, decode) {
        match item? {
            Ok(rec) => out.decoded.push(rec),
            Err(bad) => out.undecodable.push(bad),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
