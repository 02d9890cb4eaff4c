//! doctor's checks of what knid reports: readiness conditions, address pools, records knid
//! cannot use, objects the orphan sweep would collect, extensions, and whether knictl and knid
//! are the same version.

use std::time::Duration;

use knid_transport::{pb, RuntimeClient};

use super::Finding;
use crate::exit;
use crate::output::percent;

/// A pool this full (in percent of its assignable addresses) is a warning. A full one is too:
/// it stops new pods, never running ones, so nothing is broken now.
pub const POOL_WARN_PERCENT: u64 = 90;

/// What to do about a full pool. A network's subnets cannot change while it holds addresses
/// (knid refuses such a reload), hence a new network rather than a wider subnet.
fn pool_fixes(network: &str) -> Vec<String> {
    vec![
        "look for leaked reservations: `knictl gc --dry-run`, then `knictl gc`".to_owned(),
        format!(
            "make room: add a network with a wider subnet to /etc/knid/knid.toml, reload knid \
             (SIGHUP) and attach new pods to it; {network}'s own \
             subnet can be widened only once it holds no address"
        ),
    ]
}

/// knictl and knid of different versions may disagree on fields.
pub fn version(status: &pb::StatusResponse, out: &mut Vec<Finding>) {
    const CHECK: &str = "version";
    let mine = env!("CARGO_PKG_VERSION");
    out.push(if status.version == mine {
        Finding::ok(CHECK, format!("knid and knictl {mine}"))
    } else {
        Finding::warn(
            CHECK,
            format!("knid {} but knictl {mine}", status.version),
            vec!["install the knictl of knid's release".to_owned()],
        )
    });
}

/// Every Status condition, with what to do when it does not hold.
pub fn conditions(status: &pb::StatusResponse, out: &mut Vec<Finding>) {
    const CHECK: &str = "condition";
    for c in &status.conditions {
        if c.status {
            out.push(Finding::ok(CHECK, c.type_.clone()));
            continue;
        }
        let message = if c.message.is_empty() {
            format!("{}: {}", c.type_, c.reason)
        } else {
            format!("{}: {}: {}", c.type_, c.reason, c.message)
        };
        // A full pool stops new pods only, and an API server away changes nothing on the
        // node: something to act on, not something broken.
        let schedulable =
            c.type_.starts_with("NetworkSchedulable/") || c.type_ == "KubernetesAPIReachable";
        out.push(if schedulable {
            Finding::warn(CHECK, message, condition_fixes(c))
        } else {
            Finding::fail(CHECK, message, condition_fixes(c))
        });
    }
    if !status.ready && status.conditions.iter().all(|c| c.status) {
        out.push(Finding::fail(
            "ready",
            "knid is not accepting requests (shutting down?)",
            vec![
                "see knid's log (e.g. `journalctl -u knid`); restart it if it does not exit"
                    .to_owned(),
            ],
        ));
    }
}

fn condition_fixes(c: &pb::Condition) -> Vec<String> {
    let kind = c.type_.split('/').next().unwrap_or_default();
    match (kind, c.reason.as_str()) {
        ("NetworkReady", "Starting") => vec!["wait for knid to finish starting".to_owned()],
        ("NetworkReady", _) => vec!["knictl setup-node-network".to_owned()],
        ("NetworkSchedulable", _) if c.message.contains("ports a Linux bridge can take") => {
            vec![format!(
                "a Linux bridge takes 1023 ports: add another bridge network (its own bridge) \
                 to /etc/knid/knid.toml, reload knid (SIGHUP) and attach new pods to it; {} \
                 takes pods again as its pods leave",
                c.type_.split_once('/').map_or("the network", |(_, n)| n)
            )]
        }
        ("NetworkSchedulable", _) => {
            pool_fixes(c.type_.split_once('/').map_or("the network", |(_, n)| n))
        }
        ("PluginsAvailable", _) => {
            vec!["see the network's plugins (`knictl networks`) and knid's log".to_owned()]
        }
        ("ExtensionsReady", "NotRegistered") => vec![
            "register it (`knictl extension register ...`), or remove it from \
             required_extensions in /etc/knid/knid.toml and reload knid"
                .to_owned(),
        ],
        ("ExtensionsReady", _) => vec![
            "`knictl extensions` shows its last error: bring the extension's service back"
                .to_owned(),
        ],
        ("PodInterfacesReady", _) => vec![
            "`knictl check <sandbox>` names what differs; `knictl inspect <sandbox>` shows the \
             kernel's view"
                .to_owned(),
            "give the pod its network back: delete the pod (its runtime re-creates it), or \
             detach and attach it again"
                .to_owned(),
        ],
        ("PodCIDR", "Changed") => vec![
            "the Node's pod CIDR changed under running pods: drain the node (its pods leave \
             the old CIDR), then restart knid to take the new one"
                .to_owned(),
        ],
        ("PodCIDR", _) => vec![
            "start kube-controller-manager with --allocate-node-cidrs and --cluster-cidr, or set \
             the Node's spec.podCIDRs; `kubectl get node <name> -o jsonpath='{.spec.podCIDRs}'`"
                .to_owned(),
        ],
        ("KubernetesAPIReachable", _) => vec![
            "check the API server and knid's credentials (service account token, ClusterRole \
             knid: nodes get/list/watch); running pods and routes are unaffected"
                .to_owned(),
        ],
        ("NodeRoutesReady", _) => vec![
            "routes to other nodes (host-gw) need the nodes on one L2 and no other route to \
             their pod CIDRs: see `knictl status` for each route"
                .to_owned(),
        ],
        ("StoreReady", _) => vec![
            "free space on, or make writable again, the filesystem of knid's state dir; knid \
             then exits for its supervisor to restart it"
                .to_owned(),
        ],
        _ => vec!["see knid's log (e.g. `journalctl -u knid`)".to_owned()],
    }
}

/// Each network's pool per family against [`POOL_WARN_PERCENT`], and exhausted.
pub fn pools(networks: &pb::NetworksResponse, out: &mut Vec<Finding>) {
    const CHECK: &str = "pool";
    for n in &networks.networks {
        let mut worst = super::Level::Ok;
        let mut exhausted = false;
        let mut parts = Vec::new();
        for c in n.capacity.iter().filter(|c| c.total > 0) {
            parts.push(format!(
                "{} {}/{} used ({}%)",
                c.family,
                c.used,
                c.total,
                percent(c.used, c.total)
            ));
            // In integers: used/total >= p/100.
            let at_least = |p: u64| u128::from(c.used) * 100 >= u128::from(c.total) * u128::from(p);
            let level = if c.free == 0 {
                exhausted = true;
                super::Level::Warn
            } else if at_least(POOL_WARN_PERCENT) {
                super::Level::Warn
            } else {
                super::Level::Ok
            };
            worst = worst.max(level);
        }
        if parts.is_empty() {
            continue;
        }
        let message = format!("network {}: {}", n.name, parts.join(", "));
        out.push(match (worst, exhausted) {
            (super::Level::Ok, _) => Finding::ok(CHECK, message),
            (_, true) => Finding::warn(
                CHECK,
                format!(
                    "{message}: exhausted, no more pods can be attached to it (its pods run on)"
                ),
                pool_fixes(&n.name),
            ),
            (_, false) => Finding::warn(
                CHECK,
                format!("{message}: at least {POOL_WARN_PERCENT}% used"),
                pool_fixes(&n.name),
            ),
        });
    }
}

/// What the orphan sweep would collect, from a dry run. `sweep_only` and not a list of every
/// known sandbox as valid: a sandbox attached between the List and the GC would otherwise be
/// reported as not valid, a false orphan.
pub fn orphans(client: &RuntimeClient, timeout: Duration, out: &mut Vec<Finding>) {
    const CHECK: &str = "orphans";
    let req = pb::GarbageCollectRequest {
        dry_run: true,
        sweep_only: true,
        ..Default::default()
    };
    let resp = match client.garbage_collect(&req, timeout) {
        Ok(resp) => resp,
        Err(e) => {
            out.push(Finding::warn(
                CHECK,
                format!("the GC dry run failed: {}", exit::message(&e)),
                vec!["see knid's log".to_owned()],
            ));
            return;
        }
    };
    // Corrupt records are the `records` check's: the reconciler leaves them.
    let leftovers: Vec<&pb::GcFinding> = resp
        .removed
        .iter()
        .filter(|f| f.reason != CORRUPT)
        .collect();
    if leftovers.is_empty() {
        out.push(Finding::ok(CHECK, "nothing for the sweep to collect"));
    } else {
        let what: Vec<String> = leftovers
            .iter()
            .map(|f| format!("{} {} ({})", f.what, f.detail, f.reason))
            .collect();
        out.push(Finding::fail(
            CHECK,
            format!(
                "{} leftover object(s) without a valid owner: {}",
                leftovers.len(),
                what.join(", ")
            ),
            vec![
                "knictl gc (the reconciler also collects them every gc_interval; \
                 `knictl gc --dry-run` lists them)"
                    .to_owned(),
            ],
        ));
    }
    if !resp.left.is_empty() {
        let names: Vec<&str> = resp.left.iter().map(|f| f.detail.as_str()).collect();
        out.push(Finding::warn(
            CHECK,
            format!(
                "{} host link(s) named like knid's do not carry this knid's mark, so GC leaves \
                 them alone: {}",
                names.len(),
                names.join(", ")
            ),
            vec![
                "if another knid ran here with another --state-dir (one knid per network \
                 namespace at a time), they are its own: nothing to do"
                    .to_owned(),
                "otherwise see whose they are (`ip -d link show NAME`: its alias) and delete \
                 them by hand (`ip link del NAME`) once they are no one's"
                    .to_owned(),
            ],
        ));
    }
    for error in &resp.errors {
        out.push(Finding::warn(
            CHECK,
            format!("the GC dry run could not judge something: {error}"),
            vec!["see knid's log".to_owned()],
        ));
    }
}

/// The GC reason, and List's state, of a record knid cannot use.
const CORRUPT: &str = "corrupt";

/// Sandboxes with a record knid cannot use, from List: each named with its error, and the GC
/// that removes it (the reconciler leaves such records alone, so only a GC someone runs does).
pub fn records(list: Result<&pb::ListResponse, &String>, out: &mut Vec<Finding>) {
    const CHECK: &str = "records";
    let resp = match list {
        Ok(resp) => resp,
        Err(e) => {
            out.push(Finding::fail(
                CHECK,
                format!("List failed: {e}"),
                vec!["see knid's log".to_owned()],
            ));
            return;
        }
    };
    let corrupt: Vec<&pb::SandboxSummary> = resp
        .sandboxes
        .iter()
        .filter(|s| !s.error.is_empty())
        .collect();
    if corrupt.is_empty() {
        out.push(Finding::ok(
            CHECK,
            format!(
                "{} sandbox(es), every record readable",
                resp.sandboxes.len()
            ),
        ));
        return;
    }
    for s in corrupt {
        out.push(Finding::fail(
            CHECK,
            format!("sandbox {}: {}", s.id, s.error),
            vec![
                format!(
                    "`knictl gc --dry-run` lists it (reason {CORRUPT}), then `knictl gc` removes \
                     it with the addresses it holds (or `knictl detach {}`)",
                    s.id
                ),
                "if its pod still runs, delete and re-create the pod afterwards: its network \
                 is no longer recorded"
                    .to_owned(),
            ],
        ));
    }
}

/// Each registered extension's last call: a failing required one fails attaches.
pub fn extensions(client: &RuntimeClient, timeout: Duration, out: &mut Vec<Finding>) {
    const CHECK: &str = "extension";
    let resp = match client.list_extensions(timeout) {
        Ok(resp) => resp,
        Err(e) => {
            out.push(Finding::warn(
                CHECK,
                format!("ListExtensions failed: {}", exit::message(&e)),
                Vec::new(),
            ));
            return;
        }
    };
    if resp.extensions.is_empty() {
        out.push(Finding::ok(CHECK, "no extensions registered"));
    }
    for info in &resp.extensions {
        let ext = info.extension.get_or_default();
        let fixes = vec![
            format!("bring its service back at {}", ext.socket_path),
            format!(
                "or, if it is gone for good: `knictl extension unregister {}`",
                ext.name
            ),
        ];
        out.push(match (info.last_call_at, info.last_call_ok, ext.required) {
            (0, ..) => Finding::ok(CHECK, format!("{}: not called yet", ext.name)),
            (_, true, _) => Finding::ok(CHECK, format!("{}: last call ok", ext.name)),
            (_, false, true) => Finding::fail(
                CHECK,
                format!(
                    "{} (required): last call failed, so attaches fail: {}",
                    ext.name, info.last_error
                ),
                fixes,
            ),
            (_, false, false) => Finding::warn(
                CHECK,
                format!(
                    "{} (optional): last call failed: {}",
                    ext.name, info.last_error
                ),
                fixes,
            ),
        });
    }
}

#[cfg(test)]
mod tests;
