//! knid-cni driven by Debian's go-cni (golang-github-containerd-go-cni-dev), the library
//! containerd's CRI calls plugins with: a small Go client (tests/go_cni/main.go) is built with
//! `go build` against the packaged sources and run against the real knid in a private netns.
//! go-cni marshals its capability structs without JSON tags (`{"HostPort":8090,…}`), so this
//! holds knid-cni to the bytes containerd really sends, not to the spec's spelling: hostPort,
//! DNS and bandwidth (which knid applies natively) must reach knid.

use std::path::{Path, PathBuf};
use std::process::Command;

use knid_transport::pb;
use serde_json::json;
use testkit::bins::knid_cni;
use testkit::cni::{exec_in, Exec};
use testkit::libcni::{go_build, GOPATH};
use testkit::{TestNode, RPC};

const NETWORKS: &str = r#"
[networks.cninet]
bridge = "knid0"
subnets = ["10.88.0.0/24"]
"#;

/// The Go client, its conflist directory and its plugin directory.
struct GoCni {
    _dir: tempfile::TempDir,
    client: PathBuf,
    conf_dir: PathBuf,
    plugin_dir: PathBuf,
}

impl GoCni {
    /// Builds the client and writes a conflist naming knid with every capability containerd's
    /// CRI passes; `None` (or a panic under CI) when Go or go-cni is missing.
    fn build(node: &TestNode) -> Option<GoCni> {
        let go_cni = Path::new(GOPATH).join("src/github.com/containerd/go-cni");
        if !go_cni.is_dir() || Command::new("go").arg("version").output().is_err() {
            testkit::gates::skip_unless_ci(
                "needs go and go-cni: apt-get install golang-go golang-github-containerd-go-cni-dev",
            );
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let client = dir.path().join("gocni");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go_cni/main.go");
        if let Err(e) = go_build(&source, &client, &dir.path().join("cache")) {
            panic!("the go-cni client: {e}");
        }
        let conf_dir = dir.path().join("net.d");
        let plugin_dir = dir.path().join("bin");
        std::fs::create_dir_all(&conf_dir).expect("mkdir net.d");
        std::fs::create_dir_all(&plugin_dir).expect("mkdir bin");
        std::os::unix::fs::symlink(knid_cni(), plugin_dir.join("knid")).expect("symlink knid");
        let conflist = json!({
            "cniVersion": "1.0.0",
            "name": "cninet",
            "plugins": [{
                "type": "knid",
                "socket": node.socket(),
                "capabilities": {
                    "portMappings": true,
                    "dns": true,
                    "bandwidth": true,
                    "io.kubernetes.cri.pod-annotations": true
                }
            }]
        });
        std::fs::write(conf_dir.join("10-knid.conflist"), conflist.to_string())
            .expect("write the conflist");
        Some(GoCni {
            _dir: dir,
            client,
            conf_dir,
            plugin_dir,
        })
    }

    /// Runs the client's `verb` for container `id` in `netns`, from the node's host netns.
    fn run(&self, node: &TestNode, verb: &str, id: &str, netns: &Path) -> Exec {
        let args = [
            verb.to_owned(),
            self.conf_dir.display().to_string(),
            self.plugin_dir.display().to_string(),
            id.to_owned(),
            netns.display().to_string(),
        ];
        // exec_in runs a program with an environment and stdin; a shell reading the command
        // line from stdin passes the client its arguments.
        let script = format!(
            "exec {} {}\n",
            self.client.display(),
            args.map(|a| format!("'{a}'")).join(" ")
        );
        exec_in(
            node.host_path(),
            Path::new("/bin/sh"),
            &[],
            script.as_bytes(),
        )
    }
}

fn inspect(node: &TestNode, id: &str) -> Result<pb::Sandbox, String> {
    node.client()
        .inspect(&testkit::inspect_req(id), RPC)
        .map_err(|e| e.to_string())
}

#[test]
fn go_cni_setup_with_host_port_dns_and_bandwidth_reaches_knid_and_remove_cleans_up() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let Some(gocni) = GoCni::build(&node) else {
        return;
    };
    let netns = node.netns("web");
    let add = gocni.run(&node, "add", "web", &netns);
    assert_eq!(add.code, 0, "go-cni Setup failed: {add:?}");
    let result: serde_json::Value = serde_json::from_str(add.stdout.trim()).expect("Result JSON");
    let eth0 = &result["Interfaces"]["eth0"];
    assert!(
        eth0["IPConfigs"]
            .as_array()
            .is_some_and(|ips| !ips.is_empty()),
        "go-cni's result has no address for eth0: {result}"
    );

    let sandbox = inspect(&node, "web").expect("Inspect after Setup");
    let ports: Vec<_> = sandbox
        .port_mappings
        .iter()
        .map(|m| (m.host_port, m.container_port, m.protocol.clone()))
        .collect();
    assert_eq!(ports, [(8090, 80, "tcp".to_owned())]);
    let dns = sandbox.dns.as_ref().expect("dns recorded");
    assert_eq!(dns.servers, ["10.96.0.10"]);
    assert_eq!(dns.searches, ["default.svc.cluster.local"]);
    assert_eq!(dns.options, ["ndots:5"]);
    let pod = sandbox.pod.as_ref().expect("pod recorded");
    assert_eq!(
        (pod.namespace.as_str(), pod.name.as_str()),
        ("default", "web")
    );
    assert_eq!(
        sandbox
            .annotations
            .get("kubernetes.io/ingress-bandwidth")
            .map(String::as_str),
        Some("10M")
    );
    // go-cni's {"IngressRate":10000000,"IngressBurst":1000000}: knid shapes the interface itself.
    let bw = sandbox.interfaces[0]
        .bandwidth
        .as_ref()
        .expect("bandwidth recorded on eth0");
    assert_eq!(
        (bw.ingress_rate, bw.ingress_burst, bw.egress_rate),
        (10_000_000, 1_000_000, 0),
        "{bw:?}"
    );
    let host = &sandbox.interfaces[0].host_ifname;
    assert!(
        node.host_qdiscs(host).contains(&"tbf".to_owned()),
        "no tbf on {host}: {:?}",
        node.host_qdiscs(host)
    );
    assert!(
        !sandbox
            .annotations
            .contains_key("kubectl.kubernetes.io/last-applied-configuration"),
        "annotations knid does not use are recorded: {:?}",
        sandbox.annotations
    );

    // knid maps the host port natively (no chained portmap plugin): from the node itself, the
    // gateway's port 8090 reaches the pod's port 80.
    let (pod_ip, gateway) = testkit::ip_of(&sandbox.interfaces[0], "ipv4");
    let pod_addr = std::net::SocketAddr::new(pod_ip.addr(), 80);
    let node_addr = std::net::SocketAddr::new(gateway, 8090);
    testkit::tcp_via(&netns, pod_addr, node.host_path(), Some(node_addr));

    let check = gocni.run(&node, "check", "web", &netns);
    assert_eq!(check.code, 0, "go-cni Check failed: {check:?}");
    let del = gocni.run(&node, "del", "web", &netns);
    assert_eq!(del.code, 0, "go-cni Remove failed: {del:?}");
    assert!(
        inspect(&node, "web").is_err(),
        "the sandbox outlived Remove"
    );
    node.wait_no_kn_links();
    node.assert_host_clean();
}

#[test]
fn go_cni_remove_with_a_runtime_config_knid_cannot_use_still_removes_everything() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let Some(gocni) = GoCni::build(&node) else {
        return;
    };
    let netns = node.netns("stuck");
    let add = gocni.run(&node, "add", "stuck", &netns);
    assert_eq!(add.code, 0, "go-cni Setup failed: {add:?}");
    assert!(inspect(&node, "stuck").is_ok());
    // A host port of 0 is refused on ADD; on DEL it must not stop the teardown.
    let del = gocni.run(&node, "del-unusable", "stuck", &netns);
    assert_eq!(del.code, 0, "go-cni Remove failed: {del:?}");
    assert!(
        inspect(&node, "stuck").is_err(),
        "the sandbox outlived Remove"
    );
    node.wait_no_kn_links();
    node.assert_host_clean();
}
