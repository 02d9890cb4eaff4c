//! knid runs with glibc's per-thread caches limited to small blocks and no cache of ended
//! threads' stacks (netops/src/malloc.rs). glibc reads those tunables only from the environment
//! at start, so knid execs itself once to set them: the same pid, name and arguments, the
//! operator's other tunables kept, and an operator's own choice of either left as it is. Read from the kernel (`/proc/<pid>`), not from
//! knid: `environ` is the environment the running image was exec'd with.

use testkit::TestNode;

/// What knid adds to `GLIBC_TUNABLES`.
const KNIDS: &str = "glibc.malloc.tcache_max=128:glibc.pthread.stack_cache_size=0";
/// What knid sets across its exec, and removes from its environment after it.
const MARK: &str = "KNID_MALLOC_RETUNED=1";

/// The environment knid's running image was exec'd with.
fn environ(node: &TestNode) -> Vec<String> {
    let path = format!("/proc/{}/environ", node.pid());
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    raw.split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// `GLIBC_TUNABLES` as the image was exec'd with it. glibc, parsing it at start, ends each
/// tunable's value with a NUL in that original copy (the process's `environ` points to an
/// intact one), so the tunables after the first read as entries of their own.
fn tunables(env: &[String]) -> Option<String> {
    let at = env.iter().position(|v| v.starts_with("GLIBC_TUNABLES="))?;
    let mut value = env[at]["GLIBC_TUNABLES=".len()..].to_owned();
    for more in env[at + 1..].iter().take_while(|v| v.starts_with("glibc.")) {
        value.push(':');
        value.push_str(more);
    }
    Some(value)
}

fn proc_text(node: &TestNode, file: &str) -> String {
    let path = format!("/proc/{}/{file}", node.pid());
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

#[test]
fn knid_execs_itself_once_to_limit_its_thread_caches_keeping_pid_name_and_arguments() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let env = environ(&node);
    assert_eq!(
        tunables(&env).as_deref(),
        Some(KNIDS),
        "environment: {env:?}"
    );
    assert!(env.iter().any(|v| v == MARK), "not exec'd by knid: {env:?}");
    // The kernel names a process after the file it execs: knid's own path, not /proc/self/exe.
    assert_eq!(proc_text(&node, "comm").trim_end(), "knid");
    let cmdline = proc_text(&node, "cmdline");
    let socket = node.socket().display().to_string();
    assert!(
        cmdline.split('\0').any(|a| a == socket),
        "arguments lost across the exec: {cmdline:?}"
    );
    // The pid TestNode spawned is the one serving: the exec kept it.
    assert!(node.list_ids().is_empty());
}

#[test]
fn an_operators_other_tunables_are_kept_and_their_own_thread_cache_choice_wins() {
    if !testkit::privileged() {
        return;
    }
    let other = "glibc.malloc.trim_threshold=262144";
    let node = TestNode::start_with("", &[("GLIBC_TUNABLES", other)], &[]);
    let env = environ(&node);
    assert_eq!(
        tunables(&env),
        Some(format!("{other}:{KNIDS}")),
        "environment: {env:?}"
    );
    drop(node);

    let own = "glibc.malloc.tcache_count=3";
    let node = TestNode::start_with("", &[("GLIBC_TUNABLES", own)], &[]);
    let env = environ(&node);
    assert_eq!(
        tunables(&env),
        Some(format!("{own}:glibc.pthread.stack_cache_size=0")),
        "the operator's thread caches, knid's stack cache: {env:?}"
    );
    drop(node);

    let own = "glibc.malloc.tcache_count=3:glibc.pthread.stack_cache_size=1048576";
    let node = TestNode::start_with("", &[("GLIBC_TUNABLES", own)], &[]);
    let env = environ(&node);
    assert_eq!(tunables(&env).as_deref(), Some(own), "environment: {env:?}");
    assert!(
        !env.iter().any(|v| v == MARK),
        "knid exec'd itself although the operator chose both: {env:?}"
    );
    assert!(node.list_ids().is_empty());
}
