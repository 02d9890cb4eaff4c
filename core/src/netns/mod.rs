//! Network namespaces knid creates for sandboxes (CreateNetns, KNI CreateNetwork): recorded,
//! idempotent per owner, deleted on DeleteNetns and by GC or recovery once they are gone or
//! their sandbox is.
//!
//! Order of effects, so no crash leaves a mount without a record: the record (with the
//! namespace's identity) is committed before the bind mount is made, and removed only after the
//! mount is gone. A record whose path no longer holds its namespace is stale and simply dropped.
//!
//! Creating a namespace (unshare on a scoped thread) costs more than the rest of CreateNetns
//! together, so [`Spares`] keeps a few ready, pinned by fd and mounted nowhere: a crash loses
//! them with the process, and CreateNetns only bind-mounts one.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use knid_netops::Rtnl;
use knid_store::{Batch, NetnsRecord, PodRecord};

use crate::error::{Error, Result};
use crate::lifecycle::detach;
use crate::model::now_ms;
use crate::model::validate;
use crate::model::{GcFinding, GcKeep, GcObject, GcReason, NetnsInfo, NetnsLookup, NetnsRequest};
use crate::shared::Context;

pub(crate) mod owner_locks;
pub(crate) mod recorded;
pub(crate) mod spares;

/// Prefix of the file name of a netns created without a name.
const DEFAULT_NAME_PREFIX: &str = "knid-";

/// Creates the directory namespaces are mounted in, if missing.
pub(crate) fn prepare_dir(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
    {
        log::warn!("create netns_dir {}: {e}", dir.display());
    }
}

/// The domain form of a netns record.
pub(crate) fn info(rec: &NetnsRecord, created: bool) -> NetnsInfo {
    NetnsInfo {
        owner: rec.owner.clone(),
        path: PathBuf::from(&rec.path),
        inode: rec.ino,
        created,
        sandbox_id: rec.sandbox_id.clone(),
        pod: rec.pod.as_ref().map(|p| crate::model::PodRef {
            name: p.name.clone(),
            namespace: p.namespace.clone(),
            uid: p.uid.clone(),
        }),
    }
}

/// Why `rec`'s namespace is no longer at its path, or `None` while it is. A failure to look is
/// an error, never "gone".
pub(crate) fn gone(rec: &NetnsRecord) -> Result<Option<String>> {
    recorded::gone(Path::new(&rec.path), rec.dev, rec.ino)
}

/// Creates the netns of `req.owner`, or returns the one it has.
pub(crate) fn create(ctx: &Context, req: &NetnsRequest) -> Result<NetnsInfo> {
    let owner = req.owner.as_str();
    let _owner = ctx.netns_locks.lock(owner);
    if let Some(name) = &req.name {
        validate::netns_name(name).map_err(|e| e.at("name"))?;
    }
    let name = req
        .name
        .clone()
        .unwrap_or_else(|| format!("{DEFAULT_NAME_PREFIX}{owner}"));
    let path = ctx.netns_dir.join(&name);
    if let Some(rec) = ctx.store.netns(owner)? {
        if !rec.deleting && gone(&rec)?.is_none() {
            if rec.path != path.to_string_lossy() {
                return Err(Error::NetnsTaken {
                    path,
                    why: format!("sandbox {owner} already has netns {}", rec.path),
                });
            }
            return Ok(info(&rec, false));
        }
        // Half deleted, or gone behind knid's back: finish it, then start afresh.
        remove(ctx, &rec)?;
    }
    reserve_slot(ctx)?;
    let made = make(ctx, req, &path);
    if made.is_err() {
        ctx.netns_count.fetch_sub(1, Ordering::SeqCst);
    }
    made
}

fn reserve_slot(ctx: &Context) -> Result<()> {
    if ctx.netns_count.fetch_add(1, Ordering::SeqCst) >= ctx.max_sandboxes {
        ctx.netns_count.fetch_sub(1, Ordering::SeqCst);
        return Err(Error::LimitReached(format!(
            "max_sandboxes ({}) network namespaces reached",
            ctx.max_sandboxes
        )));
    }
    Ok(())
}

fn make(ctx: &Context, req: &NetnsRequest, path: &Path) -> Result<NetnsInfo> {
    let owner = req.owner.as_str();
    let ns = ctx.spares.take()?;
    let id = ns.id();
    let rec = NetnsRecord {
        owner: owner.to_owned(),
        path: path.to_string_lossy().into_owned(),
        dev: id.dev,
        ino: id.ino,
        // A sandbox created by CreateNetns is its own owner; a KNI pod's is linked at attach.
        sandbox_id: if req.pod.is_some() {
            String::new()
        } else {
            owner.to_owned()
        },
        pod: req
            .pod
            .as_ref()
            .map(|p| PodRecord {
                name: p.name.clone(),
                namespace: p.namespace.clone(),
                uid: p.uid.clone(),
                ..Default::default()
            })
            .into(),
        created_at_ms: now_ms(),
        labels: req.labels.clone().into_iter().collect(),
        annotations: req.annotations.clone().into_iter().collect(),
        ..Default::default()
    };
    let mut batch = Batch::new();
    batch.put_netns(rec.clone());
    ctx.store.commit(&batch)?;
    crate::failpoint::hit("netns.recorded")?;
    if let Err(e) = knid_netops::netns::bind(ns, path) {
        let mut undo = Batch::new();
        undo.delete_netns(owner);
        ctx.store.commit(&undo)?;
        return Err(match e.errno() {
            Some(libc::EEXIST) => Error::NetnsTaken {
                path: path.to_owned(),
                why: "the path exists and is not this sandbox's netns".into(),
            },
            _ => Error::Netns {
                path: path.to_owned(),
                source: e,
            },
        });
    }
    log::debug!("{owner}: netns {} created", path.display());
    Ok(info(&rec, true))
}

/// Detaches the sandbox `owner` and removes its netns, if it has one. Run on the owner's shard
/// (the runtime detaches a linked sandbox of another id before). Returns whether a netns went.
pub(crate) fn delete(ctx: &Context, host: &mut Rtnl, owner: &str) -> Result<bool> {
    let _owner = ctx.netns_locks.lock(owner);
    delete_locked(ctx, host, owner)
}

fn delete_locked(ctx: &Context, host: &mut Rtnl, owner: &str) -> Result<bool> {
    let rec = ctx.store.netns(owner)?;
    if let Some(rec) = rec.as_ref().filter(|r| !r.deleting) {
        // Durable before anything goes, so an interrupted delete is finished, not forgotten.
        let mut batch = Batch::new();
        batch.put_netns(NetnsRecord {
            deleting: true,
            ..rec.clone()
        });
        ctx.store.commit(&batch)?;
    }
    // Pod sides (host devices, CNI DEL) are released by the detach itself, while the
    // namespace still exists.
    detach::run(ctx, host, owner, |_| true)?;
    let Some(rec) = rec else {
        return Ok(false);
    };
    crate::failpoint::hit("netns.deleting")?;
    remove(ctx, &rec)?;
    Ok(true)
}

/// Unmounts and removes `rec`'s netns (or whatever stale file is at its path), then its record.
fn remove(ctx: &Context, rec: &NetnsRecord) -> Result<()> {
    let path = Path::new(&rec.path);
    // Only a path that holds this very namespace, or nothing at all, is knid's to remove.
    if gone(rec)?.is_none() || !path.exists() || !knid_netops::netns::is_nsfs(path).unwrap_or(true)
    {
        knid_netops::netns::remove_bound(path).map_err(|source| Error::Netns {
            path: path.to_owned(),
            source,
        })?;
    } else {
        log::warn!(
            "{}: {} holds another namespace now; left alone",
            rec.owner,
            rec.path
        );
    }
    let mut batch = Batch::new();
    batch.delete_netns(&rec.owner);
    ctx.store.commit(&batch)?;
    let _ = ctx
        .netns_count
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            Some(n.saturating_sub(1))
        });
    log::debug!("{}: netns {} removed", rec.owner, rec.path);
    Ok(())
}

/// The owners a netns file at `path` has when knid named it: a KNI netns is named after its
/// owner, a default one `knid-<owner>`.
fn owner_candidates(path: &Path) -> Vec<&str> {
    let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
        return Vec::new();
    };
    let mut out = vec![file];
    out.extend(file.strip_prefix(DEFAULT_NAME_PREFIX));
    out
}

/// The recorded netns at `path`: by its name when knid chose it (no scan), else by looking
/// through them all. Nothing outside `netns_dir` is knid's.
fn by_path(ctx: &Context, path: &Path) -> Result<Option<NetnsRecord>> {
    if path.parent() != Some(ctx.netns_dir.as_path()) {
        return Ok(None);
    }
    for owner in owner_candidates(path) {
        if validate::sandbox_id(owner).is_err() {
            continue;
        }
        if let Some(rec) = ctx.store.netns(owner)? {
            if Path::new(&rec.path) == path {
                return Ok(Some(rec));
            }
        }
    }
    // A custom name: look through them all.
    Ok(ctx
        .store
        .all_netns()?
        .into_iter()
        .find(|r| Path::new(&r.path) == path))
}

/// The owner of the recorded netns `by` names, if any (reads only).
pub(crate) fn find(ctx: &Context, by: &NetnsLookup) -> Result<Option<NetnsInfo>> {
    if let Some(id) = by.sandbox_id.as_deref().filter(|id| !id.is_empty()) {
        if validate::sandbox_id(id).is_ok() {
            if let Some(rec) = ctx.store.netns(id)? {
                return Ok(Some(info(&rec, false)));
            }
        }
        if let Some(rec) = ctx
            .store
            .all_netns()?
            .into_iter()
            .find(|r| r.sandbox_id == id)
        {
            return Ok(Some(info(&rec, false)));
        }
    }
    if let Some(path) = by.path.as_deref().filter(|p| !p.as_os_str().is_empty()) {
        if let Some(rec) = by_path(ctx, path)? {
            return Ok(Some(info(&rec, false)));
        }
    }
    if let Some((namespace, name)) = by
        .pod
        .as_ref()
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty())
    {
        let matches: Vec<NetnsRecord> = ctx
            .store
            .all_netns()?
            .into_iter()
            .filter(|r| {
                r.pod
                    .as_ref()
                    .is_some_and(|p| &p.namespace == namespace && &p.name == name)
            })
            .collect();
        match matches.as_slice() {
            [one] => return Ok(Some(info(one, false))),
            [] => {}
            many => log::warn!(
                "pod {namespace}/{name} has {} recorded netns; none chosen by name",
                many.len()
            ),
        }
    }
    Ok(None)
}

/// Records `sandbox_id` as the sandbox attached in the knid netns at `path`, under the owner's
/// lock, so it cannot resurrect a netns being deleted.
pub(crate) fn link(ctx: &Context, path: &Path, sandbox_id: &str) -> Result<Option<NetnsInfo>> {
    let Some(found) = by_path(ctx, path)? else {
        return Ok(None);
    };
    let _owner = ctx.netns_locks.lock(&found.owner);
    // Read again under the lock: it may have gone meanwhile.
    let Some(mut rec) = ctx.store.netns(&found.owner)? else {
        return Ok(None);
    };
    if rec.deleting {
        return Ok(None);
    }
    if rec.sandbox_id != sandbox_id {
        if !rec.sandbox_id.is_empty() {
            log::warn!(
                "netns {}: sandbox {sandbox_id} replaces {} as the one attached in it",
                rec.path,
                rec.sandbox_id
            );
        }
        rec.sandbox_id = sandbox_id.to_owned();
        let mut batch = Batch::new();
        batch.put_netns(rec.clone());
        ctx.store.commit(&batch)?;
    }
    Ok(Some(info(&rec, false)))
}

/// What GC would remove among the recorded namespaces (reads only): those whose path no longer
/// holds them, those left half deleted, and — when `keep` judges every network — those whose
/// sandbox is not valid. A KNI netns not yet linked to a sandbox has none to judge by and stays.
pub(crate) fn findings(ctx: &Context, keep: Option<&GcKeep>) -> Result<Vec<GcFinding>> {
    let mut out = Vec::new();
    for rec in ctx.store.all_netns()? {
        let finding = |reason, detail: String| GcFinding {
            sandbox_id: rec.owner.clone(),
            ifname: String::new(),
            what: GcObject::Netns,
            reason,
            detail,
        };
        if rec.deleting {
            out.push(finding(GcReason::Interrupted, rec.path.clone()));
        } else if let Some(why) = gone(&rec)? {
            out.push(finding(GcReason::NetnsGone, why));
        } else if let Some(keep) = keep.filter(|k| k.network.is_none()) {
            let id = rec.sandbox_id.as_str();
            let valid = id.is_empty() || keep.keeps_sandbox(id);
            if !valid {
                out.push(finding(GcReason::NotValid, rec.path.clone()));
            }
        }
    }
    Ok(out)
}

/// Removes the netns of one finding: a stale record is dropped, a half-deleted or invalid one
/// deleted (its sandbox detached first). Run on the owner's shard.
pub(crate) fn remove_finding(ctx: &Context, host: &mut Rtnl, finding: &GcFinding) -> Result<()> {
    let _owner = ctx.netns_locks.lock(&finding.sandbox_id);
    let Some(rec) = ctx.store.netns(&finding.sandbox_id)? else {
        return Ok(());
    };
    match finding.reason {
        GcReason::NetnsGone => match gone(&rec)? {
            Some(_) => remove(ctx, &rec),
            None => Ok(()),
        },
        _ => delete_locked(ctx, host, &rec.owner).map(|_| ()),
    }
}

#[cfg(test)]
mod tests;
