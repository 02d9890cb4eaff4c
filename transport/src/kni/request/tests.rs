use std::collections::HashMap;
use std::net::IpAddr;

use protobuf::{EnumOrUnknown, MessageField};

use super::*;

fn map(entries: &[(&str, &str)]) -> HashMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A valid AttachInterface: pod `web` in `prod`, netns by isolation.path, one default eth0.
fn attach_req() -> kni::AttachInterfaceRequest {
    kni::AttachInterfaceRequest {
        name: "web".into(),
        id: "sandbox-1".into(),
        namespace: "prod".into(),
        isolation: MessageField::some(kni::Isolation {
            path: "/run/netns/kni-uid-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The field and rule of an InvalidArgument, panicking on anything else.
fn invalid<T: std::fmt::Debug>(result: Result<T, Error>) -> (String, String) {
    match result {
        Err(Error::InvalidArgument { field, rule }) => (field, rule),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn ifnames_and_networks(a: &Attach) -> Vec<(String, String)> {
    a.request
        .interfaces
        .iter()
        .map(|i| (i.name.to_string(), i.network.clone()))
        .collect()
}

#[test]
fn attach_interface_maps_every_field_onto_the_core_request() {
    let mut req = attach_req();
    req.extradata = map(&[
        ("uid", "uid-1"),
        ("knid.io/networks", "default, storage@net1 ,fast"),
    ]);
    req.dns_config = MessageField::some(kni::DNSConfig {
        servers: vec!["10.96.0.10".into()],
        searches: vec!["svc.cluster.local".into()],
        options: vec!["ndots:5".into()],
        ..Default::default()
    });
    req.port_mappings = vec![
        kni::PortMapping {
            protocol: EnumOrUnknown::new(kni::Protocol::UDP),
            container_port: 53,
            host_port: 5353,
            host_ip: "127.0.0.1".into(),
            ..Default::default()
        },
        kni::PortMapping {
            container_port: 80,
            host_port: 8080,
            ..Default::default()
        },
        kni::PortMapping {
            protocol: EnumOrUnknown::new(kni::Protocol::SCTP),
            container_port: 9,
            host_port: 9,
            ..Default::default()
        },
    ];
    req.labels = map(&[("app", "web")]);
    req.annotations = map(&[("note", "a=b;c")]);

    let attach = attach_interface(&req).expect("valid");
    assert_eq!(attach.netns_field, "isolation.path");
    let r = &attach.request;
    assert_eq!(r.sandbox_id.as_str(), "sandbox-1");
    assert_eq!(
        (
            r.pod.name.as_str(),
            r.pod.namespace.as_str(),
            r.pod.uid.as_str()
        ),
        ("web", "prod", "uid-1")
    );
    assert_eq!(r.netns_path, Path::new("/run/netns/kni-uid-1"));
    // Unnamed entries take eth<position>, named ones keep their name; whitespace is trimmed.
    assert_eq!(
        ifnames_and_networks(&attach),
        [
            ("eth0".to_owned(), "default".to_owned()),
            ("net1".to_owned(), "storage".to_owned()),
            ("eth2".to_owned(), "fast".to_owned()),
        ]
    );
    assert_eq!(r.dns.servers, ["10.96.0.10".parse::<IpAddr>().expect("ip")]);
    assert_eq!(r.dns.searches, ["svc.cluster.local"]);
    assert_eq!(r.dns.options, ["ndots:5"]);
    let ports: Vec<_> = r
        .port_mappings
        .iter()
        .map(|m| {
            (
                m.protocol.as_str(),
                m.container_port,
                m.host_port,
                m.host_ip,
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("udp", 53, 5353, Some("127.0.0.1".parse().expect("ip"))),
            ("tcp", 80, 8080, None),
            ("sctp", 9, 9, None),
        ]
    );
    assert_eq!(r.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(r.annotations.get("note").map(String::as_str), Some("a=b;c"));
}

#[test]
fn attach_interface_without_networks_key_is_one_eth0_on_the_default_network() {
    let attach = attach_interface(&attach_req()).expect("valid");
    assert_eq!(
        ifnames_and_networks(&attach),
        [("eth0".to_owned(), "default".to_owned())]
    );
    assert_eq!(attach.request.pod.uid, "", "no uid in the request");
}

#[test]
fn netns_comes_from_isolation_path_then_extradata_netns() {
    let mut req = attach_req();
    req.extradata = map(&[("netns", "/run/netns/other")]);
    let attach = attach_interface(&req).expect("valid");
    assert_eq!(attach.request.netns_path, Path::new("/run/netns/kni-uid-1"));
    assert_eq!(attach.netns_field, "isolation.path");

    req.isolation = MessageField::none();
    let attach = attach_interface(&req).expect("valid");
    assert_eq!(attach.request.netns_path, Path::new("/run/netns/other"));
    assert_eq!(attach.netns_field, "extradata[netns]");

    req.extradata.clear();
    let (field, rule) = invalid(attach_interface(&req));
    assert_eq!(field, "isolation.path");
    assert!(rule.contains("extradata[netns]"), "{rule}");
}

#[test]
fn attach_interface_errors_name_the_kni_field() {
    type Edit = fn(&mut kni::AttachInterfaceRequest);
    let cases: &[(&str, Edit, &str)] = &[
        ("no id", |r| r.id.clear(), "id"),
        ("bad id", |r| r.id = "a/b".into(), "id"),
        ("control name", |r| r.name = "w\neb".into(), "name"),
        (
            "control namespace",
            |r| r.namespace = "p\u{7}".into(),
            "namespace",
        ),
        (
            "control uid",
            |r| r.extradata = map(&[("uid", "u\n1")]),
            "extradata[uid]",
        ),
        (
            "relative isolation.path",
            |r| r.isolation.mut_or_insert_default().path = "run/x".into(),
            "isolation.path",
        ),
        (
            "relative extradata netns",
            |r| {
                r.isolation.clear();
                r.extradata = map(&[("netns", "x/../y")]);
            },
            "extradata[netns]",
        ),
        (
            "bad dns server",
            |r| {
                r.dns_config.mut_or_insert_default().servers = vec!["dns.example".into()];
            },
            "dns_config.servers[0]",
        ),
        (
            "bad dns search",
            |r| r.dns_config.mut_or_insert_default().searches = vec!["a b".into()],
            "dns_config.searches[0]",
        ),
        (
            "host port 0",
            |r| {
                r.port_mappings = vec![kni::PortMapping {
                    container_port: 80,
                    ..Default::default()
                }]
            },
            "port_mappings[0].host_port",
        ),
        (
            "host port above 65535",
            |r| {
                r.port_mappings = vec![kni::PortMapping {
                    container_port: 80,
                    host_port: 70_000,
                    ..Default::default()
                }]
            },
            "port_mappings[0].host_port",
        ),
        (
            "negative container port",
            |r| {
                r.port_mappings = vec![kni::PortMapping {
                    container_port: -80,
                    host_port: 80,
                    ..Default::default()
                }]
            },
            "port_mappings[0].container_port",
        ),
        (
            "unknown protocol number",
            |r| {
                r.port_mappings = vec![kni::PortMapping {
                    protocol: EnumOrUnknown::from_i32(9),
                    container_port: 80,
                    host_port: 80,
                    ..Default::default()
                }]
            },
            "port_mappings[0].protocol",
        ),
        (
            "control character in a label key",
            |r| r.labels = map(&[("a\npp", "web")]),
            "labels[\"a\\npp\"]",
        ),
    ];
    for (what, edit, want) in cases {
        let mut req = attach_req();
        edit(&mut req);
        let (field, rule) = invalid(attach_interface(&req));
        assert_eq!(field, *want, "{what}: {rule}");
    }
}

#[test]
fn networks_key_errors_name_the_key_and_the_entry() {
    let cases = [
        ("bad name", "no such", "entry 0 (network): "),
        ("bad ifname", "default@a/b", "entry 0 (ifname): "),
        (
            "duplicate ifname",
            "default@net1,other@net1",
            "entry 1 (ifname): duplicates entry 0 (ifname)",
        ),
        (
            "empty entry",
            "default,,other",
            "entry 1 must name a network",
        ),
        ("no network", "@eth0", "entry 0 must name a network"),
        ("empty value", "", "entry 0 must name a network"),
        (
            "too many",
            "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t",
            "must have at most 16",
        ),
    ];
    for (what, value, want) in cases {
        let mut req = attach_req();
        req.extradata = map(&[("knid.io/networks", value)]);
        let (field, rule) = invalid(attach_interface(&req));
        assert_eq!(field, "extradata[knid.io/networks]", "{what}: {rule}");
        assert!(rule.starts_with(want), "{what}: {rule:?} lacks {want:?}");
    }
}

#[test]
fn core_attach_errors_are_renamed_to_kni_fields() {
    let unknown = Error::InvalidArgument {
        field: "interfaces[1].network".into(),
        rule: "unknown network \"x\"".into(),
    };
    assert_eq!(
        invalid::<()>(Err(kni_error(unknown, "isolation.path"))),
        (
            "extradata[knid.io/networks]".to_owned(),
            "entry 1 (network): unknown network \"x\"".to_owned()
        )
    );
    let prefix = Error::InvalidArgument {
        field: "netns_path".into(),
        rule: "must be under one of /run/netns/".into(),
    };
    assert_eq!(
        invalid::<()>(Err(kni_error(prefix, "extradata[netns]"))).0,
        "extradata[netns]"
    );
    let other = kni_error(Error::NotFound("x".into()), "isolation.path");
    assert!(
        matches!(other, Error::NotFound(ref id) if id == "x"),
        "{other:?}"
    );
}

fn create_req(uid: &str, namespace: &str, name: &str) -> kni::CreateNetworkRequest {
    kni::CreateNetworkRequest {
        uid: uid.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Default::default()
    }
}

#[test]
fn create_network_keys_the_netns_by_uid_or_namespace_and_name() {
    let dir = Path::new("/run/netns");
    let mut req = create_req("0f1e-2d3c", "prod", "web");
    req.labels = map(&[("app", "web")]);
    req.annotations = map(&[("a", "b")]);
    let r = create_network(&req, dir).expect("valid");
    assert_eq!(r.owner.as_str(), "kni-0f1e-2d3c");
    assert_eq!(
        r.name.as_deref(),
        Some("kni-0f1e-2d3c"),
        "file named after the owner"
    );
    let pod = r.pod.expect("pod recorded");
    assert_eq!(
        (pod.uid.as_str(), pod.namespace.as_str(), pod.name.as_str()),
        ("0f1e-2d3c", "prod", "web")
    );
    assert_eq!(r.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(r.annotations.get("a").map(String::as_str), Some("b"));

    let r = create_network(&create_req("", "prod", "web"), dir).expect("valid");
    assert_eq!(r.owner.as_str(), "kni-prod.web");
}

#[test]
fn create_network_prefix_must_be_empty_or_the_netns_dir() {
    let dir = Path::new("/run/netns");
    for ok in ["", "/run/netns", "/run/netns/"] {
        let mut req = create_req("u1", "", "");
        req.netns_path_prefix = ok.into();
        create_network(&req, dir).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
    }
    for bad in ["/var/run/netns", "run/netns", "/tmp"] {
        let mut req = create_req("u1", "", "");
        req.netns_path_prefix = bad.into();
        let (field, rule) = invalid(create_network(&req, dir));
        assert_eq!(field, "netns_path_prefix", "{bad:?}");
        assert!(rule.contains("/run/netns"), "{rule}");
    }
}

#[test]
fn create_network_errors_name_the_kni_field() {
    let dir = Path::new("/run/netns");
    let cases = [
        (create_req("", "", ""), "uid"),
        (create_req("", "prod", ""), "uid"),
        (create_req("a b", "", ""), "uid"),
        (create_req("", "prod", "we b"), "name"),
        (create_req("u1", "prod", "w\neb"), "name"),
        (create_req("u1", "p\u{1}", "web"), "namespace"),
    ];
    for (req, want) in cases {
        let (field, rule) = invalid(create_network(&req, dir));
        assert_eq!(field, want, "{req:?}: {rule}");
    }
}

fn delete_req(id: &str, namespace: &str, name: &str, path: &str) -> kni::DeleteNetworkRequest {
    kni::DeleteNetworkRequest {
        id: id.into(),
        namespace: namespace.into(),
        name: name.into(),
        netns_path: path.into(),
        ..Default::default()
    }
}

#[test]
fn delete_network_looks_up_by_every_field_given() {
    let (id, lookup) =
        delete_network(&delete_req("s1", "prod", "web", "/run/netns/x")).expect("valid");
    assert_eq!(id.as_ref().map(SandboxId::as_str), Some("s1"));
    assert_eq!(
        lookup,
        NetnsLookup {
            sandbox_id: Some("s1".into()),
            path: Some("/run/netns/x".into()),
            pod: Some(("prod".into(), "web".into())),
        }
    );
    let (id, lookup) = delete_network(&delete_req("", "prod", "web", "")).expect("valid");
    assert_eq!(id, None);
    assert_eq!(lookup.pod, Some(("prod".into(), "web".into())));
    let (_, lookup) = delete_network(&delete_req("", "", "", "/run/netns/x")).expect("valid");
    assert_eq!(lookup.path.as_deref(), Some(Path::new("/run/netns/x")));
}

#[test]
fn delete_network_needs_something_to_find_and_names_bad_fields() {
    let cases = [
        (delete_req("", "", "", ""), "id"),
        (delete_req("", "", "web", ""), "id"),
        (delete_req("", "prod", "", ""), "id"),
        (delete_req("a/b", "", "", ""), "id"),
        (delete_req("", "", "", "relative"), "netns_path"),
        (delete_req("", "prod", "w\neb", ""), "name"),
    ];
    for (req, want) in cases {
        let (field, rule) = invalid(delete_network(&req));
        assert_eq!(field, want, "{req:?}: {rule}");
    }
}

#[test]
fn sandbox_id_errors_name_id() {
    assert_eq!(invalid(sandbox_id("")).0, "id");
    assert_eq!(sandbox_id("pod-1").expect("valid").as_str(), "pod-1");
}
