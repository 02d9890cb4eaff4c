//! Records knid cannot use: a value that does not decode, or one that decodes into something
//! that breaks a rule of the model. They are read apart from the usable ones, so that one never
//! fails a read of the others, and each is named by its key with what is wrong.

use knid_store::{AttachmentRecord, Decoded, Owner, Records, SandboxRecord, Store, Undecodable};

use super::{attachment_from_record, sandbox_from_records};
use crate::error::{chain, Error, Result};

/// What removes a record knid cannot use, for the messages that name one.
pub const REMOVED_BY: &str =
    "Detach of its sandbox, or `knictl gc`, removes it with the addresses it holds";

/// An attachment record knid cannot use.
#[derive(Debug, Clone, PartialEq)]
pub struct CorruptAttachment {
    /// Sandbox id, from the record's key.
    pub sandbox_id: String,
    /// Pod-side interface name, from the record's key.
    pub ifname: String,
    /// The record, when it decodes: its network and host link can then still be read.
    pub record: Option<AttachmentRecord>,
    /// What is wrong, naming the field.
    pub detail: String,
}

impl CorruptAttachment {
    /// The error naming it: `corrupt record <sandbox>/<ifname>: <detail>`.
    pub fn error(&self) -> Error {
        Error::Corrupt {
            key: format!("{}/{}", self.sandbox_id, self.ifname),
            detail: self.detail.clone(),
        }
    }

    /// Whether its key splits into a sandbox id and an ifname, so the store can delete it
    /// (every key knid writes does).
    pub fn deletable(&self) -> bool {
        let part = |p: &str| !p.is_empty() && !p.contains('/');
        part(&self.sandbox_id) && part(&self.ifname)
    }

    /// Who its reservations belong to.
    pub fn owner(&self) -> Owner {
        Owner::new(self.sandbox_id.clone(), self.ifname.clone())
    }
}

/// A sandbox record knid cannot use.
#[derive(Debug, Clone, PartialEq)]
pub struct CorruptSandbox {
    /// Sandbox id, from the record's key.
    pub id: String,
    /// The record, when it decodes: its labels can then still be read.
    pub record: Option<SandboxRecord>,
    /// What is wrong, naming the field.
    pub detail: String,
}

impl CorruptSandbox {
    /// The error naming it: `corrupt record <sandbox>: <detail>`.
    pub fn error(&self) -> Error {
        Error::Corrupt {
            key: self.id.clone(),
            detail: self.detail.clone(),
        }
    }
}

/// Attachment records of one read: those knid can use, and those it cannot.
#[derive(Debug, Default)]
pub struct Attachments {
    /// Records that decode and map to the model.
    pub usable: Vec<AttachmentRecord>,
    /// The others.
    pub corrupt: Vec<CorruptAttachment>,
}

/// Sandbox records of one read: those knid can use, and those it cannot.
#[derive(Debug, Default)]
pub struct Sandboxes {
    /// Records that decode and map to the model.
    pub usable: Vec<SandboxRecord>,
    /// The others.
    pub corrupt: Vec<CorruptSandbox>,
}

/// The attachment records of sandbox `id`, sorted by ifname.
pub fn attachments(store: &Store, id: &str) -> Result<Attachments> {
    Ok(split_attachments(store.attachments(id)?))
}

/// Every attachment record, sorted by sandbox id then ifname.
pub fn all_attachments(store: &Store) -> Result<Attachments> {
    Ok(split_attachments(store.all_attachments()?))
}

/// One attachment record of a streamed read ([`each_attachment`]).
#[derive(Debug)]
pub enum AttachmentRead {
    /// A record that decodes and maps to the model.
    Usable(AttachmentRecord),
    /// One knid cannot use.
    Corrupt(CorruptAttachment),
}

/// Every attachment record, in key order, read one at a time: a pass over all of them (GC's,
/// the reconciler's) that holds one record, not thousands, at a time.
pub fn each_attachment(store: &Store) -> impl Iterator<Item = Result<AttachmentRead>> + '_ {
    store.each_attachment().map(|item| Ok(classify(item?)))
}

/// [`all_attachments`], and whether every record sits at its own key (see
/// [`Store::all_attachments_in_place`]).
pub fn all_attachments_in_place(store: &Store) -> Result<(Attachments, bool)> {
    let (read, in_place) = store.all_attachments_in_place()?;
    Ok((split_attachments(read), in_place))
}

/// Every sandbox record, sorted by id.
pub fn sandboxes(store: &Store) -> Result<Sandboxes> {
    Ok(split_sandboxes(store.sandboxes()?))
}

/// [`sandboxes`], and whether every record sits at its own key (see
/// [`Store::sandboxes_in_place`]).
pub fn sandboxes_in_place(store: &Store) -> Result<(Sandboxes, bool)> {
    let (read, in_place) = store.sandboxes_in_place()?;
    Ok((split_sandboxes(read), in_place))
}

fn split_sandboxes(read: Records<SandboxRecord>) -> Sandboxes {
    let mut out = Sandboxes::default();
    for rec in read.decoded {
        match check_sandbox(&rec) {
            Ok(()) => out.usable.push(rec),
            Err(detail) => out.corrupt.push(CorruptSandbox {
                id: rec.id.clone(),
                record: Some(rec),
                detail,
            }),
        }
    }
    out.corrupt
        .extend(read.undecodable.into_iter().map(|bad| CorruptSandbox {
            detail: undecodable(&bad),
            id: bad.key,
            record: None,
        }));
    out.corrupt.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// The sandbox record `id`, if there is one; one knid cannot use is [`Error::Corrupt`].
pub fn sandbox(store: &Store, id: &str) -> Result<Option<SandboxRecord>> {
    let rec = match store.sandbox(id) {
        Ok(rec) => rec,
        Err(e @ knid_store::Error::Decode { .. }) => {
            let bad = Undecodable {
                key: id.to_owned(),
                error: e,
            };
            return Err(Error::Corrupt {
                key: bad.key.clone(),
                detail: undecodable(&bad),
            });
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(rec) = &rec {
        check_sandbox(rec).map_err(|detail| Error::Corrupt {
            key: id.to_owned(),
            detail,
        })?;
    }
    Ok(rec)
}

fn split_attachments(read: Records<AttachmentRecord>) -> Attachments {
    let mut out = Attachments::default();
    let decoded = read.decoded.into_iter().map(Ok);
    for item in decoded.chain(read.undecodable.into_iter().map(Err)) {
        match classify(item) {
            AttachmentRead::Usable(rec) => out.usable.push(rec),
            AttachmentRead::Corrupt(bad) => out.corrupt.push(bad),
        }
    }
    out.corrupt
        .sort_by(|a, b| (&a.sandbox_id, &a.ifname).cmp(&(&b.sandbox_id, &b.ifname)));
    out
}

/// Whether one attachment record read is usable: it decodes and maps to the model.
fn classify(item: Decoded<AttachmentRecord>) -> AttachmentRead {
    match item {
        Ok(rec) => match attachment_from_record(&rec) {
            Ok(_) => AttachmentRead::Usable(rec),
            Err(e) => AttachmentRead::Corrupt(CorruptAttachment {
                sandbox_id: rec.sandbox_id.clone(),
                ifname: rec.ifname.clone(),
                record: Some(rec),
                detail: detail(e),
            }),
        },
        Err(bad) => {
            let owner = bad
                .attachment_owner()
                .unwrap_or_else(|| Owner::new(bad.key.clone(), String::new()));
            AttachmentRead::Corrupt(CorruptAttachment {
                sandbox_id: owner.sandbox_id,
                ifname: owner.ifname,
                record: None,
                detail: undecodable(&bad),
            })
        }
    }
}

/// Whether a sandbox record maps to the model (its interfaces aside); else what is wrong.
fn check_sandbox(rec: &SandboxRecord) -> std::result::Result<(), String> {
    sandbox_from_records(rec, Vec::new())
        .map(drop)
        .map_err(detail)
}

/// What is wrong, without the key the caller names anyway.
fn detail(err: Error) -> String {
    match err {
        Error::Corrupt { detail, .. } => detail,
        other => other.chain(),
    }
}

/// What is wrong with an undecodable value: the parser's error, without the key.
fn undecodable(bad: &Undecodable) -> String {
    match std::error::Error::source(&bad.error) {
        Some(source) => format!("does not decode: {}", chain(source)),
        None => format!("does not decode: {}", bad.error),
    }
}

#[cfg(test)]
mod tests;
