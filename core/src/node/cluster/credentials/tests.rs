use std::path::Path;

use base64::Engine as _;

use super::*;

/// A throwaway self-signed test CA (and its key, standing in for a client key).
const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBhDCCASugAwIBAgIURoBq90mN9+pyMuwswzAprFpjpTUwCgYIKoZIzj0EAwIw
FzEVMBMGA1UEAwwMa25pZC10ZXN0LWNhMCAXDTI2MTEyNjA0MDUzMFoYDzIxMjYx
MTAyMDQwNTMwWjAXMRUwEwYDVQQDDAxrbmlkLXRlc3QtY2EwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAARdjjOBWeR6G6LPOaRkOUzTMIrLJzocMyV1JYswgy8aLO+z
e/KHZLKwgeDJ2URqWzthbqqIXf9MH2JoDyw1u+j2o1MwUTAdBgNVHQ4EFgQURCXV
RLs+dk0mywlNrJ6r5i08k4YwHwYDVR0jBBgwFoAURCXVRLs+dk0mywlNrJ6r5i08
k4YwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNHADBEAiAxMipklKS2tP1j
TbJiBjlqvEPc0UeMZUFHY53tHIRLEwIgGtHYHSPgNi0H2UHI+modfquv8LQ2Z33I
wdkdxcSKp4g=
-----END CERTIFICATE-----
";
const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgpa3YPt3pdtNkMjEK
OFY7BEeziDzGesl/CaHpA6TF8CuhRANCAARdjjOBWeR6G6LPOaRkOUzTMIrLJzoc
MyV1JYswgy8aLO+ze/KHZLKwgeDJ2URqWzthbqqIXf9MH2JoDyw1u+j2
-----END PRIVATE KEY-----
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

#[test]
fn in_cluster_reads_the_service_account_and_the_service_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "ca.crt", CERT);
    write(dir.path(), "token", "abc.def\n");
    let env = |key: &str| match key {
        "KUBERNETES_SERVICE_HOST" => Some("fd00::1".to_owned()),
        "KUBERNETES_SERVICE_PORT" => Some("443".to_owned()),
        _ => None,
    };
    let ep = endpoint(&Credentials::InCluster(dir.path().into()), env).expect("endpoint");
    assert_eq!(ep.server, "https://[fd00::1]:443");
    assert_eq!(ep.ca.len(), 1);
    let token = ep.token.expect("token").value().expect("read");
    assert_eq!(token, "abc.def");
    // A rotated token is read at the next request.
    write(dir.path(), "token", "rotated");
    let ep = endpoint(&Credentials::InCluster(dir.path().into()), env).expect("endpoint");
    assert_eq!(ep.token.expect("token").value().expect("read"), "rotated");
}

#[test]
fn in_cluster_outside_a_pod_says_what_to_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = endpoint(&Credentials::InCluster(dir.path().into()), |_| None)
        .expect_err("no env")
        .to_string();
    assert!(
        err.contains("KUBERNETES_SERVICE_HOST") && err.contains("cluster.kubeconfig"),
        "{err}"
    );
}

#[test]
fn a_kubeconfig_gives_the_current_context_with_relative_paths_and_inline_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "ca.pem", CERT);
    let data = base64::engine::general_purpose::STANDARD;
    let config = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: b\nclusters:\n\
         - name: one\n  cluster:\n    server: https://10.0.0.1:6443/\n    certificate-authority: ca.pem\n\
         - name: two\n  cluster:\n    server: https://api.example:6443\n    certificate-authority-data: {}\n\
         users:\n- name: u\n  user:\n    tokenFile: tok\n\
         - name: v\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n\
         contexts:\n- name: a\n  context:\n    cluster: one\n    user: u\n\
         - name: b\n  context:\n    cluster: two\n    user: v\n",
        data.encode(CERT),
        data.encode(CERT),
        data.encode(KEY),
    );
    let path = write(dir.path(), "kubeconfig", &config);
    let ep = endpoint(&Credentials::Kubeconfig(path.clone()), |_| None).expect("b");
    assert_eq!(ep.server, "https://api.example:6443");
    assert!(ep.client_cert.is_some() && ep.token.is_none());
    let path = write(
        dir.path(),
        "kubeconfig",
        &config.replace("current-context: b", "current-context: a"),
    );
    let ep = endpoint(&Credentials::Kubeconfig(path), |_| None).expect("a");
    assert_eq!(ep.server, "https://10.0.0.1:6443");
    match ep.token {
        Some(Token::File(file)) => assert_eq!(file, dir.path().join("tok")),
        other => panic!("token {other:?}"),
    }
}

#[test]
fn unusable_kubeconfigs_say_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "ca.pem", CERT);
    for (body, wanted) in [
        ("clusters: [", "kubeconfig"),
        ("current-context: x\ncontexts: []\n", "no context \"x\""),
        (
            "clusters:\n- name: c\n  cluster:\n    server: http://10.0.0.1\n    certificate-authority: ca.pem\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n",
            "must be https://",
        ),
        (
            "clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n",
            "no certificate-authority",
        ),
        (
            "clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1\n    certificate-authority: ca.pem\n\
             users:\n- name: u\n  user:\n    exec:\n      command: aws\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n",
            "exec and auth-provider",
        ),
    ] {
        let path = write(dir.path(), "kubeconfig", body);
        let err = endpoint(&Credentials::Kubeconfig(path), |_| None)
            .expect_err(body)
            .to_string();
        assert!(err.contains(wanted), "{body}: {err}");
    }
}
