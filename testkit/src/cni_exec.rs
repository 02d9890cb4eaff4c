//! CNI plugins run by exec the way libcni runs them, for the benches that compare knid-cni and
//! the reference `bridge` plugin (benches/cni.rs, benches/perf.rs): the environment, the config
//! on stdin, DEL carrying the ADD's result as `prevResult`.
//!
//! Unlike [`crate::cni`] (the tests' libcni, which enters the netns itself and checks results),
//! this runs a plugin as is and times it. Every call must come from a thread inside the node's
//! private host netns (`knid_netops::run_in`), so each plugin starts there.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::bins::knid_cni;
use crate::cni::{cni_env, knid_conf};

/// Where the reference plugins are looked for: upstream's place, then Debian's.
const PLUGIN_DIRS: [&str; 2] = ["/opt/cni/bin", "/usr/lib/cni"];

/// One plugin under test.
pub struct Subject {
    /// Its name in the bench's tables.
    pub label: &'static str,
    /// The plugin binary.
    pub program: PathBuf,
    /// The network configuration it gets on stdin.
    pub conf: Value,
    /// Prefix of its sandbox ids and netns names.
    pub slug: &'static str,
    /// What it sets up, for the report.
    pub setup: &'static str,
}

/// The first of `PLUGIN_DIRS` holding both `bridge` and `host-local`, if any.
pub fn reference_plugins() -> Option<PathBuf> {
    PLUGIN_DIRS.iter().map(PathBuf::from).find(|dir| {
        ["bridge", "host-local"]
            .iter()
            .all(|p| dir.join(p).is_file())
    })
}

/// knid-cni against knid's `network` on `socket`, cniVersion 1.0.0.
pub fn knid_subject(network: &str, socket: &Path, slug: &'static str) -> Subject {
    Subject {
        label: "knid-cni",
        program: knid_cni(),
        conf: knid_conf("1.0.0", network, socket),
        slug,
        setup: "knid: veth on bridge, /16 + /64",
    }
}

/// The reference plugin `plugin` (Debian's /usr/lib/cni) chained after knid-cni on `network`,
/// with the capability `capability` set to `arg`; `None`, saying so on stdout, when it is not
/// installed.
pub fn chained_reference(
    plugin: &'static str,
    label: &'static str,
    network: &str,
    capability: &str,
    arg: Value,
) -> Option<Subject> {
    let program = Path::new("/usr/lib/cni").join(plugin);
    if !program.is_file() {
        println!(
            "{label}: skipped, no {} (Debian: containernetworking-plugins)",
            program.display()
        );
        return None;
    }
    Some(Subject {
        label,
        program,
        conf: json!({"cniVersion": "1.0.0", "name": network, "type": plugin,
                     "runtimeConfig": { capability: arg }}),
        slug: plugin,
        setup: "a reference plugin after knid-cni",
    })
}

/// The reference `bridge` plugin in `plugins` on `bridge` (a gateway), `host-local` handing out
/// one address per subnet of `subnets`, its leases in `data_dir` (never the machine's
/// /var/lib/cni); cniVersion 1.0.0, the reference plugins' newest.
pub fn bridge_conf(name: &str, bridge: &str, subnets: &[&str], data_dir: &Path) -> Value {
    let ranges: Vec<Value> = subnets.iter().map(|s| json!([{ "subnet": s }])).collect();
    json!({
        "cniVersion": "1.0.0",
        "name": name,
        "type": "bridge",
        "bridge": bridge,
        "isGateway": true,
        "ipam": {
            "type": "host-local",
            "ranges": ranges,
            "dataDir": data_dir,
        },
    })
}

/// One ADD (`id`, `netns`, `eth0`) then its DEL with the ADD's result as `prevResult`; each
/// time is one plugin process from spawn to exit. A failed ADD is still followed by its DEL
/// (without `prevResult`), as a runtime does, and returned as the error.
pub fn add_del(subject: &Subject, id: &str, netns: &Path) -> Result<(Duration, Duration), String> {
    let stdin = subject.conf.to_string();
    let started = Instant::now();
    let result = try_exec(subject, &cni_env("ADD", id, Some(netns), "eth0"), &stdin);
    let add = started.elapsed();
    let mut conf = subject.conf.clone();
    let result = result.and_then(|out| {
        conf["prevResult"] = serde_json::from_str(&out).map_err(|e| {
            format!(
                "{} ADD of {id}: result is not JSON ({e}): {out}",
                subject.label
            )
        })?;
        Ok(())
    });
    let del_stdin = conf.to_string();
    let started = Instant::now();
    let deleted = try_exec(
        subject,
        &cni_env("DEL", id, Some(netns), "eth0"),
        &del_stdin,
    );
    let del = started.elapsed();
    result.and(deleted).map(|_| (add, del))
}

/// One ADD of `knid` with `knid_conf`, then of `chained` (a plugin a runtime runs next, given
/// knid's result as `prevResult`), timed together from the first spawn to the last exit; then
/// their DELs in reverse order, not timed. Panics on a failed call: the benches that compare a
/// native feature with a chained plugin measure working set-ups only.
pub fn add_chained_then_del(
    knid: &Subject,
    knid_conf: &Value,
    chained: Option<&Subject>,
    id: &str,
    netns: &Path,
) -> Duration {
    let add = cni_env("ADD", id, Some(netns), "eth0");
    let del = cni_env("DEL", id, Some(netns), "eth0");
    let started = Instant::now();
    let result = exec(knid, &add, &knid_conf.to_string());
    let prev: Value = serde_json::from_str(&result).expect("knid-cni result");
    let plugin = chained.map(|plugin| {
        let mut conf = plugin.conf.clone();
        conf["prevResult"] = prev.clone();
        let out = try_exec(plugin, &add, &conf.to_string()).unwrap_or_else(|e| panic!("{e}"));
        (plugin, conf, out)
    });
    let took = started.elapsed();
    if let Some((plugin, mut conf, out)) = plugin {
        conf["prevResult"] = serde_json::from_str(&out).expect("the chained plugin's result");
        exec(plugin, &del, &conf.to_string());
    }
    let mut conf = knid_conf.clone();
    conf["prevResult"] = prev;
    exec(knid, &del, &conf.to_string());
    took
}

/// The plugin's command: exactly the CNI environment `env`, `CNI_PATH` the plugin's own
/// directory (where libcni found it), stdin and stderr piped.
pub fn command(subject: &Subject, env: &[(String, String)]) -> Command {
    let mut cmd = Command::new(&subject.program);
    cmd.env_clear()
        .env(
            "CNI_PATH",
            subject.program.parent().unwrap_or(Path::new("/")),
        )
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// One plugin execution; panics with its output unless it succeeds. Returns stdout.
pub fn exec(subject: &Subject, env: &[(String, String)], stdin: &str) -> String {
    try_exec(subject, env, stdin).unwrap_or_else(|e| panic!("{e}"))
}

/// One plugin execution: its stdout, or what it said when it failed.
pub fn try_exec(
    subject: &Subject,
    env: &[(String, String)],
    stdin: &str,
) -> Result<String, String> {
    let mut child = command(subject, env)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn plugin");
    feed(&mut child, stdin);
    let out = child.wait_with_output().expect("wait for plugin");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{} failed ({}): {stdout} {}",
            subject.label,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Writes `stdin` to the child's piped stdin and closes it.
pub fn feed(child: &mut Child, stdin: &str) {
    child
        .stdin
        .take()
        .expect("stdin piped")
        .write_all(stdin.as_bytes())
        .expect("write plugin stdin");
}
