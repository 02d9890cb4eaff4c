//! Cluster mode: knid in a multi-node Kubernetes cluster. A watch of the Node objects
//! ([`reflector`], over the synchronous [`client`] with the [`credentials`] of the pod's
//! service account or a kubeconfig) feeds the [`controller`], which gives the network marked
//! `pod_cidr_from_node` this node's `spec.podCIDRs`, keeps the cluster's pod CIDRs out of
//! masquerade, and routes the other nodes' pod CIDRs via their InternalIPs (`node::routes`). The
//! [`publish`]er writes what knid knows on this node's own Node (the NetworkUnavailable
//! condition, the pod-network-full taint, the networks annotation). Both, and NetworkPolicy's
//! engine, run on one thread ([`thread`]). [`View`] is what Status reports. Losing the API
//! server changes nothing on the node: the last known state stays until the watch resumes.

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
mod thread;
pub mod view;
mod writer;

pub use view::View;

/// Messages in flight from the watch to the cluster thread: a full list is one message, so
/// this bounds memory while the cluster thread applies a change.
const LEARNED_QUEUE: usize = 1024;

/// The running cluster mode: the cluster thread (joined on stop) and the watch threads (blocked
/// in reads; each ends at its next event or bookmark once the cluster thread is gone).
pub struct ClusterMode {
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

/// The endpoint of `config`'s API server, from the service account or the kubeconfig.
pub fn endpoint(config: &Cluster) -> Result<credentials::Endpoint> {
    credentials::endpoint(&config.credentials, |key| std::env::var(key).ok())
        .map_err(|e| Error::Config(format!("cluster: {e}")))
}

impl ClusterMode {
    /// Starts watching Nodes from `endpoint` and applying what they say to `ctx`'s node side,
    /// reporting in `view` (the one `ctx` holds), publishing on this node's Node what
    /// `networks` says of the node's networks, and, with `policies`, enforcing NetworkPolicy.
    pub(crate) fn start(
        ctx: Arc<Context>,
        view: Arc<View>,
        config: Cluster,
        endpoint: credentials::Endpoint,
        networks: publish::Networks,
        policies: Option<Arc<crate::node::policy::Policies>>,
    ) -> Result<ClusterMode> {
        let client = Arc::new(client::Client::new(endpoint));
        let (learned_tx, learned_rx) = bounded(LEARNED_QUEUE);
        // Never sent on: dropping it stops the cluster thread.
        let (stop, stop_rx) = bounded(0);
        let watch_client = Arc::clone(&client);
        std::thread::Builder::new()
            .name("knid-kube-watch".into())
            .spawn(move || reflector::run::<node_object::Node>(&watch_client, &learned_tx))
            .map_err(|e| Error::Unavailable(format!("spawn the Node watch thread: {e}")))?;
        let policy = policies
            .map(|p| crate::node::policy::PolicyMode::start(p, Arc::clone(&client)))
            .transpose()?;
        let publisher =
            publish::Publisher::new(client, Arc::clone(&view), config.clone(), networks);
        let parts = thread::Parts {
            publishing: writer::Publishing::new(publisher, view.nudges()),
            controller: controller::Controller::new(ctx, view, config),
            learned: Some(learned_rx),
            policy,
        };
        let thread = std::thread::Builder::new()
            .name("knid-cluster".into())
            .spawn(move || thread::run(parts, &stop_rx))
            .map_err(|e| Error::Unavailable(format!("spawn the cluster thread: {e}")))?;
        Ok(ClusterMode {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the cluster thread, once a Node write in flight is made; routes, networks, the
    /// policy table and what the Node says stay as they are.
    pub fn stop(&mut self) {
        // Replacing the only sender disconnects the channel: the cluster thread wakes.
        self.stop = bounded(0).0;
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                log::error!("the cluster thread panicked");
            }
        }
    }
}
