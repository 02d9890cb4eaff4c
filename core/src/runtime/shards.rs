//! Routing operations to shard workers: same sandbox ⇒ same shard ⇒ strictly ordered; a full
//! queue gives backpressure (bounded channels), not unbounded memory.
//!
//! A shard's worker thread runs only while it has work ([`Lane`]): it starts with the first job
//! queued to the shard and ends after [`IDLE_EXIT`] without one, so an idle knid holds no
//! worker.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, SendTimeoutError, Sender};

use super::lane::{Lane, StartWorker};
use super::worker::{self, Job};
use crate::context::{Context, Reply};
use crate::error::{Error, Result};
use crate::gc::{self, OnShard};
use crate::locks::RwLockExt;
use crate::model::{GcFinding, GcKeep, SandboxId};

/// How long a request waits for room in a full shard queue when the caller set no deadline.
const DEFAULT_QUEUE_WAIT: Duration = Duration::from_secs(10);
/// How long a shard worker waits for a job before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(10);

/// The shard queues.
pub(crate) struct Shards {
    shards: RwLock<Option<Vec<Sender<Job>>>>,
    lanes: RwLock<Vec<Arc<Lane<Job>>>>,
    accepting: AtomicBool,
}

impl Shards {
    /// Not accepting until [`Shards::open`].
    pub fn new() -> Self {
        Self {
            shards: RwLock::new(None),
            lanes: RwLock::new(Vec::new()),
            accepting: AtomicBool::new(false),
        }
    }

    /// Starts routing to `count` shards of `depth` queued jobs each, their workers running
    /// `ctx`'s operations.
    pub fn open(&self, ctx: &Arc<Context>, count: usize, depth: usize) {
        let (senders, lanes) = (0..count)
            .map(|index| {
                let (tx, rx) = bounded(depth);
                let ctx = Arc::clone(ctx);
                let start: StartWorker<Job> =
                    Box::new(move |lane| worker::spawn(index, Arc::clone(&ctx), lane));
                (tx, Lane::new(rx, IDLE_EXIT, start))
            })
            .unzip();
        *self.lanes.exclusive() = lanes;
        *self.shards.exclusive() = Some(senders);
        self.accepting.store(true, Ordering::SeqCst);
    }

    /// Whether new operations are taken.
    pub fn accepting(&self) -> bool {
        self.accepting.load(Ordering::SeqCst)
    }

    /// Fails with Unavailable once shutting down: the one answer every request gets then.
    pub fn ensure_accepting(&self) -> Result<()> {
        if self.accepting() {
            Ok(())
        } else {
            Err(shutting_down())
        }
    }

    /// Stops taking operations and drops the queues' senders, so each worker ends once its queue
    /// is drained.
    pub fn close(&self) {
        self.accepting.store(false, Ordering::SeqCst);
        drop(self.shards.exclusive().take());
    }

    /// Waits for the workers, after [`Shards::close`].
    pub fn join(&self) {
        for lane in self.lanes.shared().iter() {
            lane.join();
        }
    }

    fn shard_for(&self, id: &SandboxId) -> Result<(Sender<Job>, Arc<Lane<Job>>)> {
        let shards = self.shards.shared();
        let shards = shards
            .as_ref()
            .filter(|_| self.accepting())
            .ok_or_else(shutting_down)?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut hasher);
        let index = usize::try_from(hasher.finish() % shards.len() as u64).unwrap_or(0);
        let lane = self
            .lanes
            .shared()
            .get(index)
            .cloned()
            .ok_or_else(shutting_down)?;
        Ok((shards[index].clone(), lane))
    }

    /// Queues the job `make` builds on `id`'s shard and returns the channel its result comes on.
    pub fn send<T>(
        &self,
        id: &SandboxId,
        deadline: Option<Instant>,
        make: impl FnOnce(Sender<Result<T>>) -> Job,
    ) -> Result<Reply<T>> {
        let (reply_tx, reply_rx) = bounded(1);
        let (shard, lane) = self.shard_for(id)?;
        let wait = deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(DEFAULT_QUEUE_WAIT);
        match shard.send_timeout(make(reply_tx), wait) {
            Ok(()) => {
                lane.ensure_worker();
                Ok(Reply(reply_rx))
            }
            Err(SendTimeoutError::Timeout(_)) if deadline.is_some() => {
                Err(Error::DeadlineExceeded("the request was queued"))
            }
            Err(SendTimeoutError::Timeout(_)) => {
                Err(Error::Unavailable("shard queue full, try again".into()))
            }
            Err(SendTimeoutError::Disconnected(_)) => Err(shutting_down()),
        }
    }

    /// [`Shards::send`], then waits for the result. An operation that started always runs to
    /// completion: it is waited for, deadline or not.
    pub fn submit<T>(
        &self,
        id: &SandboxId,
        deadline: Option<Instant>,
        make: impl FnOnce(Sender<Result<T>>) -> Job,
    ) -> Result<T> {
        self.send(id, deadline, make)?.wait()
    }
}

fn shutting_down() -> Error {
    Error::Unavailable("knid is shutting down".into())
}

impl OnShard for Shards {
    fn accepting(&self) -> bool {
        Shards::accepting(self)
    }

    fn gc_sandbox(
        &self,
        id: &SandboxId,
        keep: Option<Arc<GcKeep>>,
        corrupt: gc::Corrupt,
        dry_run: bool,
        deadline: Option<Instant>,
    ) -> Result<Reply<Vec<GcFinding>>> {
        self.send(id, deadline, |reply| Job::Gc {
            id: id.clone(),
            keep,
            corrupt,
            dry_run,
            reply,
        })
    }

    fn remove_netns(
        &self,
        owner: &SandboxId,
        finding: GcFinding,
        deadline: Option<Instant>,
    ) -> Result<Reply<()>> {
        self.send(owner, deadline, |reply| Job::DeleteNetns {
            owner: owner.clone(),
            gc: Some(finding),
            reply,
        })
    }
}
