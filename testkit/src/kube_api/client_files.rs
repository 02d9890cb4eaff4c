//! What a client of the stand-in reads to reach it: a pod's service-account directory
//! (`token`, `ca.crt`, `namespace`, as kubelet mounts it) and a kubeconfig.

use std::fs;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The namespace written to `serviceaccount/namespace` (knid runs as a kube-system DaemonSet).
pub(super) const NAMESPACE: &str = "kube-system";
/// The cluster, user and context name in the kubeconfig.
const KUBECONFIG_NAME: &str = "knid-testkit";

/// Where the files are, under the directory given to `KubeApi::start` (made absolute).
pub(super) struct ClientFiles {
    pub dir: PathBuf,
}

impl ClientFiles {
    /// The service-account directory.
    pub(super) fn serviceaccount_dir(&self) -> PathBuf {
        self.dir.join("serviceaccount")
    }

    /// The CA certificate (PEM).
    pub(super) fn ca_path(&self) -> PathBuf {
        self.serviceaccount_dir().join("ca.crt")
    }

    /// The kubeconfig.
    pub(super) fn kubeconfig_path(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// Creates `dir` and writes every file.
    pub(super) fn write(
        dir: &Path,
        ca_pem: &str,
        token: &str,
        addr: SocketAddr,
    ) -> io::Result<ClientFiles> {
        fs::create_dir_all(dir)?;
        let files = ClientFiles {
            dir: dir.canonicalize()?,
        };
        let serviceaccount = files.serviceaccount_dir();
        fs::create_dir_all(&serviceaccount)?;
        fs::write(serviceaccount.join("token"), token)?;
        fs::write(files.ca_path(), ca_pem)?;
        fs::write(serviceaccount.join("namespace"), NAMESPACE)?;
        files.write_kubeconfig(token, addr)?;
        Ok(files)
    }

    /// (Re)writes the kubeconfig for a server at `addr`.
    pub(super) fn write_kubeconfig(&self, token: &str, addr: SocketAddr) -> io::Result<()> {
        let ca = yaml_scalar(&self.ca_path().to_string_lossy());
        let name = KUBECONFIG_NAME;
        let kubeconfig = format!(
            "apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: https://{addr}
    certificate-authority: {ca}
users:
- name: {name}
  user:
    token: {token}
contexts:
- name: {name}
  context:
    cluster: {name}
    user: {name}
    namespace: {NAMESPACE}
current-context: {name}
preferences: {{}}
"
        );
        fs::write(self.kubeconfig_path(), kubeconfig)
    }
}

/// `text` as a plain YAML scalar when it is safe as one (as kubectl writes paths), else
/// double-quoted (a JSON string is a valid YAML double-quoted scalar).
fn yaml_scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b));
    if plain {
        text.to_string()
    } else {
        serde_json::Value::from(text).to_string()
    }
}
