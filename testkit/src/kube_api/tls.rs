//! The stand-in's TLS identity, made at run time: a cluster CA (as kubeadm's, CN `kubernetes`)
//! and a serving certificate it signs for the names an in-cluster client dials.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

/// The DNS names in the serving certificate besides the listener's address: the in-cluster
/// Service names kube-apiserver's certificate carries, and localhost.
pub(super) const SERVER_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "localhost",
];

/// Why the TLS identity could not be made.
#[derive(Debug, thiserror::Error)]
enum TlsError {
    #[error("generating the {0} key")]
    Key(&'static str, #[source] rcgen::Error),
    #[error("signing the {0} certificate")]
    Certificate(&'static str, #[source] rcgen::Error),
    #[error("configuring the TLS server")]
    Config(#[source] rustls::Error),
}

impl From<TlsError> for io::Error {
    fn from(e: TlsError) -> Self {
        io::Error::other(e)
    }
}

/// The CA clients trust, and the server's configuration.
pub(super) struct Identity {
    /// The CA certificate, PEM (what `ca.crt` holds).
    pub ca_pem: String,
    pub config: Arc<ServerConfig>,
}

/// A new CA, and a serving certificate for `ip` and [`SERVER_NAMES`] signed by it.
pub(super) fn identity(ip: IpAddr) -> io::Result<Identity> {
    let ca_key = KeyPair::generate().map_err(|e| TlsError::Key("CA", e))?;
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kubernetes");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(|e| TlsError::Certificate("CA", e))?;
    let ca = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().map_err(|e| TlsError::Key("server", e))?;
    let mut names = vec![ip.to_string()];
    names.extend(SERVER_NAMES.iter().map(|name| name.to_string()));
    let mut server_params =
        CertificateParams::new(names).map_err(|e| TlsError::Certificate("server", e))?;
    server_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    server_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server_params.use_authority_key_identifier_extension = true;
    let server_cert = server_params
        .signed_by(&server_key, &ca)
        .map_err(|e| TlsError::Certificate("server", e))?;

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(vec![server_cert.der().clone()], key)
            .map_err(TlsError::Config)?;
    // HTTP/1.1 only: a client offering h2 falls back, as it would behind an HTTP/1.1 proxy.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Identity {
        ca_pem: ca_cert.pem(),
        config: Arc::new(config),
    })
}
