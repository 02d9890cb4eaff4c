//! The deployment files (deploy/, .containerignore, .dockerignore) checked by the tools that
//! consume them and against knid itself: `systemd-analyze verify` for the unit, a Kubernetes
//! schema validator for the DaemonSet, knid's own parsers for the configuration and the
//! conflist it ships, and the paths they must share (socket, state, netns and DAN directories,
//! the CNI directories, the binaries the image holds).
//!
//! Needs `systemd-analyze` and `kubernetes-validate` (PyPI; `$KNID_KUBERNETES_VALIDATE` or
//! PATH), which .ci/run installs. Without them a test skips loudly; with `CI=true` it fails.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use knid_core::cni::ConfList;
use knid_core::config::{DEFAULT_DAN_DIR, DEFAULT_SOCKET, DEFAULT_STATE_DIR};
use knid_core::Config;
use knid_transport::cni_plugin::{PluginConf, PLUGIN_TYPE};
use serde_json::{Map, Value};

const UNIT: &str = "deploy/systemd/knid.service";
/// The optional gRPC front's unit.
const GRPC_UNIT: &str = "deploy/systemd/knid-grpc.service";
const DAEMONSET: &str = "deploy/kubernetes/knid-daemonset.yaml";
const CONTAINERFILE: &str = "deploy/image/Containerfile";
const CONTAINERD: &str = "deploy/containerd/config.toml";
const CONFLIST: &str = "deploy/containerd/10-knid.conflist";
const KATA: &str = "deploy/kata/configuration-dan.toml";
/// containerd's CRI table holding the CNI directories (config version 3).
const CONTAINERD_CNI: &str = "plugins.'io.containerd.cri.v1.runtime'.cni";
/// The oldest Kubernetes the DaemonSet is checked against, and the newest the validator knows.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.30.0", "1.37.0"];
/// Where systemd looks for the units the checked one depends on (sysinit.target, ...).
const SYSTEM_UNIT_DIRS: [&str; 2] = ["/usr/lib/systemd/system", "/lib/systemd/system"];
/// Unit settings that give a service a mount namespace of its own, a slave of the host's: the
/// netns knid bind-mounts under /run/netns would then never reach the host.
const MOUNT_NAMESPACE_SETTINGS: &[&str] = &[
    "ProtectSystem",
    "ProtectHome",
    "PrivateTmp",
    "PrivateDevices",
    "PrivateMounts",
    "PrivateNetwork",
    "ReadWritePaths",
    "ReadOnlyPaths",
    "InaccessiblePaths",
    "ExecPaths",
    "NoExecPaths",
    "BindPaths",
    "BindReadOnlyPaths",
    "TemporaryFileSystem",
    "ProtectKernelTunables",
    "ProtectKernelModules",
    "ProtectKernelLogs",
    "ProtectControlGroups",
    "ProtectProc",
    "ProcSubset",
    "ProtectHostname",
    "ProtectClock",
    "MountFlags",
    "RootDirectory",
    "RootImage",
    "DynamicUser",
];

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

// ---------------------------------------------------------------- systemd

/// The unit's `Key=value` lines as (section, key, value), in order.
fn unit_settings(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{UNIT}:{}: not a setting: {line}", n + 1));
        assert!(!value.ends_with('\\'), "{UNIT}:{}: continuation", n + 1);
        out.push((section.clone(), key.to_owned(), value.to_owned()));
    }
    out
}

fn unit_values<'a>(settings: &'a [(String, String, String)], key: &str) -> Vec<&'a str> {
    settings
        .iter()
        .filter(|(section, k, _)| section == "Service" && k == key)
        .map(|(_, _, v)| v.as_str())
        .collect()
}

/// The root package's `[[bin]]` names, from Cargo.toml.
fn bin_names() -> Vec<String> {
    let manifest = read("Cargo.toml");
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if let (true, Some(v)) = (in_bin, line.strip_prefix("name = ")) {
            names.push(v.trim_matches('"').to_owned());
        }
    }
    assert!(!names.is_empty(), "Cargo.toml declares no [[bin]]");
    names
}

/// `systemd-analyze verify` loads the unit the way systemd would: every key, value and
/// dependency, and checks that each Exec*= binary exists. It runs against a root holding the
/// unit, the knid just built at ExecStart's path, the host's other Exec*= tools and the host's
/// unit files (the targets the unit's default dependencies name); any line about the unit fails.
#[test]
fn systemd_unit_passes_systemd_analyze_verify() {
    verify_unit(UNIT, "knid", Path::new(env!("CARGO_BIN_EXE_knid")));
}

/// knid-grpc's unit, checked the same way.
#[test]
fn knid_grpc_systemd_unit_passes_systemd_analyze_verify() {
    verify_unit(GRPC_UNIT, "knid-grpc", &testkit::bins::bin("knid-grpc"));
}

/// `systemd-analyze verify` of the unit file `unit`, whose Exec*= run the binary `bin` built at
/// `built`.
fn verify_unit(unit: &str, bin: &str, built: &Path) {
    let unit_name = Path::new(unit)
        .file_name()
        .and_then(|n| n.to_str())
        .expect("unit file name");
    let Some(analyze) = on_path("systemd-analyze") else {
        testkit::skip_unless_ci("systemd-analyze is not installed (Debian package systemd)");
        return;
    };
    let unit_dirs: Vec<&str> = SYSTEM_UNIT_DIRS
        .into_iter()
        .filter(|d| Path::new(d).is_dir())
        .collect();
    if unit_dirs.is_empty() {
        testkit::skip_unless_ci("no system unit directory (/usr/lib/systemd/system)");
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let install = |path: &str, from: &Path| {
        let to = root.path().join(path.trim_start_matches('/'));
        fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {} to {to:?}: {e}", from.display()));
    };
    install(&format!("/etc/systemd/system/{unit_name}"), &repo(unit));
    let settings = unit_settings(&read(unit));
    let bins = bin_names();
    for (_, key, value) in settings.iter().filter(|(_, k, _)| k.starts_with("Exec")) {
        let program = value
            .trim_start_matches(['-', '@', ':', '+', '!'])
            .split_whitespace()
            .next()
            .unwrap_or_default();
        let name = Path::new(program).file_name().and_then(|n| n.to_str());
        if name == Some(bin) {
            install(program, built);
        } else {
            assert!(
                !name.is_some_and(|n| bins.iter().any(|b| b == n)),
                "{key}={value}: only {bin} is run by the unit"
            );
            // Another tool (kill): the host's own, which the unit's users have too.
            install(program, Path::new(program));
        }
    }
    for dir in unit_dirs {
        let to = root.path().join(dir.trim_start_matches('/'));
        fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        let source = Path::new(dir).canonicalize().expect("canonical unit dir");
        let out = run(Command::new("cp").arg("-a").arg(&source).arg(&to));
        assert!(out.status.success(), "cp -a {dir}: {}", text(&out));
    }
    let version = run(Command::new(&analyze).arg("--version"));
    eprintln!("{}", text(&version).lines().next().unwrap_or_default());
    let out = run(Command::new(&analyze)
        .arg("verify")
        .arg(format!("--root={}", root.path().display()))
        .arg(unit_name));
    let report = text(&out);
    eprintln!("systemd-analyze verify:\n{report}");
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{report}"
    );
    let about_unit: Vec<&str> = report.lines().filter(|l| l.contains("knid")).collect();
    assert!(
        about_unit.is_empty(),
        "systemd-analyze verify complains about {unit}:\n{}",
        about_unit.join("\n")
    );
}

/// What the unit must give knid, and what it must not do to it.
#[test]
fn systemd_unit_gives_knid_its_directories_capabilities_and_no_mount_namespace() {
    let settings = unit_settings(&read(UNIT));
    let service: Vec<&str> = settings
        .iter()
        .filter(|(s, _, _)| s == "Service")
        .map(|(_, k, _)| k.as_str())
        .collect();
    let namespacing: Vec<&&str> = MOUNT_NAMESPACE_SETTINGS
        .iter()
        .filter(|k| service.contains(k))
        .collect();
    assert!(
        namespacing.is_empty(),
        "{UNIT}: {namespacing:?} give knid a mount namespace whose netns mounts never reach \
         the host"
    );
    let one = |key: &str| -> String {
        let values = unit_values(&settings, key);
        assert_eq!(values.len(), 1, "{UNIT}: {key}= must be set once");
        values[0].to_owned()
    };
    assert_eq!(one("Restart"), "on-failure", "knid exits 1 to be restarted");
    let socket_dir = Path::new(DEFAULT_SOCKET).parent().expect("socket dir");
    assert_eq!(
        Path::new("/run").join(one("RuntimeDirectory")),
        socket_dir,
        "RuntimeDirectory= must be the default socket's directory"
    );
    assert_eq!(
        Path::new("/var/lib").join(one("StateDirectory")),
        Path::new(DEFAULT_STATE_DIR),
        "StateDirectory= must be knid's default state_dir"
    );
    let caps = one("CapabilityBoundingSet");
    for cap in ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"] {
        assert!(
            caps.split_whitespace().any(|c| c == cap),
            "{UNIT}: no {cap}"
        );
    }
    let families = one("RestrictAddressFamilies");
    for family in ["AF_UNIX", "AF_NETLINK"] {
        assert!(
            families.split_whitespace().any(|f| f == family),
            "{UNIT}: no {family}"
        );
    }
    let namespaces = one("RestrictNamespaces");
    assert!(
        namespaces.split_whitespace().any(|n| n == "net"),
        "knid unshares netns"
    );
    let devices = unit_values(&settings, "DeviceAllow");
    assert!(
        devices.iter().any(|d| d.starts_with("/dev/net/tun ")),
        "{UNIT}: taps need /dev/net/tun"
    );
}

// ---------------------------------------------------------------- Kubernetes

/// The schema validator: `$KNID_KUBERNETES_VALIDATE`, else `kubernetes-validate` on PATH.
fn kubernetes_validate() -> Option<PathBuf> {
    match std::env::var_os("KNID_KUBERNETES_VALIDATE") {
        Some(path) => Some(PathBuf::from(path)).filter(|p| p.is_file()),
        None => on_path("kubernetes-validate"),
    }
}

/// The Python interpreter of the validator's environment (its script's `#!` line): it has
/// PyYAML, which the validator itself needs.
fn python_of(validator: &Path) -> Vec<String> {
    let script = fs::read_to_string(validator).expect("read the validator script");
    let shebang = script
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .unwrap_or_else(|| panic!("{}: no #! line", validator.display()));
    let mut words: Vec<String> = shebang.split_whitespace().map(str::to_owned).collect();
    if words.first().is_some_and(|w| w.ends_with("/env")) {
        words.remove(0);
    }
    words
}

/// The DaemonSet file's documents as JSON, or `None` (after the skip notice) without the
/// validator's Python.
fn manifest_documents() -> Option<Vec<Value>> {
    let Some(validator) = kubernetes_validate() else {
        testkit::skip_unless_ci(
            "kubernetes-validate is not installed (pip install kubernetes-validate; or set \
             KNID_KUBERNETES_VALIDATE)",
        );
        return None;
    };
    let python = python_of(&validator);
    let out = run(Command::new(&python[0]).args(&python[1..]).args([
        "-c",
        "import json, sys, yaml\njson.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)",
        &repo(DAEMONSET).display().to_string(),
    ]));
    assert!(out.status.success(), "load {DAEMONSET}: {}", text(&out));
    let docs: Vec<Value> = serde_json::from_slice(&out.stdout).expect("YAML as JSON");
    Some(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn document<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{DAEMONSET}: no {kind} {name}"))
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{DAEMONSET}: {what} is not a string: {v}"))
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The host path behind the container's mount at `mount_path`, with the mount.
fn host_mount<'a>(pod: &'a Value, container: &'a Value, mount_path: &str) -> (&'a str, &'a Value) {
    let mount = list(&container["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"] == mount_path)
        .unwrap_or_else(|| {
            panic!(
                "{DAEMONSET}: {} mounts nothing at {mount_path}",
                container["name"]
            )
        });
    let volume = list(&pod["volumes"])
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap_or_else(|| panic!("{DAEMONSET}: no volume {}", mount["name"]));
    let what = format!("the hostPath mounted at {mount_path}");
    (str_of(&volume["hostPath"]["path"], &what), mount)
}

/// A quantity in bytes (`32Mi`, `1Gi`, plain bytes).
fn bytes(quantity: &str) -> u64 {
    let (number, unit) = quantity.split_at(
        quantity
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(quantity.len()),
    );
    let n: u64 = number
        .parse()
        .unwrap_or_else(|_| panic!("quantity {quantity}"));
    n * match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => panic!("quantity {quantity}: unit {unit}"),
    }
}

/// The schema of every object, strict (no unknown field anywhere), for the oldest and newest
/// Kubernetes in KUBERNETES_VERSIONS.
#[test]
fn daemonset_passes_the_kubernetes_schema_in_strict_mode() {
    let Some(validator) = kubernetes_validate() else {
        testkit::skip_unless_ci(
            "kubernetes-validate is not installed (pip install kubernetes-validate; or set \
             KNID_KUBERNETES_VALIDATE)",
        );
        return;
    };
    let version = run(Command::new(&validator).arg("--version"));
    eprintln!("kubernetes-validate {}", text(&version).trim());
    let mut cmd = Command::new(&validator);
    cmd.args(["--strict", "--quiet"]);
    for v in KUBERNETES_VERSIONS {
        cmd.args(["--kubernetes-version", v]);
    }
    let out = run(cmd.arg(repo(DAEMONSET)));
    let report = text(&out);
    assert!(
        out.status.success() && report.trim().is_empty(),
        "{DAEMONSET} fails the schema:\n{report}"
    );
}

/// The DaemonSet with its commented-out knid-grpc sidecar turned on (the lines between its BEGIN
/// and END markers uncommented), checked as strictly as the DaemonSet itself.
#[test]
fn daemonset_with_the_knid_grpc_sidecar_on_passes_the_kubernetes_schema() {
    let Some(validator) = kubernetes_validate() else {
        testkit::skip_unless_ci(
            "kubernetes-validate is not installed (pip install kubernetes-validate; or set \
             KNID_KUBERNETES_VALIDATE)",
        );
        return;
    };
    let mut inside = false;
    let mut uncommented = 0;
    let lines: Vec<String> = read(DAEMONSET)
        .lines()
        .map(|line| {
            let marker = line.trim_start();
            if marker == "# BEGIN knid-grpc sidecar" || marker == "# END knid-grpc sidecar" {
                inside = marker.starts_with("# BEGIN");
                return line.to_owned();
            }
            if !inside {
                return line.to_owned();
            }
            uncommented += 1;
            let indent = line.len() - marker.len();
            let body = marker.strip_prefix("# ").unwrap_or_else(|| {
                panic!("{DAEMONSET}: sidecar line not commented with \"# \": {line}")
            });
            format!("{}{body}", &line[..indent])
        })
        .collect();
    assert!(uncommented > 10, "{DAEMONSET}: no knid-grpc sidecar block");
    let enabled = lines.join("\n");
    assert!(enabled.contains("- name: knid-grpc"), "{enabled}");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("knid-daemonset-grpc.yaml");
    fs::write(&path, enabled).expect("write the DaemonSet with the sidecar on");
    let mut cmd = Command::new(&validator);
    cmd.args(["--strict", "--quiet"]);
    for v in KUBERNETES_VERSIONS {
        cmd.args(["--kubernetes-version", v]);
    }
    let out = run(cmd.arg(&path));
    let report = text(&out);
    assert!(
        out.status.success() && report.trim().is_empty(),
        "{DAEMONSET} with the knid-grpc sidecar on fails the schema:\n{report}"
    );
}

/// The rules the schema cannot see: what the pod shares with the host, where the config is
/// mounted and whether knid accepts it, and that every directory knid's config names is the
/// host's own directory at the same path.
#[test]
fn daemonset_runs_knid_on_the_hosts_network_directories_and_config() {
    let Some(docs) = manifest_documents() else {
        return;
    };
    let daemonset = document(&docs, "DaemonSet", "knid");
    let pod = &daemonset["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true, "knid works on the host's netns");
    assert_ne!(pod["hostPID"], true, "knid addresses no host process");
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert!(
        list(&pod["tolerations"])
            .iter()
            .any(|t| t["operator"] == "Exists"
                && t.get("key").is_none()
                && t.get("effect").is_none()),
        "knid must tolerate every taint"
    );
    let strategy = &daemonset["spec"]["updateStrategy"];
    assert_eq!(strategy["type"], "RollingUpdate");
    assert_eq!(strategy["rollingUpdate"]["maxUnavailable"], 1);
    let knid = list(&pod["containers"])
        .iter()
        .find(|c| c["name"] == "knid")
        .expect("container knid");
    let image = str_of(&knid["image"], "image");
    assert!(
        image.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))),
        "{image}: the tag must be knid's version"
    );

    // knid itself accepts the args (clap refuses an unknown flag or value; --print-default-config
    // then exits at once).
    let args: Vec<&str> = list(&knid["args"])
        .iter()
        .map(|a| str_of(a, "arg"))
        .collect();
    let parsed = run(Command::new(env!("CARGO_BIN_EXE_knid"))
        .args(&args)
        .arg("--print-default-config"));
    assert!(
        parsed.status.success(),
        "knid refuses the DaemonSet's args {args:?}: {}",
        text(&parsed)
    );

    // The config: --config names a key of the ConfigMap mounted there, and knid accepts it.
    let config_arg = list(&knid["args"])
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix("--config="))
        .expect("--config=FILE in the args");
    let config_path = Path::new(config_arg);
    let mount_dir = config_path
        .parent()
        .expect("config dir")
        .to_str()
        .expect("utf-8");
    let mount = list(&knid["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"] == mount_dir)
        .unwrap_or_else(|| panic!("nothing mounted at {mount_dir}"));
    let volume = list(&pod["volumes"])
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the config volume");
    let configmap_name = str_of(&volume["configMap"]["name"], "configMap name");
    let configmap = document(&docs, "ConfigMap", configmap_name);
    let key = config_path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    let toml = str_of(&configmap["data"][key], "the config");
    let config = Config::from_toml(toml).unwrap_or_else(|e| panic!("knid refuses {key}: {e}"));

    // Every directory knid shares with the host is the host's, at the same path.
    let socket_dir = config.socket.parent().expect("socket dir");
    for (what, dir) in [
        ("socket", socket_dir),
        ("state_dir", &config.state_dir),
        ("netns_dir", &config.netns_dir),
        ("dan_dir", &config.dan_dir),
    ] {
        let dir = dir.to_str().expect("utf-8");
        let (host, _) = host_mount(pod, knid, dir);
        assert_eq!(host, dir, "{what} {dir} must be the host's {dir}");
    }
    // The netns knid creates must reach the host; Kubernetes allows that only when privileged.
    let (_, netns_mount) = host_mount(pod, knid, config.netns_dir.to_str().expect("utf-8"));
    assert_eq!(netns_mount["mountPropagation"], "Bidirectional");
    assert_eq!(
        knid["securityContext"]["privileged"], true,
        "Bidirectional propagation is refused for an unprivileged container"
    );
    // Without hostPID, /proc/<pid> names knid's own PID namespace.
    assert!(
        !config.netns_prefixes.iter().any(|p| p.starts_with("/proc")),
        "netns_prefixes must not accept /proc paths without hostPID"
    );
    assert_eq!(config.dan_dir, Path::new(DEFAULT_DAN_DIR));
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("grace period");
    let cni_timeout = config.cni_timeout().expect("cni_timeout").as_secs();
    assert!(
        grace > cni_timeout,
        "grace {grace}s must outlast cni_timeout {cni_timeout}s"
    );

    // The probes run the image's knictl against knid's socket (knictl's default).
    assert_eq!(
        config.socket,
        Path::new(DEFAULT_SOCKET),
        "the probes use knictl's default socket"
    );
    let knictl = format!("{}/knictl", image_bin_dir());
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        let command: Vec<&str> = list(&knid[probe]["exec"]["command"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            command.first(),
            Some(&knictl.as_str()),
            "{probe}: {command:?}"
        );
        assert_eq!(command.last(), Some(&"status"), "{probe}: {command:?}");
    }
    let requests = bytes(str_of(
        &knid["resources"]["requests"]["memory"],
        "memory request",
    ));
    let limit = bytes(str_of(
        &knid["resources"]["limits"]["memory"],
        "memory limit",
    ));
    assert!(
        requests >= 24 << 20,
        "knid takes up to 24 MiB with 5,000 sandboxes"
    );
    assert!(limit > requests, "the limit leaves room for CNI plugins");
}

/// Cluster mode in the DaemonSet: the service account may only read Nodes and patch them and
/// their status (what knid publishes on its own Node), and list and watch what NetworkPolicy
/// needs (networkpolicies, namespaces, pods; never write them), the pod gets its
/// token and its node's name, and the configuration takes the pod CIDR from the Node object
/// (no subnet written in the ConfigMap) and is accepted by knid with that name.
#[test]
fn daemonset_runs_cluster_mode_with_a_service_account_that_may_only_read_and_patch_nodes_and_read_policy(
) {
    let Some(docs) = manifest_documents() else {
        return;
    };
    let account = document(&docs, "ServiceAccount", "knid");
    assert_eq!(account["metadata"]["namespace"], "kube-system");
    let role = document(&docs, "ClusterRole", "knid");
    let rules = list(&role["rules"]);
    assert_eq!(rules.len(), 4, "four rules: {rules:?}");
    let strings = |v: &Value| -> Vec<String> {
        list(v)
            .iter()
            .map(|s| str_of(s, "rule entry").to_owned())
            .collect()
    };
    assert_eq!(strings(&rules[0]["apiGroups"]), [""]);
    assert_eq!(strings(&rules[0]["resources"]), ["nodes"]);
    let mut verbs = strings(&rules[0]["verbs"]);
    verbs.sort();
    assert_eq!(
        verbs,
        ["get", "list", "patch", "watch"],
        "read, and patch: no create, update or delete"
    );
    assert_eq!(strings(&rules[1]["apiGroups"]), [""]);
    assert_eq!(strings(&rules[1]["resources"]), ["nodes/status"]);
    assert_eq!(strings(&rules[1]["verbs"]), ["patch"]);
    assert_eq!(strings(&rules[2]["apiGroups"]), ["networking.k8s.io"]);
    assert_eq!(strings(&rules[2]["resources"]), ["networkpolicies"]);
    assert_eq!(strings(&rules[2]["verbs"]), ["list", "watch"]);
    assert_eq!(strings(&rules[3]["apiGroups"]), [""]);
    assert_eq!(strings(&rules[3]["resources"]), ["namespaces", "pods"]);
    assert_eq!(
        strings(&rules[3]["verbs"]),
        ["list", "watch"],
        "policy only reads"
    );
    let binding = document(&docs, "ClusterRoleBinding", "knid");
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["name"], "knid");
    let subjects = list(&binding["subjects"]);
    assert!(
        subjects.iter().any(|s| s["kind"] == "ServiceAccount"
            && s["name"] == "knid"
            && s["namespace"] == "kube-system"),
        "{subjects:?}"
    );

    let daemonset = document(&docs, "DaemonSet", "knid");
    let pod = &daemonset["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "knid");
    assert_ne!(
        pod["automountServiceAccountToken"], false,
        "cluster mode reads the mounted token"
    );
    let knid = list(&pod["containers"])
        .iter()
        .find(|c| c["name"] == "knid")
        .expect("container knid");
    let node_name = list(&knid["env"])
        .iter()
        .find(|e| e["name"] == "NODE_NAME")
        .expect("NODE_NAME in the env");
    assert_eq!(
        node_name["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName",
        "NODE_NAME comes from the downward API"
    );

    let toml = str_of(
        &document(&docs, "ConfigMap", "knid-config")["data"]["knid.toml"],
        "the config",
    );
    let config = Config::from_toml(toml).unwrap_or_else(|e| panic!("knid refuses it: {e}"));
    let cluster = config
        .cluster
        .parse(|key| (key == "NODE_NAME").then(|| "worker-1".to_owned()))
        .expect("cluster settings")
        .expect("cluster mode on");
    assert_eq!(cluster.node_name, "worker-1");
    assert_eq!(
        cluster.credentials,
        knid_core::config::Credentials::InCluster(knid_core::config::SERVICE_ACCOUNT_DIR.into()),
        "the token and CA where Kubernetes mounts them"
    );
    let networks = config.networks().expect("networks");
    let pods = networks
        .iter()
        .find(|n| n.pod_cidr_from_node)
        .expect("a network takes the node's pod CIDR");
    assert!(
        pods.subnets.is_empty(),
        "no subnet is written in the ConfigMap"
    );
    assert!(
        !toml.contains("subnets"),
        "one ConfigMap serves every node: no hard-coded subnet"
    );
}

/// The init container installs the shim under the name the conflist's `type` gives, into the
/// host directories containerd reads, and the conflist it installs is deploy/containerd's, which
/// knid-cni accepts.
#[test]
fn daemonset_installs_the_shim_and_conflist_where_containerd_looks() {
    let Some(docs) = manifest_documents() else {
        return;
    };
    let pod = &document(&docs, "DaemonSet", "knid")["spec"]["template"]["spec"];
    let config = Config::from_toml(str_of(
        &document(&docs, "ConfigMap", "knid-config")["data"]["knid.toml"],
        "knid.toml",
    ))
    .expect("knid.toml");
    let shipped = str_of(
        &document(&docs, "ConfigMap", "knid-config")["data"]["10-knid.conflist"],
        "10-knid.conflist",
    );
    let ours: Value = serde_json::from_str(&read(CONFLIST)).expect("conflist JSON");
    let theirs: Value = serde_json::from_str(shipped).expect("ConfigMap conflist JSON");
    assert_eq!(theirs, ours, "the ConfigMap's conflist must be {CONFLIST}");
    check_conflist(&read(CONFLIST), &config);

    let containerd = toml_tables(&read(CONTAINERD));
    let cni = containerd
        .get(CONTAINERD_CNI)
        .unwrap_or_else(|| panic!("{CONTAINERD}: no [{CONTAINERD_CNI}]"));
    let init = list(&pod["initContainers"])
        .iter()
        .find(|c| c["name"] == "install-cni")
        .expect("init container install-cni");
    let knid = list(&pod["containers"])
        .iter()
        .find(|c| c["name"] == "knid")
        .expect("container knid");
    assert_eq!(
        init["image"], knid["image"],
        "the shim installed must come with the knid it talks to"
    );
    let script = list(&init["command"])
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n");
    let commands: Vec<Vec<&str>> = script
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    // What the script puts in place: the last word of each `mv`.
    let installed: Vec<&str> = commands
        .iter()
        .filter(|words| words.first() == Some(&"mv"))
        .filter_map(|words| words.last().copied())
        .collect();
    let target_in = |containerd_key: &str| -> String {
        let host_dir = &cni[containerd_key];
        let mount = list(&init["volumeMounts"])
            .iter()
            .find(|m| {
                list(&pod["volumes"])
                    .iter()
                    .any(|v| v["name"] == m["name"] && v["hostPath"]["path"] == host_dir.as_str())
            })
            .unwrap_or_else(|| panic!("install-cni does not mount the host's {host_dir}"));
        str_of(&mount["mountPath"], "mountPath").to_owned()
    };
    // The runtime execs the plugin named by its `type`.
    let shim = format!("{}/{PLUGIN_TYPE}", target_in("bin_dir"));
    let conflist = format!("{}/10-knid.conflist", target_in("conf_dir"));
    let knid_cni = format!("{}/knid-cni", image_bin_dir());
    for path in [&shim, &conflist] {
        assert!(
            installed.contains(&path.as_str()),
            "install-cni does not install {path}:\n{script}"
        );
    }
    assert!(
        commands.iter().flatten().any(|w| *w == knid_cni),
        "install-cni does not copy the image's {knid_cni}:\n{script}"
    );
}

// ---------------------------------------------------------------- containerd, Kata

/// Parses `text` as the runtime (libcni) does, hands each knid plugin the configuration libcni
/// would, and checks knid-cni accepts it and that it names `config`'s socket and a network.
fn check_conflist(text: &str, config: &Config) {
    let list = ConfList::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{CONFLIST}: {e}"));
    let knid: Vec<usize> = (0..list.plugins.len())
        .filter(|&i| list.plugin_type(i) == PLUGIN_TYPE)
        .collect();
    assert_eq!(
        knid.len(),
        1,
        "{CONFLIST}: one plugin of type {PLUGIN_TYPE}"
    );
    let conf = list.plugin_config(knid[0], &Map::new(), None);
    let plugin = PluginConf::parse(&conf, false)
        .unwrap_or_else(|e| panic!("knid-cni refuses {CONFLIST}: {e}"));
    assert_eq!(plugin.socket, config.socket, "{CONFLIST}: knid's socket");
    assert!(
        config.networks.contains_key(&plugin.network),
        "{CONFLIST}: network {} is not in knid's config",
        plugin.network
    );
}

/// The `key = value` lines of a TOML file by table, strings unquoted: enough for the flat
/// snippets of other programs' configurations (containerd's, Kata's). Any other line fails.
fn toml_tables(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut tables: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut table = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = name.trim().to_owned();
            tables.entry(table.clone()).or_default();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a TOML key = value line: {line}"));
        let value = value.trim();
        let unquoted = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .or_else(|| value.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
            .unwrap_or(value);
        tables
            .entry(table.clone())
            .or_default()
            .insert(key.trim().to_owned(), unquoted.to_owned());
    }
    tables
}

/// The containerd snippet points at the standard CNI directories with knid-cni's conflist
/// among them, and knid-cni accepts that conflist against knid's default configuration.
#[test]
fn containerd_snippet_and_conflist_are_accepted_by_knid_cni() {
    let tables = toml_tables(&read(CONTAINERD));
    assert_eq!(
        tables[""]["version"], "3",
        "{CONTAINERD}: containerd 2.x config"
    );
    let cni = &tables[CONTAINERD_CNI];
    assert_eq!(
        cni["bin_dir"], "/opt/cni/bin",
        "where the README installs knid-cni"
    );
    assert_eq!(
        cni["conf_dir"], "/etc/cni/net.d",
        "where the README puts the conflist"
    );
    let config = Config::embedded_default().expect("embedded default");
    check_conflist(&read(CONFLIST), &config);
}

/// Kata's dan_conf is the directory knid writes DAN files to by default.
#[test]
fn kata_snippet_reads_dan_files_from_knids_dan_dir() {
    let tables = toml_tables(&read(KATA));
    let runtime = tables
        .get("runtime")
        .unwrap_or_else(|| panic!("{KATA}: no [runtime] table"));
    assert_eq!(runtime["dan_conf"], DEFAULT_DAN_DIR);
    let config = Config::embedded_default().expect("embedded default");
    assert_eq!(config.dan_dir, Path::new(DEFAULT_DAN_DIR));
}

// ---------------------------------------------------------------- image

/// One stage of the Containerfile.
#[derive(Debug, Default)]
struct Stage {
    name: String,
    workdir: String,
    runs: Vec<String>,
    /// (`--from` stage, sources, destination)
    copies: Vec<(Option<String>, Vec<String>, String)>,
    entrypoint: String,
}

fn containerfile_stages() -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    let text = read(CONTAINERFILE).replace("\\\n", " ");
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (instr, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        if instr == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => (*name).to_owned(),
                _ => String::new(),
            };
            stages.push(Stage {
                name,
                workdir: "/".into(),
                ..Stage::default()
            });
            continue;
        }
        let stage = stages
            .last_mut()
            .unwrap_or_else(|| panic!("{CONTAINERFILE}: {instr} before FROM"));
        match instr {
            "WORKDIR" => stage.workdir = rest.to_owned(),
            "RUN" => stage.runs.push(rest.to_owned()),
            "ENTRYPOINT" => stage.entrypoint = rest.to_owned(),
            "COPY" => {
                let mut from = None;
                let mut words: Vec<String> = Vec::new();
                for w in rest.split_whitespace() {
                    match w.strip_prefix("--from=") {
                        Some(f) => from = Some(f.to_owned()),
                        None if w.starts_with("--") => panic!("{CONTAINERFILE}: COPY {w}"),
                        None => words.push(w.to_owned()),
                    }
                }
                let dest = words.pop().expect("COPY destination");
                stage.copies.push((from, words, dest));
            }
            _ => {}
        }
    }
    stages
}

/// The build-context ignore patterns (.containerignore, which .dockerignore must equal).
fn ignore_patterns() -> Vec<String> {
    let podman = read(".containerignore");
    assert_eq!(
        podman,
        read(".dockerignore"),
        ".dockerignore must equal .containerignore"
    );
    podman
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            assert!(
                !l.contains(['*', '?', '[', '!']),
                "literal patterns only: {l}"
            );
            l.trim_end_matches('/').to_owned()
        })
        .collect()
}

fn ignored(patterns: &[String], path: &str) -> bool {
    patterns
        .iter()
        .any(|p| path == p || path.starts_with(&format!("{p}/")))
}

/// Where the image puts the binaries: the destination of the COPY of the built knid.
fn image_bin_dir() -> String {
    let stages = containerfile_stages();
    let last = stages.last().expect("a stage");
    last.copies
        .iter()
        .find(|(from, sources, _)| from.is_some() && sources.iter().any(|s| s.ends_with("/knid")))
        .map(|(_, _, dest)| dest.trim_end_matches('/').to_owned())
        .expect("COPY of knid into the image")
}

/// Every COPY takes something that exists: a path of the build context (not ignored), or a
/// release binary that the build stage's `cargo build --release --locked --bins` makes, i.e. a
/// `[[bin]]` of Cargo.toml, or one its `cargo build --release --locked --target <t> --bin <b>`
/// makes; the image gets all of them, knid-cni the one built for musl (`SHIPPED_TARGET`), and
/// its entry point is knid. The context keeps every file the build reads and drops target/ and
/// the fuzz corpora.
#[test]
fn containerfile_copies_only_what_the_repository_and_its_build_provide() {
    let stages = containerfile_stages();
    assert!(
        stages.len() >= 2,
        "{CONTAINERFILE}: a build stage and the image"
    );
    let patterns = ignore_patterns();
    for must in ["target", "fuzz/corpus"] {
        assert!(
            ignored(&patterns, must),
            "the build context must leave out {must}"
        );
    }
    let bins = bin_names();
    let mut copied_bins = Vec::new();
    for (i, stage) in stages.iter().enumerate() {
        for (from, sources, dest) in &stage.copies {
            let Some(from) = from else {
                for source in sources {
                    let rel = source.trim_start_matches("./");
                    assert!(
                        rel == "." || (repo(rel).exists() && !ignored(&patterns, rel)),
                        "COPY {source}: not in the build context"
                    );
                }
                continue;
            };
            let build = stages[..i]
                .iter()
                .find(|s| &s.name == from)
                .unwrap_or_else(|| panic!("COPY --from={from}: no earlier stage {from}"));
            let target = format!("{}/target/", build.workdir.trim_end_matches('/'));
            for source in sources {
                let built = source
                    .strip_prefix(&target)
                    .unwrap_or_else(|| panic!("COPY --from={from} {source}: not in {target}"));
                let (dir, bin) = built.rsplit_once('/').expect("target/<dir>/<bin>");
                assert!(
                    bins.iter().any(|b| b == bin),
                    "{source}: {bin} is no [[bin]]"
                );
                // The cargo build of the stage that makes it.
                let flags: Vec<String> = match dir.strip_suffix("/release") {
                    None if dir == "release" => vec!["--bins".into()],
                    Some(triple) => {
                        vec!["--target".into(), triple.into(), "--bin".into(), bin.into()]
                    }
                    None => panic!("COPY --from={from} {source}: not a release build"),
                };
                assert!(
                    build.runs.iter().any(|r| {
                        let words: Vec<&str> = r.split_whitespace().collect();
                        words.starts_with(&["cargo", "build"])
                            && ["--release", "--locked"].iter().all(|f| words.contains(f))
                            && words.windows(flags.len()).any(|w| w == flags.as_slice())
                    }),
                    "stage {from} must run cargo build --release --locked {}, which makes {source}",
                    flags.join(" ")
                );
                if bin == "knid-cni" {
                    assert_eq!(
                        dir,
                        format!("{}/release", testkit::bins::SHIPPED_TARGET),
                        "the image's knid-cni is the musl build, cheaper to exec than glibc's"
                    );
                }
                copied_bins.push(bin.to_owned());
            }
            assert!(
                dest.ends_with('/'),
                "COPY of several binaries into a directory: {dest}"
            );
        }
    }
    copied_bins.sort();
    let mut all = bins.clone();
    all.sort();
    assert_eq!(copied_bins, all, "the image holds every binary");
    let last = stages.last().expect("image stage");
    assert_eq!(
        last.entrypoint,
        format!("[\"{}/knid\"]", image_bin_dir()),
        "the image runs knid"
    );

    // What the build reads: the manifests, build.rs and its inputs, every target's file.
    let manifest = read("Cargo.toml");
    let mut needed = vec![
        "Cargo.toml".to_owned(),
        "Cargo.lock".to_owned(),
        "build.rs".to_owned(),
    ];
    for line in read("build.rs").lines() {
        if let Some((_, input)) = line.split_once("rerun-if-changed=") {
            needed.push(input.trim_end_matches(['"', ')', ';']).to_owned());
        }
    }
    let mut section = "";
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if let Some(v) = line.strip_prefix("members = ") {
            needed.extend(
                v.trim_matches(['[', ']'])
                    .split(',')
                    .map(|m| m.trim().trim_matches('"').to_owned()),
            );
        } else if let Some(v) = line.strip_prefix("path = ") {
            needed.push(v.trim_matches('"').to_owned());
        } else if let (true, Some(v)) = (section == "[[bench]]", line.strip_prefix("name = ")) {
            needed.push(format!("benches/{}.rs", v.trim_matches('"')));
        }
    }
    for path in needed.iter().filter(|p| !p.is_empty()) {
        assert!(
            repo(path).exists(),
            "the build needs {path}, which does not exist"
        );
        assert!(
            !ignored(&patterns, path),
            "the build needs {path}, which the context leaves out"
        );
    }
}
