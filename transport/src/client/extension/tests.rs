use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use knid_core::{Dns, Phase, PodRef, Sandbox, SandboxId};

use super::*;

/// Answers OnAttach after `delay` with `ok`/`message`, keeps each request, fails Health
/// with a status.
struct FakeExtension {
    ok: bool,
    message: String,
    delay: Duration,
    seen: Arc<Mutex<Vec<pb::ExtensionCallRequest>>>,
}

impl pb::Extension for FakeExtension {
    fn on_attach(
        &self,
        _ctx: &ttrpc::TtrpcContext,
        req: pb::ExtensionCallRequest,
    ) -> ttrpc::Result<pb::ExtensionCallResponse> {
        std::thread::sleep(self.delay);
        self.seen.lock().expect("seen").push(req);
        let mut resp = pb::ExtensionCallResponse::new();
        resp.ok = self.ok;
        resp.message = self.message.clone();
        Ok(resp)
    }

    fn health(
        &self,
        _ctx: &ttrpc::TtrpcContext,
        _req: pb::HealthRequest,
    ) -> ttrpc::Result<pb::HealthResponse> {
        Err(ttrpc::Error::RpcStatus(ttrpc::get_status(
            ttrpc::Code::INTERNAL,
            "sidecar injector down",
        )))
    }
}

fn serve(path: &Path, ext: FakeExtension) -> ttrpc::Server {
    let listener = crate::socket::bind_listener(path, 0o600, None).expect("bind");
    let mut server = ttrpc::Server::new()
        .add_listener(listener.into_raw_fd())
        .expect("add listener")
        .register_service(pb::create_extension(Arc::new(ext)));
    server.start().expect("start");
    server
}

fn spec(socket_path: PathBuf, timeout: Duration) -> ExtensionSpec {
    ExtensionSpec {
        name: "mesh".into(),
        socket_path,
        phases: vec![Phase::PostAttach],
        required: true,
        timeout,
        order: 0,
    }
}

fn sandbox() -> Sandbox {
    Sandbox {
        id: SandboxId::parse("pod-7").expect("id"),
        netns_path: "/run/netns/pod-7".into(),
        netns_inode: 9,
        netns_dev: 4,
        generation: 3,
        pod: PodRef::default(),
        interfaces: Vec::new(),
        dns: Dns::default(),
        port_mappings: Vec::new(),
        labels: Default::default(),
        annotations: Default::default(),
        created_at_ms: 1,
        updated_at_ms: 2,
    }
}

fn attach(ext: &ExtensionSpec) -> Result<(), String> {
    let sandbox = sandbox();
    let ifnames = ["eth0".to_owned()];
    OneshotExtensionCaller.on_attach(
        ext,
        &ExtensionCall {
            phase: Phase::PostAttach,
            sandbox: &sandbox,
            ifnames: &ifnames,
        },
    )
}

#[test]
fn on_attach_carries_the_sandbox_and_a_refusal_its_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ext.sock");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = serve(
        &path,
        FakeExtension {
            ok: false,
            message: "sidecar refused".into(),
            delay: Duration::ZERO,
            seen: Arc::clone(&seen),
        },
    );
    let ext = spec(path, Duration::from_secs(5));
    assert_eq!(attach(&ext), Err("sidecar refused".to_owned()));
    let req = seen.lock().expect("seen").remove(0);
    assert_eq!(req.phase, "post-attach");
    assert_eq!(req.ifnames, ["eth0"]);
    assert_eq!(
        (req.sandbox.id.as_str(), req.sandbox.generation),
        ("pod-7", 3)
    );
    // A status error brings its message.
    assert_eq!(
        OneshotExtensionCaller.health(&ext),
        Err("sidecar injector down".to_owned())
    );
    server.shutdown();
}

#[test]
fn silence_and_absence_are_explained() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("slow.sock");
    let server = serve(
        &path,
        FakeExtension {
            ok: true,
            message: String::new(),
            delay: Duration::from_millis(1500),
            seen: Arc::default(),
        },
    );
    let started = std::time::Instant::now();
    let err = attach(&spec(path, Duration::from_millis(200))).expect_err("too slow");
    assert_eq!(err, "no answer within 200ms");
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "not bounded"
    );
    let err = attach(&spec(dir.path().join("none.sock"), Duration::from_secs(1)))
        .expect_err("nothing there");
    assert!(
        err.starts_with("cannot connect to ") && err.contains("none.sock"),
        "{err}"
    );
    server.shutdown();
}
