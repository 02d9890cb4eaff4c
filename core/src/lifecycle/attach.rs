//! Attach, run on the sandbox's shard worker: compare with what is recorded (idempotency), plan
//! names and addresses, record the intent (Pending, then the Provisioning mark) and start its
//! flush, do the kernel work (every step after the veth's creation waits for the intent to be
//! durable), call the post-attach extensions, set the completion marks, record Attached, reply.
//! Any failure after the intent is durable — a required extension's included — is rolled back:
//! links deleted, records and reservations removed.
//!
//! One flush per attach: when every interface ends with a completion mark
//! ([`drivers::completes`]), the intent says so (`roll_forward`) and Attached is applied without
//! waiting for its flush — it becomes durable with the next one (another operation's, or sled's
//! own within a second). A crash before that finds the intent Provisioning and the kernel work
//! complete, and start-up recovery rolls it forward to the very state the reply gave
//! ([`super::roll_forward`]). Other attaches (macvlan, ipvlan, host devices, cni) commit
//! Attached durably before the reply.

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use knid_netops::{NetnsHandle, Rtnl};
use knid_store::{AttachmentRecord, Batch, Owner, SandboxRecord};

use super::{reaper, rollback};
use crate::drivers::plan::{self, Plan};
use crate::drivers::{self, dan, Intent};
use crate::error::{Error, Result};
use crate::extension::Phase;
use crate::failpoint;
use crate::lifecycle::stopwatch::Stopwatch;
use crate::lifecycle::teardown::{self, SandboxAfter};
use crate::lifecycle::{self, Event, Recovery};
use crate::model::now_ms;
use crate::model::{AttachRequest, AttachmentState, InterfaceSpec, Sandbox};
use crate::node::{host_ports, nat};
use crate::records::{
    self, attachment_to_record, corrupt, sandbox_from_records, sandbox_to_record,
};
use crate::shared::Context;

/// How long an attach short of addresses waits for the reaper to release detached ones.
const REAPER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// One interface to create, fully decided.
struct Planned {
    plan: Plan,
    /// Its record, until the attach takes it over to track it as last written.
    record: AttachmentRecord,
}

pub(crate) fn run(ctx: &Context, host: &mut Rtnl, req: &AttachRequest) -> Result<Sandbox> {
    let mut phases = Stopwatch::start();
    let id = req.sandbox_id.as_str();
    let mut all = usable_attachments(ctx, id)?;
    if take_over_leftovers(ctx, host, req, &all)? {
        all = usable_attachments(ctx, id)?;
    }
    // What remains: Attached, and Reaping interfaces this request does not re-create.
    let mut attached = Vec::with_capacity(all.len());
    let mut next_position = 0;
    for rec in all {
        next_position = next_position.max(rec.position as usize + 1);
        if lifecycle::state_of(&rec)? == AttachmentState::Attached {
            attached.push(rec);
        }
    }
    let existing = corrupt::sandbox(&ctx.store, id).map_err(refuse_corrupt)?;
    if let Some(rec) = &existing {
        if rec.netns_path != req.netns_path.to_string_lossy() {
            return Err(Error::AlreadyExists {
                sandbox_id: id.to_owned(),
                ifname: req
                    .interfaces
                    .first()
                    .map(|i| i.name.to_string())
                    .unwrap_or_default(),
                field: "netns_path".to_owned(),
            });
        }
    }
    let mut wanted = Vec::new();
    for (i, spec) in req.interfaces.iter().enumerate() {
        match attached.iter().find(|a| a.ifname == spec.name.as_str()) {
            Some(a) => {
                let recorded = a.spec.as_ref().cloned().unwrap_or_default();
                if let Some(field) = records::spec_difference(&recorded, spec) {
                    return Err(Error::AlreadyExists {
                        sandbox_id: id.to_owned(),
                        ifname: spec.name.to_string(),
                        field: format!("interfaces[{i}].{field}"),
                    });
                }
            }
            None => wanted.push(spec),
        }
    }
    if let (Some(rec), true) = (&existing, wanted.is_empty()) {
        log::debug!("{id}: attach repeated with an identical spec");
        return sandbox_from_records(rec, attached);
    }
    // One request is capped at validation; attach after attach must not grow past it either.
    if attached.len() + wanted.len() > crate::model::validate::MAX_INTERFACES {
        return Err(Error::LimitReached(format!(
            "sandbox {id} has {} interfaces attached; {} more would pass the limit of {} per sandbox",
            attached.len(),
            wanted.len(),
            crate::model::validate::MAX_INTERFACES
        )));
    }
    crate::drivers::dan::check_alone(id, &attached, &wanted)?;

    let ns = NetnsHandle::open(&req.netns_path).map_err(|source| Error::Netns {
        path: req.netns_path.clone(),
        source,
    })?;
    let ns_id = ns.id();
    if ns_id == ctx.host_netns {
        return Err(Error::FailedPrecondition(format!(
            "netns_path {} is the host's network namespace (knid's own); a sandbox needs its own",
            req.netns_path.display()
        )));
    }
    phases.end("lookup");
    if let Some(rec) = existing.as_ref().filter(|_| !attached.is_empty()) {
        if (rec.netns_dev, rec.netns_ino) != (ns_id.dev, ns_id.ino) {
            return Err(Error::FailedPrecondition(format!(
                "netns {} is no longer the namespace sandbox {id} was attached in; detach it first",
                req.netns_path.display()
            )));
        }
    }

    // Host ports are taken with the sandbox's first attach, before anything is recorded or
    // changed: a port held by another sandbox refuses the attach here.
    let claims_ports = existing.is_none() && !req.port_mappings.is_empty();
    if claims_ports {
        ctx.host_ports.claim(id, &req.port_mappings)?;
    }
    let release_ports = || {
        if claims_ports {
            ctx.host_ports.release(id);
        }
    };
    let now = now_ms();
    let sandbox_rec = match &existing {
        Some(rec) => SandboxRecord {
            generation: rec.generation + 1,
            updated_at_ms: now,
            ..rec.clone()
        },
        None => {
            reserve_sandbox_slot(ctx).inspect_err(|_| release_ports())?;
            new_sandbox_record(req, ns_id, now)
        }
    };
    // Positions only grow within a sandbox, so a new interface never shares a route metric with
    // one still attached or still being reaped.
    let planned = match plan_all(ctx, host, req, ns_id, &wanted, next_position, now) {
        // Addresses of detached interfaces come back once the reaper deleted their links: when
        // it has some, let it finish now rather than fail.
        Err(Error::Exhausted { .. } | Error::AddressInUse { .. })
            if reaper::wait_idle(ctx, REAPER_WAIT) =>
        {
            plan_all(ctx, host, req, ns_id, &wanted, next_position, now)
        }
        other => other,
    };
    let planned = match planned {
        Ok(p) => p,
        Err(e) => {
            if existing.is_none() {
                ctx.sandbox_count.fetch_sub(1, Ordering::SeqCst);
            }
            release_ports();
            return Err(e);
        }
    };
    phases.end("plan");

    // Recovery may finish this attach only if every interface ends with a completion mark.
    let roll_forward = planned
        .iter()
        .all(|p| drivers::completes(p.plan.result.kind));
    let mut planned = planned;
    for p in &mut planned {
        p.record.roll_forward = roll_forward;
    }
    // The intent: durable before the first kernel call that recovery could not find again by
    // its name alone. Its flush runs while the veth is created (see `veth::create`). Written
    // one key at a time (`Store::apply_in_order`, no transaction): the records, then the
    // addresses they hold. Every prefix is one recovery rolls back like any Pending attachment;
    // a reservation never exists without its record, so GC's sweep of reservations without
    // one never takes an address from an attach in flight.
    let mut holds = Batch::new();
    for p in &planned {
        for addr in p.plan.pod_addresses() {
            holds.reserve(&p.plan.network.name, addr.addr(), owner(&p.record));
        }
        for mark in &p.plan.marks {
            holds.set_cursor(&p.plan.network.name, *mark);
        }
    }

    // `current` tracks each record as last written, for the rollback's conditional forget; the
    // plans keep what the kernel work needs (`p.plan`).
    let mut current: Vec<AttachmentRecord> = planned
        .iter_mut()
        .map(|p| std::mem::take(&mut p.record))
        .collect();
    let mut intent = Intent::default();
    let mut attach = || -> Result<()> {
        // A failure from here on is rolled back like any other: whatever of the intent was
        // written is forgotten, with the addresses it holds.
        let mut records = Batch::new();
        records.put_sandbox(&sandbox_rec);
        for rec in &current {
            records.put_attachment(rec);
        }
        ctx.store.apply_in_order(&records)?;
        failpoint::hit("attach.recorded")?;
        ctx.store.apply_in_order(&holds)?;
        phases.end("intent");
        failpoint::hit("attach.pending")?;
        lifecycle::advance_all(&mut current, Event::Provision, now_ms())?;
        let marks = lifecycle::writes(&current);
        ctx.store.apply(&marks)?;
        // One flush for the intent and the mark, in the background from here when no other
        // operation's is outstanding, else by the first wait (a write while a flush is on its
        // way waits for it in sled). The mark is in it, so a complete kernel state is always
        // found Provisioning on disk.
        intent.pending = Some(ctx.store.flush_soon());
        failpoint::hit("attach.provisioning")?;
        phases.end("mark");
        provision(ctx, host, &ns, id, &planned, &mut current, &mut intent)?;
        check_netns_named(&req.netns_path, ns_id)?;
        if claims_ports {
            add_host_ports(ctx, id, &req.port_mappings, &current)?;
            failpoint::hit("attach.host_ports_added")?;
        }
        phases.split("intent-wait", intent.waited);
        phases.end("kernel");
        let mut done = current.clone();
        lifecycle::advance_all(&mut done, Event::Provisioned, now_ms())?;
        let batch = lifecycle::writes(&done);
        if ctx.extensions.has(Phase::PostAttach) {
            run_post_attach(ctx, &sandbox_rec, &attached, &done)?;
            phases.end("extensions");
        }
        // The last kernel step: whatever is found marked complete did every step above.
        for p in &planned {
            drivers::complete(ctx, host, &p.plan)?;
        }
        failpoint::hit("attach.completed")?;
        phases.end("complete");
        // The sandbox record went with the intent, unchanged since.
        if roll_forward {
            // Durable with the next flush; until then recovery rolls it forward (see above).
            ctx.store.apply(&batch)?;
        } else {
            ctx.store.commit(&batch)?;
        }
        current = done;
        phases.end("commit");
        Ok(())
    };
    if let Err(e) = attach() {
        log::warn!("{id}: attach failed, rolling back: {}", e.chain());
        forget_marks(ctx, &planned);
        let after = match existing {
            Some(rec) => SandboxAfter::Put(Box::new(rec)),
            None => SandboxAfter::Delete(id.to_owned()),
        };
        if let Err(undo) = rollback::run(ctx, host, current, Some(after)) {
            // What could not be undone stays recorded (RollingBack) for the next attach,
            // detach, GC or start-up to finish.
            log::error!("{id}: rollback incomplete: {}", undo.chain());
        } else {
            release_ports();
        }
        return Err(e);
    }
    // The attach is recorded (durable, or rolled forward by recovery): an error here is a lost
    // reply, and a retry returns this result.
    failpoint::hit("attach.attached")?;
    log::debug!("attach {id}: {phases}");
    let mut all = attached;
    all.extend(current);
    sandbox_from_records(&sandbox_rec, all)
}

/// Adds the map elements of the sandbox's host ports towards its first interface (on a
/// `bridge` or `routed` network), in one nf_tables transaction; recorded in memory first, so a
/// rollback removes them.
fn add_host_ports(
    ctx: &Context,
    id: &str,
    mappings: &[crate::model::PortMapping],
    current: &[AttachmentRecord],
) -> Result<()> {
    let Some(target) = current.iter().find(|r| host_ports::is_target(r)) else {
        return Ok(());
    };
    let routable = ctx.network(&target.network).is_some_and(|n| {
        matches!(
            n.driver,
            crate::config::Driver::Bridge { .. } | crate::config::Driver::Routed
        )
    });
    if !routable {
        log::warn!(
            "{id}: host ports recorded but not set up: network {} is neither bridge nor routed",
            target.network
        );
        return Ok(());
    }
    let elements = host_ports::elements(mappings, &crate::records::addresses(target)?);
    ctx.host_ports.set_elements(id, elements.clone());
    nat::host_nft()?
        .add_port_maps(nat::TABLE, &elements)
        .map_err(|e| Error::kernel(format!("add host ports of {id}"), e))
}

/// Fails unless `path` still names the namespace `id` the attach worked in. Unmounted or deleted
/// meanwhile, the namespace lives on only through knid's own handle, and a pod attached there
/// could never be reached, or detached by the path its owner knows: the attach is rolled back.
/// One stat.
fn check_netns_named(path: &std::path::Path, id: knid_netops::NetnsId) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(meta) if (meta.dev(), meta.ino()) == (id.dev, id.ino) => Ok(()),
        Ok(_) => Err(Error::FailedPrecondition(format!(
            "netns {} was unmounted or replaced during the attach: it no longer names the \
             namespace the attach worked in",
            path.display()
        ))),
        Err(e) => Err(Error::FailedPrecondition(format!(
            "netns {} vanished during the attach: {e}",
            path.display()
        ))),
    }
}

/// Calls the post-attach extensions with the sandbox as this attach is about to make it durable
/// (`attached` and the `new` records, marked Attached) and the new interfaces' names.
fn run_post_attach(
    ctx: &Context,
    sandbox_rec: &SandboxRecord,
    attached: &[AttachmentRecord],
    new: &[AttachmentRecord],
) -> Result<()> {
    let sandbox = sandbox_from_records(sandbox_rec, attached.iter().chain(new).cloned().collect())?;
    let ifnames: Vec<String> = new.iter().map(|r| r.ifname.clone()).collect();
    ctx.extensions.post_attach(&sandbox, &ifnames)
}

/// Clears what interrupted operations left on this sandbox so the attach starts from a clean,
/// recorded state: an unfinished attach is rolled back; an unfinished detach, and a Reaping
/// interface this request re-creates (its deterministic host name must be free), are deleted now
/// instead of waiting for the reaper. Returns whether anything changed.
fn take_over_leftovers(
    ctx: &Context,
    host: &mut Rtnl,
    req: &AttachRequest,
    all: &[AttachmentRecord],
) -> Result<bool> {
    let id = req.sandbox_id.as_str();
    let requested =
        |rec: &AttachmentRecord| req.interfaces.iter().any(|i| i.name.as_str() == rec.ifname);
    let mut undo = Vec::new();
    let mut finish = Vec::new();
    let mut attached = false;
    for rec in all {
        let state = lifecycle::state_of(rec)?;
        match lifecycle::recovery(state) {
            Recovery::Verify => attached = true,
            Recovery::RollBack => undo.push(rec.clone()),
            Recovery::FinishDetach if state == AttachmentState::Detaching || requested(rec) => {
                finish.push(rec.clone());
            }
            Recovery::FinishDetach => {}
        }
    }
    if undo.is_empty() && finish.is_empty() {
        return Ok(false);
    }
    log::warn!(
        "{id}: taking over {} interrupted attach(es) and {} unfinished detach(es)",
        undo.len(),
        finish.len()
    );
    // With nothing attached left, a stale sandbox record goes with the leftovers, so the attach
    // starts a new sandbox.
    let after = (!attached && corrupt::sandbox(&ctx.store, id)?.is_some())
        .then(|| SandboxAfter::Delete(id.to_owned()));
    if !finish.is_empty() {
        teardown::delete_links(ctx, host, &finish)?;
        for rec in &finish {
            if lifecycle::state_of(rec)? == AttachmentState::Detaching {
                lifecycle::check_ends(rec, &[Event::Retired, Event::Reaped])?;
            } else {
                lifecycle::check_ends(rec, &[Event::Reaped])?;
            }
        }
        teardown::forget(ctx, &finish, None)?;
    }
    rollback::run(ctx, host, undo, after)?;
    Ok(true)
}

/// The attachments of sandbox `id`; a record of it knid cannot use refuses the attach
/// ([`refuse_corrupt`]): what it holds cannot be compared with the request.
fn usable_attachments(ctx: &Context, id: &str) -> Result<Vec<AttachmentRecord>> {
    let read = corrupt::attachments(&ctx.store, id)?;
    match read.corrupt.first() {
        Some(bad) => Err(refuse_corrupt(bad.error())),
        None => Ok(read.usable),
    }
}

/// A record of the sandbox knid cannot use, as an attach's failed precondition that says what
/// removes it; any other error as it is.
fn refuse_corrupt(err: Error) -> Error {
    match err {
        Error::Corrupt { .. } => {
            Error::FailedPrecondition(format!("{err}; {}", corrupt::REMOVED_BY))
        }
        other => other,
    }
}

fn reserve_sandbox_slot(ctx: &Context) -> Result<()> {
    let before = ctx.sandbox_count.fetch_add(1, Ordering::SeqCst);
    if before >= ctx.max_sandboxes {
        ctx.sandbox_count.fetch_sub(1, Ordering::SeqCst);
        return Err(Error::LimitReached(format!(
            "max_sandboxes ({}) reached",
            ctx.max_sandboxes
        )));
    }
    Ok(())
}

fn new_sandbox_record(req: &AttachRequest, ns: knid_netops::NetnsId, now: i64) -> SandboxRecord {
    let sandbox = Sandbox {
        id: req.sandbox_id.clone(),
        netns_path: req.netns_path.clone(),
        netns_inode: ns.ino,
        netns_dev: ns.dev,
        generation: 1,
        pod: req.pod.clone(),
        interfaces: Vec::new(),
        dns: req.dns.clone(),
        port_mappings: req.port_mappings.clone(),
        labels: req.labels.clone(),
        annotations: req.annotations.clone(),
        created_at_ms: now,
        updated_at_ms: now,
    };
    sandbox_to_record(&sandbox)
}

fn owner(rec: &AttachmentRecord) -> Owner {
    Owner {
        sandbox_id: rec.sandbox_id.clone(),
        ifname: rec.ifname.clone(),
    }
}

/// Plans every new interface. Addresses are marked used in memory; on error every one taken
/// so far is handed back.
fn plan_all(
    ctx: &Context,
    host: &mut Rtnl,
    req: &AttachRequest,
    ns: knid_netops::NetnsId,
    wanted: &[&InterfaceSpec],
    first_position: usize,
    now: i64,
) -> Result<Vec<Planned>> {
    let mut planned: Vec<Planned> = Vec::new();
    for (k, spec) in wanted.iter().enumerate() {
        let position = first_position + k;
        let plan = match plan::plan(ctx, host, &req.sandbox_id, &req.netns_path, spec, position) {
            Ok(plan) => plan,
            Err(e) => {
                release_in_memory(ctx, &planned);
                return Err(e);
            }
        };
        let position = u32::try_from(position).unwrap_or(u32::MAX);
        // A plan whose record would not map back (a device without an Ethernet address) is
        // refused here, before anything is written: its addresses go back with the others.
        let mut record =
            match attachment_to_record(&req.sandbox_id, &plan.result, spec, position, now) {
                Ok(record) => record,
                Err(e) => {
                    planned.push(Planned {
                        plan,
                        record: AttachmentRecord::default(),
                    });
                    release_in_memory(ctx, &planned);
                    return Err(e);
                }
            };
        // Where the pod side lives, for whoever releases it later.
        record.netns_path = req.netns_path.to_string_lossy().into_owned();
        (record.netns_dev, record.netns_ino) = (ns.dev, ns.ino);
        if let Some(cni) = plan.network.cni() {
            record.cni = Some(drivers::cni::call_record(cni, req, spec)).into();
        }
        planned.push(Planned { plan, record });
    }
    Ok(planned)
}

fn release_in_memory(ctx: &Context, planned: &[Planned]) {
    forget_marks(ctx, planned);
    for p in planned {
        let addrs: Vec<IpAddr> = p.plan.pod_addresses().map(|a| a.addr()).collect();
        ctx.ipam.release(&p.plan.network.name, &addrs);
    }
}

/// The IPAM marks the plans moved, forgotten in memory for an attach that failed: they may not
/// have been written.
fn forget_marks(ctx: &Context, planned: &[Planned]) {
    for p in planned.iter().filter(|p| !p.plan.marks.is_empty()) {
        ctx.ipam.forget_marks(&p.plan.network.name);
    }
}

/// The kernel work of every planned interface, through one socket opened in the pod netns;
/// then the sandbox's DAN file when it has DAN taps. A cni interface's chain result is written
/// into its record in `current` (and the store) as soon as ADD returns, so whatever happens
/// next, its DEL gets the result as prevResult.
fn provision(
    ctx: &Context,
    host: &mut Rtnl,
    ns: &NetnsHandle,
    id: &str,
    planned: &[Planned],
    current: &mut [AttachmentRecord],
    intent: &mut Intent<'_>,
) -> Result<()> {
    let mut pod = Rtnl::open_in(ns).map_err(|source| Error::Netns {
        path: ns.path().to_path_buf(),
        source,
    })?;
    let result = planned
        .iter()
        .zip(current.iter_mut())
        .try_for_each(|(p, rec)| drivers::create(ctx, host, &mut pod, ns, &p.plan, rec, intent))
        .and_then(|()| intent.durable());
    if result.is_err() {
        // A remembered bridge index may be what failed: the next attach looks again.
        ctx.bridges.clear();
    }
    result?;
    if planned.iter().any(|p| p.plan.result.is_dan()) {
        dan::sync(ctx, id)?;
        failpoint::hit("attach.dan_written")?;
    }
    Ok(())
}
