//! NetworkPolicy's share of the cluster thread: the watches of the kinds policy reads
//! (NetworkPolicies always; Namespaces and Pods only while a NetworkPolicy exists, each on its
//! own reflector thread) and the engine's turns on that thread: what the watches learned and
//! the pods' changes, applied together, and a round of the engine every second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Select};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;

use super::handle::Policies;
use super::objects::{Key, PodInfo};
use super::selector::Labels;
use super::watched::PolicyFact;
use crate::cluster::client::Client;
use crate::cluster::reflector::{self, Learned, Resource};
use crate::error::{Error, Result};
use crate::locks::LockExt;

/// Messages in flight from one watch.
const QUEUE: usize = 1024;
/// How often the engine gets its round (drop counters; the record and the kernel check when
/// due).
const ROUND_EVERY: Duration = Duration::from_secs(1);

/// NetworkPolicy in cluster mode, driven by the cluster thread.
pub struct PolicyMode {
    policies: Arc<Policies>,
    client: Arc<Client>,
    /// The NetworkPolicy watch (`None` if its thread ended: it never does but by a panic).
    watched: Option<Receiver<Learned<PolicyFact>>>,
    /// The Namespace and Pod watches, while they run.
    peers: Option<Peers>,
    next_round: Instant,
}

/// The receivers of the Namespace and Pod watches.
struct Peers {
    namespaces: Receiver<Learned<(String, Labels)>>,
    pods: Receiver<Learned<(Key, PodInfo)>>,
}

fn watch<R: Resource + 'static>(
    client: &Arc<Client>,
    name: &str,
) -> Result<Receiver<Learned<R::Facts>>> {
    let (tx, rx) = bounded(QUEUE);
    let client = Arc::clone(client);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || reflector::run::<R>(&client, &tx))
        .map_err(|e| Error::Unavailable(format!("spawn the {} watch: {e}", R::WHAT)))?;
    Ok(rx)
}

impl PolicyMode {
    /// Starts watching NetworkPolicies with `client`, for the engine `policies` holds.
    pub(crate) fn start(policies: Arc<Policies>, client: Arc<Client>) -> Result<PolicyMode> {
        if policies.engine().is_none() {
            return Err(Error::Unavailable(
                "the policy engine has not started".into(),
            ));
        }
        let watched = watch::<NetworkPolicy>(&client, "knid-kube-netpol")?;
        Ok(PolicyMode {
            policies,
            client,
            watched: Some(watched),
            peers: None,
            next_round: Instant::now() + ROUND_EVERY,
        })
    }

    /// Adds what the engine waits on to `select`: the watches and the pods' changes.
    pub(crate) fn wait_on<'a>(&'a self, select: &mut Select<'a>) {
        if let Some(watched) = &self.watched {
            select.recv(watched);
        }
        if let Some(peers) = &self.peers {
            select.recv(&peers.namespaces);
            select.recv(&peers.pods);
        }
        select.recv(self.policies.changes());
    }

    /// When the engine's next round is due.
    pub(crate) fn next_due(&self) -> Instant {
        self.next_round
    }

    /// The engine's turn: what arrived is applied in one transaction and the pods' changes
    /// answered, then its round runs if due. The engine's lock is taken only when there is
    /// something to do, so an attach running the engine holds the cluster thread up only when
    /// the engine has work here too.
    pub(crate) fn turn(&mut self, now: Instant) {
        let Some(engine) = self.policies.engine() else {
            return;
        };
        let (mut netpols, mut namespaces, mut pods) = (Vec::new(), Vec::new(), Vec::new());
        let mut ended = false;
        if let Some(watched) = &self.watched {
            if reflector::take_all(watched, |m| netpols.push(m)) {
                log::error!("policy: the NetworkPolicy watch ended; the last known objects stay");
                self.watched = None;
            }
        }
        if let Some(peers) = &self.peers {
            ended = reflector::take_all(&peers.namespaces, |m| namespaces.push(m))
                | reflector::take_all(&peers.pods, |m| pods.push(m));
            if ended {
                log::error!("policy: the Namespace or Pod watch ended; watching them anew");
                self.peers = None;
            }
        }
        let round = now >= self.next_round;
        let idle = netpols.is_empty()
            && namespaces.is_empty()
            && pods.is_empty()
            && self.policies.changes().is_empty();
        if idle && !round && !ended {
            return;
        }
        let mut engine = engine.acquire();
        let mut dirty = false;
        for m in netpols {
            dirty |= engine.take_policies(m);
        }
        for m in namespaces {
            dirty |= engine.take_namespaces(m);
        }
        for m in pods {
            dirty |= engine.take_pods(m);
        }
        // Namespaces and Pods are watched only while a policy exists.
        match (&self.peers, engine.has_policies()) {
            (None, true) => match self.watch_peers() {
                Ok(peers) => self.peers = Some(peers),
                Err(e) => log::error!("policy: {}", e.chain()),
            },
            (Some(_), false) if engine.forget_peers() => {
                self.peers = None;
                dirty = true;
            }
            _ => {}
        }
        engine.serve(dirty);
        if round {
            self.next_round = now + ROUND_EVERY;
            engine.round();
        }
    }

    fn watch_peers(&self) -> Result<Peers> {
        Ok(Peers {
            namespaces: watch::<Namespace>(&self.client, "knid-kube-ns")?,
            pods: watch::<Pod>(&self.client, "knid-kube-pods")?,
        })
    }
}
