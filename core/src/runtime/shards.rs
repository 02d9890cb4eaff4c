//! Routing operations to shard workers: same sandbox ⇒ same worker ⇒ strictly ordered; a full
//! queue gives backpressure (bounded channels), not unbounded memory.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, SendTimeoutError, Sender};

use super::worker::Job;
use crate::context::Reply;
use crate::error::{Error, Result};
use crate::gc::{self, OnShard};
use crate::locks::RwLockExt;
use crate::model::{GcFinding, GcKeep, SandboxId};

/// How long a request waits for room in a full shard queue when the caller set no deadline.
const DEFAULT_QUEUE_WAIT: Duration = Duration::from_secs(10);

/// The shard queues.
pub(crate) struct Shards {
    shards: RwLock<Option<Vec<Sender<Job>>>>,
    accepting: AtomicBool,
}

impl Shards {
    /// Not accepting until [`Shards::open`].
    pub fn new() -> Self {
        Self {
            shards: RwLock::new(None),
            accepting: AtomicBool::new(false),
        }
    }

    /// Starts routing to `shards`.
    pub fn open(&self, shards: Vec<Sender<Job>>) {
        *self.shards.exclusive() = Some(shards);
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

    fn shard_for(&self, id: &SandboxId) -> Result<Sender<Job>> {
        let shards = self.shards.shared();
        let shards = shards
            .as_ref()
            .filter(|_| self.accepting())
            .ok_or_else(shutting_down)?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut hasher);
        let index = usize::try_from(hasher.finish() % shards.len() as u64).unwrap_or(0);
        Ok(shards[index].clone())
    }

    /// Queues the job `make` builds on `id`'s shard and returns the channel its result comes on.
    pub fn send<T>(
        &self,
        id: &SandboxId,
        deadline: Option<Instant>,
        make: impl FnOnce(Sender<Result<T>>) -> Job,
    ) -> Result<Reply<T>> {
        let (reply_tx, reply_rx) = bounded(1);
        let shard = self.shard_for(id)?;
        let wait = deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(DEFAULT_QUEUE_WAIT);
        match shard.send_timeout(make(reply_tx), wait) {
            Ok(()) => Ok(Reply(reply_rx)),
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
