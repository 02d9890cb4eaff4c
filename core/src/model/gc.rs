//! Garbage collection: which attachments a request keeps, and what it removed.

use std::collections::BTreeSet;

use super::{IfName, SandboxId};

/// Which attachments a `GarbageCollect` keeps (CNI 1.1 GC semantics): an attachment is valid if
/// its sandbox id is listed, or its (sandbox id, ifname) pair is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcKeep {
    /// Sandboxes whose every attachment is valid.
    pub sandboxes: BTreeSet<SandboxId>,
    /// Single valid attachments.
    pub attachments: BTreeSet<(SandboxId, IfName)>,
    /// Only attachments on this network are judged, the others are kept (the CNI GC of one
    /// network's conflist); `None` judges every network.
    pub network: Option<String>,
    /// Whether the lists may leave no judged attachment valid. Without it, a GC that would
    /// detach every attachment it judges is refused as a likely mistake (a list of the wrong
    /// ids, a client that sent none).
    pub allow_detach_all: bool,
}

impl GcKeep {
    /// Whether sandbox `id` is named at all: whole, or by one of its attachments (ordered
    /// lookups, no scan).
    pub fn keeps_sandbox(&self, id: &str) -> bool {
        let id = SandboxId(id.to_owned());
        self.sandboxes.contains(&id)
            || self
                .attachments
                .range((id.clone(), IfName(String::new()))..)
                .next()
                .is_some_and(|(s, _)| *s == id)
    }

    /// Whether the attachment `ifname` of sandbox `id`, on `network`, is valid.
    pub fn keeps(&self, id: &str, ifname: &str, network: &str) -> bool {
        if self.network.as_deref().is_some_and(|n| n != network) {
            return true;
        }
        let id = SandboxId(id.to_owned());
        self.sandboxes.contains(&id) || self.attachments.contains(&(id, IfName(ifname.to_owned())))
    }
}

/// A garbage collection request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcRequest {
    /// `Some`: every attachment not kept is detached. `None`: only the sweep runs (netns gone,
    /// interrupted operations, orphaned links and reservations, records knid cannot use).
    pub keep: Option<GcKeep>,
    /// Report what would be removed without removing anything.
    pub dry_run: bool,
}

/// The kind of object a GC finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GcObject {
    /// An attachment (record, kernel objects and addresses), detached.
    Attachment,
    /// A host link with knid's name or link group and no record, deleted.
    HostLink,
    /// A sandbox record without attachments, deleted.
    Sandbox,
    /// An address reservation whose owner has no record, released.
    Reservation,
    /// A Kata DAN file of a sandbox without DAN taps, removed.
    DanFile,
    /// A network namespace knid created, unmounted and removed.
    Netns,
}

impl GcObject {
    /// `attachment`, `host-link`, `sandbox`, `reservation`, `dan-file` or `netns`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Attachment => "attachment",
            Self::HostLink => "host-link",
            Self::Sandbox => "sandbox",
            Self::Reservation => "reservation",
            Self::DanFile => "dan-file",
            Self::Netns => "netns",
        }
    }
}

/// Why a GC finding is removed (or, for [`GcReason::NotOurs`], only reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GcReason {
    /// Not in the caller's valid list.
    NotValid,
    /// Its netns no longer exists (or is another namespace now).
    NetnsGone,
    /// Left half-done by an interrupted attach or detach.
    Interrupted,
    /// A kernel object without a record.
    NoRecord,
    /// A reservation whose owner has no record.
    NoOwner,
    /// A host link with knid's name form or link group that does not carry this knid's mark
    /// (another knid's, someone else's, or from before marks): reported, never removed.
    NotOurs,
    /// A record knid cannot use (it does not decode, or a value in it breaks a rule), or an
    /// attachment of a sandbox whose record is one.
    Corrupt,
}

impl GcReason {
    /// `not-valid`, `netns-gone`, `interrupted`, `no-record`, `no-owner`, `not-ours` or
    /// `corrupt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotValid => "not-valid",
            Self::NetnsGone => "netns-gone",
            Self::Interrupted => "interrupted",
            Self::NoRecord => "no-record",
            Self::NoOwner => "no-owner",
            Self::NotOurs => "not-ours",
            Self::Corrupt => "corrupt",
        }
    }

    /// Whether GC removes what it found for this reason (all but [`GcReason::NotOurs`]).
    pub fn removes(self) -> bool {
        self != Self::NotOurs
    }
}

/// One thing GC removed (or, in a dry run, would remove), or found and left alone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GcFinding {
    /// Sandbox id, when the object belongs to one (empty for an orphaned link).
    pub sandbox_id: String,
    /// Pod-side interface name, when known.
    pub ifname: String,
    /// What the object is.
    pub what: GcObject,
    /// Why it goes.
    pub reason: GcReason,
    /// The object itself: a link name, an address (`network/addr`), a netns path.
    pub detail: String,
}

/// The outcome of a garbage collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Removed (or, in a dry run, removable) objects, sorted.
    pub removed: Vec<GcFinding>,
    /// Objects found and left alone (reason `not-ours`: links with knid's name form or link
    /// group that lack this knid's mark), sorted.
    pub left: Vec<GcFinding>,
    /// What could not be removed, one message each.
    pub errors: Vec<String>,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

impl GcReport {
    /// Files each of `found` under [`GcReport::removed`] or [`GcReport::left`] by its reason.
    pub fn add(&mut self, found: Vec<GcFinding>) {
        for f in found {
            if f.reason.removes() {
                self.removed.push(f);
            } else {
                self.left.push(f);
            }
        }
    }
}

#[cfg(test)]
mod tests;
