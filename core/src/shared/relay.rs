//! A named thread started when there is work and ended when there is none, one at a time: each
//! start first joins the thread before it (which has ended, or is about to once it has handed
//! back its state), and the last one is taken out to be joined when its owner stops. The shard
//! lanes, the reaper and the netns refiller run on one each.

use std::thread::JoinHandle;

/// The last thread a role started; see the module docs. Kept under its owner's lock.
pub(crate) struct Relay {
    name: String,
    last: Option<JoinHandle<()>>,
}

impl Relay {
    /// A role whose threads are named `name`; none started yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            last: None,
        }
    }

    /// Joins the thread started before (logging a panic of it), then runs `work` on a new one.
    /// On an error `work` was dropped unrun.
    pub fn start(&mut self, work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        if let Some(ended) = self.last.take() {
            join(&self.name, ended);
        }
        self.last = Some(
            std::thread::Builder::new()
                .name(self.name.clone())
                .spawn(work)?,
        );
        Ok(())
    }

    /// The last thread started, to [`Last::join`] once the owner's lock is released.
    pub fn take(&mut self) -> Last {
        Last {
            name: self.name.clone(),
            thread: self.last.take(),
        }
    }
}

/// A thread taken out of its [`Relay`], if one was started.
pub(crate) struct Last {
    name: String,
    thread: Option<JoinHandle<()>>,
}

impl Last {
    /// Waits for the thread to end, logging a panic of it.
    pub fn join(self) {
        if let Some(thread) = self.thread {
            join(&self.name, thread);
        }
    }
}

fn join(name: &str, thread: JoinHandle<()>) {
    if thread.join().is_err() {
        log::error!("{name} panicked");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn each_start_joins_the_thread_before_and_take_gives_the_last() {
        let mut relay = Relay::new("knid-test-relay");
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let ran = Arc::clone(&ran);
            relay
                .start(move || {
                    assert_eq!(
                        std::thread::current().name(),
                        Some("knid-test-relay"),
                        "not on a thread of the relay's name"
                    );
                    ran.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
        }
        // The two threads before were joined by the starts; the last one by this join.
        relay.take().join();
        assert_eq!(ran.load(Ordering::SeqCst), 3);
        // Nothing left: a second take joins nothing, and a panicking thread is only logged.
        relay.take().join();
        relay.start(|| panic!("a relay thread panics")).unwrap();
        relay.take().join();
    }
}
