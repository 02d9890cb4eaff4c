use super::*;

fn link(alias: Option<&str>) -> Link {
    Link {
        index: 7,
        name: "kn0123456789".into(),
        kind: Some("veth".into()),
        mtu: 1500,
        up: true,
        alias: alias.map(str::to_owned),
        ..Link::default()
    }
}

#[test]
fn only_this_stores_mark_is_ours() {
    let mark = of_store("00112233445566778899aabbccddeeff");
    assert_eq!(mark, "knid:00112233445566778899aabbccddeeff");
    assert_eq!(Owner::of(&link(Some(&mark)), &mark), Owner::Us);
    assert_eq!(Owner::of(&link(Some(&attaching(&mark))), &mark), Owner::Us);
    assert_eq!(Owner::of(&link(None), &mark), Owner::Unmarked);
    let other = of_store("ffeeddccbbaa99887766554433221100");
    assert_eq!(
        Owner::of(&link(Some(&other)), &mark),
        Owner::Other(other.clone())
    );
    assert_eq!(
        Owner::of(&link(Some("uplink to rack 3")), &mark),
        Owner::Other("uplink to rack 3".into())
    );
}

#[test]
fn an_attach_replaces_its_own_or_an_unmarked_leftover_never_another_marks() {
    assert!(Owner::Us.may_replace());
    assert!(Owner::Unmarked.may_replace());
    assert!(!Owner::Other("knid:ff".into()).may_replace());
    assert_eq!(
        Owner::Other("knid:ff".into()).describe(),
        "marked \"knid:ff\""
    );
}

#[test]
fn only_the_plain_mark_says_the_attach_completed() {
    let mark = of_store("00112233445566778899aabbccddeeff");
    assert_eq!(
        attaching(&mark),
        "knid:00112233445566778899aabbccddeeff:attaching"
    );
    assert!(is_complete(&link(Some(&mark)), &mark));
    assert!(!is_complete(&link(Some(&attaching(&mark))), &mark));
    assert!(!is_complete(&link(None), &mark));
    let other = of_store("ffeeddccbbaa99887766554433221100");
    assert!(!is_complete(&link(Some(&other)), &mark));
    assert_eq!(
        Owner::of(&link(Some(&attaching(&other))), &mark),
        Owner::Other(attaching(&other))
    );
}

#[test]
fn a_link_in_this_stores_attaching_group_is_ours_without_an_alias() {
    let mark = of_store("00112233445566778899aabbccddeeff");
    let other = of_store("ffeeddccbbaa99887766554433221100");
    let group = attaching_group(&mark);
    assert_ne!(group, attaching_group(&other));
    assert_ne!(group, 0);
    assert_ne!(group, crate::config::DEFAULT_REAPER_GROUP);
    let mut attaching = link(None);
    attaching.group = group;
    assert_eq!(Owner::of(&attaching, &mark), Owner::Us);
    assert_eq!(Owner::of(&attaching, &other), Owner::Unmarked);
    assert!(!is_complete(&attaching, &mark));
}
