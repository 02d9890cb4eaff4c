//! The stand-in's etcd: the Nodes, the global resourceVersion counter and the event log the
//! watches replay from. Every object is rendered to JSON once, when it changes, so a thousand
//! watchers or a thousand-node list only copy bytes.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use super::objects::{self, NodeMeta, NodeSpec};

/// The resourceVersion of the empty cluster: not 0, which a watch or list reads as "any".
const FIRST_RESOURCE_VERSION: u64 = 1000;

/// What a watch event says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// The `type` of the watch event on the wire.
    pub(super) fn wire(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as the watches replay it.
pub(super) struct Event {
    pub kind: EventType,
    pub name: String,
    pub object: Arc<str>,
}

/// A Node as stored: the caller's spec, what the server assigned, the object as patched since,
/// and its rendered JSON.
struct StoredNode {
    spec: NodeSpec,
    uid: String,
    created: String,
    object: Value,
    json: Arc<str>,
}

/// The fields clients patch, which a test's [`Cluster::update`] of the spec keeps.
const PATCHED: [(&str, &str); 3] = [
    ("status", "conditions"),
    ("spec", "taints"),
    ("metadata", "annotations"),
];

/// Why a watch cannot start from the resourceVersion asked for.
pub(super) struct TooOld {
    pub requested: u64,
    pub oldest: u64,
}

/// The cluster's state; the server keeps it behind one mutex with a condvar for the watches.
pub(super) struct Cluster {
    resource_version: u64,
    nodes: BTreeMap<String, StoredNode>,
    /// Every change since the start: `log[i]` has resourceVersion `FIRST_RESOURCE_VERSION + 1 + i`.
    log: Vec<Event>,
    /// A watch may start from this resourceVersion or later; older ones get 410 Expired.
    oldest_watchable: u64,
    uid_seed: [u8; 16],
    uids_given: u32,
}

impl Cluster {
    /// An empty cluster whose Node uids derive from `uid_seed`.
    pub(super) fn new(uid_seed: [u8; 16]) -> Cluster {
        Cluster {
            resource_version: FIRST_RESOURCE_VERSION,
            nodes: BTreeMap::new(),
            log: Vec::new(),
            oldest_watchable: FIRST_RESOURCE_VERSION,
            uid_seed,
            uids_given: 0,
        }
    }

    /// The current resourceVersion.
    pub(super) fn resource_version(&self) -> u64 {
        self.resource_version
    }

    /// The oldest resourceVersion a watch or a list continuation may start from.
    pub(super) fn oldest_watchable(&self) -> u64 {
        self.oldest_watchable
    }

    /// Stores a new Node.
    ///
    /// # Panics
    /// If a Node of that name exists (the test's own mistake).
    pub(super) fn add(&mut self, spec: NodeSpec) {
        assert!(
            !self.nodes.contains_key(&spec.name),
            "kube_api: add_node({:?}): the node exists; use update_node",
            spec.name
        );
        let uid = self.next_uid();
        let now = now_rfc3339();
        self.store(spec, uid, now.clone(), &now, EventType::Added);
    }

    /// Replaces a Node's spec, keeping its uid and creation time.
    ///
    /// # Panics
    /// If there is no Node of that name.
    pub(super) fn update(&mut self, spec: NodeSpec) {
        let Some(old) = self.nodes.remove(&spec.name) else {
            panic!(
                "kube_api: update_node({:?}): no such node; use add_node",
                spec.name
            );
        };
        let now = now_rfc3339();
        self.store(spec, old.uid, old.created, &now, EventType::Modified);
        let node = self.nodes.get_mut(&old.spec.name).expect("just stored");
        let mut kept = false;
        for (outer, inner) in PATCHED {
            if let Some(value) = old.object[outer].get(inner) {
                node.object[outer][inner] = value.clone();
                kept = true;
            }
        }
        if kept {
            node.json = node.object.to_string().into();
            if let Some(event) = self.log.last_mut() {
                event.object = Arc::clone(&node.json);
            }
        }
    }

    /// The stored Node called `name`, as an object.
    pub(super) fn object(&self, name: &str) -> Option<&Value> {
        self.nodes.get(name).map(|node| &node.object)
    }

    /// Replaces the object of Node `name` (which must exist) with `object`: a new
    /// resourceVersion, written into it, and a MODIFIED event.
    pub(super) fn replace_object(&mut self, name: &str, mut object: Value) {
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = Value::from(self.resource_version.to_string());
        let json: Arc<str> = object.to_string().into();
        let node = self
            .nodes
            .get_mut(name)
            .expect("replace_object of a stored node");
        node.object = object;
        node.json = Arc::clone(&json);
        self.log.push(Event {
            kind: EventType::Modified,
            name: name.to_string(),
            object: json,
        });
    }

    /// Removes a Node; its DELETED event carries the object as last seen with a new
    /// resourceVersion, as the real server's does.
    ///
    /// # Panics
    /// If there is no Node of that name.
    pub(super) fn delete(&mut self, name: &str) {
        let Some(old) = self.nodes.remove(name) else {
            panic!("kube_api: delete_node({name:?}): no such node");
        };
        self.resource_version += 1;
        let mut object = old.object;
        object["metadata"]["resourceVersion"] = Value::from(self.resource_version.to_string());
        self.log.push(Event {
            kind: EventType::Deleted,
            name: name.to_string(),
            object: object.to_string().into(),
        });
    }

    /// Forgets the history: a watch from any resourceVersion older than the current one now
    /// gets 410 Expired. The log itself stays for the watches already open, which, as on the
    /// real server, a compaction does not end.
    pub(super) fn expire_history(&mut self) {
        self.oldest_watchable = self.resource_version;
    }

    /// The rendered Node called `name`.
    pub(super) fn get(&self, name: &str) -> Option<Arc<str>> {
        self.nodes.get(name).map(|node| Arc::clone(&node.json))
    }

    /// The Nodes whose names sort at or after `start` (all with `None`), in name order.
    pub(super) fn nodes_from<'a>(
        &'a self,
        start: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a str, &'a Arc<str>)> + 'a {
        let lower = start.map_or(Bound::Unbounded, Bound::Included);
        self.nodes
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(name, node)| (name.as_str(), &node.json))
    }

    /// Whether a watch may replay the history after `resource_version`.
    pub(super) fn check_watchable(&self, resource_version: u64) -> Result<(), TooOld> {
        if resource_version < self.oldest_watchable {
            return Err(TooOld {
                requested: resource_version,
                oldest: self.oldest_watchable,
            });
        }
        Ok(())
    }

    /// The events with a resourceVersion above `after`, oldest first.
    pub(super) fn events_after(&self, after: u64) -> &[Event] {
        let skip = after.saturating_sub(FIRST_RESOURCE_VERSION);
        let skip = usize::try_from(skip)
            .unwrap_or(usize::MAX)
            .min(self.log.len());
        &self.log[skip..]
    }

    fn store(
        &mut self,
        spec: NodeSpec,
        uid: String,
        created: String,
        heartbeat: &str,
        kind: EventType,
    ) {
        self.resource_version += 1;
        let meta = NodeMeta {
            uid: &uid,
            created: &created,
            resource_version: self.resource_version,
            heartbeat,
        };
        let rendered = objects::node(&spec, &meta);
        let object: Value = serde_json::from_str(&rendered).expect("a rendered Node is JSON");
        let json: Arc<str> = rendered.into();
        self.log.push(Event {
            kind,
            name: spec.name.clone(),
            object: Arc::clone(&json),
        });
        self.nodes.insert(
            spec.name.clone(),
            StoredNode {
                spec,
                uid,
                created,
                object,
                json,
            },
        );
    }

    /// A version-4 UUID from the seed and a counter: unique per server, random across servers.
    fn next_uid(&mut self) -> String {
        self.uids_given += 1;
        let mut bytes = self.uid_seed;
        for (byte, count) in bytes[12..].iter_mut().zip(self.uids_given.to_be_bytes()) {
            *byte ^= count;
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )
    }
}

/// The time now as Kubernetes writes timestamps: RFC 3339, UTC, whole seconds.
fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
