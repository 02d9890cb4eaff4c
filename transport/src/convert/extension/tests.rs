use std::time::Duration;

use knid_core::{ErrorKind, Phase};

use super::*;

fn request(
    name: &str,
    socket: &str,
    phases: &[&str],
    timeout_ms: u32,
) -> pb::RegisterExtensionRequest {
    let mut req = pb::RegisterExtensionRequest::new();
    let ext = req.extension.mut_or_insert_default();
    ext.name = name.into();
    ext.socket_path = socket.into();
    ext.phases = phases.iter().map(|p| (*p).to_owned()).collect();
    ext.required = true;
    ext.timeout_ms = timeout_ms;
    ext.order = -3;
    req
}

#[test]
fn a_valid_registration_converts_with_the_default_timeout() {
    let spec = register_extension_request(&request(
        "mesh",
        "/run/mesh/ext.sock",
        &["post-attach", "pre-detach"],
        0,
    ))
    .expect("valid");
    assert_eq!(
        spec,
        ExtensionSpec {
            name: "mesh".into(),
            socket_path: "/run/mesh/ext.sock".into(),
            phases: vec![Phase::PostAttach, Phase::PreDetach],
            required: true,
            timeout: Duration::from_millis(2000),
            order: -3,
        }
    );
    let back = extension_spec(&spec);
    assert_eq!(back.timeout_ms, 2000);
    assert_eq!(back.phases, ["post-attach", "pre-detach"]);
}

#[test]
fn every_bad_field_is_named() {
    let cases = [
        (
            request("", "/run/e.sock", &["post-attach"], 0),
            "extension.name",
        ),
        (
            request("a/b", "/run/e.sock", &["post-attach"], 0),
            "extension.name",
        ),
        (
            request("e", "run/e.sock", &["post-attach"], 0),
            "extension.socket_path",
        ),
        (
            request("e", "/run/../e.sock", &["post-attach"], 0),
            "extension.socket_path",
        ),
        (request("e", "/run/e.sock", &[], 0), "extension.phases"),
        (
            request("e", "/run/e.sock", &["post-create"], 0),
            "extension.phases",
        ),
        (
            request("e", "/run/e.sock", &["pre-detach", "pre-detach"], 0),
            "extension.phases",
        ),
        (
            request("e", "/run/e.sock", &["pre-detach"], 60_001),
            "extension.timeout_ms",
        ),
        (pb::RegisterExtensionRequest::new(), "extension.name"),
    ];
    for (req, field) in cases {
        let err = register_extension_request(&req).expect_err(field);
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(
            err.to_string().starts_with(&format!("invalid {field}: ")),
            "{err} does not name {field}"
        );
    }
    let mut unregister = pb::UnregisterExtensionRequest::new();
    unregister.name = "x y".into();
    let err = unregister_extension_request(&unregister).expect_err("bad name");
    assert!(err.to_string().starts_with("invalid name: "), "{err}");
}
