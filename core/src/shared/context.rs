//! The state every operation shares: the store, the IPAM pools, the networks and the handles of
//! the threads that serve them. It holds only handle types from leaf files, so the drivers, the
//! lifecycle and GC take a `&Context` without depending on the runtime that builds it.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};

use crossbeam_channel::Receiver;
use knid_store::Store;

use crate::cni::exec::Runner;
use crate::config::Network;
use crate::error::{Error, Result};
use crate::extension::Registry;
use crate::gc::interface_audit::InterfaceAudit;
use crate::ipam::Ipam;
use crate::lifecycle::reaper_queue::{Queue, Stats};
use crate::locks::RwLockExt;
use crate::metrics::Metrics;
use crate::netns::owner_locks::OwnerLocks;
use crate::netns::spares::Spares;
use crate::node::bridge::BridgeIndexes;

/// State shared by the runtime, its shard workers, the reaper and the periodic sweeps.
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
    /// The alias every host link knid creates carries (`knid:<store id>`, see
    /// [`crate::drivers::mark`]): the sweeps delete no link without it.
    pub link_mark: String,
    /// Directory of Kata DAN files.
    pub dan_dir: std::path::PathBuf,
    /// sysfs mount, to find host devices by PCI address.
    pub sysfs: std::path::PathBuf,
    /// The reaper's queue and thread.
    pub reaper: Queue,
    /// The reaper's backlog.
    pub reaper_stats: Stats,
    pub metrics: Arc<Metrics>,
    /// Runs the plugins of `cni` networks.
    pub cni: Runner,
    /// Where knid mounts the namespaces it creates.
    pub netns_dir: std::path::PathBuf,
    /// Namespaces ready for CreateNetns.
    pub spares: Spares,
    /// Recorded namespaces (bounded by `max_sandboxes`).
    pub netns_count: AtomicUsize,
    /// Serialises the netns operations of one owner.
    pub netns_locks: OwnerLocks,
    /// The registered extensions, called by attach and detach.
    pub extensions: Registry,
    /// The bridges' ifindexes, as attach last saw them.
    pub bridges: BridgeIndexes,
    /// The bridges' port counts, as last taken.
    pub port_census: Arc<crate::node::port_census::PortCensus>,
    /// What the reconciler's last look at the attached interfaces found.
    pub interface_audit: InterfaceAudit,
    /// Who holds which host port, and the map elements they became.
    pub host_ports: crate::node::host_ports::HostPorts,
    /// What the node side is applied from (the configured networks, in cluster mode the pod
    /// CIDRs); held while it is applied.
    pub plan: std::sync::Mutex<crate::node::plan::Plan>,
    /// Cluster mode's state; `None` when it is off.
    pub cluster: Option<Arc<crate::cluster::View>>,
    /// NetworkPolicy, in cluster mode with `network_policy` on: the attach path waits for its
    /// pod's isolation; status reads where policy stands.
    pub policies: Option<Arc<crate::node::policy::Policies>>,
}

impl Context {
    /// The network `name` as configured now.
    pub fn network(&self, name: &str) -> Option<Network> {
        self.networks.shared().get(name).cloned()
    }

    /// A copy of the current networks (the lock is never held across kernel work).
    pub fn networks(&self) -> HashMap<String, Network> {
        self.networks.shared().clone()
    }
}

/// The answer to work queued on a shard, to wait for.
pub(crate) struct Reply<T>(pub(crate) Receiver<Result<T>>);

impl<T> Reply<T> {
    /// Waits for the answer. Work that started always runs to completion: it is waited for,
    /// deadline or not.
    pub fn wait(self) -> Result<T> {
        self.0
            .recv()
            .map_err(|_| Error::Unavailable("shard worker stopped".into()))?
    }
}
