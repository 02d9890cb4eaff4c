//! What each request gets: the bearer-token check, then get, list or watch of any collection
//! served ([`kinds`](super::kinds), laid out as [`paths`](super::paths) says), or a patch of a
//! Node or its status ([`patch`](super::patch)); anything else is a 404 or 405 `Status`, as
//! kube-apiserver answers it.

use std::time::Duration;

use super::cluster::key;
use super::http::{self, Head};
use super::kinds::Resource;
use super::list::{self, ListQuery};
use super::objects;
use super::patch::{self, Kind, Refusal, Target};
use super::paths::{self, Location};
use super::shared::{lock, Shared};
use super::watch::WatchPlan;

/// The answer to a request.
pub(super) enum Reply {
    /// A whole response: its status and JSON body.
    Whole { status: u16, body: String },
    /// A watch stream.
    Watch(WatchPlan),
}

impl Reply {
    fn status(status: u16, reason: &str, message: &str) -> Reply {
        Reply::Whole {
            status,
            body: objects::status(status, reason, message, None),
        }
    }

    fn bad_request(message: &str) -> Reply {
        Reply::status(400, "BadRequest", message)
    }
}

/// Whether `head` asks for a watch of a collection (whether or not it gets one).
pub(super) fn asks_for_watch(head: &Head) -> bool {
    paths::locate(&head.path).is_some_and(|location| location.name.is_none())
        && http::parse_query(&head.query).is_some_and(|pairs| {
            pairs
                .iter()
                .any(|(name, value)| name == "watch" && parse_bool(value) == Some(true))
        })
}

/// Answers `head`.
pub(super) fn route(shared: &Shared, head: &Head) -> Reply {
    if !authorized(head, &shared.token) {
        return Reply::status(401, "Unauthorized", "Unauthorized");
    }
    let location = paths::locate(&head.path);
    if head.method == "PATCH" {
        return match location {
            Some(Location {
                resource: Resource::Nodes,
                name: Some(name),
                subresource,
                ..
            }) => patch_node(shared, head, &name, subresource.as_deref()),
            _ => method_not_allowed(),
        };
    }
    if head.method != "GET" {
        return method_not_allowed();
    }
    let Some(location) = location else {
        return not_found();
    };
    match location {
        Location {
            name: None,
            resource,
            namespace,
            ..
        } => match Params::parse(&head.query) {
            Ok(params) => collection(shared, resource, namespace, params),
            Err(message) => Reply::bad_request(&message),
        },
        Location {
            name: Some(name),
            subresource: None,
            resource,
            namespace,
        } => match lock(&shared.cluster).get(resource, &key(namespace.as_deref(), &name)) {
            Some(object) => Reply::Whole {
                status: 200,
                body: object.to_string(),
            },
            None => Reply::Whole {
                status: 404,
                body: objects::not_found(resource, &name),
            },
        },
        Location {
            subresource: Some(_),
            ..
        } => not_found(),
    }
}

fn method_not_allowed() -> Reply {
    Reply::status(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

/// `PATCH /api/v1/nodes/{name}` or `PATCH /api/v1/nodes/{name}/status`.
fn patch_node(shared: &Shared, head: &Head, name: &str, subresource: Option<&str>) -> Reply {
    let target = match subresource {
        None => Target::Node,
        Some("status") => Target::Status,
        Some(_) => return not_found(),
    };
    let refused = |r: Refusal| Reply::status(r.code, r.reason, &r.message);
    let kind = match Kind::of(head.header("content-type")) {
        Ok(kind) => kind,
        Err(refusal) => return refused(refusal),
    };
    let mut cluster = lock(&shared.cluster);
    let Some(stored) = cluster.object(Resource::Nodes, name) else {
        return Reply::Whole {
            status: 404,
            body: objects::not_found(Resource::Nodes, name),
        };
    };
    if shared.take_forced_conflict() {
        return refused(Refusal::conflict(name));
    }
    match patch::apply(stored, name, target, kind, &head.body) {
        Err(refusal) => refused(refusal),
        Ok(None) => Reply::Whole {
            status: 200,
            body: stored.to_string(),
        },
        Ok(Some(patched)) => {
            cluster.replace_object(Resource::Nodes, name, patched);
            shared.changed.notify_all();
            Reply::Whole {
                status: 200,
                body: cluster
                    .get(Resource::Nodes, name)
                    .map(|j| j.to_string())
                    .unwrap_or_default(),
            }
        }
    }
}

/// The real server's generic 404, with its empty details.
fn not_found() -> Reply {
    let message = "the server could not find the requested resource";
    Reply::Whole {
        status: 404,
        body: objects::status(404, "NotFound", message, Some(serde_json::json!({}))),
    }
}

/// `Authorization: Bearer <token>`, the scheme case-insensitive as Kubernetes reads it.
fn authorized(head: &Head, token: &str) -> bool {
    head.header("authorization")
        .and_then(|value| value.split_once(' '))
        .is_some_and(|(scheme, given)| {
            scheme.eq_ignore_ascii_case("bearer") && given.trim() == token
        })
}

/// A list or a watch of the objects of `resource` (in `namespace`, or all).
fn collection(
    shared: &Shared,
    resource: Resource,
    namespace: Option<String>,
    mut params: Params,
) -> Reply {
    let from = params.resource_version.filter(|&rv| rv != 0);
    if params.watch {
        return Reply::Watch(WatchPlan {
            resource,
            namespace,
            from,
            name: params.list.name,
            timeout: params.timeout,
            bookmarks: params.bookmarks,
        });
    }
    params.list.resource_version = from;
    let cluster = lock(&shared.cluster);
    let (status, body) = list::page(&cluster, resource, namespace.as_deref(), &params.list);
    Reply::Whole { status, body }
}

/// The query parameters of a collection.
#[derive(Debug, Default)]
struct Params {
    watch: bool,
    resource_version: Option<u64>,
    timeout: Option<Duration>,
    bookmarks: bool,
    list: ListQuery,
}

impl Params {
    /// The parameters in `query`, or why they are refused. Unknown parameters are ignored, as
    /// the real server ignores them; selectors this stand-in cannot honour are refused rather
    /// than ignored, so a test never reads a wrong answer as a right one.
    fn parse(query: &str) -> Result<Params, String> {
        let pairs = http::parse_query(query).ok_or("malformed query string")?;
        let mut params = Params::default();
        for (name, value) in pairs {
            match name.as_str() {
                "watch" => params.watch = bool_param(&name, &value)?,
                "allowWatchBookmarks" => params.bookmarks = bool_param(&name, &value)?,
                "resourceVersion" if !value.is_empty() => {
                    let rv = value
                        .parse()
                        .map_err(|_| format!("invalid resourceVersion {value:?}"))?;
                    params.resource_version = Some(rv);
                }
                "timeoutSeconds" if !value.is_empty() => {
                    let seconds: u64 = value
                        .parse()
                        .map_err(|_| format!("invalid timeoutSeconds {value:?}"))?;
                    params.timeout = (seconds > 0).then(|| Duration::from_secs(seconds));
                }
                "limit" if !value.is_empty() => {
                    let limit: i64 = value
                        .parse()
                        .map_err(|_| format!("invalid limit {value:?}"))?;
                    params.list.limit = usize::try_from(limit).ok().filter(|&l| l > 0);
                }
                "continue" if !value.is_empty() => params.list.continue_token = Some(value),
                "fieldSelector" if !value.is_empty() => {
                    params.list.name = Some(name_selector(&value)?);
                }
                "labelSelector" if !value.is_empty() => {
                    return Err("labelSelector is not supported by testkit's stand-in".into());
                }
                _ => {}
            }
        }
        Ok(params)
    }
}

/// The object name in a `metadata.name=<name>` field selector, the only one supported.
fn name_selector(selector: &str) -> Result<String, String> {
    let Some((field, name)) = selector.split_once('=') else {
        return Err(format!("invalid field selector {selector:?}"));
    };
    if field != "metadata.name" {
        return Err(format!("field label not supported: {field}"));
    }
    let name = name.strip_prefix('=').unwrap_or(name);
    if name.contains([',', '=', '!']) {
        return Err(format!(
            "field selector {selector:?} is not supported by testkit's stand-in"
        ));
    }
    Ok(name.to_string())
}

fn bool_param(name: &str, value: &str) -> Result<bool, String> {
    parse_bool(value).ok_or_else(|| format!("invalid value for {name}: {value:?}"))
}

/// A boolean as Go's `strconv.ParseBool` reads it; empty is false.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}
