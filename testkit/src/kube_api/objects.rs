//! The JSON envelopes the stand-in API server sends, shaped as kube-apiserver's: lists of any
//! kind, `Status` errors and watch events.

use serde_json::{json, Value};

use super::kinds::Resource;

/// A list page of `resource` around `items` (each a rendered object).
pub(super) fn list<'a>(
    resource: Resource,
    resource_version: u64,
    items: impl Iterator<Item = &'a str>,
    more: Option<(String, usize)>,
) -> String {
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if let Some((token, remaining)) = more {
        metadata["continue"] = json!(token);
        metadata["remainingItemCount"] = json!(remaining);
    }
    let mut body = format!(
        r#"{{"kind":"{}","apiVersion":"{}","metadata":{metadata},"items":["#,
        resource.list_kind(),
        resource.api_version()
    );
    for (i, item) in items.enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(item);
    }
    body.push_str("]}");
    body
}

/// A `Status` failure as the API server answers errors with (`details` only when given).
pub(super) fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> String {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status.to_string()
}

/// The 404 for an object of `resource` that does not exist.
pub(super) fn not_found(resource: Resource, name: &str) -> String {
    let mut details = json!({"name": name, "kind": resource.plural()});
    if let Some(group) = resource.group() {
        details["group"] = json!(group);
    }
    status(
        404,
        "NotFound",
        &format!("{} {name:?} not found", resource.qualified()),
        Some(details),
    )
}

/// One watch event: `{"type":..,"object":..}` and its newline.
pub(super) fn watch_event(kind: &str, object: &str) -> String {
    format!(r#"{{"type":"{kind}","object":{object}}}"#) + "\n"
}

/// The `ERROR` event's object for a watch from a resourceVersion older than the history kept.
pub(super) fn too_old(requested: u64, oldest: u64) -> String {
    status(
        410,
        "Expired",
        &format!("too old resource version: {requested} ({oldest})"),
        None,
    )
}
