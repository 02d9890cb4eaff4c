//! The stand-in API server held to the real one's wire format by an independent client, curl
//! (OpenSSL's TLS and certificate checks, its own HTTP/1.1 and chunked parsing). curl must be
//! installed: .ci/run installs it (tests/metrics.rs uses it too).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{KubeApi, NodeSpec, BOOKMARK_INTERVAL};

/// How long any one curl may take.
const CURL_DEADLINE: Duration = Duration::from_secs(20);

pub(super) struct Fixture {
    pub api: KubeApi,
    _dir: tempfile::TempDir,
}

pub(super) fn start() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let api = KubeApi::start(listener, dir.path()).expect("start");
    Fixture { api, _dir: dir }
}

fn node(name: &str, cidr: &str, ip: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        pod_cidrs: vec![cidr.into()],
        internal_ips: vec![ip.into()],
    }
}

fn numbered(i: usize) -> NodeSpec {
    node(
        &format!("node-{i:04}"),
        &format!("10.{}.{}.0/24", 100 + i / 256, i % 256),
        &format!("192.0.{}.{}", i / 250, 1 + i % 250),
    )
}

pub(super) fn url(api: &KubeApi, path: &str) -> String {
    format!("https://{}{path}", api.addr())
}

/// curl with the CA and the token, and `args`.
pub(super) fn curl_command(api: &KubeApi, args: &[&str]) -> Command {
    let mut command = Command::new("curl");
    command
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(api.ca_path())
        .arg("-H")
        .arg(format!("Authorization: Bearer {}", api.token()))
        .args(args)
        .stdin(Stdio::null());
    command
}

pub(super) fn run(mut command: Command) -> Output {
    command.output().expect("curl runs (is it installed?)")
}

/// The status and JSON body of `GET path`.
pub(super) fn get(api: &KubeApi, path: &str) -> (u16, Value) {
    let output = run(curl_command(
        api,
        &["-w", "\n%{http_code}", &url(api, path)],
    ));
    assert!(output.status.success(), "curl {path}: {output:?}");
    parse_with_code(&output)
}

/// A body followed by `-w '\n%{http_code}'`.
pub(super) fn parse_with_code(output: &Output) -> (u16, Value) {
    let text = String::from_utf8_lossy(&output.stdout);
    let (body, code) = text.rsplit_once('\n').expect("curl wrote the code");
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    (code.parse().expect("a status code"), body)
}

/// A `curl -N` reading a watch stream, one line at a time.
pub(super) struct CurlWatch {
    child: Child,
    lines: Receiver<String>,
}

impl CurlWatch {
    fn start(api: &KubeApi, query: &str) -> CurlWatch {
        CurlWatch::at(api, &format!("/api/v1/nodes?{query}"))
    }

    /// A watch of `path` (with its query).
    pub(super) fn at(api: &KubeApi, path: &str) -> CurlWatch {
        let mut command = curl_command(api, &["-N", &url(api, path)]);
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("curl runs (is it installed?)");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        CurlWatch { child, lines }
    }

    /// The next event, parsed.
    pub(super) fn next_event(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(10))
            .expect("an event within 10 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// The events until the stream ends, and how curl exited.
    pub(super) fn finish(mut self) -> (ExitStatus, Vec<Value>, String) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(started.elapsed() < CURL_DEADLINE, "curl did not end");
            std::thread::sleep(Duration::from_millis(20));
        };
        let events = self
            .lines
            .iter()
            .map(|line| serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
            .collect();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        (status, events, stderr)
    }
}

impl Drop for CurlWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn wait_for_watches(api: &KubeApi, count: usize) {
    crate::wait_for("the watches to open", Duration::from_secs(10), || {
        api.open_watches() == count
    });
}

pub(super) fn rv_of(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion is a string")
        .parse()
        .expect("a decimal resourceVersion")
}

fn list_rv(api: &KubeApi) -> u64 {
    let (status, list) = get(api, "/api/v1/nodes");
    assert_eq!(status, 200);
    rv_of(&list)
}

#[test]
fn the_server_can_be_shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<KubeApi>();
}

#[test]
fn requests_without_the_right_token_get_the_401_status() {
    let f = start();
    let unauthorized = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401
    });
    let nodes = url(&f.api, "/api/v1/nodes");
    let mut no_token = Command::new("curl");
    no_token
        .args(["-sS", "-w", "\n%{http_code}", "--cacert"])
        .arg(f.api.ca_path())
        .arg(&nodes);
    let mut wrong_token = Command::new("curl");
    wrong_token
        .args(["-sS", "-w", "\n%{http_code}", "--cacert"])
        .arg(f.api.ca_path())
        .args(["-H", "Authorization: Bearer nope", &nodes]);
    for command in [no_token, wrong_token] {
        let (status, body) = parse_with_code(&run(command));
        assert_eq!((status, body), (401, unauthorized.clone()));
    }
    assert!(f.api.requests().iter().all(|r| r.status == 401));
    assert_eq!(f.api.requests().len(), 2);
}

#[test]
fn get_returns_a_realistic_node_and_a_404_status_for_an_unknown_one() {
    let f = start();
    f.api.add_node(NodeSpec {
        name: "node-a".into(),
        pod_cidrs: vec!["10.244.1.0/24".into(), "fd00:10:244:1::/64".into()],
        internal_ips: vec!["192.0.2.1".into(), "2001:db8::1".into()],
    });
    f.api.add_node(NodeSpec {
        name: "node-b".into(),
        ..NodeSpec::default()
    });

    let (status, node) = get(&f.api, "/api/v1/nodes/node-a");
    assert_eq!(status, 200);
    assert_eq!(
        (node["kind"].as_str(), node["apiVersion"].as_str()),
        (Some("Node"), Some("v1"))
    );
    let metadata = &node["metadata"];
    assert_eq!(metadata["name"], "node-a");
    assert_eq!(metadata["uid"].as_str().map(str::len), Some(36));
    assert_eq!(metadata["labels"]["kubernetes.io/hostname"], "node-a");
    assert_eq!(metadata["labels"]["kubernetes.io/os"], "linux");
    let created = metadata["creationTimestamp"]
        .as_str()
        .expect("creationTimestamp");
    assert!(
        created.parse::<jiff::Timestamp>().is_ok() && created.ends_with('Z'),
        "{created}"
    );
    assert_eq!(node["spec"]["podCIDR"], "10.244.1.0/24");
    assert_eq!(
        node["spec"]["podCIDRs"],
        json!(["10.244.1.0/24", "fd00:10:244:1::/64"])
    );
    assert_eq!(
        node["status"]["addresses"],
        json!([
            {"type": "InternalIP", "address": "192.0.2.1"},
            {"type": "InternalIP", "address": "2001:db8::1"},
            {"type": "Hostname", "address": "node-a"}
        ])
    );
    assert_eq!(
        node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        10250
    );
    assert_eq!(node["status"]["nodeInfo"]["architecture"], "amd64");
    let ready = node["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
        .expect("a Ready condition");
    assert_eq!(ready["status"], "True");

    let (_, bare) = get(&f.api, "/api/v1/nodes/node-b");
    let spec = bare["spec"].as_object().expect("spec");
    assert!(
        !spec.contains_key("podCIDR") && !spec.contains_key("podCIDRs"),
        "{spec:?}"
    );
    assert!(
        rv_of(&bare) > rv_of(&node),
        "each change takes a new resourceVersion"
    );

    let (status, missing) = get(&f.api, "/api/v1/nodes/ghost");
    assert_eq!(status, 404);
    assert_eq!(
        missing,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "nodes \"ghost\" not found", "reason": "NotFound",
            "details": {"name": "ghost", "kind": "nodes"}, "code": 404
        })
    );
}

#[test]
fn other_paths_are_404_and_other_methods_405() {
    let f = start();
    for path in ["/api/v1/services", "/api/v1/nodes/a/status", "/version"] {
        let (status, body) = get(&f.api, path);
        assert_eq!(
            (status, body["reason"].as_str()),
            (404, Some("NotFound")),
            "{path}"
        );
    }
    let output = run(curl_command(
        &f.api,
        &[
            "-X",
            "POST",
            "-d",
            "{}",
            "-w",
            "\n%{http_code}",
            &url(&f.api, "/api/v1/nodes"),
        ],
    ));
    let (status, body) = parse_with_code(&output);
    assert_eq!(
        (status, body["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
}

#[test]
fn a_list_pages_with_limit_and_continue() {
    let f = start();
    for i in [4, 1, 6, 0, 3, 5, 2] {
        f.api.add_node(numbered(i));
    }
    let (_, all) = get(&f.api, "/api/v1/nodes");
    assert_eq!(all["kind"], "NodeList");
    assert_eq!(all["items"].as_array().map(Vec::len), Some(7));
    assert!(all["metadata"].get("continue").is_none());
    let list_rv = rv_of(&all);

    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut remaining = Vec::new();
    for page in 0..3 {
        let query = match &token {
            None => "limit=3".to_string(),
            Some(token) => format!("limit=3&continue={token}"),
        };
        let (status, list) = get(&f.api, &format!("/api/v1/nodes?{query}"));
        assert_eq!(status, 200, "page {page}: {list}");
        assert_eq!(
            rv_of(&list),
            list_rv,
            "every page reports the first page's resourceVersion"
        );
        for item in list["items"].as_array().expect("items") {
            names.push(item["metadata"]["name"].as_str().expect("name").to_string());
        }
        token = list["metadata"]["continue"].as_str().map(str::to_string);
        remaining.push(list["metadata"]["remainingItemCount"].as_u64());
        if page < 2 {
            assert!(token.is_some(), "page {page} has a continue token");
        }
    }
    assert_eq!(token, None, "the last page has no continue token");
    assert_eq!(remaining, [Some(4), Some(1), None]);
    let expected: Vec<String> = (0..7).map(|i| numbered(i).name).collect();
    assert_eq!(names, expected, "every node once, in name order");

    let (_, first) = get(&f.api, "/api/v1/nodes?limit=3");
    let stale = first["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();
    f.api.add_node(numbered(7));
    f.api.expire_history();
    let (status, expired) = get(&f.api, &format!("/api/v1/nodes?limit=3&continue={stale}"));
    assert_eq!((status, expired["reason"].as_str()), (410, Some("Expired")));
    let (status, _) = get(&f.api, "/api/v1/nodes?limit=3&continue=bm9wZQ");
    assert_eq!(status, 400, "a token the server did not make");
}

#[test]
fn a_field_selector_on_the_name_filters_and_a_label_selector_is_refused() {
    let f = start();
    for i in 0..3 {
        f.api.add_node(numbered(i));
    }
    let (status, list) = get(
        &f.api,
        "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-0001",
    );
    assert_eq!(status, 200);
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "node-0001");

    let watch = CurlWatch::start(
        &f.api,
        "watch=1&resourceVersion=0&timeoutSeconds=1&fieldSelector=metadata.name%3D%3Dnode-0002",
    );
    let (status, events, stderr) = watch.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["object"]["metadata"]["name"], "node-0002");

    let (status, body) = get(&f.api, "/api/v1/nodes?labelSelector=a%3Db");
    assert_eq!((status, body["reason"].as_str()), (400, Some("BadRequest")));
    let (status, body) = get(
        &f.api,
        "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse",
    );
    assert_eq!(status, 400);
    assert_eq!(
        body["message"],
        "field label not supported: spec.unschedulable"
    );
}

#[test]
fn a_watch_sees_added_modified_and_deleted_live_and_ends_at_its_timeout() {
    let f = start();
    f.api.add_node(numbered(0));
    let from = list_rv(&f.api);
    let watch = CurlWatch::start(
        &f.api,
        &format!("watch=true&resourceVersion={from}&timeoutSeconds=3"),
    );
    wait_for_watches(&f.api, 1);

    f.api.add_node(numbered(1));
    let mut changed = numbered(1);
    changed.pod_cidrs = vec!["10.200.0.0/24".into()];
    f.api.update_node(changed);
    f.api.delete_node(&numbered(1).name);

    let added = watch.next_event();
    let modified = watch.next_event();
    let deleted = watch.next_event();
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["object"]["metadata"]["name"], numbered(1).name);
    assert_eq!(modified["type"], "MODIFIED");
    assert_eq!(
        modified["object"]["spec"]["podCIDRs"],
        json!(["10.200.0.0/24"])
    );
    assert_eq!(
        modified["object"]["metadata"]["uid"], added["object"]["metadata"]["uid"],
        "an update keeps the uid"
    );
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(
        deleted["object"]["spec"]["podCIDRs"],
        json!(["10.200.0.0/24"]),
        "as last seen"
    );
    let rvs = [&added, &modified, &deleted].map(|e| rv_of(&e["object"]));
    assert_eq!(rvs, [from + 1, from + 2, from + 3]);

    let (status, rest, stderr) = watch.finish();
    assert!(
        status.success(),
        "a clean end at timeoutSeconds: {status} {stderr}"
    );
    assert!(rest.is_empty(), "no bookmarks unless asked: {rest:?}");
    wait_for_watches(&f.api, 0);
}

#[test]
fn a_watch_replays_the_history_after_its_resource_version() {
    let f = start();
    f.api.add_node(numbered(0));
    let from = list_rv(&f.api);
    f.api.add_node(numbered(1));
    f.api.delete_node(&numbered(0).name);
    let (status, events, stderr) = CurlWatch::start(
        &f.api,
        &format!("watch=1&resourceVersion={from}&timeoutSeconds=1"),
    )
    .finish();
    assert!(status.success(), "{stderr}");
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().expect("type"),
                e["object"]["metadata"]["name"].as_str().expect("name"),
            )
        })
        .collect();
    assert_eq!(seen, [("ADDED", "node-0001"), ("DELETED", "node-0000")]);
}

#[test]
fn a_watch_from_zero_starts_with_an_added_per_node() {
    let f = start();
    for i in 0..3 {
        f.api.add_node(numbered(i));
    }
    f.api.update_node(numbered(1));
    for query in [
        "watch=1&resourceVersion=0&timeoutSeconds=1",
        "watch=1&timeoutSeconds=1",
    ] {
        let (status, events, stderr) = CurlWatch::start(&f.api, query).finish();
        assert!(status.success(), "{stderr}");
        let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(types, ["ADDED"; 3], "{query}");
        assert_eq!(
            rv_of(&events[1]["object"]),
            list_rv(&f.api),
            "the node as it is now"
        );
    }
}

#[test]
fn a_watch_with_bookmarks_gets_them_with_the_current_resource_version() {
    let f = start();
    f.api.add_node(numbered(0));
    let current = list_rv(&f.api);
    let started = Instant::now();
    let watch = CurlWatch::start(
        &f.api,
        &format!("watch=1&resourceVersion={current}&allowWatchBookmarks=true&timeoutSeconds=10"),
    );
    let bookmark = watch.next_event();
    assert!(
        started.elapsed() >= BOOKMARK_INTERVAL,
        "not before the interval"
    );
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(bookmark["object"]["kind"], "Node");
    assert_eq!(bookmark["object"]["apiVersion"], "v1");
    assert_eq!(rv_of(&bookmark["object"]), current);

    f.api.add_node(numbered(1));
    let added = watch.next_event();
    assert_eq!(added["type"], "ADDED");
    let next = watch.next_event();
    assert_eq!(next["type"], "BOOKMARK");
    assert_eq!(
        rv_of(&next["object"]),
        current + 1,
        "bookmarks follow the changes"
    );
}

#[test]
fn a_watch_is_chunked_json() {
    let f = start();
    let output = run(curl_command(
        &f.api,
        &[
            "-D",
            "-",
            "-o",
            "/dev/null",
            &url(&f.api, "/api/v1/nodes?watch=1&timeoutSeconds=1"),
        ],
    ));
    assert!(output.status.success(), "{output:?}");
    let head = String::from_utf8_lossy(&output.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
}

#[test]
fn a_watch_from_expired_history_gets_the_410_error_event_and_ends() {
    let f = start();
    f.api.add_node(numbered(0));
    let old = list_rv(&f.api);
    f.api.add_node(numbered(1));
    f.api.expire_history();
    let current = list_rv(&f.api);

    let output = run(curl_command(
        &f.api,
        &[
            "-N",
            "-w",
            "%{http_code}",
            &url(
                &f.api,
                &format!("/api/v1/nodes?watch=1&resourceVersion={old}"),
            ),
        ],
    ));
    assert!(output.status.success(), "a clean end: {output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    let (event, code) = text.split_once('\n').expect("one event line");
    assert_eq!(code, "200", "the error comes in a 200 stream");
    let event: Value = serde_json::from_str(event).expect("JSON");
    assert_eq!(
        event,
        json!({"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("too old resource version: {old} ({current})"),
            "reason": "Expired", "code": 410
        }})
    );

    let watch = CurlWatch::start(&f.api, &format!("watch=1&resourceVersion={current}"));
    wait_for_watches(&f.api, 1);
    f.api.add_node(numbered(2));
    assert_eq!(
        watch.next_event()["type"],
        "ADDED",
        "the current resourceVersion is served"
    );
}

#[test]
fn drop_watches_ends_every_stream_abruptly() {
    let f = start();
    let watches: Vec<CurlWatch> = (0..2)
        .map(|_| CurlWatch::start(&f.api, "watch=1&allowWatchBookmarks=1"))
        .collect();
    wait_for_watches(&f.api, 2);
    f.api.drop_watches();
    assert_eq!(f.api.open_watches(), 0);
    for watch in watches {
        let (status, _, stderr) = watch.finish();
        // curl's "transfer closed with outstanding read data remaining": no last chunk.
        assert_eq!(status.code(), Some(18), "{stderr}");
    }
    // The server itself goes on.
    let (status, _) = get(&f.api, "/api/v1/nodes");
    assert_eq!(status, 200);
}

#[test]
fn a_watch_whose_client_left_is_closed() {
    let f = start();
    let watch = CurlWatch::start(&f.api, "watch=1");
    wait_for_watches(&f.api, 1);
    drop(watch);
    wait_for_watches(&f.api, 0);
}

#[test]
fn stop_refuses_connections_and_restart_serves_the_same_state_and_ca() {
    let f = start();
    f.api.add_node(numbered(0));
    let (_, before) = get(&f.api, "/api/v1/nodes/node-0000");
    let ca = std::fs::read(f.api.ca_path()).expect("ca.crt");
    let addr = f.api.addr();
    let watch = CurlWatch::start(&f.api, "watch=1");
    wait_for_watches(&f.api, 1);

    f.api.stop();
    assert_eq!(f.api.open_watches(), 0);
    let (status, _, stderr) = watch.finish();
    assert!(!status.success(), "stopping cuts the watch: {stderr}");
    let refused = run(curl_command(&f.api, &[&url(&f.api, "/api/v1/nodes")]));
    assert_eq!(
        refused.status.code(),
        Some(7),
        "connection refused: {refused:?}"
    );
    f.api.stop();

    f.api
        .restart(TcpListener::bind(addr).expect("re-bind the same address"));
    assert_eq!(f.api.addr(), addr);
    let (status, after) = get(&f.api, "/api/v1/nodes/node-0000");
    assert_eq!(status, 200);
    assert_eq!(after, before, "same node, same resourceVersion");
    assert_eq!(std::fs::read(f.api.ca_path()).expect("ca.crt"), ca);
}

#[test]
fn the_certificate_is_checked_and_names_the_service() {
    let f = start();
    let port = f.api.addr().port();
    let untrusted = run({
        let mut command = Command::new("curl");
        command.args(["-sS", &url(&f.api, "/api/v1/nodes")]);
        command
    });
    assert_eq!(
        untrusted.status.code(),
        Some(60),
        "no CA, no trust: {untrusted:?}"
    );

    for name in ["kubernetes.default.svc", "kubernetes", "localhost"] {
        let resolve = format!("{name}:{port}:127.0.0.1");
        let address = format!("https://{name}:{port}/api/v1/nodes");
        let output = run(curl_command(
            &f.api,
            &["--resolve", &resolve, "-w", "\n%{http_code}", &address],
        ));
        assert_eq!(parse_with_code(&output).0, 200, "{name}: {output:?}");
    }
    let resolve = format!("elsewhere.example:{port}:127.0.0.1");
    let address = format!("https://elsewhere.example:{port}/api/v1/nodes");
    let mismatch = run(curl_command(&f.api, &["--resolve", &resolve, &address]));
    assert_eq!(
        mismatch.status.code(),
        Some(60),
        "a name not in the certificate: {mismatch:?}"
    );
}

/// One `Connection: close` GET through rustls (webpki's certificate checks, as knid's own
/// client makes them), naming the server `server_name`; the whole response.
fn rustls_get(api: &KubeApi, server_name: &str, path: &str) -> Result<String, std::io::Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use std::io::{Read, Write};
    use std::sync::Arc;

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(api.ca_path()).expect("ca.crt is PEM"))
        .expect("a CA certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(server_name.to_string()).expect("a server name");
    let tls = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    let tcp = std::net::TcpStream::connect(api.addr())?;
    let mut stream = rustls::StreamOwned::new(tls, tcp);
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {server_name}\r\nAuthorization: Bearer {}\r\n\
         Connection: close\r\n\r\n",
        api.token()
    )?;
    let mut response = String::new();
    // Ends with the server's close_notify: a truncated response would be an error here.
    stream.read_to_string(&mut response)?;
    Ok(response)
}

#[test]
fn a_rustls_client_trusts_the_ca_for_the_address_and_the_service_names() {
    let f = start();
    f.api.add_node(numbered(0));
    for name in ["127.0.0.1", "kubernetes.default.svc", "kubernetes"] {
        let response = rustls_get(&f.api, name, "/api/v1/nodes/node-0000").expect(name);
        assert!(
            response.starts_with("HTTP/1.1 200 OK\r\n"),
            "{name}: {response}"
        );
        let (_, body) = response.split_once("\r\n\r\n").expect("a head and a body");
        let node: Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(node["metadata"]["name"], "node-0000");
    }
    let refused = rustls_get(&f.api, "elsewhere.example", "/api/v1/nodes");
    assert!(
        refused.is_err(),
        "a name not in the certificate: {refused:?}"
    );
}

#[test]
fn the_serviceaccount_files_and_kubeconfig_point_at_the_server() {
    let f = start();
    let serviceaccount = f.api.serviceaccount_dir();
    let read = |name: &str| std::fs::read_to_string(serviceaccount.join(name)).expect(name);
    assert_eq!(read("token"), f.api.token());
    assert_eq!(read("namespace"), "kube-system");
    assert!(read("ca.crt").starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(f.api.ca_path(), serviceaccount.join("ca.crt"));

    let kubeconfig = std::fs::read_to_string(f.api.kubeconfig_path()).expect("kubeconfig");
    let value = |key: &str| {
        kubeconfig
            .lines()
            .find_map(|line| line.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {kubeconfig}"))
            .to_string()
    };
    assert_eq!(value("server: "), format!("https://{}", f.api.addr()));
    assert_eq!(
        value("certificate-authority: "),
        f.api.ca_path().to_string_lossy()
    );
    assert!(f.api.ca_path().is_absolute());
    assert_eq!(value("token: "), f.api.token());
    assert_eq!(value("current-context: "), "knid-testkit");
}

#[test]
fn a_connection_is_kept_alive_across_requests() {
    let f = start();
    f.api.add_node(numbered(0));
    let output = run(curl_command(
        &f.api,
        &[
            "-w",
            "%{num_connects} %{http_code}\n",
            "-o",
            "/dev/null",
            &url(&f.api, "/api/v1/nodes"),
            "-o",
            "/dev/null",
            &url(&f.api, "/api/v1/nodes/node-0000"),
        ],
    ));
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "1 200\n0 200\n");
}

#[test]
fn requests_are_recorded_with_their_query_and_status() {
    let f = start();
    get(&f.api, "/api/v1/nodes/ghost");
    get(&f.api, "/api/v1/nodes?limit=5");
    let (status, _, stderr) = CurlWatch::start(&f.api, "watch=1&timeoutSeconds=1").finish();
    assert!(status.success(), "{stderr}");
    let seen: Vec<(String, String, String, bool, u16)> = f
        .api
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path, r.query, r.watch, r.status))
        .collect();
    let expected = [
        ("GET", "/api/v1/nodes/ghost", "", false, 404),
        ("GET", "/api/v1/nodes", "limit=5", false, 200),
        (
            "GET",
            "/api/v1/nodes",
            "watch=1&timeoutSeconds=1",
            true,
            200,
        ),
    ]
    .map(|(m, p, q, w, s)| (m.to_string(), p.to_string(), q.to_string(), w, s));
    assert_eq!(seen, expected);
}

#[test]
fn a_thousand_nodes_list_in_pages_and_replay_to_a_watch() {
    let f = start();
    for i in 0..1000 {
        f.api.add_node(numbered(i));
    }
    let started = Instant::now();
    let (_, first) = get(&f.api, "/api/v1/nodes?limit=500");
    let token = first["metadata"]["continue"].as_str().expect("continue");
    let (_, second) = get(&f.api, &format!("/api/v1/nodes?limit=500&continue={token}"));
    let count = |list: &Value| list["items"].as_array().map_or(0, Vec::len);
    assert_eq!((count(&first), count(&second)), (500, 500));
    assert!(second["metadata"].get("continue").is_none());

    let (status, events, stderr) = CurlWatch::start(&f.api, "watch=1&timeoutSeconds=2").finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(events.len(), 1000);
    assert!(events.iter().all(|e| e["type"] == "ADDED"));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
}

/// `PATCH path` with `content_type` and `body`: the status and JSON answer.
fn patch(api: &KubeApi, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
    let output = run(curl_command(
        api,
        &[
            "-X",
            "PATCH",
            "-H",
            &format!("Content-Type: {content_type}"),
            "--data-binary",
            &body.to_string(),
            "-w",
            "\n%{http_code}",
            &url(api, path),
        ],
    ));
    assert!(output.status.success(), "curl PATCH {path}: {output:?}");
    parse_with_code(&output)
}

#[test]
fn a_status_patch_merges_conditions_bumps_the_version_and_is_watched() {
    let f = start();
    f.api.add_node(numbered(0));
    let (_, before) = get(&f.api, "/api/v1/nodes/node-0000");
    let rv: u64 = before["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a resourceVersion");
    let watch = CurlWatch::start(&f.api, &format!("watch=1&resourceVersion={rv}"));
    let condition = json!({"type": "NetworkUnavailable", "status": "False", "reason": "R"});
    let body = json!({"status": {"conditions": [condition]}});
    let (code, node) = patch(
        &f.api,
        "/api/v1/nodes/node-0000/status",
        super::STRATEGIC_MERGE,
        &body,
    );
    assert_eq!(code, 200, "{node}");
    let types: Vec<&str> = node["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(
        types,
        [
            "MemoryPressure",
            "DiskPressure",
            "PIDPressure",
            "Ready",
            "NetworkUnavailable"
        ]
    );
    assert_eq!(node["metadata"]["resourceVersion"], (rv + 1).to_string());
    let event = watch.next_event();
    assert_eq!(event["type"], "MODIFIED");
    assert_eq!(event["object"]["status"]["conditions"][4], condition);

    let recorded = f.api.patches();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].path, "/api/v1/nodes/node-0000/status");
    assert_eq!(recorded[0].content_type, super::STRATEGIC_MERGE);
    assert_eq!(
        serde_json::from_str::<Value>(&recorded[0].body).ok(),
        Some(body)
    );
}

#[test]
fn a_json_patch_of_taints_is_conditional_on_the_resource_version() {
    let f = start();
    f.api.add_node(numbered(0));
    let taint = json!({"key": "knid.io/pod-network-full", "effect": "NoSchedule"});
    let ops = |rv: &str| {
        json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/spec/taints", "value": [taint]}
        ])
    };
    let path = "/api/v1/nodes/node-0000";
    let (code, status) = patch(&f.api, path, super::JSON_PATCH, &ops("1"));
    assert_eq!(
        (code, &status["reason"]),
        (422, &json!("Invalid")),
        "{status}"
    );
    let rv = f.api.node("node-0000").expect("node")["metadata"]["resourceVersion"].clone();
    let (code, node) = patch(
        &f.api,
        path,
        super::JSON_PATCH,
        &ops(rv.as_str().expect("rv")),
    );
    assert_eq!(code, 200, "{node}");
    assert_eq!(node["spec"]["taints"], json!([taint]));

    f.api.conflict_next_patches(1);
    let body = json!([{"op": "remove", "path": "/spec/taints"}]);
    let (code, status) = patch(&f.api, path, super::JSON_PATCH, &body);
    assert_eq!((code, &status["reason"]), (409, &json!("Conflict")));
    assert_eq!(
        f.api.node("node-0000").expect("node")["spec"]["taints"],
        json!([taint])
    );
    let (code, node) = patch(&f.api, path, super::JSON_PATCH, &body);
    assert_eq!(code, 200, "only the next patch is refused");
    assert!(node["spec"].get("taints").is_none());

    let (code, status) = patch(&f.api, path, "application/json", &body);
    assert_eq!(
        (code, &status["reason"]),
        (415, &json!("UnsupportedMediaType"))
    );
    let (code, _) = patch(&f.api, "/api/v1/nodes/ghost", super::JSON_PATCH, &body);
    assert_eq!(code, 404);
}

#[test]
fn an_update_of_the_spec_keeps_what_patches_wrote() {
    let f = start();
    f.api.add_node(numbered(0));
    f.api.edit_node("node-0000", |node| {
        node["spec"]["taints"] = json!([{"key": "other", "effect": "NoExecute"}]);
    });
    let mut spec = numbered(0);
    spec.internal_ips = vec!["192.0.2.99".into()];
    f.api.update_node(spec);
    let node = f.api.node("node-0000").expect("node");
    assert_eq!(node["spec"]["taints"][0]["key"], "other");
    assert_eq!(node["status"]["addresses"][0]["address"], "192.0.2.99");
    let (_, served) = get(&f.api, "/api/v1/nodes/node-0000");
    assert_eq!(served, node);
}
