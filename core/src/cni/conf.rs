//! CNI network configuration lists (the CNI spec's "Network configuration lists"): parsing and validation, and the per-plugin
//! configuration libcni derives for each call: `name` and `cniVersion` injected, `runtimeConfig`
//! from the plugin's `capabilities` and the runtime's capability args, `prevResult` chained,
//! `capabilities` removed; for GC, the valid attachments under both of their key names. Keys
//! knid does not know are passed through untouched.

use serde_json::{json, Map, Value};

use crate::cni::error::{CniError, DECODE, INVALID_CONFIG};
use crate::cni::version::Version;

/// A parsed network configuration list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfList {
    /// Selected version: `cniVersion`, or the newest supported entry of `cniVersions`.
    pub version: Version,
    /// Network name.
    pub name: String,
    /// CHECK is never run.
    pub disable_check: bool,
    /// GC (synthesised DELs and the GC verb) is never run.
    pub disable_gc: bool,
    /// Plugin configurations, in ADD order; each has a `type`.
    pub plugins: Vec<Map<String, Value>>,
}

fn invalid(field: &str, rule: impl std::fmt::Display) -> CniError {
    CniError::new(INVALID_CONFIG, format!("invalid {field}: {rule}"))
}

/// Checks a CNI name: starts alphanumeric, then alphanumerics and `_ . -` (the network name and
/// container id rule).
pub fn check_name(field: &str, name: &str) -> Result<(), CniError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
        return Err(invalid(
            field,
            format!("{name:?} must start with a letter or digit, then letters, digits, _ . -"),
        ));
    }
    Ok(())
}

/// Checks a plugin `type`: a binary name, no path.
fn check_type(field: &str, value: Option<&Value>) -> Result<(), CniError> {
    match value.and_then(Value::as_str) {
        Some(t) if !t.is_empty() && !t.contains(['/', '\\']) && t != "." && t != ".." => Ok(()),
        Some(t) => Err(invalid(
            field,
            format!("{t:?} must be a plugin binary name, no path"),
        )),
        None => Err(invalid(field, "must be a non-empty string")),
    }
}

fn flag(obj: &Map<String, Value>, key: &str) -> Result<bool, CniError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(invalid(key, format!("{other} is not a boolean"))),
    }
}

fn select_version(obj: &Map<String, Value>) -> Result<Version, CniError> {
    if let Some(list) = obj.get("cniVersions") {
        let list = list
            .as_array()
            .ok_or_else(|| invalid("cniVersions", "must be a list of versions"))?;
        let best = list
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|v| Version::parse(v).ok())
            .max();
        if let Some(best) = best {
            return Ok(best);
        }
        if obj.get("cniVersion").is_none() {
            return Err(
                Version::parse(list.first().and_then(Value::as_str).unwrap_or_default())
                    .err()
                    .unwrap_or_else(|| invalid("cniVersions", "no supported version")),
            );
        }
    }
    match obj.get("cniVersion").and_then(Value::as_str) {
        Some(v) => Version::parse(v),
        None => Err(invalid("cniVersion", "missing")),
    }
}

impl ConfList {
    /// Parses a `.conflist`, or a single-plugin `.conf` (converted to a list of one, as libcni
    /// does). Decode errors are code 6, rule violations code 7, an unsupported version code 1;
    /// each message names the key.
    pub fn parse(text: &[u8]) -> Result<Self, CniError> {
        let value: Value = serde_json::from_slice(text).map_err(|e| {
            CniError::new(DECODE, format!("network configuration is not JSON: {e}"))
        })?;
        let Value::Object(obj) = value else {
            return Err(invalid("network configuration", "must be a JSON object"));
        };
        let name = obj
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("name", "missing"))?
            .to_owned();
        check_name("name", &name)?;
        let version = select_version(&obj)?;
        let plugins = match obj.get("plugins") {
            Some(Value::Array(list)) => {
                let mut plugins = Vec::with_capacity(list.len());
                for (i, p) in list.iter().enumerate() {
                    let Value::Object(p) = p else {
                        return Err(invalid(&format!("plugins[{i}]"), "must be an object"));
                    };
                    check_type(&format!("plugins[{i}].type"), p.get("type"))?;
                    plugins.push(p.clone());
                }
                plugins
            }
            Some(_) => return Err(invalid("plugins", "must be a list")),
            // A single plugin's .conf.
            None if obj.contains_key("type") => {
                check_type("type", obj.get("type"))?;
                vec![obj.clone()]
            }
            None => return Err(invalid("plugins", "missing")),
        };
        if plugins.is_empty() {
            return Err(invalid("plugins", "must name at least one plugin"));
        }
        Ok(Self {
            version,
            name,
            disable_check: flag(&obj, "disableCheck")?,
            disable_gc: flag(&obj, "disableGC")?,
            plugins,
        })
    }

    /// The `type` (binary name) of plugin `i`.
    pub fn plugin_type(&self, i: usize) -> &str {
        self.plugins
            .get(i)
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The configuration plugin `i` gets on stdin for ADD, DEL, CHECK and STATUS: the plugin's
    /// own keys, `name` and `cniVersion` of the list, `runtimeConfig` holding the capability args
    /// the plugin declared in `capabilities` (which is removed), and `prevResult` when given.
    pub fn plugin_config(
        &self,
        i: usize,
        capability_args: &Map<String, Value>,
        prev_result: Option<&Value>,
    ) -> Value {
        let mut conf = self.base(i);
        let caps = conf.remove("capabilities");
        let mut runtime = Map::new();
        if let Some(Value::Object(caps)) = caps {
            for (cap, enabled) in caps {
                if enabled == Value::Bool(true) {
                    if let Some(arg) = capability_args.get(&cap) {
                        runtime.insert(cap, arg.clone());
                    }
                }
            }
        }
        if !runtime.is_empty() {
            conf.insert("runtimeConfig".into(), Value::Object(runtime));
        }
        if let Some(prev) = prev_result {
            conf.insert("prevResult".into(), prev.clone());
        }
        Value::Object(conf)
    }

    /// The configuration plugin `i` gets for GC: the still-valid attachments (container id,
    /// ifname) under `cni.dev/valid-attachments` and the older `cni.dev/attachments`.
    pub fn gc_config(&self, i: usize, valid: &[(String, String)]) -> Value {
        let mut conf = self.base(i);
        conf.remove("capabilities");
        let list: Vec<Value> = valid
            .iter()
            .map(|(id, ifname)| json!({ "containerID": id, "ifname": ifname }))
            .collect();
        conf.insert(
            "cni.dev/valid-attachments".into(),
            Value::Array(list.clone()),
        );
        conf.insert("cni.dev/attachments".into(), Value::Array(list));
        Value::Object(conf)
    }

    fn base(&self, i: usize) -> Map<String, Value> {
        let mut conf = self.plugins.get(i).cloned().unwrap_or_default();
        conf.insert("name".into(), json!(self.name));
        conf.insert("cniVersion".into(), json!(self.version.as_str()));
        conf
    }
}

#[cfg(test)]
mod tests;
