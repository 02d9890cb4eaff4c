//! One shard's jobs, run one at a time in the order they came, with no thread while there is
//! no work. A caller whose job finds the lane idle (nothing queued, nothing running) runs it
//! itself, on its own thread: no hand-over to a worker and back. Otherwise the job is queued
//! and the lane's worker thread runs it; the worker starts when a job is queued and none runs,
//! and ends after a while without one.
//!
//! Order: jobs are counted as queued (under the lane's lock) before they are sent, and a job
//! runs in its caller only when that count is zero and nothing runs; a queued job runs once the
//! job running before it is done. So a job never overtakes one that came before it, and at most
//! one job of a lane runs at any time. The one resource a job needs (the shard's host netlink
//! socket) passes from each job to the next.
//!
//! Bound: the same count caps the queue at the lane's depth; a sender waits for room. The
//! channel itself is unbounded (crossbeam's list flavour), so an idle lane holds no slots: a
//! bounded channel allocates and writes every slot up front (32 KiB per shard at the default
//! depth), where a list allocates a block of 31 slots when a job comes and frees it once read.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender};

use crate::locks::LockExt;
use crate::shared::relay::Relay;

/// Runs one job with the lane's resource.
pub(crate) type Run<J, R> = Box<dyn Fn(&mut R, J) + Send + Sync>;

/// A lane; see the module docs.
pub(crate) struct Lane<J, R> {
    name: String,
    jobs: Receiver<J>,
    /// Most jobs counted as queued at once.
    depth: usize,
    idle_exit: Duration,
    state: Mutex<State<R>>,
    /// Signalled when a job ends: the next may run.
    done: Condvar,
    /// Signalled when a queued job is done: a sender may find room.
    room: Condvar,
    run: Run<J, R>,
}

struct State<R> {
    /// Jobs counted by their senders and not yet finished: in the channel, about to be sent,
    /// or taken by the worker. At most the lane's depth.
    queued: usize,
    /// The resource, while no job runs.
    resource: Option<R>,
    /// A worker thread runs (or is about to).
    worker: bool,
    /// The worker threads, one at a time.
    thread: Relay,
    /// No job may start in a caller any more, and no worker.
    closed: bool,
}

impl<J: Send + 'static, R: Send + 'static> Lane<J, R> {
    /// A lane over `jobs` (an unbounded channel: `depth` bounds it), each run by `run` with
    /// `resource`; its worker thread is named `name` and ends after `idle_exit` without a job.
    pub fn new(
        name: String,
        jobs: Receiver<J>,
        depth: usize,
        idle_exit: Duration,
        resource: R,
        run: Run<J, R>,
    ) -> Arc<Self> {
        let thread = Relay::new(name.clone());
        Arc::new(Self {
            name,
            jobs,
            depth: depth.max(1),
            idle_exit,
            state: Mutex::new(State {
                queued: 0,
                resource: Some(resource),
                worker: false,
                thread,
                closed: false,
            }),
            done: Condvar::new(),
            room: Condvar::new(),
            run,
        })
    }

    /// Runs `job` on the calling thread if the lane is idle; gives it back otherwise, to be
    /// [`Lane::queue`]d.
    pub fn run_here(&self, job: J) -> Result<(), J> {
        let resource = {
            let mut state = self.state.acquire();
            if state.closed || state.queued > 0 {
                return Err(job);
            }
            match state.resource.take() {
                Some(resource) => resource,
                None => return Err(job),
            }
        };
        self.run_with(resource, job);
        Ok(())
    }

    /// Queues `job` on `tx` (this lane's channel), waiting up to `wait` for room, and makes
    /// sure a worker will run it.
    pub fn queue(
        self: &Arc<Self>,
        tx: &Sender<J>,
        job: J,
        wait: Duration,
    ) -> Result<(), SendTimeoutError<J>> {
        // A wait too long to add to now is no limit.
        let until = Instant::now().checked_add(wait);
        let mut state = self.state.acquire();
        while state.queued >= self.depth {
            let left = until.map_or(Duration::MAX, |u| {
                u.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Err(SendTimeoutError::Timeout(job));
            }
            state = self
                .room
                .wait_timeout(state, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        state.queued += 1;
        drop(state);
        if let Err(e) = tx.send(job) {
            self.finished_queued();
            return Err(SendTimeoutError::Disconnected(e.into_inner()));
        }
        self.ensure_worker();
        Ok(())
    }

    /// A counted job is done (or was never sent): one more may queue.
    fn finished_queued(&self) {
        self.state.acquire().queued -= 1;
        self.room.notify_one();
    }

    /// Runs `job` with `resource`, then hands the resource on; also when `run` panics.
    fn run_with(&self, resource: R, job: J) {
        let mut resource = resource;
        let ran = catch_unwind(AssertUnwindSafe(|| (self.run)(&mut resource, job)));
        self.state.acquire().resource = Some(resource);
        self.done.notify_all();
        if let Err(panic) = ran {
            resume_unwind(panic);
        }
    }

    fn ensure_worker(self: &Arc<Self>) {
        let mut state = self.state.acquire();
        if state.worker {
            return;
        }
        if !state.closed {
            let lane = Arc::clone(self);
            match state.thread.start(move || lane.work()) {
                Ok(()) => {
                    state.worker = true;
                    return;
                }
                Err(e) => log::warn!("cannot start {}: {e}", self.name),
            }
        }
        // Nothing would run the queued jobs: dropped, their callers hear of it (a dropped reply
        // channel) instead of waiting for good. A job still being sent comes back here.
        while self.jobs.try_recv().is_ok() {
            state.queued -= 1;
            self.room.notify_one();
        }
    }

    /// The worker: runs queued jobs in turn until none comes for `idle_exit`. A job that panics
    /// is dropped (its caller hears of it) and the worker goes on.
    fn work(&self) {
        loop {
            match self.jobs.recv_timeout(self.idle_exit) {
                Ok(job) => {
                    let resource = self.wait_turn();
                    let ran = catch_unwind(AssertUnwindSafe(|| self.run_with(resource, job)));
                    self.finished_queued();
                    if ran.is_err() {
                        log::error!("{}: a job panicked", self.name);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let mut state = self.state.acquire();
                    if state.queued == 0 {
                        state.worker = false;
                        drop(state);
                        crate::memory::thread_ends_idle();
                        return;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.state.acquire().worker = false;
                    return;
                }
            }
        }
    }

    /// Waits until no job runs, and takes the resource.
    fn wait_turn(&self) -> R {
        let mut state = self.state.acquire();
        loop {
            if let Some(resource) = state.resource.take() {
                return resource;
            }
            state = wait(&self.done, state);
        }
    }

    /// No job starts in a caller from now on; queued jobs still run.
    pub fn close(&self) {
        self.state.acquire().closed = true;
    }

    /// Waits, after [`Lane::close`] and once its channel's senders are gone, for the worker to
    /// end and for a job running in a caller to finish.
    pub fn join(&self) {
        let last = self.state.acquire().thread.take();
        last.join();
        let mut state = self.state.acquire();
        while state.resource.is_none() {
            state = wait(&self.done, state);
        }
    }
}

fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
