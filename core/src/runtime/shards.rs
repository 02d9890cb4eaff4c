//! Routing operations to shard workers: same sandbox ⇒ same shard ⇒ strictly ordered; a full
//! queue gives backpressure (each lane bounds its queue), not unbounded memory.
//!
//! Each shard is a [`Lane`]: an operation whose caller waits for it runs on the caller's own
//! thread when its shard is idle (no hand-over to a worker and back); the others queue for the
//! shard's worker thread, which runs only while the shard has work and ends after
//! [`IDLE_EXIT`] without any, so an idle knid holds no worker.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, SendTimeoutError, Sender};

use knid_netops::Rtnl;

use super::lane::{Lane, Run};
use super::worker::{self, Job};
use crate::error::{Error, Result};
use crate::gc::{self, OnShard};
use crate::locks::RwLockExt;
use crate::model::{GcFinding, GcKeep, SandboxId};
use crate::shared::context::{Context, Reply};

/// How long a request waits for room in a full shard queue when the caller set no deadline.
const DEFAULT_QUEUE_WAIT: Duration = Duration::from_secs(10);
/// How long a shard worker waits for a job before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(10);

/// A shard's jobs, run with its host netlink socket.
type ShardLane = Lane<Job, Rtnl>;

/// The shard queues.
pub(crate) struct Shards {
    shards: RwLock<Option<Vec<Sender<Job>>>>,
    lanes: RwLock<Vec<Arc<ShardLane>>>,
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

    /// Starts routing to `count` shards of `depth` queued jobs each, running `ctx`'s
    /// operations. Call from a thread in the host netns: each shard's host netlink socket is
    /// opened here.
    pub fn open(&self, ctx: &Arc<Context>, count: usize, depth: usize) -> Result<()> {
        let mut senders = Vec::with_capacity(count);
        let mut lanes = Vec::with_capacity(count);
        for index in 0..count {
            let (tx, rx) = unbounded();
            let ctx = Arc::clone(ctx);
            let run: Run<Job, Rtnl> = Box::new(move |host, job| worker::run(&ctx, host, job));
            let host = crate::node::host_rtnl()?;
            senders.push(tx);
            lanes.push(Lane::new(
                format!("knid-shard-{index}"),
                rx,
                depth,
                IDLE_EXIT,
                host,
                run,
            ));
        }
        *self.lanes.exclusive() = lanes;
        *self.shards.exclusive() = Some(senders);
        self.accepting.store(true, Ordering::SeqCst);
        Ok(())
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
        for lane in self.lanes.shared().iter() {
            lane.close();
        }
    }

    /// Waits for the workers and for the operations running in their callers, after
    /// [`Shards::close`].
    pub fn join(&self) {
        for lane in self.lanes.shared().iter() {
            lane.join();
        }
    }

    fn shard_for(&self, id: &SandboxId) -> Result<(Sender<Job>, Arc<ShardLane>)> {
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
        queue(&lane, &shard, make(reply_tx), deadline)?;
        Ok(Reply(reply_rx))
    }

    /// Runs the job `make` builds on `id`'s shard and waits for its result: on this thread
    /// when the shard is idle, else queued. An operation that started always runs to
    /// completion: it is waited for, deadline or not.
    pub fn submit<T>(
        &self,
        id: &SandboxId,
        deadline: Option<Instant>,
        make: impl FnOnce(Sender<Result<T>>) -> Job,
    ) -> Result<T> {
        let (reply_tx, reply_rx) = bounded(1);
        let (shard, lane) = self.shard_for(id)?;
        if let Err(job) = lane.run_here(make(reply_tx)) {
            queue(&lane, &shard, job, deadline)?;
        }
        Reply(reply_rx).wait()
    }
}

/// Queues `job` on `shard`, waiting for room until `deadline` (or [`DEFAULT_QUEUE_WAIT`]).
fn queue(
    lane: &Arc<ShardLane>,
    shard: &Sender<Job>,
    job: Job,
    deadline: Option<Instant>,
) -> Result<()> {
    let wait = deadline
        .map(|d| d.saturating_duration_since(Instant::now()))
        .unwrap_or(DEFAULT_QUEUE_WAIT);
    match lane.queue(shard, job, wait) {
        Ok(()) => Ok(()),
        Err(SendTimeoutError::Timeout(_)) if deadline.is_some() => {
            Err(Error::DeadlineExceeded("the request was queued"))
        }
        Err(SendTimeoutError::Timeout(_)) => {
            Err(Error::Unavailable("shard queue full, try again".into()))
        }
        Err(SendTimeoutError::Disconnected(_)) => Err(shutting_down()),
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
