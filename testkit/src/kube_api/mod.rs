//! A stand-in Kubernetes API server for knid's cluster-mode tests: HTTPS with a CA made at run
//! time, bearer-token auth, and the core/v1 Nodes a cluster-mode knid reads (get, paged list,
//! watch with bookmarks and 410 Expired), in kube-apiserver's exact wire format. Synchronous:
//! an accept thread and one thread per connection.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use testkit::kube_api::{KubeApi, NodeSpec};
//! let dir = tempfile::tempdir()?;
//! let api = KubeApi::start(std::net::TcpListener::bind("127.0.0.1:0")?, dir.path())?;
//! api.add_node(NodeSpec {
//!     name: "node-a".into(),
//!     pod_cidrs: vec!["10.244.1.0/24".into()],
//!     internal_ips: vec!["192.0.2.1".into()],
//! });
//! // A client now reads api.kubeconfig_path(), or api.serviceaccount_dir() as in a pod.
//! # Ok(()) }
//! ```
//!
//! What a client meets:
//! - every request needs `Authorization: Bearer <token>` (else 401 `Status`);
//! - `GET /api/v1/nodes/{name}`, `GET /api/v1/nodes` (`limit`, `continue`,
//!   `fieldSelector=metadata.name=..`), and `GET /api/v1/nodes?watch=1` (`resourceVersion`,
//!   `allowWatchBookmarks`, `timeoutSeconds`); other paths 404, other methods 405; a
//!   `labelSelector` or another field selector is refused with 400 rather than ignored;
//! - `PATCH /api/v1/nodes/{name}` and `PATCH /api/v1/nodes/{name}/status` with a strategic merge
//!   patch or a JSON patch of `status.conditions`, `spec.taints` and `metadata.annotations`, with
//!   kube-apiserver's answers: 409 Conflict for a stale `metadata.resourceVersion`, 422 for a
//!   failed JSON patch `test` (see the `patch` module); [`KubeApi::conflict_next_patches`]
//!   forces a 409;
//! - resourceVersions start above 1000 and grow by one per change;
//! - a watch sends a `BOOKMARK` every [`BOOKMARK_INTERVAL`] when asked, and ends cleanly at
//!   `timeoutSeconds` (never, without one).

mod client_files;
mod cluster;
mod http;
mod list;
mod objects;
mod patch;
mod routes;
mod server;
mod shared;
mod tls;
mod watch;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

use client_files::ClientFiles;
use cluster::Cluster;
pub use objects::NodeSpec;
pub use patch::{JSON_PATCH, STRATEGIC_MERGE};
use serde_json::Value;
use server::Acceptor;
pub use server::MAX_CONNECTIONS;
pub use shared::Request;
use shared::{lock, Connections, Shared};
pub use watch::BOOKMARK_INTERVAL;

/// The running stand-in API server; dropping it stops it (threads joined, sockets closed).
pub struct KubeApi {
    shared: Arc<Shared>,
    acceptor: Mutex<Option<Acceptor>>,
    addr: Mutex<SocketAddr>,
    files: ClientFiles,
}

impl KubeApi {
    /// Serves on `listener`, which the caller bound (possibly inside another network namespace:
    /// the server only accepts on it). Makes a CA and a serving certificate for the listener's
    /// address and the `kubernetes.default.svc` names and `localhost`, and a random token, and
    /// writes under `dir`: `serviceaccount/{token,ca.crt,namespace}` and `kubeconfig`.
    ///
    /// A listener on an unspecified address (`0.0.0.0`, `::`) is advertised as loopback.
    pub fn start(listener: TcpListener, dir: &Path) -> io::Result<KubeApi> {
        let addr = listener.local_addr()?;
        let identity = tls::identity(advertised(addr).ip())?;
        let token: String = random::<32>()?.iter().map(|b| format!("{b:02x}")).collect();
        let files = ClientFiles::write(dir, &identity.ca_pem, &token, advertised(addr))?;
        let shared = Arc::new(Shared {
            cluster: Mutex::new(Cluster::new(random()?)),
            changed: Condvar::new(),
            token,
            tls: identity.config,
            connections: Mutex::new(Connections::default()),
            requests: Mutex::new(Vec::new()),
            forced_conflicts: Mutex::new(0),
        });
        let acceptor = Acceptor::spawn(Arc::clone(&shared), listener)?;
        Ok(KubeApi {
            shared,
            acceptor: Mutex::new(Some(acceptor)),
            addr: Mutex::new(addr),
            files,
        })
    }

    /// The address of the listener served (the latest one, after [`restart`](Self::restart)).
    pub fn addr(&self) -> SocketAddr {
        *lock(&self.addr)
    }

    /// The bearer token every request must carry.
    pub fn token(&self) -> String {
        self.shared.token.clone()
    }

    /// The CA certificate (PEM), `dir/serviceaccount/ca.crt`.
    pub fn ca_path(&self) -> PathBuf {
        self.files.ca_path()
    }

    /// `dir/serviceaccount`: `token`, `ca.crt` and `namespace` (`kube-system`), as kubelet
    /// mounts them in a pod.
    pub fn serviceaccount_dir(&self) -> PathBuf {
        self.files.serviceaccount_dir()
    }

    /// `dir/kubeconfig`: one cluster (`server: https://IP:PORT`, `certificate-authority:` the
    /// absolute path of `ca.crt`), one user (`token:`), one context, `current-context`.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.files.kubeconfig_path()
    }

    /// Adds a Node: a new resourceVersion and an `ADDED` event.
    ///
    /// # Panics
    /// If a Node of that name exists.
    pub fn add_node(&self, node: NodeSpec) {
        self.change(|cluster| cluster.add(node));
    }

    /// Replaces a Node's spec (uid and creation time kept): a new resourceVersion and a
    /// `MODIFIED` event.
    ///
    /// # Panics
    /// If there is no Node of that name.
    pub fn update_node(&self, node: NodeSpec) {
        self.change(|cluster| cluster.update(node));
    }

    /// Deletes a Node: a new resourceVersion and a `DELETED` event carrying the object as last
    /// seen, with that new resourceVersion.
    ///
    /// # Panics
    /// If there is no Node of that name.
    pub fn delete_node(&self, name: &str) {
        self.change(|cluster| cluster.delete(name));
    }

    /// The Node called `name` as it is stored now (with what patches wrote).
    pub fn node(&self, name: &str) -> Option<Value> {
        lock(&self.shared.cluster).object(name).cloned()
    }

    /// Edits Node `name` as another client would (a new resourceVersion and a `MODIFIED` event
    /// when `edit` changes it): another controller's taint or condition, say.
    ///
    /// # Panics
    /// If there is no Node of that name.
    pub fn edit_node(&self, name: &str, edit: impl FnOnce(&mut Value)) {
        self.change(|cluster| {
            let mut object = cluster
                .object(name)
                .unwrap_or_else(|| panic!("kube_api: edit_node({name:?}): no such node"))
                .clone();
            edit(&mut object);
            if cluster.object(name) != Some(&object) {
                cluster.replace_object(name, object);
            }
        });
    }

    /// Answers the next `count` PATCH requests with 409 Conflict, as the real server answers a
    /// write that lost a race, without applying them.
    pub fn conflict_next_patches(&self, count: u32) {
        *lock(&self.shared.forced_conflicts) = count;
    }

    /// The PATCH requests answered so far, in order.
    pub fn patches(&self) -> Vec<Request> {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.method == "PATCH")
            .cloned()
            .collect()
    }

    /// Closes every open watch stream abruptly: TCP shutdown mid-stream, no last chunk, no TLS
    /// close_notify. [`open_watches`](Self::open_watches) is 0 when this returns.
    pub fn drop_watches(&self) {
        for conn in lock(&self.shared.connections).open.values() {
            if conn.watching.load(Ordering::SeqCst) {
                conn.close();
            }
        }
        self.shared.wake_watches();
    }

    /// Forgets the event history: a watch from any resourceVersion older than the current one
    /// now gets the 410 Expired ERROR event, and so does a list `continue` token made before.
    /// Open watches go on.
    pub fn expire_history(&self) {
        lock(&self.shared.cluster).expire_history();
    }

    /// Closes the listener and every connection, and joins every thread: connecting is refused
    /// until [`restart`](Self::restart). Idempotent.
    pub fn stop(&self) {
        let acceptor = lock(&self.acceptor).take();
        if let Some(acceptor) = acceptor {
            acceptor.stop(&self.shared);
        }
    }

    /// Serves again on `listener` (stopping first if running), with the same CA, certificate,
    /// token, Nodes and resourceVersions. The certificate names the first listener's address:
    /// re-bind that one. The kubeconfig is rewritten if the address changed.
    ///
    /// # Panics
    /// If the listener cannot be served (no eventfd, no thread).
    pub fn restart(&self, listener: TcpListener) {
        self.stop();
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("kube_api: restart: the listener has no address: {e}"));
        if addr != self.addr() {
            self.files
                .write_kubeconfig(&self.shared.token, advertised(addr))
                .unwrap_or_else(|e| panic!("kube_api: restart: writing the kubeconfig: {e}"));
            *lock(&self.addr) = addr;
        }
        let acceptor = Acceptor::spawn(Arc::clone(&self.shared), listener)
            .unwrap_or_else(|e| panic!("kube_api: restart: serving the listener: {e}"));
        *lock(&self.acceptor) = Some(acceptor);
    }

    /// Every request answered so far, in order (a watch is listed when it starts). A request
    /// too malformed to parse is not listed.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.requests).clone()
    }

    /// The watch streams open now. Once a watch is counted here, every later change reaches it.
    pub fn open_watches(&self) -> usize {
        lock(&self.shared.connections)
            .open
            .values()
            .filter(|conn| conn.watching.load(Ordering::SeqCst) && !conn.is_closed())
            .count()
    }

    fn change(&self, apply: impl FnOnce(&mut Cluster)) {
        let mut cluster = lock(&self.shared.cluster);
        apply(&mut cluster);
        self.shared.changed.notify_all();
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The address clients are told: an unspecified one is reached on loopback.
fn advertised(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, addr.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}

/// `N` random bytes from the kernel.
fn random<const N: usize>() -> io::Result<[u8; N]> {
    let mut bytes = [0; N];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}
