//! Namespaces, Pods and NetworkPolicies served as kube-apiserver serves them, read with curl:
//! gets, paged lists (cluster-wide and per namespace), and watches that share one
//! resourceVersion sequence across kinds, with bookmarks and 410 Expired.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::tests::{get, rv_of, start, wait_for_watches, CurlWatch, Fixture};
use super::{ContainerPort, KubeApi, NodeSpec, PodSpec};

const POLICIES: &str = "/apis/networking.k8s.io/v1/networkpolicies";

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn pod(namespace: &str, name: &str, ip: &str) -> PodSpec {
    PodSpec {
        namespace: namespace.into(),
        name: name.into(),
        labels: labels(&[("app", name)]),
        node: "node-a".into(),
        ips: vec![ip.into()],
        ..PodSpec::default()
    }
}

/// The names (`namespace/name` for namespaced objects) in a list or in watch events' objects.
fn names<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Vec<String> {
    objects
        .into_iter()
        .map(|object| {
            let meta = &object["metadata"];
            let name = meta["name"].as_str().expect("a name");
            match meta["namespace"].as_str() {
                Some(namespace) => format!("{namespace}/{name}"),
                None => name.to_string(),
            }
        })
        .collect()
}

fn items(list: &Value) -> &[Value] {
    list["items"].as_array().expect("items")
}

/// Every page of `path`, `limit` items at a time: the names on each, and the resourceVersions
/// the pages report.
fn pages(api: &KubeApi, path: &str, limit: usize) -> (Vec<Vec<String>>, Vec<u64>) {
    let mut seen = Vec::new();
    let mut versions = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let query = match &token {
            None => format!("{path}?limit={limit}"),
            Some(token) => format!("{path}?limit={limit}&continue={token}"),
        };
        let (status, page) = get(api, &query);
        assert_eq!(status, 200, "{query}: {page}");
        seen.push(names(items(&page)));
        versions.push(rv_of(&page));
        match page["metadata"]["continue"].as_str() {
            Some(next) => token = Some(next.to_string()),
            None => return (seen, versions),
        }
    }
}

#[test]
fn namespaces_are_served_with_the_name_label_and_active() {
    let f = start();
    for name in ["kube-system", "default", "web", "db"] {
        f.api.put_namespace(name, &[("team", "a")]);
    }
    // The label is the server's: a client's value is overwritten.
    f.api
        .put_namespace("web", &[("kubernetes.io/metadata.name", "other")]);

    let (status, web) = get(&f.api, "/api/v1/namespaces/web");
    assert_eq!(status, 200);
    assert_eq!(
        (&web["kind"], &web["apiVersion"]),
        (&json!("Namespace"), &json!("v1"))
    );
    assert_eq!(
        web["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "web"})
    );
    assert_eq!(web["status"]["phase"], "Active");
    assert_eq!(web["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(web["metadata"]["uid"].as_str().map(str::len), Some(36));

    let (_, list) = get(&f.api, "/api/v1/namespaces");
    assert_eq!(list["kind"], "NamespaceList");
    assert_eq!(names(items(&list)), ["db", "default", "kube-system", "web"]);
    assert_eq!(
        items(&list)[0]["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "db", "team": "a"})
    );
    let (paged, versions) = pages(&f.api, "/api/v1/namespaces", 3);
    assert_eq!(paged, [vec!["db", "default", "kube-system"], vec!["web"]]);
    assert_eq!(
        versions,
        [rv_of(&list); 2],
        "every page reports the first's version"
    );

    let (status, missing) = get(&f.api, "/api/v1/namespaces/ghost");
    assert_eq!(status, 404);
    assert_eq!(missing["message"], "namespaces \"ghost\" not found");
    assert_eq!(
        missing["details"],
        json!({"name": "ghost", "kind": "namespaces"})
    );
}

#[test]
fn pods_are_realistic_and_list_cluster_wide_in_key_order_and_per_namespace() {
    let f = start();
    f.api.add_node(NodeSpec {
        name: "node-a".into(),
        pod_cidrs: vec!["10.244.1.0/24".into()],
        internal_ips: vec!["192.0.2.1".into(), "2001:db8::1".into()],
    });
    // etcd orders keys as strings: "a-b/..." before "a/...".
    for namespace in ["a", "a-b", "b"] {
        f.api.put_namespace(namespace, &[]);
    }
    f.api.put_pod(PodSpec {
        ports: vec![
            ContainerPort {
                name: Some("http".into()),
                port: 8080,
                protocol: String::new(),
            },
            ContainerPort {
                name: None,
                port: 53,
                protocol: "UDP".into(),
            },
        ],
        ips: vec!["10.244.1.5".into(), "fd00:10:244:1::5".into()],
        ..pod("a", "web-0", "")
    });
    f.api.put_pod(pod("a", "db-0", "10.244.1.6"));
    f.api.put_pod(pod("a-b", "x", "10.244.1.7"));
    f.api.put_pod(pod("b", "y", "10.244.1.8"));
    f.api.put_pod(PodSpec {
        host_network: true,
        ips: vec!["192.0.2.1".into()],
        ports: vec![ContainerPort::tcp(9100)],
        ..pod("b", "exporter", "")
    });

    let (status, web) = get(&f.api, "/api/v1/namespaces/a/pods/web-0");
    assert_eq!(status, 200);
    assert_eq!(
        (&web["kind"], &web["apiVersion"]),
        (&json!("Pod"), &json!("v1"))
    );
    let meta = &web["metadata"];
    assert_eq!(
        (&meta["name"], &meta["namespace"]),
        (&json!("web-0"), &json!("a"))
    );
    assert_eq!(meta["labels"], json!({"app": "web-0"}));
    assert!(meta["creationTimestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    assert_eq!(web["spec"]["nodeName"], "node-a");
    assert!(web["spec"].get("hostNetwork").is_none(), "false is omitted");
    assert_eq!(
        web["spec"]["containers"][0]["ports"],
        json!([
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"containerPort": 53, "protocol": "UDP"}
        ])
    );
    let status = &web["status"];
    assert_eq!(status["phase"], "Running");
    assert_eq!(status["podIP"], "10.244.1.5");
    assert_eq!(
        status["podIPs"],
        json!([{"ip": "10.244.1.5"}, {"ip": "fd00:10:244:1::5"}])
    );
    assert_eq!(status["hostIP"], "192.0.2.1");
    assert_eq!(
        status["hostIPs"],
        json!([{"ip": "192.0.2.1"}, {"ip": "2001:db8::1"}])
    );

    let (_, exporter) = get(&f.api, "/api/v1/namespaces/b/pods/exporter");
    assert_eq!(exporter["spec"]["hostNetwork"], true);
    assert_eq!(
        exporter["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 9100, "hostPort": 9100, "protocol": "TCP"}])
    );

    let (_, all) = get(&f.api, "/api/v1/pods");
    assert_eq!(
        (&all["kind"], &all["apiVersion"]),
        (&json!("PodList"), &json!("v1"))
    );
    let order = ["a-b/x", "a/db-0", "a/web-0", "b/exporter", "b/y"];
    assert_eq!(names(items(&all)), order);
    let (paged, _) = pages(&f.api, "/api/v1/pods", 2);
    assert_eq!(paged.concat(), order);
    assert_eq!(paged.len(), 3);
    let (in_a, _) = pages(&f.api, "/api/v1/namespaces/a/pods", 1);
    assert_eq!(in_a, [vec!["a/db-0"], vec!["a/web-0"]]);
    let (_, none) = get(&f.api, "/api/v1/namespaces/ghost/pods");
    assert_eq!(
        names(items(&none)),
        Vec::<String>::new(),
        "an empty list, as the real server's"
    );

    let (status, missing) = get(&f.api, "/api/v1/namespaces/b/pods/web-0");
    assert_eq!(status, 404);
    assert_eq!(missing["message"], "pods \"web-0\" not found");
}

#[test]
fn network_policies_list_cluster_wide_and_per_namespace_in_their_group() {
    let f = start();
    for namespace in ["a", "b"] {
        f.api.put_namespace(namespace, &[]);
    }
    for (namespace, name) in [("b", "deny"), ("a", "deny"), ("a", "allow-dns")] {
        f.api
            .put_network_policy(namespace, name, json!({"podSelector": {}}))
            .expect("valid");
    }
    let (_, all) = get(&f.api, POLICIES);
    assert_eq!(all["kind"], "NetworkPolicyList");
    assert_eq!(all["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(names(items(&all)), ["a/allow-dns", "a/deny", "b/deny"]);
    let (paged, _) = pages(&f.api, POLICIES, 2);
    assert_eq!(paged, [vec!["a/allow-dns", "a/deny"], vec!["b/deny"]]);
    let (_, in_b) = get(
        &f.api,
        "/apis/networking.k8s.io/v1/namespaces/b/networkpolicies",
    );
    assert_eq!(names(items(&in_b)), ["b/deny"]);

    let (status, missing) = get(
        &f.api,
        "/apis/networking.k8s.io/v1/namespaces/b/networkpolicies/allow-dns",
    );
    assert_eq!(status, 404);
    assert_eq!(
        missing,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "networkpolicies.networking.k8s.io \"allow-dns\" not found",
            "reason": "NotFound", "code": 404,
            "details": {"name": "allow-dns", "group": "networking.k8s.io",
                        "kind": "networkpolicies"}
        })
    );
}

#[test]
fn watches_of_each_kind_see_their_changes_on_one_resource_version_sequence() {
    let f = start();
    f.api.put_namespace("web", &[]);
    let from = rv_of(&get(&f.api, "/api/v1/namespaces").1);
    let query = format!("watch=1&resourceVersion={from}&timeoutSeconds=3");
    let namespaces = CurlWatch::at(&f.api, &format!("/api/v1/namespaces?{query}"));
    let pods = CurlWatch::at(&f.api, &format!("/api/v1/pods?{query}"));
    let policies = CurlWatch::at(&f.api, &format!("{POLICIES}?{query}"));
    let nodes = CurlWatch::at(&f.api, &format!("/api/v1/nodes?{query}"));
    wait_for_watches(&f.api, 4);

    f.api.put_namespace("db", &[]);
    f.api.put_pod(pod("web", "web-0", "10.244.1.5"));
    let spec = json!({"podSelector": {"matchLabels": {"app": "web-0"}}});
    f.api
        .put_network_policy("web", "deny", spec)
        .expect("valid");
    f.api.put_pod(pod("web", "web-0", "10.244.1.9"));
    f.api.put_namespace("db", &[("team", "data")]);
    let egress = json!({"podSelector": {}, "egress": [{}]});
    f.api
        .put_network_policy("web", "deny", egress)
        .expect("valid");
    f.api.delete_network_policy("web", "deny");
    f.api.delete_pod("web", "web-0");
    f.api.delete_namespace("db");

    let next = |watch: &CurlWatch, count: usize| -> Vec<Value> {
        (0..count).map(|_| watch.next_event()).collect()
    };
    let kinds = |events: &[Value]| -> Vec<String> {
        events
            .iter()
            .map(|e| format!("{} {}", e["type"], e["object"]["kind"]).replace('"', ""))
            .collect()
    };
    let namespace_events = next(&namespaces, 4);
    let pod_events = next(&pods, 3);
    let policy_events = next(&policies, 3);
    assert_eq!(
        kinds(&namespace_events),
        [
            "ADDED Namespace",
            "MODIFIED Namespace",
            "MODIFIED Namespace",
            "DELETED Namespace"
        ]
    );
    assert_eq!(
        kinds(&pod_events),
        ["ADDED Pod", "MODIFIED Pod", "DELETED Pod"]
    );
    assert_eq!(
        kinds(&policy_events),
        [
            "ADDED NetworkPolicy",
            "MODIFIED NetworkPolicy",
            "DELETED NetworkPolicy"
        ]
    );
    assert_eq!(pod_events[1]["object"]["status"]["podIP"], "10.244.1.9");
    assert_eq!(
        pod_events[1]["object"]["metadata"]["uid"], pod_events[0]["object"]["metadata"]["uid"],
        "an update keeps the uid"
    );
    assert_eq!(
        policy_events[1]["object"]["spec"]["policyTypes"],
        json!(["Ingress", "Egress"])
    );
    assert_eq!(
        namespace_events[2]["object"]["status"]["phase"],
        "Terminating"
    );

    let mut versions: Vec<u64> = [&namespace_events, &pod_events, &policy_events]
        .into_iter()
        .flatten()
        .map(|e| rv_of(&e["object"]))
        .collect();
    versions.sort_unstable();
    let expected: Vec<u64> = (from + 1..=from + 10).collect();
    assert_eq!(versions, expected, "one counter for every kind");

    for watch in [namespaces, pods, policies, nodes] {
        let (status, rest, stderr) = watch.finish();
        assert!(status.success(), "{stderr}");
        assert!(rest.is_empty(), "nothing of another kind: {rest:?}");
    }
}

#[test]
fn deleting_a_namespace_terminates_it_and_deletes_its_pods_and_policies_first() {
    let f = start();
    for namespace in ["web", "db"] {
        f.api.put_namespace(namespace, &[]);
        f.api.put_pod(pod(namespace, "p", "10.244.1.5"));
        f.api
            .put_network_policy(namespace, "deny", json!({}))
            .expect("valid");
    }
    let from = rv_of(&get(&f.api, "/api/v1/namespaces").1);
    f.api.delete_namespace("web");

    let query = format!("watch=1&resourceVersion={from}&timeoutSeconds=1");
    let mut events = Vec::new();
    for path in ["/api/v1/namespaces", "/api/v1/pods", POLICIES] {
        let (status, seen, stderr) = CurlWatch::at(&f.api, &format!("{path}?{query}")).finish();
        assert!(status.success(), "{stderr}");
        events.extend(seen);
    }
    events.sort_by_key(|e| rv_of(&e["object"]));
    let seen: Vec<String> = events
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap_or(""),
                names([&e["object"]])[0]
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            "MODIFIED web",
            "DELETED web/p",
            "DELETED web/deny",
            "DELETED web"
        ]
    );
    assert!(events[0]["object"]["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(f.api.namespace("web"), None);
    assert_eq!(f.api.pod("web", "p"), None);
    assert!(
        f.api.pod("db", "p").is_some(),
        "other namespaces keep theirs"
    );
}

#[test]
fn a_watch_from_zero_replays_the_objects_of_its_collection_only() {
    let f = start();
    f.api.put_namespace("a", &[]);
    f.api.put_namespace("b", &[]);
    f.api.put_pod(pod("a", "p", "10.244.1.5"));
    f.api.put_pod(pod("b", "q", "10.244.1.6"));
    let (status, events, stderr) =
        CurlWatch::at(&f.api, "/api/v1/pods?watch=1&timeoutSeconds=1").finish();
    assert!(status.success(), "{stderr}");
    assert!(events.iter().all(|e| e["type"] == "ADDED"));
    let objects: Vec<&Value> = events.iter().map(|e| &e["object"]).collect();
    assert_eq!(names(objects), ["a/p", "b/q"]);

    let path = "/api/v1/namespaces/b/pods?watch=1&resourceVersion=0&timeoutSeconds=1";
    let (status, events, stderr) = CurlWatch::at(&f.api, path).finish();
    assert!(status.success(), "{stderr}");
    let objects: Vec<&Value> = events.iter().map(|e| &e["object"]).collect();
    assert_eq!(names(objects), ["b/q"], "a namespace's watch");
}

#[test]
fn bookmarks_are_empty_objects_of_the_kind_watched() {
    let f = start();
    f.api.put_namespace("a", &[]);
    let current = rv_of(&get(&f.api, "/api/v1/pods").1);
    let query =
        format!("watch=1&resourceVersion={current}&allowWatchBookmarks=true&timeoutSeconds=5");
    let watches = [
        (
            "/api/v1/namespaces",
            json!({"kind": "Namespace", "apiVersion": "v1",
            "spec": {}, "status": {}}),
        ),
        (
            "/api/v1/pods",
            json!({"kind": "Pod", "apiVersion": "v1",
            "spec": {"containers": null}, "status": {}}),
        ),
        (
            POLICIES,
            json!({"kind": "NetworkPolicy", "apiVersion": "networking.k8s.io/v1",
            "spec": {"podSelector": {}}}),
        ),
    ]
    .map(|(path, expected)| (CurlWatch::at(&f.api, &format!("{path}?{query}")), expected));
    for (watch, mut expected) in watches {
        let bookmark = watch.next_event();
        assert_eq!(bookmark["type"], "BOOKMARK");
        expected["metadata"] =
            json!({"resourceVersion": current.to_string(), "creationTimestamp": null});
        assert_eq!(bookmark["object"], expected);
    }
}

#[test]
fn a_watch_or_continue_from_expired_history_gets_410_for_every_kind() {
    let f = start();
    f.api.put_namespace("a", &[]);
    f.api.put_pod(pod("a", "p", "10.244.1.5"));
    f.api.put_pod(pod("a", "q", "10.244.1.6"));
    let old = rv_of(&get(&f.api, "/api/v1/pods").1);
    let (_, first) = get(&f.api, "/api/v1/pods?limit=1");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();
    f.api.put_pod(pod("a", "r", "10.244.1.7"));
    f.api.expire_history();
    let current = rv_of(&get(&f.api, "/api/v1/pods").1);

    for path in ["/api/v1/namespaces", "/api/v1/pods", POLICIES] {
        let query = format!("watch=1&resourceVersion={old}&timeoutSeconds=5");
        let (status, events, stderr) = CurlWatch::at(&f.api, &format!("{path}?{query}")).finish();
        assert!(status.success(), "{stderr}");
        assert_eq!(events.len(), 1, "{path}: {events:?}");
        assert_eq!(events[0]["type"], "ERROR");
        assert_eq!(events[0]["object"]["code"], 410);
        assert_eq!(
            events[0]["object"]["message"],
            format!("too old resource version: {old} ({current})")
        );
    }
    let (status, expired) = get(&f.api, &format!("/api/v1/pods?limit=1&continue={token}"));
    assert_eq!((status, &expired["reason"]), (410, &json!("Expired")));
}

#[test]
fn selectors_and_inconsistent_versions_are_refused_on_every_collection() {
    let f = start();
    f.api.put_namespace("a", &[]);
    for path in [
        "/api/v1/pods?labelSelector=app%3Dweb",
        "/api/v1/namespaces?labelSelector=team",
        &format!("{POLICIES}?watch=1&labelSelector=x"),
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a",
    ] {
        let (status, body) = get(&f.api, path);
        assert_eq!(
            (status, &body["reason"]),
            (400, &json!("BadRequest")),
            "{path}"
        );
    }
    let (_, first) = get(&f.api, "/api/v1/namespaces?limit=1");
    let current = rv_of(&first);
    let (status, _) = get(
        &f.api,
        "/api/v1/namespaces?limit=1&continue=abc&resourceVersion=5",
    );
    assert_eq!(status, 400, "a continue token carries its version");
    let (status, body) = get(
        &f.api,
        &format!("/api/v1/pods?resourceVersion={}", current + 5),
    );
    assert_eq!((status, &body["reason"]), (504, &json!("Timeout")));
    let (status, list) = get(&f.api, &format!("/api/v1/pods?resourceVersion={current}"));
    assert_eq!((status, rv_of(&list)), (200, current));
    let (status, _) = get(&f.api, "/api/v1/namespaces/a/pods/p/log");
    assert_eq!(status, 404);
}

#[test]
#[should_panic(expected = "put_namespace first")]
fn a_pod_in_a_namespace_that_does_not_exist_is_a_test_mistake() {
    let f = start();
    f.api.put_pod(pod("ghost", "p", "10.244.1.5"));
}

#[test]
#[should_panic(expected = "spec.containers[0].ports[0].name: Invalid value: \"HTTP\"")]
fn an_invalid_pod_is_refused_with_the_real_message() {
    let f = start();
    f.api.put_namespace("a", &[]);
    f.api.put_pod(PodSpec {
        ports: vec![ContainerPort {
            name: Some("HTTP".into()),
            port: 80,
            protocol: String::new(),
        }],
        ..pod("a", "p", "10.244.1.5")
    });
}

#[test]
fn an_update_of_a_pod_keeps_its_identity_and_takes_a_new_version() {
    let f: Fixture = start();
    f.api.put_namespace("a", &[]);
    f.api.put_pod(pod("a", "p", "10.244.1.5"));
    let before = f.api.pod("a", "p").expect("stored");
    std::thread::sleep(Duration::from_millis(10));
    f.api.put_pod(PodSpec {
        labels: labels(&[("app", "new")]),
        ..pod("a", "p", "10.244.1.5")
    });
    let after = f.api.pod("a", "p").expect("stored");
    for field in ["uid", "creationTimestamp"] {
        assert_eq!(
            after["metadata"][field], before["metadata"][field],
            "{field}"
        );
    }
    assert_eq!(rv_of(&after), rv_of(&before) + 1);
    assert_eq!(after["metadata"]["labels"], json!({"app": "new"}));
}
