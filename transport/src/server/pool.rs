//! The server's threads, leader and followers. One thread at a time holds the I/O role (the
//! epoll loop of [`super::io`]); the others wait as followers. A leader that reads a request
//! runs it itself. When that request is the only work waiting and a follower is on the lookout
//! ([`super::lookout`]: it waits in the kernel on the role's own epoll instance and on its next
//! deadline), the leader parks the role, unheld, and wakes no one: the kernel wakes the
//! follower only if an event or a deadline comes while the request runs, and the leader takes
//! the role back when it is done. Otherwise it first hands the I/O role to a follower (or a new
//! thread), a wake-up between threads beside the one that brought the request. With no
//! follower to take over and the cap reached, the leader keeps the I/O role and the request
//! waits for a thread that finishes: reading, refusals and deadlines never wait for a handler.
//! Chores that come due ([`super::chores`]) are work like a request: handed to a thread the
//! same way.
//!
//! The line they serve holds connections, not requests: a connection with requests waiting is in
//! it once, a thread takes one request of the connection at its head and puts the connection
//! back at the end when more wait. So a connection with a hundred requests queued delays another
//! connection's request by at most one request per thread, never by its whole backlog.
//!
//! Threads start on demand up to a cap and end when idle, so an idle server holds one (in
//! epoll) however many connections are open. The follower woken is the one that went idle last
//! (a stack, not a queue): under a light steady load the same few threads take every turn, and
//! the surplus a burst started wait at the bottom until their idle time ends them. Woken in
//! turn, each would be woken before its idle time ran out, and a burst's threads would stay for
//! as long as any client kept calling. A burst's thread left holding the I/O role hands it back
//! to the home once no request has needed a second thread for that idle time, however often a
//! lone caller's requests come meanwhile (each runs with the role parked, see above).
//!
//! A program may lend the pool a thread of its own ([`Pool::serve_here`], knid's main thread):
//! the pool's home. It never ends idle, it is woken before any other follower (so it is one of
//! the two that take turns under a light load), and a thread holding the I/O role while the
//! home waits hands the role back to it and ends once no warm thread is wanted: an idle server
//! runs on the lent thread alone. It leaves when the chores ask, handing the I/O role on.

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use knid_core::locks::LockExt;
use protobuf::Message;
use ttrpc::proto::{Code, Request};

use super::chores::Chores;
use super::conn::{response_frame, status_frame, Call, Conn};
use super::lookout::{Lookout, Sighted};
use super::waker::{Control, Waker};

/// The method map the ttrpc code generator makes (`pb::create_runtime` and the like) and
/// [`Server::start`](super::Server::start) serves: wire path `/<service>/<Method>` → handler.
pub type Methods = HashMap<String, Box<dyn ttrpc::MethodHandler + Send + Sync>>;

/// Why [`Server::serve_here`](super::Server::serve_here) returned; the server goes on serving
/// on threads of its own until it is shut down, except after [`Leave::Stopped`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// The chores asked ([`Chores::run`] broke).
    Asked,
    /// The chores panicked; they run no more.
    ChoresPanicked,
    /// The server stopped: shut down, or its I/O failed.
    Stopped,
}

/// The I/O role, handed from thread to thread ([`super::io`] holds it): one turn of its loop at
/// a time, until a request waits or it stops.
pub(super) trait Role: Send {
    /// Waits for events and handles them; with `idle_after`, the wait ends after at most that
    /// long without any ([`Turn::Idle`]).
    fn turn(&mut self, idle_after: Option<Duration>) -> Turn;

    /// How long the role may go unheld before a deadline of its own needs a turn; `None`: only
    /// events do.
    fn wakes_in(&self) -> Option<Duration>;

    /// The epoll instance the role waits on: readable when events wait for it.
    fn ready_fd(&self) -> std::os::fd::BorrowedFd<'_>;
}

/// How one [`Role::turn`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    /// Events came and were handled.
    Busy,
    /// The wait ended without any: after the caller's `idle_after`, or sooner when an open
    /// deadline or paused accepts needed a shorter wait.
    Idle,
    /// The server shut down (or epoll failed).
    Stopped,
}

/// Threads kept while calls come: the one in epoll and a follower to take its place, so a lone
/// caller is served without starting a thread; more start when calls overlap, and end again
/// once idle ([`IDLE_EXIT`]).
const WARM_THREADS: usize = 2;
/// How long a surplus follower waits for work before it ends (counted after
/// [`IDLE_RECLAIM`] when it served requests); a surplus thread in the I/O role hands it back to
/// the waiting home after as long without events.
const IDLE_EXIT: Duration = Duration::from_secs(5);
/// How long the warm follower waits for work before it ends too: a caller that comes back
/// within it (a kubelet's status poll, a sandbox's next call) finds it; an idle server holds
/// only the thread in epoll.
const WARM_IDLE_EXIT: Duration = Duration::from_secs(30);
/// How long after the warm follower's end, when the calls' code may still be mapped
/// ([`calls_left_code`]), the thread in the I/O role releases it ([`end`]): the threads the
/// last calls started beside the API's (the store's flusher, the reaper) stay as long as the
/// warm follower after their last work, which comes a moment after the last call, and their
/// own ends run code too.
const AFTER_CALLS_SETTLE: Duration = Duration::from_secs(5);
/// How long a thread that served requests waits without work before it frees what its calls had
/// sled retire ([`knid_core::memory::thread_ends_idle`]): a thread that stays (the one in epoll,
/// the warm follower) would otherwise keep it, sled's 512 KiB log buffers among it.
const IDLE_RECLAIM: Duration = Duration::from_secs(1);

/// What the threads share, under one lock.
struct State {
    /// The I/O role while no thread holds it: between a leader's hand-over and a follower
    /// taking it, while it is parked, and before the first thread.
    io: Option<Box<dyn Role>>,
    /// Connections with a request waiting, in turn.
    line: VecDeque<Arc<Conn>>,
    /// The chores are due and no thread runs them yet.
    chores_due: bool,
    /// Threads running, the home included.
    threads: usize,
    /// Threads waiting for work or the I/O role and not woken yet, the one that went idle last
    /// at the end: [`wake_one`] takes it (after the home).
    idle: Vec<Arc<Follower>>,
    /// The home is in the pool ([`Pool::serve_here`]).
    home: bool,
    /// The home, while it waits for work or the I/O role and is not woken yet.
    home_idle: Option<Arc<Follower>>,
    /// Where the I/O role waits unheld (`None` if it could not be made).
    lookout: Option<Arc<Lookout>>,
    /// The follower waiting on the lookout (also in `idle`).
    watcher: Option<Arc<Follower>>,
    /// The role in `io` is parked: the lookout watches it.
    parked: bool,
    /// Requests run with the role parked.
    #[cfg(test)]
    parks: usize,
    /// The home is to leave, and why.
    leaving: Option<Leave>,
    /// When a request was last served (`None`: none yet).
    last_call: Option<Instant>,
    /// When a request last needed a thread beside the one that read it: the I/O role handed
    /// over for it, or its connection put back in line with more waiting (`None`: never). A
    /// surplus thread in the I/O role hands it back to the home [`IDLE_EXIT`] after
    /// ([`hands_back`]), however often a lone caller's requests come meanwhile.
    last_overlap: Option<Instant>,
    /// The server shut down: threads end once their request is done.
    stopped: bool,
    /// A release of knid's code put off: the thread in the I/O role makes it once due, unless
    /// a burst runs then (its own end releases it).
    code_release: Option<PutOff>,
    /// Put-off releases of knid's code the I/O role made once due.
    #[cfg(test)]
    code_releases_resumed: usize,
}

impl State {
    /// Whether a lone request may run with the role parked: a follower watches the lookout and
    /// no chores are due.
    fn may_park(&self) -> bool {
        self.lookout.is_some() && self.watcher.is_some() && !self.chores_due
    }
}

/// A release of knid's code put off ([`State::code_release`]).
#[derive(Debug, Clone, Copy)]
struct PutOff {
    /// When it is due.
    at: Instant,
    /// The warm follower's end after calls put it off ([`end`]), not a burst's end that came
    /// too soon after the last release ([`knid_core::memory::give_back_code_unless_recent`]):
    /// the next call drops it, and that call's end puts it off again.
    after_calls: bool,
}

struct Shared {
    methods: Methods,
    request_timeout: Duration,
    waker: Waker,
    max_threads: usize,
    chores: Option<Mutex<Box<dyn Chores>>>,
    state: Mutex<State>,
    /// [`Pool::wait_stopped`] waits on it (apart, so that no follower's wake-up goes there).
    stop: Condvar,
}

/// A thread waiting as a follower: woken through its own condition variable (with the state's
/// lock), so that exactly the one chosen wakes.
#[derive(Default)]
struct Follower {
    wake: Condvar,
    /// Set (under the state's lock) when it was taken off [`State::idle`] (or
    /// [`State::home_idle`]) to run.
    woken: AtomicBool,
}

/// A handle on the threads and their line.
#[derive(Clone)]
pub(super) struct Pool {
    shared: Arc<Shared>,
}

/// What a thread takes when it is free: a connection's next request, or the chores.
enum Work {
    Call(Arc<Conn>),
    Chores,
}

/// How a leader's turn at the I/O role ended.
enum Led {
    /// It handed the role over and does this work.
    Work(Work),
    /// It handed the role over and left the pool: the home leaving, or a thread that handed
    /// the role back to the home and ends.
    Left,
    /// The server shut down.
    Stopped,
}

impl Pool {
    /// Threads (up to `max_threads`, the leader included) for `methods`, and `chores` beside
    /// them; none runs until [`Pool::begin`] or [`Pool::serve_here`].
    pub(super) fn new(
        methods: Methods,
        request_timeout: Duration,
        waker: Waker,
        max_threads: usize,
        chores: Option<Box<dyn Chores>>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                methods,
                request_timeout,
                waker,
                max_threads: max_threads.max(WARM_THREADS),
                chores: chores.map(Mutex::new),
                state: Mutex::new(State {
                    io: None,
                    line: VecDeque::new(),
                    chores_due: false,
                    threads: 0,
                    idle: Vec::new(),
                    home: false,
                    home_idle: None,
                    lookout: None,
                    watcher: None,
                    parked: false,
                    #[cfg(test)]
                    parks: 0,
                    leaving: None,
                    last_call: None,
                    last_overlap: None,
                    stopped: false,
                    code_release: None,
                    #[cfg(test)]
                    code_releases_resumed: 0,
                }),
                stop: Condvar::new(),
            }),
        }
    }

    /// Gives the pool the I/O role `io`, for the first thread to take.
    pub(super) fn hold(&self, io: Box<dyn Role>) {
        let lookout = Lookout::new(io.ready_fd())
            .inspect_err(|e| {
                log::warn!("api: no lookout ({e}): every request hands the I/O role over");
            })
            .ok()
            .map(Arc::new);
        let mut state = self.shared.state.acquire();
        state.lookout = lookout;
        state.io = Some(io);
    }

    /// Starts the first thread, which takes the I/O role.
    pub(super) fn begin(&self) -> std::io::Result<()> {
        let mut state = self.shared.state.acquire();
        state.threads += 1;
        spawn(&self.shared).inspect_err(|_| {
            state.threads -= 1;
            // The I/O state holds this pool: let both go.
            drop(state.io.take());
        })
    }

    /// Serves on the calling thread, the pool's home, until the chores ask it to leave or the
    /// server stops; see the module docs. Once at a time.
    pub(super) fn serve_here(&self) -> Leave {
        {
            let mut state = self.shared.state.acquire();
            if state.home {
                log::error!("api: a second thread was lent to the server; it is not used");
                return Leave::Stopped;
            }
            state.home = true;
            state.threads += 1;
        }
        run(&self.shared, true);
        let mut state = self.shared.state.acquire();
        state.home = false;
        state.leaving.take().unwrap_or(Leave::Stopped)
    }

    /// Queues a request of `conn` (counted in its in-flight requests). Called by the leader,
    /// which hands the line out when its turn ends ([`lead`]).
    pub(super) fn submit(&self, conn: &Arc<Conn>, call: Call) {
        if conn.enqueue(call) {
            self.shared.state.acquire().line.push_back(Arc::clone(conn));
        }
    }

    /// The chores are due: the leader hands them out when its turn ends, as a request.
    pub(super) fn chores_due(&self) {
        self.shared.state.acquire().chores_due = true;
    }

    /// Put-off releases of knid's code the I/O role made once due ([`State::code_release`]).
    #[cfg(test)]
    pub(super) fn code_releases_resumed(&self) -> usize {
        self.shared.state.acquire().code_releases_resumed
    }

    /// Requests run with the I/O role parked on the lookout.
    #[cfg(test)]
    pub(super) fn parks(&self) -> usize {
        self.shared.state.acquire().parks
    }

    /// Whether the next request read would run with the role parked: a follower watches the
    /// lookout, no request waits and the role is held, not parked.
    #[cfg(test)]
    pub(super) fn would_park(&self) -> bool {
        let state = self.shared.state.acquire();
        state.may_park() && !state.parked && state.io.is_none() && state.line.is_empty()
    }

    /// Threads running (the home included), and whether the home waits as a follower.
    #[cfg(test)]
    pub(super) fn threads(&self) -> (usize, bool) {
        let state = self.shared.state.acquire();
        (state.threads, state.home_idle.is_some())
    }

    /// Returns once the leader has shut the I/O down (after [`super::Control::Shutdown`]), or at
    /// once, shutting it down here, when no thread is left to (none ever took it).
    pub(super) fn wait_stopped(&self) {
        let mut state = self.shared.state.acquire();
        if state.threads == 0 && !state.stopped {
            state.stopped = true;
            let io = state.io.take();
            drop(state);
            // Closes the listener and every connection.
            drop(io);
            return;
        }
        while !state.stopped {
            state = self
                .shared
                .stop
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Starts a thread, already counted in `threads`.
fn spawn(shared: &Arc<Shared>) -> std::io::Result<()> {
    let thread_shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("knid-api".into())
        .spawn(move || run(&thread_shared, false))
        .map(drop)
}

/// Starts one more thread when the cap allows; false when it does not or the start failed.
fn spawn_more(shared: &Arc<Shared>, state: &mut State) -> bool {
    if state.threads >= shared.max_threads {
        return false;
    }
    state.threads += 1;
    match spawn(shared) {
        Ok(()) => true,
        Err(e) => {
            log::warn!("api: cannot start a thread: {e}");
            state.threads -= 1;
            false
        }
    }
}

/// Wakes the home when it waits, else the follower that went idle last; false when none waits.
fn wake_one(state: &mut State) -> bool {
    let Some(follower) = state.home_idle.take().or_else(|| state.idle.pop()) else {
        return false;
    };
    follower.woken.store(true, Ordering::Relaxed);
    let watching = state
        .watcher
        .take_if(|watcher| Arc::ptr_eq(watcher, &follower))
        .is_some();
    match (&state.lookout, watching) {
        (Some(lookout), true) => lookout.ring(),
        _ => follower.wake.notify_one(),
    }
    true
}

/// Wakes every follower (the server stopped).
fn wake_all(state: &mut State) {
    while wake_one(state) {}
}

/// Whether a warm follower is still wanted: a call came within [`WARM_IDLE_EXIT`].
fn warm_wanted(state: &State) -> bool {
    state
        .last_call
        .is_some_and(|last| last.elapsed() < WARM_IDLE_EXIT)
}

/// The work a free thread takes: the chores first (a signal may be waiting), then the line.
fn next_work(state: &mut State) -> Option<Work> {
    if std::mem::take(&mut state.chores_due) {
        return Some(Work::Chores);
    }
    state.line.pop_front().map(Work::Call)
}

/// A thread leaves the pool: counted out, and when it was the last of a burst's surplus, what
/// the burst took (its threads' buffers, the connections it closed, the code it ran) goes back
/// to the kernel now, while a steady light load may keep the warm threads busy for good. When
/// it was the warm follower (no call for [`WARM_IDLE_EXIT`]) and the calls' code may still be
/// mapped ([`calls_left_code`]), the code they ran goes [`AFTER_CALLS_SETTLE`] later: a light
/// load (a kubelet's pods one at a time) starts no burst, and its code would otherwise stay
/// mapped until one.
fn end(shared: &Shared, mut state: MutexGuard<'_, State>) {
    state.threads -= 1;
    let burst_over = state.threads == WARM_THREADS;
    if state.threads < WARM_THREADS
        && !warm_wanted(&state)
        && state.code_release.is_none()
        && calls_left_code(&state)
    {
        state.code_release = Some(PutOff {
            at: Instant::now() + AFTER_CALLS_SETTLE,
            after_calls: true,
        });
        shared.waker.send(Control::CodeRelease);
    }
    drop(state);
    if burst_over {
        release_code(shared);
    }
}

/// Whether the code the last calls ran, or their aftermath runs, may still be mapped: a call was
/// served, and knid's code was last released before that aftermath was over (the warm
/// follower's end and the flusher's and the reaper's, [`WARM_IDLE_EXIT`] after the last call,
/// then [`AFTER_CALLS_SETTLE`]). A release in between (a burst's end, a reconciler round) left
/// what the aftermath maps; one after it is this one, and the ends of threads that ran chores at
/// idle set off no other.
fn calls_left_code(state: &State) -> bool {
    let released = knid_core::memory::code_released_at();
    state.last_call.is_some_and(|call| {
        released.is_none_or(|at| at < call + WARM_IDLE_EXIT + AFTER_CALLS_SETTLE)
    })
}

/// Releases knid's code after a burst (or the last calls, [`end`]); when the last release was
/// too recent for that, the thread in the I/O role does it once it may
/// ([`State::code_release`]), so that the code a burst mapped never stays for want of a later
/// burst.
fn release_code(shared: &Shared) {
    let Some(next) = knid_core::memory::give_back_code_unless_recent("calls") else {
        return;
    };
    shared.state.acquire().code_release = Some(PutOff {
        at: next,
        after_calls: false,
    });
    // Its wait may outlast that (at idle it has no end): it looks again.
    shared.waker.send(Control::CodeRelease);
}

/// Whether the I/O role releases knid's code now: a put-off release is due and no burst runs
/// (one that does releases it when it ends). A due release is taken off either way.
fn code_release_due(state: &mut State) -> bool {
    match state.code_release {
        Some(PutOff { at, .. }) if at <= Instant::now() => {
            state.code_release = None;
            state.threads <= WARM_THREADS
        }
        _ => false,
    }
}

/// One thread: takes the I/O role when it is free, else the next work, else waits as a
/// follower. The caller counted it in `threads`. The `home` returns when asked to leave.
fn run(shared: &Arc<Shared>, home: bool) {
    // Served a request since it last freed what sled retired.
    let mut served = false;
    let me = Arc::new(Follower::default());
    // Back from an idle wait without being woken: it goes back under the others, as the one
    // idle longest, not on top as if it had just worked.
    let mut idled = false;
    let mut state = shared.state.acquire();
    loop {
        if state.stopped {
            break;
        }
        if home && state.leaving.is_some() {
            // The role was handed to it (or is on its way to a follower): someone else takes it.
            if state.io.is_some() && !wake_one(&mut state) && !spawn_more(shared, &mut state) {
                log::warn!("api: no thread takes over the I/O role the lent thread leaves");
            }
            break;
        }
        if let Some(io) = state.io.take() {
            let unpark = std::mem::take(&mut state.parked)
                .then(|| state.lookout.clone())
                .flatten();
            drop(state);
            if let Some(lookout) = unpark {
                lookout.unpark();
            }
            state = match lead(shared, io, &mut served, home) {
                Led::Work(work) => work_then_lock(shared, work, &mut served),
                Led::Stopped => shared.state.acquire(),
                // Counted out already.
                Led::Left => return,
            };
            continue;
        }
        if let Some(work) = next_work(&mut state) {
            drop(state);
            state = work_then_lock(shared, work, &mut served);
            continue;
        }
        if home {
            state = wait_home(shared, state, &me, &mut served);
            continue;
        }
        if state.home && !warm_wanted(&state) {
            // The home takes whatever comes next and no warm thread is wanted: nothing to wait
            // for (a thread started for chores at idle, whose role the home took back).
            end(shared, state);
            if served {
                knid_core::memory::thread_ends_idle();
            }
            return;
        }
        me.woken.store(false, Ordering::Relaxed);
        if std::mem::take(&mut idled) {
            state.idle.insert(0, Arc::clone(&me));
        } else {
            state.idle.push(Arc::clone(&me));
        }
        let wait = if served { IDLE_RECLAIM } else { IDLE_EXIT };
        let timed_out;
        (state, timed_out) = wait_idle(shared, state, &me, wait);
        // Not woken (its time ran out, the role parked needs it, or a spurious wake-up): still
        // listed.
        if !me.woken.load(Ordering::Relaxed) {
            state.idle.retain(|f| !Arc::ptr_eq(f, &me));
        }
        let idle = timed_out
            && !state.stopped
            && state.io.is_none()
            && state.line.is_empty()
            && !state.chores_due;
        if !idle {
            continue;
        }
        idled = true;
        if served {
            drop(state);
            knid_core::memory::thread_ends_idle();
            served = false;
            state = shared.state.acquire();
            continue;
        }
        if state.threads > WARM_THREADS || !warm_wanted(&state) {
            end(shared, state);
            return;
        }
    }
    state.threads -= 1;
}

/// A follower's wait for work or the I/O role, up to `wait`: on the lookout when no follower
/// watches it yet (the home never does), else on its own condition variable. Returns the lock
/// again, and whether the time ran out.
fn wait_idle<'s>(
    shared: &'s Shared,
    mut state: MutexGuard<'s, State>,
    me: &Arc<Follower>,
    wait: Duration,
) -> (MutexGuard<'s, State>, bool) {
    let lookout = state
        .lookout
        .clone()
        .filter(|_| state.watcher.is_none() && !state.stopped);
    let Some(lookout) = lookout else {
        let (state, waited) = me
            .wake
            .wait_timeout(state, wait)
            .unwrap_or_else(|p| p.into_inner());
        return (state, waited.timed_out());
    };
    state.watcher = Some(Arc::clone(me));
    drop(state);
    let sighted = lookout.wait(wait);
    let mut state = shared.state.acquire();
    // Woken through the bell, `wake_one` took it off already.
    state.watcher.take_if(|watcher| Arc::ptr_eq(watcher, me));
    let timed_out = match sighted {
        Ok(sighted) => sighted == Sighted::Nothing,
        Err(e) => {
            // A role parked on it now is this follower's to take (it looks at once); no role is
            // parked again, and followers wait on their own condition variables.
            log::error!(
                "api: the lookout failed, requests hand the I/O role over from now on: {e}"
            );
            state.lookout = None;
            false
        }
    };
    (state, timed_out)
}

/// The home waits for work or the I/O role: woken before any follower, and never ending for
/// want of work. Once no warm thread is wanted it asks the thread in the I/O role to hand the
/// role back: after chores run at idle, the idle server is again the home alone.
fn wait_home<'s>(
    shared: &'s Shared,
    mut state: MutexGuard<'s, State>,
    me: &Arc<Follower>,
    served: &mut bool,
) -> MutexGuard<'s, State> {
    me.woken.store(false, Ordering::Relaxed);
    state.home_idle = Some(Arc::clone(me));
    if !warm_wanted(&state) {
        shared.waker.send(Control::HomeIdle);
    }
    let (mut state, timed_out) = if *served {
        let (state, waited) = me
            .wake
            .wait_timeout(state, IDLE_RECLAIM)
            .unwrap_or_else(|p| p.into_inner());
        (state, waited.timed_out())
    } else {
        (
            me.wake.wait(state).unwrap_or_else(|p| p.into_inner()),
            false,
        )
    };
    if !me.woken.load(Ordering::Relaxed) {
        state.home_idle = None;
    }
    if timed_out {
        drop(state);
        knid_core::memory::thread_ends_idle();
        *served = false;
        state = shared.state.acquire();
    }
    state
}

/// A turn at the I/O role: runs the epoll loop until work waits and another thread can take
/// the role over, the home is to leave, a thread other than the home can hand the role back to
/// it ([`hands_back`]), or the server shuts down. A thread that `served` frees what sled retired
/// at the first wait without events, which lasts at most [`IDLE_RECLAIM`].
fn lead(shared: &Arc<Shared>, mut io: Box<dyn Role>, served: &mut bool, home: bool) -> Led {
    // Since when the role has seen no events.
    let mut quiet_since = Instant::now();
    loop {
        let idle_after;
        let release;
        {
            let mut state = shared.state.acquire();
            if home && state.leaving.is_some() {
                state.io = Some(io);
                if !wake_one(&mut state) && !spawn_more(shared, &mut state) {
                    log::warn!("api: no thread takes over the I/O role the lent thread leaves");
                }
                state.home = false;
                state.threads -= 1;
                return Led::Left;
            }
            if state.chores_due || !state.line.is_empty() {
                match park(&mut state, io) {
                    Ok(work) => return Led::Work(work),
                    Err(kept) => io = kept,
                }
                match hand_over(shared, &mut state, io) {
                    Ok(work) => return Led::Work(work),
                    Err(kept) => io = kept,
                }
            }
            if !home && hands_back(&state, quiet_since) {
                state.io = Some(io);
                // The home waits: it is the one woken.
                wake_one(&mut state);
                end(shared, state);
                return Led::Left;
            }
            release = code_release_due(&mut state);
            #[cfg(test)]
            {
                state.code_releases_resumed += usize::from(release);
            }
            let code_release = state
                .code_release
                .map(|put_off| put_off.at.saturating_duration_since(Instant::now()));
            idle_after = [wait_for(home, &state, *served, quiet_since), code_release]
                .into_iter()
                .flatten()
                .min();
        }
        if release {
            release_code(shared);
            continue;
        }
        let turn = catch_unwind(AssertUnwindSafe(|| io.turn(idle_after))).unwrap_or_else(|_| {
            log::error!("api: the I/O role panicked, the API stops serving");
            Turn::Stopped
        });
        match turn {
            Turn::Busy => quiet_since = Instant::now(),
            Turn::Idle => {
                if std::mem::take(served) {
                    knid_core::memory::thread_ends_idle();
                }
            }
            Turn::Stopped => {
                // Closes the listener and every connection before anyone is told.
                drop(io);
                let mut state = shared.state.acquire();
                state.stopped = true;
                wake_all(&mut state);
                shared.stop.notify_all();
                return Led::Stopped;
            }
        }
    }
}

/// Whether a thread other than the home, holding the I/O role, hands it back to the waiting home
/// and ends: with nothing to hand out, once no warm thread is wanted, or once it is surplus and
/// no request has needed a second thread for [`IDLE_EXIT`] (the time a surplus follower waits
/// before it ends; [`calm_for`]). A lone caller's requests each run with the role parked, so
/// calls that keep coming do not keep a burst's thread in the role: the home takes it back,
/// the thread on the lookout stays as the warm one, and the rest end idle.
fn hands_back(state: &State, quiet_since: Instant) -> bool {
    state.home_idle.is_some()
        && !state.chores_due
        && state.line.is_empty()
        && (!warm_wanted(state)
            || (state.threads > WARM_THREADS && calm_for(state, quiet_since) >= IDLE_EXIT))
}

/// How long the I/O role has gone without a request that needed a second thread: the longer of
/// the time since the last such request ([`State::last_overlap`]) and the time since the role's
/// last event.
fn calm_for(state: &State, quiet_since: Instant) -> Duration {
    let quiet = quiet_since.elapsed();
    state
        .last_overlap
        .map_or(quiet, |overlap| overlap.elapsed().max(quiet))
}

/// How long the I/O role's next wait may last without events before its holder looks again:
/// [`IDLE_RECLAIM`] for a thread that served, and for a thread other than a home's, until it
/// could hand the role back ([`hands_back`]). A time already past is left out: the home is busy
/// then, and tells the holder when it waits ([`wait_home`]), or the next event has it look
/// again.
fn wait_for(home: bool, state: &State, served: bool, quiet_since: Instant) -> Option<Duration> {
    let reclaim = served.then_some(IDLE_RECLAIM);
    if home || !state.home {
        return reclaim;
    }
    let warm_ends = state
        .last_call
        .map(|last| WARM_IDLE_EXIT.saturating_sub(last.elapsed()));
    let surplus_ends = (state.threads > WARM_THREADS)
        .then(|| IDLE_EXIT.saturating_sub(calm_for(state, quiet_since)));
    [reclaim, warm_ends, surplus_ends]
        .into_iter()
        .flatten()
        .filter(|wait| !wait.is_zero())
        .min()
}

/// Parks the I/O role on the lookout and takes the request waiting, when it is the only work
/// waiting and a follower watches the lookout (see the module docs); the role back otherwise.
fn park(state: &mut State, io: Box<dyn Role>) -> Result<Work, Box<dyn Role>> {
    let lookout = match &state.lookout {
        Some(lookout) if state.may_park() && state.line.len() == 1 => Arc::clone(lookout),
        _ => return Err(io),
    };
    if let Err(e) = lookout.park(io.wakes_in()) {
        log::warn!("api: cannot park the I/O role, handing it over: {e}");
        lookout.unpark();
        return Err(io);
    }
    state.parked = true;
    state.io = Some(io);
    #[cfg(test)]
    {
        state.parks += 1;
    }
    Ok(next_work(state).expect("a request was waiting"))
}

/// Gives the I/O role to the home or a follower (or a new thread) and takes the work waiting;
/// the role back when no thread can take it.
fn hand_over(
    shared: &Arc<Shared>,
    state: &mut MutexGuard<'_, State>,
    io: Box<dyn Role>,
) -> Result<Work, Box<dyn Role>> {
    if !state.line.is_empty() {
        state.last_overlap = Some(Instant::now());
    }
    state.io = Some(io);
    if !wake_one(state) && !spawn_more(shared, state) {
        return Err(state.io.take().expect("the role was just put back"));
    }
    Ok(next_work(state).expect("work was waiting"))
}

/// Does `work`, and takes the lock back for the thread's next look.
fn work_then_lock<'s>(
    shared: &'s Arc<Shared>,
    work: Work,
    served: &mut bool,
) -> MutexGuard<'s, State> {
    match work {
        Work::Call(conn) => serve_then_lock(shared, &conn, served),
        Work::Chores => {
            run_chores(shared);
            // The chores use the store as requests do.
            *served = true;
            shared.state.acquire()
        }
    }
}

/// Runs the chores and tells the I/O role when they are due next; when they ask the home to
/// leave (or panic), marks it leaving and wakes it if it waits.
fn run_chores(shared: &Shared) {
    let Some(chores) = &shared.chores else {
        return;
    };
    let ran = {
        let mut chores = chores.acquire();
        catch_unwind(AssertUnwindSafe(|| chores.run()))
    };
    let (flow, leave) = match ran {
        Ok(ControlFlow::Continue(next)) => (ControlFlow::Continue(next), None),
        Ok(ControlFlow::Break(())) => (ControlFlow::Break(()), Some(Leave::Asked)),
        Err(_) => {
            log::error!("api: the chores panicked; they run no more");
            (ControlFlow::Break(()), Some(Leave::ChoresPanicked))
        }
    };
    if let Some(leave) = leave {
        let mut state = shared.state.acquire();
        state.leaving.get_or_insert(leave);
        // Woken, it sees that it leaves; in the I/O role, the message below ends its wait.
        if let Some(home) = state.home_idle.take() {
            home.woken.store(true, Ordering::Relaxed);
            home.wake.notify_one();
        }
    }
    shared.waker.send(Control::ChoresDone(flow));
}

/// [`serve`]s, notes it, and takes the lock back for the thread's next look.
fn serve_then_lock<'s>(
    shared: &'s Arc<Shared>,
    conn: &Arc<Conn>,
    served: &mut bool,
) -> MutexGuard<'s, State> {
    serve(shared, conn);
    *served = true;
    let mut state = shared.state.acquire();
    state.last_call = Some(Instant::now());
    if state
        .code_release
        .is_some_and(|put_off| put_off.after_calls)
    {
        state.code_release = None;
    }
    state
}

/// Serves the next request of `conn`, putting the connection back in line first when more wait.
fn serve(shared: &Arc<Shared>, conn: &Arc<Conn>) {
    let Some((call, more)) = conn.dequeue() else {
        return;
    };
    if more {
        let mut state = shared.state.acquire();
        state.line.push_back(Arc::clone(conn));
        state.last_overlap = Some(Instant::now());
        if !wake_one(&mut state) {
            // Without a follower this thread takes it when done, unless a new one can.
            spawn_more(shared, &mut state);
        }
    }
    let bytes = call.payload.len();
    // The operation's log line waits for its reply.
    let lines = crate::operation::hold_lines();
    let frame = answer(shared, conn, call);
    if conn.answer(&frame, bytes) {
        shared.waker.look(conn.id);
    }
    drop(lines);
}

/// The response frame for one request.
fn answer(shared: &Shared, conn: &Conn, call: Call) -> Vec<u8> {
    let stream_id = call.header.stream_id;
    match self::call(shared, conn, call) {
        Ok(payload) => response_frame(stream_id, &payload),
        Err((code, message)) => status_frame(stream_id, code, message),
    }
}

/// A response's payload, or the status to answer instead.
type Answer = Result<Vec<u8>, (Code, String)>;

/// Decodes and runs one request.
fn call(shared: &Shared, conn: &Conn, call: Call) -> Answer {
    let Call {
        header,
        payload,
        received,
    } = call;
    let req = Request::parse_from_bytes(&payload).map_err(|e| {
        (
            Code::INVALID_ARGUMENT,
            format!("request: not a ttrpc Request message: {e}"),
        )
    })?;
    let path = format!("/{}/{}", req.service, req.method);
    let method = shared
        .methods
        .get(&path)
        .ok_or_else(|| (Code::UNIMPLEMENTED, format!("{path}: no such method")))?;
    let timeout = timeout(req.timeout_nano, shared.request_timeout)
        .checked_sub(received.elapsed())
        .filter(|left| !left.is_zero())
        .ok_or_else(|| {
            (
                Code::DEADLINE_EXCEEDED,
                format!("{path}: the deadline passed while the request was queued"),
            )
        })?;
    let (res_tx, res_rx) = std::sync::mpsc::channel();
    let ctx = ttrpc::TtrpcContext {
        fd: conn.fd(),
        cancel_rx: crossbeam_channel::never(),
        mh: header,
        res_tx,
        metadata: ttrpc::context::from_pb(&req.metadata),
        timeout_nano: i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX),
        conn_ctx: Arc::clone(&conn.context),
    };
    match catch_unwind(AssertUnwindSafe(|| method.handler(ctx, req))) {
        Ok(Ok(())) => res_rx.try_recv().map(|(_, payload)| payload).map_err(|_| {
            (
                Code::INTERNAL,
                format!("{path}: the handler gave no response"),
            )
        }),
        // The generated handler fails when the payload does not decode as the method's request
        // (or the response would not encode).
        Ok(Err(e)) => Err((
            Code::INVALID_ARGUMENT,
            format!("{path}: {}", ttrpc_error(&e)),
        )),
        Err(_) => {
            log::error!("api: {path} panicked (request of {})", conn.peer);
            Err((Code::INTERNAL, format!("{path}: the handler panicked")))
        }
    }
}

/// The deadline a request runs under: its own, capped by `request_timeout`, which also applies
/// to a request that carries none.
pub(super) fn timeout(timeout_nano: i64, request_timeout: Duration) -> Duration {
    u64::try_from(timeout_nano)
        .ok()
        .filter(|n| *n > 0)
        .map_or(request_timeout, |n| {
            Duration::from_nanos(n).min(request_timeout)
        })
}

/// The caller's deadline, for the services: the handler gets [`timeout`] as the request's
/// `timeout_nano` but nothing enforces it, so the core gets it as an instant. Zero (or a
/// nonsensical negative) means none.
pub(crate) fn deadline(timeout_nano: i64, received: Instant) -> Option<Instant> {
    u64::try_from(timeout_nano)
        .ok()
        .filter(|nanos| *nanos > 0)
        .and_then(|nanos| received.checked_add(Duration::from_nanos(nanos)))
}

fn ttrpc_error(e: &ttrpc::Error) -> String {
    match e {
        ttrpc::Error::Others(text) => text.clone(),
        ttrpc::Error::RpcStatus(status) => status.message.clone(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests;
