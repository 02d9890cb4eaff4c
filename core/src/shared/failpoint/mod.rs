//! Failpoints for crash tests (cargo feature `failpoints`; compiled to nothing without it).
//!
//! `KNID_FAILPOINTS=attach.pending=abort,detach.retired=error,attach.routed=sleep(2000)` makes
//! the named step boundaries abort the process (as a crash would: no unwinding, no flush), fail
//! the operation with an internal error, or pause it for a number of milliseconds (so a test can
//! change the world under it, e.g. delete the netns an attach is working in). Names are checked
//! at start-up against [`NAMES`], so a typo fails loudly.

/// The environment variable naming the armed failpoints (read only with the feature; a test
/// harness that starts knid looks for it too).
pub const VAR: &str = "KNID_FAILPOINTS";

/// Every step boundary, in lifecycle order.
pub const NAMES: &[&str] = &[
    // Attach: after the intent's records are written (the sandbox, the Pending attachments),
    // before the addresses they hold; after the whole intent (durable by the end of the veth's
    // creation); then after each kernel step: the veth created (host end up, on its bridge),
    // the pod side configured (one batch).
    "attach.recorded",
    "attach.pending",
    "attach.provisioning",
    // The interface's source guard installed, its host link not created yet (or, on a kernel
    // that cannot hook a missing device, just created).
    "attach.guarded",
    "attach.veth_created",
    "attach.routed",
    // Kinds beyond veth: a tap created (in the pod or, for DAN, on the host), a host device
    // moved into the pod, the DAN file written.
    "attach.tap_created",
    "attach.device_moved",
    "attach.dan_written",
    // A cni interface's ADD chain ran and its result is cached, not yet Attached.
    "attach.cni_added",
    // The sandbox's host ports are in knid's nf_tables table, not yet Attached.
    "attach.host_ports_added",
    // Every host link carries the completion mark (the attach's last kernel step), Attached not
    // yet recorded: recovery rolls the attach forward.
    "attach.completed",
    // Attached recorded: durable, or (roll_forward) applied and durable with the next flush.
    "attach.attached",
    // Rollback of a failed attach.
    "rollback.rolling_back",
    "rollback.deleted",
    // Detach, up to the reply: its Detaching marks applied (durable, or for veths flushing in
    // the background); its kernel work done, the marks' flush maybe not yet complete; Reaping
    // applied.
    "detach.detaching",
    // A veth's pod end looked up, not set down yet; its host end is in the reaper's link group
    // already, so a reaper round may delete the pair meanwhile.
    "detach.pod_end_found",
    "detach.retired",
    "detach.reaping",
    // The reaper, after the reply.
    "reaper.deleted",
    "reaper.forgotten",
    // CreateNetns: the record is durable, the mount not made yet; DeleteNetns: marked
    // deleting and detached, the mount not removed yet.
    "netns.recorded",
    "netns.deleting",
    // A store migration at open (knid_store::migrate::STEPS): before anything is written; its
    // transaction applied, not yet flushed.
    "store.migrating",
    "store.migrated",
    // Start-up recovery, before its orphan sweeps (with `error`, the sweeps are skipped and left
    // to GC and the reconciler).
    "recovery.sweep",
    // The probe of whether the kernel hooks a guard on a device that does not exist yet (with
    // `error`: it does not, as before Linux 6.16).
    "antispoof.probe",
];

#[cfg(feature = "failpoints")]
mod active {
    use std::collections::HashMap;
    use std::sync::OnceLock;

    use super::{NAMES, VAR};
    use crate::error::{Error, Result};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Action {
        Abort,
        Error,
        Sleep(std::time::Duration),
    }

    fn parse(text: &str) -> std::result::Result<HashMap<&'static str, Action>, String> {
        let mut out = HashMap::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, action) = item
                .split_once('=')
                .ok_or_else(|| format!("{VAR}: {item:?} is not <name>=abort|error|sleep(<ms>)"))?;
            let name = NAMES
                .iter()
                .find(|n| **n == name)
                .ok_or_else(|| format!("{VAR}: unknown failpoint {name:?}"))?;
            let sleep_ms = action
                .strip_prefix("sleep(")
                .and_then(|rest| rest.strip_suffix(')'))
                .and_then(|ms| ms.parse::<u64>().ok());
            let action = match (action, sleep_ms) {
                ("abort", _) => Action::Abort,
                ("error", _) => Action::Error,
                (_, Some(ms)) => Action::Sleep(std::time::Duration::from_millis(ms)),
                (other, None) => return Err(format!("{VAR}: {name}: unknown action {other:?}")),
            };
            out.insert(*name, action);
        }
        Ok(out)
    }

    fn armed() -> &'static std::result::Result<HashMap<&'static str, Action>, String> {
        static ARMED: OnceLock<std::result::Result<HashMap<&'static str, Action>, String>> =
            OnceLock::new();
        ARMED.get_or_init(|| parse(&std::env::var(VAR).unwrap_or_default()))
    }

    /// Checks the environment variable; call once at start-up.
    pub fn check() -> Result<()> {
        match armed() {
            Ok(map) => {
                if !map.is_empty() {
                    log::warn!("failpoints armed: {map:?}");
                }
                Ok(())
            }
            Err(e) => Err(Error::Config(e.clone())),
        }
    }

    /// Runs the action armed at `name`, if any.
    pub fn hit(name: &'static str) -> Result<()> {
        debug_assert!(NAMES.contains(&name), "failpoint {name} is not listed");
        match armed().as_ref().ok().and_then(|m| m.get(name)) {
            None => Ok(()),
            Some(Action::Error) => {
                log::warn!("failpoint {name}: failing the operation");
                Err(Error::Injected(name))
            }
            Some(Action::Abort) => {
                log::error!("failpoint {name}: aborting");
                std::process::abort()
            }
            Some(Action::Sleep(pause)) => {
                log::warn!("failpoint {name}: sleeping {}ms", pause.as_millis());
                std::thread::sleep(*pause);
                log::warn!("failpoint {name}: woke up");
                Ok(())
            }
        }
    }

    #[cfg(test)]
    mod tests;
}

#[cfg(feature = "failpoints")]
pub use active::check;
#[cfg(feature = "failpoints")]
pub(crate) use active::hit;

/// The hook a store runs at each migration step ([`knid_store::StoreConfig::on_migration_step`]):
/// the step's failpoint, whose `error` means nothing there (a migration cannot fail half-way).
pub fn store_step(name: &'static str) {
    if let Err(e) = hit(name) {
        log::warn!("failpoint {name}: {e} (ignored: only abort and sleep act here)");
    }
}

/// Checks the failpoint configuration: nothing to check without the `failpoints` feature.
#[cfg(not(feature = "failpoints"))]
pub fn check() -> crate::error::Result<()> {
    Ok(())
}

/// A step boundary: nothing happens without the `failpoints` feature.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn hit(_name: &'static str) -> crate::error::Result<()> {
    Ok(())
}
