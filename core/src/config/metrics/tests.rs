use super::*;

fn with(addr: &str) -> Config {
    let mut config = Config::embedded_default().expect("default");
    config.metrics_addr = Some(addr.to_owned());
    config
}

#[test]
fn unset_means_no_listener() {
    let config = Config::embedded_default().expect("default");
    assert_eq!(config.metrics_addr().expect("valid"), None);
}

#[test]
fn a_bare_port_means_loopback() {
    let want: SocketAddr = "127.0.0.1:9584".parse().expect("addr");
    for text in ["9584", ":9584"] {
        assert_eq!(with(text).metrics_addr().expect(text), Some(want));
    }
    let v6: SocketAddr = "[::1]:9000".parse().expect("addr");
    assert_eq!(with("[::1]:9000").metrics_addr().expect("v6"), Some(v6));
}

#[test]
fn bad_addresses_name_the_key() {
    for text in [
        "",
        "localhost:9584",
        "1.2.3.4",
        "127.0.0.1:0",
        "0",
        ":70000",
    ] {
        let err = with(text).metrics_addr().expect_err(text).to_string();
        assert!(err.contains("metrics_addr"), "{text}: {err}");
    }
}

#[test]
fn a_bad_address_fails_the_whole_config() {
    let err = Config::from_toml("metrics_addr = \"nowhere\"\n")
        .expect_err("refused")
        .to_string();
    assert!(err.contains("metrics_addr"), "{err}");
}
