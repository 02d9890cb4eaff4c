//! The real `RuntimeService` over a real socket, built the way the daemon builds it, with a core
//! runtime living in a private network namespace (needs root, like the daemon).

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use knid_core::{Config, Runtime};
use knid_store::{Store, StoreConfig};
use knid_transport::server::Server;
use knid_transport::{pb, service, socket, OneshotExtensionCaller, RuntimeClient};
use nix::sched::{unshare, CloneFlags};
use ttrpc::Code;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A knid server on a thread of its own in a fresh netns; stopped on drop.
struct Daemon {
    socket: PathBuf,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("run/knid/knid.sock");
        let state = dir.path().join("state");
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let path = socket.clone();
        // Threads inherit the netns of the thread that spawns them: the runtime's workers and
        // the server's threads all live in the private netns, so the host is never touched.
        let thread = thread::spawn(move || {
            unshare(CloneFlags::CLONE_NEWNET).expect("unshare netns (run the tests as root)");
            let store = Store::open(&StoreConfig::new(state)).expect("open store");
            let config = Config::embedded_default().expect("default config");
            let runtime = Arc::new(
                Runtime::start(
                    &config,
                    Arc::new(store),
                    "test-boot".into(),
                    Arc::new(OneshotExtensionCaller),
                )
                .expect("start"),
            );
            runtime.spawn_jobs().expect("start the periodic jobs");
            let listener = socket::bind_listener(&path, 0o660, None).expect("bind");
            let api = config.api().expect("api settings");
            let server = Server::start(listener, service::services(Arc::clone(&runtime)), api)
                .expect("start server");
            ready_tx.send(()).expect("report ready");
            let _ = stop_rx.recv();
            server.shutdown();
            runtime.shutdown().expect("shutdown runtime");
        });
        ready_rx.recv().expect("daemon thread died while starting");
        Self {
            socket,
            stop: Some(stop_tx),
            thread: Some(thread),
            _dir: dir,
        }
    }

    fn client(&self) -> RuntimeClient {
        RuntimeClient::connect(&self.socket).expect("connect")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let stopped = thread.join();
            if !thread::panicking() {
                stopped.expect("daemon thread panicked");
            }
        }
    }
}

fn attach_request() -> pb::AttachRequest {
    let mut req = pb::AttachRequest::new();
    req.sandbox_id = "pod-1".into();
    req.netns_path = "/run/netns/knid-transport-test-missing".into();
    let mut eth0 = pb::InterfaceRequest::new();
    eth0.name = "eth0".into();
    req.interfaces = vec![eth0];
    req
}

#[test]
fn invalid_fields_come_back_as_invalid_argument_naming_the_field() {
    let daemon = Daemon::start();
    let client = daemon.client();

    let mut req = attach_request();
    req.interfaces[0].mac = "01:00:5e:00:00:01".into();
    let err = client
        .attach(&req, TIMEOUT)
        .expect_err("multicast mac accepted");
    assert_eq!(err.code(), Some(Code::INVALID_ARGUMENT), "{err}");
    assert!(
        err.to_string().contains("invalid interfaces[0].mac: "),
        "{err}"
    );

    // Checked by the core against the configured prefixes, mapped by the same path.
    let mut req = attach_request();
    req.netns_path = "/etc/netns-elsewhere".into();
    let err = client
        .attach(&req, TIMEOUT)
        .expect_err("netns outside prefixes accepted");
    assert_eq!(err.code(), Some(Code::INVALID_ARGUMENT), "{err}");
    assert!(err.to_string().contains("invalid netns_path: "), "{err}");

    let mut list = pb::ListRequest::new();
    list.state = "running".into();
    let err = client.list(&list, TIMEOUT).expect_err("bad state accepted");
    assert_eq!(err.code(), Some(Code::INVALID_ARGUMENT), "{err}");
}

#[test]
fn missing_netns_is_failed_precondition() {
    let daemon = Daemon::start();
    let err = daemon
        .client()
        .attach(&attach_request(), TIMEOUT)
        .expect_err("attach into a missing netns succeeded");
    assert_eq!(err.code(), Some(Code::FAILED_PRECONDITION), "{err}");
}

#[test]
fn unknown_sandbox_is_not_found_on_inspect_and_detaches_fine() {
    let daemon = Daemon::start();
    let client = daemon.client();
    let mut inspect = pb::InspectRequest::new();
    inspect.sandbox_id = "ghost".into();
    let err = client.inspect(&inspect, TIMEOUT).expect_err("ghost found");
    assert_eq!(err.code(), Some(Code::NOT_FOUND), "{err}");

    let mut detach = pb::DetachRequest::new();
    detach.sandbox_id = "ghost".into();
    client
        .detach(&detach, TIMEOUT)
        .expect("detach of unknown sandbox");

    let list = client.list(&pb::ListRequest::new(), TIMEOUT).expect("list");
    assert!(list.sandboxes.is_empty());
}

#[test]
fn status_and_networks_describe_the_default_network() {
    let daemon = Daemon::start();
    let client = daemon.client();
    let status = client.status(TIMEOUT).expect("status");
    assert_eq!(status.boot_id, "test-boot");
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "NetworkReady" && c.status),
        "{:?}",
        status.conditions
    );

    let networks = client.networks(TIMEOUT).expect("networks");
    let default = networks
        .networks
        .iter()
        .find(|n| n.name == "default")
        .expect("default network listed");
    assert_eq!(default.subnets, ["10.88.0.0/16", "fd00:88::/64"]);
    assert_eq!(default.bridge, "knid0");
    assert!(default
        .capacity
        .iter()
        .any(|c| c.family == "ipv4" && c.free > 0));
}

#[test]
fn gc_validation_errors_come_back_as_invalid_argument_naming_the_field() {
    let daemon = Daemon::start();
    let client = daemon.client();

    let req = pb::GarbageCollectRequest {
        valid_sandbox_ids: vec!["pod-1".into()],
        sweep_only: true,
        ..Default::default()
    };
    let err = client
        .garbage_collect(&req, TIMEOUT)
        .expect_err("sweep_only with a valid list accepted");
    assert_eq!(err.code(), Some(Code::INVALID_ARGUMENT), "{err}");
    assert!(err.to_string().contains("invalid sweep_only: "), "{err}");

    let req = pb::GarbageCollectRequest {
        valid_attachments: vec![pb::AttachmentRef {
            sandbox_id: "pod-1".into(),
            ifname: "eth:0".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let err = client
        .garbage_collect(&req, TIMEOUT)
        .expect_err("bad ifname accepted");
    assert_eq!(err.code(), Some(Code::INVALID_ARGUMENT), "{err}");
    assert!(
        err.to_string()
            .contains("invalid valid_attachments[0].ifname: "),
        "{err}"
    );
}
