//! Where the API server is and how knid proves who it is: the pod's service account (token
//! file, CA, `KUBERNETES_SERVICE_HOST`/`_PORT`), or a kubeconfig for knid outside a pod (its
//! current context: server, CA, and a token, token file or client certificate).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;
use ureq::tls::{Certificate, ClientCert, PemItem};

use super::error::ApiError;
use crate::config::Credentials;

/// The API server and the credentials to reach it with.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `https://host:port`, without a trailing slash.
    pub server: String,
    /// The CAs its certificate must chain to.
    pub ca: Vec<Certificate<'static>>,
    /// The bearer token, if any.
    pub token: Option<Token>,
    /// A client certificate and key, if any.
    pub client_cert: Option<ClientCert>,
}

/// A bearer token.
#[derive(Debug, Clone)]
pub enum Token {
    /// Read from this file at every request: projected service account tokens rotate.
    File(PathBuf),
    /// Written in the kubeconfig.
    Inline(String),
}

impl Token {
    /// The token's current value.
    pub fn value(&self) -> Result<String, ApiError> {
        match self {
            Token::Inline(t) => Ok(t.clone()),
            Token::File(path) => std::fs::read_to_string(path)
                .map(|t| t.trim().to_owned())
                .map_err(|e| ApiError::Setup(format!("read token {}: {e}", path.display()))),
        }
    }
}

/// The endpoint `credentials` name; `env` reads the environment.
pub fn endpoint(
    credentials: &Credentials,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Endpoint, ApiError> {
    match credentials {
        Credentials::InCluster(dir) => in_cluster(dir, env),
        Credentials::Kubeconfig(path) => kubeconfig(path),
    }
}

fn in_cluster(dir: &Path, env: impl Fn(&str) -> Option<String>) -> Result<Endpoint, ApiError> {
    let var = |key: &str| {
        env(key).filter(|v| !v.is_empty()).ok_or_else(|| {
            ApiError::Setup(format!(
                "{key} is not set: outside a pod, set cluster.kubeconfig"
            ))
        })
    };
    let host = var("KUBERNETES_SERVICE_HOST")?;
    let port = var("KUBERNETES_SERVICE_PORT")?;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Ok(Endpoint {
        server: format!("https://{host}:{port}"),
        ca: certificates(&read(&dir.join("ca.crt"))?, "ca.crt")?,
        token: Some(Token::File(dir.join("token"))),
        client_cert: None,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, ApiError> {
    std::fs::read(path).map_err(|e| ApiError::Setup(format!("read {}: {e}", path.display())))
}

/// The certificates of a PEM file; `what` names it in errors.
fn certificates(pem: &[u8], what: &str) -> Result<Vec<Certificate<'static>>, ApiError> {
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(PemItem::Certificate(cert)) => certs.push(cert),
            Ok(_) => {}
            Err(e) => return Err(ApiError::Setup(format!("{what}: {e}"))),
        }
    }
    if certs.is_empty() {
        return Err(ApiError::Setup(format!("{what}: no PEM certificate")));
    }
    Ok(certs)
}

/// A kubeconfig as far as knid reads it.
#[derive(Debug, Deserialize)]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<Named<ClusterEntry>>,
    #[serde(default)]
    users: Vec<Named<UserEntry>>,
    #[serde(default)]
    contexts: Vec<Named<ContextEntry>>,
    #[serde(default, rename = "current-context")]
    current_context: String,
}

#[derive(Debug, Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: T,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ClusterEntry {
    server: String,
    #[serde(default)]
    certificate_authority: Option<PathBuf>,
    #[serde(default)]
    certificate_authority_data: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct UserEntry {
    #[serde(default)]
    token: Option<String>,
    #[serde(default, rename = "tokenFile")]
    token_file: Option<PathBuf>,
    #[serde(default)]
    client_certificate: Option<PathBuf>,
    #[serde(default)]
    client_certificate_data: Option<String>,
    #[serde(default)]
    client_key: Option<PathBuf>,
    #[serde(default)]
    client_key_data: Option<String>,
    /// Exec plugins and auth providers need programs knid does not run.
    #[serde(default)]
    exec: Option<serde_yaml_ng::Value>,
    #[serde(default, rename = "auth-provider")]
    auth_provider: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Deserialize)]
struct ContextEntry {
    cluster: String,
    #[serde(default)]
    user: String,
}

fn kubeconfig(path: &Path) -> Result<Endpoint, ApiError> {
    let what = path.display().to_string();
    let bad = |why: String| ApiError::Setup(format!("kubeconfig {what}: {why}"));
    let text = read(path)?;
    let config: Kubeconfig = serde_yaml_ng::from_slice(&text).map_err(|e| bad(e.to_string()))?;
    let base = path.parent().unwrap_or(Path::new("/"));
    let clusters: BTreeMap<&str, &ClusterEntry> = config
        .clusters
        .iter()
        .map(|c| (c.name.as_str(), &c.value))
        .collect();
    let users: BTreeMap<&str, &UserEntry> = config
        .users
        .iter()
        .map(|u| (u.name.as_str(), &u.value))
        .collect();
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == config.current_context)
        .or_else(|| (config.contexts.len() == 1).then(|| &config.contexts[0]))
        .ok_or_else(|| {
            bad(format!(
                "no context {:?} (current-context)",
                config.current_context
            ))
        })?;
    let cluster = clusters
        .get(context.value.cluster.as_str())
        .ok_or_else(|| {
            bad(format!(
                "context {}: no cluster {:?}",
                context.name, context.value.cluster
            ))
        })?;
    let none = UserEntry::default();
    let user = match context.value.user.as_str() {
        "" => &none,
        name => users
            .get(name)
            .copied()
            .ok_or_else(|| bad(format!("context {}: no user {name:?}", context.name)))?,
    };
    if user.exec.is_some() || user.auth_provider.is_some() {
        return Err(bad(format!(
            "user {:?}: exec and auth-provider credentials are not supported; use a token, \
             tokenFile or client certificate",
            context.value.user
        )));
    }
    let file_or_data = |file: &Option<PathBuf>, data: &Option<String>, key: &str| match (file, data)
    {
        (_, Some(data)) => base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| bad(format!("{key}-data: {e}"))),
        (Some(file), None) => read(&base.join(file)).map(Some),
        (None, None) => Ok(None),
    };
    if !cluster.server.starts_with("https://") {
        return Err(bad(format!("server {:?} must be https://", cluster.server)));
    }
    let ca = match file_or_data(
        &cluster.certificate_authority,
        &cluster.certificate_authority_data,
        "certificate-authority",
    )? {
        Some(pem) => certificates(&pem, "certificate-authority")?,
        None => return Err(bad("the cluster has no certificate-authority".into())),
    };
    let cert = file_or_data(
        &user.client_certificate,
        &user.client_certificate_data,
        "client-certificate",
    )?;
    let key = file_or_data(&user.client_key, &user.client_key_data, "client-key")?;
    let client_cert = match (cert, key) {
        (Some(cert), Some(key)) => {
            let chain = certificates(&cert, "client-certificate")?;
            let key = ureq::tls::PrivateKey::from_pem(&key)
                .map_err(|e| bad(format!("client-key: {e}")))?;
            Some(ClientCert::new_with_certs(&chain, key))
        }
        (None, None) => None,
        _ => {
            return Err(bad(
                "a client certificate needs both certificate and key".into()
            ))
        }
    };
    let token = match (&user.token, &user.token_file) {
        (Some(t), _) => Some(Token::Inline(t.clone())),
        (None, Some(file)) => Some(Token::File(base.join(file))),
        (None, None) => None,
    };
    Ok(Endpoint {
        server: cluster.server.trim_end_matches('/').to_owned(),
        ca,
        token,
        client_cert,
    })
}

#[cfg(test)]
mod tests;
