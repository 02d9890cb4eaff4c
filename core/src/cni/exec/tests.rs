use super::*;
use std::os::unix::fs::PermissionsExt;

fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn runner(dir: &Path) -> Runner {
    Runner {
        path: vec![PathBuf::from("relative/ignored"), dir.to_path_buf()],
        timeout: Duration::from_secs(5),
    }
}

const INV: Invocation<'static> = Invocation {
    verb: Verb::Add,
    container_id: "c1",
    netns: "/run/netns/x",
    ifname: "eth0",
    args: "",
};

#[test]
fn plugins_get_the_cni_environment_and_config_and_their_output_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    // Echoes its environment and stdin, and writes to stderr.
    script(
        dir.path(),
        "echo",
        r#"read -r conf; echo "$CNI_COMMAND|$CNI_CONTAINERID|$CNI_NETNS|$CNI_IFNAME|${CNI_ARGS-unset}|$CNI_PATH|$conf"; echo noise >&2"#,
    );
    let out = runner(dir.path())
        .run("echo", &INV, &serde_json::json!({"a": 1}))
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    let want = format!(
        "ADD|c1|/run/netns/x|eth0|unset|relative/ignored:{}|{{\"a\":1}}\n",
        dir.path().display()
    );
    assert_eq!(text, want);
}

#[test]
fn failures_carry_the_plugins_error_object_or_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    script(
        dir.path(),
        "fails",
        r#"echo '{"cniVersion":"1.0.0","code":7,"msg":"bad bridge"}'; exit 1"#,
    );
    script(dir.path(), "crashes", "echo boom >&2; exit 3");
    script(dir.path(), "hangs", "sleep 30");
    let r = runner(dir.path());
    let e = r.run("fails", &INV, &serde_json::json!({})).unwrap_err();
    assert_eq!(
        (e.code, e.msg.as_str()),
        (7, "plugin fails ADD: bad bridge")
    );
    let e = r.run("crashes", &INV, &serde_json::json!({})).unwrap_err();
    assert_eq!(e.code, INTERNAL);
    assert!(
        e.msg.contains("exit status: 3") && e.details == "boom",
        "{e}"
    );
    let e = r.run("missing", &INV, &serde_json::json!({})).unwrap_err();
    assert!(e.msg.contains("\"missing\" not found"), "{e}");
    let quick = Runner {
        timeout: Duration::from_millis(200),
        ..r
    };
    let started = Instant::now();
    let e = quick
        .run("hangs", &INV, &serde_json::json!({}))
        .unwrap_err();
    assert_eq!(e.code, TRY_AGAIN, "{e}");
    assert!(started.elapsed() < Duration::from_secs(10));
}
