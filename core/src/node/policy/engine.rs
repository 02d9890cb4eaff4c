//! The policy thread (`knid-policy`): it lists and watches NetworkPolicies, and Namespaces and
//! Pods while a NetworkPolicy exists (each on its own reflector thread), keeps what policy
//! needs of them ([`World`]), compiles it with the pods attached on this node and moves the
//! kernel's policy table to the result in one transaction per change. Changes that arrive
//! together are applied together. An attach waits for its pod's isolation
//! ([`Policies::pods_changed`]) before it answers. The objects are recorded in the store, and
//! at start-up the table is rebuilt from them before knid serves ([`restore`]). A lost API
//! server changes nothing: the last known objects stay enforced.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, never, select, tick, Receiver, Sender};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use knid_netops::nft::{Direction, Nft, PolicyState};

use super::compile::{compile, Compiled, LocalPod};
use super::handle::{Change, Policies};
use super::objects::{Key, World};
use super::watched::PolicyFact;
use super::{kernel, local, snapshot};
use crate::cluster::client::Client;
use crate::cluster::reflector::{self, Learned, Resource};
use crate::error::{Error, Result};
use crate::shared::Context;

/// knid's policy table (family `inet`).
pub const TABLE: &str = "knid-policy";
/// Messages in flight from one watch.
const QUEUE: usize = 1024;
/// Least time between two recordings of the objects in the store.
const RECORD_EVERY: Duration = Duration::from_secs(2);
/// How often the kernel's table is read back and compared with what knid installed.
const CHECK_EVERY: Duration = Duration::from_secs(30);

/// Rebuilds the policy table from the objects recorded in the store, before knid serves:
/// returns the objects and what was installed, for the thread to go on from.
pub(crate) fn restore(ctx: &Context) -> Result<Option<(World, PolicyState)>> {
    let Some(json) = ctx.store.policy_world()? else {
        return Ok(None);
    };
    let world = match snapshot::decode(&json) {
        Ok(world) => world,
        Err(e) => {
            log::error!("policy: the recorded objects cannot be read ({e}); waiting for the API");
            return Ok(None);
        }
    };
    let local = local::pods(&ctx.store)?;
    let state = kernel::state(&compile(&world, &local));
    let mut nft = Nft::open().map_err(|e| Error::kernel("open an nf_tables socket", e))?;
    nft.replace_policy(TABLE, &state)
        .map_err(|e| Error::kernel("rebuild the policy table", e))?;
    log::info!(
        "policy: table {TABLE} rebuilt from {} recorded policies ({} isolated pod directions)",
        world.policies.len(),
        state.isolated.len()
    );
    Ok(Some((world, state)))
}

/// Removes knid's policy table where NetworkPolicy is off (cluster mode off, or
/// `network_policy = false`): a table left by an earlier start would go on isolating addresses
/// that new pods get. Logged; a failure does not stop knid.
pub(crate) fn remove_table() {
    let removed = Nft::open().and_then(|mut nft| match nft.policy_state(TABLE)? {
        Some(_) => nft.delete_table(TABLE).map(|()| true),
        None => Ok(false),
    });
    match removed {
        Ok(true) => log::warn!(
            "policy: NetworkPolicy is off; table inet {TABLE} left by an earlier start removed"
        ),
        Ok(false) => {}
        Err(e) => log::error!("policy: remove table inet {TABLE}: {e}"),
    }
}

/// The running policy thread.
pub struct PolicyMode {
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl PolicyMode {
    /// Starts watching with `client` and enforcing for `ctx`'s pods; `restored` is what
    /// [`restore`] installed.
    pub(crate) fn start(
        ctx: Arc<Context>,
        policies: Arc<Policies>,
        client: Arc<Client>,
        restored: Option<(World, PolicyState)>,
    ) -> Result<PolicyMode> {
        let changes = policies
            .take_changes()
            .ok_or_else(|| Error::Unavailable("the policy thread started twice".into()))?;
        let (stop, stop_rx) = bounded(0);
        let (world, installed) = match restored {
            Some((w, s)) => (w, Some(s)),
            None => (World::default(), None),
        };
        if let Some(state) = &installed {
            policies.update(|s| s.installed = Some(Arc::new(state.clone())));
        }
        let engine = Engine {
            ctx,
            policies,
            client,
            restored: installed.is_some(),
            world: Arc::new(world),
            installed,
            nft: None,
            listed: Listed::default(),
            record_due: None,
            isolating: HashMap::new(),
            drops_seen: HashMap::new(),
            checked: Instant::now(),
        };
        let thread = std::thread::Builder::new()
            .name("knid-policy".into())
            .spawn(move || engine.run(changes, stop_rx))
            .map_err(|e| Error::Unavailable(format!("spawn the policy thread: {e}")))?;
        Ok(PolicyMode {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread; the table stays as it is.
    pub fn stop(&mut self) {
        self.stop = bounded(0).0;
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("the policy thread panicked");
            }
        }
    }
}

/// Which kinds have been listed since their watch started.
#[derive(Default)]
struct Listed {
    policies: bool,
    namespaces: bool,
    pods: bool,
}

struct Engine {
    ctx: Arc<Context>,
    policies: Arc<Policies>,
    client: Arc<Client>,
    /// Objects were restored from the store: apply even before every kind is listed.
    restored: bool,
    /// The objects; shared with [`Summary::world`] between changes (one copy at rest).
    world: Arc<World>,
    installed: Option<PolicyState>,
    nft: Option<Nft>,
    listed: Listed,
    record_due: Option<Instant>,
    /// The policies isolating each pod address, per direction, as last applied.
    isolating: HashMap<(Direction, IpAddr), Vec<Key>>,
    /// The kernel's drop counter of each isolated pod direction, as last read.
    drops_seen: HashMap<(Direction, IpAddr), u64>,
    /// When the table was last compared with the kernel's.
    checked: Instant,
}

/// The receivers of the Namespace and Pod watches, while they run.
struct Peers {
    namespaces: Receiver<Learned<(String, crate::node::policy::selector::Labels)>>,
    pods: Receiver<Learned<(Key, crate::node::policy::objects::PodInfo)>>,
}

fn watch<R: Resource + 'static>(client: &Arc<Client>, name: &str) -> Receiver<Learned<R::Facts>> {
    let (tx, rx) = bounded(QUEUE);
    let client = Arc::clone(client);
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || reflector::run::<R>(&client, &tx));
    if let Err(e) = spawned {
        log::error!("policy: spawn the {} watch: {e}", R::WHAT);
    }
    rx
}

impl Engine {
    fn run(mut self, changes: Receiver<Change>, stop: Receiver<()>) {
        let policy_rx = watch::<NetworkPolicy>(&self.client, "knid-kube-netpol");
        let mut peers: Option<Peers> = None;
        let ticks = tick(Duration::from_secs(1));
        loop {
            let mut dirty = false;
            let mut acks: Vec<Sender<()>> = Vec::new();
            let (ns_rx, pod_rx) = match &peers {
                Some(p) => (p.namespaces.clone(), p.pods.clone()),
                None => (never(), never()),
            };
            select! {
                recv(stop) -> _ => return,
                recv(policy_rx) -> m => match m {
                    Ok(m) => dirty |= self.take_policies(m),
                    Err(_) => return,
                },
                recv(ns_rx) -> m => if let Ok(m) = m { dirty |= self.take_namespaces(m) },
                recv(pod_rx) -> m => if let Ok(m) = m { dirty |= self.take_pods(m) },
                recv(changes) -> m => if let Ok(ack) = m { dirty = true; acks.extend(ack) },
                recv(ticks) -> _ => {
                    self.record_if_due();
                    self.count_drops();
                    self.check_kernel();
                }
            }
            // Whatever else is already waiting is applied in the same transaction.
            while let Ok(m) = policy_rx.try_recv() {
                dirty |= self.take_policies(m);
            }
            while let Ok(m) = ns_rx.try_recv() {
                dirty |= self.take_namespaces(m);
            }
            while let Ok(m) = pod_rx.try_recv() {
                dirty |= self.take_pods(m);
            }
            while let Ok(ack) = changes.try_recv() {
                dirty = true;
                acks.extend(ack);
            }
            // Namespaces and Pods are watched only while a policy exists.
            match (&peers, self.world.policies.is_empty()) {
                (None, false) => {
                    peers = Some(Peers {
                        namespaces: watch::<Namespace>(&self.client, "knid-kube-ns"),
                        pods: watch::<Pod>(&self.client, "knid-kube-pods"),
                    });
                }
                (Some(_), true) if self.listed.policies => {
                    peers = None;
                    self.world_mut().namespaces.clear();
                    self.world_mut().pods.clear();
                    self.listed.namespaces = false;
                    self.listed.pods = false;
                    dirty = true;
                }
                _ => {}
            }
            if dirty {
                self.apply();
            }
            for ack in acks {
                let _ = ack.send(());
            }
        }
    }

    /// The objects, to change: copied only while status still shares the last version.
    fn world_mut(&mut self) -> &mut World {
        // Only the objects are recorded: a change of this node's pods alone writes nothing.
        if self.record_due.is_none() {
            self.record_due = Some(Instant::now() + RECORD_EVERY);
        }
        Arc::make_mut(&mut self.world)
    }

    fn synced(&self) -> bool {
        self.listed.policies
            && (self.world.policies.is_empty() || (self.listed.namespaces && self.listed.pods))
    }

    fn take_policies(&mut self, m: Learned<PolicyFact>) -> bool {
        let refused = |f: &PolicyFact| f.policy.as_ref().err().map(|e| (f.key.clone(), e.clone()));
        match m {
            Learned::Listed(all) => {
                self.listed.policies = true;
                let list: Vec<(Key, String)> = all.iter().filter_map(refused).collect();
                self.policies.update(|s| s.refused = list);
                self.world_mut().policies = all
                    .into_iter()
                    .filter_map(|f| f.policy.ok())
                    .map(|p| (p.key(), p))
                    .collect();
                true
            }
            Learned::Upserted(f) => {
                self.policies.update(|s| {
                    s.refused.retain(|(k, _)| *k != f.key);
                    s.refused.extend(refused(&f));
                });
                match f.policy {
                    Ok(p) => {
                        self.world_mut().policies.insert(f.key, p);
                    }
                    Err(e) => {
                        log::warn!("policy {}/{} cannot be enforced: {e}", f.key.0, f.key.1);
                        self.world_mut().policies.remove(&f.key);
                    }
                }
                true
            }
            Learned::Deleted(f) => {
                self.policies
                    .update(|s| s.refused.retain(|(k, _)| *k != f.key));
                self.world_mut().policies.remove(&f.key).is_some()
            }
            Learned::Reachable(_) | Learned::Unreachable(_) => false,
        }
    }

    fn take_namespaces(
        &mut self,
        m: Learned<(String, crate::node::policy::selector::Labels)>,
    ) -> bool {
        match m {
            Learned::Listed(all) => {
                self.listed.namespaces = true;
                self.world_mut().namespaces = all.into_iter().collect();
                true
            }
            Learned::Upserted((name, labels)) => {
                self.world_mut().namespaces.insert(name, labels.clone()) != Some(labels)
            }
            Learned::Deleted((name, _)) => self.world_mut().namespaces.remove(&name).is_some(),
            Learned::Reachable(_) | Learned::Unreachable(_) => false,
        }
    }

    fn take_pods(&mut self, m: Learned<(Key, crate::node::policy::objects::PodInfo)>) -> bool {
        match m {
            Learned::Listed(all) => {
                self.listed.pods = true;
                self.world_mut().pods = all.into_iter().collect();
                // A list of many pods passed through big buffers: hand them back.
                crate::memory::give_back();
                true
            }
            Learned::Upserted((key, pod)) => {
                self.world_mut().pods.insert(key, pod.clone()) != Some(pod)
            }
            Learned::Deleted((key, _)) => self.world_mut().pods.remove(&key).is_some(),
            Learned::Reachable(_) | Learned::Unreachable(_) => false,
        }
    }

    /// Compiles and moves the table to the result.
    fn apply(&mut self) {
        let synced = self.synced();
        self.policies.update(|s| s.synced = synced);
        // The recorded objects stand in only until everything is listed once: later, a kind
        // being listed again (Pods after the first policy appears) is waited for.
        if synced {
            self.restored = false;
        }
        if !synced && !self.restored {
            return;
        }
        let local: Vec<LocalPod> = match local::pods(&self.ctx.store) {
            Ok(l) => l,
            Err(e) => {
                log::error!("policy: read the pods of this node: {e}");
                return;
            }
        };
        let compiled: Compiled = compile(&self.world, &local);
        let want = kernel::state(&compiled);
        self.isolating = isolating(&compiled, &local);
        self.publish();
        if self.installed.as_ref() == Some(&want) {
            return;
        }
        let result = self.install(&want);
        self.policies.update(|s| {
            s.error = result.as_ref().err().cloned();
            if result.is_ok() {
                s.applied_at_ms = crate::model::now_ms();
            }
        });
        match result {
            Ok(()) => {
                self.policies
                    .update(|s| s.installed = Some(Arc::new(want.clone())));
                self.installed = Some(want);
            }
            Err(e) => {
                log::error!("policy: {e}");
                self.policies.update(|s| s.installed = None);
                self.installed = None;
            }
        }
    }

    /// The thread's nf_tables socket, opened on first use.
    fn socket(&mut self) -> Option<&mut Nft> {
        if self.nft.is_none() {
            match Nft::open() {
                Ok(nft) => self.nft = Some(nft),
                Err(e) => log::error!("policy: open an nf_tables socket: {e}"),
            }
        }
        self.nft.as_mut()
    }

    fn install(&mut self, want: &PolicyState) -> std::result::Result<(), String> {
        let installed = self.installed.take();
        let Some(nft) = self.socket() else {
            return Err("no nf_tables socket".into());
        };
        let updated = match &installed {
            Some(from) => nft.update_policy(TABLE, from, want),
            None => nft.replace_policy(TABLE, want),
        };
        match updated {
            Ok(()) => Ok(()),
            // The table changed under knid (deleted by hand): put it back whole.
            Err(first) => nft
                .replace_policy(TABLE, want)
                .map_err(|e| format!("update table {TABLE}: {first}; replace it: {e}")),
        }
    }

    /// Shares the objects with status.
    fn publish(&mut self) {
        let world = Arc::clone(&self.world);
        self.policies.update(|s| s.world = world);
    }

    /// Adds the kernel's new drops to the policies isolating each pod.
    fn count_drops(&mut self) {
        if self.installed.is_none() {
            return;
        }
        let Some(nft) = self.socket() else {
            return;
        };
        let drops = match nft.policy_drops(TABLE) {
            Ok(d) => d,
            Err(e) => {
                log::debug!("policy: read the drop counters: {e}");
                return;
            }
        };
        let mut added: Vec<((Key, Direction), u64)> = Vec::new();
        for d in drops {
            let at = (d.direction, d.pod);
            let before = self.drops_seen.insert(at, d.packets).unwrap_or(0);
            // A counter below its last reading was made again (a replaced table).
            let delta = if d.packets >= before {
                d.packets - before
            } else {
                d.packets
            };
            if delta == 0 {
                continue;
            }
            for key in self.isolating.get(&at).into_iter().flatten() {
                added.push(((key.clone(), d.direction), delta));
            }
        }
        if !added.is_empty() {
            self.policies.update(|s| {
                for (at, n) in added {
                    *s.denied.entry(at).or_default() += n;
                }
            });
        }
    }

    /// Puts the table back if the kernel's differs from what knid installed (deleted or
    /// changed by hand).
    fn check_kernel(&mut self) {
        if self.checked.elapsed() < CHECK_EVERY {
            return;
        }
        self.checked = Instant::now();
        let Some(want) = self.installed.clone() else {
            return;
        };
        let Some(nft) = self.socket() else {
            return;
        };
        let have = match nft.policy_state(TABLE) {
            Ok(have) => have,
            Err(e) => {
                log::warn!("policy: read table {TABLE} back: {e}");
                return;
            }
        };
        if have.as_ref() == Some(&want) {
            return;
        }
        log::warn!("policy: table {TABLE} differs from what knid installed; putting it back");
        match nft.replace_policy(TABLE, &want) {
            Ok(()) => {
                self.drops_seen.clear();
                self.policies.update(|s| s.repairs += 1);
            }
            Err(e) => log::error!("policy: put table {TABLE} back: {e}"),
        }
    }

    fn record_if_due(&mut self) {
        if self.record_due.is_some_and(|due| Instant::now() >= due) {
            self.record_due = None;
            if let Err(e) = self
                .ctx
                .store
                .set_policy_world(&snapshot::encode(&self.world))
            {
                log::error!("policy: record the objects in the store: {e}");
            }
        }
    }
}

/// The policies isolating each local pod address, per direction.
fn isolating(compiled: &Compiled, local: &[LocalPod]) -> HashMap<(Direction, IpAddr), Vec<Key>> {
    let mut out: HashMap<(Direction, IpAddr), Vec<Key>> = HashMap::new();
    for pod in local {
        let Some(selection) = compiled.selected.get(&pod.sandbox) else {
            continue;
        };
        for ip in &pod.ips {
            for (direction, keys) in [
                (Direction::Ingress, &selection.ingress),
                (Direction::Egress, &selection.egress),
            ] {
                if !keys.is_empty() {
                    out.insert((direction, *ip), keys.clone());
                }
            }
        }
    }
    out
}
