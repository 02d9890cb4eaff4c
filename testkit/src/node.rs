//! A real `knid` in a private network namespace: [`TestNode`] owns a tempdir holding its "host"
//! netns file, its sandbox netns files, its config, socket, state dir and the daemon's log.
//! Dropping it kills only the knid it started (by pid), unmounts every netns file it created and
//! removes the tempdir, panic or not; on a panic it prints the daemon's log first, and the
//! backtraces of a knid that crashed ([`crate::core_dump`]). Nothing ever touches the machine's
//! own interfaces.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use knid_netops::{Link, NetnsHandle, Rtnl};
use knid_store::{Store, StoreConfig};
use knid_transport::{pb, RuntimeClient};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::mount::{umount2, MntFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::core_dump;
use crate::kernel::{links_in, rtnl_in};
use crate::requests::{attach_req, inspect_req};
use crate::wait::{wait_for, SETTLE};

/// Timeout given to every RPC: generous, so a slow machine never fails a test, yet bounded.
pub const RPC: Duration = Duration::from_secs(60);
/// How long knid may take to answer `Status` after it was spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the guard waits after SIGTERM before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long `stop()` waits for a graceful exit before calling it a failure.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Bridge of the standard test network.
pub const BRIDGE: &str = "knid0";
/// The standard test network, used when a test's config names none.
pub const DEFAULT_NETWORK: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/24", "fd00:88::/64"]
mtu = 1500
"#;

/// Two networks, `default` and `extra` (bridge `brx1`): the config a SIGHUP test reloads to, to
/// see a network come (tests/reload.rs, tests/threads.rs).
pub const TWO_NETWORKS: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.99.0.0/24", "fd00:99::/64"]

[networks.extra]
bridge = "brx1"
subnets = ["10.66.0.0/24", "fd00:66::/64"]
"#;

/// Placeholder in a `config_extra` replaced by the node's netns dir (`<tmp>/ns`, the allowed
/// prefix and, unless the config sets `netns_dir` itself, where knid creates namespaces).
pub const NS_DIR: &str = "@NS_DIR@";

/// A running knid in its own private "host" network namespace.
pub struct TestNode {
    dir: Option<TempDir>,
    host_ns: PathBuf,
    socket: PathBuf,
    state_dir: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// Every netns file this node bind-mounted, host included; unmounted on drop.
    mounts: Mutex<Vec<PathBuf>>,
    /// Environment variables given to knid, from the next (re)start on.
    env: Vec<(String, String)>,
    /// Extra command-line arguments given to knid, from the next (re)start on.
    args: Vec<String>,
    /// Another knid binary than this build's, from the next (re)start on.
    bin: Option<PathBuf>,
}

impl TestNode {
    /// Starts knid with a config made of `netns_prefixes` and `netns_dir` (both this node's
    /// `ns/` dir; [`NS_DIR`] in `config_extra` names it) followed by `config_extra` (top-level
    /// keys first, then network tables). When `config_extra` defines
    /// no network, [`DEFAULT_NETWORK`] is appended. Returns once knid answers `Status`.
    pub fn start(config_extra: &str) -> TestNode {
        Self::start_with(config_extra, &[], &[])
    }

    /// [`TestNode::start`] with environment variables (e.g. `KNID_FAILPOINTS`) and extra
    /// command-line arguments for knid; both stay for restarts until changed.
    pub fn start_with(config_extra: &str, env: &[(&str, &str)], args: &[&str]) -> TestNode {
        let mut node = Self::prepare(config_extra, env, args);
        node.spawn();
        node
    }

    /// [`TestNode::start_with`] up to, not including, starting knid: its tempdir, host netns and
    /// config exist, so a test can set up the state dir (e.g. mount a filesystem on
    /// [`TestNode::state_dir`]) before [`TestNode::restart`] starts knid.
    pub fn prepare(config_extra: &str, env: &[(&str, &str)], args: &[&str]) -> TestNode {
        Self::prepare_in(None, config_extra, env, args)
    }

    /// A second knid in `first`'s host netns, with its own tempdir, config, socket, state dir
    /// (so its own store) and log: two knids on one node. It never unmounts `first`'s netns;
    /// declare it after `first`, so it is dropped (and stopped) first.
    pub fn start_beside(first: &TestNode, config_extra: &str) -> TestNode {
        let mut node = Self::prepare_in(Some(first.host_ns.clone()), config_extra, &[], &[]);
        node.spawn();
        node
    }

    fn prepare_in(
        shared_host: Option<PathBuf>,
        config_extra: &str,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> TestNode {
        let dir = tempfile::Builder::new()
            .prefix("knid-e2e-")
            .tempdir()
            .expect("create tempdir");
        let root = dir.path().to_owned();
        std::fs::create_dir(root.join("ns")).expect("create ns dir");
        let node = TestNode {
            host_ns: shared_host.clone().unwrap_or_else(|| root.join("host")),
            socket: root.join("knid.sock"),
            state_dir: root.join("state"),
            config: root.join("knid.toml"),
            log: root.join("knid.log"),
            dir: Some(dir),
            child: None,
            mounts: Mutex::new(Vec::new()),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            bin: None,
        };
        if shared_host.is_some() {
            node.write_config(config_extra);
            return node;
        }
        let host_ns = node.host_ns.clone();
        node.create_netns(&host_ns);
        // Loopback up, as on a real node: knid's metrics listener binds 127.0.0.1.
        let mut rtnl = rtnl_in(&host_ns);
        let lo = rtnl
            .link_by_name("lo")
            .expect("look up lo")
            .expect("a netns has lo");
        rtnl.set_up(lo.index).expect("set lo up");
        node.write_config(config_extra);
        node
    }

    /// Writes knid's configuration file as [`TestNode::start`] describes; SIGHUP then reloads it.
    pub fn write_config(&self, config_extra: &str) {
        let ns_dir = self.dir().join("ns");
        let config_extra = config_extra.replace(NS_DIR, &ns_dir.display().to_string());
        let mut config = format!("netns_prefixes = [\"{}/\"]\n", ns_dir.display());
        if !config_extra.contains("netns_dir") {
            config.push_str(&format!("netns_dir = \"{}\"\n", ns_dir.display()));
        }
        config.push_str(&config_extra);
        config.push('\n');
        if !config_extra.contains("[networks.") {
            config.push_str(DEFAULT_NETWORK);
        }
        std::fs::write(&self.config, config).expect("write config");
    }

    /// The configuration file knid was started with.
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// The tempdir every file of this node lives in.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("tempdir present").path()
    }

    /// knid's state dir (`--state-dir`); its store is `store/` inside.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// knid's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The path of the private host netns.
    pub fn host_path(&self) -> &Path {
        &self.host_ns
    }

    /// The private host netns knid runs in.
    pub fn host(&self) -> NetnsHandle {
        NetnsHandle::open(&self.host_ns).expect("open host netns")
    }

    /// A new connection to knid.
    pub fn client(&self) -> RuntimeClient {
        RuntimeClient::connect(&self.socket).expect("connect to knid")
    }

    /// Creates a sandbox netns `<tmp>/ns/<name>` (under the allowed prefix) and returns its path.
    pub fn netns(&self, name: &str) -> PathBuf {
        let path = self.dir().join("ns").join(name);
        self.create_netns(&path);
        path
    }

    /// Deletes a sandbox netns behind knid's back, as `ip netns delete` does: unmount (lazily)
    /// and remove the file. The namespace dies once nothing holds it.
    pub fn remove_netns(&self, path: &Path) {
        umount2(path, MntFlags::MNT_DETACH)
            .unwrap_or_else(|e| panic!("umount {}: {e}", path.display()));
        std::fs::remove_file(path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
        self.mounts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|m| m != path);
    }

    /// A path under the allowed prefix where nothing exists.
    pub fn missing_netns_path(&self, name: &str) -> PathBuf {
        self.dir().join("ns").join(name)
    }

    /// `touch path && unshare --net=path true`: a new netns bind-mounted on `path`.
    fn create_netns(&self, path: &Path) {
        File::create(path).expect("create netns file");
        // Recorded before mounting, so a half-done creation is still unmounted on drop.
        self.mounts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path.to_owned());
        let status = Command::new("unshare")
            .arg(format!("--net={}", path.display()))
            .arg("true")
            .status()
            .expect("run unshare (util-linux)");
        assert!(
            status.success(),
            "unshare --net={} failed: {status}",
            path.display()
        );
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "knid is already running");
        self.wait_store_unlocked();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open knid.log");
        // Debug logs unless the test's own arguments set a level.
        let level: &[&str] = if self.args.iter().any(|a| a == "--log-level") {
            &[]
        } else {
            &["--log-level", "debug"]
        };
        // A knid that crashes leaves a core in the tempdir, unless its faults are injected.
        let allow_core: &[&str] = if self.env.iter().any(|(k, _)| k == knid_core::failpoint::VAR) {
            &[]
        } else {
            &core_dump::ALLOW_CORE
        };
        // nsenter and prlimit exec knid, so the child's pid is knid's pid.
        let child = Command::new("nsenter")
            .arg(format!("--net={}", self.host_ns.display()))
            .arg("--")
            .args(allow_core)
            .arg(self.knid_bin())
            .arg("--config")
            .arg(&self.config)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(level)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .current_dir(self.dir())
            .spawn()
            .expect("spawn nsenter knid");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Waits until nothing holds knid's store lock (sled's `flock` on `store/db`), at most
    /// [`SETTLE`]: a store a test opened ([`TestNode::open_store`]) and dropped keeps the lock a
    /// moment longer while a log write finishes on sled's thread pool, and knid would refuse to
    /// start as a second instance.
    fn wait_store_unlocked(&self) {
        let db = self.state_dir.join("store").join("db");
        if !db.exists() {
            return;
        }
        // Only a busy lock is waited for: a store a test made unreadable is knid's to report.
        wait_for(
            "knid's store lock to be free",
            SETTLE,
            || match File::open(&db) {
                Ok(f) => !matches!(
                    Flock::lock(f, FlockArg::LockExclusiveNonblock),
                    Err((_, Errno::EWOULDBLOCK))
                ),
                Err(_) => true,
            },
        );
    }

    /// Polls until a fresh connection answers `Status`; panics (with the log) if knid exits or
    /// stays silent for [`READY_TIMEOUT`].
    fn wait_ready(&mut self) {
        let started = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .expect("knid spawned")
                .try_wait()
                .expect("poll knid")
            {
                self.child = None;
                panic!("knid exited during start-up: {status}");
            }
            if let Ok(client) = RuntimeClient::connect(&self.socket) {
                if client.status(Duration::from_secs(2)).is_ok() {
                    return;
                }
            }
            assert!(
                started.elapsed() < READY_TIMEOUT,
                "knid did not answer Status within {READY_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The knid binary this node runs: this build's, or the one a test chose.
    fn knid_bin(&self) -> PathBuf {
        self.bin.clone().unwrap_or_else(crate::bins::knid)
    }

    /// knid's pid, while it runs.
    pub fn pid(&self) -> Pid {
        let child = self.child.as_ref().expect("knid is running");
        Pid::from_raw(i32::try_from(child.id()).expect("pid fits i32"))
    }

    /// SIGTERM, then waits for knid to exit and returns its exit status.
    pub fn stop(&mut self) -> ExitStatus {
        let pid = self.pid();
        let mut child = self.child.take().expect("knid is running");
        kill(pid, Signal::SIGTERM).expect("SIGTERM knid");
        match wait_child(&mut child, STOP_TIMEOUT) {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("knid did not exit within {STOP_TIMEOUT:?} of SIGTERM");
            }
        }
    }

    /// Starts knid (again) on the same host netns, config, socket and state dir.
    pub fn restart(&mut self) {
        self.spawn();
    }

    /// Sets (or with `None` removes) an environment variable of knid, from the next restart on.
    pub fn set_env(&mut self, key: &str, value: Option<&str>) {
        self.env.retain(|(k, _)| k != key);
        if let Some(v) = value {
            self.env.push((key.to_owned(), v.to_owned()));
        }
    }

    /// The environment variables knid gets from this node (see [`TestNode::set_env`]).
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Runs `bin` instead of this build's knid (`None`: this build's again), from the next
    /// restart on: two builds compared against the same node.
    pub fn set_bin(&mut self, bin: Option<&Path>) {
        self.bin = bin.map(Path::to_path_buf);
    }

    /// Replaces knid's extra command-line arguments, from the next restart on.
    pub fn set_args(&mut self, args: &[&str]) {
        self.args = args.iter().map(|a| (*a).to_owned()).collect();
    }

    /// Whether knid is running (it may have died on its own, e.g. at an aborting failpoint).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            None => false,
            Some(child) => child.try_wait().expect("poll knid").is_none(),
        }
    }

    /// Waits for knid to exit on its own (an aborting failpoint) and returns its exit status;
    /// panics if it is still running after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("knid was started");
        match wait_child(&mut child, timeout) {
            Some(status) => status,
            None => {
                self.child = Some(child);
                panic!("knid still running {timeout:?} after it should have died");
            }
        }
    }

    /// Runs `bin` (this build's knid when `None`) once on this node's host netns, config and
    /// socket and environment, with `state_dir` (this node's when `None`), beside or instead of this node's
    /// own knid, for a start that must fail: returns its exit status and log, or panics if it
    /// is still running after 20 s.
    pub fn run_to_exit(
        &self,
        bin: Option<&Path>,
        state_dir: Option<&Path>,
    ) -> (ExitStatus, String) {
        self.run_to_exit_on(bin, state_dir, &self.socket)
    }

    /// [`TestNode::run_to_exit`] on `socket`: a second knid in this node's host netns, on a
    /// socket and state dir of its own.
    pub fn run_to_exit_on(
        &self,
        bin: Option<&Path>,
        state_dir: Option<&Path>,
        socket: &Path,
    ) -> (ExitStatus, String) {
        let log = self.dir().join("run-to-exit.log");
        let mut child = Command::new("nsenter")
            .arg(format!("--net={}", self.host_ns.display()))
            .arg("--")
            .arg(bin.map_or_else(crate::bins::knid, Path::to_path_buf))
            .arg("--config")
            .arg(&self.config)
            .arg("--socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(state_dir.unwrap_or(&self.state_dir))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("create the log"))
            .spawn()
            .expect("spawn knid");
        match wait_child(&mut child, Duration::from_secs(20)) {
            Some(status) => (status, std::fs::read_to_string(&log).expect("read the log")),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("knid kept running where it had to refuse to start");
            }
        }
    }

    /// Opens knid's store. Only while knid is stopped: sled locks the database.
    pub fn open_store(&self) -> Store {
        assert!(self.child.is_none(), "stop knid before opening its store");
        Store::open(&StoreConfig::new(self.state_dir.join("store"))).expect("open knid's store")
    }

    /// Stops knid (asserting a clean exit) and returns its store, asserted empty: no sandbox,
    /// attachment or reservation of `network` left.
    pub fn stop_with_empty_store(&mut self, network: &str) -> Store {
        let status = self.stop();
        assert_eq!(status.code(), Some(0), "knid exit status {status}");
        let store = self.open_store();
        assert!(
            store.sandboxes().expect("sandboxes").is_empty(),
            "sandbox records left"
        );
        assert!(
            store.all_attachments().expect("attachments").is_empty(),
            "attachment records left"
        );
        assert!(
            store
                .reservations(network)
                .expect("reservations")
                .is_empty(),
            "reservations left"
        );
        store
    }

    /// Attaches `id` (`eth0`) in a new netns of its own, the request first changed by `edit`
    /// (its network, port mappings, ...); the netns and the pod's IPv4 and IPv6 addresses.
    pub fn attach_pod(
        &self,
        id: &str,
        edit: impl FnOnce(&mut pb::AttachRequest),
    ) -> (PathBuf, std::net::IpAddr, std::net::IpAddr) {
        let netns = self.netns(id);
        let mut req = self.attach_req(id, &netns, "eth0");
        edit(&mut req);
        let sandbox = self
            .client()
            .attach(&req, RPC)
            .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
        let addr = |v6: bool| {
            sandbox.interfaces[0]
                .ips
                .iter()
                .map(|c| c.address.parse::<ipnet::IpNet>().expect("CIDR").addr())
                .find(|a| a.is_ipv6() == v6)
                .expect("an address of each family")
        };
        (netns, addr(false), addr(true))
    }

    /// A request attaching one interface `ifname` of sandbox `id` in `netns` to the default
    /// network, everything else left to knid.
    pub fn attach_req(&self, id: &str, netns: &Path, ifname: &str) -> pb::AttachRequest {
        attach_req(id, netns, ifname)
    }

    /// A netlink socket in the host netns.
    pub fn host_rtnl(&self) -> Rtnl {
        rtnl_in(&self.host_ns)
    }

    /// Names of qdisc kinds on link `name` of the host netns.
    pub fn host_qdiscs(&self, name: &str) -> Vec<String> {
        let mut rtnl = self.host_rtnl();
        let Some(link) = rtnl.link_by_name(name).expect("look up") else {
            return Vec::new();
        };
        rtnl.qdiscs(link.index)
            .expect("dump qdiscs")
            .into_iter()
            .map(|q| q.kind)
            .collect()
    }

    /// Links of the host netns whose name starts with `prefix`.
    pub fn host_links_with_prefix(&self, prefix: &str) -> Vec<Link> {
        links_in(&self.host_ns)
            .into_iter()
            .filter(|l| l.name.starts_with(prefix))
            .collect()
    }

    /// `kn*` links of the host netns (knid's host-side prefix), the network bridge `knid0`
    /// excepted: after a detach or a failed attach there must be none.
    pub fn host_kn_links(&self) -> Vec<Link> {
        self.host_links_with_prefix("kn")
            .into_iter()
            .filter(|l| l.name != BRIDGE)
            .collect()
    }

    /// The bridge `name` in the host netns.
    pub fn bridge(&self, name: &str) -> Link {
        let link = self
            .host_rtnl()
            .link_by_name(name)
            .expect("look up bridge")
            .unwrap_or_else(|| panic!("bridge {name} missing in the host netns"));
        assert_eq!(
            link.kind.as_deref(),
            Some("bridge"),
            "{name} is not a bridge"
        );
        link
    }

    /// Ports of bridge `name` in the host netns.
    pub fn bridge_ports(&self, name: &str) -> Vec<Link> {
        let index = self.bridge(name).index;
        self.host_rtnl()
            .bridge_ports(index)
            .expect("dump bridge ports")
    }

    /// Addresses reserved in `network`, summed over both families, as `Networks` reports them.
    pub fn capacity_used(&self, network: &str) -> u64 {
        let networks = self.client().networks(RPC).expect("Networks");
        let net = networks
            .networks
            .iter()
            .find(|n| n.name == network)
            .unwrap_or_else(|| panic!("network {network} not in Networks"));
        net.capacity.iter().map(|c| c.used).sum()
    }

    /// The condition `kind` (e.g. `PodInterfacesReady`) of Status.
    pub fn condition(&self, kind: &str) -> pb::Condition {
        self.client()
            .status(RPC)
            .expect("Status")
            .conditions
            .into_iter()
            .find(|c| c.type_ == kind)
            .unwrap_or_else(|| panic!("Status has no condition {kind}"))
    }

    /// The network `name` as `Networks` reports it.
    pub fn network(&self, name: &str) -> pb::Network {
        let list = self.client().networks(RPC).expect("Networks").networks;
        list.into_iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("network {name} not in Networks"))
    }

    /// Waits until `capacity_used(network)` is `want` (address release may lag the reply when
    /// link deletion is batched).
    pub fn wait_capacity_used(&self, network: &str, want: u64) {
        wait_for(
            &format!("capacity used of {network} to become {want}"),
            SETTLE,
            || self.capacity_used(network) == want,
        );
    }

    /// Ids `List` returns.
    pub fn list_ids(&self) -> Vec<String> {
        self.client()
            .list(&pb::ListRequest::default(), RPC)
            .expect("List")
            .sandboxes
            .into_iter()
            .map(|s| s.id)
            .collect()
    }

    /// `Inspect(id)`'s answer; panics on an error.
    pub fn inspect(&self, id: &str) -> pb::Sandbox {
        self.client()
            .inspect(&inspect_req(id), RPC)
            .unwrap_or_else(|e| panic!("Inspect {id}: {e}"))
    }

    /// Asserts `Inspect(id)` answers NotFound.
    pub fn assert_not_found(&self, id: &str) {
        let err = self
            .client()
            .inspect(&inspect_req(id), RPC)
            .expect_err("Inspect");
        assert_eq!(err.code(), Some(ttrpc::Code::NOT_FOUND), "{err}");
    }

    /// Waits until the host netns has no `kn*` link and the bridge has no port.
    pub fn assert_host_clean(&self) {
        wait_for("no kn* link in the host netns", SETTLE, || {
            self.host_kn_links().is_empty()
        });
        wait_for("no port on the bridge", SETTLE, || {
            self.bridge_ports(BRIDGE).is_empty()
        });
    }

    /// Checks, with netlink in the host netns, that the host end of `iface` is an up veth port
    /// of the bridge.
    pub fn assert_host_side(&self, iface: &pb::InterfaceResult) {
        let bridge = self.bridge(BRIDGE);
        let host = self
            .host_rtnl()
            .link_by_name(&iface.host_ifname)
            .expect("look up host end")
            .unwrap_or_else(|| panic!("host end {} missing", iface.host_ifname));
        assert_eq!(host.kind.as_deref(), Some("veth"), "kind of {}", host.name);
        assert_eq!(
            host.controller,
            Some(bridge.index),
            "{} is not a port of {BRIDGE}",
            host.name
        );
        assert!(host.up, "{} is down", host.name);
        let ports: Vec<String> = self
            .bridge_ports(BRIDGE)
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert!(
            ports.contains(&iface.host_ifname),
            "bridge ports {ports:?} lack {}",
            iface.host_ifname
        );
    }

    /// The source guards in the host netns (the chains of knid's `netdev knid-NN` tables): each
    /// chain's name and the device its hook names; empty when there is no such table.
    pub fn guards(&self) -> Vec<(String, String)> {
        self.guard_chains("knid")
            .into_iter()
            .map(|c| (c.name, c.device))
            .collect()
    }

    /// The chains of the guard tables of prefix `table` (family `netdev`) in the host netns, as
    /// `knid_netops` reads them; empty when there is no such table.
    pub fn guard_chains(&self, table: &str) -> Vec<knid_netops::nft::GuardChain> {
        knid_netops::nft::Nft::open_in(&self.host())
            .expect("nf_tables socket in the host netns")
            .guard_chains(table)
            .unwrap_or_else(|e| panic!("list the chains of netdev {table}: {e}"))
            .unwrap_or_default()
    }

    /// The alias this knid marks its host links with (`Status.link_mark`).
    pub fn link_mark(&self) -> String {
        let mark = self.client().status(RPC).expect("Status").link_mark;
        assert!(mark.starts_with("knid:"), "link mark {mark:?}");
        mark
    }

    /// The alias of host link `name`, or `None` when it has none; panics if there is no such
    /// link.
    pub fn host_link_alias(&self, name: &str) -> Option<String> {
        self.host_rtnl()
            .link_by_name(name)
            .expect("look up host link")
            .unwrap_or_else(|| panic!("host link {name} missing"))
            .alias
    }

    /// Sets the alias of host link `name` (e.g. a knid's mark on a link planted by hand).
    pub fn set_host_link_alias(&self, name: &str, alias: &str) {
        let found = self
            .host_rtnl()
            .set_alias_by_name(name, alias)
            .unwrap_or_else(|e| panic!("set the alias of {name}: {e}"));
        assert!(found, "host link {name} missing");
    }

    /// Knid's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Creates a veth pair `name`/`peer` in knid's host netns, behind knid's back (e.g. an
    /// orphan named like knid's host ends, as a crash between creation and record leaves).
    pub fn host_veth(&self, name: &str, peer: &str) {
        let end = |name: &str| knid_netops::VethEnd {
            name: name.to_owned(),
            mtu: None,
            mac: None,
        };
        self.host_rtnl()
            .create_veth(&knid_netops::VethSpec {
                host: end(name),
                peer: end(peer),
                peer_netns: None,
                host_controller: None,
            })
            .unwrap_or_else(|e| panic!("create veth {name} in the host netns: {e}"));
    }

    /// Creates a standalone Ethernet-like test device `name` in the host netns (a macvlan
    /// parent, a stand-in host NIC, a holder of test addresses), with `mtu` when given, up when
    /// `up`; returns it as the kernel reports it. A dummy, or an ifb on kernels built without
    /// the dummy driver (CONFIG_DUMMY): both have a random MAC, take any MTU and, being virtual,
    /// die with their netns.
    pub fn host_test_device(&self, name: &str, mtu: Option<u32>, up: bool) -> Link {
        let mut rtnl = self.host_rtnl();
        match rtnl.create_dummy(name, mtu) {
            Ok(()) => {}
            // "Unknown device type": no dummy driver in this kernel.
            Err(e) if e.errno() == Some(libc::EOPNOTSUPP) => {
                let status = Command::new("nsenter")
                    .arg(format!("--net={}", self.host_ns.display()))
                    .args(["--", "ip", "link", "add", name, "type", "ifb"])
                    .status()
                    .expect("run nsenter ip (iproute2)");
                assert!(status.success(), "ip link add {name} type ifb: {status}");
            }
            Err(e) => panic!("create dummy {name}: {e}"),
        }
        let link = rtnl
            .link_by_name(name)
            .expect("look up test device")
            .unwrap_or_else(|| panic!("test device {name} missing after creation"));
        if let Some(mtu) = mtu.filter(|m| *m != link.mtu) {
            rtnl.set_mtu(link.index, mtu)
                .unwrap_or_else(|e| panic!("set {name} mtu: {e}"));
        }
        if up {
            rtnl.set_up(link.index)
                .unwrap_or_else(|e| panic!("set {name} up: {e}"));
        }
        rtnl.link_by_name(name)
            .expect("look up test device")
            .unwrap_or_else(|| panic!("test device {name} vanished"))
    }

    /// Waits until the host netns has no `kn*` link (the bridge excepted): for networks without
    /// a bridge, where [`TestNode::assert_host_clean`] does not apply.
    pub fn wait_no_kn_links(&self) {
        wait_for("no kn* link in the host netns", SETTLE, || {
            self.host_kn_links().is_empty()
        });
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
            if wait_child(&mut child, KILL_GRACE).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "---- knid log ({}) ----\n{}---- end of knid log ----",
                self.log.display(),
                self.log_text()
            );
            if let Some(dir) = &self.dir {
                core_dump::print_backtraces(dir.path(), &self.knid_bin());
            }
        }
        let mut mounts =
            std::mem::take(&mut *self.mounts.lock().unwrap_or_else(|p| p.into_inner()));
        // What knid created in the ns dir and a failed test left behind.
        if let Some(dir) = &self.dir {
            if let Ok(entries) = std::fs::read_dir(dir.path().join("ns")) {
                mounts.extend(entries.flatten().map(|e| e.path()));
            }
        }
        for path in mounts.iter().rev() {
            if let Err(e) = umount2(path, MntFlags::MNT_DETACH) {
                // EINVAL: not a mount point (creation failed before mounting, or not a netns).
                if e != nix::errno::Errno::EINVAL {
                    eprintln!("warning: umount {}: {e}", path.display());
                }
            }
        }
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_owned();
            if let Err(e) = dir.close() {
                eprintln!("warning: remove {}: {e}", path.display());
            }
        }
    }
}

/// Waits up to `timeout` for `child` to exit.
fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if started.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) | Err(_) => return None,
        }
    }
}
