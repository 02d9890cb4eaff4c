//! A stand-in Kubernetes API server for knid's cluster-mode tests: HTTPS with a CA made at run
//! time, bearer-token auth, and the objects a cluster-mode knid reads — core/v1 Nodes,
//! Namespaces and Pods, networking.k8s.io/v1 NetworkPolicies — (get, paged list, watch with
//! bookmarks and 410 Expired), in kube-apiserver's exact wire format. Synchronous: an accept
//! thread and one thread per connection.
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
//! - `GET` of an object (`/api/v1/nodes/{name}`, `/api/v1/namespaces/{name}`,
//!   `/api/v1/namespaces/{ns}/pods/{name}`,
//!   `/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}`), of a collection,
//!   cluster-wide (`/api/v1/nodes`, `/api/v1/namespaces`, `/api/v1/pods`,
//!   `/apis/networking.k8s.io/v1/networkpolicies`) or one namespace's, as a list (`limit`,
//!   `continue`, `resourceVersion`, `fieldSelector=metadata.name=..`) or a watch (`watch=1`,
//!   `resourceVersion`, `allowWatchBookmarks`, `timeoutSeconds`); other paths 404, other
//!   methods 405; a `labelSelector` or another field selector is refused with 400 rather than
//!   ignored;
//! - objects as the real server stores them: a Namespace's `kubernetes.io/metadata.name`
//!   label, a NetworkPolicy defaulted and validated as kube-apiserver does
//!   ([`KubeApi::put_network_policy`] returns its refusal);
//! - `PATCH /api/v1/nodes/{name}` and `PATCH /api/v1/nodes/{name}/status` with a strategic merge
//!   patch or a JSON patch of `status.conditions`, `spec.taints` and `metadata.annotations`, with
//!   kube-apiserver's answers: 409 Conflict for a stale `metadata.resourceVersion`, 422 for a
//!   failed JSON patch `test` (see the `patch` module); [`KubeApi::conflict_next_patches`]
//!   forces a 409;
//! - resourceVersions start above 1000 and grow by one per change of any kind, as etcd's;
//! - a watch sends a `BOOKMARK` every [`BOOKMARK_INTERVAL`] when asked, and ends cleanly at
//!   `timeoutSeconds` (never, without one).

mod client_files;
mod cluster;
mod field_errors;
mod http;
mod kinds;
mod list;
mod names;
mod namespace;
mod network_policy;
mod node;
mod objects;
mod patch;
mod paths;
mod pod;
mod policy_validation;
mod routes;
mod server;
mod shared;
mod tls;
mod watch;

#[cfg(test)]
mod object_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

use client_files::ClientFiles;
use cluster::{key, Cluster};
use kinds::Resource;
pub use node::NodeSpec;
pub use patch::{JSON_PATCH, STRATEGIC_MERGE};
pub use pod::{ContainerPort, PodSpec};
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
        self.change(|cluster| {
            assert!(
                cluster.object(Resource::Nodes, &node.name).is_none(),
                "kube_api: add_node({:?}): the node exists; use update_node",
                node.name
            );
            cluster.put(Resource::Nodes, &node.name, |meta, _| {
                node::render(&node, meta, None)
            });
        });
    }

    /// Replaces a Node's spec (uid and creation time kept, and what clients patched into its
    /// conditions, taints and annotations): a new resourceVersion and a `MODIFIED` event.
    ///
    /// # Panics
    /// If there is no Node of that name.
    pub fn update_node(&self, node: NodeSpec) {
        self.change(|cluster| {
            assert!(
                cluster.object(Resource::Nodes, &node.name).is_some(),
                "kube_api: update_node({:?}): no such node; use add_node",
                node.name
            );
            cluster.put(Resource::Nodes, &node.name, |meta, previous| {
                node::render(&node, meta, previous)
            });
        });
    }

    /// Deletes a Node: a new resourceVersion and a `DELETED` event carrying the object as last
    /// seen, with that new resourceVersion.
    ///
    /// # Panics
    /// If there is no Node of that name.
    pub fn delete_node(&self, name: &str) {
        self.change(|cluster| {
            assert!(
                cluster.delete(Resource::Nodes, name),
                "kube_api: delete_node({name:?}): no such node"
            );
        });
    }

    /// The Node called `name` as it is stored now (with what patches wrote).
    pub fn node(&self, name: &str) -> Option<Value> {
        self.stored(Resource::Nodes, None, name)
    }

    /// Edits Node `name` as another client would (a new resourceVersion and a `MODIFIED` event
    /// when `edit` changes it): another controller's taint or condition, say.
    ///
    /// # Panics
    /// If there is no Node of that name.
    pub fn edit_node(&self, name: &str, edit: impl FnOnce(&mut Value)) {
        self.change(|cluster| {
            let mut object = cluster
                .object(Resource::Nodes, name)
                .unwrap_or_else(|| panic!("kube_api: edit_node({name:?}): no such node"))
                .clone();
            edit(&mut object);
            if cluster.object(Resource::Nodes, name) != Some(&object) {
                cluster.replace_object(Resource::Nodes, name, object);
            }
        });
    }

    /// Creates or updates Namespace `name` with `labels`, plus the `kubernetes.io/metadata.name`
    /// label the real server keeps on every namespace (overriding one given): an `ADDED`
    /// event, or for an existing namespace a `MODIFIED` one (uid and creation time kept). Its
    /// phase is `Active`.
    ///
    /// # Panics
    /// If the name is not a DNS-1123 label or a label is invalid (with the real server's
    /// message).
    pub fn put_namespace(&self, name: &str, labels: &[(&str, &str)]) {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let problems = namespace::problems(name, &labels);
        assert!(
            problems.is_empty(),
            "kube_api: put_namespace: {}",
            field_errors::invalid_object("Namespace", name, &problems)
        );
        self.change(|cluster| {
            cluster.put(Resource::Namespaces, name, |meta, _| {
                namespace::render(name, &labels, meta)
            });
        });
    }

    /// Deletes Namespace `name` as the real server and its namespace controller do: the
    /// namespace turns `Terminating` (a `MODIFIED` event with a `deletionTimestamp`), its Pods
    /// and NetworkPolicies are deleted (a `DELETED` event each), then the namespace (`DELETED`).
    ///
    /// # Panics
    /// If there is no Namespace of that name.
    pub fn delete_namespace(&self, name: &str) {
        self.change(|cluster| {
            let Some(stored) = cluster.object(Resource::Namespaces, name) else {
                panic!("kube_api: delete_namespace({name:?}): no such namespace");
            };
            let now = cluster::now_rfc3339();
            let terminating = namespace::terminating(stored, &now);
            cluster.replace_object(Resource::Namespaces, name, terminating);
            let prefix = format!("{name}/");
            for resource in [Resource::Pods, Resource::NetworkPolicies] {
                let keys: Vec<String> = cluster
                    .objects_from(resource, &prefix, None)
                    .map(|(rest, _)| format!("{prefix}{rest}"))
                    .collect();
                for key in keys {
                    cluster.delete(resource, &key);
                }
            }
            cluster.delete(Resource::Namespaces, name);
        });
    }

    /// The Namespace called `name` as it is stored now.
    pub fn namespace(&self, name: &str) -> Option<Value> {
        self.stored(Resource::Namespaces, None, name)
    }

    /// Creates or updates a running Pod: an `ADDED` event, or for an existing one a `MODIFIED`
    /// one (uid and creation time kept). Its `status.hostIP`/`hostIPs` are the InternalIPs of
    /// Node `pod.node` as stored now (none without such a Node).
    ///
    /// # Panics
    /// If the spec is invalid (a name, a label, a port, an IP; with the real server's message)
    /// or its namespace does not exist.
    pub fn put_pod(&self, pod: PodSpec) {
        let problems = pod::problems(&pod);
        assert!(
            problems.is_empty(),
            "kube_api: put_pod: {}",
            field_errors::invalid_object("Pod", &pod.name, &problems)
        );
        self.change(|cluster| {
            assert_namespace_exists(cluster, &pod.namespace, "put_pod");
            let host_ips = match cluster.object(Resource::Nodes, &pod.node) {
                Some(node) if !pod.node.is_empty() => node::internal_ips(node),
                _ => Vec::new(),
            };
            let key = key(Some(&pod.namespace), &pod.name);
            cluster.put(Resource::Pods, &key, |meta, _| {
                pod::render(&pod, &host_ips, meta)
            });
        });
    }

    /// Deletes Pod `namespace/name`: a `DELETED` event carrying it as last seen.
    ///
    /// # Panics
    /// If there is no such Pod.
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        self.change(|cluster| {
            assert!(
                cluster.delete(Resource::Pods, &key(Some(namespace), name)),
                "kube_api: delete_pod({namespace:?}, {name:?}): no such pod"
            );
        });
    }

    /// The Pod `namespace/name` as it is stored now.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        self.stored(Resource::Pods, Some(namespace), name)
    }

    /// Creates or updates NetworkPolicy `namespace/name` with `spec` (the object's `spec`, as
    /// JSON) as kube-apiserver would: decoded strictly, defaulted (`policyTypes`, each port's
    /// `protocol`) and validated as `ValidateNetworkPolicy` does. An `ADDED` event, or for an
    /// existing one a `MODIFIED` one (uid and creation time kept; `metadata.generation` grows
    /// when the spec changes).
    ///
    /// # Errors
    /// The message kube-apiserver would refuse the write with, and nothing stored: a decoding
    /// error (`... cannot be handled as a NetworkPolicy: strict decoding error: unknown field
    /// "spec.ingres"`), or the 422's (``NetworkPolicy.networking.k8s.io "deny" is invalid:
    /// spec.ingress[0].ports[0].endPort: Invalid value: 79: must be greater than or equal to
    /// `port` ``), naming each field at fault.
    ///
    /// # Panics
    /// If the spec is valid but its namespace does not exist.
    pub fn put_network_policy(
        &self,
        namespace: &str,
        name: &str,
        spec: Value,
    ) -> Result<(), String> {
        let mut spec = network_policy::decode(&spec)?;
        network_policy::apply_defaults(&mut spec);
        let problems = policy_validation::validate(namespace, name, &spec);
        if !problems.is_empty() {
            let kind = "NetworkPolicy.networking.k8s.io";
            return Err(field_errors::invalid_object(kind, name, &problems));
        }
        self.change(|cluster| {
            assert_namespace_exists(cluster, namespace, "put_network_policy");
            let key = key(Some(namespace), name);
            cluster.put(Resource::NetworkPolicies, &key, |meta, previous| {
                network_policy::render(namespace, name, &spec, meta, previous)
            });
        });
        Ok(())
    }

    /// Deletes NetworkPolicy `namespace/name`: a `DELETED` event carrying it as last seen.
    ///
    /// # Panics
    /// If there is no such NetworkPolicy.
    pub fn delete_network_policy(&self, namespace: &str, name: &str) {
        self.change(|cluster| {
            assert!(
                cluster.delete(Resource::NetworkPolicies, &key(Some(namespace), name)),
                "kube_api: delete_network_policy({namespace:?}, {name:?}): no such policy"
            );
        });
    }

    /// The NetworkPolicy `namespace/name` as it is stored now (defaulted).
    pub fn network_policy(&self, namespace: &str, name: &str) -> Option<Value> {
        self.stored(Resource::NetworkPolicies, Some(namespace), name)
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
    /// token, objects and resourceVersions. The certificate names the first listener's address:
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

    fn stored(&self, resource: Resource, namespace: Option<&str>, name: &str) -> Option<Value> {
        lock(&self.shared.cluster)
            .object(resource, &key(namespace, name))
            .cloned()
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

/// Panics, as the real server refuses the write with 404, unless `namespace` exists.
fn assert_namespace_exists(cluster: &Cluster, namespace: &str, call: &str) {
    assert!(
        cluster.object(Resource::Namespaces, namespace).is_some(),
        "kube_api: {call}: namespaces {namespace:?} not found (put_namespace first)"
    );
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
