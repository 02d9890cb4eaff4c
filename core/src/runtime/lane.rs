//! A bounded queue served by at most one thread at a time, started when a job is queued and
//! ended after a while without one, so an idle knid holds no thread for it.
//!
//! One thread at a time keeps the jobs in order. A worker ends only after finding the queue
//! empty under the lane's lock; whoever queues a job takes that lock afterwards and starts a
//! worker when none runs. So either the ending worker sees the job, or the job's sender sees
//! the worker gone.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::error::Result;
use crate::locks::LockExt;

/// Starts a worker thread that serves `lane` with [`Lane::next_job`] until it returns `None`.
pub(crate) type StartWorker<J> = Box<dyn Fn(Arc<Lane<J>>) -> Result<JoinHandle<()>> + Send + Sync>;

/// The receiving side of a queue and its worker; see the module docs.
pub(crate) struct Lane<J> {
    jobs: Receiver<J>,
    idle_exit: Duration,
    worker: Mutex<Worker>,
    start: StartWorker<J>,
}

#[derive(Default)]
struct Worker {
    /// A worker serves the queue (or is about to).
    running: bool,
    /// The last worker started; a finished one is joined when the next starts.
    thread: Option<JoinHandle<()>>,
}

impl<J> Lane<J> {
    /// A lane over `jobs` whose workers `start` starts and which end after `idle_exit` without
    /// a job.
    pub fn new(jobs: Receiver<J>, idle_exit: Duration, start: StartWorker<J>) -> Arc<Self> {
        Arc::new(Self {
            jobs,
            idle_exit,
            worker: Mutex::new(Worker::default()),
            start,
        })
    }

    /// Starts a worker unless one runs; call after queueing a job.
    pub fn ensure_worker(self: &Arc<Self>) {
        let mut worker = self.worker.acquire();
        if worker.running {
            return;
        }
        if let Some(ended) = worker.thread.take() {
            if ended.join().is_err() {
                log::error!("a worker panicked");
            }
        }
        match (self.start)(Arc::clone(self)) {
            Ok(thread) => {
                worker.running = true;
                worker.thread = Some(thread);
            }
            Err(e) => {
                // Nothing would take the queued jobs: dropped, their callers hear of it (a
                // dropped reply channel) instead of waiting for good.
                log::warn!("{}", e.chain());
                while self.jobs.try_recv().is_ok() {}
            }
        }
    }

    /// The next job for the worker; `None` when it must end: no job within the idle time, or
    /// every sender gone. The lane then counts the worker as ended.
    pub fn next_job(&self) -> Option<J> {
        loop {
            match self.jobs.recv_timeout(self.idle_exit) {
                Ok(job) => return Some(job),
                Err(RecvTimeoutError::Timeout) => {
                    let mut worker = self.worker.acquire();
                    if self.jobs.is_empty() {
                        worker.running = false;
                        return None;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.worker.acquire().running = false;
                    return None;
                }
            }
        }
    }

    /// Waits for the last worker, once every sender is gone.
    pub fn join(&self) {
        let thread = self.worker.acquire().thread.take();
        if thread.is_some_and(|t| t.join().is_err()) {
            log::error!("a worker panicked");
        }
    }
}

#[cfg(test)]
mod tests;
