//! The list-and-watch loop over one kind of object ([`Resource`]: Nodes, and for policy
//! NetworkPolicies, Namespaces and Pods): a full list (paginated), then a watch from the list's
//! resource version, resumed from the last version seen when the API server ends it or the
//! connection drops, and a new list when that version is too old (410 Gone). Errors back off
//! exponentially. Runs on its own thread, blocked in reads; what it learns goes to its consumer
//! as [`Learned`] messages (only the compact facts each kind keeps), and it ends when nobody
//! listens any more: at its next event or bookmark (the API server sends one about every
//! minute), since a thread blocked in a read cannot be woken otherwise.

use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use super::client::Client;
use super::error::ApiError;
use serde::de::DeserializeOwned;

use super::node_object::{Meta, Node, NodeFacts, Status};

/// First wait after a failure; doubled per failure in a row.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between tries.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A kind of object a reflector lists and watches.
pub trait Resource: DeserializeOwned {
    /// The collection's path (`/api/v1/nodes`).
    const PATH: &'static str;
    /// Its name in logs and errors (`nodes`).
    const WHAT: &'static str;
    /// What is kept of one object.
    type Facts: Send + 'static;
    /// The object's resource version.
    fn resource_version(&self) -> Option<&str>;
    /// What is kept of it (`None`: an object the consumer cannot use, such as one without a
    /// name).
    fn facts(self) -> Option<Self::Facts>;
}

impl Resource for Node {
    const PATH: &'static str = super::client::NODES;
    const WHAT: &'static str = "nodes";
    type Facts = NodeFacts;

    fn resource_version(&self) -> Option<&str> {
        Some(self.metadata.resource_version.as_str())
    }

    fn facts(self) -> Option<NodeFacts> {
        Some(Node::facts(&self))
    }
}

/// What the watch tells its consumer.
#[derive(Debug)]
pub enum Learned<F = NodeFacts> {
    /// A full list: every object that exists.
    Listed(Vec<F>),
    /// An object was added or changed.
    Upserted(F),
    /// An object was deleted (its last state).
    Deleted(F),
    /// The API answers (again, after `Unreachable`; and at each bookmark), with the resource
    /// version watched from.
    Reachable(String),
    /// The API cannot be read; knid keeps its last known state.
    Unreachable(String),
}

/// Takes every message waiting on `rx`, without blocking; whether the watch has ended (its
/// thread never ends while someone reads it, but by a panic).
pub fn take_all<F>(rx: &Receiver<Learned<F>>, mut take: impl FnMut(Learned<F>)) -> bool {
    loop {
        match rx.try_recv() {
            Ok(m) => take(m),
            Err(TryRecvError::Empty) => return false,
            Err(TryRecvError::Disconnected) => return true,
        }
    }
}

/// Lists and watches `R` until `tx`'s receiver is gone.
pub fn run<R: Resource>(client: &Client, tx: &Sender<Learned<R::Facts>>) {
    let mut backoff = BACKOFF_MIN;
    let failed = |tx: &Sender<Learned<R::Facts>>, e: ApiError, backoff: &mut Duration| {
        log::warn!(
            "kubernetes api {} ({}): {e}; retrying in {backoff:?}",
            client.server(),
            R::WHAT
        );
        let gone = tx.send(Learned::Unreachable(e.to_string())).is_err();
        std::thread::sleep(*backoff);
        *backoff = (*backoff * 2).min(BACKOFF_MAX);
        gone
    };
    'list: loop {
        let mut objects = Vec::new();
        let listed = client.list(R::PATH, R::WHAT, |object: R| {
            objects.extend(object.facts());
        });
        let version = match listed {
            Ok(version) => version,
            Err(e) => {
                if failed(tx, e, &mut backoff) {
                    return;
                }
                continue;
            }
        };
        log::info!(
            "kubernetes api {}: {} {} listed at resource version {version}",
            client.server(),
            objects.len(),
            R::WHAT
        );
        if tx.send(Learned::Listed(objects)).is_err()
            || tx.send(Learned::Reachable(version.clone())).is_err()
        {
            return;
        }
        backoff = BACKOFF_MIN;
        let mut version = version;
        loop {
            let started = std::time::Instant::now();
            match watch::<R>(client, &mut version, tx) {
                // A watch the server ends at once (a proxy cutting streams) is not resumed in
                // a tight loop.
                Ok(Ended::Closed) if started.elapsed() < BACKOFF_MIN => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Ok(Ended::Closed) => backoff = BACKOFF_MIN,
                Ok(Ended::ReceiverGone) => return,
                Ok(Ended::Expired) => {
                    log::info!(
                        "kubernetes api: {} resource version {version} expired; listing again",
                        R::WHAT
                    );
                    continue 'list;
                }
                Err(e) if e.is_expired() => continue 'list,
                Err(e) => {
                    if failed(tx, e, &mut backoff) {
                        return;
                    }
                }
            }
        }
    }
}

/// How a watch ended without an error.
enum Ended {
    /// The API server ended it (its timeout) or the connection closed: resume.
    Closed,
    /// A watch ERROR 410: list again.
    Expired,
    /// Nobody listens any more.
    ReceiverGone,
}

/// One watch from `version`, which follows the events and bookmarks seen.
fn watch<R: Resource>(
    client: &Client,
    version: &mut String,
    tx: &Sender<Learned<R::Facts>>,
) -> Result<Ended, ApiError> {
    let mut stream = client.watch(R::PATH, R::WHAT, version)?;
    if tx.send(Learned::Reachable(version.clone())).is_err() {
        return Ok(Ended::ReceiverGone);
    }
    loop {
        let Some(event) = stream.next_event()? else {
            return Ok(Ended::Closed);
        };
        let sent = match event.kind.as_str() {
            "ERROR" => {
                let status: Status = serde_json::from_value(event.object).unwrap_or_default();
                if status.code == 410 {
                    return Ok(Ended::Expired);
                }
                return Err(ApiError::Status {
                    what: format!("watch {}", R::WHAT),
                    code: status.code,
                    reason: status.reason,
                    message: status.message,
                });
            }
            "BOOKMARK" => {
                #[derive(serde::Deserialize)]
                struct Bookmark {
                    #[serde(default)]
                    metadata: Meta,
                }
                if let Ok(b) = serde_json::from_value::<Bookmark>(event.object) {
                    if !b.metadata.resource_version.is_empty() {
                        *version = b.metadata.resource_version;
                    }
                }
                // Also how a watch nobody reads any more (the Namespaces' and Pods' once the
                // last NetworkPolicy is gone) finds out, between the objects' own events.
                tx.send(Learned::Reachable(version.clone()))
            }
            kind @ ("ADDED" | "MODIFIED" | "DELETED") => {
                let object: R =
                    serde_json::from_value(event.object).map_err(|e| ApiError::Decode {
                        what: format!("watch {}: {kind} event", R::WHAT),
                        why: e.to_string(),
                    })?;
                if let Some(v) = object.resource_version().filter(|v| !v.is_empty()) {
                    v.clone_into(version);
                }
                match object.facts() {
                    Some(facts) if kind == "DELETED" => tx.send(Learned::Deleted(facts)),
                    Some(facts) => tx.send(Learned::Upserted(facts)),
                    None => Ok(()),
                }
            }
            other => {
                log::debug!("kubernetes api: watch event {other:?} ignored");
                Ok(())
            }
        };
        if sent.is_err() {
            return Ok(Ended::ReceiverGone);
        }
    }
}
