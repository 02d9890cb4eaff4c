use std::collections::HashMap;

use super::request::extradata;
use super::*;

/// Every method unimplemented: enough to build the generated method map.
struct Unimplemented;

impl kni_ttrpc::Kni for Unimplemented {}

#[test]
fn methods_are_served_under_the_wire_service_name_kni_dot_kni_upper_case() {
    let mut paths: Vec<String> = wire_paths(kni_ttrpc::create_kni(Arc::new(Unimplemented)))
        .into_keys()
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "/kni.KNI/AttachInterface",
            "/kni.KNI/CreateNetwork",
            "/kni.KNI/DeleteNetwork",
            "/kni.KNI/DetachInterface",
            "/kni.KNI/QueryNodeNetworks",
            "/kni.KNI/QueryPodNetwork",
            "/kni.KNI/SetupNodeNetwork",
        ]
    );
}

#[test]
fn empty_extradata_values_count_as_absent() {
    let map: HashMap<String, String> = [
        ("netns".to_owned(), String::new()),
        ("uid".to_owned(), "u-1".to_owned()),
    ]
    .into();
    assert_eq!(extradata(&map, NETNS_KEY), None);
    assert_eq!(extradata(&map, UID_KEY), Some("u-1"));
    assert_eq!(extradata(&map, NETWORKS_KEY), None);
}
