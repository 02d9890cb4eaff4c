//! What cluster mode knows, shared between its thread and Status: the API server's state, this
//! node's pod CIDR and why it is or is not in use, and the routes to the other nodes; and the
//! conditions they make.

use std::sync::Mutex;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::locks::LockExt;
use crate::model::{now_ms, ClusterInfo, Condition, RouteState};

/// Condition: this node's pod CIDR is known and in use.
pub const POD_CIDR: &str = "PodCIDR";
/// Condition: the Kubernetes API answers the Node watch.
pub const API: &str = "KubernetesAPIReachable";
/// Condition: every other node's pod CIDR is routed.
pub const ROUTES: &str = "NodeRoutesReady";

/// Where this node's pod CIDR stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodCidr {
    /// No network takes it (`pod_cidr_from_node` is set nowhere).
    Unused,
    /// Not known yet: the first list has not come.
    Waiting,
    /// The Node object has none (or does not exist).
    NotAllocated(String),
    /// In use.
    InUse,
    /// In use as recorded before this start: the Kubernetes API has not confirmed it yet.
    Recorded,
    /// The network cannot use it (too small, two of a family).
    Invalid(String),
    /// The Node's pod CIDR changed under attached pods: the old one stays.
    Changed(String),
}

/// Cluster mode's shared state.
#[derive(Debug)]
pub struct View {
    state: Mutex<(ClusterInfo, PodCidr)>,
    /// Rung after an attach or detach: what is published on the Node may have to change now,
    /// not at the next `publish_interval`.
    nudge: (Sender<()>, Receiver<()>),
}

impl View {
    /// The state before the API server answered.
    pub fn new(node_name: &str, api_server: &str) -> View {
        let info = ClusterInfo {
            node_name: node_name.to_owned(),
            api_server: api_server.to_owned(),
            api_message: "not contacted yet".into(),
            ..ClusterInfo::default()
        };
        View {
            state: Mutex::new((info, PodCidr::Waiting)),
            nudge: bounded(1),
        }
    }

    /// Says the pods on the node changed (never blocks: one pending nudge is enough).
    pub fn nudge(&self) {
        let _ = self.nudge.0.try_send(());
    }

    /// Where the nudges arrive.
    pub fn nudges(&self) -> Receiver<()> {
        self.nudge.1.clone()
    }

    /// Changes the state.
    pub fn update<T>(&self, f: impl FnOnce(&mut ClusterInfo, &mut PodCidr) -> T) -> T {
        let mut state = self.state.acquire();
        let (info, pod_cidr) = &mut *state;
        f(info, pod_cidr)
    }

    /// The pod CIDRs network `network` had when knid last ran, in use until the Node is read.
    pub fn recorded(&self, network: &str, cidrs: &[ipnet::IpNet]) {
        self.update(|info, pod_cidr| {
            info.pod_cidr_network = network.to_owned();
            info.pod_cidrs = cidrs.to_vec();
            *pod_cidr = PodCidr::Recorded;
        });
    }

    /// Records an answer from the API server.
    pub fn contact(&self, resource_version: &str) {
        self.update(|info, _| {
            info.api_reachable = true;
            info.api_message.clear();
            info.last_contact_ms = now_ms();
            info.resource_version = resource_version.to_owned();
        });
    }

    /// The state as Status reports it.
    pub fn info(&self) -> ClusterInfo {
        self.state.acquire().0.clone()
    }

    /// Why an attach to the pod CIDR network cannot get an address now.
    pub fn waiting_reason(&self) -> String {
        let state = self.state.acquire();
        let (info, pod_cidr) = &*state;
        let why = match pod_cidr {
            PodCidr::NotAllocated(why) | PodCidr::Invalid(why) => why.clone(),
            _ if !info.api_reachable => format!(
                "the Kubernetes API at {} has not answered: {}",
                info.api_server, info.api_message
            ),
            _ => "not known yet".to_owned(),
        };
        format!(
            "this node's pod CIDR (Node {} spec.podCIDRs) is not known: {why}",
            info.node_name
        )
    }

    /// The conditions of cluster mode.
    pub fn conditions(&self) -> Vec<Condition> {
        let state = self.state.acquire();
        let (info, pod_cidr) = &*state;
        let mut out = Vec::with_capacity(3);
        let cidrs = || {
            info.pod_cidrs
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let node = &info.node_name;
        let pod = match pod_cidr {
            PodCidr::Unused => None,
            PodCidr::Waiting => Some(Condition::now(POD_CIDR, false, "Waiting", &{
                let mut m = format!("waiting for Node {node} from the Kubernetes API");
                if !info.api_reachable {
                    m.push_str(&format!(": {}", info.api_message));
                }
                m
            })),
            PodCidr::NotAllocated(why) => {
                Some(Condition::now(POD_CIDR, false, "NotAllocated", why))
            }
            PodCidr::Invalid(why) => Some(Condition::now(POD_CIDR, false, "Invalid", why)),
            PodCidr::Changed(why) => Some(Condition::now(POD_CIDR, false, "Changed", why)),
            PodCidr::Recorded => Some(Condition::now(
                POD_CIDR,
                true,
                "Recorded",
                &format!(
                    "{} kept from before knid started, network {}; Node {node} is read once \
                     the Kubernetes API answers",
                    cidrs(),
                    info.pod_cidr_network
                ),
            )),
            PodCidr::InUse => Some(Condition::now(
                POD_CIDR,
                true,
                "",
                &format!(
                    "{} from Node {node} spec.podCIDRs, network {}",
                    cidrs(),
                    info.pod_cidr_network
                ),
            )),
        };
        out.extend(pod);
        out.push(if info.api_reachable {
            Condition::now(
                API,
                true,
                "",
                &format!("watching Nodes at {}", info.api_server),
            )
        } else {
            Condition::now(
                API,
                false,
                "Unreachable",
                &format!(
                    "{}: {}; running pods and routes keep their last known state",
                    info.api_server, info.api_message
                ),
            )
        });
        let bad: Vec<String> = info
            .routes
            .iter()
            .filter(|r| r.state != RouteState::Installed)
            .map(|r| format!("node {} {}: {}", r.node, r.dst, r.message))
            .collect();
        out.push(if bad.is_empty() {
            let installed = info.routes.len();
            Condition::now(
                ROUTES,
                true,
                "",
                &format!("{installed} route(s) to other nodes' pods"),
            )
        } else {
            let any = |state| info.routes.iter().any(|r| r.state == state);
            let reason = if any(RouteState::Failed) {
                "RouteFailed"
            } else if any(RouteState::AwaitingVtep) {
                "AwaitingVtep"
            } else {
                "NotDirectlyReachable"
            };
            Condition::now(ROUTES, false, reason, &bad.join("; "))
        });
        out
    }
}

/// Whether a false condition of kind `kind` (and `reason`) makes the node not ready. Only a pod
/// CIDR not known yet does: the API server or another node being away, and a pod CIDR that
/// changed under running pods, leave running pods as they are.
pub fn counts_for_ready(kind: &str, reason: &str) -> bool {
    match kind {
        API | ROUTES => false,
        POD_CIDR => reason != "Changed",
        _ => true,
    }
}
