//! Debian's libcni (golang-github-appc-cni-dev), the library containerd's go-cni and CRI-O call
//! CNI plugins with, as the client the perf bench times knid-cni through: `benches/libcni/
//! main.go`, built with `go build` against the packaged sources (GOPATH mode, nothing
//! downloaded). Its times are libcni's own calls (`AddNetworkList`, `DelNetworkList`): the
//! plugin's exec as Go does it, and what libcni does around it (the configuration injected,
//! the result parsed and cached, the cached result read back for DEL).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use knid_netops::NetnsHandle;
use serde_json::{json, Value};

/// Where Debian's Go packages put their sources.
pub const GOPATH: &str = "/usr/share/gocode";

/// Builds the Go program `source` into `out` against Debian's packaged sources (GOPATH mode,
/// nothing downloaded), its build cache in `cache`; what went wrong when it did not build.
pub fn go_build(source: &Path, out: &Path, cache: &Path) -> Result<(), String> {
    let mut go = Command::new("go");
    go.arg("build")
        .arg("-o")
        .arg(out)
        .arg(source)
        .env("GOPATH", GOPATH)
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", cache);
    run_build(go, "go (apt-get install golang-go)", source)
}

/// Runs a compiler, `tool` naming it; its stderr when it fails.
fn run_build(mut command: Command, tool: &str, source: &Path) -> Result<(), String> {
    let out = command.output().map_err(|e| format!("run {tool}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{tool} on {} failed: {}",
            source.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The built client, with its scratch directory (plugin directories, conflists, libcni's result
/// cache), removed on drop.
pub struct Libcni {
    dir: tempfile::TempDir,
    client: PathBuf,
    runs: AtomicUsize,
}

impl Libcni {
    /// Builds the client; why not, when Go or libcni is not installed (`apt-get install
    /// golang-go golang-github-appc-cni-dev`) or the build fails.
    pub fn build() -> Result<Self, String> {
        let libcni = Path::new(GOPATH).join("src/github.com/containernetworking/cni/libcni");
        if !libcni.is_dir() {
            return Err(format!(
                "no libcni in {} (apt-get install golang-github-appc-cni-dev)",
                libcni.display()
            ));
        }
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let client = dir.path().join("libcni-cycles");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/libcni/main.go");
        go_build(&source, &client, &dir.path().join("go-cache"))?;
        Ok(Self {
            dir,
            client,
            runs: AtomicUsize::new(0),
        })
    }

    /// The no-op plugin (`benches/libcni/noop.c`), built static with musl's compiler
    /// (`x86_64-linux-musl-gcc`, from musl-tools) into the client's directory: one plugin call
    /// through libcni with no work in it, the floor of knid-cni's; why not, when it cannot be
    /// built.
    pub fn noop_plugin(&self) -> Result<PathBuf, String> {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/libcni/noop.c");
        let plugin = self.dir.path().join("noop");
        let mut cc = Command::new("x86_64-linux-musl-gcc");
        cc.args(["-static", "-O2", "-o"]).arg(&plugin).arg(&source);
        run_build(
            cc,
            "x86_64-linux-musl-gcc (apt-get install musl-tools)",
            &source,
        )?;
        Ok(plugin)
    }

    /// ADD then DEL of each `(container id, netns)` of `sandboxes` through libcni, from a thread
    /// in the netns `host`: `program` is the plugin (type `knid`), `conf` its configuration
    /// (`cniVersion`, `name` and its own keys, made the list's only plugin). Each cycle's two
    /// times, or what failed.
    pub fn cycles(
        &self,
        host: &NetnsHandle,
        program: &Path,
        conf: &Value,
        sandboxes: &[(String, PathBuf)],
    ) -> Vec<Result<(Duration, Duration), String>> {
        let run = self.runs.fetch_add(1, Ordering::Relaxed);
        let plugins = self.dir.path().join(format!("bin-{run}"));
        std::fs::create_dir(&plugins).expect("mkdir the plugin directory");
        std::os::unix::fs::symlink(program, plugins.join("knid")).expect("symlink the plugin");
        let mut plugin = conf.clone();
        let object = plugin
            .as_object_mut()
            .expect("a plugin configuration object");
        let (version, name) = (object.remove("cniVersion"), object.remove("name"));
        let conflist = self.dir.path().join(format!("knid-{run}.conflist"));
        let list = json!({"cniVersion": version, "name": name, "plugins": [plugin]});
        std::fs::write(&conflist, list.to_string()).expect("write the conflist");
        let cache = self.dir.path().join("cache");
        let stdin: String = sandboxes
            .iter()
            .map(|(id, netns)| format!("{id} {}\n", netns.display()))
            .collect();
        let out = knid_netops::run_in(host, || {
            let mut child = Command::new(&self.client)
                .arg(&conflist)
                .arg(&plugins)
                .arg(&cache)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn the libcni client");
            child
                .stdin
                .take()
                .expect("stdin piped")
                .write_all(stdin.as_bytes())
                .expect("write the libcni client's stdin");
            child
                .wait_with_output()
                .expect("wait for the libcni client")
        })
        .expect("run in the host netns");
        assert!(
            out.status.success(),
            "the libcni client failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<Result<(Duration, Duration), String>> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(parse_cycle)
            .collect();
        assert_eq!(
            lines.len(),
            sandboxes.len(),
            "the libcni client answered {} of {} cycles",
            lines.len(),
            sandboxes.len()
        );
        lines
    }
}

/// One line of the client's: `<ADD ns> <DEL ns>`, or `error <what>`.
fn parse_cycle(line: &str) -> Result<(Duration, Duration), String> {
    if let Some(what) = line.strip_prefix("error ") {
        return Err(format!("through libcni: {what}"));
    }
    let ns: Vec<u64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the libcni client's line {line:?}: {e}"))?;
    match ns[..] {
        [add, del] => Ok((Duration::from_nanos(add), Duration::from_nanos(del))),
        _ => Err(format!("the libcni client's line {line:?}: not two times")),
    }
}
