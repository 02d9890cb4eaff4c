//! Extensions (docs/architecture.md#extensions): ttrpc endpoints — a service mesh agent, a policy hook — that
//! register to be called after every attach (post-attach) and before every detach (pre-detach).
//!
//! This module owns the registrations (persisted; only `UnregisterExtension` removes one, never
//! a socket that went away), the order extensions are called in, how each one's last call went,
//! and the Health poller. The calls themselves go through an [`ExtensionCaller`], which the
//! transport implements over ttrpc: the core never sees protobuf.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use knid_store::{Batch, ExtensionRecord, Store};

use crate::error::{Error, Result};
use crate::locks::{LockExt, RwLockExt};
use crate::metrics::Metrics;
use crate::model::now_ms;
use crate::model::validate::{self, Invalid};
use crate::model::{Condition, Sandbox};

/// Per-call timeout of a registration that gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(2000);
/// Longest per-call timeout a registration may ask for, in milliseconds.
pub const MAX_TIMEOUT_MS: u32 = 60_000;
/// Most extensions registered at once: each is called on every attach or detach of its phases.
pub const MAX_EXTENSIONS: usize = 32;
/// Type of the readiness condition the required extensions make up.
pub const CONDITION: &str = "ExtensionsReady";

/// When an extension is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// After an attach created its interfaces, before it is durable and answered (`OnAttach`).
    PostAttach,
    /// Before a detach removes anything (`OnDetach`).
    PreDetach,
}

impl Phase {
    /// Every phase.
    pub const ALL: [Phase; 2] = [Phase::PostAttach, Phase::PreDetach];

    /// Parses the API spelling (`post-attach`, `pre-detach`).
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        match value {
            "post-attach" => Ok(Self::PostAttach),
            "pre-detach" => Ok(Self::PreDetach),
            _ => Err(Invalid::new(format!(
                "{value:?} is not a phase: post-attach or pre-detach"
            ))),
        }
    }

    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PostAttach => "post-attach",
            Self::PreDetach => "pre-detach",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::PostAttach => 0,
            Self::PreDetach => 1,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The phases of a registration: at least one, each known, none twice.
pub fn phases<S: AsRef<str>>(values: &[S]) -> Result<Vec<Phase>, Invalid> {
    if values.is_empty() {
        return Err(Invalid::new(
            "must name at least one phase: post-attach, pre-detach",
        ));
    }
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        let phase = Phase::parse(value.as_ref())?;
        if out.contains(&phase) {
            return Err(Invalid::new(format!("names {phase} twice")));
        }
        out.push(phase);
    }
    Ok(out)
}

/// The per-call timeout of a registration: 1–60000 ms, 0 meaning [`DEFAULT_TIMEOUT`].
pub fn timeout(ms: u32) -> Result<Duration, Invalid> {
    match ms {
        0 => Ok(DEFAULT_TIMEOUT),
        1..=MAX_TIMEOUT_MS => Ok(Duration::from_millis(u64::from(ms))),
        _ => Err(Invalid::new(format!(
            "must be at most {MAX_TIMEOUT_MS} (0 means {})",
            DEFAULT_TIMEOUT.as_millis()
        ))),
    }
}

/// An extension as registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionSpec {
    /// Unique name, 1–64 characters of `[A-Za-z0-9_.-]`.
    pub name: String,
    /// Absolute path of the unix socket serving `knid.v1.Extension`.
    pub socket_path: PathBuf,
    /// When it is called: at least one phase, each once.
    pub phases: Vec<Phase>,
    /// Whether its failure or silence fails an attach; an optional one's is only logged.
    pub required: bool,
    /// Bound of each call, connecting included.
    pub timeout: Duration,
    /// Extensions are called in ascending order, then by name.
    pub order: i32,
}

impl ExtensionSpec {
    /// Whether the extension is called in `phase`.
    pub fn has_phase(&self, phase: Phase) -> bool {
        self.phases.contains(&phase)
    }
}

/// A registered extension and how its last call went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionInfo {
    /// The registration.
    pub spec: ExtensionSpec,
    /// Whether its last call (OnAttach, OnDetach or Health) succeeded; false before any call.
    pub last_call_ok: bool,
    /// Why the last call failed, when it did.
    pub last_error: Option<String>,
    /// When the last call ended, ms since the Unix epoch; 0 before any call.
    pub last_call_at_ms: i64,
    /// When it was registered, ms since the Unix epoch.
    pub registered_at_ms: i64,
}

/// What an extension is told in one hook call.
#[derive(Debug, Clone, Copy)]
pub struct ExtensionCall<'a> {
    /// The phase being run.
    pub phase: Phase,
    /// The whole sandbox: on post-attach with every interface, new ones included; on
    /// pre-detach as it is before anything is removed.
    pub sandbox: &'a Sandbox,
    /// On post-attach the interfaces this attach created; on pre-detach those being detached.
    pub ifnames: &'a [String],
}

/// Makes the calls of the `knid.v1.Extension` service; the transport implements it over ttrpc.
/// Every call is bounded by the extension's `timeout`; an `Err` carries the extension's message,
/// or says why there was none (`no answer within 200ms`, `cannot connect to ...`).
pub trait ExtensionCaller: Send + Sync {
    /// `OnAttach`: the new interfaces of a sandbox exist.
    fn on_attach(
        &self,
        ext: &ExtensionSpec,
        call: &ExtensionCall<'_>,
    ) -> std::result::Result<(), String>;

    /// `OnDetach`: interfaces of a sandbox are about to be removed.
    fn on_detach(
        &self,
        ext: &ExtensionSpec,
        call: &ExtensionCall<'_>,
    ) -> std::result::Result<(), String>;

    /// `Health`.
    fn health(&self, ext: &ExtensionSpec) -> std::result::Result<(), String>;
}

/// How an extension's last call went.
#[derive(Debug, Clone, Default)]
struct LastCall {
    ok: bool,
    error: Option<String>,
    at_ms: i64,
}

/// One registration with its call history.
#[derive(Debug)]
pub(crate) struct Registered {
    spec: ExtensionSpec,
    registered_at_ms: i64,
    /// Locked only to read or write the outcome, never across a call.
    last: Mutex<LastCall>,
}

impl Registered {
    fn new(spec: ExtensionSpec, registered_at_ms: i64) -> Self {
        Self {
            spec,
            registered_at_ms,
            last: Mutex::new(LastCall::default()),
        }
    }

    /// Remembers the outcome of a call that just ended; returns whether the previous call
    /// succeeded.
    fn record(&self, result: &std::result::Result<(), String>) -> bool {
        let mut last = self.last.acquire();
        let was_ok = last.ok;
        *last = LastCall {
            ok: result.is_ok(),
            error: result.as_ref().err().cloned(),
            at_ms: now_ms(),
        };
        was_ok
    }

    pub(crate) fn info(&self) -> ExtensionInfo {
        let last = self.last.acquire().clone();
        ExtensionInfo {
            spec: self.spec.clone(),
            last_call_ok: last.ok,
            last_error: last.error,
            last_call_at_ms: last.at_ms,
            registered_at_ms: self.registered_at_ms,
        }
    }

    fn to_record(&self) -> ExtensionRecord {
        ExtensionRecord {
            name: self.spec.name.clone(),
            socket_path: self.spec.socket_path.to_string_lossy().into_owned(),
            phases: self
                .spec
                .phases
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect(),
            required: self.spec.required,
            timeout_ms: u32::try_from(self.spec.timeout.as_millis()).unwrap_or(MAX_TIMEOUT_MS),
            order: self.spec.order,
            registered_at_ms: self.registered_at_ms,
            ..Default::default()
        }
    }

    /// The registration a record holds, checked with the rules of a new one.
    pub(crate) fn from_record(rec: &ExtensionRecord) -> Result<Self> {
        let corrupt = |field: &str, e: Invalid| Error::Corrupt {
            key: format!("extensions/{}", rec.name),
            detail: format!("{field} {}", e.rule),
        };
        validate::name(&rec.name).map_err(|e| corrupt("name", e))?;
        validate::socket_path(&rec.socket_path).map_err(|e| corrupt("socket_path", e))?;
        let spec = ExtensionSpec {
            name: rec.name.clone(),
            socket_path: PathBuf::from(&rec.socket_path),
            phases: phases(&rec.phases).map_err(|e| corrupt("phases", e))?,
            required: rec.required,
            timeout: timeout(rec.timeout_ms).map_err(|e| corrupt("timeout_ms", e))?,
            order: rec.order,
        };
        Ok(Self::new(spec, rec.registered_at_ms))
    }
}

/// Registrations in call order: sorted by (order, name).
type CallOrder = Arc<Vec<Arc<Registered>>>;

/// The registered extensions, in call order, with how their last calls went.
pub(crate) struct Registry {
    store: Arc<Store>,
    caller: Arc<dyn ExtensionCaller>,
    metrics: Arc<Metrics>,
    /// Replaced whole on every change, so a hook or the poller works on a snapshot (one
    /// reference count) and never holds the lock across a call.
    registered: RwLock<CallOrder>,
    /// How many registrations have each phase ([`Phase::index`]): an attach or detach with no
    /// extension of its phase skips every extension step after one atomic load.
    with_phase: [AtomicUsize; 2],
    /// Serialises register and unregister, so the store and `registered` change in one order.
    changes: Mutex<()>,
}

impl Registry {
    /// The registrations recorded in `store`, called through `caller`.
    #[cfg(test)]
    pub fn load(store: Arc<Store>, caller: Arc<dyn ExtensionCaller>) -> Result<Self> {
        let registry = Self::unloaded(store, caller, Arc::default());
        registry.load_recorded()?;
        Ok(registry)
    }

    /// A registry that calls nothing until [`Registry::load_recorded`]: start-up recovery
    /// detaches the attachments of pods that are gone without waiting on extensions (a dead
    /// one would cost its timeout per sandbox before knid serves).
    pub fn unloaded(
        store: Arc<Store>,
        caller: Arc<dyn ExtensionCaller>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            store,
            caller,
            metrics,
            registered: RwLock::new(Arc::new(Vec::new())),
            with_phase: [AtomicUsize::new(0), AtomicUsize::new(0)],
            changes: Mutex::new(()),
        }
    }

    /// Installs the registrations recorded in the store.
    pub fn load_recorded(&self) -> Result<()> {
        let mut list = Vec::new();
        for rec in self.store.extensions()? {
            list.push(Arc::new(Registered::from_record(&rec)?));
        }
        if !list.is_empty() {
            log::info!(
                "extensions registered: {}",
                list.iter()
                    .map(|r| r.spec.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        self.install(list);
        Ok(())
    }

    fn snapshot(&self) -> CallOrder {
        Arc::clone(&self.registered.shared())
    }

    /// Makes `list`, sorted into call order, the current registrations.
    fn install(&self, mut list: Vec<Arc<Registered>>) {
        list.sort_by(|a, b| (a.spec.order, &a.spec.name).cmp(&(b.spec.order, &b.spec.name)));
        let mut current = self.registered.exclusive();
        for phase in Phase::ALL {
            let count = list.iter().filter(|r| r.spec.has_phase(phase)).count();
            self.with_phase[phase.index()].store(count, Ordering::SeqCst);
        }
        *current = Arc::new(list);
    }

    /// Registers `spec`, replacing a registration of the same name (an identical one is kept
    /// as it is, with its history), durably; then calls its Health once so its state is known.
    /// An unhealthy extension is registered all the same.
    pub fn register(&self, spec: ExtensionSpec) -> Result<()> {
        let entry = {
            let _serial = self.changes.acquire();
            let current = self.snapshot();
            match current.iter().find(|r| r.spec == spec) {
                Some(same) => Arc::clone(same),
                None => {
                    let is_new = !current.iter().any(|r| r.spec.name == spec.name);
                    if is_new && current.len() >= MAX_EXTENSIONS {
                        return Err(Error::LimitReached(format!(
                            "{MAX_EXTENSIONS} extensions are registered; unregister one before \
                             registering {}",
                            spec.name
                        )));
                    }
                    let entry = Arc::new(Registered::new(spec, now_ms()));
                    let mut batch = Batch::new();
                    batch.put_extension(entry.to_record());
                    self.store.commit(&batch)?;
                    let replaced = current.iter().any(|r| r.spec.name == entry.spec.name);
                    let list = current
                        .iter()
                        .filter(|r| r.spec.name != entry.spec.name)
                        .cloned()
                        .chain([Arc::clone(&entry)])
                        .collect();
                    self.install(list);
                    log::info!(
                        "extension {} {}: socket {}, phases {}, {}, timeout {:?}, order {}",
                        entry.spec.name,
                        if replaced { "replaced" } else { "registered" },
                        entry.spec.socket_path.display(),
                        entry
                            .spec
                            .phases
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join("+"),
                        if entry.spec.required {
                            "required"
                        } else {
                            "optional"
                        },
                        entry.spec.timeout,
                        entry.spec.order,
                    );
                    entry
                }
            }
        };
        let result = self.caller.health(&entry.spec);
        if let Err(message) = &result {
            log::warn!(
                "extension {}: Health failed right after registration: {message}",
                entry.spec.name
            );
        }
        entry.record(&result);
        Ok(())
    }

    /// Removes the registration `name`, durably; unknown names are success.
    pub fn unregister(&self, name: &str) -> Result<()> {
        let _serial = self.changes.acquire();
        let current = self.snapshot();
        if !current.iter().any(|r| r.spec.name == name) {
            return Ok(());
        }
        let mut batch = Batch::new();
        batch.delete_extension(name);
        self.store.commit(&batch)?;
        self.install(
            current
                .iter()
                .filter(|r| r.spec.name != name)
                .cloned()
                .collect(),
        );
        log::info!("extension {name} unregistered");
        Ok(())
    }

    /// Every registration in call order, with how its last call went.
    pub fn list(&self) -> Vec<ExtensionInfo> {
        self.snapshot().iter().map(|r| r.info()).collect()
    }

    /// Whether any registered extension is called in `phase`: one atomic load, so the attach
    /// and detach paths pay nothing more when none is.
    pub fn has(&self, phase: Phase) -> bool {
        self.with_phase[phase.index()].load(Ordering::SeqCst) > 0
    }

    /// Calls `OnAttach` of every post-attach extension in order. The first required one that
    /// fails or stays silent stops the round and fails the attach: the pre-detach extensions
    /// that had accepted it are told with `OnDetach` before it is rolled back. An optional
    /// extension's failure is logged and the round goes on.
    pub fn post_attach(&self, sandbox: &Sandbox, ifnames: &[String]) -> Result<()> {
        let call = ExtensionCall {
            phase: Phase::PostAttach,
            sandbox,
            ifnames,
        };
        let current = self.snapshot();
        let mut accepted: Vec<&Arc<Registered>> = Vec::new();
        for ext in current
            .iter()
            .filter(|r| r.spec.has_phase(Phase::PostAttach))
        {
            let (result, _) = self.call(ext, Phase::PostAttach.as_str(), |c| {
                c.on_attach(&ext.spec, &call)
            });
            match result {
                Ok(()) => accepted.push(ext),
                Err(message) if ext.spec.required => {
                    self.notify_detach(accepted.into_iter(), sandbox, ifnames);
                    return Err(Error::Extension {
                        name: ext.spec.name.clone(),
                        message,
                    });
                }
                Err(message) => log::warn!(
                    "{}: optional extension {} failed OnAttach, the attach goes on: {message}",
                    sandbox.id,
                    ext.spec.name
                ),
            }
        }
        Ok(())
    }

    /// Calls `OnDetach` of every pre-detach extension in order. Failures, even of required
    /// extensions, are logged and recorded: a detach always goes on (the CNI DEL rule).
    pub fn pre_detach(&self, sandbox: &Sandbox, ifnames: &[String]) {
        self.notify_detach(self.snapshot().iter(), sandbox, ifnames);
    }

    /// `OnDetach` to those of `exts` that have the pre-detach phase.
    fn notify_detach<'a>(
        &self,
        exts: impl Iterator<Item = &'a Arc<Registered>>,
        sandbox: &Sandbox,
        ifnames: &[String],
    ) {
        let call = ExtensionCall {
            phase: Phase::PreDetach,
            sandbox,
            ifnames,
        };
        for ext in exts.filter(|r| r.spec.has_phase(Phase::PreDetach)) {
            let (result, _) = self.call(ext, Phase::PreDetach.as_str(), |c| {
                c.on_detach(&ext.spec, &call)
            });
            if let Err(message) = result {
                log::warn!(
                    "{}: extension {} failed OnDetach, the detach goes on: {message}",
                    sandbox.id,
                    ext.spec.name
                );
            }
        }
    }

    /// Makes one call to `ext`, timed into the metrics and recorded as its last call; returns
    /// its result and whether the call before it had succeeded.
    fn call(
        &self,
        ext: &Registered,
        phase: &str,
        call: impl FnOnce(&dyn ExtensionCaller) -> std::result::Result<(), String>,
    ) -> (std::result::Result<(), String>, bool) {
        let started = Instant::now();
        let result = call(self.caller.as_ref());
        self.metrics
            .observe_extension(&ext.spec.name, phase, started.elapsed(), result.is_ok());
        let was_ok = ext.record(&result);
        (result, was_ok)
    }

    /// Calls `Health` of every registered extension, in order, until `stopping` says so; logs
    /// each change of health.
    pub(crate) fn check_health(&self, stopping: impl Fn() -> bool) {
        for ext in self.snapshot().iter() {
            if stopping() {
                return;
            }
            let (result, was_ok) = self.call(ext, "health", |c| c.health(&ext.spec));
            match result {
                Err(message) if was_ok => {
                    log::warn!("extension {}: unhealthy: {message}", ext.spec.name)
                }
                Ok(()) if !was_ok => log::info!("extension {}: healthy", ext.spec.name),
                _ => {}
            }
        }
    }

    /// The `ExtensionsReady` condition: every name in `required` registered and its last call
    /// successful. False with reason `NotRegistered` when one is missing, else `Unhealthy`.
    pub fn readiness(&self, required: &[String]) -> Condition {
        if required.is_empty() {
            return Condition::now(CONDITION, true, "", "no extensions required");
        }
        let current = self.snapshot();
        let mut missing = Vec::new();
        let mut unhealthy = Vec::new();
        for name in required {
            match current.iter().find(|r| r.spec.name == *name) {
                None => missing.push(name.as_str()),
                Some(ext) => {
                    let info = ext.info();
                    if !info.last_call_ok {
                        unhealthy.push(format!(
                            "{name} ({})",
                            info.last_error.as_deref().unwrap_or("not called yet")
                        ));
                    }
                }
            }
        }
        let unhealthy =
            (!unhealthy.is_empty()).then(|| format!("unhealthy: {}", unhealthy.join(", ")));
        if !missing.is_empty() {
            let mut message = format!("not registered: {}", missing.join(", "));
            if let Some(more) = unhealthy {
                message = format!("{message}; {more}");
            }
            return Condition::now(CONDITION, false, "NotRegistered", &message);
        }
        match unhealthy {
            Some(message) => Condition::now(CONDITION, false, "Unhealthy", &message),
            None => Condition::now(
                CONDITION,
                true,
                "",
                &format!("registered and healthy: {}", required.join(", ")),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
