//! Waking the thread in the I/O role: the messages it takes and the byte that ends its wait.

use std::io::Write;
use std::ops::ControlFlow;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;

/// Messages to the I/O role.
pub(super) enum Control {
    StopListening,
    Shutdown,
    /// A handler changed a connection in a way the I/O role must see.
    Look(u64),
    /// The chores ran: due again then (`Continue`), or never again (`Break`).
    ChoresDone(ControlFlow<(), Option<Instant>>),
    /// The thread lent with `serve_here` waits idle: the thread in the I/O role looks whether to
    /// hand it the role back ([`super::pool`]).
    HomeIdle,
    /// A release of knid's code was put off: the thread in the I/O role waits no longer than
    /// until it is due ([`super::pool`]).
    CodeRelease,
}

/// Wakes the thread in the I/O role with a [`Control`].
#[derive(Clone)]
pub(crate) struct Waker {
    pub(super) tx: Sender<Control>,
    pub(super) waker: Arc<UnixStream>,
}

impl Waker {
    pub(super) fn send(&self, control: Control) {
        if self.tx.send(control).is_ok() {
            // A full waker already has a wake-up pending.
            let _ = (&*self.waker).write(&[1]);
        }
    }

    /// Asks the I/O role to look at connection `id` again.
    pub(crate) fn look(&self, id: u64) {
        self.send(Control::Look(id));
    }
}
