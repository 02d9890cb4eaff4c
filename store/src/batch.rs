//! [`Batch`]: the changes one [`crate::Store::commit`] applies atomically.

use std::net::IpAddr;

use crate::records::{AttachmentRecord, SandboxRecord};
use crate::reservation::Owner;

/// One change of a batch, in the order it was added.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    PutSandbox(SandboxRecord),
    DeleteSandbox(String),
    PutAttachment(AttachmentRecord),
    DeleteAttachment {
        sandbox_id: String,
        ifname: String,
    },
    Reserve {
        network: String,
        addr: IpAddr,
        owner: Owner,
    },
    Release {
        network: String,
        addr: IpAddr,
        /// Release only if this owner holds the address.
        held_by: Option<Owner>,
    },
    SetCursor {
        network: String,
        addr: IpAddr,
    },
}

/// One atomic, durable change across trees.
///
/// Operations apply in the order they were added, so a batch may release an address and reserve it
/// again, or read-after-write its own reservations. Building a batch touches nothing: the store only
/// changes in [`crate::Store::commit`], all or nothing.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    ops: Vec<Op>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Writes (or replaces) the sandbox record keyed by `rec.id`.
    pub fn put_sandbox(&mut self, rec: SandboxRecord) -> &mut Self {
        self.push(Op::PutSandbox(rec))
    }

    /// Deletes the sandbox record `id` (no-op if absent). Its attachments are not touched.
    pub fn delete_sandbox(&mut self, id: &str) -> &mut Self {
        self.push(Op::DeleteSandbox(id.to_owned()))
    }

    /// Writes (or replaces) the attachment record keyed by `rec.sandbox_id/rec.ifname`.
    pub fn put_attachment(&mut self, rec: AttachmentRecord) -> &mut Self {
        self.push(Op::PutAttachment(rec))
    }

    /// Deletes one attachment record (no-op if absent).
    pub fn delete_attachment(&mut self, sandbox_id: &str, ifname: &str) -> &mut Self {
        self.push(Op::DeleteAttachment {
            sandbox_id: sandbox_id.to_owned(),
            ifname: ifname.to_owned(),
        })
    }

    /// Reserves `addr` in `network` for `owner`; the commit fails with [`crate::Error::Conflict`] if
    /// another owner holds it (re-reserving for the same owner is a no-op).
    pub fn reserve(&mut self, network: &str, addr: IpAddr, owner: Owner) -> &mut Self {
        self.push(Op::Reserve {
            network: network.to_owned(),
            addr,
            owner,
        })
    }

    /// Releases `addr` in `network`, whoever holds it (no-op if free).
    pub fn release(&mut self, network: &str, addr: IpAddr) -> &mut Self {
        self.push(Op::Release {
            network: network.to_owned(),
            addr,
            held_by: None,
        })
    }

    /// Releases `addr` in `network` only if `owner` holds it (no-op if free or held by someone else),
    /// so a stale release cannot take an address that was already handed to a new owner.
    pub fn release_held_by(&mut self, network: &str, addr: IpAddr, owner: Owner) -> &mut Self {
        self.push(Op::Release {
            network: network.to_owned(),
            addr,
            held_by: Some(owner),
        })
    }

    /// Persists the round-robin cursor (last handed-out address) of `network` for `addr`'s family.
    pub fn set_cursor(&mut self, network: &str, addr: IpAddr) -> &mut Self {
        self.push(Op::SetCursor {
            network: network.to_owned(),
            addr,
        })
    }

    /// True if the batch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub(crate) fn ops(&self) -> &[Op] {
        &self.ops
    }

    fn push(&mut self, op: Op) -> &mut Self {
        self.ops.push(op);
        self
    }
}
