//! Cluster mode: knid in a multi-node Kubernetes cluster. A watch of the Node objects
//! ([`reflector`], over the synchronous [`client`] with the [`credentials`] of the pod's
//! service account or a kubeconfig) feeds the cluster thread ([`controller`]), which gives the
//! network marked `pod_cidr_from_node` this node's `spec.podCIDRs`, keeps the cluster's pod
//! CIDRs out of masquerade, and routes the other nodes' pod CIDRs via their InternalIPs
//! (`node::routes`). [`View`] is what Status reports. Losing the API server changes nothing
//! on the node: the last known state stays until the watch resumes.

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
pub mod reflector;
pub mod view;

pub use view::View;

/// Messages in flight from the watch to the cluster thread: a full list is one message, so
/// this bounds memory while the cluster thread applies a change.
const LEARNED_QUEUE: usize = 1024;

/// The running cluster mode: the cluster thread (joined on stop) and the watch thread (blocked
/// in reads; it ends at its next read once the cluster thread is gone).
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
    /// reporting in `view` (the one `ctx` holds).
    pub(crate) fn start(
        ctx: Arc<Context>,
        view: Arc<View>,
        config: Cluster,
        endpoint: credentials::Endpoint,
    ) -> Result<ClusterMode> {
        let client = client::Client::new(endpoint);
        let (learned_tx, learned_rx) = bounded(LEARNED_QUEUE);
        let (stop, stop_rx) = bounded(1);
        std::thread::Builder::new()
            .name("knid-kube-watch".into())
            .spawn(move || reflector::run(&client, &learned_tx))
            .map_err(|e| Error::Unavailable(format!("spawn the Node watch thread: {e}")))?;
        let controller = controller::Controller::new(ctx, view, config);
        let thread = std::thread::Builder::new()
            .name("knid-cluster".into())
            .spawn(move || controller.run(learned_rx, stop_rx))
            .map_err(|e| Error::Unavailable(format!("spawn the cluster thread: {e}")))?;
        Ok(ClusterMode {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the cluster thread; routes and networks stay as they are.
    pub fn stop(&mut self) {
        let _ = self.stop.try_send(());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                log::error!("the cluster thread panicked");
            }
        }
    }
}
