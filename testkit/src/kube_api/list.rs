//! A collection's list (`GET /api/v1/nodes`, `/api/v1/pods`, `/api/v1/namespaces/{ns}/pods`...),
//! in pages with `limit` and `continue`. The continue token is the real server's (base64url of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`, the key after the collection's
//! prefix: `name`, or `namespace/name` in a cluster-wide list of a namespaced kind); every page
//! reports the first page's resourceVersion, and items are served as they are now.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use super::cluster::Cluster;
use super::kinds::Resource;
use super::objects;

/// The real server's message when a continue token outlived the history (etcd compaction).
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a \
    consistent list result. You can start a new list without the continue parameter, or use the \
    continue token in this response to retrieve the remainder of the results. Continuing with the \
    provided token results in an inconsistent list - objects that were created, modified, or \
    deleted between the time the first chunk was returned and now may show up in the list.";

/// What a list asked for.
#[derive(Debug, Default)]
pub(super) struct ListQuery {
    /// At most this many items per page (`None`: all).
    pub limit: Option<usize>,
    /// The `continue` token of the previous page.
    pub continue_token: Option<String>,
    /// Only the objects of this name (`fieldSelector=metadata.name=..`).
    pub name: Option<String>,
    /// The list's `resourceVersion`: any state at least this new (`None`: absent or "0").
    pub resource_version: Option<u64>,
}

/// The page `query` asks for of the objects of `resource` (in `namespace`, or all), as a
/// status and a body.
pub(super) fn page(
    cluster: &Cluster,
    resource: Resource,
    namespace: Option<&str>,
    query: &ListQuery,
) -> (u16, String) {
    let (resource_version, start) = match &query.continue_token {
        Some(_) if query.resource_version.is_some() => {
            let message = "specifying resource version is not allowed when using continue";
            return (400, objects::status(400, "BadRequest", message, None));
        }
        None => match query.resource_version {
            // The real server waits up to 3 s for its cache to catch up, then answers this;
            // here nothing is on its way.
            Some(asked) if asked > cluster.resource_version() => {
                let message = format!(
                    "Too large resource version: {asked}, current: {}",
                    cluster.resource_version()
                );
                let details = json!({
                    "causes": [{"reason": "ResourceVersionTooLarge",
                                "message": "Too large resource version"}],
                    "retryAfterSeconds": 1
                });
                return (
                    504,
                    objects::status(504, "Timeout", &message, Some(details)),
                );
            }
            _ => (cluster.resource_version(), None),
        },
        Some(token) => match decode(token) {
            None => {
                let message = "continue key is not valid: the token is not one this server made";
                return (400, objects::status(400, "BadRequest", message, None));
            }
            Some((rv, _)) if rv < cluster.oldest_watchable() => {
                return (
                    410,
                    objects::status(410, "Expired", INCONSISTENT_CONTINUE, None),
                );
            }
            Some((rv, start)) => (rv, Some(start)),
        },
    };
    let wanted = |key: &str| {
        let name = key.split_once('/').map_or(key, |(_, name)| name);
        query.name.as_deref().is_none_or(|wanted| wanted == name)
    };
    let prefix = namespace.map(|namespace| format!("{namespace}/"));
    let mut matching = cluster
        .objects_from(resource, prefix.as_deref().unwrap_or(""), start.as_deref())
        .filter(|(key, _)| wanted(key));
    let limit = query.limit.unwrap_or(usize::MAX);
    let items: Vec<(&str, &str)> = matching
        .by_ref()
        .take(limit)
        .map(|(name, json)| (name, &**json))
        .collect();
    let remaining = matching.count();
    let more = match items.last() {
        Some((last, _)) if remaining > 0 => Some((encode(resource_version, last), remaining)),
        _ => None,
    };
    let items = items.iter().map(|(_, json)| *json);
    let body = objects::list(resource, resource_version, items, more);
    (200, body)
}

/// The token for the page after the item named `last`.
fn encode(resource_version: u64, last: &str) -> String {
    let token =
        json!({"v": "meta.k8s.io/v1", "rv": resource_version, "start": format!("{last}\0")});
    URL_SAFE_NO_PAD.encode(token.to_string())
}

/// The resourceVersion and start key in a token, if it is one of ours.
fn decode(token: &str) -> Option<(u64, String)> {
    let json: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token).ok()?).ok()?;
    if json["v"] != "meta.k8s.io/v1" {
        return None;
    }
    Some((json["rv"].as_u64()?, json["start"].as_str()?.to_string()))
}
