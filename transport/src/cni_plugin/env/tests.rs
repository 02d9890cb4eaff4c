use super::*;
use crate::cni_plugin::tests::env_of;

const GOOD: [(&str, &str); 4] = [
    ("CNI_CONTAINERID", "abc-1"),
    ("CNI_IFNAME", "eth0"),
    ("CNI_NETNS", "/run/netns/p"),
    (
        "CNI_ARGS",
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_UID=u-1;X=y",
    ),
];

#[test]
fn pod_args_come_from_cni_args_and_unknown_keys_are_ignored() {
    let a = Attachment::from_env(&env_of(&GOOD), true).expect("valid");
    assert_eq!(a.container_id, "abc-1");
    assert_eq!(a.netns.as_deref(), Some("/run/netns/p"));
    assert_eq!(
        a.pod,
        PodArgs {
            name: "web".into(),
            namespace: "ns".into(),
            uid: "u-1".into()
        }
    );
}

#[test]
fn every_bad_variable_is_named_with_code_4() {
    let cases: [(&str, Option<&str>); 9] = [
        ("CNI_CONTAINERID", None),
        ("CNI_CONTAINERID", Some("-starts-with-dash")),
        ("CNI_CONTAINERID", Some("has/slash")),
        ("CNI_IFNAME", None),
        ("CNI_IFNAME", Some("sixteen-bytes-xx")),
        ("CNI_IFNAME", Some("eth:0")),
        ("CNI_NETNS", None),
        ("CNI_NETNS", Some("run/netns/p")),
        ("CNI_ARGS", Some("K8S_POD_NAME")),
    ];
    for (var, value) in cases {
        let mut pairs: Vec<(&str, &str)> =
            GOOD.iter().copied().filter(|(k, _)| *k != var).collect();
        if let Some(v) = value {
            pairs.push((var, v));
        }
        let err = Attachment::from_env(&env_of(&pairs), true).expect_err(var);
        assert_eq!(err.code, INVALID_ENV, "{var}={value:?}");
        assert!(err.msg.contains(var), "{var}: {}", err.msg);
    }
    let del = Attachment::from_env(&env_of(&GOOD[..2]), false).expect("DEL needs no netns");
    assert_eq!(del.netns, None);
}

#[test]
fn commands_parse_and_unknown_ones_are_named() {
    assert_eq!(
        Command::from_env(&env_of(&[("CNI_COMMAND", "GC")])).ok(),
        Some(Command::Gc)
    );
    for pairs in [&[][..], &[("CNI_COMMAND", "ATTACH")][..]] {
        let err = Command::from_env(&env_of(pairs)).expect_err("bad command");
        assert_eq!(err.code, INVALID_ENV);
        assert!(err.msg.contains("CNI_COMMAND"), "{}", err.msg);
    }
}
