//! The cluster thread (`knid-cluster`): one event loop for the three parts of cluster mode that
//! act on what the API server says: the controller (the Nodes applied to this node's networks
//! and routes), the publisher (this node's state written on its Node) and NetworkPolicy's
//! engine. Each takes what arrived on its channels, runs what is due and says when it next
//! needs a turn; the loop waits on all their channels at once, with the earliest of those
//! instants as its timeout, so an idle cluster mode costs one thread besides its watches.
//!
//! A turn holds up the others for as long as it runs, so none blocks for long here: the
//! publisher's HTTP writes run on a writer thread of their own ([`super::writer`]), and an
//! attach waiting for its pod's isolation runs the policy engine on its own thread
//! ([`crate::node::policy::Policies::pods_changed`]), so it never waits behind the controller
//! applying a Node list. What the watches send waits meanwhile in their channels.

use std::time::Instant;

use crossbeam_channel::{Receiver, Select, TryRecvError};

use super::controller::Controller;
use super::reflector::Learned;
use super::writer::Publishing;
use crate::node::policy::PolicyMode;

/// What the cluster thread runs.
pub struct Parts {
    /// The controller.
    pub controller: Controller,
    /// The Node watch's channel, to the controller (`None` once the watch has ended).
    pub learned: Option<Receiver<Learned>>,
    /// The publisher.
    pub publishing: Publishing,
    /// NetworkPolicy, unless it is off.
    pub policy: Option<PolicyMode>,
}

/// Runs `parts` until `stop`'s sender is gone; a write in flight is waited for.
pub fn run(mut parts: Parts, stop: &Receiver<()>) {
    loop {
        wait(&parts, stop);
        if let Err(TryRecvError::Disconnected) = stop.try_recv() {
            break;
        }
        let now = Instant::now();
        // NetworkPolicy first: the pods' changes it answers are attaches waiting.
        if let Some(policy) = parts.policy.as_mut() {
            policy.turn(now);
        }
        if let Some(learned) = &parts.learned {
            if parts.controller.take_learned(learned) {
                log::error!("cluster: the Node watch ended; the last known Nodes stay applied");
                parts.learned = None;
            }
        }
        parts.controller.run_due(now);
        parts.publishing.turn(now);
    }
    parts.publishing.stop();
}

/// Waits until a channel of `parts` (or `stop`) has something, or a part's turn is due.
fn wait(parts: &Parts, stop: &Receiver<()>) {
    let mut select = Select::new();
    select.recv(stop);
    if let Some(learned) = &parts.learned {
        select.recv(learned);
    }
    parts.publishing.wait_on(&mut select);
    let mut due = parts.controller.next_due();
    if let Some(at) = parts.publishing.next_due() {
        due = due.min(at);
    }
    if let Some(policy) = &parts.policy {
        policy.wait_on(&mut select);
        due = due.min(policy.next_due());
    }
    // Which channel is ready does not matter: every part takes what it has.
    let _ = select.ready_deadline(due);
}
