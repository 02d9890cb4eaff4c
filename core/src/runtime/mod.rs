//! The runtime: the public face of the core. Requests are checked against the configuration,
//! routed to a shard worker by sandbox id (same sandbox ⇒ same worker ⇒ strictly ordered) over a
//! bounded channel, and answered once the state they report is durable.
//!
//! This file holds the request methods; [`start`] starts and stops the runtime and applies its
//! networks, [`status`] reports readiness, [`listing`] builds List's summaries, [`shards`] and
//! [`worker`] route and run operations (each shard's worker running only while it has work,
//! [`lane`]), [`recovery`] reconciles the store with the kernel at start-up, [`periodic`] runs
//! its background jobs ([`store_watch`] among them) on one thread.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::extension::{ExtensionInfo, ExtensionSpec};
use crate::locks::LockExt;
use crate::metrics::{self, Metrics};
use crate::model::{
    AttachRequest, Condition, GcReport, GcRequest, IfName, ListFilter, MacAddr, NetnsInfo,
    NetnsLookup, NetnsRequest, Sandbox, SandboxId, SandboxSummary,
};
use crate::records::corrupt;
use crate::shared::Context;
use crate::{drivers, gc, netns, records, validate};
use listing::live;
use periodic::Periodic;
use shards::Shards;
use store_watch::OnWritable;
use worker::{InterfaceOp, Job};

pub use policy::{
    parse_pod, parse_port, KernelCheck, PolicyEntry, PolicyListing, PolicyVerdict, Resolved,
};

mod lane;
mod listing;
mod periodic;
mod policy;
mod recovery;
mod shards;
mod start;
mod status;
mod store_watch;
mod worker;

/// The running core: shard workers, the reaper and the periodic threads over a store.
pub struct Runtime {
    ctx: Arc<Context>,
    shards: Arc<Shards>,
    /// The start-up orphan sweep, while it runs.
    sweeper: Mutex<Option<JoinHandle<()>>>,
    /// The reconciler, the extensions' health poller and the store watch: run by
    /// [`Runtime::run_due_jobs`]'s caller or [`Runtime::spawn_jobs`].
    periodic: Periodic,
    /// Cluster mode's threads, when it is on.
    cluster: Mutex<Option<crate::cluster::ClusterMode>>,
    /// The `[cluster]` table knid started with: read at start-up only.
    cluster_table: crate::config::ClusterConfig,
    /// The VXLAN overlay's settings when this node runs it (cluster mode, backend auto or
    /// vxlan, not fallen back): a reload fits the pod network's MTU to it.
    overlay: Option<crate::config::VxlanSettings>,
    /// Run once a failed store's filesystem takes writes again (see [`Runtime::on_store_writable`]).
    on_store_writable: Arc<OnWritable>,
    /// Extensions `ExtensionsReady` waits for (`required_extensions`, re-read on reload).
    required_extensions: RwLock<Vec<String>>,
    node_ready: RwLock<Condition>,
    /// Last (status, since) of each condition, so `since` is when it last changed.
    transitions: Mutex<HashMap<String, (bool, i64)>>,
    boot_id: String,
}

impl Runtime {
    /// Registers an extension durably, replacing one of the same name (an identical
    /// registration changes nothing), then calls its Health once so its state is known. An
    /// unhealthy extension is registered all the same.
    pub fn register_extension(&self, spec: ExtensionSpec) -> Result<()> {
        self.check_store()?;
        self.ctx.extensions.register(spec)
    }

    /// Removes an extension's registration, durably; the only way one goes away. Unknown names
    /// are success.
    pub fn unregister_extension(&self, name: &str) -> Result<()> {
        self.check_store()?;
        self.ctx.extensions.unregister(name)
    }

    /// The registered extensions in call order (order, then name), with their last calls.
    pub fn list_extensions(&self) -> Vec<ExtensionInfo> {
        self.ctx.extensions.list()
    }

    /// Attaches every requested interface, all or nothing; idempotent for an identical request.
    pub fn attach(&self, req: AttachRequest, deadline: Option<Instant>) -> Result<Sandbox> {
        self.check_attach(&req)?;
        self.check_store()?;
        let id = req.sandbox_id.clone();
        self.shards.submit(&id, deadline, |reply| Job::Attach {
            req: Box::new(req),
            deadline,
            reply,
        })
    }

    /// Checks what needs the configuration: netns prefix, networks, kinds, static addresses.
    fn check_attach(&self, req: &AttachRequest) -> Result<()> {
        let path = req.netns_path.to_string_lossy();
        if !validate::netns_path_allowed(&path, &self.ctx.netns_prefixes) {
            return Err(validate::Invalid::new(format!(
                "{path} is not accepted: it must be one of {} (netns_prefixes)",
                validate::netns_paths_accepted(&self.ctx.netns_prefixes)
            ))
            .at("netns_path"));
        }
        for (i, spec) in req.interfaces.iter().enumerate() {
            let at = |(field, invalid): (String, validate::Invalid)| {
                invalid.at(format!("interfaces[{i}].{field}"))
            };
            let Some(network) = self.ctx.network(&spec.network) else {
                return Err(
                    validate::Invalid::new(format!("unknown network {:?}", spec.network))
                        .at(format!("interfaces[{i}].network")),
                );
            };
            if network.awaits_pod_cidr() {
                let why = match &self.ctx.cluster {
                    Some(view) => view.waiting_reason(),
                    None => "this node's pod CIDR is not known".to_owned(),
                };
                return Err(Error::Unavailable(format!(
                    "network {}: {why}; retry once the PodCIDR condition holds",
                    network.name
                )));
            }
            let kind = spec.kind.unwrap_or_else(|| network.default_kind());
            network
                .allows(kind, spec.is_dan())
                .map_err(|rule| at(("kind".into(), validate::Invalid::new(rule))))?;
            drivers::check_request(kind, spec).map_err(at)?;
            network
                .check_interface(spec, drivers::knid_assigns_addresses(kind))
                .map_err(at)?;
        }
        Ok(())
    }

    /// Detaches one interface (or all when `ifname` is None); unknown sandbox is success.
    pub fn detach(
        &self,
        id: SandboxId,
        ifname: Option<IfName>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        self.check_store()?;
        self.on_interfaces(InterfaceOp::Detach, id, ifname, deadline)
    }

    /// Verifies the attached interfaces of `id` (or just `ifname`) against the kernel, on the
    /// sandbox's shard so no attach or detach of it runs meanwhile. `expected_mac` replaces the
    /// recorded MAC of `ifname` (a later plugin of a CNI chain may have changed it).
    pub fn check(
        &self,
        id: SandboxId,
        ifname: Option<IfName>,
        expected_mac: Option<MacAddr>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        self.on_interfaces(InterfaceOp::Check(expected_mac), id, ifname, deadline)
    }

    fn on_interfaces(
        &self,
        op: InterfaceOp,
        id: SandboxId,
        ifname: Option<IfName>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let key = id.clone();
        self.shards.submit(&key, deadline, |reply| Job::Interfaces {
            op,
            id,
            ifname,
            deadline,
            reply,
        })
    }

    /// Detaches every attachment not kept by `req.keep` (none when `keep` is None), then sweeps
    /// the node: attachments whose netns is gone, leftovers of interrupted operations, records
    /// knid cannot use (with the addresses they hold), orphaned host links and reservations. A
    /// dry run reports without removing.
    pub fn garbage_collect(&self, req: GcRequest, deadline: Option<Instant>) -> Result<GcReport> {
        self.shards.ensure_accepting()?;
        if !req.dry_run {
            self.check_store()?;
        }
        let report = gc::collect(
            &self.ctx,
            &*self.shards,
            &req,
            gc::Corrupt::Collect,
            deadline,
        )?;
        gc::record(&self.ctx, "gc", &report);
        Ok(report)
    }

    /// The sandbox as recorded. A sandbox with a record knid cannot use fails with that record's
    /// error (`Error::Corrupt`, naming its key); Detach or GC removes it.
    pub fn inspect(&self, id: &SandboxId) -> Result<Sandbox> {
        let rec = corrupt::sandbox(&self.ctx.store, id.as_str())?
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        let read = corrupt::attachments(&self.ctx.store, id.as_str())?;
        if let Some(bad) = read.corrupt.first() {
            return Err(bad.error());
        }
        records::sandbox_from_records(&rec, live(read.usable))
    }

    /// Summaries of the sandboxes matching `filter`, sorted by id. A sandbox with a record knid
    /// cannot use is listed with that record's error (see [`listing`]), never fails the list.
    pub fn list(&self, filter: &ListFilter) -> Result<Vec<SandboxSummary>> {
        let sandboxes = corrupt::sandboxes(&self.ctx.store)?;
        let attachments = corrupt::all_attachments(&self.ctx.store)?;
        Ok(listing::summaries(sandboxes, attachments, filter))
    }

    /// The metrics, for the API layer to count operations in.
    pub fn metrics(&self) -> &Metrics {
        &self.ctx.metrics
    }

    /// Every metric in the Prometheus text exposition format.
    pub fn metrics_text(&self) -> String {
        self.ctx.metrics.render(&metrics::snapshot(&self.ctx))
    }

    /// Creates (or, for a repeat, returns) the network namespace of `req.owner`: bind-mounted
    /// under `netns_dir`, loopback up, recorded before the mount exists. Runs on the calling
    /// thread under the owner's netns lock (see `netns::OwnerLocks`).
    pub fn create_netns(&self, req: NetnsRequest, deadline: Option<Instant>) -> Result<NetnsInfo> {
        self.shards.ensure_accepting()?;
        self.check_store()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::DeadlineExceeded("netns creation started"));
        }
        netns::create(&self.ctx, &req)
    }

    /// Detaches the sandbox `owner` (and first the sandbox linked to its netns, when that is
    /// another), then unmounts and removes the netns knid created for it. Unknown owner is
    /// success.
    pub fn delete_netns(&self, owner: &SandboxId, deadline: Option<Instant>) -> Result<()> {
        self.check_store()?;
        let linked = self
            .ctx
            .store
            .netns(owner.as_str())?
            .map(|r| r.sandbox_id)
            .filter(|id| !id.is_empty() && id != owner.as_str());
        if let Some(id) = linked {
            match SandboxId::parse(&id) {
                Ok(id) => self.detach(id, None, deadline)?,
                Err(e) => log::warn!(
                    "netns of {owner}: linked sandbox {id:?} invalid: {}",
                    e.rule
                ),
            }
        }
        self.shards
            .submit(owner, deadline, |reply| Job::DeleteNetns {
                owner: owner.clone(),
                gc: None,
                reply,
            })
    }

    /// The recorded netns `by` names, if any.
    pub fn find_netns(&self, by: &NetnsLookup) -> Result<Option<NetnsInfo>> {
        netns::find(&self.ctx, by)
    }

    /// Records that sandbox `sandbox_id` is attached in the knid-created netns at `path` (KNI
    /// AttachInterface), so DeleteNetwork by sandbox id finds it even if the attach fails.
    /// Returns the netns, or `None` when `path` is not one knid created.
    pub fn link_netns(
        &self,
        path: &std::path::Path,
        sandbox_id: &SandboxId,
    ) -> Result<Option<NetnsInfo>> {
        self.shards.ensure_accepting()?;
        self.check_store()?;
        netns::link(&self.ctx, path, sandbox_id.as_str())
    }

    /// Where knid creates network namespaces.
    pub fn netns_dir(&self) -> &std::path::Path {
        &self.ctx.netns_dir
    }

    /// The store's failure, once a write failed: sled then refuses every write until knid
    /// restarts (see `knid_store::Store::failure`).
    pub fn store_failure(&self) -> Option<knid_store::Error> {
        self.ctx.store.failure()
    }

    /// Runs `f` once, when the filesystem under a failed store takes writes again: the daemon
    /// exits then, so that its supervisor restarts it and recovery opens the store anew.
    pub fn on_store_writable(&self, f: impl FnOnce() + Send + 'static) {
        *self.on_store_writable.acquire() = Some(Box::new(f));
    }

    /// Refuses work that writes while the store is failed.
    fn check_store(&self) -> Result<()> {
        match self.ctx.store.failure() {
            Some(failure) => Err(Error::StoreFailed(failure)),
            None => Ok(()),
        }
    }
}
