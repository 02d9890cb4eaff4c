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
mod tests;
