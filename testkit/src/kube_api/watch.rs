//! A watch stream of one collection: the history after the client's resourceVersion (or a
//! synthetic ADDED per object), then live events, bookmarks, and a clean end at
//! `timeoutSeconds`, as `GET /api/v1/nodes?watch=true` (or pods, ...) serves them.

use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::cluster::Event;
use super::http::{self, LAST_CHUNK};
use super::kinds::Resource;
use super::objects;
use super::shared::{lock, Connection, Shared};

/// How often a watch with `allowWatchBookmarks=true` gets a `BOOKMARK` (the first one this long
/// after it starts). The real server sends them about once a minute; tests want them sooner.
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// How often a watch with nothing to send checks that its client is still there.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);

/// What a watch asked for.
#[derive(Debug)]
pub(super) struct WatchPlan {
    /// The collection watched.
    pub resource: Resource,
    /// Only the objects in this namespace; `None`: all.
    pub namespace: Option<String>,
    /// Replay the events after this resourceVersion; `None` (absent or "0"): a synthetic ADDED
    /// for every object, then what changes.
    pub from: Option<u64>,
    /// Only the events of objects of this name (`fieldSelector=metadata.name=..`).
    pub name: Option<String>,
    /// End the stream cleanly after this long (`timeoutSeconds`).
    pub timeout: Option<Duration>,
    /// Send BOOKMARK events (`allowWatchBookmarks`).
    pub bookmarks: bool,
}

impl WatchPlan {
    fn wants(&self, event: &Event) -> bool {
        event.resource == self.resource
            && (self.namespace.is_none() || event.namespace() == self.namespace.as_deref())
            && self.wants_name(event.name())
    }

    fn wants_name(&self, name: &str) -> bool {
        self.name.as_deref().is_none_or(|wanted| wanted == name)
    }

    /// The key prefix of the objects watched.
    fn prefix(&self) -> String {
        self.namespace
            .as_ref()
            .map_or_else(String::new, |namespace| format!("{namespace}/"))
    }
}

/// How a watch ended.
pub(super) enum WatchEnd {
    /// With the last chunk: the connection can serve another request.
    Clean,
    /// Mid-stream: dropped, the server stopping, or the client gone.
    Abrupt,
}

/// Streams the watch `plan` on `out` until it times out or `conn` is closed.
pub(super) fn serve(
    shared: &Shared,
    conn: &Connection,
    out: &mut impl Write,
    plan: &WatchPlan,
    close: bool,
) -> io::Result<WatchEnd> {
    let deadline = plan.timeout.map(|timeout| Instant::now() + timeout);
    let mut pending = Vec::new();
    let cluster = lock(&shared.cluster);
    let cursor = match plan.from {
        None => {
            let prefix = plan.prefix();
            for (key, object) in cluster.objects_from(plan.resource, &prefix, None) {
                let name = key.split_once('/').map_or(key, |(_, name)| name);
                if plan.wants_name(name) {
                    let event = objects::watch_event("ADDED", object);
                    http::push_chunk(&mut pending, event.as_bytes());
                }
            }
            cluster.resource_version()
        }
        Some(from) => match cluster.check_watchable(from) {
            Ok(()) => from,
            Err(too_old) => {
                drop(cluster);
                // As the real server: 200, one ERROR event carrying the 410 Status, the end.
                let status = objects::too_old(too_old.requested, too_old.oldest);
                http::push_chunk(
                    &mut pending,
                    objects::watch_event("ERROR", &status).as_bytes(),
                );
                pending.extend_from_slice(LAST_CHUNK);
                http::write_stream_head(out, close)?;
                out.write_all(&pending)?;
                out.flush()?;
                return Ok(WatchEnd::Clean);
            }
        },
    };
    drop(cluster);
    let mut watcher = Watcher {
        shared,
        conn,
        plan,
        deadline,
        cursor,
        pending,
    };
    // Counted once its head is out, so that a drop after open_watches() counts it ends a stream
    // the client has begun (curl's 18), not a reply it never got (52, as CI met it). Every
    // change after the cursor still reaches it: the stream reads the history from there.
    let ended = http::write_stream_head(out, close).and_then(|()| {
        conn.watching.store(true, Ordering::SeqCst);
        watcher.stream(out)
    });
    conn.watching.store(false, Ordering::SeqCst);
    ended
}

/// An open watch: where it is in the history, and what it has yet to send.
struct Watcher<'a> {
    shared: &'a Shared,
    conn: &'a Connection,
    plan: &'a WatchPlan,
    deadline: Option<Instant>,
    /// The resourceVersion the client has seen everything up to.
    cursor: u64,
    /// Chunks not sent yet.
    pending: Vec<u8>,
}

impl Watcher<'_> {
    fn stream(&mut self, out: &mut impl Write) -> io::Result<WatchEnd> {
        let mut next_bookmark = Instant::now() + BOOKMARK_INTERVAL;
        let mut cluster = lock(&self.shared.cluster);
        loop {
            if self.conn.is_closed() {
                return Ok(WatchEnd::Abrupt);
            }
            for event in cluster.events_after(self.cursor) {
                if self.plan.wants(event) {
                    let line = objects::watch_event(event.kind.wire(), &event.object);
                    http::push_chunk(&mut self.pending, line.as_bytes());
                }
            }
            self.cursor = self.cursor.max(cluster.resource_version());
            let now = Instant::now();
            let timed_out = self.deadline.is_some_and(|deadline| now >= deadline);
            if timed_out {
                drop(cluster);
                self.pending.extend_from_slice(LAST_CHUNK);
                out.write_all(&self.pending)?;
                out.flush()?;
                return Ok(WatchEnd::Clean);
            }
            if self.plan.bookmarks && now >= next_bookmark {
                let line =
                    objects::watch_event("BOOKMARK", &self.plan.resource.bookmark(self.cursor));
                http::push_chunk(&mut self.pending, line.as_bytes());
                next_bookmark = now + BOOKMARK_INTERVAL;
            }
            if !self.pending.is_empty() {
                drop(cluster);
                out.write_all(&self.pending)?;
                out.flush()?;
                self.pending.clear();
                cluster = lock(&self.shared.cluster);
                continue;
            }
            if self.conn.peer_gone() {
                return Ok(WatchEnd::Abrupt);
            }
            let mut wake = now + LIVENESS_CHECK;
            if self.plan.bookmarks {
                wake = wake.min(next_bookmark);
            }
            if let Some(deadline) = self.deadline {
                wake = wake.min(deadline);
            }
            cluster = self
                .shared
                .changed
                .wait_timeout(cluster, wake.saturating_duration_since(now))
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }
}
