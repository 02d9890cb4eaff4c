//! Start-up and shut-down of the runtime, and the two ways its networks are applied again
//! (SIGHUP's reload and SetupNodeNetwork). The order at start-up matters: recovery before
//! anything serves, pools loaded before the reaper releases into them, the shards opened last.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use knid_netops::NetnsHandle;
use knid_store::Store;

use super::periodic::Periodic;
use super::shards::Shards;
use super::{recovery, store_watch, Runtime};
use crate::cluster::ClusterMode;
use crate::config::{Backend, Cluster, Config, Network, VxlanSettings};
use crate::error::{Error, Result};
use crate::extension::{ExtensionCaller, Registry};
use crate::gc::reconciler;
use crate::ipam::Ipam;
use crate::lifecycle::reaper_queue;
use crate::locks::{LockExt, RwLockExt};
use crate::metrics::Metrics;
use crate::model::Condition;
use crate::netns::owner_locks::OwnerLocks;
use crate::netns::spares::Spares;
use crate::shared::Context;
use crate::{cni, failpoint, netns, node};

impl Runtime {
    /// Recovers the store against the kernel (see docs/architecture.md#start-up-and-crash-recovery), sets up
    /// the node network of every configured network, loads the IPAM pools and the registered
    /// extensions, and starts the shard workers, the reaper, the reconciler and the extensions'
    /// health poller. `boot_id` is the kernel's current boot id (empty if unknown);
    /// `extensions` makes the calls to extensions. Call from a thread in the host netns.
    pub fn start(
        config: &Config,
        store: Arc<Store>,
        boot_id: String,
        extensions: Arc<dyn ExtensionCaller>,
    ) -> Result<Self> {
        failpoint::check()?;
        let mut networks = config.networks()?;
        let gc_interval = config.gc_interval()?;
        let health_interval = config.extension_health_interval()?;
        let required_extensions = config.required_extensions()?;
        // Cluster mode's state, shared by the status answers and the cluster thread.
        let cluster = match config.cluster()? {
            Some(mut cluster) => {
                overlay_at_start(config, &mut networks, &mut cluster)?;
                let endpoint = crate::cluster::endpoint(&cluster)?;
                let view = crate::cluster::View::new(&cluster.node_name, &endpoint.server);
                Some((endpoint, cluster, Arc::new(view)))
            }
            None => None,
        };
        let metrics = Arc::new(Metrics::new());
        let link_mark = crate::drivers::mark::of_store(store.id());
        let ctx = Arc::new(Context {
            extensions: Registry::unloaded(Arc::clone(&store), extensions, Arc::clone(&metrics)),
            store,
            ipam: Ipam::new(),
            networks: RwLock::new(HashMap::new()),
            bridges: node::bridge::BridgeIndexes::default(),
            port_census: Arc::default(),
            interface_audit: crate::gc::interface_audit::InterfaceAudit::default(),
            netns_prefixes: config.netns_prefixes.clone(),
            host_netns: NetnsHandle::current_thread()
                .map_err(|e| Error::kernel("open knid's own network namespace", e))?
                .id(),
            max_sandboxes: config.max_sandboxes,
            sandbox_count: AtomicUsize::new(0),
            reaper_group: config.reaper_group,
            link_mark,
            dan_dir: config.dan_dir.clone(),
            sysfs: config.sysfs.clone(),
            reaper: reaper_queue::Queue::new(crate::node::host_rtnl()?),
            reaper_stats: reaper_queue::Stats::default(),
            metrics,
            cni: cni::exec::Runner {
                path: config.cni_path.clone(),
                timeout: config.cni_timeout()?,
            },
            netns_dir: config.netns_dir.clone(),
            spares: Spares::start(config.netns_pool)?,
            netns_count: AtomicUsize::new(0),
            netns_locks: OwnerLocks::new(),
            host_ports: Default::default(),
            plan: Mutex::new(Default::default()),
            cluster: cluster.as_ref().map(|(_, _, view)| Arc::clone(view)),
            policies: cluster
                .as_ref()
                .filter(|(_, c, _)| c.network_policy)
                .map(|_| Arc::new(crate::node::policy::Policies::new())),
        });
        netns::prepare_dir(&ctx.netns_dir);
        // While recovery runs on this thread, the other CPUs list the guards' chains and count
        // the bridges' ports (the bridges a restart finds): what the network set-up and the
        // first Status would wait for after it. Used only if recovery changed nothing: else
        // the network set-up lists the guards again and counts the ports anew.
        let guards = node::antispoof::Listing::start();
        if networks.iter().any(|n| n.bridge().is_some()) {
            ctx.port_census.warm_up();
        }
        // Recovery loads the host ports before its rollbacks remove some; loaded again after it
        // if it changed records (it may have released everything: a reboot).
        let recovered = recovery::run(&ctx, &boot_id)?;
        if recovered.changed {
            ctx.host_ports.load(&ctx.store)?;
        }
        crate::memory::give_back();
        ctx.extensions.load_recorded()?;
        let sandboxes = recovered
            .sandboxes
            .unwrap_or_else(|| ctx.store.sandbox_count());
        ctx.sandbox_count.store(sandboxes, Ordering::SeqCst);
        ctx.netns_count
            .store(ctx.store.all_netns()?.len(), Ordering::SeqCst);
        let runtime = Self {
            ctx,
            shards: Arc::new(Shards::new()),
            sweeper: Mutex::new(None),
            periodic: Periodic::new(),
            cluster: Mutex::new(None),
            cluster_table: config.cluster.clone(),
            overlay: cluster
                .as_ref()
                .filter(|(_, c, _)| c.backend.overlay())
                .map(|(_, c, _)| c.vxlan.clone()),
            on_store_writable: Arc::new(Mutex::new(None)),
            required_extensions: RwLock::new(required_extensions),
            node_ready: RwLock::new(Condition::now("NetworkReady", false, "Starting", "")),
            transitions: Mutex::new(HashMap::new()),
            boot_id,
        };
        if let Some((_, cluster, view)) = &cluster {
            runtime.recorded_cluster_state(&networks, cluster, view)?;
        }
        // Pools load before the reaper runs, so every release it makes lands in a loaded pool.
        let start = recovered
            .attachments
            .map(|records| node::AtStart { records, guards });
        runtime.apply_networks(networks, start)?;
        // The pods isolated before this start stay isolated: the table is rebuilt from the
        // recorded objects before knid serves.
        match &runtime.ctx.policies {
            Some(policies) => {
                let store = &runtime.ctx.store;
                let restored = crate::node::policy::engine::restore(store)?;
                policies.start_engine(Arc::clone(store), restored)?;
            }
            None => crate::node::policy::engine::remove_table(),
        }
        crate::lifecycle::reaper::bind(&runtime.ctx);
        runtime
            .shards
            .open(&runtime.ctx, config.worker_count(), config.queue_depth)?;
        *runtime.sweeper.acquire() = Some(recovery::spawn_sweep(Arc::clone(&runtime.ctx))?);
        let periodic = &runtime.periodic;
        if let Some(interval) = gc_interval {
            let (ctx, shards) = (Arc::clone(&runtime.ctx), Arc::clone(&runtime.shards));
            periodic.every("the reconciler", interval, move |_| {
                reconciler::sweep(&ctx, &*shards);
            });
        }
        store_watch::start(
            periodic,
            Arc::clone(&runtime.ctx.store),
            Arc::clone(&runtime.on_store_writable),
        );
        if let Some(interval) = health_interval {
            let ctx = Arc::clone(&runtime.ctx);
            periodic.every("the extensions' health poll", interval, move |stop| {
                ctx.extensions.check_health(|| stop.asked());
            });
        }
        if let Some((endpoint, cluster, view)) = cluster {
            let ctx = Arc::clone(&runtime.ctx);
            let policies = runtime.ctx.policies.clone();
            *runtime.cluster.acquire() = Some(ClusterMode::start(
                Arc::clone(&runtime.ctx),
                view,
                cluster,
                endpoint,
                Box::new(move || super::status::node_networks(&ctx)),
                policies,
            )?);
        }
        Ok(runtime)
    }

    /// Gives the network marked `pod_cidr_from_node` the pod CIDRs it had when knid last ran,
    /// and the masquerade the cluster's pod CIDRs (configured, else as recorded, else, from a
    /// store that never recorded them, this node's and the destinations of knid's routes to the
    /// other nodes still in the kernel), so running pods keep their gateways, routes, egress and
    /// pod-to-pod addresses before the Kubernetes API answers, or while it cannot. The cluster
    /// thread compares them with what the Nodes say once it has read them.
    fn recorded_cluster_state(
        &self,
        networks: &[Network],
        config: &crate::config::Cluster,
        view: &crate::cluster::View,
    ) -> Result<()> {
        let store = &self.ctx.store;
        let mut plan = self.ctx.plan.acquire();
        if let Some(net) = networks.iter().find(|n| n.pod_cidr_from_node) {
            if let Some(cidrs) = node::recorded::subnets(store, &net.name)? {
                log::info!(
                    "network {}: pod CIDRs {} as recorded when knid last ran, until Node {} is \
                     read",
                    net.name,
                    list(&cidrs),
                    config.node_name
                );
                view.recorded(&net.name, &cidrs);
                plan.pod_cidrs = Some(cidrs);
            }
        }
        plan.cluster_cidrs = if !config.cluster_cidrs.is_empty() {
            config.cluster_cidrs.clone()
        } else if let Some(recorded) = node::recorded::cluster_cidrs(store)? {
            recorded
        } else {
            let mut rtnl = node::host_rtnl()?;
            let mut cidrs = node::routes::destinations(&mut rtnl)?;
            cidrs.extend(plan.pod_cidrs.iter().flatten().copied());
            ipnet::IpNet::aggregate(&cidrs)
        };
        if !plan.cluster_cidrs.is_empty() {
            log::info!(
                "cluster: pod CIDRs {} are not masqueraded until the Nodes are read",
                list(&plan.cluster_cidrs)
            );
        }
        Ok(())
    }

    /// (Re)applies a network list (see [`node::apply`]); the node is ready once it is.
    /// `start`: what start-up read and listed, only there (see [`node::AtStart`]).
    fn apply_networks(&self, wanted: Vec<Network>, start: Option<node::AtStart>) -> Result<()> {
        node::update_plan_with(&self.ctx, start, |plan| plan.configured = wanted)?;
        *self.node_ready.exclusive() =
            Condition::now("NetworkReady", true, "", "node networks set up");
        Ok(())
    }

    /// Re-reads the networks and the required extensions of `config` (SIGHUP).
    pub fn reload(&self, config: &Config) -> Result<()> {
        let required = config.required_extensions()?;
        if config.cluster != self.cluster_table {
            log::warn!(
                "reload: the [cluster] table changed; cluster mode keeps its start-up settings \
                 until knid restarts"
            );
        }
        let mut networks = config.networks()?;
        if let Some(settings) = &self.overlay {
            overlay_mtu(config, &mut networks, settings)?;
        }
        self.apply_networks(networks, None)?;
        *self.required_extensions.exclusive() = required;
        Ok(())
    }

    /// Sets up the node side of every configured network again (SetupNodeNetwork, knid.v1 and
    /// KNI): bridges created or repaired, gateways, forwarding; a bridge that was missing gets
    /// the host ends of its network's pods back as ports. Idempotent.
    pub fn setup_node_network(&self) -> Result<()> {
        node::update_plan(&self.ctx, |_| ())?;
        *self.node_ready.exclusive() =
            Condition::now("NetworkReady", true, "", "node networks set up");
        Ok(())
    }

    /// From here on, a byte on `bell` (a socket, written with `MSG_DONTWAIT`) whenever a periodic
    /// job is woken or added, and on [`Runtime::shutdown`]: [`Runtime::run_due_jobs`]'s caller
    /// runs them then. Once; not beside [`Runtime::spawn_jobs`].
    pub fn ring_jobs_on(&self, bell: std::os::fd::OwnedFd) {
        self.periodic.ring_on(bell);
    }

    /// Runs the periodic jobs that are due (the reconciler, the extensions' health poll, the
    /// store watch) on the calling thread, one round at a time, and returns when the next is
    /// due (`None`: none is scheduled, or the jobs stopped). The caller runs it again then, or
    /// sooner when the bell of [`Runtime::ring_jobs_on`] rings: knid's API server does, as its
    /// chores. One caller at a time; from a thread in the host netns, as [`Runtime::start`].
    pub fn run_due_jobs(&self) -> Option<std::time::Instant> {
        self.periodic.run_due()
    }

    /// A flag that stops the periodic jobs once set: a round in progress returns early (the
    /// health poll before its next extension), and [`Runtime::run_due_jobs`] returns. For a signal
    /// handler (`signal_hook::flag::register`), so SIGTERM is not held up by a long round.
    pub fn jobs_stop_flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.periodic.stop_flag()
    }

    /// Runs the periodic jobs on a thread of their own until [`Runtime::shutdown`], for a caller
    /// with no loop of its own to lend them ([`Runtime::run_due_jobs`]).
    pub fn spawn_jobs(&self) -> Result<()> {
        self.periodic.spawn("knid-periodic")
    }

    /// Stops accepting requests, stops the periodic jobs (reconciler, health poller, store
    /// watch), lets every worker finish what it has queued and the reaper what it was handed,
    /// and flushes the store. Idempotent.
    pub fn shutdown(&self) -> Result<()> {
        if let Some(mut cluster) = self.cluster.acquire().take() {
            cluster.stop();
        }
        self.periodic.stop();
        if let Some(sweeper) = self.sweeper.acquire().take() {
            if sweeper.join().is_err() {
                log::error!("the start-up sweep panicked");
            }
        }
        self.shards.close();
        self.ctx.spares.stop();
        self.shards.join();
        self.ctx.reaper.stop();
        // No detach runs any more, and every one that ran applied its marks before this: the
        // flush below makes them durable with the mark's removal, so the next start-up needs no
        // look for detaches ahead of their marks.
        if self.ctx.store.detach_overlap() {
            self.ctx.store.clear_detach_overlap()?;
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

/// The pod network's MTU fitted to the VXLAN overlay when cluster mode may use it (see
/// [`node::overlay::fit_mtu`]). A configured MTU the overlay cannot carry is refused under
/// `backend = "vxlan"`; under `auto` this node falls back to host-gw until it restarts with
/// one that fits, so a configuration from before the overlay (a pod network set to 1500
/// bytes) keeps the node running as it did, and says why in `cluster.backend`.
fn overlay_at_start(
    config: &Config,
    networks: &mut [Network],
    cluster: &mut Cluster,
) -> Result<()> {
    if !cluster.backend.overlay() {
        return Ok(());
    }
    match overlay_mtu(config, networks, &cluster.vxlan) {
        Err(Error::Config(why)) if cluster.backend == Backend::Auto => {
            log::warn!(
                "cluster: {why}; backend auto falls back to host-gw: nodes that are not \
                 neighbours are reported, not reached, until knid restarts with an MTU that fits"
            );
            cluster.backend = Backend::HostGw;
            cluster.backend_note = Some(format!("auto fell back: {why}"));
            Ok(())
        }
        other => other,
    }
}

/// Fits `networks`' pod network MTU to the overlay of `settings` ([`node::overlay::fit_mtu`]).
fn overlay_mtu(config: &Config, networks: &mut [Network], settings: &VxlanSettings) -> Result<()> {
    let mut rtnl = node::host_rtnl()?;
    node::overlay::fit_mtu(
        &mut rtnl,
        networks,
        |name| config.networks.get(name).is_some_and(|n| n.mtu.is_some()),
        settings,
    )
}

/// `cidrs` for a log line: the first few, then how many more (a cluster has one per node).
fn list(cidrs: &[ipnet::IpNet]) -> String {
    const SHOWN: usize = 4;
    let mut out = cidrs
        .iter()
        .take(SHOWN)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if cidrs.len() > SHOWN {
        out.push_str(&format!(" and {} more", cidrs.len() - SHOWN));
    }
    out
}
