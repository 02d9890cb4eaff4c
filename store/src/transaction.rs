//! Turns a [`Batch`] into one sled transaction over every tree it touches.
//!
//! Everything fallible that is not a transactional read or write (validation, encoding, opening
//! trees) happens before the transaction, because sled may run the closure more than once.

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
use crate::trees::{Fixed, TreeName, Trees};

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
        /// The owner, whose bytes are the value written.
        owner: Held<'b>,
    },
    Release {
        tree: usize,
        network: &'b str,
        addr: IpAddr,
        held_by: Option<Held<'b>>,
    },
    ForgetAttachment {
        tree: usize,
        key: String,
        expected: &'b AttachmentRecord,
        /// `expected` as stored: a stored record of the same bytes is the same record.
        expected_value: Vec<u8>,
        owner: Held<'b>,
        /// (ipam tree, address) to release where `owner` holds it.
        releases: Vec<(usize, IpAddr)>,
    },
    ReleaseIfUnowned {
        tree: usize,
        attachments: usize,
        network: &'b str,
        addr: IpAddr,
        owner: Held<'b>,
    },
}

/// The owner a reservation is written for or must name, with the bytes it is stored as: a stored
/// value of the same bytes names it without being decoded.
struct Held<'b> {
    sandbox_id: &'b str,
    ifname: &'b str,
    value: Vec<u8>,
}

impl<'b> Held<'b> {
    /// `sandbox_id`/`ifname`, for a reservation `named` in an error.
    fn new(sandbox_id: &'b str, ifname: &'b str, named: impl FnOnce() -> String) -> Result<Self> {
        let rec = OwnerRecord {
            sandbox_id: sandbox_id.to_owned(),
            ifname: ifname.to_owned(),
            ..OwnerRecord::default()
        };
        Ok(Held {
            sandbox_id,
            ifname,
            value: codec::encode_at(&rec, keys::IPAM, named)?,
        })
    }

    fn of(owner: &'b Owner, network: &str, addr: IpAddr) -> Result<Self> {
        Held::new(&owner.sandbox_id, &owner.ifname, || ipam_key(network, addr))
    }

    /// Whether `holder` is this owner.
    fn is(&self, holder: &Owner) -> bool {
        holder.sandbox_id == self.sandbox_id && holder.ifname == self.ifname
    }
}

/// The distinct trees of one transaction, in first-use order (a batch touches a few).
struct TreeSet<'s, 'b> {
    store: &'s Trees,
    names: Vec<TreeName<'b>>,
    trees: Vec<Tree>,
}

impl<'b> TreeSet<'_, 'b> {
    fn index_of(&mut self, name: TreeName<'b>) -> Result<usize> {
        if let Some(i) = self.names.iter().position(|n| *n == name) {
            return Ok(i);
        }
        self.trees.push(self.store.get(name)?);
        self.names.push(name);
        Ok(self.trees.len() - 1)
    }
}

impl<'b> PreparedBatch<'b> {
    /// Validates and encodes every operation of `batch` and opens (creating if needed) its trees.
    pub(crate) fn new(store: &Trees, batch: &'b Batch) -> Result<Self> {
        let mut trees = TreeSet {
            store,
            names: Vec::new(),
            trees: Vec::new(),
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
                } => reserve_key(&self.trees[*tree], network, *addr, owner)?,
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
    trees: &mut TreeSet<'_, '_>,
    tree: Fixed,
    what: &'static str,
    key: &str,
    rec: &impl protobuf::Message,
) -> Result<Write<'b>> {
    keys::check_id(what, key)?;
    Ok(Write::Put {
        tree: trees.index_of(TreeName::Fixed(tree))?,
        key: key.as_bytes().to_vec(),
        value: codec::encode(rec, tree.name(), key)?,
    })
}

/// A removal from `tree` of the plain key `key`.
fn remove_keyed<'b>(
    trees: &mut TreeSet<'_, '_>,
    tree: Fixed,
    what: &'static str,
    key: &str,
) -> Result<Write<'b>> {
    keys::check_id(what, key)?;
    Ok(Write::Remove {
        tree: trees.index_of(TreeName::Fixed(tree))?,
        key: key.as_bytes().to_vec(),
    })
}

fn prepare<'b>(trees: &mut TreeSet<'_, 'b>, op: &'b Op) -> Result<Write<'b>> {
    Ok(match op {
        Op::PutSandbox(rec) => {
            keys::check_id("sandbox id", &rec.id)?;
            Write::Put {
                tree: trees.index_of(TreeName::Fixed(Fixed::Sandboxes))?,
                key: rec.id.as_bytes().to_vec(),
                value: codec::encode(rec.as_ref(), Fixed::Sandboxes.name(), &rec.id)?,
            }
        }
        Op::DeleteSandbox(id) => {
            keys::check_id("sandbox id", id)?;
            Write::Remove {
                tree: trees.index_of(TreeName::Fixed(Fixed::Sandboxes))?,
                key: id.as_bytes().to_vec(),
            }
        }
        Op::PutAttachment(rec) => {
            let key = attachment_key(&rec.sandbox_id, &rec.ifname)?;
            Write::Put {
                tree: trees.index_of(TreeName::Fixed(Fixed::Attachments))?,
                value: codec::encode(rec.as_ref(), Fixed::Attachments.name(), &key)?,
                key: key.into_bytes(),
            }
        }
        Op::PutNetns(rec) => put_keyed(trees, Fixed::Netns, "netns owner", &rec.owner, rec)?,
        Op::DeleteNetns(owner) => remove_keyed(trees, Fixed::Netns, "netns owner", owner)?,
        Op::PutExtension(rec) => {
            put_keyed(trees, Fixed::Extensions, "extension name", &rec.name, rec)?
        }
        Op::DeleteExtension(name) => {
            remove_keyed(trees, Fixed::Extensions, "extension name", name)?
        }
        Op::DeleteAttachment { sandbox_id, ifname } => Write::Remove {
            tree: trees.index_of(TreeName::Fixed(Fixed::Attachments))?,
            key: attachment_key(sandbox_id, ifname)?.into_bytes(),
        },
        Op::Reserve {
            network,
            addr,
            owner,
        } => {
            check_reservation(network, owner)?;
            Write::Reserve {
                tree: trees.index_of(TreeName::Ipam(network))?,
                network,
                addr: *addr,
                owner: Held::of(owner, network, *addr)?,
            }
        }
        Op::Release {
            network,
            addr,
            held_by,
        } => {
            keys::check_id("network", network)?;
            Write::Release {
                tree: trees.index_of(TreeName::Ipam(network))?,
                network,
                addr: *addr,
                held_by: held_by
                    .as_ref()
                    .map(|owner| Held::of(owner, network, *addr))
                    .transpose()?,
            }
        }
        Op::ForgetAttachment { expected, addrs } => {
            let key = attachment_key(&expected.sandbox_id, &expected.ifname)?;
            let mut releases = Vec::with_capacity(addrs.len());
            if !addrs.is_empty() {
                keys::check_id("network", &expected.network)?;
                let tree = trees.index_of(TreeName::Ipam(&expected.network))?;
                releases.extend(addrs.iter().map(|a| (tree, *a)));
            }
            Write::ForgetAttachment {
                tree: trees.index_of(TreeName::Fixed(Fixed::Attachments))?,
                expected_value: codec::encode(expected.as_ref(), Fixed::Attachments.name(), &key)?,
                key,
                expected,
                owner: Held::new(&expected.sandbox_id, &expected.ifname, || {
                    keys::ipam_tree(&expected.network)
                })?,
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
                tree: trees.index_of(TreeName::Ipam(network))?,
                attachments: trees.index_of(TreeName::Fixed(Fixed::Attachments))?,
                network,
                addr: *addr,
                owner: Held::of(owner, network, *addr)?,
            }
        }
        Op::SetCursor { network, addr } => {
            keys::check_id("network", network)?;
            Write::Put {
                tree: trees.index_of(TreeName::Fixed(Fixed::Cursors))?,
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
fn reserve_key(tree: &Tree, network: &str, addr: IpAddr, owner: &Held) -> Result<()> {
    let key = keys::addr_key(addr);
    let bytes = loop {
        match tree.compare_and_swap(&key, None::<&[u8]>, Some(owner.value.as_slice()))? {
            Ok(()) => return Ok(()),
            Err(taken) => {
                // A failed swap carries what it found; a key freed meanwhile is tried again.
                if let Some(bytes) = taken.current {
                    break bytes;
                }
            }
        }
    };
    if bytes == owner.value {
        return Ok(());
    }
    let holder = decode_owner(&bytes, network, addr)?;
    if owner.is(&holder) {
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
            } => {
                let view = &views[*tree];
                let key = keys::addr_key(*addr);
                match view.get(&key)? {
                    None => {
                        view.insert(key, owner.value.as_slice())?;
                    }
                    Some(bytes) if bytes == owner.value => {}
                    Some(bytes) => {
                        let holder = decode_owner(&bytes, network, *addr)
                            .map_err(ConflictableTransactionError::Abort)?;
                        if !owner.is(&holder) {
                            return Err(ConflictableTransactionError::Abort(Error::Conflict {
                                network: (*network).to_owned(),
                                addr: *addr,
                                holder,
                            }));
                        }
                    }
                }
            }
            Write::Release {
                tree,
                network,
                addr,
                held_by,
            } => {
                release(&views[*tree], network, *addr, held_by.as_ref())?;
            }
            Write::ForgetAttachment {
                tree,
                key,
                expected,
                expected_value,
                owner,
                releases,
            } => {
                let view = &views[*tree];
                let Some(bytes) = view.get(key.as_bytes())? else {
                    return Ok(Some(false));
                };
                if bytes != *expected_value {
                    // Not the same bytes; the same record still, if written by another encoder.
                    let stored: AttachmentRecord =
                        codec::decode(&bytes, Fixed::Attachments.name(), key.as_bytes())
                            .map_err(ConflictableTransactionError::Abort)?;
                    if stored != **expected {
                        return Ok(Some(false));
                    }
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
                let att_key = keys::attachment_key(owner.sandbox_id, owner.ifname);
                if views[*attachments].get(att_key.as_bytes())?.is_some() {
                    return Ok(Some(false));
                }
                return release(&views[*tree], network, *addr, Some(owner)).map(Some);
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
    owner: Option<&Held>,
) -> ConflictableTransactionResult<bool, Error> {
    let key = keys::addr_key(addr);
    let held = match (view.get(&key)?, owner) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(bytes), Some(owner)) => {
            bytes == owner.value
                || decode_owner(&bytes, network, addr)
                    .map(|holder| owner.is(&holder))
                    .map_err(ConflictableTransactionError::Abort)?
        }
    };
    if held {
        view.remove(key)?;
    }
    Ok(held)
}

/// The owner a reservation's stored value names.
fn decode_owner(bytes: &[u8], network: &str, addr: IpAddr) -> Result<Owner> {
    let rec: OwnerRecord = codec::decode(bytes, keys::IPAM, ipam_key(network, addr).as_bytes())?;
    Ok(Owner::from_record(rec))
}
