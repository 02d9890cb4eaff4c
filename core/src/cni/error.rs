//! CNI error objects (`{cniVersion, code, msg, details}`) and the spec's error codes.

use serde_json::{json, Value};

/// 1: incompatible CNI version.
pub const INCOMPATIBLE_VERSION: u32 = 1;
/// 2: unsupported field in the network configuration.
pub const UNSUPPORTED_FIELD: u32 = 2;
/// 3: container unknown or does not exist.
pub const UNKNOWN_CONTAINER: u32 = 3;
/// 4: invalid necessary environment variables.
pub const INVALID_ENV: u32 = 4;
/// 5: I/O failure.
pub const IO_FAILURE: u32 = 5;
/// 6: failed to decode content.
pub const DECODE: u32 = 6;
/// 7: invalid network config.
pub const INVALID_CONFIG: u32 = 7;
/// 11: try again later.
pub const TRY_AGAIN: u32 = 11;
/// 50: STATUS: the plugin cannot service ADDs.
pub const NOT_AVAILABLE: u32 = 50;
/// 999: internal error (libcni's `ErrInternal`).
pub const INTERNAL: u32 = 999;

/// A CNI error: what a plugin prints on failure, and what knid reports of a failed plugin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CniError {
    /// Spec code (1–99 reserved, 100+ plugin-specific).
    pub code: u32,
    /// Short message.
    pub msg: String,
    /// Longer explanation, may be empty.
    pub details: String,
}

impl CniError {
    /// An error with no details.
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        Self {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    /// Adds details.
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// The error object as a plugin prints it, in `version` (a string so an unsupported
    /// requested version can still be echoed back).
    pub fn to_json(&self, version: &str) -> Value {
        let mut obj = json!({ "cniVersion": version, "code": self.code, "msg": self.msg });
        if !self.details.is_empty() {
            obj["details"] = Value::String(self.details.clone());
        }
        obj
    }

    /// Decodes a plugin's error object; None when `out` is not one.
    pub fn from_json(out: &[u8]) -> Option<Self> {
        let value: Value = serde_json::from_slice(out).ok()?;
        let code = u32::try_from(value.get("code")?.as_u64()?).ok()?;
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Some(Self {
            code,
            msg: text("msg"),
            details: text("details"),
        })
    }
}

impl std::fmt::Display for CniError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.msg, self.code)?;
        if !self.details.is_empty() {
            write!(f, ": {}", self.details)?;
        }
        Ok(())
    }
}

impl std::error::Error for CniError {}

#[cfg(test)]
mod tests;
