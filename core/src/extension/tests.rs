use std::collections::HashMap;
use std::path::Path;

use knid_store::StoreConfig;

use super::*;
use crate::model::{Dns, PodRef, SandboxId};
use crate::ErrorKind;

/// Records every call as `<extension> <method> <ifnames>`; fails the ones it is told to.
#[derive(Default)]
struct FakeCaller {
    calls: Mutex<Vec<String>>,
    /// OnAttach answers of extensions that refuse, by name.
    refuse_attach: HashMap<String, String>,
    /// Health answers of unhealthy extensions, by name.
    unhealthy: Mutex<HashMap<String, String>>,
}

impl FakeCaller {
    fn refusing(name: &str, message: &str) -> Self {
        Self {
            refuse_attach: HashMap::from([(name.to_owned(), message.to_owned())]),
            ..Self::default()
        }
    }

    fn log(&self, ext: &ExtensionSpec, method: &str, ifnames: &[String]) {
        self.calls.lock().expect("calls").push(format!(
            "{} {method} {}",
            ext.name,
            ifnames.join(",")
        ));
    }

    /// The calls so far, then forgotten.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().expect("calls"))
    }
}

impl ExtensionCaller for FakeCaller {
    fn on_attach(
        &self,
        ext: &ExtensionSpec,
        call: &ExtensionCall<'_>,
    ) -> std::result::Result<(), String> {
        assert_eq!(call.phase, Phase::PostAttach);
        self.log(ext, "OnAttach", call.ifnames);
        self.refuse_attach
            .get(&ext.name)
            .map_or(Ok(()), |m| Err(m.clone()))
    }

    fn on_detach(
        &self,
        ext: &ExtensionSpec,
        call: &ExtensionCall<'_>,
    ) -> std::result::Result<(), String> {
        assert_eq!(call.phase, Phase::PreDetach);
        self.log(ext, "OnDetach", call.ifnames);
        // Even a required extension's OnDetach failure must not stop a detach.
        Err("detach refused".to_owned())
    }

    fn health(&self, ext: &ExtensionSpec) -> std::result::Result<(), String> {
        self.log(ext, "Health", &[]);
        self.unhealthy
            .lock()
            .expect("unhealthy")
            .get(&ext.name)
            .map_or(Ok(()), |m| Err(m.clone()))
    }
}

fn spec(name: &str, order: i32, phases: &[Phase], required: bool) -> ExtensionSpec {
    ExtensionSpec {
        name: name.to_owned(),
        socket_path: PathBuf::from(format!("/run/{name}.sock")),
        phases: phases.to_vec(),
        required,
        timeout: DEFAULT_TIMEOUT,
        order,
    }
}

fn open_store(dir: &Path) -> Arc<Store> {
    Arc::new(Store::open(&StoreConfig::new(dir.join("store"))).expect("open store"))
}

fn sandbox() -> Sandbox {
    Sandbox {
        id: SandboxId::parse("pod-1").expect("valid id"),
        netns_path: PathBuf::from("/run/netns/pod-1"),
        netns_inode: 1,
        netns_dev: 2,
        generation: 1,
        pod: PodRef::default(),
        interfaces: Vec::new(),
        dns: Dns::default(),
        port_mappings: Vec::new(),
        labels: Default::default(),
        annotations: Default::default(),
        created_at_ms: 0,
        updated_at_ms: 0,
    }
}

fn names(registry: &Registry) -> Vec<String> {
    registry.list().into_iter().map(|i| i.spec.name).collect()
}

const BOTH: &[Phase] = &[Phase::PostAttach, Phase::PreDetach];

#[test]
fn phases_must_be_known_present_and_distinct() {
    assert_eq!(
        phases(&["pre-detach", "post-attach"]).expect("valid"),
        [Phase::PreDetach, Phase::PostAttach]
    );
    assert!(phases::<&str>(&[]).is_err());
    let unknown = phases(&["post-attach", "post-create"]).expect_err("unknown phase");
    assert!(unknown.rule.contains("post-create"), "{}", unknown.rule);
    assert!(phases(&["pre-detach", "pre-detach"]).is_err());
    for phase in Phase::ALL {
        assert_eq!(Phase::parse(phase.as_str()), Ok(phase));
    }
}

#[test]
fn timeout_zero_means_the_default_and_is_bounded() {
    assert_eq!(timeout(0), Ok(DEFAULT_TIMEOUT));
    assert_eq!(timeout(1), Ok(Duration::from_millis(1)));
    assert_eq!(timeout(60_000), Ok(Duration::from_secs(60)));
    assert!(timeout(60_001).is_err());
}

#[test]
fn extensions_are_listed_and_called_by_order_then_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let caller = Arc::new(FakeCaller::default());
    let registry = Registry::load(open_store(dir.path()), caller.clone()).expect("load");
    assert!(!registry.has(Phase::PostAttach) && !registry.has(Phase::PreDetach));
    for ext in [
        spec("gamma", 2, BOTH, false),
        spec("alpha", 2, BOTH, false),
        spec("beta", -1, &[Phase::PreDetach], false),
        spec("delta", 7, &[Phase::PostAttach], true),
    ] {
        registry.register(ext).expect("register");
    }
    assert_eq!(names(&registry), ["beta", "alpha", "gamma", "delta"]);
    assert!(registry.has(Phase::PostAttach) && registry.has(Phase::PreDetach));
    caller.take();

    let ifnames = ["eth0".to_owned()];
    registry
        .post_attach(&sandbox(), &ifnames)
        .expect("every extension accepts");
    assert_eq!(
        caller.take(),
        [
            "alpha OnAttach eth0",
            "gamma OnAttach eth0",
            "delta OnAttach eth0"
        ]
    );
    registry.pre_detach(&sandbox(), &ifnames);
    assert_eq!(
        caller.take(),
        [
            "beta OnDetach eth0",
            "alpha OnDetach eth0",
            "gamma OnDetach eth0"
        ]
    );
    let beta = &registry.list()[0];
    assert!(!beta.last_call_ok, "a failed OnDetach is recorded");
    assert_eq!(beta.last_error.as_deref(), Some("detach refused"));
}

#[test]
fn a_required_refusal_fails_and_tells_those_that_accepted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let caller = Arc::new(FakeCaller::refusing("mesh", "sidecar refused"));
    let registry = Registry::load(open_store(dir.path()), caller.clone()).expect("load");
    registry
        .register(spec("audit", 1, BOTH, false))
        .expect("register");
    registry
        .register(spec("attach-only", 2, &[Phase::PostAttach], false))
        .expect("register");
    registry
        .register(spec("mesh", 3, BOTH, true))
        .expect("register");
    registry
        .register(spec("late", 4, BOTH, true))
        .expect("register");
    caller.take();

    let err = registry
        .post_attach(&sandbox(), &["eth0".to_owned()])
        .expect_err("mesh is required");
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    assert_eq!(err.to_string(), "extension mesh: sidecar refused");
    assert_eq!(
        caller.take(),
        [
            "audit OnAttach eth0",
            "attach-only OnAttach eth0",
            "mesh OnAttach eth0",
            "audit OnDetach eth0",
        ],
        "late must not be called; only pre-detach extensions that accepted hear of the undo"
    );
    let mesh = registry
        .list()
        .into_iter()
        .find(|i| i.spec.name == "mesh")
        .expect("mesh listed");
    assert!(!mesh.last_call_ok);
    assert_eq!(mesh.last_error.as_deref(), Some("sidecar refused"));
}

#[test]
fn an_optional_refusal_is_recorded_and_the_round_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let caller = Arc::new(FakeCaller::refusing("audit", "quota"));
    let registry = Registry::load(open_store(dir.path()), caller.clone()).expect("load");
    registry
        .register(spec("audit", 1, BOTH, false))
        .expect("register");
    registry
        .register(spec("mesh", 2, BOTH, true))
        .expect("register");
    caller.take();
    registry
        .post_attach(&sandbox(), &["eth1".to_owned()])
        .expect("only an optional extension refused");
    assert_eq!(caller.take(), ["audit OnAttach eth1", "mesh OnAttach eth1"]);
    let list = registry.list();
    assert!(!list[0].last_call_ok);
    assert_eq!(list[0].last_error.as_deref(), Some("quota"));
    assert!(list[0].last_call_at_ms > 0);
    assert!(list[1].last_call_ok && list[1].last_error.is_none());
}

#[test]
fn registrations_persist_replace_by_name_and_go_only_when_unregistered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let caller = Arc::new(FakeCaller::default());
    let store = open_store(dir.path());
    let registry = Registry::load(Arc::clone(&store), caller.clone()).expect("load");
    registry
        .register(spec("mesh", 1, BOTH, true))
        .expect("register");
    let first = registry.list().remove(0);
    assert!(first.last_call_ok, "Health is called at registration");
    assert_eq!(caller.take(), ["mesh Health "]);

    // Identical: nothing changes, not even the registration time.
    registry
        .register(spec("mesh", 1, BOTH, true))
        .expect("register again");
    assert_eq!(registry.list()[0].registered_at_ms, first.registered_at_ms);

    let mut changed = spec("mesh", 5, &[Phase::PreDetach], false);
    changed.timeout = Duration::from_millis(250);
    registry.register(changed.clone()).expect("replace");
    assert_eq!(registry.list().len(), 1);
    assert_eq!(registry.list()[0].spec, changed);
    assert!(!registry.has(Phase::PostAttach));

    drop(registry);
    let reloaded = Registry::load(Arc::clone(&store), caller.clone()).expect("reload");
    let info = reloaded.list().remove(0);
    assert_eq!(info.spec, changed, "the store holds the replacement");
    assert!(!info.last_call_ok, "no call since the reload");
    assert!(reloaded.has(Phase::PreDetach));

    reloaded
        .unregister("ghost")
        .expect("unknown name is success");
    reloaded.unregister("mesh").expect("unregister");
    assert!(reloaded.list().is_empty());
    assert!(!reloaded.has(Phase::PreDetach));
    assert!(store.extensions().expect("records").is_empty());
}

#[test]
fn registrations_stop_at_the_limit_but_a_registered_name_can_still_be_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let caller = Arc::new(FakeCaller::default());
    let registry = Registry::load(open_store(dir.path()), caller).expect("load");
    for i in 0..MAX_EXTENSIONS {
        registry
            .register(spec(&format!("ext{i}"), 1, BOTH, false))
            .expect("register under the limit");
    }
    let err = registry
        .register(spec("one-more", 1, BOTH, false))
        .expect_err("registered past the limit");
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted);
    assert!(err.to_string().contains("one-more"), "{err}");
    registry
        .register(spec("ext0", 9, BOTH, false))
        .expect("replacing a registered name");
    assert_eq!(registry.list().len(), MAX_EXTENSIONS);
}

#[test]
fn readiness_names_missing_then_unhealthy_extensions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let caller = Arc::new(FakeCaller::default());
    caller
        .unhealthy
        .lock()
        .expect("unhealthy")
        .insert("policy".into(), "disk full".into());
    let registry = Registry::load(open_store(dir.path()), caller.clone()).expect("load");

    let none = registry.readiness(&[]);
    assert!(none.status);
    assert_eq!(none.message, "no extensions required");

    let required = ["mesh".to_owned(), "policy".to_owned()];
    let missing = registry.readiness(&required);
    assert!(!missing.status);
    assert_eq!(missing.kind, CONDITION);
    assert_eq!(missing.reason, "NotRegistered");
    assert_eq!(missing.message, "not registered: mesh, policy");

    registry
        .register(spec("mesh", 0, BOTH, true))
        .expect("register");
    registry
        .register(spec("policy", 0, BOTH, true))
        .expect("register");
    let sick = registry.readiness(&required);
    assert_eq!(
        (sick.status, sick.reason.as_str(), sick.message.as_str()),
        (false, "Unhealthy", "unhealthy: policy (disk full)")
    );

    caller.unhealthy.lock().expect("unhealthy").clear();
    registry.check_health(|| false);
    let ready = registry.readiness(&required);
    assert!(ready.status, "{ready:?}");
}
