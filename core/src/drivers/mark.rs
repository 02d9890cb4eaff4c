//! The ownership mark: every link knid creates in the host netns carries its store's id as its
//! alias (`knid:<store id>`), so the sweeps delete only what this knid made. A name of knid's
//! form, or knid's link group, says nothing about who made a link: another knid with another
//! state dir on the same node, or anyone, can make one.
//!
//! The kernel ignores IFLA_IFALIAS in RTM_NEWLINK, so the mark is a second request right after
//! the creation, before anything is recorded as Attached. A crash between the two leaves an
//! unmarked link: the sweeps report it and leave it, and a retried attach of the same
//! interface replaces it (see [`Owner::may_replace`]).

use knid_netops::{Link, Rtnl};

use crate::error::{Error, Result};

/// What precedes the store id in the mark.
const PREFIX: &str = "knid:";

/// The mark of the store with id `store_id`.
pub(crate) fn of_store(store_id: &str) -> String {
    format!("{PREFIX}{store_id}")
}

/// Marks the host link `name` with `mark`, and, for a bridge port whose network wants it, puts
/// it in hairpin mode in the same request. A link gone by now (a rollback, someone else) is an
/// error: it was created a moment ago.
pub(crate) fn set(host: &mut Rtnl, name: &str, mark: &str, hairpin: bool) -> Result<()> {
    let found = if hairpin {
        host.set_hairpin_by_name(name, true, Some(mark))
    } else {
        host.set_alias_by_name(name, mark)
    }
    .map_err(|e| Error::kernel(format!("mark {name} as knid's ({mark})"), e))?;
    if !found {
        return Err(Error::FailedPrecondition(format!(
            "{name} vanished before it was marked as knid's"
        )));
    }
    Ok(())
}

/// Whose a host link is, by its mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Marked with this store's mark.
    Us,
    /// No alias: made by someone else, by a knid from before marks, or by a knid that died
    /// between the creation and the mark.
    Unmarked,
    /// Another alias: another knid's mark, or anyone's alias.
    Other(String),
}

impl Owner {
    /// The owner of `link` for a knid whose mark is `mark`.
    pub(crate) fn of(link: &Link, mark: &str) -> Owner {
        match link.alias.as_deref() {
            Some(alias) if alias == mark => Owner::Us,
            Some(alias) => Owner::Other(alias.to_owned()),
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
