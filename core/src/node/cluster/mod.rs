//! Cluster mode: knid in a multi-node Kubernetes cluster. A watch of the Node objects
//! ([`reflector`], over the synchronous [`client`] with the [`credentials`] of the pod's
//! service account or a kubeconfig) feeds the cluster thread ([`controller`]), which gives the
//! network marked `pod_cidr_from_node` this node's `spec.podCIDRs`, keeps the cluster's pod
//! CIDRs out of masquerade, and routes the other nodes' pod CIDRs via their InternalIPs
//! (`node::routes`). The [`publish`] thread writes what knid knows on this node's own Node
//! (the NetworkUnavailable condition, the pod-network-full taint, the networks annotation).
//! [`View`] is what Status reports. Losing the API server changes nothing on the node: the last
//! known state stays until the watch resumes.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Sender};

use crate::config::Cluster;
use crate::error::{Error, Result};
use crate::shared::Context;

pub mod client;
mod controller;
pub mod credentials;
pub mod error;
pub mod node_object;
pub mod publish;
pub mod reflector;
pub mod view;

pub use view::View;

/// Messages in flight from the watch to the cluster thread: a full list is one message, so
/// this bounds memory while the cluster thread applies a change.
const LEARNED_QUEUE: usize = 1024;

/// The running cluster mode: the cluster thread and the publishing thread (joined on stop) and
/// the watch thread (blocked in reads; it ends at its next read once the cluster thread is
/// gone).
pub struct ClusterMode {
    stop: Sender<()>,
    threads: Vec<JoinHandle<()>>,
    policy: Option<crate::node::policy::PolicyMode>,
}

/// NetworkPolicy's handle, and what was restored at start-up, for [`ClusterMode::start`].
pub type PolicyStart = (
    Arc<crate::node::policy::Policies>,
    Option<(crate::node::policy::World, knid_netops::nft::PolicyState)>,
);

/// The endpoint of `config`'s API server, from the service account or the kubeconfig.
pub fn endpoint(config: &Cluster) -> Result<credentials::Endpoint> {
    credentials::endpoint(&config.credentials, |key| std::env::var(key).ok())
        .map_err(|e| Error::Config(format!("cluster: {e}")))
}

impl ClusterMode {
    /// Starts watching Nodes from `endpoint` and applying what they say to `ctx`'s node side,
    /// reporting in `view` (the one `ctx` holds), and publishing on this node's Node what
    /// `networks` says of the node's networks.
    pub(crate) fn start(
        ctx: Arc<Context>,
        view: Arc<View>,
        config: Cluster,
        endpoint: credentials::Endpoint,
        networks: publish::Networks,
        policies: Option<PolicyStart>,
    ) -> Result<ClusterMode> {
        let client = Arc::new(client::Client::new(endpoint));
        let (learned_tx, learned_rx) = bounded(LEARNED_QUEUE);
        // Never sent on: dropping it stops both threads.
        let (stop, stop_rx) = bounded(0);
        let watch_client = Arc::clone(&client);
        std::thread::Builder::new()
            .name("knid-kube-watch".into())
            .spawn(move || reflector::run::<node_object::Node>(&watch_client, &learned_tx))
            .map_err(|e| Error::Unavailable(format!("spawn the Node watch thread: {e}")))?;
        let policy = match policies {
            Some((policies, restored)) => Some(crate::node::policy::PolicyMode::start(
                Arc::clone(&ctx),
                policies,
                Arc::clone(&client),
                restored,
            )?),
            None => None,
        };
        let publisher =
            publish::Publisher::new(client, Arc::clone(&view), config.clone(), networks);
        let controller = controller::Controller::new(ctx, view, config);
        let mut mode = ClusterMode {
            stop,
            threads: Vec::with_capacity(2),
            policy,
        };
        let controller_stop = stop_rx.clone();
        mode.threads.push(
            std::thread::Builder::new()
                .name("knid-cluster".into())
                .spawn(move || controller.run(learned_rx, controller_stop))
                .map_err(|e| Error::Unavailable(format!("spawn the cluster thread: {e}")))?,
        );
        mode.threads.push(
            std::thread::Builder::new()
                .name("knid-node-publish".into())
                .spawn(move || publisher.run(stop_rx))
                .map_err(|e| {
                    Error::Unavailable(format!("spawn the Node publishing thread: {e}"))
                })?,
        );
        Ok(mode)
    }

    /// Stops the cluster and publishing threads; routes, networks and what the Node says stay
    /// as they are.
    pub fn stop(&mut self) {
        // Replacing the only sender disconnects the channel: every receiver wakes.
        self.stop = bounded(0).0;
        if let Some(policy) = self.policy.as_mut() {
            policy.stop();
        }
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                log::error!("a cluster mode thread panicked");
            }
        }
    }
}
