//! Readiness and the networks as the API reports them: the node's conditions (each with the
//! time it last changed) and each network's node side, pool capacity and plugin status.

use knid_netops::Rtnl;

use super::{store_watch, Runtime};
use crate::config::Network;
use crate::error::Result;
use crate::locks::{LockExt, RwLockExt};
use crate::model::{BridgePorts, Condition, NetworkInfo, Status};
use crate::node;
use crate::shared::Context;

impl Runtime {
    /// Readiness: NetworkReady (every network's node side present and set up), PluginsAvailable
    /// per network (for a cni network, false with reason PluginNotAvailable when its plugins'
    /// STATUS fails, or a plugin binary is missing before CNI 1.1.0; true for a network without
    /// plugins: it says nothing of addresses), ExtensionsReady (every
    /// required extension registered, reason NotRegistered, and its last call successful,
    /// reason Unhealthy), StoreReady (false, reason WriteFailed, once the store's filesystem
    /// refused a write); and, not counting for `ready`: NetworkSchedulable per network (false,
    /// reason Exhausted, when a family of its pool has no free address or its bridge no free
    /// port: it takes no more pods,
    /// and the ones it has run on) and PodInterfacesReady (false, reason InterfacesChanged, when
    /// the reconciler's last round found attached interfaces that differ from their records).
    pub fn status(&self) -> Status {
        self.status_of(readiness(&self.ctx, true))
    }

    /// [`Runtime::status`] and [`Runtime::networks`] from one look at the node (KNI
    /// QueryNodeNetworks): a cni network's STATUS chain runs once, not twice.
    pub fn status_and_networks(&self) -> (Status, Vec<NetworkInfo>) {
        let readiness = readiness(&self.ctx, true);
        let networks = networks_of(&self.ctx, &readiness);
        (self.status_of(readiness), networks)
    }

    fn status_of(&self, readiness: Vec<Readiness>) -> Status {
        let mut node = self.node_ready.shared().clone();
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
                node = Condition::now(
                    "NetworkReady",
                    false,
                    "NodeNetworkBroken",
                    &problems.join("; "),
                );
            }
        }
        let mut conditions = vec![node];
        let mut schedulable = Vec::with_capacity(readiness.len());
        for r in readiness {
            conditions.push(r.plugins);
            schedulable.push(r.schedulable);
        }
        conditions.push(
            self.ctx
                .extensions
                .readiness(&self.required_extensions.shared()),
        );
        conditions.push(match self.ctx.store.failure() {
            None => Condition::now(store_watch::CONDITION, true, "", ""),
            Some(failure) => Condition::now(
                store_watch::CONDITION,
                false,
                "WriteFailed",
                &format!(
                    "{}; knid refuses work that writes and exits once the filesystem takes \
                     writes again, for its supervisor to restart it",
                    crate::error::chain(&failure)
                ),
            ),
        });
        // One pod's interface says nothing of the node's ability to attach new ones, and a pod
        // with CAP_NET_ADMIN in its own netns must not be able to turn the node not ready: so
        // this condition is reported but left out of `ready`.
        conditions.push(self.ctx.interface_audit.condition());
        // A full pool stops new pods, not running ones: a node made not ready for it would have
        // its healthy pods evicted. Reported, and left out of `ready`.
        conditions.extend(schedulable);
        if let Some(view) = &self.ctx.cluster {
            conditions.extend(view.conditions());
        }
        let mut transitions = self.transitions.acquire();
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
            ready: self.shards.accepting()
                && conditions.iter().all(|c| c.status || !counts_for_ready(c)),
            conditions,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            boot_id: self.boot_id.clone(),
            link_mark: self.ctx.link_mark.clone(),
            cluster: self.ctx.cluster.as_ref().map(|view| view.info()),
        }
    }

    /// The configured networks with their capacity and readiness, sorted by name.
    pub fn networks(&self) -> Result<Vec<NetworkInfo>> {
        Ok(networks_of(&self.ctx, &readiness(&self.ctx, true)))
    }
}

/// The configured networks with their capacity and readiness as [`Runtime::networks`] reports
/// them, but without running a cni network's plugins (STATUS): what cluster mode publishes on
/// the Node every few seconds, where forking plugins would cost too much.
pub(crate) fn node_networks(ctx: &Context) -> Vec<NetworkInfo> {
    networks_of(ctx, &readiness(ctx, false))
}

/// Each configured network (sorted by name) with its node-side problem, if any, and its
/// `PluginsAvailable/<name>` condition (true, unchecked, without `plugins`).
fn readiness(ctx: &Context, plugins: bool) -> Vec<Readiness> {
    let mut rtnl = Rtnl::open();
    let mut counts = None;
    let mut networks: Vec<Network> = ctx.networks().into_values().collect();
    networks.sort_by(|a, b| a.name.cmp(&b.name));
    networks
        .into_iter()
        .map(|net| {
            let ports = match (rtnl.as_mut(), net.bridge()) {
                (Ok(rtnl), Some(bridge)) => ctx
                    .port_census
                    .ports(rtnl, bridge, &mut counts)
                    .map_err(|e| log::warn!("network {}: {}", net.name, e.chain()))
                    .ok()
                    .flatten(),
                _ => None,
            };
            let node_problem = match rtnl.as_mut() {
                _ if net.awaits_pod_cidr() => Some(match &ctx.cluster {
                    Some(view) => view.waiting_reason(),
                    None => "this node's pod CIDR is not known".to_owned(),
                }),
                Err(e) => Some(format!("open netlink socket: {e}")),
                Ok(rtnl) => match node::check(rtnl, &net) {
                    Ok(problem) => problem,
                    Err(e) => Some(e.chain()),
                },
            };
            let name = format!("PluginsAvailable/{}", net.name);
            let plugins = match net.cni() {
                Some(_) if plugins => match crate::drivers::cni::status(ctx, &net) {
                    Ok(()) => Condition::now(&name, true, "", ""),
                    Err(e) => Condition::now(&name, false, "PluginNotAvailable", &e.to_string()),
                },
                _ => Condition::now(&name, true, "", ""),
            };
            let schedulable = schedulable(ctx, &net, ports.as_ref());
            Readiness {
                network: net,
                node_problem,
                plugins,
                schedulable,
                ports,
            }
        })
        .collect()
}

/// The `NetworkSchedulable/<name>` condition of `net`: false, reason Exhausted, naming each
/// family whose pool has no free address and a bridge with no free port (`ports`; a cni
/// network's plugins own its addresses: always true).
fn schedulable(ctx: &Context, net: &Network, ports: Option<&BridgePorts>) -> Condition {
    let name = format!("NetworkSchedulable/{}", net.name);
    let mut exhausted: Vec<String> = ctx
        .ipam
        .capacity(&net.name)
        .iter()
        .filter(|c| c.total > 0 && c.free == 0)
        .map(|c| {
            format!(
                "{} pool exhausted ({} of {} addresses in use)",
                c.family.as_str(),
                c.used,
                c.total
            )
        })
        .collect();
    if let Some(ports) = ports.filter(|p| p.free == 0) {
        exhausted.push(format!(
            "bridge {} has all {} ports a Linux bridge can take in use",
            ports.bridge, ports.total
        ));
    }
    if exhausted.is_empty() {
        return Condition::now(&name, true, "", "");
    }
    Condition::now(
        &name,
        false,
        "Exhausted",
        &format!(
            "{}: no more pods can be attached to network {}; its attached pods are unaffected",
            exhausted.join(", "),
            net.name
        ),
    )
}

fn networks_of(ctx: &Context, readiness: &[Readiness]) -> Vec<NetworkInfo> {
    readiness
        .iter()
        .map(|r| {
            let net = &r.network;
            let (ready, reason, message) = match (&r.node_problem, &r.plugins) {
                (Some(problem), _) => (false, "NodeNetworkBroken".to_owned(), problem.clone()),
                (None, c) => (c.status, c.reason.clone(), c.message.clone()),
            };
            NetworkInfo {
                schedulable: r.schedulable.status,
                kind: net.kind().to_owned(),
                subnets: net.subnets.iter().map(|(s, _)| *s).collect(),
                gateways: net.subnets.iter().map(|(_, g)| *g).collect(),
                mtu: net.mtu,
                bridge: net.bridge().unwrap_or_default().to_owned(),
                parent: net.parent().unwrap_or_default().to_owned(),
                mode: net.mode().unwrap_or_default().to_owned(),
                capacity: ctx.ipam.capacity(&net.name),
                ports: r.ports.clone(),
                subnets_from: match (&ctx.cluster, net.pod_cidr_from_node) {
                    (Some(view), true) => {
                        format!("Node {} spec.podCIDRs", view.info().node_name)
                    }
                    _ => String::new(),
                },
                name: net.name.clone(),
                ready,
                reason,
                message,
            }
        })
        .collect()
}

/// One network's readiness, as [`Runtime::status`] and [`Runtime::networks`] report it.
struct Readiness {
    network: Network,
    /// What is wrong with its node side (bridge missing, down, without its gateways).
    node_problem: Option<String>,
    /// Its `PluginsAvailable/<name>` condition.
    plugins: Condition,
    /// Its `NetworkSchedulable/<name>` condition.
    schedulable: Condition,
    /// Its bridge's ports, for a bridge network whose bridge exists.
    ports: Option<BridgePorts>,
}

/// The per-network condition of a pool with room for more pods.
pub const SCHEDULABLE: &str = "NetworkSchedulable";

/// Whether a false condition makes the node not ready: not for what stops only new pods on one
/// network (a full pool), concerns one pod (its interface changed), or leaves running pods as
/// they are (see [`crate::cluster::view::counts_for_ready`]).
fn counts_for_ready(c: &Condition) -> bool {
    c.kind != crate::gc::interface_audit::CONDITION
        && !c.kind.starts_with(SCHEDULABLE)
        && crate::cluster::view::counts_for_ready(&c.kind, &c.reason)
}
