//! Extensions end to end: the real knid calling real `knid-example-extension` processes over
//! their unix sockets. A required extension's refusal or silence fails the attach and leaves
//! nothing; an optional one's is recorded; hooks see the whole sandbox, in (order, name) order,
//! and hear of a detach before it happens; registrations survive restarts and vanished sockets;
//! `ExtensionsReady` follows the required extensions' health.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use knid_transport::{pb, ClientError};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use testkit::{expect_code, names_field, wait_for, TestNode, RPC, SETTLE};
use ttrpc::Code;

/// How long an example extension gets to exit after SIGTERM before it is killed.
const EXTENSION_GRACE: Duration = Duration::from_secs(5);

/// The example extension binary, built by cargo next to the test binaries
/// (`target/<profile>/examples/`).
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test binary");
    // target/<profile>/deps/extensions-<hash> → target/<profile>/examples/
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps")
        .join("examples/knid-example-extension");
    assert!(
        path.is_file(),
        "{} is missing: `cargo test` builds the examples, `cargo test --test extensions` alone \
         does not — run `cargo build --examples` (with the same --features) first",
        path.display()
    );
    path
}

/// A running `knid-example-extension`; stopped by its pid when dropped.
struct Extension {
    child: Option<Child>,
    socket: PathBuf,
}

impl Extension {
    /// Starts the example on `socket` with extra `args` (its stderr goes to `<socket>.log`
    /// beside it); returns once it accepts connections.
    fn start(socket: &Path, args: &[&str]) -> Extension {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(socket.with_extension("log"))
            .expect("open the extension's log");
        let child = Command::new(example_binary())
            .arg("--socket")
            .arg(socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn knid-example-extension");
        let mut ext = Extension {
            child: Some(child),
            socket: socket.to_owned(),
        };
        let started = Instant::now();
        while UnixStream::connect(socket).is_err() {
            if let Some(status) = ext.child_mut().try_wait().expect("poll the extension") {
                ext.child = None;
                panic!("knid-example-extension exited during start-up: {status}");
            }
            assert!(
                started.elapsed() < SETTLE,
                "knid-example-extension did not listen on {} within {SETTLE:?}",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        ext
    }

    fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("the extension runs")
    }

    /// SIGTERM, then waits for a clean exit (which removes the socket).
    fn stop(&mut self) {
        let mut child = self.child.take().expect("the extension runs");
        let status = terminate(&mut child).expect("the extension exits on SIGTERM");
        assert!(
            status.success(),
            "knid-example-extension exit status {status}"
        );
        assert!(
            !self.socket.exists(),
            "{} left behind on SIGTERM",
            self.socket.display()
        );
    }
}

impl Drop for Extension {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if terminate(&mut child).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// SIGTERM to `child` (by its pid), then its exit status if it exits within the grace time.
fn terminate(child: &mut Child) -> Option<std::process::ExitStatus> {
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits i32"));
    let _ = kill(pid, Signal::SIGTERM);
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if started.elapsed() < EXTENSION_GRACE => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => return None,
        }
    }
}

/// A registration request.
fn registration(
    name: &str,
    socket: &Path,
    phases: &[&str],
    required: bool,
    timeout_ms: u32,
    order: i32,
) -> pb::RegisterExtensionRequest {
    pb::RegisterExtensionRequest {
        extension: protobuf::MessageField::some(pb::ExtensionSpec {
            name: name.to_owned(),
            socket_path: socket.display().to_string(),
            phases: phases.iter().map(|p| (*p).to_owned()).collect(),
            required,
            timeout_ms,
            order,
            ..Default::default()
        }),
        ..Default::default()
    }
}

const BOTH: &[&str] = &["post-attach", "pre-detach"];

fn register(node: &TestNode, req: &pb::RegisterExtensionRequest) {
    node.client()
        .register_extension(req, RPC)
        .unwrap_or_else(|e| panic!("RegisterExtension {}: {e:?}", req.extension.name));
}

fn unregister(node: &TestNode, name: &str) {
    let req = pb::UnregisterExtensionRequest {
        name: name.to_owned(),
        ..Default::default()
    };
    node.client()
        .unregister_extension(&req, RPC)
        .expect("UnregisterExtension");
}

fn listed(node: &TestNode) -> Vec<pb::ExtensionInfo> {
    node.client()
        .list_extensions(RPC)
        .expect("ListExtensions")
        .extensions
}

fn listed_names(node: &TestNode) -> Vec<String> {
    listed(node)
        .into_iter()
        .map(|i| i.extension.name.clone())
        .collect()
}

fn info(node: &TestNode, name: &str) -> pb::ExtensionInfo {
    listed(node)
        .into_iter()
        .find(|i| i.extension.name == name)
        .unwrap_or_else(|| panic!("extension {name} not listed"))
}

/// `ready` and the ExtensionsReady condition of Status.
fn extensions_ready(node: &TestNode) -> (bool, pb::Condition) {
    let status = node.client().status(RPC).expect("Status");
    let condition = status
        .conditions
        .into_iter()
        .find(|c| c.type_ == "ExtensionsReady")
        .expect("Status has ExtensionsReady");
    (status.ready, condition)
}

/// The hook calls (Health left out) an example extension recorded in `path`, in order.
fn hook_calls(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON record line"))
        .filter(|v| v["method"] != "Health")
        .collect()
}

/// `<extension> <method> <ifnames>` of each recorded hook call.
fn summaries(calls: &[Value]) -> Vec<String> {
    calls
        .iter()
        .map(|c| {
            let ifnames: Vec<&str> = c["ifnames"]
                .as_array()
                .expect("ifnames")
                .iter()
                .map(|i| i.as_str().expect("ifname"))
                .collect();
            format!(
                "{} {} {}",
                c["extension"].as_str().expect("extension"),
                c["method"].as_str().expect("method"),
                ifnames.join(",")
            )
        })
        .collect()
}

/// (name, sorted addresses) of each interface a recorded call saw.
fn seen_interfaces(call: &Value) -> Vec<(String, Vec<String>)> {
    call["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .map(|i| {
            let mut ips: Vec<String> = i["ips"]
                .as_array()
                .expect("ips")
                .iter()
                .map(|ip| ip.as_str().expect("ip").to_owned())
                .collect();
            ips.sort();
            (i["name"].as_str().expect("name").to_owned(), ips)
        })
        .collect()
}

/// (name, sorted addresses) of each interface of a sandbox knid answered.
fn interfaces_of(sandbox: &pb::Sandbox) -> Vec<(String, Vec<String>)> {
    sandbox
        .interfaces
        .iter()
        .map(|i| {
            let mut ips: Vec<String> = i.ips.iter().map(|ip| ip.address.clone()).collect();
            ips.sort();
            (i.name.clone(), ips)
        })
        .collect()
}

/// Nothing of the failed attach of `id` is left: no record, no reserved address, no host link,
/// no pod interface.
fn assert_nothing_left(node: &TestNode, id: &str, netns: &Path) {
    node.assert_not_found(id);
    node.wait_capacity_used("default", 0);
    node.assert_host_clean();
    assert!(
        testkit::link_in(netns, "eth0").is_none(),
        "eth0 left in {}",
        netns.display()
    );
    assert!(
        node.list_ids().is_empty(),
        "sandboxes left: {:?}",
        node.list_ids()
    );
}

#[test]
fn a_required_extension_that_refuses_fails_the_attach_and_leaves_nothing() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("extension_health_interval = \"0s\"");
    let record = node.dir().join("calls.jsonl");
    let record_arg = record.display().to_string();
    let audit_socket = node.dir().join("audit.sock");
    let mesh_socket = node.dir().join("mesh.sock");
    let _audit = Extension::start(&audit_socket, &["--name", "audit", "--record", &record_arg]);
    let _mesh = Extension::start(
        &mesh_socket,
        &[
            "--name",
            "mesh",
            "--record",
            &record_arg,
            "--fail-attach",
            "sidecar refused",
        ],
    );
    register(
        &node,
        &registration("audit", &audit_socket, BOTH, false, 0, 0),
    );
    register(
        &node,
        &registration("mesh", &mesh_socket, &["post-attach"], true, 0, 1),
    );

    let netns = node.netns("refused");
    let message = expect_code(
        node.client()
            .attach(&node.attach_req("pod-refused", &netns, "eth0"), RPC),
        Code::FAILED_PRECONDITION,
        "attach refused by a required extension",
    );
    assert!(
        message.contains("extension mesh: sidecar refused"),
        "the error does not carry the extension's name and message: {message:?}"
    );
    assert_nothing_left(&node, "pod-refused", &netns);

    let calls = hook_calls(&record);
    assert_eq!(
        summaries(&calls),
        [
            "audit OnAttach eth0",
            "mesh OnAttach eth0",
            "audit OnDetach eth0"
        ],
        "audit, which had accepted, must hear of the undone attach"
    );
    assert!(calls.iter().all(|c| c["sandbox"] == "pod-refused"));
    let mesh = info(&node, "mesh");
    assert!(!mesh.last_call_ok);
    assert_eq!(mesh.last_error, "sidecar refused");

    // Nothing of the failed attempt blocks the next one.
    unregister(&node, "mesh");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-refused", &netns, "eth0"), RPC)
        .expect("attach once mesh is gone");
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
    node.client()
        .detach(&testkit::detach_req("pod-refused"), RPC)
        .expect("Detach");
    node.assert_host_clean();
}

#[test]
fn a_required_extension_that_does_not_answer_in_time_fails_the_attach() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("extension_health_interval = \"0s\"");
    let socket = node.dir().join("slow.sock");
    let _slow = Extension::start(&socket, &["--delay-ms", "2000"]);
    register(
        &node,
        &registration("slow", &socket, &["post-attach"], true, 200, 0),
    );

    let netns = node.netns("slow");
    let started = Instant::now();
    let message = expect_code(
        node.client()
            .attach(&node.attach_req("pod-slow", &netns, "eth0"), RPC),
        Code::FAILED_PRECONDITION,
        "attach with a silent required extension",
    );
    let took = started.elapsed();
    assert!(
        message.contains("extension slow: no answer within 200ms"),
        "the error does not say the extension did not answer: {message:?}"
    );
    assert!(
        took < Duration::from_millis(1900),
        "the 200 ms timeout did not bound the call: the attach took {took:?}"
    );
    assert_nothing_left(&node, "pod-slow", &netns);
    let slow = info(&node, "slow");
    assert!(!slow.last_call_ok);
    assert_eq!(slow.last_error, "no answer within 200ms");
}

#[test]
fn an_optional_extension_failure_is_recorded_and_the_attach_succeeds() {
    if !testkit::privileged() {
        return;
    }
    // No poll: a Health call must not overwrite the failed OnAttach before it is read.
    let node = TestNode::start("extension_health_interval = \"0s\"");
    let socket = node.dir().join("quota.sock");
    let _quota = Extension::start(&socket, &["--fail-attach", "quota exceeded"]);
    register(
        &node,
        &registration("quota", &socket, &["post-attach"], false, 0, 0),
    );
    let registered = info(&node, "quota");
    assert!(
        registered.last_call_ok,
        "Health at registration: {registered:?}"
    );

    let netns = node.netns("optional");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-optional", &netns, "eth0"), RPC)
        .expect("an optional extension's refusal does not fail the attach");
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
    let quota = info(&node, "quota");
    assert!(!quota.last_call_ok, "{quota:?}");
    assert_eq!(quota.last_error, "quota exceeded");
    assert!(quota.last_call_at >= registered.last_call_at);
    node.client()
        .detach(&testkit::detach_req("pod-optional"), RPC)
        .expect("Detach");
    node.assert_host_clean();
}

#[test]
fn hooks_see_the_whole_sandbox_in_order_and_hear_of_a_detach_before_it_happens() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("extension_health_interval = \"0s\"");
    let record = node.dir().join("calls.jsonl");
    let record_arg = record.display().to_string();
    // Registered out of order: calls go by order, then by name.
    let mut running = Vec::new();
    for (name, order) in [("gamma", 2), ("alpha", 2), ("beta", 1)] {
        let socket = node.dir().join(format!("{name}.sock"));
        running.push(Extension::start(
            &socket,
            &["--name", name, "--record", &record_arg],
        ));
        register(&node, &registration(name, &socket, BOTH, false, 0, order));
    }
    assert_eq!(listed_names(&node), ["beta", "alpha", "gamma"]);
    const ORDER: [&str; 3] = ["beta", "alpha", "gamma"];
    let round = |method: &str, ifnames: &str| -> Vec<String> {
        ORDER
            .iter()
            .map(|n| format!("{n} {method} {ifnames}"))
            .collect()
    };

    let netns = node.netns("hooks");
    let first = node
        .client()
        .attach(&node.attach_req("pod-hooks", &netns, "eth0"), RPC)
        .expect("attach eth0");
    let second = node
        .client()
        .attach(&node.attach_req("pod-hooks", &netns, "eth1"), RPC)
        .expect("attach eth1");
    assert_eq!(second.interfaces.len(), 2);
    let calls = hook_calls(&record);
    let mut want = round("OnAttach", "eth0");
    want.extend(round("OnAttach", "eth1"));
    assert_eq!(summaries(&calls), want);
    for call in &calls[..3] {
        assert_eq!(call["sandbox"], "pod-hooks");
        assert_eq!(call["netns"], netns.display().to_string(), "{call}");
        assert_eq!(call["phase"], "post-attach");
        assert_eq!(seen_interfaces(call), interfaces_of(&first), "{call}");
    }
    for call in &calls[3..] {
        // The whole sandbox: the interface attached before, and the new one with its IPs.
        assert_eq!(seen_interfaces(call), interfaces_of(&second), "{call}");
    }
    assert_eq!(
        seen_interfaces(&calls[3])[1].1.len(),
        2,
        "eth1 with an IPv4 and an IPv6 address"
    );

    let detach_eth1 = pb::DetachRequest {
        sandbox_id: "pod-hooks".to_owned(),
        ifname: "eth1".to_owned(),
        ..Default::default()
    };
    node.client()
        .detach(&detach_eth1, RPC)
        .expect("detach eth1");
    let calls = hook_calls(&record);
    assert_eq!(summaries(&calls[6..]), round("OnDetach", "eth1"));
    for call in &calls[6..] {
        assert_eq!(call["phase"], "pre-detach");
        // Called before anything changed: eth1 still there, the sandbox still attached.
        assert_eq!(seen_interfaces(call), interfaces_of(&second), "{call}");
        assert_eq!(call["state"], "attached");
    }

    node.client()
        .detach(&testkit::detach_req("pod-hooks"), RPC)
        .expect("detach the rest");
    let calls = hook_calls(&record);
    assert_eq!(summaries(&calls[9..]), round("OnDetach", "eth0"));
    assert_eq!(seen_interfaces(&calls[9]), interfaces_of(&first));
    node.assert_host_clean();
    // Detaching an unknown sandbox calls nobody.
    node.client()
        .detach(&testkit::detach_req("pod-hooks"), RPC)
        .expect("repeated Detach");
    assert_eq!(hook_calls(&record).len(), 12);
}

#[test]
fn registrations_survive_a_restart() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let socket = node.dir().join("mesh.sock");
    let absent = node.dir().join("absent.sock");
    let _mesh = Extension::start(&socket, &[]);
    register(&node, &registration("mesh", &socket, BOTH, true, 750, -4));
    // A socket that does not exist yet is no reason to refuse a registration.
    register(
        &node,
        &registration("later", &absent, &["pre-detach"], false, 0, 3),
    );
    let before = listed(&node);
    assert_eq!(before.len(), 2);
    assert!(before[0].last_call_ok, "{:?}", before[0]);
    assert!(!before[1].last_call_ok);
    assert!(
        before[1].last_error.starts_with("cannot connect to ")
            && before[1].last_error.contains("absent.sock"),
        "{:?}",
        before[1].last_error
    );

    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    node.restart();
    let after = listed(&node);
    let specs = |list: &[pb::ExtensionInfo]| -> Vec<(pb::ExtensionSpec, i64)> {
        list.iter()
            .map(|i| ((*i.extension).clone(), i.registered_at))
            .collect()
    };
    assert_eq!(specs(&after), specs(&before));
    assert_eq!(after[0].extension.timeout_ms, 750);
    assert_eq!(after[0].extension.order, -4);
}

#[test]
fn an_unhealthy_extension_is_registered_and_shown_unhealthy_at_once() {
    if !testkit::privileged() {
        return;
    }
    let node =
        TestNode::start("extension_health_interval = \"0s\"\nrequired_extensions = [\"sick\"]");
    let socket = node.dir().join("sick.sock");
    let _sick = Extension::start(&socket, &["--name", "sick", "--unhealthy"]);
    register(&node, &registration("sick", &socket, BOTH, false, 0, 0));
    let sick = info(&node, "sick");
    assert!(!sick.last_call_ok);
    assert_eq!(sick.last_error, "sick is unhealthy (--unhealthy)");
    let (ready, condition) = extensions_ready(&node);
    assert!(!ready && !condition.status);
    assert_eq!(condition.reason, "Unhealthy");
    assert!(condition.message.contains("sick"), "{condition:?}");
}

#[test]
fn a_vanished_socket_does_not_unregister_and_readiness_follows_health() {
    if !testkit::privileged() {
        return;
    }
    let config = |required: &str| {
        format!("extension_health_interval = \"200ms\"\nrequired_extensions = [{required}]")
    };
    let node = TestNode::start(&config("\"mesh\", \"policy\""));
    let (ready, nothing) = extensions_ready(&node);
    assert!(!ready && !nothing.status);
    assert_eq!(nothing.reason, "NotRegistered");
    assert!(
        nothing.message.contains("mesh") && nothing.message.contains("policy"),
        "{nothing:?}"
    );

    let socket = node.dir().join("mesh.sock");
    let mut mesh = Extension::start(&socket, &[]);
    register(&node, &registration("mesh", &socket, BOTH, true, 300, 0));
    let (_, policy_missing) = extensions_ready(&node);
    assert_eq!(policy_missing.reason, "NotRegistered");
    assert!(
        policy_missing.message.contains("policy") && !policy_missing.message.contains("mesh"),
        "only the unregistered one is named: {policy_missing:?}"
    );

    // SIGHUP re-reads required_extensions.
    node.write_config(&config("\"mesh\""));
    kill(node.pid(), Signal::SIGHUP).expect("SIGHUP");
    wait_for("ExtensionsReady after the reload", SETTLE, || {
        extensions_ready(&node).1.status
    });
    assert!(extensions_ready(&node).0, "ready with every condition true");

    // The extension dies and its socket goes with it: still registered, now unhealthy.
    mesh.stop();
    wait_for("the poller to find mesh gone", SETTLE, || {
        !info(&node, "mesh").last_call_ok
    });
    assert_eq!(
        listed_names(&node),
        ["mesh"],
        "a vanished socket unregistered it"
    );
    let gone = info(&node, "mesh");
    assert!(
        gone.last_error.starts_with("cannot connect to "),
        "{:?}",
        gone.last_error
    );
    let (ready, unhealthy) = extensions_ready(&node);
    assert!(!ready && !unhealthy.status);
    assert_eq!(unhealthy.reason, "Unhealthy");
    assert!(unhealthy.message.contains("mesh"), "{unhealthy:?}");

    // Still required: attaches fail, cleanly, while it is away.
    let netns = node.netns("away");
    let message = expect_code(
        node.client()
            .attach(&node.attach_req("pod-away", &netns, "eth0"), RPC),
        Code::FAILED_PRECONDITION,
        "attach while a required extension is gone",
    );
    assert!(
        message.contains("extension mesh: cannot connect to "),
        "{message:?}"
    );
    assert_nothing_left(&node, "pod-away", &netns);

    // Back on the same socket: the poller sees it healthy again.
    let _mesh_again = Extension::start(&socket, &[]);
    wait_for("mesh healthy again", SETTLE, || {
        extensions_ready(&node).1.status
    });

    unregister(&node, "mesh");
    assert!(listed(&node).is_empty());
    let (ready, unregistered) = extensions_ready(&node);
    assert!(!ready);
    assert_eq!(unregistered.reason, "NotRegistered");
    assert!(unregistered.message.contains("mesh"), "{unregistered:?}");
    unregister(&node, "mesh");
    unregister(&node, "never-registered");
}

#[test]
fn invalid_registrations_are_refused_naming_the_field() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let (ready, condition) = extensions_ready(&node);
    assert!(ready && condition.status, "{condition:?}");
    assert_eq!(condition.message, "no extensions required");

    let socket = node.dir().join("e.sock");
    let cases = [
        (
            registration("bad/name", &socket, BOTH, false, 0, 0),
            "extension.name",
        ),
        (
            registration("", &socket, BOTH, false, 0, 0),
            "extension.name",
        ),
        (
            registration("e", Path::new("run/e.sock"), BOTH, false, 0, 0),
            "extension.socket_path",
        ),
        (
            registration("e", &socket, &["post-create"], false, 0, 0),
            "extension.phases",
        ),
        (
            registration("e", &socket, &[], false, 0, 0),
            "extension.phases",
        ),
        (
            registration("e", &socket, &["pre-detach", "pre-detach"], false, 0, 0),
            "extension.phases",
        ),
        (
            registration("e", &socket, BOTH, false, 60_001, 0),
            "extension.timeout_ms",
        ),
    ];
    for (req, field) in cases {
        let result: Result<(), ClientError> = node.client().register_extension(&req, RPC);
        let message = expect_code(result, Code::INVALID_ARGUMENT, field);
        assert!(
            names_field(&message, field),
            "{message:?} does not name {field}"
        );
    }
    assert!(listed(&node).is_empty(), "an invalid registration was kept");
    let bad_name = pb::UnregisterExtensionRequest {
        name: "a b".to_owned(),
        ..Default::default()
    };
    let message = expect_code(
        node.client().unregister_extension(&bad_name, RPC),
        Code::INVALID_ARGUMENT,
        "unregister with a bad name",
    );
    assert!(names_field(&message, "name"), "{message:?}");
}

/// Runs `knictl --socket <knid socket> <args>`.
fn knictl(node: &TestNode, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_knictl"))
        .arg("--socket")
        .arg(node.socket())
        .args(args)
        .env_remove("KNID_SOCKET")
        .output()
        .expect("run knictl")
}

fn knictl_ok(node: &TestNode, args: &[&str]) -> String {
    let out = knictl(node, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "knictl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn knictl_registers_lists_and_unregisters_extensions() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("extension_health_interval = \"0s\"");
    let socket = node.dir().join("cli.sock");
    let socket_text = socket.display().to_string();
    let _cli = Extension::start(&socket, &[]);
    let out = knictl_ok(
        &node,
        &[
            "extension",
            "register",
            "cli-ext",
            "--extension-socket",
            &socket_text,
            "--phase",
            "post-attach",
            "--phase",
            "pre-detach",
            "--required",
            "--timeout-ms",
            "1500",
            "--order",
            "-2",
        ],
    );
    assert!(out.contains("registered extension cli-ext"), "{out}");
    let table = knictl_ok(&node, &["extensions"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("cli-ext "))
        .unwrap_or_else(|| panic!("no cli-ext row in:\n{table}"));
    for cell in [
        "-2",
        "post-attach,pre-detach",
        "yes",
        "1500ms",
        &socket_text,
        "ok",
    ] {
        assert!(row.contains(cell), "{cell:?} missing from {row:?}");
    }
    let json: Value =
        serde_json::from_str(&knictl_ok(&node, &["-o", "json", "extensions"])).expect("JSON");
    assert_eq!(json["extensions"][0]["extension"]["name"], "cli-ext");
    assert_eq!(json["extensions"][0]["last_call_ok"], true);

    let bad = knictl(
        &node,
        &[
            "extension",
            "register",
            "x",
            "--extension-socket",
            "rel.sock",
            "--phase",
            "pre-detach",
        ],
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("extension.socket_path"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    knictl_ok(&node, &["extension", "unregister", "cli-ext"]);
    assert_eq!(
        knictl_ok(&node, &["extensions"]).trim(),
        "no extensions registered"
    );
}

#[test]
fn start_up_recovery_detaches_gone_pods_without_calling_extensions() {
    if !testkit::privileged() {
        return;
    }
    // No health polls: any call after the restart could only come from recovery's detach.
    let mut node = TestNode::start(r#"extension_health_interval = "0s""#);
    let absent = node.dir().join("absent.sock");
    register(
        &node,
        &registration("gone", &absent, &["pre-detach"], true, 2000, 0),
    );
    let netns = node.netns("pod-gone");
    node.client()
        .attach(&node.attach_req("pod-gone", &netns, "eth0"), RPC)
        .expect("Attach");
    node.stop();
    node.remove_netns(&netns);
    node.restart();
    node.assert_not_found("pod-gone");
    node.assert_host_clean();
    let after = info(&node, "gone");
    assert_eq!(
        (after.last_call_at, after.last_error.as_str()),
        (0, ""),
        "recovery called the extension: {after:?}"
    );
}

#[test]
fn the_example_extensions_usage_lines_are_commands_knictl_accepts() {
    // No daemon needed: knictl parses its arguments before connecting, and exits 2 on a usage
    // error but 3 when it cannot reach knid.
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/extension.rs"),
    )
    .expect("read examples/extension.rs");
    let lines: Vec<&str> = source
        .lines()
        .filter_map(|l| l.strip_prefix("//! knictl "))
        .collect();
    assert!(!lines.is_empty(), "the example shows no knictl command");
    for line in lines {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_knictl"))
            .args(["--socket", "/nonexistent/knid.sock"])
            .args(line.split_whitespace())
            .env_remove("KNID_SOCKET")
            .output()
            .expect("run knictl");
        assert_eq!(
            out.status.code(),
            Some(3),
            "`knictl {line}`: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A socket that takes connections and never answers on them; counts the connections.
struct Silent {
    calls: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Silent {
    fn bind(socket: &Path) -> Silent {
        let listener =
            std::os::unix::net::UnixListener::bind(socket).expect("bind a silent socket");
        listener.set_nonblocking(true).expect("non-blocking");
        let (calls, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let thread = std::thread::spawn({
            let (calls, stop) = (Arc::clone(&calls), Arc::clone(&stop));
            move || {
                let mut held = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            held.push(conn);
                            calls.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            }
        });
        Silent {
            calls,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn sigterm_is_not_held_up_by_a_health_poll_of_extensions_that_never_answer() {
    if !testkit::privileged() {
        return;
    }
    // Health polls back to back; each of the four extensions takes its whole 1.5 s timeout:
    // sockets that take connections and never answer. A round is 6 s.
    const TIMEOUT_MS: u32 = 1500;
    let mut node = TestNode::start("extension_health_interval = \"100ms\"");
    let silent: Vec<Silent> = (0..4)
        .map(|i| {
            let socket = node.dir().join(format!("silent-{i}.sock"));
            let silent = Silent::bind(&socket);
            register(
                &node,
                &registration(&format!("silent-{i}"), &socket, BOTH, false, TIMEOUT_MS, i),
            );
            silent
        })
        .collect();
    assert!(
        !info(&node, "silent-0").last_call_ok,
        "a socket that never answers was called healthy"
    );
    // SIGTERM just as a round calls the first extension: the whole round is still ahead.
    let before = silent[0].calls.load(Ordering::SeqCst);
    wait_for(
        "a health poll round to call silent-0",
        Duration::from_secs(30),
        || silent[0].calls.load(Ordering::SeqCst) > before,
    );
    let last_called = silent[3].calls.load(Ordering::SeqCst);
    let started = Instant::now();
    let status = node.stop();
    let took = started.elapsed();
    assert!(status.success(), "knid exit status {status}");
    // The call in progress ends by its timeout and the round stops before the next extension,
    // instead of calling the three others (4.5 s more).
    assert!(
        took < Duration::from_millis(u64::from(TIMEOUT_MS) * 2 + 500),
        "knid took {took:?} to stop after SIGTERM during a health poll of 4 × {TIMEOUT_MS} ms"
    );
    assert_eq!(
        silent[3].calls.load(Ordering::SeqCst),
        last_called,
        "the round that SIGTERM interrupted went on to call silent-3"
    );
}
