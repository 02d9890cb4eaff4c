//! The policy engine: it keeps what the watches learn of NetworkPolicies, Namespaces and Pods
//! ([`World`]), compiles it with the pods attached on this node and moves the kernel's policy
//! table to the result in one transaction per change; changes that arrive together are applied
//! together. It has no thread of its own: the cluster thread (`knid-cluster`, see
//! [`super::mode`]) gives it what the watches learn and its rounds (drop counters, the record in
//! the store, the kernel check), and an attach runs it on its own thread while it waits for its
//! pod's isolation ([`super::Policies::pods_changed`]), one at a time under the lock
//! [`super::Policies`] keeps it in. The objects are recorded in the store, and at start-up the
//! table is rebuilt from them before knid serves ([`restore`]). A lost API server changes
//! nothing: the last known objects stay enforced.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use knid_netops::nft::{Direction, Nft, PolicyState};
use knid_store::Store;

use super::compile::{compile, Compiled, LocalPod};
use super::objects::{Key, PodInfo, World};
use super::selector::Labels;
use super::summary::Summary;
use super::watched::PolicyFact;
use super::{kernel, local, snapshot};
use crate::cluster::reflector::Learned;
use crate::error::{Error, Result};
use crate::locks::LockExt;

/// knid's policy table (family `inet`).
pub const TABLE: &str = "knid-policy";
/// Least time between two recordings of the objects in the store.
const RECORD_EVERY: Duration = Duration::from_secs(2);
/// How often the kernel's table is read back and compared with what knid installed.
const CHECK_EVERY: Duration = Duration::from_secs(30);

/// A change of the pods on this node, with whom to tell once the table has it.
pub(super) type Change = Option<Sender<()>>;

/// Rebuilds the policy table from the objects recorded in the store, before knid serves:
/// returns the objects and what was installed, for the engine to go on from.
pub(crate) fn restore(store: &Store) -> Result<Option<(World, PolicyState)>> {
    let Some(json) = store.policy_world()? else {
        return Ok(None);
    };
    let world = match snapshot::decode(&json) {
        Ok(world) => world,
        Err(e) => {
            log::error!("policy: the recorded objects cannot be read ({e}); waiting for the API");
            return Ok(None);
        }
    };
    let local = local::pods(store)?;
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

/// Which kinds have been listed since their watch started.
#[derive(Default)]
struct Listed {
    policies: bool,
    namespaces: bool,
    pods: bool,
}

/// The engine's state; see the module docs.
pub struct Engine {
    store: Arc<Store>,
    /// Where policy stands, shared with the status answers.
    summary: Arc<Mutex<Summary>>,
    /// The pod changes of attaches and the reaper, to apply.
    changes: Receiver<Change>,
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

impl Engine {
    /// An engine reporting in `summary` and applying `changes`, going on from what [`restore`]
    /// installed.
    pub(super) fn new(
        store: Arc<Store>,
        summary: Arc<Mutex<Summary>>,
        changes: Receiver<Change>,
        restored: Option<(World, PolicyState)>,
    ) -> Engine {
        let (world, installed) = match restored {
            Some((w, s)) => (w, Some(s)),
            None => (World::default(), None),
        };
        if let Some(state) = &installed {
            summary.acquire().installed = Some(Arc::new(state.clone()));
        }
        Engine {
            store,
            summary,
            changes,
            restored: installed.is_some(),
            world: Arc::new(world),
            installed,
            nft: None,
            listed: Listed::default(),
            record_due: None,
            isolating: HashMap::new(),
            drops_seen: HashMap::new(),
            checked: Instant::now(),
        }
    }

    /// Applies the pod changes queued (and the objects' changes, when `dirty`) in one
    /// transaction, then tells whoever waits for them.
    pub fn serve(&mut self, dirty: bool) {
        let mut dirty = dirty;
        let mut acks: Vec<Sender<()>> = Vec::new();
        while let Ok(change) = self.changes.try_recv() {
            dirty = true;
            acks.extend(change);
        }
        if dirty {
            self.apply();
        }
        for ack in acks {
            let _ = ack.send(());
        }
    }

    /// The round the cluster thread gives the engine every second: the drop counters read, the
    /// objects recorded if they changed [`RECORD_EVERY`] ago, the table checked against the
    /// kernel's every [`CHECK_EVERY`].
    pub fn round(&mut self) {
        self.record_if_due();
        self.count_drops();
        self.check_kernel();
    }

    /// Whether a NetworkPolicy exists: Namespaces and Pods are watched only then.
    pub fn has_policies(&self) -> bool {
        !self.world.policies.is_empty()
    }

    /// Forgets the Namespaces and Pods once no NetworkPolicy exists, for their watches to stop
    /// (whether it did: not before the NetworkPolicies are listed). Their next watch lists them
    /// again.
    pub fn forget_peers(&mut self) -> bool {
        if !self.listed.policies {
            return false;
        }
        self.world_mut().namespaces.clear();
        self.world_mut().pods.clear();
        self.listed.namespaces = false;
        self.listed.pods = false;
        true
    }

    fn update(&self, f: impl FnOnce(&mut Summary)) {
        f(&mut self.summary.acquire());
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

    /// Takes in what the NetworkPolicy watch learned; whether the objects changed.
    pub fn take_policies(&mut self, m: Learned<PolicyFact>) -> bool {
        let refused = |f: &PolicyFact| f.policy.as_ref().err().map(|e| (f.key.clone(), e.clone()));
        match m {
            Learned::Listed(all) => {
                self.listed.policies = true;
                let list: Vec<(Key, String)> = all.iter().filter_map(refused).collect();
                self.update(|s| s.refused = list);
                self.world_mut().policies = all
                    .into_iter()
                    .filter_map(|f| f.policy.ok())
                    .map(|p| (p.key(), p))
                    .collect();
                true
            }
            Learned::Upserted(f) => {
                self.update(|s| {
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
                self.update(|s| s.refused.retain(|(k, _)| *k != f.key));
                self.world_mut().policies.remove(&f.key).is_some()
            }
            Learned::Reachable(_) | Learned::Unreachable(_) => false,
        }
    }

    /// Takes in what the Namespace watch learned; whether the objects changed.
    pub fn take_namespaces(&mut self, m: Learned<(String, Labels)>) -> bool {
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

    /// Takes in what the Pod watch learned; whether the objects changed.
    pub fn take_pods(&mut self, m: Learned<(Key, PodInfo)>) -> bool {
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
        self.update(|s| s.synced = synced);
        // The recorded objects stand in only until everything is listed once: later, a kind
        // being listed again (Pods after the first policy appears) is waited for.
        if synced {
            self.restored = false;
        }
        if !synced && !self.restored {
            return;
        }
        let local: Vec<LocalPod> = match local::pods(&self.store) {
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
        self.update(|s| {
            s.error = result.as_ref().err().cloned();
            if result.is_ok() {
                s.applied_at_ms = crate::model::now_ms();
            }
        });
        match result {
            Ok(()) => {
                self.update(|s| s.installed = Some(Arc::new(want.clone())));
                self.installed = Some(want);
            }
            Err(e) => {
                log::error!("policy: {e}");
                self.update(|s| s.installed = None);
                self.installed = None;
            }
        }
    }

    /// The engine's nf_tables socket, opened on first use.
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
        self.update(|s| s.world = world);
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
            self.update(|s| {
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
                self.update(|s| s.repairs += 1);
            }
            Err(e) => log::error!("policy: put table {TABLE} back: {e}"),
        }
    }

    fn record_if_due(&mut self) {
        if self.record_due.is_some_and(|due| Instant::now() >= due) {
            self.record_due = None;
            if let Err(e) = self.store.set_policy_world(&snapshot::encode(&self.world)) {
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
