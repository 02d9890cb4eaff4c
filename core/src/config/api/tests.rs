use super::*;

fn config(extra: &str) -> Result<Config> {
    Config::from_toml(extra)
}

#[test]
fn defaults_let_in_root_only() {
    let api = config("").expect("empty config").api().expect("api");
    assert_eq!(api, ApiSettings::default());
    assert!(api.allows(0, 0));
    assert!(!api.allows(1000, 1000));
}

#[test]
fn an_allowed_gid_lets_in_any_uid_of_that_group() {
    let api = config("allowed_gids = [2000]")
        .expect("parse")
        .api()
        .expect("api");
    assert!(api.allows(1000, 2000));
    assert!(api.allows(0, 0));
    assert!(!api.allows(1000, 1000));
}

#[test]
fn bad_settings_name_their_key() {
    for (text, key) in [
        ("allowed_uids = []", "allowed_uids"),
        ("max_connections = 0", "max_connections"),
        ("max_request_bytes = 100", "max_request_bytes"),
        ("max_request_bytes = 5000000", "max_request_bytes"),
        ("request_timeout = \"0s\"", "request_timeout"),
        ("request_timeout = \"soon\"", "request_timeout"),
    ] {
        let err = config(text).expect_err(text).to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
}
