//! The operations run on a shard, one at a time, with the shard's host netlink socket: on the
//! shard's worker thread or on their caller's ([`super::lane`]), always a thread in the host
//! netns.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;
use knid_netops::Rtnl;

use crate::error::{Error, Result};
use crate::lifecycle::{attach, check, detach};
use crate::model::{AttachRequest, GcFinding, GcKeep, IfName, MacAddr, Sandbox, SandboxId};
use crate::shared::Context;
use crate::{gc, netns};

/// One queued operation with its reply channel.
pub(crate) enum Job {
    Attach {
        req: Box<AttachRequest>,
        deadline: Option<Instant>,
        reply: Sender<Result<Sandbox>>,
    },
    /// Detach or Check of the interfaces of a sandbox (all, or `ifname`).
    Interfaces {
        op: InterfaceOp,
        id: SandboxId,
        ifname: Option<IfName>,
        deadline: Option<Instant>,
        reply: Sender<Result<()>>,
    },
    /// DeleteNetns of `owner` (its sandbox detached first); or the GC removal of its netns.
    DeleteNetns {
        owner: SandboxId,
        gc: Option<GcFinding>,
        reply: Sender<Result<()>>,
    },
    /// Garbage collection of one sandbox (re-checked here, where nothing else runs on it).
    Gc {
        id: SandboxId,
        keep: Option<Arc<GcKeep>>,
        corrupt: gc::Corrupt,
        dry_run: bool,
        reply: Sender<Result<Vec<GcFinding>>>,
    },
}

/// What a [`Job::Interfaces`] does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum InterfaceOp {
    Detach,
    /// With the MAC expected instead of the recorded one, if any.
    Check(Option<MacAddr>),
}

impl InterfaceOp {
    fn started(self) -> &'static str {
        match self {
            Self::Detach => "detach started",
            Self::Check(_) => "check started",
        }
    }
}

fn expired(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// Runs `job` and sends its result.
pub(crate) fn run(ctx: &Context, host: &mut Rtnl, job: Job) {
    // Every job may add or remove bridge ports; the counts taken before its kernel work are
    // not reused once its caller hears of it.
    let census = &ctx.port_census;
    match job {
        Job::Attach {
            req,
            deadline,
            reply,
        } => {
            let result = if expired(deadline) {
                Err(Error::DeadlineExceeded("attach started"))
            } else {
                attach::run(ctx, host, &req)
            };
            let attached = result.is_ok();
            // Isolated before the caller hears of the pod (and starts its containers).
            if let (true, Some(policies)) = (attached, &ctx.policies) {
                policies.pods_changed();
            }
            census.changed();
            // The caller may have gone away; the result is durable either way.
            let _ = reply.send(result);
            if attached {
                nudge_cluster(ctx);
            }
        }
        Job::Interfaces {
            op,
            id,
            ifname,
            deadline,
            reply,
        } => {
            let ifname = ifname.as_ref().map(IfName::as_str);
            let result = match op {
                _ if expired(deadline) => Err(Error::DeadlineExceeded(op.started())),
                InterfaceOp::Detach => detach::run(ctx, host, id.as_str(), |name| {
                    ifname.is_none_or(|n| name == n)
                }),
                InterfaceOp::Check(mac) => check::run(ctx, host, id.as_str(), ifname, mac),
            };
            census.changed();
            // A detach frees addresses only once the reaper has run: the reaper nudges then.
            let _ = reply.send(result);
        }
        Job::DeleteNetns { owner, gc, reply } => {
            let result = match gc {
                Some(finding) => netns::remove_finding(ctx, host, &finding),
                None => netns::delete(ctx, host, owner.as_str()).map(|_| ()),
            };
            census.changed();
            let _ = reply.send(result);
        }
        Job::Gc {
            id,
            keep,
            corrupt,
            dry_run,
            reply,
        } => {
            let result = gc::sandbox_findings(ctx, id.as_str(), keep.as_deref(), corrupt).and_then(
                |found| {
                    if !dry_run {
                        gc::remove_sandbox_findings(ctx, host, id.as_str(), &found)?;
                    }
                    Ok(found)
                },
            );
            census.changed();
            let _ = reply.send(result);
        }
    }
}

/// Tells cluster mode an address was taken, so a full pod network is published on the Node at
/// once.
fn nudge_cluster(ctx: &Context) {
    if let Some(view) = &ctx.cluster {
        view.nudge();
    }
}
