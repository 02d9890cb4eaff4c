//! knid's background jobs that run until the runtime stops (the reconciler, the extensions'
//! health poll, the store watch), all on one thread: each job sleeps most of its life, so a
//! thread each would be idle threads for nothing. Rounds run one at a time, so a long round of
//! one job delays the others' next round by as much; none of them is urgent to the second.
//!
//! The thread sleeps until the next job is due, or for good while no job is scheduled. Stopping
//! wakes it from that sleep, and a round in progress sees the stop ([`Stop::asked`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::locks::LockExt;

/// The jobs' thread; [`Periodic::stop`] ends it.
pub(crate) struct Periodic {
    shared: Arc<Shared>,
    thread: JoinHandle<()>,
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
pub(crate) struct Stop(AtomicBool);

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
            self.shared.changed.notify_all();
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
    stop: Stop,
}

impl Periodic {
    /// Starts the thread, `name`, with no job yet.
    pub fn start(name: &'static str) -> Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State { jobs: Vec::new() }),
            changed: Condvar::new(),
            stop: Stop(AtomicBool::new(false)),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(&thread_shared))
            .map_err(|e| Error::Unavailable(format!("spawn {name}: {e}")))?;
        Ok(Self { shared, thread })
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
        self.shared.changed.notify_all();
        state.jobs.len() - 1
    }

    /// Asks the jobs to stop and waits for the thread: a round in progress finishes first.
    pub fn stop(self) {
        let Self { shared, thread } = self;
        {
            let _state = shared.state.acquire();
            shared.stop.0.store(true, Ordering::SeqCst);
            shared.changed.notify_all();
        }
        if thread.join().is_err() {
            log::error!("the periodic jobs' thread panicked");
        }
    }
}

fn run(shared: &Shared) {
    let mut state = shared.state.acquire();
    loop {
        if shared.stop.asked() {
            return;
        }
        let now = Instant::now();
        let due = state
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, job)| job.round.is_some())
            .filter_map(|(id, job)| job.next.map(|next| (next, id)))
            .min();
        let id = match due {
            Some((next, id)) if next <= now => id,
            Some((next, _)) => {
                state = shared
                    .changed
                    .wait_timeout(state, next - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
                continue;
            }
            None => {
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
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

#[cfg(test)]
mod tests;
