//! Turns a [`Batch`] into one sled transaction over every tree it touches.
//!
//! Everything fallible that is not a transactional read or write (validation, encoding, opening
//! trees) happens before the transaction, because sled may run the closure more than once.

use std::collections::BTreeMap;
use std::net::IpAddr;

use sled::transaction::{
    ConflictableTransactionError, ConflictableTransactionResult, TransactionError,
    TransactionalTree,
};
use sled::{Transactional, Tree};

use crate::batch::{Batch, Committed, Op};
use crate::codec;
use crate::error::{Error, Result};
use crate::keys::{self, ipam_key};
use crate::reservation::Owner;
use crate::schema::{AttachmentRecord, OwnerRecord};

/// A batch with its keys built and its records encoded, ready to run.
pub(crate) struct PreparedBatch<'b> {
    trees: Vec<Tree>,
    writes: Vec<Write<'b>>,
}

/// One write, addressing its tree by index into [`PreparedBatch::trees`].
enum Write<'b> {
    Put {
        tree: usize,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Remove {
        tree: usize,
        key: Vec<u8>,
    },
    Reserve {
        tree: usize,
        network: &'b str,
        addr: IpAddr,
        owner: &'b Owner,
        value: Vec<u8>,
    },
    Release {
        tree: usize,
        network: &'b str,
        addr: IpAddr,
        held_by: Option<&'b Owner>,
    },
    ForgetAttachment {
        tree: usize,
        key: String,
        expected: &'b AttachmentRecord,
        owner: Owner,
        /// (ipam tree, address) to release where `owner` holds it.
        releases: Vec<(usize, IpAddr)>,
    },
    ReleaseIfUnowned {
        tree: usize,
        attachments: usize,
        network: &'b str,
        addr: IpAddr,
        owner: &'b Owner,
    },
}

/// The distinct trees of one transaction, in first-use order.
struct TreeSet<'d> {
    db: &'d sled::Db,
    trees: Vec<Tree>,
    index: BTreeMap<String, usize>,
}

impl TreeSet<'_> {
    fn index_of(&mut self, name: &str) -> Result<usize> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        self.trees.push(self.db.open_tree(name)?);
        let i = self.trees.len() - 1;
        self.index.insert(name.to_owned(), i);
        Ok(i)
    }
}

impl<'b> PreparedBatch<'b> {
    /// Validates and encodes every operation of `batch` and opens (creating if needed) its trees.
    pub(crate) fn new(db: &sled::Db, batch: &'b Batch) -> Result<Self> {
        let mut trees = TreeSet {
            db,
            trees: Vec::new(),
            index: BTreeMap::new(),
        };
        let mut writes = Vec::with_capacity(batch.ops().len());
        for op in batch.ops() {
            writes.push(prepare(&mut trees, op)?);
        }
        Ok(PreparedBatch {
            trees: trees.trees,
            writes,
        })
    }

    /// Runs the batch as one transaction: all of it is applied, or nothing. Returns, per
    /// conditional write, whether its condition held.
    pub(crate) fn apply(&self) -> Result<Committed> {
        if self.writes.is_empty() {
            return Ok(Committed::default());
        }
        if let ([tree], [write]) = (self.trees.as_slice(), self.writes.as_slice()) {
            // One key: atomic on its own. sled pins its log for a batch (a manifest written and
            // synced apart, and the log buffer rolled, i.e. two more writes and syncs); a single
            // insert or remove just joins the next flush.
            match write {
                Write::Put { key, value, .. } => {
                    tree.insert(key.as_slice(), value.as_slice())?;
                    return Ok(Committed::default());
                }
                Write::Remove { key, .. } => {
                    tree.remove(key.as_slice())?;
                    return Ok(Committed::default());
                }
                _ => {}
            }
        }
        if let Some(plain) = self.plain_batch() {
            // Atomic within its one tree, without a transaction's overhead.
            self.trees[0].apply_batch(plain)?;
            return Ok(Committed::default());
        }
        self.run(true)
    }

    /// Applies the writes one key at a time, in the batch's order, without a transaction: puts,
    /// removes and reservations only ([`crate::Store::apply_in_order`]). A reservation is one
    /// compare-and-swap of its key (free, or already this owner's); one held by another stops the
    /// run with [`Error::Conflict`], the writes before it left applied.
    pub(crate) fn apply_in_order(&self) -> Result<()> {
        // Every write checked before the first is made.
        if let Some(op) = self.writes.iter().find_map(Write::needs_transaction) {
            return Err(Error::NeedsTransaction { op });
        }
        for write in &self.writes {
            match write {
                Write::Put { tree, key, value } => {
                    self.trees[*tree].insert(key.as_slice(), value.as_slice())?;
                }
                Write::Remove { tree, key } => {
                    self.trees[*tree].remove(key.as_slice())?;
                }
                Write::Reserve {
                    tree,
                    network,
                    addr,
                    owner,
                    value,
                } => reserve_key(&self.trees[*tree], network, *addr, owner, value)?,
                // Refused above.
                Write::Release { .. }
                | Write::ForgetAttachment { .. }
                | Write::ReleaseIfUnowned { .. } => {}
            }
        }
        Ok(())
    }

    /// Runs the batch's transaction and then abandons it: what [`PreparedBatch::apply`] would
    /// report, with nothing written.
    pub(crate) fn evaluate(&self) -> Result<Committed> {
        self.run(false)
    }

    fn run(&self, keep: bool) -> Result<Committed> {
        /// Why the transaction stopped short of committing.
        enum Stop {
            Failed(Error),
            Evaluated(Vec<bool>),
        }
        let result = self.trees.as_slice().transaction(
            |views: &Vec<TransactionalTree>| -> ConflictableTransactionResult<Vec<bool>, Stop> {
                // Built afresh on every run: sled may retry the closure.
                let mut applied = Vec::new();
                for write in &self.writes {
                    let done = write.apply(views).map_err(|e| match e {
                        ConflictableTransactionError::Abort(e) => {
                            ConflictableTransactionError::Abort(Stop::Failed(e))
                        }
                        ConflictableTransactionError::Storage(e) => {
                            ConflictableTransactionError::Storage(e)
                        }
                        ConflictableTransactionError::Conflict => {
                            ConflictableTransactionError::Conflict
                        }
                    })?;
                    applied.extend(done);
                }
                if keep {
                    Ok(applied)
                } else {
                    Err(ConflictableTransactionError::Abort(Stop::Evaluated(
                        applied,
                    )))
                }
            },
        );
        match result {
            Ok(applied) | Err(TransactionError::Abort(Stop::Evaluated(applied))) => {
                Ok(Committed { applied })
            }
            Err(TransactionError::Abort(Stop::Failed(e))) => Err(e),
            Err(TransactionError::Storage(e)) => Err(Error::Sled(e)),
        }
    }
}

impl PreparedBatch<'_> {
    /// The batch as a plain sled batch when it touches one tree with unconditional puts and
    /// removes only (a progress mark, say): nothing in it needs a transaction's reads.
    fn plain_batch(&self) -> Option<sled::Batch> {
        if self.trees.len() != 1 {
            return None;
        }
        let mut plain = sled::Batch::default();
        for write in &self.writes {
            match write {
                Write::Put { key, value, .. } => plain.insert(key.as_slice(), value.as_slice()),
                Write::Remove { key, .. } => plain.remove(key.as_slice()),
                _ => return None,
            }
        }
        Some(plain)
    }
}

/// A put into `tree` under the plain key `key` (checked like an id).
fn put_keyed<'b>(
    trees: &mut TreeSet<'_>,
    tree: &'static str,
    what: &'static str,
    key: &str,
    rec: &impl protobuf::Message,
) -> Result<Write<'b>> {
    keys::check_id(what, key)?;
    Ok(Write::Put {
        tree: trees.index_of(tree)?,
        key: key.as_bytes().to_vec(),
        value: codec::encode(rec, tree, key)?,
    })
}

/// A removal from `tree` of the plain key `key`.
fn remove_keyed<'b>(
    trees: &mut TreeSet<'_>,
    tree: &'static str,
    what: &'static str,
    key: &str,
) -> Result<Write<'b>> {
    keys::check_id(what, key)?;
    Ok(Write::Remove {
        tree: trees.index_of(tree)?,
        key: key.as_bytes().to_vec(),
    })
}

fn prepare<'b>(trees: &mut TreeSet<'_>, op: &'b Op) -> Result<Write<'b>> {
    Ok(match op {
        Op::PutSandbox(rec) => {
            keys::check_id("sandbox id", &rec.id)?;
            Write::Put {
                tree: trees.index_of(keys::SANDBOXES)?,
                key: rec.id.as_bytes().to_vec(),
                value: codec::encode(rec.as_ref(), keys::SANDBOXES, &rec.id)?,
            }
        }
        Op::DeleteSandbox(id) => {
            keys::check_id("sandbox id", id)?;
            Write::Remove {
                tree: trees.index_of(keys::SANDBOXES)?,
                key: id.as_bytes().to_vec(),
            }
        }
        Op::PutAttachment(rec) => {
            let key = attachment_key(&rec.sandbox_id, &rec.ifname)?;
            Write::Put {
                tree: trees.index_of(keys::ATTACHMENTS)?,
                value: codec::encode(rec.as_ref(), keys::ATTACHMENTS, &key)?,
                key: key.into_bytes(),
            }
        }
        Op::PutNetns(rec) => put_keyed(trees, keys::NETNS, "netns owner", &rec.owner, rec)?,
        Op::DeleteNetns(owner) => remove_keyed(trees, keys::NETNS, "netns owner", owner)?,
        Op::PutExtension(rec) => {
            put_keyed(trees, keys::EXTENSIONS, "extension name", &rec.name, rec)?
        }
        Op::DeleteExtension(name) => remove_keyed(trees, keys::EXTENSIONS, "extension name", name)?,
        Op::DeleteAttachment { sandbox_id, ifname } => Write::Remove {
            tree: trees.index_of(keys::ATTACHMENTS)?,
            key: attachment_key(sandbox_id, ifname)?.into_bytes(),
        },
        Op::Reserve {
            network,
            addr,
            owner,
        } => {
            check_reservation(network, owner)?;
            Write::Reserve {
                tree: trees.index_of(&keys::ipam_tree(network))?,
                network,
                addr: *addr,
                owner,
                value: codec::encode(&owner.to_record(), keys::IPAM, &ipam_key(network, *addr))?,
            }
        }
        Op::Release {
            network,
            addr,
            held_by,
        } => {
            keys::check_id("network", network)?;
            Write::Release {
                tree: trees.index_of(&keys::ipam_tree(network))?,
                network,
                addr: *addr,
                held_by: held_by.as_ref(),
            }
        }
        Op::ForgetAttachment { expected, addrs } => {
            let key = attachment_key(&expected.sandbox_id, &expected.ifname)?;
            let mut releases = Vec::with_capacity(addrs.len());
            if !addrs.is_empty() {
                keys::check_id("network", &expected.network)?;
                let tree = trees.index_of(&keys::ipam_tree(&expected.network))?;
                releases.extend(addrs.iter().map(|a| (tree, *a)));
            }
            Write::ForgetAttachment {
                tree: trees.index_of(keys::ATTACHMENTS)?,
                key,
                expected,
                owner: Owner::new(expected.sandbox_id.clone(), expected.ifname.clone()),
                releases,
            }
        }
        Op::ReleaseIfUnowned {
            network,
            addr,
            owner,
        } => {
            check_reservation(network, owner)?;
            Write::ReleaseIfUnowned {
                tree: trees.index_of(&keys::ipam_tree(network))?,
                attachments: trees.index_of(keys::ATTACHMENTS)?,
                network,
                addr: *addr,
                owner,
            }
        }
        Op::SetCursor { network, addr } => {
            keys::check_id("network", network)?;
            Write::Put {
                tree: trees.index_of(keys::IPAM_CURSOR)?,
                key: keys::cursor_key(network, addr.is_ipv6()).into_bytes(),
                value: keys::addr_key(*addr),
            }
        }
    })
}

/// Refuses a network or owner that cannot be part of a reservation's keys.
fn check_reservation(network: &str, owner: &Owner) -> Result<()> {
    keys::check_id("network", network)?;
    keys::check_id("sandbox id", &owner.sandbox_id)?;
    keys::check_id("ifname", &owner.ifname)
}

fn attachment_key(sandbox_id: &str, ifname: &str) -> Result<String> {
    keys::check_id("sandbox id", sandbox_id)?;
    keys::check_id("ifname", ifname)?;
    Ok(keys::attachment_key(sandbox_id, ifname))
}

impl Write<'_> {
    /// What this write is called when it needs a transaction: it reads other keys to decide.
    /// `None` for a write of its own key only (a put, a remove, a reservation).
    fn needs_transaction(&self) -> Option<&'static str> {
        match self {
            Write::Put { .. } | Write::Remove { .. } | Write::Reserve { .. } => None,
            Write::Release { .. } => Some("release"),
            Write::ForgetAttachment { .. } => Some("forget attachment"),
            Write::ReleaseIfUnowned { .. } => Some("release if unowned"),
        }
    }
}

/// Reserves `addr` for `owner` with one compare-and-swap of its key: done when the key was free
/// or already `owner`'s, [`Error::Conflict`] when another holds it.
fn reserve_key(
    tree: &Tree,
    network: &str,
    addr: IpAddr,
    owner: &Owner,
    value: &[u8],
) -> Result<()> {
    let key = keys::addr_key(addr);
    let bytes = loop {
        match tree.compare_and_swap(&key, None::<&[u8]>, Some(value))? {
            Ok(()) => return Ok(()),
            Err(taken) => {
                // A failed swap carries what it found; a key freed meanwhile is tried again.
                if let Some(bytes) = taken.current {
                    break bytes;
                }
            }
        }
    };
    let holder = decode_owner(&bytes, network, addr)?;
    if holder == *owner {
        return Ok(());
    }
    Err(Error::Conflict {
        network: network.to_owned(),
        addr,
        holder,
    })
}

/// `Some(applied)` for a conditional write, `None` for an unconditional one.
type Step = ConflictableTransactionResult<Option<bool>, Error>;

impl Write<'_> {
    fn apply(&self, views: &[TransactionalTree]) -> Step {
        match self {
            Write::Put { tree, key, value } => {
                views[*tree].insert(key.as_slice(), value.as_slice())?;
            }
            Write::Remove { tree, key } => {
                views[*tree].remove(key.as_slice())?;
            }
            Write::Reserve {
                tree,
                network,
                addr,
                owner,
                value,
            } => {
                let view = &views[*tree];
                let key = keys::addr_key(*addr);
                match holder(view, network, *addr, &key)? {
                    Some(holder) if holder == **owner => {}
                    Some(holder) => {
                        return Err(ConflictableTransactionError::Abort(Error::Conflict {
                            network: (*network).to_owned(),
                            addr: *addr,
                            holder,
                        }))
                    }
                    None => {
                        view.insert(key, value.as_slice())?;
                    }
                }
            }
            Write::Release {
                tree,
                network,
                addr,
                held_by,
            } => {
                release(&views[*tree], network, *addr, *held_by)?;
            }
            Write::ForgetAttachment {
                tree,
                key,
                expected,
                owner,
                releases,
            } => {
                let view = &views[*tree];
                let Some(bytes) = view.get(key.as_bytes())? else {
                    return Ok(Some(false));
                };
                let stored: AttachmentRecord =
                    codec::decode(&bytes, keys::ATTACHMENTS, key.as_bytes())
                        .map_err(ConflictableTransactionError::Abort)?;
                if stored != **expected {
                    return Ok(Some(false));
                }
                view.remove(key.as_bytes())?;
                for (ipam, addr) in releases {
                    release(&views[*ipam], &expected.network, *addr, Some(owner))?;
                }
                return Ok(Some(true));
            }
            Write::ReleaseIfUnowned {
                tree,
                attachments,
                network,
                addr,
                owner,
            } => {
                let att_key = keys::attachment_key(&owner.sandbox_id, &owner.ifname);
                if views[*attachments].get(att_key.as_bytes())?.is_some() {
                    return Ok(Some(false));
                }
                return release(&views[*tree], network, *addr, Some(*owner)).map(Some);
            }
        }
        Ok(None)
    }
}

/// Removes the reservation of `addr` if `owner` holds it (whoever holds it when `None`); whether
/// one was removed.
fn release(
    view: &TransactionalTree,
    network: &str,
    addr: IpAddr,
    owner: Option<&Owner>,
) -> ConflictableTransactionResult<bool, Error> {
    let key = keys::addr_key(addr);
    let held = match owner {
        None => view.get(&key)?.is_some(),
        Some(owner) => holder(view, network, addr, &key)?.as_ref() == Some(owner),
    };
    if held {
        view.remove(key)?;
    }
    Ok(held)
}

/// The current holder of `addr`, as seen by this transaction.
fn holder(
    view: &TransactionalTree,
    network: &str,
    addr: IpAddr,
    key: &[u8],
) -> ConflictableTransactionResult<Option<Owner>, Error> {
    let Some(bytes) = view.get(key)? else {
        return Ok(None);
    };
    decode_owner(&bytes, network, addr)
        .map(Some)
        .map_err(ConflictableTransactionError::Abort)
}

/// The owner a reservation's stored value names.
fn decode_owner(bytes: &[u8], network: &str, addr: IpAddr) -> Result<Owner> {
    let rec: OwnerRecord = codec::decode(bytes, keys::IPAM, ipam_key(network, addr).as_bytes())?;
    Ok(Owner::from_record(rec))
}
