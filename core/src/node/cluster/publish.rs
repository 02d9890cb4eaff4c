//! What knid tells the cluster on its own Node, and only there: the `NetworkUnavailable`
//! condition (from the pod network's node side, its pod CIDR and the routes to the other
//! nodes), the `knid.io/pod-network-full:NoSchedule` taint while the pod network has no room
//! for another pod (with hysteresis), and the `knid.io/node-networks` annotation (each network's
//! state and free capacity, for schedulers and extenders). It compares on the cluster thread
//! ([`super::thread`]) every `publish_interval`, and soon after an attach or detach; what a
//! round finds to write is written on a thread of its own ([`super::writer`]), so that an API
//! server slow to answer holds up nothing else. A failed write is retried with backoff and the
//! state written is always the latest, so an API server away for a while never leaves a flip
//! half-made or a stale one applied.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::client::{Client, JSON_PATCH, STRATEGIC_MERGE_PATCH};
use super::error::ApiError;
use super::view::{PodCidr, View};
use crate::config::Cluster;
use crate::model::{now_ms, NetworkInfo, RouteState};
use crate::node::overlay::{vtep, Vtep};

/// The Node condition knid owns (the one cloud route controllers and CNIs set).
pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
/// The key of knid's taint; its effect is always `NoSchedule`: a full pool stops new pods, never
/// running ones.
pub const FULL_TAINT: &str = "knid.io/pod-network-full";
/// The annotation with the node's networks.
pub const NETWORKS_ANNOTATION: &str = "knid.io/node-networks";
/// The version of the annotation's JSON (its `version` field).
pub const ANNOTATION_VERSION: u32 = 1;

/// A node network found broken is published only once it stayed so this long: knid and
/// `knictl setup-node-network` repair most breakage within it.
const BROKEN_GRACE: Duration = Duration::from_secs(3);
/// First wait after a failed write; doubled per failure in a row.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between tries.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How many times a taint write that lost a race to another writer is redone at once.
const CONFLICT_RETRIES: usize = 5;
/// How often the Node is read back even when knid's wish has not changed: a taint of knid's,
/// or its condition, changed by another writer is put right within this.
const TAINT_RECHECK: Duration = Duration::from_secs(60);
/// The least time between two rounds an attach or detach starts: a burst of them costs a round
/// (a netlink dump per network) per this, not per pod.
const NUDGE_GAP: Duration = Duration::from_millis(20);
/// How long after writing the VXLAN endpoint annotation the watched Node may still lack it
/// before it is written again.
const VTEP_RECHECK: Duration = Duration::from_secs(10);

/// The networks as Status reports them (without running cni plugins), from the runtime.
pub type Networks = Box<dyn Fn() -> Vec<NetworkInfo> + Send>;

/// The `NetworkUnavailable` condition knid wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// `True`: the pod network of this node does not work.
    pub unavailable: bool,
    /// CamelCase reason.
    pub reason: String,
    /// What is wrong, or what works.
    pub message: String,
}

/// The publisher's state.
pub struct Publisher {
    client: Arc<Client>,
    view: Arc<View>,
    config: Cluster,
    networks: Networks,
    /// The condition as last written, with its lastTransitionTime.
    written: Option<(Signal, String)>,
    /// Since when the node network has been seen broken.
    broken_since: Option<Instant>,
    /// Whether the pod network counts as full (hysteresis state).
    full: bool,
    /// What the Node's taint was last seen or written as, and when.
    taint_seen: Option<(bool, Instant)>,
    /// The annotation as last written, and when.
    annotation: Option<(String, Instant)>,
    /// This node's VXLAN endpoint annotation (`None` under host-gw), and when it was last
    /// written.
    vtep: Option<(String, Option<Instant>)>,
    backoff: Duration,
    retry_at: Option<Instant>,
    /// When the next round of every `publish_interval` is due.
    next_tick: Instant,
    /// When the round an attach or detach asked for is due.
    nudge_due: Option<Instant>,
    /// When the last round started.
    last_round: Instant,
}

/// What a round found to write on the Node: the writes are made apart from the round, on the
/// writer's thread.
pub struct Writes {
    signal: Signal,
    annotation: String,
    vtep_on_node: bool,
    /// When the round was.
    at: Instant,
}

impl Publisher {
    /// A publisher of `config.node_name`'s Node over `client`, reading `view` and `networks`.
    pub fn new(client: Arc<Client>, view: Arc<View>, config: Cluster, networks: Networks) -> Self {
        let now = Instant::now();
        let vtep = config.backend.overlay().then(|| {
            let vtep = Vtep::of(&config.node_name, config.vxlan.vni, config.vxlan.port);
            (vtep.annotation(), None)
        });
        Publisher {
            client,
            view,
            networks,
            written: None,
            broken_since: None,
            full: false,
            taint_seen: None,
            annotation: None,
            vtep,
            backoff: BACKOFF_MIN,
            retry_at: None,
            next_tick: now + config.publish_interval,
            nudge_due: None,
            last_round: now,
            config,
        }
    }

    /// When the next round is due: every `publish_interval`, and soon after an attach or
    /// detach.
    pub fn next_due(&self) -> Instant {
        self.nudge_due
            .map_or(self.next_tick, |due| due.min(self.next_tick))
    }

    /// An attach or detach happened: a round soon, but no sooner than [`NUDGE_GAP`] after the
    /// last, so a burst of them costs one round.
    pub fn nudged(&mut self) {
        let due = self.last_round + NUDGE_GAP;
        self.nudge_due.get_or_insert(due);
    }

    /// The round if one is due: what it found to write, if anything.
    pub fn due_round(&mut self, now: Instant) -> Option<Writes> {
        if now < self.next_due() {
            return None;
        }
        if now >= self.next_tick {
            self.next_tick = now + self.config.publish_interval;
        }
        self.nudge_due = None;
        self.last_round = now;
        self.compare(now)
    }

    /// One comparison of what the Node says with the node: the writes that fix it, if any.
    pub fn compare(&mut self, now: Instant) -> Option<Writes> {
        if self.retry_at.is_some_and(|at| now < at) {
            return None;
        }
        let (info, pod_cidr) = self.view.update(|info, pod| (info.clone(), pod.clone()));
        // Before the first list the pod CIDR and the routes are not known: nothing is said.
        if matches!(pod_cidr, PodCidr::Waiting | PodCidr::Recorded) {
            return None;
        }
        let networks = (self.networks)();
        let pod_networks = pod_networks(&networks, &info.pod_cidr_network);
        let signal = signal(&pod_cidr, &info.routes, &pod_networks);
        let signal = self.debounced(signal, now);
        if let (Some(marks), Some(free)) = (self.config.full_taint, fewest_free(&pod_networks)) {
            if !self.full && free <= marks.low {
                self.full = true;
            } else if self.full && free >= marks.high {
                self.full = false;
            }
        }
        let writes = Writes {
            annotation: annotation(&networks),
            vtep_on_node: info.vtep.as_ref().is_some_and(|v| v.on_node),
            signal,
            at: now,
        };
        if self.due(&writes) {
            return Some(writes);
        }
        self.outcome(Ok(()), now);
        None
    }

    /// Makes the writes a round found, on the writer's thread: retried from the next round on
    /// a failure, after the backoff.
    pub fn write(&mut self, writes: &Writes) {
        let result = self.publish(writes);
        self.outcome(result, writes.at);
    }

    fn outcome(&mut self, result: Result<(), ApiError>, now: Instant) {
        match result {
            Ok(()) => {
                self.backoff = BACKOFF_MIN;
                self.retry_at = None;
                self.view.update(|info, _| info.published.error.clear());
            }
            Err(e) => {
                log::warn!(
                    "cluster: publish on Node {}: {e}; retrying in {:?}",
                    self.config.node_name,
                    self.backoff
                );
                self.retry_at = Some(now + self.backoff);
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                self.view
                    .update(|info, _| info.published.error = e.to_string());
            }
        }
    }

    /// `signal`, except that a broken node network counts only once it stayed broken for
    /// [`BROKEN_GRACE`]: until then the last written condition stands.
    fn debounced(&mut self, signal: Signal, now: Instant) -> Signal {
        if signal.reason != "KnidNodeNetworkBroken" {
            self.broken_since = None;
            return signal;
        }
        let since = *self.broken_since.get_or_insert(now);
        match &self.written {
            Some((written, _)) if now.duration_since(since) < BROKEN_GRACE => written.clone(),
            _ => signal,
        }
    }

    /// Whether `writes` has anything to write: the tests [`Publisher::publish`] makes.
    fn due(&self, writes: &Writes) -> bool {
        self.vtep_due(writes.vtep_on_node, writes.at)
            || self.condition_due(&writes.signal)
            || self.taint_due(writes.at)
            || self.annotation_due(&writes.annotation, writes.at)
    }

    fn publish(&mut self, writes: &Writes) -> Result<(), ApiError> {
        let (annotation, now) = (&writes.annotation, writes.at);
        if self.vtep_due(writes.vtep_on_node, now) {
            self.write_vtep(now)?;
        }
        if self.condition_due(&writes.signal) {
            self.write_condition(&writes.signal)?;
        }
        if self.taint_due(now) {
            let want = self.taint_wanted();
            self.write_taint(want)?;
            self.taint_seen = Some((want, now));
        }
        if self.annotation_due(annotation, now) {
            let patch = json!({"metadata": {"annotations": {NETWORKS_ANNOTATION: annotation}}});
            self.client
                .patch_node(&self.config.node_name, false, STRATEGIC_MERGE_PATCH, &patch)?;
            self.annotation = Some((annotation.clone(), now));
            self.view
                .update(|info, _| info.published.annotation_ms = now_ms());
        }
        Ok(())
    }

    /// This node's VXLAN endpoint is to be written: at the first round, and again when the
    /// watched Node does not carry it [`VTEP_RECHECK`] after the last write (someone removed
    /// or changed it).
    fn vtep_due(&self, on_node: bool, now: Instant) -> bool {
        match &self.vtep {
            None => false,
            Some((_, None)) => true,
            Some((_, Some(at))) => !on_node && now.duration_since(*at) >= VTEP_RECHECK,
        }
    }

    fn condition_due(&self, signal: &Signal) -> bool {
        self.written.as_ref().map(|(s, _)| s) != Some(signal)
    }

    fn taint_wanted(&self) -> bool {
        self.config.full_taint.is_some() && self.full
    }

    /// The taint is to be written (or read back): when knid's wish changed, and every
    /// [`TAINT_RECHECK`].
    fn taint_due(&self, now: Instant) -> bool {
        let want = self.taint_wanted();
        !self
            .taint_seen
            .is_some_and(|(seen, at)| seen == want && now.duration_since(at) < TAINT_RECHECK)
    }

    fn annotation_due(&self, annotation: &str, now: Instant) -> bool {
        match &self.annotation {
            None => true,
            Some((written, at)) => {
                written != annotation && now.duration_since(*at) >= self.config.annotation_interval
            }
        }
    }

    /// Writes this node's VXLAN endpoint on its Node.
    fn write_vtep(&mut self, now: Instant) -> Result<(), ApiError> {
        let Some((value, written)) = &self.vtep else {
            return Ok(());
        };
        if written.is_some() {
            log::warn!(
                "cluster: Node {} lost its {} annotation; writing it again",
                self.config.node_name,
                vtep::ANNOTATION
            );
        }
        let patch = json!({"metadata": {"annotations": {vtep::ANNOTATION: value}}});
        self.client
            .patch_node(&self.config.node_name, false, STRATEGIC_MERGE_PATCH, &patch)?;
        if let Some((_, written)) = &mut self.vtep {
            *written = Some(now);
        }
        self.view
            .update(|info, _| info.published.vtep_ms = now_ms());
        Ok(())
    }

    /// Merges knid's condition into the Node's status: a strategic merge by `type`, so every
    /// other condition stays as its owner wrote it.
    fn write_condition(&mut self, signal: &Signal) -> Result<(), ApiError> {
        let node = &self.config.node_name;
        let now = rfc3339(now_ms());
        let transition = match &self.written {
            Some((written, since)) if written.unavailable == signal.unavailable => since.clone(),
            Some(_) => now.clone(),
            // The first write of this run: the Node may carry knid's condition from before.
            None => self
                .client
                .get_node(node)?
                .status
                .conditions
                .into_iter()
                .find(|c| c.kind == NETWORK_UNAVAILABLE)
                .filter(|c| c.status == status_text(signal.unavailable))
                .map(|c| c.last_transition_time)
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| now.clone()),
        };
        let patch = json!({"status": {"conditions": [{
            "type": NETWORK_UNAVAILABLE,
            "status": status_text(signal.unavailable),
            "reason": signal.reason,
            "message": signal.message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": transition,
        }]}});
        self.client
            .patch_node(node, true, STRATEGIC_MERGE_PATCH, &patch)?;
        log::info!(
            "cluster: Node {node} condition {NETWORK_UNAVAILABLE}={} ({}): {}",
            status_text(signal.unavailable),
            signal.reason,
            signal.message
        );
        self.written = Some((signal.clone(), transition));
        self.view.update(|info, _| {
            let published = &mut info.published;
            published.network_unavailable = Some(signal.unavailable);
            published.condition_reason = signal.reason.clone();
            published.condition_message = signal.message.clone();
            published.condition_ms = now_ms();
        });
        Ok(())
    }

    /// Puts knid's taint on the Node or takes it off, leaving every other taint: a JSON patch
    /// that first tests the Node's resourceVersion, redone from a fresh read when another writer
    /// got there first. Only `knid.io/pod-network-full:NoSchedule` is ever added or removed.
    fn write_taint(&mut self, want: bool) -> Result<(), ApiError> {
        let name = &self.config.node_name.clone();
        let mut attempt = 0;
        loop {
            let node = self.client.get_node(name)?;
            self.note_condition_drift(&node.status.conditions);
            let taints = &node.spec.taints;
            let ours: Vec<usize> = (0..taints.len())
                .filter(|&i| taints[i].key == FULL_TAINT && taints[i].effect == "NoSchedule")
                .collect();
            if want != ours.is_empty() {
                self.view.update(|info, _| {
                    if info.published.taint_ms == 0 || info.published.tainted != want {
                        info.published.taint_ms = now_ms();
                    }
                    info.published.tainted = want;
                });
                return Ok(());
            }
            let mut ops = vec![json!({
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": node.metadata.resource_version,
            })];
            let taint = json!({"key": FULL_TAINT, "effect": "NoSchedule"});
            if !want {
                ops.extend(
                    ours.iter()
                        .rev()
                        .map(|i| json!({"op": "remove", "path": format!("/spec/taints/{i}")})),
                );
            } else if taints.is_empty() {
                ops.push(json!({"op": "add", "path": "/spec/taints", "value": [taint]}));
            } else {
                ops.push(json!({"op": "add", "path": "/spec/taints/-", "value": taint}));
            }
            match self
                .client
                .patch_node(name, false, JSON_PATCH, &Value::Array(ops))
            {
                Ok(_) => {
                    log::info!(
                        "cluster: Node {name} taint {FULL_TAINT}:NoSchedule {}",
                        if want { "added" } else { "removed" }
                    );
                    self.view.update(|info, _| {
                        info.published.tainted = want;
                        info.published.taint_ms = now_ms();
                    });
                    return Ok(());
                }
                Err(e) if e.is_conflict() && attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                    log::debug!("cluster: Node {name} changed under the taint write: {e}; again");
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Publisher {
    /// Forgets the condition written when the Node's differs from it (another writer changed
    /// or removed it), so the next round writes knid's again.
    fn note_condition_drift(&mut self, conditions: &[super::node_object::NodeCondition]) {
        let Some((signal, _)) = &self.written else {
            return;
        };
        let same = conditions.iter().any(|c| {
            c.kind == NETWORK_UNAVAILABLE
                && c.status == status_text(signal.unavailable)
                && c.reason == signal.reason
        });
        if !same {
            log::warn!(
                "cluster: Node {}'s {NETWORK_UNAVAILABLE} condition is not the one knid wrote \
                 ({}): writing it again",
                self.config.node_name,
                signal.reason
            );
            self.written = None;
        }
    }
}

fn status_text(unavailable: bool) -> &'static str {
    if unavailable {
        "True"
    } else {
        "False"
    }
}

/// The networks pods get their addresses from: the one marked `pod_cidr_from_node` (named
/// `pod_cidr_network`), else every network.
fn pod_networks<'a>(networks: &'a [NetworkInfo], pod_cidr_network: &str) -> Vec<&'a NetworkInfo> {
    let marked: Vec<&NetworkInfo> = networks
        .iter()
        .filter(|n| !pod_cidr_network.is_empty() && n.name == pod_cidr_network)
        .collect();
    if marked.is_empty() {
        networks.iter().collect()
    } else {
        marked
    }
}

/// The condition the node's state makes.
pub fn signal(
    pod_cidr: &PodCidr,
    routes: &[crate::model::NodeRoute],
    pod_networks: &[&NetworkInfo],
) -> Signal {
    let unavailable = |reason: &str, message: String| Signal {
        unavailable: true,
        reason: reason.to_owned(),
        message,
    };
    match pod_cidr {
        PodCidr::Changed(why) => return unavailable("KnidPodCIDRChanged", why.clone()),
        PodCidr::NotAllocated(why) => return unavailable("KnidPodCIDRNotAllocated", why.clone()),
        PodCidr::Invalid(why) => return unavailable("KnidPodCIDRInvalid", why.clone()),
        _ => {}
    }
    let broken: Vec<String> = pod_networks
        .iter()
        .filter(|n| !n.ready)
        .map(|n| format!("network {}: {}", n.name, n.message))
        .collect();
    if !broken.is_empty() {
        return unavailable("KnidNodeNetworkBroken", listed(broken, "network(s)"));
    }
    let failed: Vec<String> = routes
        .iter()
        .filter(|r| r.state == RouteState::Failed)
        .map(|r| format!("node {} {}: {}", r.node, r.dst, r.message))
        .collect();
    if !failed.is_empty() {
        return unavailable("KnidRoutesFailed", listed(failed, "route(s)"));
    }
    let names: Vec<&str> = pod_networks.iter().map(|n| n.name.as_str()).collect();
    let installed = routes
        .iter()
        .filter(|r| r.state == RouteState::Installed)
        .count();
    Signal {
        unavailable: false,
        reason: "KnidNetworkReady".into(),
        message: format!(
            "knid's pod network {} is set up; {installed} route(s) to other nodes' pods",
            names.join(", ")
        ),
    }
}

/// Most problems a condition's message names one by one; the rest are counted. A node whose
/// thousand routes fail must not write a 100 KiB message on its Node, which every reader of Nodes
/// then fetches (the stand-in API server refused it, as a real one may): `knictl node` lists them
/// all.
const NAMED_PROBLEMS: usize = 3;

/// `problems` joined, the first [`NAMED_PROBLEMS`] of them, and how many more `what` there are.
fn listed(problems: Vec<String>, what: &str) -> String {
    let more = problems.len().saturating_sub(NAMED_PROBLEMS);
    let mut text = problems
        .into_iter()
        .take(NAMED_PROBLEMS)
        .collect::<Vec<_>>()
        .join("; ");
    if more > 0 {
        text.push_str(&format!(
            "; and {more} more {what} (knictl node lists them)"
        ));
    }
    text
}

/// The fewest free addresses of any family, or free bridge ports, over `networks`; `None` when
/// none of them has a pool (a cni network's plugins own its addresses).
pub fn fewest_free(networks: &[&NetworkInfo]) -> Option<u64> {
    networks
        .iter()
        .flat_map(|n| {
            n.capacity
                .iter()
                .filter(|c| c.total > 0)
                .map(|c| c.free)
                .chain(n.ports.iter().map(|p| p.free))
        })
        .min()
}

/// The `knid.io/node-networks` annotation: `{"version":1,"networks":[..]}`, each network's
/// name, kind, subnets, ready, schedulable, free addresses per family and free bridge ports.
pub fn annotation(networks: &[NetworkInfo]) -> String {
    let networks: Vec<Value> = networks
        .iter()
        .map(|n| {
            let free: serde_json::Map<String, Value> = n
                .capacity
                .iter()
                .map(|c| (c.family.as_str().to_owned(), json!(c.free)))
                .collect();
            let mut entry = json!({
                "name": n.name,
                "kind": n.kind,
                "subnets": n.subnets.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "ready": n.ready,
                "schedulable": n.schedulable,
                "free": free,
            });
            if let Some(ports) = &n.ports {
                entry["freeBridgePorts"] = json!(ports.free);
            }
            entry
        })
        .collect();
    json!({"version": ANNOTATION_VERSION, "networks": networks}).to_string()
}

/// `ms` since the Unix epoch as Kubernetes writes times: RFC 3339, UTC, whole seconds.
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar), by 400-year eras.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests;
