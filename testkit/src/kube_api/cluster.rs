//! The stand-in's etcd: the objects of every kind, the global resourceVersion counter they all
//! share and the event log the watches replay from. Every object is rendered to JSON once, when
//! it changes, so a thousand watchers or a thousand-node list only copy bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::kinds::Resource;

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
    pub resource: Resource,
    /// The object's [`key`].
    pub key: String,
    pub object: Arc<str>,
}

impl Event {
    /// The object's namespace; `None` for a cluster-scoped one.
    pub(super) fn namespace(&self) -> Option<&str> {
        self.key.split_once('/').map(|(namespace, _)| namespace)
    }

    /// The object's name.
    pub(super) fn name(&self) -> &str {
        self.key.split_once('/').map_or(&self.key, |(_, name)| name)
    }
}

/// An object as stored: what the server assigned it, the object, and its rendered JSON.
struct Stored {
    uid: String,
    created: String,
    object: Value,
    json: Arc<str>,
}

/// What the server assigns an object being stored, for its renderer.
pub(super) struct Assigned<'a> {
    pub uid: &'a str,
    /// `metadata.creationTimestamp`: kept across updates.
    pub created: &'a str,
    pub resource_version: u64,
    /// The time of this change.
    pub now: &'a str,
}

/// Why a watch cannot start from the resourceVersion asked for.
pub(super) struct TooOld {
    pub requested: u64,
    pub oldest: u64,
}

/// An object's key, as etcd's under the resource's prefix: `name`, or `namespace/name` for a
/// namespaced resource. Lists and continue tokens go in the order of these keys.
pub(super) fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    }
}

/// The cluster's state; the server keeps it behind one mutex with a condvar for the watches.
pub(super) struct Cluster {
    resource_version: u64,
    objects: BTreeMap<(Resource, String), Stored>,
    /// Every change since the start: `log[i]` has resourceVersion `FIRST_RESOURCE_VERSION + 1 + i`.
    log: Vec<Event>,
    /// A watch may start from this resourceVersion or later; older ones get 410 Expired.
    oldest_watchable: u64,
    uid_seed: [u8; 16],
    uids_given: u32,
}

impl Cluster {
    /// An empty cluster whose object uids derive from `uid_seed`.
    pub(super) fn new(uid_seed: [u8; 16]) -> Cluster {
        Cluster {
            resource_version: FIRST_RESOURCE_VERSION,
            objects: BTreeMap::new(),
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

    /// Stores the object `render` makes under `key`: a new resourceVersion, and an ADDED event
    /// with a new uid, or a MODIFIED one keeping the uid and creation time. `render` gets what
    /// the server assigned and the object stored before, if any.
    pub(super) fn put(
        &mut self,
        resource: Resource,
        key: &str,
        render: impl FnOnce(&Assigned, Option<&Value>) -> Value,
    ) -> EventType {
        let map_key = (resource, key.to_string());
        let old = self.objects.remove(&map_key);
        let now = now_rfc3339();
        let (uid, created, kind) = match &old {
            Some(old) => (old.uid.clone(), old.created.clone(), EventType::Modified),
            None => (self.next_uid(), now.clone(), EventType::Added),
        };
        self.resource_version += 1;
        let assigned = Assigned {
            uid: &uid,
            created: &created,
            resource_version: self.resource_version,
            now: &now,
        };
        let object = render(&assigned, old.as_ref().map(|old| &old.object));
        let json: Arc<str> = object.to_string().into();
        self.log.push(Event {
            kind,
            resource,
            key: key.to_string(),
            object: Arc::clone(&json),
        });
        self.objects.insert(
            map_key,
            Stored {
                uid,
                created,
                object,
                json,
            },
        );
        kind
    }

    /// The stored object of `resource` under `key`.
    pub(super) fn object(&self, resource: Resource, key: &str) -> Option<&Value> {
        self.objects
            .get(&(resource, key.to_string()))
            .map(|stored| &stored.object)
    }

    /// Replaces a stored object with `object`: a new resourceVersion, written into it, and a
    /// MODIFIED event. Nothing happens when there is no such object.
    pub(super) fn replace_object(&mut self, resource: Resource, key: &str, mut object: Value) {
        let Some(stored) = self.objects.get_mut(&(resource, key.to_string())) else {
            return;
        };
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = Value::from(self.resource_version.to_string());
        let json: Arc<str> = object.to_string().into();
        stored.object = object;
        stored.json = Arc::clone(&json);
        self.log.push(Event {
            kind: EventType::Modified,
            resource,
            key: key.to_string(),
            object: json,
        });
    }

    /// Removes an object; its DELETED event carries the object as last seen with a new
    /// resourceVersion, as the real server's does. `false` when there was no such object.
    pub(super) fn delete(&mut self, resource: Resource, key: &str) -> bool {
        let Some(old) = self.objects.remove(&(resource, key.to_string())) else {
            return false;
        };
        self.resource_version += 1;
        let mut object = old.object;
        object["metadata"]["resourceVersion"] = Value::from(self.resource_version.to_string());
        self.log.push(Event {
            kind: EventType::Deleted,
            resource,
            key: key.to_string(),
            object: object.to_string().into(),
        });
        true
    }

    /// Forgets the history: a watch from any resourceVersion older than the current one now
    /// gets 410 Expired. The log itself stays for the watches already open, which, as on the
    /// real server, a compaction does not end.
    pub(super) fn expire_history(&mut self) {
        self.oldest_watchable = self.resource_version;
    }

    /// The rendered object of `resource` under `key`.
    pub(super) fn get(&self, resource: Resource, key: &str) -> Option<Arc<str>> {
        self.objects
            .get(&(resource, key.to_string()))
            .map(|stored| Arc::clone(&stored.json))
    }

    /// The objects of `resource` whose keys start with `prefix` (a namespace's `ns/`, or
    /// nothing), from the key `prefix + start` on (all with `None`), in key order: each with
    /// its key after `prefix`.
    pub(super) fn objects_from<'a>(
        &'a self,
        resource: Resource,
        prefix: &'a str,
        start: Option<&str>,
    ) -> impl Iterator<Item = (&'a str, &'a Arc<str>)> + 'a {
        let lower = (resource, format!("{prefix}{}", start.unwrap_or_default()));
        self.objects
            .range(lower..)
            .take_while(move |((of, key), _)| *of == resource && key.starts_with(prefix))
            .map(move |((_, key), stored)| (&key[prefix.len()..], &stored.json))
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
pub(super) fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
