//! The controller: keeps the Nodes the watch reports, and from them this node's pod CIDR
//! (applied to the network marked `pod_cidr_from_node`), the cluster's pod CIDRs (left alone
//! by masquerade) and the routes to the other nodes, checked against the kernel on every change
//! and every `route_resync`. It runs on the cluster thread ([`super::thread`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;
use ipnet::IpNet;

use super::node_object::NodeFacts;
use super::reflector::Learned;
use super::view::{PodCidr, View};
use crate::config::Cluster;
use crate::locks::LockExt;
use crate::memory::AfterBigChange;
use crate::model::{RouteState, VtepInfo};
use crate::node::overlay::{self, Vtep};
use crate::node::{self, routes};
use crate::shared::Context;

/// How many Nodes applied (listed, added, changed, deleted) make a big change, whose passes
/// (routes to every other node, the node side again) are followed by a release of knid's code
/// once they are over ([`AfterBigChange`]): a list of a big cluster, or many Nodes added or
/// removed at once. The code a node or two joining runs stays mapped, as the route resync's
/// does.
const BIG_CHANGE: usize = 100;

/// The controller's state.
pub struct Controller {
    ctx: Arc<Context>,
    /// What it learns, for the status answers (the view `ctx` holds).
    view: Arc<View>,
    config: Cluster,
    nodes: BTreeMap<String, NodeFacts>,
    /// Whether a full list has come: before it, nothing is applied.
    listed: bool,
    /// This node's VXLAN endpoint (published unless the backend is host-gw).
    vtep: Vtep,
    /// When the routes are next checked against the kernel.
    next_resync: Instant,
    /// knid's code released once a big change's passes are over.
    code_release: AfterBigChange,
}

impl Controller {
    /// A controller over `ctx`'s node side, reporting in `view`.
    pub fn new(ctx: Arc<Context>, view: Arc<View>, config: Cluster) -> Controller {
        let vtep = Vtep::of(&config.node_name, config.vxlan.vni, config.vxlan.port);
        let next_resync = Instant::now() + config.route_resync;
        view.update(|info, _| {
            let backend = config.backend.as_str();
            info.backend = match &config.backend_note {
                Some(note) => format!("{backend} ({note})"),
                None => backend.to_owned(),
            };
            info.vtep = config.backend.overlay().then(|| VtepInfo {
                vni: vtep.vni,
                port: vtep.port,
                mac: vtep.mac,
                ..VtepInfo::default()
            });
        });
        Controller {
            ctx,
            view,
            config,
            nodes: BTreeMap::new(),
            listed: false,
            vtep,
            next_resync,
            code_release: AfterBigChange::new(BIG_CHANGE),
        }
    }

    /// Takes what the watch sent since the last turn and applies it: a burst (a list, a node's
    /// updates) converges once. Whether the watch has ended (never, but by a panic).
    pub fn take_learned(&mut self, learned: &Receiver<Learned>) -> bool {
        let mut changed = 0;
        let mut listed = false;
        let ended = super::reflector::take_all(learned, |msg| {
            let nodes = match &msg {
                Learned::Listed(all) => all.len(),
                _ => 1,
            };
            listed |= matches!(msg, Learned::Listed(_));
            if self.take(msg) {
                changed += nodes;
            }
        });
        if changed > 0 && self.listed {
            self.converge();
            self.code_release.applied(changed, Instant::now());
        }
        if listed {
            // A full list applied (at start-up, after a lost watch): a big pass, which cluster
            // mode's start-up is, done; what it ran leaves knid's RSS. What runs right after
            // (the publisher's first writes, the Nodes that change next) goes with the release
            // after the big change, when the list was one.
            crate::memory::give_back_code("cluster mode's list of Nodes");
        }
        ended
    }

    /// When the routes are next checked against the kernel, or knid's code released.
    pub fn next_due(&self) -> Instant {
        let resync = self.next_resync;
        self.code_release.due().map_or(resync, |at| at.min(resync))
    }

    /// Checks the routes against the kernel if that is due, then releases knid's code if a big
    /// change's passes are over.
    pub fn run_due(&mut self, now: Instant) {
        if now >= self.next_resync {
            self.next_resync = now + self.config.route_resync;
            if self.listed {
                self.routes();
            }
        }
        self.code_release.run_due(now, "Node change(s) applied");
    }

    /// Another node's endpoint that vanished from its Node (someone removed the annotation; its
    /// knid writes it again within seconds) is kept as last known: its MAC is derived from its
    /// name, and dropping it would cut its pods off meanwhile. This node's own is never kept:
    /// its loss is what makes the publisher write it again.
    fn keep_known_vtep(&self, node: &mut NodeFacts) {
        if node.vtep.is_some() || node.name == self.config.node_name {
            return;
        }
        if let Some(Some(Ok(known))) = self.nodes.get(&node.name).map(|n| &n.vtep) {
            node.vtep = Some(Ok(*known));
        }
    }

    /// Takes one message in; whether the nodes changed.
    fn take(&mut self, msg: Learned) -> bool {
        let view = &self.view;
        match msg {
            Learned::Listed(mut nodes) => {
                for node in &mut nodes {
                    self.keep_known_vtep(node);
                }
                self.nodes = nodes.into_iter().map(|n| (n.name.clone(), n)).collect();
                self.listed = true;
                true
            }
            Learned::Upserted(mut node) => {
                self.keep_known_vtep(&mut node);
                let same = self.nodes.get(&node.name) == Some(&node);
                self.nodes.insert(node.name.clone(), node);
                !same
            }
            Learned::Deleted(node) => self.nodes.remove(&node.name).is_some(),
            Learned::Reachable(version) => {
                view.contact(&version);
                false
            }
            Learned::Unreachable(why) => {
                view.update(|info, _| {
                    info.api_reachable = false;
                    info.api_message = why;
                });
                false
            }
        }
    }

    /// Applies what the nodes now say: pod CIDR, cluster CIDRs, routes.
    fn converge(&mut self) {
        let own_vtep = self
            .nodes
            .get(&self.config.node_name)
            .and_then(|n| n.vtep.clone());
        self.view.update(|info, _| {
            if let Some(vtep) = &mut info.vtep {
                vtep.on_node = own_vtep == Some(Ok(self.vtep));
            }
            info.nodes = self.nodes.len() as u64;
            info.api_reachable = true;
            info.last_contact_ms = crate::model::now_ms();
        });
        let own = self.nodes.get(&self.config.node_name);
        let cluster_cidrs = if self.config.cluster_cidrs.is_empty() {
            let all: Vec<IpNet> = self
                .nodes
                .values()
                .flat_map(|n| n.pod_cidrs.iter().copied())
                .collect();
            // The same addresses in the fewest prefixes: nodes' CIDRs come out of one cluster
            // CIDR, so a thousand /24s become a handful of masquerade exceptions.
            IpNet::aggregate(&all)
        } else {
            self.config.cluster_cidrs.clone()
        };
        let from = if self.config.cluster_cidrs.is_empty() {
            "nodes"
        } else {
            "config"
        };
        let wanted = own.map(|n| n.pod_cidrs.clone()).unwrap_or_default();
        let node = self.config.node_name.clone();
        let missing = match own {
            None => Some(format!("Node {node} does not exist")),
            Some(n) if n.pod_cidrs.is_empty() => Some(format!(
                "Node {node} has no spec.podCIDRs{}: the controller manager allocates them with \
                 --allocate-node-cidrs, or set them when the node is created",
                if n.problems.is_empty() {
                    String::new()
                } else {
                    format!(" that knid can use ({})", n.problems.join("; "))
                }
            )),
            Some(_) => None,
        };
        let held = match self.ctx.store.networks_with_reservations() {
            Ok(held) => held,
            Err(e) => {
                log::error!("cluster: read the store: {e}");
                return;
            }
        };
        let mut cidrs_changed = false;
        let result = node::update_plan(&self.ctx, |plan| {
            cidrs_changed = plan.cluster_cidrs != cluster_cidrs;
            plan.cluster_cidrs = cluster_cidrs.clone();
            let net = plan.pod_cidr_network()?.name.clone();
            let state = match (&plan.pod_cidrs, &missing) {
                (None, Some(why)) => PodCidr::NotAllocated(why.clone()),
                (None, None) => {
                    plan.pod_cidrs = Some(wanted.clone());
                    log::info!(
                        "cluster: network {net} takes Node {node}'s pod CIDRs {}",
                        list(&wanted)
                    );
                    PodCidr::InUse
                }
                (Some(old), _) if *old == wanted => PodCidr::InUse,
                (Some(old), _) if held.contains(&net) => {
                    let why = format!(
                        "Node {node}'s pod CIDRs changed from {} to {} while network {net} has \
                         pods; knid keeps {} until they are gone (drain the node, then restart knid)",
                        list(old),
                        if wanted.is_empty() { "none".to_owned() } else { list(&wanted) },
                        list(old)
                    );
                    log::error!("cluster: {why}");
                    PodCidr::Changed(why)
                }
                (Some(old), Some(why)) => {
                    log::warn!(
                        "cluster: network {net} drops pod CIDRs {}: {why}",
                        list(old)
                    );
                    plan.pod_cidrs = None;
                    PodCidr::NotAllocated(why.clone())
                }
                (Some(old), None) => {
                    log::warn!(
                        "cluster: Node {node}'s pod CIDRs changed from {} to {}; network {net} \
                         has no pods and takes them",
                        list(old),
                        list(&wanted)
                    );
                    plan.pod_cidrs = Some(wanted.clone());
                    PodCidr::InUse
                }
            };
            Some((net, state))
        });
        if cidrs_changed {
            // Kept for the next start, so pod-to-pod traffic is never masqueraded while the
            // API server has not answered yet.
            let text: Vec<String> = cluster_cidrs.iter().map(|c| c.to_string()).collect();
            if let Err(e) = self.ctx.store.set_cluster_cidrs(&text) {
                log::error!("cluster: record the cluster's pod CIDRs: {e}");
            }
        }
        // The view changes once the networks are applied: PodCIDR true means attaches work.
        let view = &self.view;
        match result {
            Err(e) => log::error!("cluster: apply the node's networks: {}", e.chain()),
            Ok(None) => view.update(|info, pod| {
                *pod = PodCidr::Unused;
                info.pod_cidrs = wanted.clone();
            }),
            Ok(Some((net, state))) => {
                let state = match self.ctx.plan.acquire().unusable.clone() {
                    Some(why) => {
                        log::error!("cluster: {why}");
                        PodCidr::Invalid(why)
                    }
                    None => state,
                };
                view.update(|info, pod| {
                    info.pod_cidr_network = net;
                    info.pod_cidrs = wanted.clone();
                    *pod = state;
                });
            }
        }
        view.update(|info, _| {
            info.cluster_cidrs = cluster_cidrs;
            info.cluster_cidrs_from = from.to_owned();
        });
        self.routes();
    }

    /// Computes the routes to the other nodes (and the overlay they may need) and makes the
    /// kernel's match.
    fn routes(&self) {
        if !self.config.routes {
            return;
        }
        let own = self.nodes.get(&self.config.node_name);
        let own_cidrs: Vec<IpNet> = own.map(|n| n.pod_cidrs.clone()).unwrap_or_default();
        let peers: Vec<routes::Peer<'_>> = self
            .nodes
            .values()
            .filter(|n| n.name != self.config.node_name)
            .map(|n| routes::Peer {
                name: &n.name,
                pod_cidrs: &n.pod_cidrs,
                internal_ips: &n.internal_ips,
                vtep: n.vtep.as_ref(),
            })
            .collect();
        let outcome = node::host_rtnl().and_then(|mut rtnl| {
            let addresses = routes::local_addresses(&mut rtnl)?;
            let local: Vec<IpNet> = addresses.iter().map(|a| a.net).collect();
            let (overlay, devices) = self.overlay(&mut rtnl, &addresses, own);
            let mut planned = routes::plan(&peers, &own_cidrs, &local, &overlay);
            // Neighbours and FDB entries first: a route is never there before the overlay
            // knows where its gateway is.
            overlay_entries(&mut rtnl, &devices, &mut planned);
            let indexes = devices
                .iter()
                .map(|d| (d.name.to_owned(), d.index))
                .collect();
            routes::apply(&mut rtnl, &mut planned, &indexes)?;
            Ok(planned)
        });
        match outcome {
            Ok(planned) => self.view.update(|info, _| info.routes = planned),
            Err(e) => log::error!("cluster: routes to other nodes: {}", e.chain()),
        }
    }

    /// This node's overlay devices, set up (or removed, under host-gw) per family, as Status
    /// shows them too; `addresses` are the node's.
    fn overlay(
        &self,
        rtnl: &mut knid_netops::Rtnl,
        addresses: &[knid_netops::Address],
        own: Option<&NodeFacts>,
    ) -> (routes::Overlay, Vec<overlay::Device>) {
        let mut plan = routes::Overlay {
            backend: self.config.backend,
            vtep: self.vtep,
            ..routes::Overlay::host_gw()
        };
        let mut devices = Vec::new();
        let mut described = Vec::with_capacity(2);
        for v6 in [false, true] {
            let family = if v6 { "IPv6" } else { "IPv4" };
            let local =
                own.and_then(|n| n.internal_ips.iter().copied().find(|ip| ip.is_ipv6() == v6));
            let outcome = match (self.config.backend.overlay(), local) {
                (false, _) => Err("backend host-gw".to_owned()),
                (true, None) => Err(format!(
                    "Node {} has no {family} InternalIP for the overlay to leave from",
                    self.config.node_name
                )),
                (true, Some(local)) => {
                    let own_vtep = own
                        .and_then(|n| n.pod_cidrs.iter().find(|c| c.addr().is_ipv6() == v6))
                        .map(overlay::vtep::address);
                    let wanted = overlay::Wanted {
                        v6,
                        local,
                        own_vtep,
                        vtep: &self.vtep,
                    };
                    overlay::ensure(rtnl, addresses, wanted, &self.config.vxlan)
                }
            };
            let slot = if v6 { &mut plan.v6 } else { &mut plan.v4 };
            match outcome {
                Ok(device) => {
                    *slot = Ok((device.index, device.name.to_owned()));
                    described.push(format!(
                        "{} mtu {} over {}",
                        device.name, device.mtu, device.underlay
                    ));
                    devices.push(device);
                }
                Err(why) => {
                    if self.config.backend.overlay() && local.is_some() {
                        // Set up next time; a device that is there stays (the failure may pass).
                        log::warn!("cluster: overlay device ({family}): {why}");
                    } else if let Err(e) = overlay::remove(rtnl, v6) {
                        // Not wanted: host-gw, or no InternalIP of the family to leave from.
                        log::warn!("cluster: {e}");
                    }
                    described.push(format!("{family}: none ({why})"));
                    *slot = Err(why);
                }
            }
        }
        self.view.update(|info, _| {
            if let Some(vtep) = &mut info.vtep {
                vtep.devices = described;
            }
        });
        (plan, devices)
    }
}

/// Makes each overlay device's FDB entries and neighbours those of the routes through it, and
/// notes on each route whether they are in the kernel now; a device that cannot be synced
/// fails its routes.
fn overlay_entries(
    rtnl: &mut knid_netops::Rtnl,
    devices: &[overlay::Device],
    planned: &mut [routes::NodeRoute],
) {
    for device in devices {
        let remotes: Vec<overlay::Remote> = planned
            .iter()
            .filter(|r| r.state == RouteState::Installed)
            .filter_map(|r| {
                let path = r.overlay.as_ref().filter(|p| p.device == device.name)?;
                Some(overlay::Remote {
                    mac: path.mac,
                    underlay: path.underlay,
                    vtep: r.via?,
                })
            })
            .collect();
        let outcome = overlay::sync(rtnl, device, &remotes);
        for route in planned
            .iter_mut()
            .filter(|r| r.state == RouteState::Installed)
        {
            let Some(path) = route.overlay.as_mut().filter(|p| p.device == device.name) else {
                continue;
            };
            match &outcome {
                Ok(_) => {
                    path.fdb = true;
                    path.neighbour = true;
                }
                Err(why) => {
                    route.state = RouteState::Failed;
                    route.message = why.clone();
                }
            }
        }
        match outcome {
            Ok(synced) if synced != overlay::Synced::default() => log::info!(
                "cluster: overlay {}: {} FDB/neighbour entries added, {} removed",
                device.name,
                synced.added,
                synced.removed
            ),
            Ok(_) => {}
            Err(why) => log::warn!("cluster: overlay: {why}"),
        }
    }
}

fn list(cidrs: &[IpNet]) -> String {
    cidrs
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
