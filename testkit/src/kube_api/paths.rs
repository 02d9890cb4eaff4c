//! Request paths and what they name: a collection (cluster-wide, or one namespace's), an object,
//! or an object's subresource, as kube-apiserver lays its REST paths out.

use super::http;
use super::kinds::Resource;

/// What a path names.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Location {
    pub resource: Resource,
    /// The namespace of a namespaced collection or object; `None` for a cluster-wide one.
    pub namespace: Option<String>,
    /// The object's name; `None` for a collection.
    pub name: Option<String>,
    /// The object's subresource (`status`).
    pub subresource: Option<String>,
}

/// What `path` (still percent-encoded) names, if it names anything served.
pub(super) fn locate(path: &str) -> Option<Location> {
    let (prefix, rest) = ["/api/v1/", "/apis/networking.k8s.io/v1/"]
        .into_iter()
        .find_map(|prefix| Some((prefix, path.strip_prefix(prefix)?)))?;
    let segments = rest
        .split('/')
        .map(|segment| http::percent_decode(segment).filter(|s| !s.is_empty() && !s.contains('/')))
        .collect::<Option<Vec<String>>>()?;
    let resource_in = |plural: &str| {
        Resource::ALL.into_iter().find(|resource| {
            resource.plural() == plural
                && resource.group_version_path() == prefix.trim_end_matches('/')
        })
    };
    let location = |resource: Resource, namespace: Option<&String>, rest: &[String]| {
        let (name, subresource) = match rest {
            [] => (None, None),
            [name] => (Some(name.clone()), None),
            [name, subresource] => (Some(name.clone()), Some(subresource.clone())),
            _ => return None,
        };
        Some(Location {
            resource,
            namespace: namespace.cloned(),
            name,
            subresource,
        })
    };
    match segments.as_slice() {
        // A namespaced collection, or an object in it: namespaces/{ns}/{plural}[/{name}[/sub]].
        [namespaces, namespace, plural, rest @ ..]
            if namespaces == "namespaces"
                && resource_in(plural).is_some_and(Resource::namespaced) =>
        {
            location(resource_in(plural)?, Some(namespace), rest)
        }
        [plural, rest @ ..] => match resource_in(plural)? {
            // A namespaced resource's objects are reached only through their namespace.
            resource if resource.namespaced() && !rest.is_empty() => None,
            resource => location(resource, None, rest),
        },
        [] => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(resource: Resource, namespace: Option<&str>, name: Option<&str>) -> Option<Location> {
        Some(Location {
            resource,
            namespace: namespace.map(String::from),
            name: name.map(String::from),
            subresource: None,
        })
    }

    #[test]
    fn paths_name_collections_objects_and_subresources() {
        use Resource::*;
        let np = "/apis/networking.k8s.io/v1";
        let cases = [
            ("/api/v1/nodes", at(Nodes, None, None)),
            ("/api/v1/nodes/a", at(Nodes, None, Some("a"))),
            ("/api/v1/namespaces", at(Namespaces, None, None)),
            ("/api/v1/namespaces/web", at(Namespaces, None, Some("web"))),
            ("/api/v1/pods", at(Pods, None, None)),
            ("/api/v1/namespaces/web/pods", at(Pods, Some("web"), None)),
            (
                "/api/v1/namespaces/web/pods/p%2D0",
                at(Pods, Some("web"), Some("p-0")),
            ),
            (
                &format!("{np}/networkpolicies"),
                at(NetworkPolicies, None, None),
            ),
            (
                &format!("{np}/namespaces/web/networkpolicies/deny"),
                at(NetworkPolicies, Some("web"), Some("deny")),
            ),
        ];
        for (path, expected) in cases {
            assert_eq!(locate(path), expected, "{path}");
        }
        let status = locate("/api/v1/nodes/a/status").expect("a subresource");
        assert_eq!(status.subresource.as_deref(), Some("status"));
    }

    #[test]
    fn paths_outside_what_is_served_name_nothing() {
        for path in [
            "/api/v1",
            "/api/v1/",
            "/api/v1/services",
            "/api/v1/pods/p",
            "/api/v1/nodes//status",
            "/apis/networking.k8s.io/v1/pods",
            "/apis/networking.k8s.io/v1/networkpolicies/deny",
            "/api/v1/namespaces/web/pods/a/b/c",
            "/version",
        ] {
            assert_eq!(locate(path), None, "{path}");
        }
    }
}
