use super::*;
use knid_core::cni::error::{INCOMPATIBLE_VERSION, INVALID_CONFIG, INVALID_ENV, TRY_AGAIN};
use std::collections::HashMap;

/// A process environment made of `pairs`.
pub(super) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

fn parsed(out: &Outcome) -> Value {
    serde_json::from_str(&out.stdout).expect("stdout is JSON")
}

#[test]
fn version_answers_with_or_without_stdin() {
    let env = env_of(&[("CNI_COMMAND", "VERSION")]);
    for (stdin, want) in [
        (&b""[..], "1.1.0"),
        (b"{}", "1.1.0"),
        (br#"{"cniVersion":"0.4.0"}"#, "0.4.0"),
        (br#"{"cniVersion":"9.9.9"}"#, "1.1.0"),
    ] {
        let out = run(&env, stdin);
        assert_eq!(out.exit_code, 0);
        let v = parsed(&out);
        assert_eq!(v["cniVersion"], want);
        let list = v["supportedVersions"].as_array().expect("list");
        for version in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
            assert!(list.contains(&Value::from(version)), "{version} in {v}");
        }
    }
}

#[test]
fn errors_carry_the_requested_version_and_their_code() {
    let add = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_NETNS", "/run/netns/c1"),
    ];
    let conf = |version: &str| {
        format!(
            r#"{{"cniVersion":"{version}","name":"pods","type":"knid","socket":"/nonexistent/knid.sock"}}"#
        )
    };
    // (environment, stdin, code, cniVersion of the error, what the message names)
    type Case<'a> = (Vec<(&'a str, &'a str)>, String, u32, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (add.to_vec(), "{not json".into(), DECODE, "1.1.0", "JSON"),
        (
            add.to_vec(),
            conf("0.2.0"),
            INCOMPATIBLE_VERSION,
            "0.2.0",
            "0.2.0",
        ),
        (
            add[..3].to_vec(),
            conf("1.0.0"),
            INVALID_ENV,
            "1.0.0",
            "CNI_NETNS",
        ),
        (
            add.to_vec(),
            conf("1.0.0").replace("\"knid\"", "\"bridge\""),
            INVALID_CONFIG,
            "1.0.0",
            "type",
        ),
        (
            add.to_vec(),
            conf("0.4.0"),
            TRY_AGAIN,
            "0.4.0",
            "/nonexistent/knid.sock",
        ),
        (
            [("CNI_COMMAND", "CHECK")]
                .iter()
                .chain(&add[1..])
                .copied()
                .collect(),
            conf("0.3.1"),
            INCOMPATIBLE_VERSION,
            "0.3.1",
            "CHECK",
        ),
        (
            vec![("CNI_COMMAND", "STATUS")],
            conf("1.0.0"),
            INCOMPATIBLE_VERSION,
            "1.0.0",
            "STATUS",
        ),
        (
            vec![("CNI_COMMAND", "STATUS")],
            conf("1.1.0"),
            knid_core::cni::error::NOT_AVAILABLE,
            "1.1.0",
            "/nonexistent/knid.sock",
        ),
    ];
    for (env, stdin, code, version, named) in cases {
        let out = run(&env_of(&env), stdin.as_bytes());
        let v = parsed(&out);
        assert_eq!(v["code"], code, "{stdin}: {v}");
        assert_eq!(v["cniVersion"], version, "{stdin}: {v}");
        assert!(
            v["msg"].as_str().unwrap_or_default().contains(named),
            "{named}: {v}"
        );
        assert_eq!(out.exit_code, i32::try_from(code).expect("small"));
    }
}

#[test]
fn del_with_knid_unreachable_is_an_error_not_success() {
    let env = env_of(&[
        ("CNI_COMMAND", "DEL"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_IFNAME", "eth0"),
    ]);
    let out = run(
        &env,
        br#"{"cniVersion":"1.0.0","name":"pods","type":"knid","socket":"/nonexistent/knid.sock"}"#,
    );
    assert_eq!(out.exit_code, 11);
    assert_eq!(parsed(&out)["code"], TRY_AGAIN);
}
