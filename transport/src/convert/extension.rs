//! Extension registrations between the protobuf API and the core: RegisterExtension validated
//! field by field (errors name `extension.<field>`), ListExtensions encoded.

use std::path::PathBuf;

use knid_core::extension::{self, ExtensionInfo, ExtensionSpec};
use knid_core::validate;
use knid_core::Error;

use crate::pb;

/// Validates a RegisterExtension request; the error names the first bad field.
pub fn register_extension_request(
    req: &pb::RegisterExtensionRequest,
) -> Result<ExtensionSpec, Error> {
    let ext = req.extension.get_or_default();
    validate::name(&ext.name).map_err(|e| e.at("extension.name"))?;
    validate::socket_path(&ext.socket_path).map_err(|e| e.at("extension.socket_path"))?;
    Ok(ExtensionSpec {
        name: ext.name.clone(),
        socket_path: PathBuf::from(&ext.socket_path),
        phases: extension::phases(&ext.phases).map_err(|e| e.at("extension.phases"))?,
        required: ext.required,
        timeout: extension::timeout(ext.timeout_ms).map_err(|e| e.at("extension.timeout_ms"))?,
        order: ext.order,
    })
}

/// Validates an UnregisterExtension request: the extension's name.
pub fn unregister_extension_request(req: &pb::UnregisterExtensionRequest) -> Result<String, Error> {
    validate::name(&req.name).map_err(|e| e.at("name"))?;
    Ok(req.name.clone())
}

/// Encodes a registration.
pub fn extension_spec(spec: &ExtensionSpec) -> pb::ExtensionSpec {
    let mut out = pb::ExtensionSpec::new();
    out.name = spec.name.clone();
    out.socket_path = spec.socket_path.to_string_lossy().into_owned();
    out.phases = spec.phases.iter().map(|p| p.as_str().to_owned()).collect();
    out.required = spec.required;
    out.timeout_ms = u32::try_from(spec.timeout.as_millis()).unwrap_or(u32::MAX);
    out.order = spec.order;
    out
}

/// Encodes the ListExtensions response.
pub fn list_extensions_response(list: &[ExtensionInfo]) -> pb::ListExtensionsResponse {
    let mut out = pb::ListExtensionsResponse::new();
    out.extensions = list
        .iter()
        .map(|info| {
            let mut ext = pb::ExtensionInfo::new();
            ext.extension = protobuf::MessageField::some(extension_spec(&info.spec));
            ext.last_call_ok = info.last_call_ok;
            ext.last_error = info.last_error.clone().unwrap_or_default();
            ext.last_call_at = info.last_call_at_ms;
            ext.registered_at = info.registered_at_ms;
            ext
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
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
}
