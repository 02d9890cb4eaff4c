//! [`Store`]: the opened database, its reads and its commits.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use sled::{Db, Tree};

use crate::batch::{Batch, Committed};
use crate::codec;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::flusher::Flusher;
use crate::group_flush::GroupFlush;
use crate::keys;
use crate::migrate;
use crate::records::{decode_all, decode_each, Decoded, Records};
use crate::reservation::{Owner, Reservation};
use crate::schema::{
    AttachmentRecord, ClusterRecord, ExtensionRecord, NetnsRecord, NetworkRecord, PolicyRecord,
    SandboxRecord,
};
use crate::transaction::PreparedBatch;
use crate::trees::Trees;
use crate::SCHEMA_VERSION;

/// sled's own default tree, present in every database.
const SLED_DEFAULT_TREE: &[u8] = b"__sled__default";

/// The knid store. `Send + Sync`: share it between threads behind an `Arc`.
///
/// Never call it from a thread that has entered a container netns: sled may spawn its I/O threads
/// from the calling thread, and they would inherit that netns.
pub struct Store {
    path: PathBuf,
    /// The first write the filesystem refused, kept because sled keeps it (see [`Store::failure`]).
    failure: OnceLock<Failure>,
    /// Told of every write failure (see [`Store::on_failure`]).
    failure_hook: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// See [`Store::id`].
    id: String,
    db: Db,
    meta: Tree,
    trees: Trees,
    group: Arc<GroupFlush>,
    flusher: Flusher,
    /// Whether `meta/detach_overlap` is recorded and durable (see
    /// [`Store::record_detach_overlap`]).
    detach_overlap: AtomicBool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("flushes", &self.group.flushes())
            .finish_non_exhaustive()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // The flusher holds a handle on the database: it must be gone with the store.
        self.flusher.stop();
    }
}

/// Changes applied before [`Store::flush_soon`], on their way to durability.
#[derive(Debug)]
#[must_use = "wait for the changes to be durable"]
pub struct Durable<'s> {
    store: &'s Store,
    ticket: u64,
}

impl Durable<'_> {
    /// Returns once the changes are durable; flushes itself if the flusher has not got to it.
    pub fn wait(self) -> Result<()> {
        let db = &self.store.db;
        self.store
            .group
            .wait(self.ticket, || db.flush().map(drop))
            .map_err(|e| self.store.write_failed(Error::Sled(e)))
    }
}

impl Drop for Durable<'_> {
    fn drop(&mut self) {
        self.store.group.done_soon();
    }
}

/// The first write failure of a store: the errno (or, when sled passed on only a copy of the
/// error, its kind and text).
#[derive(Debug)]
struct Failure {
    op: &'static str,
    errno: Option<i32>,
    kind: std::io::ErrorKind,
    text: String,
}

impl Failure {
    fn of(op: &'static str, source: &std::io::Error) -> Self {
        Failure {
            op,
            errno: source.raw_os_error(),
            kind: source.kind(),
            text: source.to_string(),
        }
    }

    fn io_error(&self) -> std::io::Error {
        match self.errno {
            Some(errno) => std::io::Error::from_raw_os_error(errno),
            None => std::io::Error::new(self.kind, self.text.clone()),
        }
    }
}

/// The operating system's error inside a sled I/O error, with its errno. sled 0.34 hands every
/// caller after the first a copy made with `io::Error::new(kind, format!("{:?}", original))`,
/// which loses the errno but keeps it in the text (`Os { code: 28, kind: StorageFull, .. }`).
fn os_error(source: std::io::Error) -> std::io::Error {
    if source.raw_os_error().is_some() {
        return source;
    }
    let text = source.to_string();
    let errno = text
        .strip_prefix("Os { code: ")
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse::<i32>().ok());
    match errno {
        Some(errno) => std::io::Error::from_raw_os_error(errno),
        None => source,
    }
}

impl Store {
    /// Opens (creating if needed) the sled database under `cfg.path`; writes `meta/schema` on a new
    /// store; refuses a store whose schema this build cannot read ([`Error::Schema`]) or whose meta
    /// is unreadable ([`Error::Corrupt`]). Fails with [`Error::Open`] if another process (or another
    /// `Store` in this one) holds the database.
    pub fn open(cfg: &StoreConfig) -> Result<Store> {
        let db = sled::Config::new()
            .path(&cfg.path)
            .cache_capacity(cfg.cache_capacity_bytes)
            .mode(sled::Mode::LowSpace)
            .flush_every_ms(cfg.flush_every_ms)
            .open()
            .map_err(|source| Error::Open {
                path: cfg.path.clone(),
                source,
            })?;
        let meta = db.open_tree(keys::META)?;
        check_schema(&db, &meta, cfg.on_migration_step)?;
        let id = store_id(&db, &meta)?;
        let detach_overlap = AtomicBool::new(meta.contains_key(keys::META_DETACH_OVERLAP)?);
        let group = Arc::new(GroupFlush::default());
        let flusher = Flusher::new(db.clone(), Arc::clone(&group));
        Ok(Store {
            path: cfg.path.clone(),
            failure: OnceLock::new(),
            failure_hook: OnceLock::new(),
            trees: Trees::open(&db)?,
            id,
            meta,
            db,
            group,
            flusher,
            detach_overlap,
        })
    }

    /// The boot id recorded by [`Store::set_boot_id`], if any.
    pub fn boot_id(&self) -> Result<Option<String>> {
        let Some(bytes) = self.meta.get(keys::META_BOOT_ID)? else {
            return Ok(None);
        };
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| Error::Corrupt {
                detail: "meta/boot_id is not utf-8".to_owned(),
            })
    }

    /// Records the boot id the store's state belongs to; durable on return.
    pub fn set_boot_id(&self, id: &str) -> Result<()> {
        self.meta
            .insert(keys::META_BOOT_ID, id.as_bytes())
            .map_err(|e| self.write_failed(Error::Sled(e)))?;
        self.flush()
    }

    /// Whether `meta/detach_overlap` was found when the store opened, or recorded since: a
    /// detach of an earlier run may then have retired its links and died before its Detaching
    /// marks were durable, and start-up recovery must look for such links.
    pub fn detach_overlap(&self) -> bool {
        self.detach_overlap.load(Ordering::SeqCst)
    }

    /// Records `meta/detach_overlap`, durable on return, unless it already is: the first detach
    /// that lets its kernel work overlap its marks' flush pays one flush, later ones nothing.
    pub fn record_detach_overlap(&self) -> Result<()> {
        if self.detach_overlap() {
            return Ok(());
        }
        self.meta
            .insert(keys::META_DETACH_OVERLAP, &[][..])
            .map_err(|e| self.write_failed(Error::Sled(e)))?;
        self.flush()?;
        self.detach_overlap.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Removes `meta/detach_overlap` (durable with the next flush): for a clean shutdown, once no
    /// detach can run any more and every one that ran has its marks applied before it.
    pub fn clear_detach_overlap(&self) -> Result<()> {
        self.meta
            .remove(keys::META_DETACH_OVERLAP)
            .map_err(|e| self.write_failed(Error::Sled(e)))?;
        self.detach_overlap.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// The store's id: 32 random lower-case hex digits, written (durably) by the first open and
    /// the same for every later one, so knid can tell the kernel objects it made from those of
    /// another knid with another store.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Directory of the database.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first write the filesystem under the store refused ([`Error::Io`]), if one was.
    ///
    /// sled 0.34 keeps that error and fails every later write and flush with it, even once the
    /// filesystem takes writes again: only opening the database anew (a new process) clears it,
    /// and the store then holds what was durable before the failure. Reads still answer from
    /// sled's cache and log.
    pub fn failure(&self) -> Option<Error> {
        self.failure.get().map(|f| Error::Io {
            op: f.op,
            path: self.path.clone(),
            source: f.io_error(),
        })
    }

    /// Calls `hook` after every write the filesystem refuses, once [`Store::failure`] holds it;
    /// only the first hook set is kept. A failure before the hook was set is not reported to
    /// it: check [`Store::failure`] after setting it.
    pub fn on_failure(&self, hook: impl Fn() + Send + Sync + 'static) {
        let _ = self.failure_hook.set(Box::new(hook));
    }

    /// `err` from a write path, an I/O error of sled's turned into [`Error::Io`] (with the
    /// store's path and the errno) and remembered as the store's failure.
    fn write_failed(&self, err: Error) -> Error {
        let source = match err {
            Error::Sled(sled::Error::Io(source)) => os_error(source),
            other => return other,
        };
        let failure = self.failure.get_or_init(|| {
            let failure = Failure::of("write", &source);
            log::error!(
                "store {}: write failed: {source}; sled fails every later write until the store \
                 is opened again",
                self.path.display()
            );
            failure
        });
        if let Some(hook) = self.failure_hook.get() {
            hook();
        }
        Error::Io {
            op: failure.op,
            path: self.path.clone(),
            source,
        }
    }

    /// The sandbox record `id`.
    pub fn sandbox(&self, id: &str) -> Result<Option<SandboxRecord>> {
        self.trees
            .sandboxes
            .get(id)?
            .map(|v| codec::sandbox(id.as_bytes(), &v))
            .transpose()
    }

    /// Every sandbox record, sorted by id; one that does not decode is returned with its key.
    pub fn sandboxes(&self) -> Result<Records<SandboxRecord>> {
        decode_all(self.trees.sandboxes.iter(), codec::sandbox)
    }

    /// Every sandbox record, sorted by id, read one at a time as the iterator is advanced.
    pub fn each_sandbox(&self) -> impl Iterator<Item = Result<Decoded<SandboxRecord>>> {
        decode_each(self.trees.sandboxes.iter(), codec::sandbox)
    }

    /// [`Store::sandboxes`], and whether every record that decodes sits at the key its own id
    /// spells, as each record knid writes does (see [`Store::all_attachments_in_place`]).
    pub fn sandboxes_in_place(&self) -> Result<(Records<SandboxRecord>, bool)> {
        let mut in_place = true;
        let records = decode_all(self.trees.sandboxes.iter(), |key, value| {
            let rec = codec::sandbox(key, value)?;
            in_place &= key == rec.id.as_bytes();
            Ok(rec)
        })?;
        Ok((records, in_place))
    }

    /// How many sandbox records there are, decodable or not, without decoding them.
    pub fn sandbox_count(&self) -> usize {
        self.trees.sandboxes.len()
    }

    /// The attachment `ifname` of sandbox `sandbox_id`.
    pub fn attachment(&self, sandbox_id: &str, ifname: &str) -> Result<Option<AttachmentRecord>> {
        let key = keys::attachment_key(sandbox_id, ifname);
        self.trees
            .attachments
            .get(&key)?
            .map(|v| codec::attachment(key.as_bytes(), &v))
            .transpose()
    }

    /// The attachments of one sandbox, sorted by ifname; one that does not decode is returned
    /// with its key.
    pub fn attachments(&self, sandbox_id: &str) -> Result<Records<AttachmentRecord>> {
        let prefix = keys::attachment_prefix(sandbox_id);
        decode_all(
            self.trees.attachments.scan_prefix(prefix),
            codec::attachment,
        )
    }

    /// Every attachment record, sorted by sandbox id then ifname; one that does not decode is
    /// returned with its key.
    pub fn all_attachments(&self) -> Result<Records<AttachmentRecord>> {
        decode_all(self.trees.attachments.iter(), codec::attachment)
    }

    /// Every attachment record, in the order of [`Store::all_attachments`], read one at a time
    /// as the iterator is advanced: for a pass over all of them that keeps none. Records written
    /// or deleted during the pass may or may not be seen.
    pub fn each_attachment(&self) -> impl Iterator<Item = Result<Decoded<AttachmentRecord>>> {
        decode_each(self.trees.attachments.iter(), codec::attachment)
    }

    /// Whether an attachment record `sandbox_id`/`ifname` is stored, decodable or not.
    pub fn has_attachment(&self, sandbox_id: &str, ifname: &str) -> Result<bool> {
        let key = keys::attachment_key(sandbox_id, ifname);
        Ok(self.trees.attachments.contains_key(key.as_bytes())?)
    }

    /// [`Store::all_attachments`], and whether every record sits at a key knid writes: one that
    /// decodes at the key its own sandbox id and ifname spell, one that does not at a key with
    /// the separator. Only then do the records grouped by sandbox id (for those that do not
    /// decode, [`Undecodable::attachment_owner`]'s) match what [`Store::attachments`] reads per
    /// sandbox.
    pub fn all_attachments_in_place(&self) -> Result<(Records<AttachmentRecord>, bool)> {
        let mut in_place = true;
        let records = decode_all(self.trees.attachments.iter(), |key, value| {
            let rec = codec::attachment(key, value);
            in_place &= match &rec {
                Ok(rec) => keys::is_attachment_key(key, &rec.sandbox_id, &rec.ifname),
                Err(_) => keys::has_separator(key),
            };
            rec
        })?;
        Ok((records, in_place))
    }

    /// The netns record of `owner`.
    pub fn netns(&self, owner: &str) -> Result<Option<NetnsRecord>> {
        self.trees
            .netns
            .get(owner)?
            .map(|v| codec::netns(owner.as_bytes(), &v))
            .transpose()
    }

    /// Every netns record, sorted by owner.
    pub fn all_netns(&self) -> Result<Vec<NetnsRecord>> {
        decode_all(self.trees.netns.iter(), codec::netns)?.complete()
    }

    /// The extension record `name`.
    pub fn extension(&self, name: &str) -> Result<Option<ExtensionRecord>> {
        self.trees
            .extensions
            .get(name)?
            .map(|v| codec::extension(name.as_bytes(), &v))
            .transpose()
    }

    /// Every extension record, sorted by name.
    pub fn extensions(&self) -> Result<Vec<ExtensionRecord>> {
        decode_all(self.trees.extensions.iter(), codec::extension)?.complete()
    }

    /// The cluster's pod CIDRs as cluster mode last recorded them ([`Store::set_cluster_cidrs`]).
    pub fn cluster_cidrs(&self) -> Result<Option<Vec<String>>> {
        let Some(bytes) = self.meta.get(keys::META_CLUSTER)? else {
            return Ok(None);
        };
        let rec: ClusterRecord = codec::decode(&bytes, keys::META, keys::META_CLUSTER.as_bytes())?;
        Ok(Some(rec.cluster_cidrs))
    }

    /// Records the cluster's pod CIDRs; durable on return.
    pub fn set_cluster_cidrs(&self, cidrs: &[String]) -> Result<()> {
        let mut rec = ClusterRecord::new();
        rec.cluster_cidrs = cidrs.to_vec();
        rec.updated_at_ms = crate::migrate::now_ms();
        let bytes = codec::encode(&rec, keys::META, keys::META_CLUSTER)?;
        self.meta
            .insert(keys::META_CLUSTER, bytes)
            .map_err(|e| self.write_failed(Error::Sled(e)))?;
        self.flush()
    }

    /// The NetworkPolicy objects cluster mode last recorded ([`Store::set_policy_world`]), as
    /// the JSON it gave.
    pub fn policy_world(&self) -> Result<Option<Vec<u8>>> {
        let Some(bytes) = self.meta.get(keys::META_POLICY)? else {
            return Ok(None);
        };
        let rec: PolicyRecord = codec::decode(&bytes, keys::META, keys::META_POLICY.as_bytes())?;
        Ok(Some(rec.world_json))
    }

    /// Records the NetworkPolicy objects (JSON); durable on return.
    pub fn set_policy_world(&self, json: &[u8]) -> Result<()> {
        let mut rec = PolicyRecord::new();
        rec.world_json = json.to_vec();
        rec.updated_at_ms = crate::migrate::now_ms();
        let bytes = codec::encode(&rec, keys::META, keys::META_POLICY)?;
        self.meta
            .insert(keys::META_POLICY, bytes)
            .map_err(|e| self.write_failed(Error::Sled(e)))?;
        self.flush()
    }

    /// The subnets network `name` last applied ([`Store::put_network`]), if recorded.
    pub fn network(&self, name: &str) -> Result<Option<NetworkRecord>> {
        self.trees
            .networks
            .get(name)?
            .map(|v| codec::network(name.as_bytes(), &v))
            .transpose()
    }

    /// Every network record, sorted by name.
    pub fn networks(&self) -> Result<Vec<NetworkRecord>> {
        decode_all(self.trees.networks.iter(), codec::network)?.complete()
    }

    /// Records the subnets network `rec.name` applies, replacing what it had; durable on
    /// return.
    pub fn put_network(&self, rec: &NetworkRecord) -> Result<()> {
        keys::check_id("network", &rec.name)?;
        let bytes = codec::encode(rec, keys::NETWORKS, &rec.name)?;
        self.trees
            .networks
            .insert(rec.name.as_bytes(), bytes)
            .map_err(|e| self.write_failed(Error::Sled(e)))?;
        self.flush()
    }

    /// Forgets network `name`'s record (it left the configuration, or applies no subnets);
    /// durable on return. Unknown names are success.
    pub fn remove_network(&self, name: &str) -> Result<()> {
        if self
            .trees
            .networks
            .remove(name)
            .map_err(|e| self.write_failed(Error::Sled(e)))?
            .is_some()
        {
            self.flush()?;
        }
        Ok(())
    }

    /// The reservations of `network`, sorted by address (IPv4 first).
    pub fn reservations(&self, network: &str) -> Result<Vec<Reservation>> {
        let mut out = self
            .each_reservation(network)?
            .collect::<Result<Vec<_>>>()?;
        // Keys sort numerically within a family; IPv4 and IPv6 keys interleave by first byte.
        out.sort_by_key(|r| r.addr);
        Ok(out)
    }

    /// The reservations of `network`, in key order (not sorted by address), read one at a time
    /// as the iterator is advanced.
    pub fn each_reservation(
        &self,
        network: &str,
    ) -> Result<impl Iterator<Item = Result<Reservation>> + '_> {
        let tree = self.trees.existing_ipam(network)?;
        let network = network.to_owned();
        Ok(tree.into_iter().flat_map(|t| t.iter()).map(move |entry| {
            let (key, value) = entry?;
            codec::reservation(&network, &key, &value)
        }))
    }

    /// The owner of each reserved address of `network`, in key order (not sorted by address,
    /// unlike [`Store::reservations`]): what an allocator loads, without a copy of the
    /// network's name per address.
    pub fn reservation_owners(&self, network: &str) -> Result<Vec<(IpAddr, Owner)>> {
        let Some(tree) = self.trees.existing_ipam(network)? else {
            return Ok(Vec::new());
        };
        // Not `Vec::with_capacity(tree.len())`: sled counts by iterating the tree.
        let mut out = Vec::new();
        for entry in tree.iter() {
            let (key, value) = entry?;
            out.push(codec::reservation_owner(network, &key, &value)?);
        }
        Ok(out)
    }

    /// Names of the networks that hold at least one reservation, sorted.
    pub fn networks_with_reservations(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for name in self.db.tree_names() {
            let Some(network) = name.strip_prefix(keys::IPAM_PREFIX.as_bytes()) else {
                continue;
            };
            if self.db.open_tree(&name)?.is_empty() {
                continue;
            }
            let network = std::str::from_utf8(network).map_err(|_| Error::Corrupt {
                detail: format!(
                    "tree name {:?} is not utf-8",
                    String::from_utf8_lossy(&name)
                ),
            })?;
            out.push(network.to_owned());
        }
        out.sort();
        Ok(out)
    }

    /// The mark ahead of the round-robin cursor of `network` for one family, as set by
    /// [`Batch::set_cursor`].
    pub fn cursor(&self, network: &str, ipv6: bool) -> Result<Option<IpAddr>> {
        let key = keys::cursor_key(network, ipv6);
        let Some(bytes) = self.trees.cursors.get(&key)? else {
            return Ok(None);
        };
        match keys::addr_from_key(&bytes) {
            Some(addr) if addr.is_ipv6() == ipv6 => Ok(Some(addr)),
            _ => Err(Error::Corrupt {
                detail: format!("ipam_cursor/{key} holds {} bytes", bytes.len()),
            }),
        }
    }

    /// Applies `batch` as one sled transaction over every tree it touches, then makes it durable
    /// before returning. Concurrent commits share one flush. Nothing of a failed batch is applied;
    /// an empty batch is a no-op.
    pub fn commit(&self, batch: &Batch) -> Result<Committed> {
        let committed = self.apply(batch)?;
        if !batch.is_empty() {
            self.flush()?;
        }
        Ok(committed)
    }

    /// Applies `batch` like [`Store::commit`], atomically, but does not wait for it to be
    /// durable: it becomes durable with the next commit or flush, or sled's background flush.
    /// For progress marks whose loss in a crash changes nothing (recovery treats the state before
    /// and after alike).
    pub fn apply(&self, batch: &Batch) -> Result<Committed> {
        if batch.is_empty() {
            return Ok(Committed::default());
        }
        PreparedBatch::new(&self.trees, batch)
            .and_then(|prepared| prepared.apply())
            .map_err(|e| self.write_failed(e))
    }

    /// Applies `batch` one key at a time, in its order, without a transaction and without
    /// waiting for it to be durable: for puts, removes and reservations only (anything else is
    /// [`Error::NeedsTransaction`], with nothing written). Not atomic: a failure, a crash, or a
    /// reservation another owner holds ([`Error::Conflict`]) leaves a prefix of the batch
    /// applied, and readers may see one meanwhile. sled recovers a prefix of its log, so a crash
    /// also leaves one. For writes where every prefix is a state recovery handles, ordered so:
    /// an attach's intent, its records before the addresses they hold; a detach's Detaching
    /// marks before its sandbox record's change (then flushed). It saves what a
    /// transaction or a batch costs sled: a log buffer sealed and written twice over (~50 µs of
    /// the caller's time here, and wake-ups of sled's I/O threads).
    pub fn apply_in_order(&self, batch: &Batch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        PreparedBatch::new(&self.trees, batch)
            .and_then(|prepared| prepared.apply_in_order())
            .map_err(|e| self.write_failed(e))
    }

    /// What [`Store::commit`] of `batch` would report (whether each conditional write's condition
    /// holds, all checked in one transaction), with nothing written: a dry run.
    pub fn evaluate(&self, batch: &Batch) -> Result<Committed> {
        if batch.is_empty() {
            return Ok(Committed::default());
        }
        PreparedBatch::new(&self.trees, batch)?.evaluate()
    }

    /// Makes every applied change durable (group flush; see the crate docs for what sled's flush
    /// guarantees).
    pub fn flush(&self) -> Result<()> {
        self.group
            .sync(|| self.db.flush().map(drop))
            .map_err(|e| self.write_failed(Error::Sled(e)))
    }

    /// Makes every applied change durable soon and returns at once: the caller goes on with
    /// work that may run before it is durable, then [`Durable::wait`]s. A request made alone
    /// (no other one outstanding) starts a flush on the store's flusher thread at once (after
    /// the one running, if any), so it overlaps the caller's work. One made beside others leaves
    /// it to the waits: the first of them flushes for all written before it, so concurrent
    /// operations share one flush (and one wake of sled's I/O threads) where each would have
    /// started its own (docs/performance-history.md).
    pub fn flush_soon(&self) -> Durable<'_> {
        let (ticket, alone) = self.group.ticket_soon();
        if alone {
            self.flusher.request(ticket);
        }
        Durable {
            store: self,
            ticket,
        }
    }

    /// Flushes run since the store was opened; with concurrent commits this stays below the number
    /// of commits.
    pub fn flush_count(&self) -> u64 {
        self.group.flushes()
    }

    /// Bytes the database takes on disk.
    pub fn size_on_disk(&self) -> Result<u64> {
        Ok(self.db.size_on_disk()?)
    }
}

/// Checks `meta/schema`, writing it (durably) on a new store and migrating an older one.
fn check_schema(db: &Db, meta: &Tree, on_step: Option<fn(&'static str)>) -> Result<()> {
    match meta.get(keys::META_SCHEMA)? {
        Some(bytes) => {
            let found = <[u8; 4]>::try_from(bytes.as_ref())
                .map(u32::from_be_bytes)
                .map_err(|_| Error::Corrupt {
                    detail: format!("meta/schema holds {} bytes", bytes.len()),
                })?;
            migrate::to_current(db, meta, found, on_step)
        }
        None => {
            let other_tree = db
                .tree_names()
                .iter()
                .any(|n| n != SLED_DEFAULT_TREE && n != keys::META.as_bytes());
            if other_tree {
                return Err(Error::Corrupt {
                    detail: "meta/schema is missing".to_owned(),
                });
            }
            meta.insert(keys::META_SCHEMA, &SCHEMA_VERSION.to_be_bytes())?;
            db.flush()?;
            Ok(())
        }
    }
}

/// The id in `meta/store_id`, made and flushed first if the store has none (a new store, or
/// one a knid without store ids wrote).
fn store_id(db: &Db, meta: &Tree) -> Result<String> {
    if let Some(bytes) = meta.get(keys::META_STORE_ID)? {
        return match std::str::from_utf8(&bytes) {
            Ok(id) if is_store_id(id) => Ok(id.to_owned()),
            _ => Err(Error::Corrupt {
                detail: format!("meta/store_id is not 32 hex digits: {bytes:?}"),
            }),
        };
    }
    let id = new_store_id();
    meta.insert(keys::META_STORE_ID, id.as_bytes())?;
    db.flush()?;
    Ok(id)
}

fn is_store_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// 128 random bits as hex: the kernel's random UUID without its dashes, or, where /proc is not
/// mounted, std's per-process random SipHash keys over the time and pid.
fn new_store_id() -> String {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map(|uuid| uuid.trim().replace('-', "").to_ascii_lowercase());
    if let Ok(id) = from_kernel.as_ref().map(String::as_str) {
        if is_store_id(id) {
            return id.to_owned();
        }
    }
    use std::hash::{BuildHasher, Hasher};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut out = String::with_capacity(32);
    for half in 0..2u8 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u8(half);
        hasher.write_u128(now);
        hasher.write_u32(std::process::id());
        out.push_str(&format!("{:016x}", hasher.finish()));
    }
    out
}

#[cfg(test)]
mod tests;
