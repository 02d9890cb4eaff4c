//! `PATCH /api/v1/nodes/{name}` and `PATCH /api/v1/nodes/{name}/status`: a strategic merge
//! patch (`application/strategic-merge-patch+json`, NodeStatus.conditions merged by `type`) or
//! a JSON patch (`application/json-patch+json`, RFC 6902 add/remove/replace/test), applied to
//! the stored Node as kube-apiserver applies them:
//!
//! - a body that does not decode: 400 BadRequest;
//! - a JSON patch operation that does not apply, a failed `test` among them: 422 (kube-apiserver
//!   answers every `Apply` error of a JSON patch with 422, reason Invalid, not 409);
//! - a `metadata.resourceVersion` the patched object carries that is not the stored one (a
//!   merge patch's precondition, or a JSON patch that replaces it): 409 Conflict;
//! - the status subresource keeps the stored `spec`, the main resource the stored `status`;
//! - a patch that changes nothing changes no resourceVersion and sends no event.
//!
//! The stand-in stores only what cluster mode writes: a patch that would change anything but
//! `status.conditions`, `spec.taints` or `metadata.annotations` is refused with 422 rather than
//! half-applied; an unknown field in a condition or taint is refused with 400, as the real server
//! does with `fieldValidation=Strict`.

use serde_json::{Map, Value};

/// The content type of a strategic merge patch.
pub const STRATEGIC_MERGE: &str = "application/strategic-merge-patch+json";
/// The content type of a JSON patch.
pub const JSON_PATCH: &str = "application/json-patch+json";

/// The patches the real server accepts, as its 415 lists them.
const ACCEPTED: &str = "application/json-patch+json, application/merge-patch+json, \
                        application/apply-patch+yaml, application/strategic-merge-patch+json";

/// Why a patch is refused: the HTTP status, the Status reason and message.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    fn bad_request(message: impl Into<String>) -> Refusal {
        Refusal {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Refusal {
        Refusal {
            code: 422,
            reason: "Invalid",
            message: message.into(),
        }
    }

    /// The real server's answer to a write with a stale resourceVersion.
    pub(super) fn conflict(name: &str) -> Refusal {
        Refusal {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on nodes {name:?}: the object has been modified; \
                 please apply your changes to the latest version and try again"
            ),
        }
    }
}

/// Which object a patch is sent to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// `/api/v1/nodes/{name}`: spec and metadata.
    Node,
    /// `/api/v1/nodes/{name}/status`.
    Status,
}

/// The kind of patch, from the request's `Content-Type` (parameters ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    StrategicMerge,
    JsonPatch,
}

impl Kind {
    /// The kind `content_type` names; 415 for any other.
    pub(super) fn of(content_type: Option<&str>) -> Result<Kind, Refusal> {
        let media = content_type
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim();
        match media {
            STRATEGIC_MERGE => Ok(Kind::StrategicMerge),
            JSON_PATCH => Ok(Kind::JsonPatch),
            "application/merge-patch+json" | "application/apply-patch+yaml" => Err(Refusal {
                code: 415,
                reason: "UnsupportedMediaType",
                message: format!(
                    "{media} is accepted by kube-apiserver but not by testkit's stand-in"
                ),
            }),
            _ => Err(Refusal {
                code: 415,
                reason: "UnsupportedMediaType",
                message: format!(
                    "the body of the request was in an unknown format - accepted media types \
                     include: {ACCEPTED}"
                ),
            }),
        }
    }
}

/// `stored` with `body` applied as a `kind` patch to `target`; `Ok(None)` when nothing changed.
pub(super) fn apply(
    stored: &Value,
    name: &str,
    target: Target,
    kind: Kind,
    body: &[u8],
) -> Result<Option<Value>, Refusal> {
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| Refusal::bad_request(format!("error decoding patch: {e}")))?;
    let mut patched = match kind {
        Kind::StrategicMerge => {
            if !patch.is_object() {
                return Err(Refusal::bad_request(
                    "error decoding patch: a strategic merge patch must be a JSON object",
                ));
            }
            strategic_merge(stored, &patch, "")?
        }
        Kind::JsonPatch => json_patch(stored, &patch)?,
    };
    // Without a resourceVersion the write is unconditional, as on the real server.
    if patched["metadata"]
        .get("resourceVersion")
        .is_none_or(Value::is_null)
    {
        patched["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
    }
    if patched["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"] {
        return Err(Refusal::conflict(name));
    }
    // What the other side of the subresource owns is reset, as the Node strategies do.
    let kept = match target {
        Target::Node => "status",
        Target::Status => "spec",
    };
    patched[kept] = stored[kept].clone();
    check_only_supported_changes(stored, &patched)?;
    check_fields(&patched)?;
    Ok((patched != *stored).then_some(patched))
}

/// The merge of `patch` into `original` at JSON path `at`: objects merge key by key (`null`
/// deletes), `status.conditions` merges by `type`, every other list is replaced.
fn strategic_merge(original: &Value, patch: &Value, at: &str) -> Result<Value, Refusal> {
    let (Some(original), Some(patch)) = (original.as_object(), patch.as_object()) else {
        return Ok(patch.clone());
    };
    let mut out = original.clone();
    for (key, value) in patch {
        if key.starts_with('$') {
            return Err(Refusal::bad_request(format!(
                "patch directive {key} at {at} is not supported by testkit's stand-in"
            )));
        }
        let path = format!("{at}.{key}");
        if value.is_null() {
            out.remove(key);
            continue;
        }
        let merged = match (out.get(key), value) {
            (Some(Value::Array(old)), Value::Array(new)) if path == ".status.conditions" => {
                Value::Array(merge_by_type(old, new)?)
            }
            (Some(old @ Value::Object(_)), Value::Object(_)) => strategic_merge(old, value, &path)?,
            _ => value.clone(),
        };
        out.insert(key.clone(), merged);
    }
    Ok(Value::Object(out))
}

/// A list with merge key `type`: an item of `new` replaces (merged into) the item of `old` of
/// the same type, or is appended; `{"type": T, "$patch": "delete"}` removes T.
fn merge_by_type(old: &[Value], new: &[Value]) -> Result<Vec<Value>, Refusal> {
    let mut out = old.to_vec();
    for item in new {
        let Some(kind) = item.get("type").and_then(Value::as_str) else {
            return Err(Refusal::bad_request(
                "map: a condition in the patch has no string type: the merge key is required",
            ));
        };
        let position = out
            .iter()
            .position(|o| o.get("type").and_then(Value::as_str) == Some(kind));
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = position {
                out.remove(i);
            }
            continue;
        }
        match position {
            Some(i) => out[i] = strategic_merge(&out[i], item, ".status.conditions[]")?,
            None => out.push(item.clone()),
        }
    }
    Ok(out)
}

/// RFC 6902 `add`, `remove`, `replace` and `test` applied in order to a copy of `original`.
fn json_patch(original: &Value, patch: &Value) -> Result<Value, Refusal> {
    let Some(ops) = patch.as_array() else {
        return Err(Refusal::bad_request(
            "error decoding patch: a JSON patch must be a JSON array of operations",
        ));
    };
    let mut doc = original.clone();
    for op in ops {
        let field = |name: &str| op.get(name).and_then(Value::as_str);
        let (Some(kind), Some(path)) = (field("op"), field("path")) else {
            return Err(Refusal::bad_request(format!(
                "error decoding patch: an operation needs string op and path: {op}"
            )));
        };
        let value = op.get("value");
        let needs_value = |v: Option<&Value>| {
            v.cloned().ok_or_else(|| {
                Refusal::bad_request(format!("error decoding patch: {kind} {path} has no value"))
            })
        };
        let tokens = pointer(path)?;
        match kind {
            "test" => {
                let expected = needs_value(value)?;
                if doc.pointer(path) != Some(&expected) {
                    return Err(Refusal::invalid(format!(
                        "testing value {path} failed: test failed"
                    )));
                }
            }
            "remove" => {
                remove(&mut doc, &tokens, path)?;
            }
            "replace" => {
                let value = needs_value(value)?;
                remove(&mut doc, &tokens, path)?;
                add(&mut doc, &tokens, value, path)?;
            }
            "add" => add(&mut doc, &tokens, needs_value(value)?, path)?,
            "move" | "copy" => {
                return Err(Refusal::invalid(format!(
                    "the {kind} operation is not supported by testkit's stand-in"
                )))
            }
            other => {
                return Err(Refusal::bad_request(format!(
                    "error decoding patch: unexpected operation {other:?}"
                )))
            }
        }
    }
    Ok(doc)
}

/// The reference tokens of JSON pointer `path` (`~1` is `/`, `~0` is `~`).
fn pointer(path: &str) -> Result<Vec<String>, Refusal> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Refusal::bad_request(format!(
            "error decoding patch: path {path:?} does not start with /"
        )));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn missing(kind: &str, path: &str) -> Refusal {
    Refusal::invalid(format!(
        "{kind} operation does not apply: doc is missing path: {path:?}"
    ))
}

/// The parent of the last token, which must exist.
fn parent<'a>(
    doc: &'a mut Value,
    tokens: &[String],
    kind: &str,
    path: &str,
) -> Result<&'a mut Value, Refusal> {
    let mut node = doc;
    for token in &tokens[..tokens.len().saturating_sub(1)] {
        node = match node {
            Value::Object(map) => map.get_mut(token),
            Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| missing(kind, path))?;
    }
    Ok(node)
}

fn add(doc: &mut Value, tokens: &[String], value: Value, path: &str) -> Result<(), Refusal> {
    let Some(last) = tokens.last() else {
        *doc = value;
        return Ok(());
    };
    match parent(doc, tokens, "add", path)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
        }
        Value::Array(items) if last == "-" => items.push(value),
        Value::Array(items) => match last.parse::<usize>() {
            Ok(i) if i <= items.len() => items.insert(i, value),
            _ => return Err(missing("add", path)),
        },
        _ => return Err(missing("add", path)),
    }
    Ok(())
}

fn remove(doc: &mut Value, tokens: &[String], path: &str) -> Result<Value, Refusal> {
    let Some(last) = tokens.last() else {
        return Err(missing("remove", path));
    };
    match parent(doc, tokens, "remove", path)? {
        Value::Object(map) => map.remove(last),
        Value::Array(items) => match last.parse::<usize>() {
            Ok(i) if i < items.len() => Some(items.remove(i)),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| missing("remove", path))
}

/// The fields a patch may change in the stand-in.
const SUPPORTED: [(&str, &str); 3] = [
    ("status", "conditions"),
    ("spec", "taints"),
    ("metadata", "annotations"),
];

fn check_only_supported_changes(stored: &Value, patched: &Value) -> Result<(), Refusal> {
    let strip = |v: &Value| {
        let mut v = v.clone();
        for (outer, inner) in SUPPORTED {
            if let Some(map) = v.get_mut(outer).and_then(Value::as_object_mut) {
                map.remove(inner);
            }
        }
        v
    };
    let (before, after) = (strip(stored), strip(patched));
    if before == after {
        return Ok(());
    }
    let changed: Vec<&str> = ["metadata", "spec", "status", "kind", "apiVersion"]
        .into_iter()
        .filter(|k| before.get(k) != after.get(k))
        .collect();
    Err(Refusal::invalid(format!(
        "testkit's stand-in stores only status.conditions, spec.taints and metadata.annotations; \
         the patch changes {}",
        changed.join(", ")
    )))
}

/// The conditions, taints and annotations of `node` have the real types' shapes.
fn check_fields(node: &Value) -> Result<(), Refusal> {
    if let Some(annotations) = node["metadata"].get("annotations") {
        let ok = annotations
            .as_object()
            .is_some_and(|map| map.values().all(Value::is_string));
        if !ok {
            return Err(Refusal::bad_request(
                "metadata.annotations: expected a map of strings",
            ));
        }
    }
    let conditions = list(node["status"].get("conditions"), "status.conditions")?;
    let mut seen = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let c = strings(
            c,
            &at,
            &[
                "type",
                "status",
                "reason",
                "message",
                "lastHeartbeatTime",
                "lastTransitionTime",
            ],
        )?;
        let kind = required(c, "type", &at)?;
        match required(c, "status", &at)? {
            "True" | "False" | "Unknown" => {}
            other => {
                return Err(Refusal::invalid(format!(
                    "{at}.status: Unsupported value: {other:?}: supported values: \"False\", \
                     \"True\", \"Unknown\""
                )))
            }
        }
        if seen.contains(&kind.to_string()) {
            return Err(Refusal::invalid(format!(
                "{at}.type: Duplicate value: {kind:?}"
            )));
        }
        seen.push(kind.to_string());
    }
    let taints = list(node["spec"].get("taints"), "spec.taints")?;
    let mut seen = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        let at = format!("spec.taints[{i}]");
        let t = strings(t, &at, &["key", "value", "effect", "timeAdded"])?;
        let key = required(t, "key", &at)?;
        let effect = required(t, "effect", &at)?;
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            return Err(Refusal::invalid(format!(
                "{at}.effect: Unsupported value: {effect:?}: supported values: \"NoSchedule\", \
                 \"PreferNoSchedule\", \"NoExecute\""
            )));
        }
        let pair = (key.to_string(), effect.to_string());
        if seen.contains(&pair) {
            return Err(Refusal::invalid(format!(
                "spec.taints[{i}]: Duplicate value: taints must be unique by key and effect pair"
            )));
        }
        seen.push(pair);
    }
    Ok(())
}

fn list<'a>(value: Option<&'a Value>, at: &str) -> Result<&'a [Value], Refusal> {
    match value {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(Refusal::bad_request(format!("{at}: expected a list"))),
    }
}

/// `item` as an object whose fields are all strings and all in `known`.
fn strings<'a>(
    item: &'a Value,
    at: &str,
    known: &[&str],
) -> Result<&'a Map<String, Value>, Refusal> {
    let Some(map) = item.as_object() else {
        return Err(Refusal::bad_request(format!("{at}: expected an object")));
    };
    for (key, value) in map {
        if !known.contains(&key.as_str()) {
            return Err(Refusal::bad_request(format!(
                "strict decoding error: unknown field \"{at}.{key}\""
            )));
        }
        if !(value.is_string() || key == "timeAdded" && value.is_null()) {
            return Err(Refusal::bad_request(format!(
                "{at}.{key}: expected a string"
            )));
        }
    }
    Ok(map)
}

fn required<'a>(map: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a str, Refusal> {
    match map.get(key).and_then(Value::as_str) {
        Some(value) if !value.is_empty() => Ok(value),
        _ => Err(Refusal::invalid(format!("{at}.{key}: Required value"))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stored() -> Value {
        json!({
            "kind": "Node",
            "metadata": {"name": "n", "resourceVersion": "7", "annotations": {"a": "1"}},
            "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "other", "effect": "NoSchedule"}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "MemoryPressure", "status": "False"}
            ]}
        })
    }

    fn smp(target: Target, patch: Value) -> Result<Option<Value>, Refusal> {
        apply(
            &stored(),
            "n",
            target,
            Kind::StrategicMerge,
            patch.to_string().as_bytes(),
        )
    }

    fn jsonp(target: Target, patch: Value) -> Result<Option<Value>, Refusal> {
        apply(
            &stored(),
            "n",
            target,
            Kind::JsonPatch,
            patch.to_string().as_bytes(),
        )
    }

    #[test]
    fn conditions_merge_by_type_and_leave_the_others_alone() {
        let patched = smp(
            Target::Status,
            json!({"status": {"conditions": [
                {"type": "NetworkUnavailable", "status": "False", "reason": "KnidNetworkReady"},
                {"type": "Ready", "message": "m"}
            ]}}),
        )
        .expect("applies")
        .expect("changes");
        let conditions = &patched["status"]["conditions"];
        assert_eq!(conditions.as_array().map(Vec::len), Some(3));
        assert_eq!(
            conditions[0]["reason"], "KubeletReady",
            "merged, not replaced"
        );
        assert_eq!(conditions[0]["message"], "m");
        assert_eq!(conditions[1]["type"], "MemoryPressure");
        assert_eq!(conditions[2]["type"], "NetworkUnavailable");
    }

    #[test]
    fn a_status_patch_keeps_the_spec_and_a_node_patch_the_status() {
        let patched = smp(Target::Status, json!({"spec": {"taints": null}}));
        assert_eq!(patched, Ok(None), "the status subresource resets spec");
        let patched = smp(Target::Node, json!({"status": {"conditions": null}}));
        assert_eq!(patched, Ok(None));
    }

    #[test]
    fn a_stale_resource_version_in_a_merge_patch_is_a_conflict() {
        let refused = smp(
            Target::Status,
            json!({"metadata": {"resourceVersion": "6"}, "status": {"conditions": []}}),
        )
        .expect_err("refused");
        assert_eq!((refused.code, refused.reason), (409, "Conflict"));
        let same = smp(
            Target::Status,
            json!({"metadata": {"resourceVersion": "7"}, "status": {"conditions": [{"type": "X", "status": "True"}]}}),
        );
        assert!(matches!(same, Ok(Some(_))), "{same:?}");
    }

    #[test]
    fn a_failed_json_patch_test_is_422_as_kube_apiserver_answers_it() {
        let refused = jsonp(
            Target::Node,
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "6"},
                {"op": "add", "path": "/spec/taints/-", "value": {"key": "k", "effect": "NoSchedule"}}
            ]),
        )
        .expect_err("refused");
        assert_eq!((refused.code, refused.reason), (422, "Invalid"));
    }

    #[test]
    fn json_patch_adds_and_removes_taints_and_escaped_annotations() {
        let patched = jsonp(
            Target::Node,
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/spec/taints/-", "value": {"key": "knid.io/x", "effect": "NoSchedule"}},
                {"op": "remove", "path": "/spec/taints/0"},
                {"op": "add", "path": "/metadata/annotations/knid.io~1nets", "value": "{}"}
            ]),
        )
        .expect("applies")
        .expect("changes");
        assert_eq!(
            patched["spec"]["taints"],
            json!([{"key": "knid.io/x", "effect": "NoSchedule"}])
        );
        assert_eq!(patched["metadata"]["annotations"]["knid.io/nets"], "{}");
        let missing = jsonp(
            Target::Node,
            json!([{"op": "remove", "path": "/spec/taints/5"}]),
        );
        assert_eq!(missing.expect_err("refused").code, 422);
    }

    #[test]
    fn malformed_and_unsupported_patches_are_refused_with_the_real_codes() {
        let code = |r: Result<Option<Value>, Refusal>| r.expect_err("refused").code;
        assert_eq!(
            apply(&stored(), "n", Target::Node, Kind::JsonPatch, b"{not json")
                .expect_err("bad")
                .code,
            400
        );
        assert_eq!(
            code(jsonp(Target::Node, json!({"op": "add"}))),
            400,
            "not an array"
        );
        assert_eq!(
            code(jsonp(Target::Node, json!([{"op": "frob", "path": "/a"}]))),
            400
        );
        assert_eq!(
            code(smp(
                Target::Status,
                json!({"status": {"conditions": [{"type": "X", "status": "True", "colour": "red"}]}})
            )),
            400,
            "unknown field"
        );
        assert_eq!(
            code(smp(
                Target::Status,
                json!({"status": {"conditions": [{"type": "X", "status": "Maybe"}]}})
            )),
            422
        );
        assert_eq!(
            code(jsonp(
                Target::Node,
                json!([{"op": "add", "path": "/spec/taints/-", "value": {"key": "k", "effect": "Sometimes"}}])
            )),
            422
        );
        assert_eq!(
            code(smp(
                Target::Node,
                json!({"metadata": {"labels": {"a": "b"}}})
            )),
            422,
            "a field the stand-in does not store"
        );
        assert_eq!(
            Kind::of(Some("application/json")).expect_err("415").code,
            415
        );
        assert_eq!(
            Kind::of(Some(
                "application/strategic-merge-patch+json; charset=utf-8"
            )),
            Ok(Kind::StrategicMerge)
        );
    }
}
