//! The list-and-watch loop over Nodes: a full list (paginated), then a watch from the list's
//! resource version, resumed from the last version seen when the API server ends it or the
//! connection drops, and a new list when that version is too old (410 Gone). Errors back off
//! exponentially. Runs on its own thread, blocked in reads; what it learns goes to the cluster
//! thread as [`Learned`] messages, and it ends when nobody listens any more.

use std::time::Duration;

use crossbeam_channel::Sender;

use super::client::Client;
use super::error::ApiError;
use super::node_object::{Meta, Node, NodeFacts, Status};

/// First wait after a failure; doubled per failure in a row.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between tries.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What the watch tells the cluster thread.
#[derive(Debug)]
pub enum Learned {
    /// A full list: every Node that exists.
    Listed(Vec<NodeFacts>),
    /// A Node was added or changed.
    Upserted(NodeFacts),
    /// A Node was deleted.
    Deleted(String),
    /// The API answers again (after `Unreachable`), with the resource version watched from.
    Reachable(String),
    /// The API cannot be read; knid keeps its last known state.
    Unreachable(String),
}

/// Lists and watches until `tx`'s receiver is gone.
pub fn run(client: &Client, tx: &Sender<Learned>) {
    let mut backoff = BACKOFF_MIN;
    let failed = |tx: &Sender<Learned>, e: ApiError, backoff: &mut Duration| {
        log::warn!(
            "kubernetes api {}: {e}; retrying in {backoff:?}",
            client.server()
        );
        let gone = tx.send(Learned::Unreachable(e.to_string())).is_err();
        std::thread::sleep(*backoff);
        *backoff = (*backoff * 2).min(BACKOFF_MAX);
        gone
    };
    'list: loop {
        let mut nodes = Vec::new();
        let version = match client.list_nodes(|node| nodes.push(node.facts())) {
            Ok(version) => version,
            Err(e) => {
                if failed(tx, e, &mut backoff) {
                    return;
                }
                continue;
            }
        };
        log::info!(
            "kubernetes api {}: {} node(s) listed at resource version {version}",
            client.server(),
            nodes.len()
        );
        if tx.send(Learned::Listed(nodes)).is_err()
            || tx.send(Learned::Reachable(version.clone())).is_err()
        {
            return;
        }
        backoff = BACKOFF_MIN;
        let mut version = version;
        loop {
            let started = std::time::Instant::now();
            match watch(client, &mut version, tx) {
                // A watch the server ends at once (a proxy cutting streams) is not resumed in
                // a tight loop.
                Ok(Ended::Closed) if started.elapsed() < BACKOFF_MIN => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Ok(Ended::Closed) => backoff = BACKOFF_MIN,
                Ok(Ended::ReceiverGone) => return,
                Ok(Ended::Expired) => {
                    log::info!("kubernetes api: resource version {version} expired; listing again");
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
fn watch(client: &Client, version: &mut String, tx: &Sender<Learned>) -> Result<Ended, ApiError> {
    let mut stream = client.watch_nodes(version)?;
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
                    what: "watch nodes".into(),
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
                Ok(())
            }
            kind @ ("ADDED" | "MODIFIED" | "DELETED") => {
                let node: Node =
                    serde_json::from_value(event.object).map_err(|e| ApiError::Decode {
                        what: format!("watch nodes: {kind} event"),
                        why: e.to_string(),
                    })?;
                if !node.metadata.resource_version.is_empty() {
                    version.clone_from(&node.metadata.resource_version);
                }
                if kind == "DELETED" {
                    tx.send(Learned::Deleted(node.metadata.name))
                } else {
                    tx.send(Learned::Upserted(node.facts()))
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
