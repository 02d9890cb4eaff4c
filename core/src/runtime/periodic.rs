//! knid's background jobs that run until the runtime stops (the reconciler, the extensions'
//! health poll, the store watch, the reaper's start), all on one thread at a time: each job
//! sleeps most of its life, so a thread each would be idle threads for nothing. Rounds run one at
//! a time, so a long round of one job delays the others' next round by as much; none of them is
//! urgent to the second.
//!
//! The jobs run either on a thread of their own ([`Periodic::spawn`]) or on the threads of a
//! caller that has other waiting to do between rounds ([`Periodic::run_due`]): knid's API
//! server, which waits for requests and signals in the same epoll wait and runs the due rounds
//! as it would a request. Between rounds the runner sleeps until the next job is due, or for
//! good while no job is scheduled; waking a job, adding one or stopping cuts the sleep short (a
//! condition variable for the own thread, a byte on the caller's bell for `run_due`). A round in
//! progress sees the stop ([`Stop::asked`]).

use std::os::fd::OwnedFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::locks::LockExt;

/// The jobs; [`Periodic::stop`] ends their runner.
pub(crate) struct Periodic {
    shared: Arc<Shared>,
    /// The jobs' own thread, when [`Periodic::spawn`] started one.
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What a round of a job started by [`Periodic::when_woken`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Another round after the job's interval.
    Again,
    /// No round until the job is woken again.
    Sleep,
}

/// Seen by the rounds: whether the jobs were asked to stop.
pub(crate) struct Stop(Arc<AtomicBool>);

impl Stop {
    /// Whether the jobs were asked to stop; a long round returns early when so.
    pub fn asked(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Makes a job started by [`Periodic::when_woken`] run at once (and again every interval while
/// its rounds ask for it).
#[derive(Clone)]
pub(crate) struct Wake {
    shared: Arc<Shared>,
    id: usize,
}

impl Wake {
    /// Schedules the job now; nothing when it is already due or the jobs have stopped.
    pub fn wake(&self) {
        let mut state = self.shared.state.acquire();
        if let Some(job) = state.jobs.get_mut(self.id) {
            job.next = Some(Instant::now());
            self.shared.ring();
        }
    }
}

type Round = Box<dyn FnMut(&Stop) -> Then + Send>;

struct Job {
    name: &'static str,
    interval: Duration,
    /// When its next round is due; `None` while asleep.
    next: Option<Instant>,
    /// Taken out while the round runs; `None` for good once a round panicked.
    round: Option<Round>,
}

struct State {
    jobs: Vec<Job>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is added or woken, and on stop.
    changed: Condvar,
    /// [`Periodic::run_due`]'s caller's bell, rung with `changed`.
    bell: OnceLock<OwnedFd>,
    stop: Stop,
}

impl Shared {
    /// Tells the runner that the schedule changed; call with the state locked.
    fn ring(&self) {
        self.changed.notify_all();
        if let Some(bell) = self.bell.get() {
            // A full socket already holds a wake-up; any other error leaves the runner to its
            // next due round.
            let _ = nix::sys::socket::send(
                std::os::fd::AsRawFd::as_raw_fd(bell),
                &[1],
                nix::sys::socket::MsgFlags::MSG_DONTWAIT,
            );
        }
    }
}

impl Periodic {
    /// The jobs, with none yet and nothing running them: see [`Periodic::spawn`] and
    /// [`Periodic::run_due`].
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State { jobs: Vec::new() }),
                changed: Condvar::new(),
                bell: OnceLock::new(),
                stop: Stop(Arc::new(AtomicBool::new(false))),
            }),
            thread: Mutex::new(None),
        }
    }

    /// Starts a thread of their own, `name`, running the jobs until [`Periodic::stop`].
    #[cfg(test)]
    pub fn start(name: &'static str) -> Result<Self> {
        let periodic = Self::new();
        periodic.spawn(name)?;
        Ok(periodic)
    }

    /// Runs the jobs on a thread of their own, `name`, until [`Periodic::stop`].
    pub fn spawn(&self, name: &'static str) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(&shared))
            .map_err(|e| Error::Unavailable(format!("spawn {name}: {e}")))?;
        *self.thread.acquire() = Some(thread);
        Ok(())
    }

    /// From here on, a byte on `bell` (a socket, written with `MSG_DONTWAIT`) whenever a job is
    /// woken or added, and on stop: [`Periodic::run_due`]'s caller watches its peer and runs the
    /// jobs when it is readable. Once; not beside [`Periodic::spawn`].
    pub fn ring_on(&self, bell: OwnedFd) {
        if self.shared.bell.set(bell).is_err() {
            log::error!("the periodic jobs already have a bell");
        }
    }

    /// Runs every round that is due on the calling thread, one at a time, and returns when the
    /// next one is (`None`: no job is scheduled, or the jobs stopped). The caller calls again
    /// then, or sooner when the bell of [`Periodic::ring_on`] rings. One caller at a time.
    pub fn run_due(&self) -> Option<Instant> {
        run_due(&self.shared)
    }

    /// Runs `round` every `interval`, the first time one interval from now.
    pub fn every(
        &self,
        name: &'static str,
        interval: Duration,
        mut round: impl FnMut(&Stop) + Send + 'static,
    ) {
        self.add(
            name,
            interval,
            Some(Instant::now() + interval),
            Box::new(move |stop| {
                round(stop);
                Then::Again
            }),
        );
    }

    /// Runs `round` when the returned [`Wake`] is woken, then every `interval` for as long as
    /// its rounds answer [`Then::Again`].
    pub fn when_woken(
        &self,
        name: &'static str,
        interval: Duration,
        round: impl FnMut(&Stop) -> Then + Send + 'static,
    ) -> Wake {
        let id = self.add(name, interval, None, Box::new(round));
        Wake {
            shared: Arc::clone(&self.shared),
            id,
        }
    }

    fn add(
        &self,
        name: &'static str,
        interval: Duration,
        next: Option<Instant>,
        round: Round,
    ) -> usize {
        let mut state = self.shared.state.acquire();
        state.jobs.push(Job {
            name,
            interval,
            next,
            round: Some(round),
        });
        self.shared.ring();
        state.jobs.len() - 1
    }

    /// The stop flag itself, for a signal handler to set (it may not take the jobs' lock): a
    /// round in progress sees it and returns early, and the runner returns after it without
    /// waiting for the next ([`Periodic::run_due`] returns `None` from then on).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.shared.stop.0)
    }

    /// Asks the jobs to stop and waits for their own thread, if they have one: a round in
    /// progress finishes first. A [`Periodic::run_due`] caller returns after its round.
    pub fn stop(&self) {
        {
            let _state = self.shared.state.acquire();
            self.shared.stop.0.store(true, Ordering::SeqCst);
            self.shared.ring();
        }
        let thread = self.thread.acquire().take();
        if thread.is_some_and(|thread| thread.join().is_err()) {
            log::error!("the periodic jobs' thread panicked");
        }
    }
}

/// Runs every round that is due, one at a time, and returns when the next one is (`None`: no
/// job is scheduled), or at once when stopping.
fn run_due(shared: &Shared) -> Option<Instant> {
    let mut state = shared.state.acquire();
    loop {
        if shared.stop.asked() {
            return None;
        }
        let now = Instant::now();
        let id = match next_due(&state) {
            Some((next, id)) if next <= now => id,
            Some((next, _)) => return Some(next),
            None => return None,
        };
        let job = &mut state.jobs[id];
        let name = job.name;
        job.next = None;
        let Some(mut round) = job.round.take() else {
            continue;
        };
        drop(state);
        let then = catch_unwind(AssertUnwindSafe(|| round(&shared.stop)));
        state = shared.state.acquire();
        let job = &mut state.jobs[id];
        match then {
            Ok(then) => {
                job.round = Some(round);
                // A wake-up during the round keeps its earlier time.
                if then == Then::Again && job.next.is_none() {
                    job.next = Some(Instant::now() + job.interval);
                }
            }
            Err(_) => log::error!("{name} panicked; it runs no more"),
        }
    }
}

/// The job due first, and when.
fn next_due(state: &State) -> Option<(Instant, usize)> {
    state
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, job)| job.round.is_some())
        .filter_map(|(id, job)| job.next.map(|next| (next, id)))
        .min()
}

/// The jobs' own thread: due rounds, then a sleep on the condition variable until the next.
fn run(shared: &Shared) {
    loop {
        run_due(shared);
        let state = shared.state.acquire();
        // Looked at again under the lock the sleep releases: a wake-up between the rounds and
        // here is not lost.
        if shared.stop.asked() {
            return;
        }
        let now = Instant::now();
        let _state = match next_due(&state) {
            Some((next, _)) if next <= now => continue,
            Some((next, _)) => {
                shared
                    .changed
                    .wait_timeout(state, next - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0
            }
            None => shared
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
    }
}

#[cfg(test)]
mod tests;
