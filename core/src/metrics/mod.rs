//! knid's metrics, in the Prometheus text exposition format: operations by result code and their
//! latency, IPAM capacity and use per network, the reaper's queue and batches, GC findings,
//! extension calls, the store's size and the process's memory. Counters and histograms are
//! updated where things happen; gauges that mirror state are read when the text is rendered.

use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus::core::Collector;
use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::model::{BridgePorts, Capacity, RouteState};

/// Latency buckets (seconds) of operations and extension calls: an attach takes about a
/// millisecond, a CNI chain or a slow extension seconds, a timeout up to two minutes.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    120.0,
];
/// Reaper batch-size buckets (links per group deletion; at most 512).
const BATCH_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

/// The `difference` labels of `knid_pod_interfaces_changed`, each exported from the start.
const DIFFERENCES: [&str; 10] = [
    "missing",
    "renamed",
    "down",
    "mac",
    "address",
    "redirect",
    "bandwidth",
    "hostport",
    "antispoof",
    "unreadable",
];

/// Every metric knid exports.
pub struct Metrics {
    registry: Registry,
    operations: IntCounterVec,
    operation_seconds: HistogramVec,
    ipam_capacity: GaugeVec,
    ipam_used: GaugeVec,
    schedulable: IntGaugeVec,
    bridge_ports: GaugeVec,
    sandboxes: IntGauge,
    host_ports: IntGauge,
    nat_elements: IntGauge,
    antispoof_drops: IntCounterVec,
    reaper_queue: IntGauge,
    reaper_batch: Histogram,
    reaper_reaped: IntCounter,
    gc_findings: IntCounterVec,
    gc_errors: IntCounter,
    changed_interfaces: IntGaugeVec,
    reconciler_rounds: IntCounter,
    extension_seconds: HistogramVec,
    extension_failures: IntCounterVec,
    store_size: IntGauge,
    resident: IntGauge,
    cluster_routes: IntGaugeVec,
    cluster_api: IntGaugeVec,
    policy_objects: IntGaugeVec,
    policy_denied: IntCounterVec,
    policy_repairs: IntCounter,
    /// Serialises renders: each one resets and refills the per-network gauges.
    render: Mutex<()>,
    /// An operation's counter and its histogram move together: observers hold it shared, the
    /// gather exclusively, so no scrape sees one moved without the other.
    operation_pair: RwLock<()>,
}

/// What a render reads of the state it mirrors.
pub struct Snapshot {
    /// Per network: its name and capacity per family.
    pub ipam: Vec<(String, Vec<Capacity>)>,
    /// Per bridge network whose bridge exists: its name and its bridge's ports.
    pub ports: Vec<(String, BridgePorts)>,
    /// Sandboxes recorded.
    pub sandboxes: usize,
    /// Host-port mappings of the sandboxes holding their ports.
    pub host_ports: usize,
    /// Host-port elements knid keeps in its nf_tables maps.
    pub nat_elements: usize,
    /// Frames the source guards dropped, per reason (the kernel's counters).
    pub antispoof_drops: Vec<(&'static str, u64)>,
    /// Attachments handed to the reaper and not yet reaped.
    pub reaper_queue: u64,
    /// Bytes the store takes on disk, when it could be read.
    pub store_bytes: Option<u64>,
    /// Cluster mode's state, when it is on.
    pub cluster: Option<crate::model::ClusterInfo>,
    /// NetworkPolicy's counts, when it is enforced.
    pub policy: Option<PolicyCounts>,
}

/// What the NetworkPolicy metrics mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyCounts {
    /// Objects known, by kind (`networkpolicies`, `namespaces`, `pods`).
    pub objects: Vec<(&'static str, usize)>,
    /// Packets of new connections dropped, by policy (`namespace/name`) and direction.
    pub denied: Vec<(String, &'static str, u64)>,
    /// Times the kernel's table was put back.
    pub repairs: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric at zero.
    pub fn new() -> Self {
        let registry = Registry::new();
        let reg = Registrar(&registry);
        let operations = reg.add(IntCounterVec::new(
            Opts::new(
                "knid_operations_total",
                "API operations served, by operation and result code.",
            ),
            &["op", "code"],
        ));
        let operation_seconds = reg.add(HistogramVec::new(
            HistogramOpts::new(
                "knid_operation_duration_seconds",
                "Time from an API request's arrival at its handler to its answer, by operation \
                 and result code.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["op", "code"],
        ));
        let ipam_capacity = reg.add(GaugeVec::new(
            Opts::new(
                "knid_ipam_capacity_addresses",
                "Assignable addresses per network and family (saturated at 2^64-1).",
            ),
            &["network", "family"],
        ));
        let ipam_used = reg.add(GaugeVec::new(
            Opts::new(
                "knid_ipam_used_addresses",
                "Reserved addresses per network and family.",
            ),
            &["network", "family"],
        ));
        let schedulable = reg.add(IntGaugeVec::new(
            Opts::new(
                "knid_network_schedulable",
                "1 when the network's pool has a free address of every family and its bridge a \
                 free port (room for another pod), 0 when one is exhausted: new attaches fail, \
                 attached pods are unaffected.",
            ),
            &["network"],
        ));
        let bridge_ports = reg.add(GaugeVec::new(
            Opts::new(
                "knid_bridge_ports",
                "Ports of a bridge network's bridge, by state: used (knid's pods' and any other \
                 link's) and total (what a Linux bridge can take, 1023).",
            ),
            &["network", "bridge", "state"],
        ));
        let sandboxes = reg.add(IntGauge::new("knid_sandboxes", "Sandboxes recorded."));
        let host_ports = reg.add(IntGauge::new(
            "knid_host_ports",
            "Host-port mappings held by sandboxes (a port, protocol and host address each).",
        ));
        let nat_elements = reg.add(IntGauge::new(
            "knid_nat_map_elements",
            "Host-port elements in knid's nf_tables maps (one per mapping and pod address \
             family).",
        ));
        let antispoof_drops = reg.add(IntCounterVec::new(
            Opts::new(
                "knid_antispoof_dropped_total",
                "Frames the pods' source guards dropped, by reason (mac, ip, arp, nd, router, \
                 dhcp): sent from a MAC or an address the pod does not hold, an ARP or \
                 neighbour advertisement claiming one, a router advertisement or redirect, a \
                 DHCP server message.",
            ),
            &["reason"],
        ));
        for reason in knid_netops::nft::DropReason::ALL {
            antispoof_drops.with_label_values(&[reason.as_str()]);
        }
        let reaper_queue = reg.add(IntGauge::new(
            "knid_reaper_queue_length",
            "Detached interfaces whose host links wait for the reaper.",
        ));
        let reaper_batch = reg.add(Histogram::with_opts(
            HistogramOpts::new(
                "knid_reaper_batch_size",
                "Links deleted per reaper group deletion.",
            )
            .buckets(BATCH_BUCKETS.to_vec()),
        ));
        let reaper_reaped = reg.add(IntCounter::new(
            "knid_reaper_reaped_total",
            "Interfaces whose host links the reaper deleted and whose records it forgot.",
        ));
        let gc_findings = reg.add(IntCounterVec::new(
            Opts::new(
                "knid_gc_findings_total",
                "Objects garbage collection removed (mode real) or would remove (mode dry_run), \
                 by kind of object.",
            ),
            &["what", "mode"],
        ));
        let gc_errors = reg.add(IntCounter::new(
            "knid_gc_errors_total",
            "Objects garbage collection failed to remove.",
        ));
        let changed_interfaces = reg.add(IntGaugeVec::new(
            Opts::new(
                "knid_pod_interfaces_changed",
                "Attached interfaces that the reconciler's last round found different from their \
                 records, by difference (missing, renamed, down, mac, address, redirect, bandwidth, hostport, \
                 antispoof, unreadable).",
            ),
            &["difference"],
        ));
        let reconciler_rounds = reg.add(IntCounter::new(
            "knid_reconciler_rounds_total",
            "Rounds the reconciler completed (every gc_interval): its collection, then its look \
             at every attached interface.",
        ));
        let extension_seconds = reg.add(HistogramVec::new(
            HistogramOpts::new(
                "knid_extension_call_duration_seconds",
                "Extension calls' latency, by extension and phase (post-attach, pre-detach, \
                 health).",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["extension", "phase"],
        ));
        let extension_failures = reg.add(IntCounterVec::new(
            Opts::new(
                "knid_extension_call_failures_total",
                "Extension calls that failed, timed out or answered not ok.",
            ),
            &["extension", "phase"],
        ));
        let store_size = reg.add(IntGauge::new(
            "knid_store_size_bytes",
            "Bytes the store takes on disk.",
        ));
        let resident = reg.add(IntGauge::new(
            "process_resident_memory_bytes",
            "Resident memory of the knid process.",
        ));
        let start_time = reg.add(Gauge::new(
            "process_start_time_seconds",
            "When knid started, in seconds since the Unix epoch.",
        ));
        start_time.set(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        );
        let build = reg.add(IntGaugeVec::new(
            Opts::new("knid_build_info", "knid's version; always 1."),
            &["version"],
        ));
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        let cluster_routes = reg.add(IntGaugeVec::new(
            Opts::new(
                "knid_cluster_node_routes",
                "Cluster mode: the other nodes' pod CIDRs by route state (installed, \
                 unreachable: no InternalIP of the family, or under host-gw none on a directly \
                 connected subnet; awaiting-vtep: reached over VXLAN but its Node has no \
                 knid.io/vxlan annotation yet; failed).",
            ),
            &["state"],
        ));
        let cluster_api = reg.add(IntGaugeVec::new(
            Opts::new(
                "knid_cluster_api_reachable",
                "Cluster mode: 1 while the Kubernetes API server answers the Node watch, 0 \
                 when it does not (knid keeps the last known state).",
            ),
            &["server"],
        ));
        let policy_objects = reg.add(IntGaugeVec::new(
            Opts::new(
                "knid_policy_objects",
                "Objects NetworkPolicy keeps, by kind (networkpolicies, namespaces, pods; the \
                 last two only while a NetworkPolicy exists).",
            ),
            &["kind"],
        ));
        let policy_denied = reg.add(IntCounterVec::new(
            Opts::new(
                "knid_policy_denied_total",
                "Packets of new connections NetworkPolicy dropped, by isolating policy \
                 (namespace/name) and direction (ingress, egress); a pod's drops count for \
                 every policy isolating it that way, and a retried SYN counts again.",
            ),
            &["policy", "direction"],
        ));
        let policy_repairs = reg.add(IntCounter::new(
            "knid_policy_table_repairs_total",
            "Times knid found its policy table different in the kernel (deleted or changed by \
             hand) and put it back.",
        ));
        for kind in DIFFERENCES {
            changed_interfaces.with_label_values(&[kind]).set(0);
        }
        Self {
            registry,
            operations,
            operation_seconds,
            ipam_capacity,
            ipam_used,
            schedulable,
            bridge_ports,
            sandboxes,
            host_ports,
            nat_elements,
            antispoof_drops,
            reaper_queue,
            reaper_batch,
            reaper_reaped,
            gc_findings,
            gc_errors,
            changed_interfaces,
            reconciler_rounds,
            extension_seconds,
            extension_failures,
            store_size,
            resident,
            cluster_routes,
            cluster_api,
            policy_objects,
            policy_denied,
            policy_repairs,
            render: Mutex::new(()),
            operation_pair: RwLock::new(()),
        }
    }

    /// Counts one API operation and its latency. `code` is its result (`OK`, `NotFound`, ...).
    pub fn observe_operation(&self, op: &str, code: &str, elapsed: Duration) {
        let _pair = self
            .operation_pair
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        self.operations.with_label_values(&[op, code]).inc();
        self.operation_seconds
            .with_label_values(&[op, code])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one extension call.
    pub(crate) fn observe_extension(&self, name: &str, phase: &str, elapsed: Duration, ok: bool) {
        let labels = [name, phase];
        self.extension_seconds
            .with_label_values(&labels)
            .observe(elapsed.as_secs_f64());
        if !ok {
            self.extension_failures.with_label_values(&labels).inc();
        }
    }

    /// Counts one reaper group deletion of `links` links, after which `reaped` records went.
    pub(crate) fn observe_reaper_batch(&self, links: usize, reaped: usize) {
        self.reaper_batch.observe(links as f64);
        self.reaper_reaped.inc_by(reaped as u64);
    }

    /// Counts one garbage collection's findings (`what` of each) and errors.
    pub(crate) fn observe_gc<'a>(
        &self,
        dry_run: bool,
        findings: impl Iterator<Item = &'a str>,
        errors: usize,
    ) {
        let mode = if dry_run { "dry_run" } else { "real" };
        for what in findings {
            self.gc_findings.with_label_values(&[what, mode]).inc();
        }
        if !dry_run {
            self.gc_errors.inc_by(errors as u64);
        }
    }

    /// Counts one completed reconciler round.
    pub(crate) fn observe_reconciler_round(&self) {
        self.reconciler_rounds.inc();
    }

    /// Sets the changed-interface gauge from one reconciler round's differences (their
    /// [`crate::drivers::verify::Difference::kind`]); a kind no longer seen drops to 0.
    pub(crate) fn set_changed_interfaces<'a>(&self, kinds: impl Iterator<Item = &'a str>) {
        for kind in DIFFERENCES {
            self.changed_interfaces.with_label_values(&[kind]).set(0);
        }
        for kind in kinds {
            self.changed_interfaces.with_label_values(&[kind]).inc();
        }
    }

    /// Every metric in the text exposition format (version 0.0.4), the state-mirroring gauges
    /// set from `snapshot` first.
    pub fn render(&self, snapshot: &Snapshot) -> String {
        let _one_at_a_time = self.render.lock().unwrap_or_else(PoisonError::into_inner);
        // Reset first: a network removed by a reload must not linger with its last values.
        self.ipam_capacity.reset();
        self.ipam_used.reset();
        self.schedulable.reset();
        self.bridge_ports.reset();
        for (network, ports) in &snapshot.ports {
            for (state, value) in [("used", ports.used), ("total", ports.total)] {
                self.bridge_ports
                    .with_label_values(&[network.as_str(), ports.bridge.as_str(), state])
                    .set(value as f64);
            }
        }
        for (network, capacity) in &snapshot.ipam {
            let ports_free = snapshot
                .ports
                .iter()
                .all(|(name, ports)| name != network || ports.free > 0);
            let room = ports_free && capacity.iter().all(|c| c.total == 0 || c.free > 0);
            self.schedulable
                .with_label_values(&[network.as_str()])
                .set(i64::from(room));
            for c in capacity {
                let labels = [network.as_str(), c.family.as_str()];
                self.ipam_capacity
                    .with_label_values(&labels)
                    .set(c.total as f64);
                self.ipam_used.with_label_values(&labels).set(c.used as f64);
            }
        }
        self.cluster_routes.reset();
        self.cluster_api.reset();
        if let Some(cluster) = &snapshot.cluster {
            for state in [
                RouteState::Installed,
                RouteState::Unreachable,
                RouteState::Failed,
                RouteState::AwaitingVtep,
            ] {
                let n = cluster.routes.iter().filter(|r| r.state == state).count();
                self.cluster_routes
                    .with_label_values(&[state.as_str()])
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            self.cluster_api
                .with_label_values(&[cluster.api_server.as_str()])
                .set(i64::from(cluster.api_reachable));
        }
        self.policy_objects.reset();
        if let Some(policy) = &snapshot.policy {
            for (kind, n) in &policy.objects {
                self.policy_objects
                    .with_label_values(&[*kind])
                    .set(i64::try_from(*n).unwrap_or(i64::MAX));
            }
            for (name, direction, total) in &policy.denied {
                let counter = self
                    .policy_denied
                    .with_label_values(&[name.as_str(), direction]);
                counter.inc_by(total.saturating_sub(counter.get()));
            }
            self.policy_repairs
                .inc_by(policy.repairs.saturating_sub(self.policy_repairs.get()));
        }
        self.sandboxes
            .set(i64::try_from(snapshot.sandboxes).unwrap_or(i64::MAX));
        self.host_ports
            .set(i64::try_from(snapshot.host_ports).unwrap_or(i64::MAX));
        self.nat_elements
            .set(i64::try_from(snapshot.nat_elements).unwrap_or(i64::MAX));
        for (reason, now) in &snapshot.antispoof_drops {
            // The kernel counts; this counter follows it (a table deleted behind knid's back
            // starts again from zero, and so does the counter).
            let counter = self.antispoof_drops.with_label_values(&[reason]);
            let have = counter.get();
            if *now < have {
                counter.reset();
            }
            counter.inc_by(now.saturating_sub(counter.get()));
        }
        self.reaper_queue
            .set(i64::try_from(snapshot.reaper_queue).unwrap_or(i64::MAX));
        if let Some(bytes) = snapshot.store_bytes {
            self.store_size
                .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        if let Some(bytes) = resident_bytes() {
            self.resident.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        let families = {
            let _pair = self
                .operation_pair
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            self.registry.gather()
        };
        let mut out = Vec::new();
        // Encoding into a Vec fails only for metric families that cannot be valid, which the
        // registry refuses at registration.
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            log::error!("metrics: encode: {e}");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Registers collectors; a failure is a programming error (a bad or repeated name among the
/// constants above), caught by the unit tests.
struct Registrar<'a>(&'a Registry);

impl Registrar<'_> {
    fn add<C: Collector + Clone + 'static>(&self, made: prometheus::Result<C>) -> C {
        let collector = made.expect("metric definitions are valid");
        self.0
            .register(Box::new(collector.clone()))
            .expect("metric names are unique");
        collector
    }
}

/// The process's resident set, from /proc/self/statm (pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok()??;
    Some(pages * u64::try_from(page).ok()?)
}

mod snapshot;

pub(crate) use snapshot::snapshot;

#[cfg(test)]
mod tests;
