//! The ownership mark: every link knid creates in the host netns carries its store's id as its
//! alias (`knid:<store id>`), so the sweeps delete only what this knid made. A name of knid's
//! form, or knid's link group, says nothing about who made a link: another knid with another
//! state dir on the same node, or anyone, can make one.
//!
//! The kernel ignores IFLA_IFALIAS in RTM_NEWLINK, so the mark is a second request right after
//! the creation. A crash between the two leaves an unmarked link: the sweeps report it and leave
//! it, and a retried attach of the same interface replaces it (see [`Owner::may_replace`]).
//!
//! An attach marks the host links it creates (veth and tap kinds) in two steps. First as one
//! still being attached: a veth's host end is created in this store's attaching link group
//! ([`attaching_group`], IFLA_GROUP, which RTM_NEWLINK does take), so it is this knid's from the
//! instant it exists, and a crash before its intent is durable leaves a link the sweeps delete;
//! a DAN tap (made by an ioctl) gets the alias `knid:<store id>:attaching` ([`attaching`]) right
//! after its creation. Then, as the attach's very last kernel step, once every other step of
//! every interface succeeded, the plain mark, group 0 and (bridge ports) the hairpin mode in
//! one request ([`complete`]). The plain mark on all of them is what lets start-up recovery roll
//! an interrupted attach forward to Attached (`lifecycle::roll_forward`): their kernel work
//! provably finished. Every form is this knid's for the sweeps.

use knid_netops::{Link, Rtnl};

use super::found_or_vanished;
use crate::error::{Error, Result};

/// What precedes the store id in the mark.
const PREFIX: &str = "knid:";
/// What follows the mark while an attach is still at work on the link.
const ATTACHING: &str = ":attaching";

/// The mark of the store with id `store_id`.
pub(crate) fn of_store(store_id: &str) -> String {
    format!("{PREFIX}{store_id}")
}

/// The mark an attach sets on a DAN tap it creates, until [`complete`]: `mark:attaching`.
pub(crate) fn attaching(mark: &str) -> String {
    format!("{mark}{ATTACHING}")
}

pub(crate) use super::names::attaching_group;

/// The last kernel step of an attach on the host link `name`: the plain `mark`, link group 0,
/// and, for a bridge port, its `hairpin` mode, in one request. A link carrying the plain mark
/// saw every step of its attach succeed. A link gone by now is an error.
pub(crate) fn complete(
    host: &mut Rtnl,
    name: &str,
    mark: &str,
    hairpin: Option<bool>,
) -> Result<()> {
    found_or_vanished(
        host.set_alias_group_by_name(name, mark, 0, hairpin),
        name,
        || format!("mark {name} as complete ({mark})"),
        "before its attach completed",
    )
}

/// Whether `link` carries the plain `mark`: its attach completed ([`complete`]).
pub(crate) fn is_complete(link: &Link, mark: &str) -> bool {
    link.alias.as_deref() == Some(mark)
}

/// Marks the host link `name` with `mark`. A link gone by now (a rollback, someone else) is an
/// error: it was created a moment ago.
pub(crate) fn set(host: &mut Rtnl, name: &str, mark: &str) -> Result<()> {
    found_or_vanished(
        host.set_alias_by_name(name, mark),
        name,
        || format!("mark {name} as knid's ({mark})"),
        "before it was marked as knid's",
    )
}

/// Whose a host link is, by its mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Marked with this store's mark, plain or [`attaching`], or without an alias in this
    /// store's [`attaching_group`].
    Us,
    /// No alias: made by someone else, by a knid from before marks, or (a DAN tap) by a knid
    /// that died between the creation and the mark.
    Unmarked,
    /// Another alias: another knid's mark, or anyone's alias.
    Other(String),
}

impl Owner {
    /// The owner of `link` for a knid whose mark is `mark`.
    pub(crate) fn of(link: &Link, mark: &str) -> Owner {
        match link.alias.as_deref() {
            Some(alias) if alias.strip_suffix(ATTACHING).unwrap_or(alias) == mark => Owner::Us,
            Some(alias) => Owner::Other(alias.to_owned()),
            None if link.group == attaching_group(mark) => Owner::Us,
            None => Owner::Unmarked,
        }
    }

    /// Whether an attach may delete the link it finds under the deterministic host name of the
    /// very interface it attaches (EEXIST): its own leftover, marked or not yet. A link another
    /// mark claims is refused.
    pub(crate) fn may_replace(&self) -> bool {
        !matches!(self, Owner::Other(_))
    }

    /// How a finding or an error names it: `unmarked`, or `marked <alias>`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Owner::Us => "marked as this knid's".to_owned(),
            Owner::Unmarked => "unmarked".to_owned(),
            Owner::Other(alias) => format!("marked {alias:?}"),
        }
    }
}

/// Deletes the link `name` that an attach found in its way (EEXIST) if [`Owner::may_replace`]
/// says so; `Ok(false)` when it is gone already. A link of another mark is
/// [`Error::FailedPrecondition`] naming it.
pub(crate) fn remove_leftover(host: &mut Rtnl, name: &str, mark: &str) -> Result<bool> {
    let Some(link) = host
        .link_by_name(name)
        .map_err(|e| Error::kernel(format!("look up {name}"), e))?
    else {
        return Ok(false);
    };
    let owner = Owner::of(&link, mark);
    if !owner.may_replace() {
        return Err(Error::FailedPrecondition(format!(
            "host link {name} exists and is not this knid's ({}); left alone",
            owner.describe()
        )));
    }
    // By index: a link that took the name since is never touched.
    host.delete_link(link.index)
        .map_err(|e| Error::kernel(format!("remove stale {name}"), e))
}

#[cfg(test)]
mod tests;
