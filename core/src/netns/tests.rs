use super::*;

#[test]
fn a_netns_file_name_gives_its_owner_candidates() {
    assert_eq!(
        owner_candidates(Path::new("/run/netns/knid-pod-1")),
        ["knid-pod-1", "pod-1"]
    );
    assert_eq!(
        owner_candidates(Path::new("/run/netns/kni-0d5c-uid")),
        ["kni-0d5c-uid"]
    );
    assert!(owner_candidates(Path::new("/")).is_empty());
}
