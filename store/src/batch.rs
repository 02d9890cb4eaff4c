//! [`Batch`]: the changes one [`crate::Store::commit`] applies atomically.

use std::borrow::Cow;
use std::net::IpAddr;

use crate::reservation::Owner;
use crate::schema::{AttachmentRecord, ExtensionRecord, NetnsRecord, SandboxRecord};

/// One change of a batch, in the order it was added. The records it writes or expects are the
/// caller's, borrowed for as long as the batch lives, or its own copies.
#[derive(Debug, Clone)]
pub(crate) enum Op<'a> {
    PutSandbox(Cow<'a, SandboxRecord>),
    DeleteSandbox(String),
    PutAttachment(Cow<'a, AttachmentRecord>),
    PutNetns(NetnsRecord),
    DeleteNetns(String),
    PutExtension(ExtensionRecord),
    DeleteExtension(String),
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
    ForgetAttachment {
        expected: Cow<'a, AttachmentRecord>,
        addrs: Vec<IpAddr>,
    },
    ReleaseIfUnowned {
        network: String,
        addr: IpAddr,
        owner: Owner,
    },
}

/// One atomic, durable change across trees.
///
/// Operations apply in the order they were added, so a batch may release an address and reserve it
/// again, or read-after-write its own reservations. Building a batch touches nothing: the store only
/// changes in [`crate::Store::commit`], all or nothing.
///
/// A record given by reference ([`Record`]) is borrowed, not copied: a batch of records the
/// caller keeps (a state change of each, say) costs no copy of them.
#[derive(Debug, Default, Clone)]
pub struct Batch<'a> {
    ops: Vec<Op<'a>>,
}

/// A record for a [`Batch`]: given by value, or by reference for as long as the batch lives.
#[derive(Debug, Clone)]
pub struct Record<'a, T: Clone>(Cow<'a, T>);

impl<T: Clone> From<T> for Record<'_, T> {
    fn from(rec: T) -> Self {
        Record(Cow::Owned(rec))
    }
}

impl<'a, T: Clone> From<&'a T> for Record<'a, T> {
    fn from(rec: &'a T) -> Self {
        Record(Cow::Borrowed(rec))
    }
}

impl<'a> Batch<'a> {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Writes (or replaces) the sandbox record keyed by `rec.id`.
    pub fn put_sandbox(&mut self, rec: impl Into<Record<'a, SandboxRecord>>) -> &mut Self {
        self.push(Op::PutSandbox(rec.into().0))
    }

    /// Deletes the sandbox record `id` (no-op if absent). Its attachments are not touched.
    pub fn delete_sandbox(&mut self, id: &str) -> &mut Self {
        self.push(Op::DeleteSandbox(id.to_owned()))
    }

    /// Writes (or replaces) the attachment record keyed by `rec.sandbox_id/rec.ifname`.
    pub fn put_attachment(&mut self, rec: impl Into<Record<'a, AttachmentRecord>>) -> &mut Self {
        self.push(Op::PutAttachment(rec.into().0))
    }

    /// Writes (or replaces) the netns record keyed by `rec.owner`.
    pub fn put_netns(&mut self, rec: NetnsRecord) -> &mut Self {
        self.push(Op::PutNetns(rec))
    }

    /// Deletes the netns record of `owner` (no-op if absent).
    pub fn delete_netns(&mut self, owner: &str) -> &mut Self {
        self.push(Op::DeleteNetns(owner.to_owned()))
    }

    /// Writes (or replaces) the extension record keyed by `rec.name`.
    pub fn put_extension(&mut self, rec: ExtensionRecord) -> &mut Self {
        self.push(Op::PutExtension(rec))
    }

    /// Deletes the extension record `name` (no-op if absent).
    pub fn delete_extension(&mut self, name: &str) -> &mut Self {
        self.push(Op::DeleteExtension(name.to_owned()))
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

    /// Persists the mark ahead of the round-robin cursor of `network` for `addr`'s family (the
    /// IPAM resumes after it at start-up).
    pub fn set_cursor(&mut self, network: &str, addr: IpAddr) -> &mut Self {
        self.push(Op::SetCursor {
            network: network.to_owned(),
            addr,
        })
    }

    /// Conditional: if the stored attachment `expected.sandbox_id/expected.ifname` is exactly
    /// `expected`, deletes it and releases `addrs` of `expected.network` where it holds them;
    /// otherwise (gone, or replaced by a newer incarnation) changes nothing. Whether it applied is
    /// reported in [`Committed::applied`], so a caller racing another remover frees addresses in
    /// memory exactly once.
    pub fn forget_attachment(
        &mut self,
        expected: impl Into<Record<'a, AttachmentRecord>>,
        addrs: Vec<IpAddr>,
    ) -> &mut Self {
        self.push(Op::ForgetAttachment {
            expected: expected.into().0,
            addrs,
        })
    }

    /// Conditional: releases `addr` of `network` only if `owner` holds it and `owner` has no
    /// attachment record, checked inside the transaction (an orphaned reservation). Reported in
    /// [`Committed::applied`].
    pub fn release_if_unowned(&mut self, network: &str, addr: IpAddr, owner: Owner) -> &mut Self {
        self.push(Op::ReleaseIfUnowned {
            network: network.to_owned(),
            addr,
            owner,
        })
    }

    /// Number of conditional operations, the length of [`Committed::applied`].
    pub fn conditionals(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| {
                matches!(
                    op,
                    Op::ForgetAttachment { .. } | Op::ReleaseIfUnowned { .. }
                )
            })
            .count()
    }

    /// True if the batch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// How many operations it holds, one per call that added one.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub(crate) fn ops(&self) -> &[Op<'a>] {
        &self.ops
    }

    fn push(&mut self, op: Op<'a>) -> &mut Self {
        self.ops.push(op);
        self
    }
}

/// What a commit did with the batch's conditional operations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// One entry per conditional operation ([`Batch::forget_attachment`],
    /// [`Batch::release_if_unowned`]), in the order they were added: whether it applied.
    pub applied: Vec<bool>,
}
