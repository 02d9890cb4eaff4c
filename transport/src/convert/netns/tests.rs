use super::*;

#[test]
fn create_netns_request_checks_id_and_name_naming_the_field() {
    let mut req = pb::CreateNetnsRequest::new();
    req.sandbox_id = "pod-1".into();
    let ok = create_netns_request(&req).expect("valid");
    assert_eq!((ok.owner.as_str(), ok.name), ("pod-1", None));
    req.name = "pod-1-net".into();
    assert_eq!(
        create_netns_request(&req).expect("valid").name.as_deref(),
        Some("pod-1-net")
    );
    for (id, name, field) in [
        ("", "", "sandbox_id"),
        ("a/b", "", "sandbox_id"),
        ("pod", "../x", "name"),
        ("pod", ".hidden", "name"),
        ("pod", &"n".repeat(65), "name"),
    ] {
        req.sandbox_id = id.into();
        req.name = name.into();
        match create_netns_request(&req) {
            Err(Error::InvalidArgument { field: f, .. }) => {
                assert_eq!(f, field, "{id:?} {name:?}")
            }
            other => panic!("{id:?} {name:?}: {other:?}"),
        }
    }
}

#[test]
fn create_netns_response_carries_path_inode_and_created() {
    let info = NetnsInfo {
        owner: "pod-1".into(),
        path: "/run/netns/knid-pod-1".into(),
        inode: 4026532001,
        created: true,
        sandbox_id: "pod-1".into(),
        pod: None,
    };
    let out = create_netns_response(&info);
    assert_eq!(out.netns_path, "/run/netns/knid-pod-1");
    assert_eq!((out.inode, out.created), (4026532001, true));
}
