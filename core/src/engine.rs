//! The engine: the public face of the core. Requests are checked against the configuration,
//! routed to a shard worker by sandbox id (same sandbox ⇒ same worker ⇒ strictly ordered) over a
//! bounded channel, and answered once the state they report is durable.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{bounded, unbounded, Sender};
use knid_netops::{NetnsHandle, Rtnl};
use knid_store::{AttachmentRecord, Store};

use crate::config::{Config, Network};
use crate::dispatch::Dispatch;
use crate::error::{Error, Result};
use crate::extension::{ExtensionCaller, ExtensionInfo, ExtensionSpec, HealthPoller, Registry};
use crate::ipam::Ipam;
use crate::metrics::{self, Metrics};
use crate::model::{
    AttachRequest, AttachmentState, Condition, GcReport, GcRequest, IfName, InterfaceKind,
    ListFilter, NetnsInfo, NetnsLookup, NetnsRequest, NetworkInfo, Sandbox, SandboxId,
    SandboxSummary, Status,
};
use crate::reconciler::Reconciler;
use crate::store_health::{self, OnWritable, StoreWatch};
use crate::worker::{self, InterfaceOp, Job};
use crate::{failpoint, gc, lifecycle, node, reaper, records, recovery, validate};

/// State shared by the engine, its workers, the reaper and the reconciler.
pub(crate) struct Context {
    pub store: Arc<Store>,
    pub ipam: Ipam,
    pub networks: RwLock<HashMap<String, Network>>,
    pub netns_prefixes: Vec<String>,
    /// knid's own (the host's) network namespace: never a sandbox's.
    pub host_netns: knid_netops::NetnsId,
    pub max_sandboxes: usize,
    pub sandbox_count: AtomicUsize,
    /// Link group retired host links wait in for the reaper.
    pub reaper_group: u32,
    /// Directory of Kata DAN files.
    pub dan_dir: std::path::PathBuf,
    /// sysfs mount, to find host devices by PCI address.
    pub sysfs: std::path::PathBuf,
    /// The reaper's queue.
    pub reaper: Sender<reaper::Msg>,
    pub reaper_stats: reaper::Stats,
    pub metrics: Arc<Metrics>,
    /// Runs the plugins of `cni` networks.
    pub cni: crate::cni::exec::Runner,
    /// Where knid mounts the namespaces it creates.
    pub netns_dir: std::path::PathBuf,
    /// Namespaces ready for CreateNetns.
    pub spares: crate::netns::Spares,
    /// Recorded namespaces (bounded by `max_sandboxes`).
    pub netns_count: AtomicUsize,
    /// Serialises the netns operations of one owner.
    pub netns_locks: crate::netns::OwnerLocks,
    /// The registered extensions, called by attach and detach.
    pub extensions: Registry,
    /// The bridges' ifindexes, as attach last saw them.
    pub bridges: node::BridgeIndexes,
}

impl Context {
    pub fn network(&self, name: &str) -> Option<Network> {
        self.networks
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// A copy of the current networks (the lock is never held across kernel work).
    pub fn networks(&self) -> HashMap<String, Network> {
        self.networks
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The running core: shard workers, the reaper and the reconciler over a store.
pub struct Runtime {
    ctx: Arc<Context>,
    dispatch: Arc<Dispatch>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    reaper: Mutex<Option<JoinHandle<()>>>,
    reconciler: Mutex<Option<Reconciler>>,
    /// The start-up orphan sweep, while it runs.
    sweeper: Mutex<Option<JoinHandle<()>>>,
    health_poller: Mutex<Option<HealthPoller>>,
    /// Probes the store's filesystem once a write failed.
    store_watch: Mutex<Option<StoreWatch>>,
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
    /// Recovers the store against the kernel (ARCHITECTURE §5), sets up the node network of
    /// every configured network, loads the IPAM pools and the registered extensions, and starts
    /// the shard workers, the reaper, the reconciler and the extensions' health poller.
    /// `boot_id` is the kernel's current boot id (empty if unknown); `extensions` makes the calls
    /// to extensions. Call from a thread in the host netns.
    pub fn start(
        config: &Config,
        store: Arc<Store>,
        boot_id: String,
        extensions: Arc<dyn ExtensionCaller>,
    ) -> Result<Self> {
        failpoint::check()?;
        let networks = config.networks()?;
        let gc_interval = config.gc_interval()?;
        let health_interval = config.extension_health_interval()?;
        let required_extensions = config.required_extensions()?;
        let (reaper_tx, reaper_rx) = unbounded();
        let metrics = Arc::new(Metrics::new());
        let ctx = Arc::new(Context {
            extensions: Registry::unloaded(Arc::clone(&store), extensions, Arc::clone(&metrics)),
            store,
            ipam: Ipam::new(),
            networks: RwLock::new(HashMap::new()),
            bridges: node::BridgeIndexes::default(),
            netns_prefixes: config.netns_prefixes.clone(),
            host_netns: NetnsHandle::current_thread()
                .map_err(|e| Error::kernel("open knid's own network namespace", e))?
                .id(),
            max_sandboxes: config.max_sandboxes,
            sandbox_count: AtomicUsize::new(0),
            reaper_group: config.reaper_group,
            dan_dir: config.dan_dir.clone(),
            sysfs: config.sysfs.clone(),
            reaper: reaper_tx,
            reaper_stats: reaper::Stats::default(),
            metrics,
            cni: crate::cni::exec::Runner {
                path: config.cni_path.clone(),
                timeout: config.cni_timeout()?,
            },
            netns_dir: config.netns_dir.clone(),
            spares: crate::netns::Spares::start(config.netns_pool)?,
            netns_count: AtomicUsize::new(0),
            netns_locks: crate::netns::OwnerLocks::new(),
        });
        crate::netns::prepare_dir(&ctx.netns_dir);
        recovery::run(&ctx, &boot_id)?;
        crate::memory::give_back();
        ctx.extensions.load_recorded()?;
        ctx.sandbox_count
            .store(ctx.store.sandboxes()?.len(), Ordering::SeqCst);
        ctx.netns_count
            .store(ctx.store.all_netns()?.len(), Ordering::SeqCst);
        let runtime = Self {
            ctx,
            dispatch: Arc::new(Dispatch::new()),
            workers: Mutex::new(Vec::new()),
            reaper: Mutex::new(None),
            reconciler: Mutex::new(None),
            sweeper: Mutex::new(None),
            health_poller: Mutex::new(None),
            store_watch: Mutex::new(None),
            on_store_writable: Arc::new(Mutex::new(None)),
            required_extensions: RwLock::new(required_extensions),
            node_ready: RwLock::new(condition("NetworkReady", false, "Starting", "")),
            transitions: Mutex::new(HashMap::new()),
            boot_id,
        };
        // Pools load before the reaper runs, so every release it makes lands in a loaded pool.
        runtime.apply_networks(networks)?;
        *runtime.reaper.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(reaper::spawn(Arc::clone(&runtime.ctx), reaper_rx)?);
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for index in 0..config.worker_count() {
            let (tx, rx) = bounded(config.queue_depth);
            senders.push(tx);
            handles.push(worker::spawn(index, Arc::clone(&runtime.ctx), rx)?);
        }
        *runtime.workers.lock().unwrap_or_else(|p| p.into_inner()) = handles;
        runtime.dispatch.open(senders);
        *runtime.sweeper.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(recovery::spawn_sweep(Arc::clone(&runtime.ctx))?);
        if let Some(interval) = gc_interval {
            *runtime.reconciler.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Reconciler::spawn(
                    Arc::clone(&runtime.ctx),
                    Arc::clone(&runtime.dispatch),
                    interval,
                )?);
        }
        *runtime
            .store_watch
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(StoreWatch::spawn(
            Arc::clone(&runtime.ctx.store),
            Arc::clone(&runtime.on_store_writable),
        )?);
        if let Some(interval) = health_interval {
            *runtime
                .health_poller
                .lock()
                .unwrap_or_else(|p| p.into_inner()) =
                Some(HealthPoller::spawn(Arc::clone(&runtime.ctx), interval)?);
        }
        Ok(runtime)
    }

    /// (Re)applies a network list: node side set up, pools loaded. A network holding addresses
    /// keeps its old definition if the new one changes its subnets (refused and logged).
    fn apply_networks(&self, wanted: Vec<Network>) -> Result<()> {
        let mut rtnl = Rtnl::open().map_err(|e| Error::kernel("open host netlink socket", e))?;
        let current = self.ctx.networks();
        let held = self.ctx.store.networks_with_reservations()?;
        // Read only if a bridge turns out to be missing.
        let mut attachments: Option<Vec<AttachmentRecord>> = None;
        let mut next: HashMap<String, Network> = HashMap::new();
        for net in wanted {
            let old = current.get(&net.name);
            if let Some(old) = old.filter(|o| o.subnets != net.subnets && held.contains(&o.name)) {
                log::error!(
                    "network {}: subnets cannot change while addresses are reserved; keeping the old definition",
                    old.name
                );
                next.insert(old.name.clone(), old.clone());
                continue;
            }
            let bridge = node::setup(&mut rtnl, &net)?;
            self.ctx.bridges.clear();
            if let Some(bridge) = bridge.filter(|b| b.created) {
                let all = match attachments.as_ref() {
                    Some(all) => all,
                    None => attachments.insert(self.ctx.store.all_attachments()?),
                };
                self.reconnect_ports(&mut rtnl, &net, bridge.index, all)?;
            }
            let reservations = self
                .ctx
                .store
                .reservations(&net.name)?
                .into_iter()
                .map(|r| (r.addr, r.owner))
                .collect();
            let cursors: Vec<_> = [false, true]
                .into_iter()
                .filter_map(|v6| self.ctx.store.cursor(&net.name, v6).transpose())
                .collect::<std::result::Result<_, _>>()?;
            self.ctx.ipam.load_network(&net, reservations, &cursors);
            let addressing = match net.cni() {
                // The conflist's own plugins and IPAM.
                Some(cni) => format!(
                    "list {} (CNI {}): {}",
                    cni.list.name,
                    cni.list.version,
                    (0..cni.list.plugins.len())
                        .map(|i| cni.list.plugin_type(i))
                        .collect::<Vec<_>>()
                        .join(" → ")
                ),
                None => net
                    .subnets
                    .iter()
                    .map(|(s, g)| format!("{s} gw {g}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            log::info!(
                "network {} ({}{}) ready: {addressing}",
                net.name,
                net.kind(),
                net.bridge()
                    .or(net.parent())
                    .map(|d| format!(" on {d}"))
                    .unwrap_or_default(),
            );
            next.insert(net.name.clone(), net);
        }
        for (name, old) in &current {
            if !next.contains_key(name) {
                if held.contains(name) {
                    log::error!("network {name}: still holds addresses; kept although it left the configuration");
                    next.insert(name.clone(), old.clone());
                } else {
                    self.ctx.ipam.remove_network(name);
                }
            }
        }
        node::enable_forwarding()?;
        *self.ctx.networks.write().unwrap_or_else(|p| p.into_inner()) = next;
        *self.node_ready.write().unwrap_or_else(|p| p.into_inner()) =
            condition("NetworkReady", true, "", "node networks set up");
        Ok(())
    }

    /// Puts the host ends of `net`'s live attachments among `all` back on its bridge, just
    /// created: if it was deleted behind knid's back, their ports went with it.
    fn reconnect_ports(
        &self,
        rtnl: &mut Rtnl,
        net: &Network,
        index: u32,
        all: &[AttachmentRecord],
    ) -> Result<()> {
        let ports: Vec<String> = all
            .iter()
            .filter(|rec| rec.network == net.name)
            .filter(|rec| {
                matches!(
                    lifecycle::state_of(rec),
                    Ok(AttachmentState::Pending
                        | AttachmentState::Provisioning
                        | AttachmentState::Attached)
                )
            })
            .map(|rec| rec.host_ifname.clone())
            .collect();
        if ports.is_empty() {
            return Ok(());
        }
        let bridge = net.bridge().unwrap_or_default();
        let reconnected =
            node::reconnect_ports(rtnl, bridge, index, &ports, self.ctx.reaper_group)?;
        log::warn!(
            "network {}: bridge {bridge} was missing: set up again, {reconnected} of {} pod \
             port(s) reconnected",
            net.name,
            ports.len()
        );
        Ok(())
    }

    /// Re-reads the networks and the required extensions of `config` (SIGHUP).
    pub fn reload(&self, config: &Config) -> Result<()> {
        let required = config.required_extensions()?;
        self.apply_networks(config.networks()?)?;
        *self
            .required_extensions
            .write()
            .unwrap_or_else(|p| p.into_inner()) = required;
        Ok(())
    }

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
        self.dispatch.submit(&id, deadline, |reply| Job::Attach {
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
                "must be under one of {}",
                self.ctx.netns_prefixes.join(", ")
            ))
            .at("netns_path"));
        }
        for (i, spec) in req.interfaces.iter().enumerate() {
            let Some(network) = self.ctx.network(&spec.network) else {
                return Err(
                    validate::Invalid::new(format!("unknown network {:?}", spec.network))
                        .at(format!("interfaces[{i}].network")),
                );
            };
            let at = |field: &str| format!("interfaces[{i}].{field}");
            let kind = spec.kind.unwrap_or_else(|| network.default_kind());
            let dan = spec.tap.as_ref().is_some_and(|t| t.dan);
            network
                .allows(kind, dan)
                .map_err(|rule| validate::Invalid::new(rule).at(at("kind")))?;
            if spec.tap.is_some() && kind != InterfaceKind::Tap {
                return Err(validate::Invalid::new(format!(
                    "is only allowed with kind tap (this interface is {})",
                    kind.as_str()
                ))
                .at(at("tap")));
            }
            match (&spec.device, kind) {
                (None, InterfaceKind::HostDevice) => {
                    return Err(validate::Invalid::new(
                        "is required with kind host-device: name or pci_address",
                    )
                    .at(at("device")))
                }
                (Some(_), k) if k != InterfaceKind::HostDevice => {
                    return Err(validate::Invalid::new(format!(
                        "is only allowed with kind host-device (this interface is {})",
                        k.as_str()
                    ))
                    .at(at("device")))
                }
                _ => {}
            }
            if kind == InterfaceKind::HostDevice && spec.mac.is_some() {
                return Err(validate::Invalid::new(
                    "must be empty: a host device keeps its own MAC",
                )
                .at(at("mac")));
            }
            if spec.mac.is_some() && crate::plan::shares_parent_mac(&network.driver) {
                return Err(validate::Invalid::new(format!(
                    "must be empty: {} interfaces carry their parent's MAC",
                    network.kind()
                ))
                .at(at("mac")));
            }
            if kind == InterfaceKind::Cni && spec.mtu.is_some() {
                return Err(validate::Invalid::new(
                    "must be empty: a cni network's plugins set the MTU",
                )
                .at(at("mtu")));
            }
            // A cni network's IPAM plugin judges static addresses (the `ips` capability).
            let static_ips = if kind == InterfaceKind::Cni {
                &[][..]
            } else {
                &spec.static_ips[..]
            };
            for (j, ip) in static_ips.iter().enumerate() {
                let ok = network
                    .subnets
                    .iter()
                    .any(|(net, gw)| crate::ipam::is_assignable(net, *ip) && gw != ip);
                if !ok {
                    return Err(validate::Invalid::new(format!(
                        "{ip} is not an assignable address of network {}",
                        network.name
                    ))
                    .at(format!("interfaces[{i}].static_ips[{j}]")));
                }
            }
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
    /// sandbox's shard so no attach or detach of it runs meanwhile.
    pub fn check(
        &self,
        id: SandboxId,
        ifname: Option<IfName>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        self.on_interfaces(InterfaceOp::Check, id, ifname, deadline)
    }

    fn on_interfaces(
        &self,
        op: InterfaceOp,
        id: SandboxId,
        ifname: Option<IfName>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let key = id.clone();
        self.dispatch
            .submit(&key, deadline, |reply| Job::Interfaces {
                op,
                id,
                ifname,
                deadline,
                reply,
            })
    }

    /// Detaches every attachment not kept by `req.keep` (none when `keep` is None), then sweeps
    /// the node: attachments whose netns is gone, leftovers of interrupted operations, orphaned
    /// host links and reservations. A dry run reports without removing.
    pub fn garbage_collect(&self, req: GcRequest, deadline: Option<Instant>) -> Result<GcReport> {
        if !self.dispatch.accepting() {
            return Err(Error::Unavailable("knid is shutting down".into()));
        }
        if !req.dry_run {
            self.check_store()?;
        }
        let report = gc::collect(&self.ctx, &self.dispatch, &req, deadline)?;
        gc::record(&self.ctx, "gc", &report);
        Ok(report)
    }

    /// The sandbox's attachments as the API shows them: without those already detached and
    /// waiting for the reaper.
    fn live_attachments(&self, id: &str) -> Result<Vec<AttachmentRecord>> {
        let mut out = Vec::new();
        for rec in self.ctx.store.attachments(id)? {
            if !matches!(
                lifecycle::state_of(&rec)?,
                AttachmentState::Detaching | AttachmentState::Reaping
            ) {
                out.push(rec);
            }
        }
        Ok(out)
    }

    /// The sandbox as recorded.
    pub fn inspect(&self, id: &SandboxId) -> Result<Sandbox> {
        let rec = self
            .ctx
            .store
            .sandbox(id.as_str())?
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        records::sandbox_from_records(&rec, self.live_attachments(id.as_str())?)
    }

    /// Summaries of the sandboxes matching `filter`, sorted by id.
    pub fn list(&self, filter: &ListFilter) -> Result<Vec<SandboxSummary>> {
        let mut out = Vec::new();
        for rec in self.ctx.store.sandboxes()? {
            let sandbox = records::sandbox_from_records(&rec, self.live_attachments(&rec.id)?)?;
            let networks: Vec<String> = sandbox
                .interfaces
                .iter()
                .map(|i| i.network.clone())
                .collect();
            if filter
                .network
                .as_ref()
                .is_some_and(|n| !networks.contains(n))
                || filter.state.is_some_and(|s| s != sandbox.state())
                || filter
                    .labels
                    .iter()
                    .any(|(k, v)| sandbox.labels.get(k) != Some(v))
            {
                continue;
            }
            out.push(SandboxSummary {
                state: sandbox.state(),
                interfaces: sandbox
                    .interfaces
                    .iter()
                    .map(|i| i.name.to_string())
                    .collect(),
                ips: sandbox
                    .interfaces
                    .iter()
                    .flat_map(|i| i.ips.iter().map(|ip| ip.address.addr()))
                    .collect(),
                networks,
                id: sandbox.id,
                pod: sandbox.pod,
                netns_path: sandbox.netns_path,
                created_at_ms: sandbox.created_at_ms,
            });
        }
        Ok(out)
    }

    /// The metrics, for the API layer to count operations in.
    pub fn metrics(&self) -> &Metrics {
        &self.ctx.metrics
    }

    /// Every metric in the Prometheus text exposition format.
    pub fn metrics_text(&self) -> String {
        self.ctx.metrics.render(&metrics::snapshot(&self.ctx))
    }

    /// Readiness: NetworkReady (every network's node side present and set up), IPAMAvailable
    /// per network (false, reason Exhausted, when a family has no free address; for a cni
    /// network, false with reason PluginNotAvailable when its plugins' STATUS fails, or a plugin
    /// binary is missing before CNI 1.1.0), ExtensionsReady (every required extension
    /// registered, reason NotRegistered, and its last call successful, reason Unhealthy), and
    /// StoreReady (false, reason WriteFailed, once the store's filesystem refused a write).
    pub fn status(&self) -> Status {
        self.status_of(self.readiness())
    }

    /// [`Runtime::status`] and [`Runtime::networks`] from one look at the node (KNI
    /// QueryNodeNetworks): a cni network's STATUS chain runs once, not twice.
    pub fn status_and_networks(&self) -> (Status, Vec<NetworkInfo>) {
        let readiness = self.readiness();
        let networks = self.networks_of(&readiness);
        (self.status_of(readiness), networks)
    }

    fn status_of(&self, readiness: Vec<Readiness>) -> Status {
        let mut node = self
            .node_ready
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if node.status {
            let mut problems: Vec<String> = readiness
                .iter()
                .filter_map(|r| {
                    r.node_problem
                        .as_ref()
                        .map(|p| format!("network {}: {p}", r.network.name))
                })
                .collect();
            problems.sort();
            if !problems.is_empty() {
                node = condition(
                    "NetworkReady",
                    false,
                    "NodeNetworkBroken",
                    &problems.join("; "),
                );
            }
        }
        let mut conditions = vec![node];
        conditions.extend(readiness.into_iter().map(|r| r.ipam));
        conditions.push(
            self.ctx.extensions.readiness(
                &self
                    .required_extensions
                    .read()
                    .unwrap_or_else(|p| p.into_inner()),
            ),
        );
        conditions.push(match self.ctx.store.failure() {
            None => condition(store_health::CONDITION, true, "", ""),
            Some(failure) => condition(
                store_health::CONDITION,
                false,
                "WriteFailed",
                &format!(
                    "{}; knid refuses work that writes and exits once the filesystem takes \
                     writes again, for its supervisor to restart it",
                    crate::error::chain(&failure)
                ),
            ),
        });
        let mut transitions = self.transitions.lock().unwrap_or_else(|p| p.into_inner());
        for c in &mut conditions {
            let (status, since) = transitions
                .entry(c.kind.clone())
                .or_insert((c.status, c.since_ms));
            if *status != c.status {
                *status = c.status;
                *since = c.since_ms;
            }
            c.since_ms = *since;
        }
        Status {
            ready: self.dispatch.accepting() && conditions.iter().all(|c| c.status),
            conditions,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            boot_id: self.boot_id.clone(),
        }
    }

    /// Each configured network (sorted by name) with its node-side problem, if any, and its
    /// `IPAMAvailable/<name>` condition.
    fn readiness(&self) -> Vec<Readiness> {
        let mut rtnl = Rtnl::open();
        let mut networks: Vec<Network> = self.ctx.networks().into_values().collect();
        networks.sort_by(|a, b| a.name.cmp(&b.name));
        networks
            .into_iter()
            .map(|net| {
                let node_problem = match rtnl.as_mut() {
                    Err(e) => Some(format!("open netlink socket: {e}")),
                    Ok(rtnl) => match node::check(rtnl, &net) {
                        Ok(problem) => problem,
                        Err(e) => Some(e.chain()),
                    },
                };
                let name = format!("IPAMAvailable/{}", net.name);
                let ipam = if net.cni().is_some() {
                    match crate::cni::chain::status(&self.ctx, &net) {
                        Ok(()) => condition(&name, true, "", ""),
                        Err(e) => condition(&name, false, "PluginNotAvailable", &e.to_string()),
                    }
                } else {
                    let exhausted: Vec<&str> = self
                        .ctx
                        .ipam
                        .capacity(&net.name)
                        .iter()
                        .filter(|c| c.free == 0)
                        .map(|c| c.family.as_str())
                        .collect();
                    if exhausted.is_empty() {
                        condition(&name, true, "", "")
                    } else {
                        condition(
                            &name,
                            false,
                            "Exhausted",
                            &format!("no free {} address", exhausted.join(" or ")),
                        )
                    }
                };
                Readiness {
                    network: net,
                    node_problem,
                    ipam,
                }
            })
            .collect()
    }

    /// The configured networks with their capacity and readiness, sorted by name.
    pub fn networks(&self) -> Result<Vec<NetworkInfo>> {
        Ok(self.networks_of(&self.readiness()))
    }

    fn networks_of(&self, readiness: &[Readiness]) -> Vec<NetworkInfo> {
        readiness
            .iter()
            .map(|r| {
                let net = &r.network;
                let (ready, reason, message) = match (&r.node_problem, &r.ipam) {
                    (Some(problem), _) => (false, "NodeNetworkBroken".to_owned(), problem.clone()),
                    (None, c) => (c.status, c.reason.clone(), c.message.clone()),
                };
                NetworkInfo {
                    kind: net.kind().to_owned(),
                    subnets: net.subnets.iter().map(|(s, _)| *s).collect(),
                    gateways: net.subnets.iter().map(|(_, g)| *g).collect(),
                    mtu: net.mtu,
                    bridge: net.bridge().unwrap_or_default().to_owned(),
                    parent: net.parent().unwrap_or_default().to_owned(),
                    mode: net.mode().unwrap_or_default().to_owned(),
                    capacity: self.ctx.ipam.capacity(&net.name),
                    name: net.name.clone(),
                    ready,
                    reason,
                    message,
                }
            })
            .collect()
    }

    /// Creates (or, for a repeat, returns) the network namespace of `req.owner`: bind-mounted
    /// under `netns_dir`, loopback up, recorded before the mount exists. Runs on the calling
    /// thread under the owner's netns lock (see `netns::OwnerLocks`).
    pub fn create_netns(&self, req: NetnsRequest, deadline: Option<Instant>) -> Result<NetnsInfo> {
        if !self.dispatch.accepting() {
            return Err(Error::Unavailable("knid is shutting down".into()));
        }
        self.check_store()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::DeadlineExceeded("netns creation started"));
        }
        crate::netns::create(&self.ctx, &req)
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
        self.dispatch
            .submit(owner, deadline, |reply| Job::DeleteNetns {
                owner: owner.clone(),
                gc: None,
                reply,
            })
    }

    /// The recorded netns `by` names, if any.
    pub fn find_netns(&self, by: &NetnsLookup) -> Result<Option<NetnsInfo>> {
        crate::netns::find(&self.ctx, by)
    }

    /// Records that sandbox `sandbox_id` is attached in the knid-created netns at `path` (KNI
    /// AttachInterface), so DeleteNetwork by sandbox id finds it even if the attach fails.
    /// Returns the netns, or `None` when `path` is not one knid created.
    pub fn link_netns(
        &self,
        path: &std::path::Path,
        sandbox_id: &SandboxId,
    ) -> Result<Option<NetnsInfo>> {
        if !self.dispatch.accepting() {
            return Err(Error::Unavailable("knid is shutting down".into()));
        }
        self.check_store()?;
        crate::netns::link(&self.ctx, path, sandbox_id.as_str())
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
        *self
            .on_store_writable
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(f));
    }

    /// Refuses work that writes while the store is failed.
    fn check_store(&self) -> Result<()> {
        match self.ctx.store.failure() {
            Some(failure) => Err(Error::StoreFailed(failure)),
            None => Ok(()),
        }
    }

    /// Sets up the node side of every configured network again (SetupNodeNetwork, knid.v1 and
    /// KNI): bridges created or repaired, gateways, forwarding; a bridge that was missing gets
    /// the host ends of its network's pods back as ports. Idempotent.
    pub fn setup_node_network(&self) -> Result<()> {
        let networks: Vec<Network> = self.ctx.networks().into_values().collect();
        self.apply_networks(networks)
    }

    /// Stops accepting requests, stops the reconciler and the extensions' health poller, lets
    /// every worker finish what it has queued and the reaper what it was handed, and flushes the
    /// store. Idempotent.
    pub fn shutdown(&self) -> Result<()> {
        if let Some(watch) = self
            .store_watch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            watch.stop();
        }
        if let Some(poller) = self
            .health_poller
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            poller.stop();
        }
        if let Some(r) = self
            .reconciler
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            r.stop();
        }
        if let Some(sweeper) = self
            .sweeper
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            if sweeper.join().is_err() {
                log::error!("the start-up sweep panicked");
            }
        }
        self.dispatch.close();
        self.ctx.spares.stop();
        let handles = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|p| p.into_inner()));
        for handle in handles {
            if handle.join().is_err() {
                log::error!("a shard worker panicked");
            }
        }
        if let Some(reaper) = self.reaper.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = self.ctx.reaper.send(reaper::Msg::Stop);
            if reaper.join().is_err() {
                log::error!("the reaper panicked");
            }
        }
        self.ctx.store.flush()?;
        Ok(())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            log::error!("shutdown: {}", e.chain());
        }
    }
}

/// One network's readiness, as [`Runtime::status`] and [`Runtime::networks`] report it.
struct Readiness {
    network: Network,
    /// What is wrong with its node side (bridge missing, down, without its gateways).
    node_problem: Option<String>,
    /// Its `IPAMAvailable/<name>` condition.
    ipam: Condition,
}

/// A condition whose status changes now.
pub(crate) fn condition(kind: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        kind: kind.to_owned(),
        status,
        reason: reason.to_owned(),
        message: message.to_owned(),
        since_ms: now_ms(),
    }
}
