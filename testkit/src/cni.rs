//! Test-side CNI: running plugin binaries the way libcni does (environment, stdin with `name`
//! and `cniVersion` injected, `runtimeConfig` from capabilities, `prevResult` chaining, DEL in
//! reverse) inside a private netns, and a result checker written from the CNI spec's text on the
//! ADD result, independent of knid's own CNI types.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;

use ipnet::IpNet;
use knid_netops::NetnsHandle;
use serde_json::{json, Map, Value};

use crate::bins::knid_cni;
use crate::kernel::{kernel_addresses, link_in};
use crate::node::TestNode;

/// Where Debian installs the reference plugins.
pub const CNI_PATH: &str = "/usr/lib/cni";
/// PATH for plugins that shell out (portmap runs iptables).
const PLUGIN_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// A reference plugin binary.
pub fn plugin(name: &str) -> PathBuf {
    Path::new(CNI_PATH).join(name)
}

/// What one plugin execution produced.
#[derive(Debug, Clone)]
pub struct Exec {
    /// Exit status (-1 when killed by a signal).
    pub code: i32,
    /// Stdout.
    pub stdout: String,
    /// Stderr.
    pub stderr: String,
}

impl Exec {
    /// Stdout as JSON; panics naming the output when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// Asserts success and returns stdout as JSON (`null` when empty).
    pub fn ok(&self, what: &str) -> Value {
        assert_eq!(self.code, 0, "{what} failed: {self:?}");
        if self.stdout.trim().is_empty() {
            Value::Null
        } else {
            self.json()
        }
    }

    /// Asserts failure with the CNI error `code` whose message contains `named`; returns
    /// the error object.
    pub fn err(&self, code: u64, named: &str, what: &str) -> Value {
        assert_ne!(self.code, 0, "{what}: succeeded: {self:?}");
        let v = self.json();
        assert_eq!(v["code"].as_u64(), Some(code), "{what}: {v}");
        let msg = v["msg"].as_str().unwrap_or_default();
        assert!(
            msg.contains(named),
            "{what}: message does not name {named:?}: {v}"
        );
        v
    }
}

/// The CNI environment of one call (`CNI_PATH` and `PATH` are added by [`exec_in`]).
pub fn cni_env(
    command: &str,
    container_id: &str,
    netns: Option<&Path>,
    ifname: &str,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("CNI_COMMAND".to_owned(), command.to_owned()),
        ("CNI_CONTAINERID".to_owned(), container_id.to_owned()),
        ("CNI_IFNAME".to_owned(), ifname.to_owned()),
        (
            "CNI_ARGS".to_owned(),
            format!("IgnoreUnknown=1;K8S_POD_NAMESPACE=test;K8S_POD_NAME={container_id};K8S_POD_UID=uid-{container_id}"),
        ),
    ];
    if let Some(netns) = netns {
        env.push(("CNI_NETNS".to_owned(), netns.display().to_string()));
    }
    env
}

/// Runs `program` with exactly `env` (plus `CNI_PATH` and `PATH`) and `stdin`, from a thread
/// inside the netns at `host`: the child starts there, so every kernel object it touches on
/// "the host" is the test's private one.
pub fn exec_in(host: &Path, program: &Path, env: &[(String, String)], stdin: &[u8]) -> Exec {
    let ns = NetnsHandle::open(host).expect("open the private host netns");
    let program = program.to_owned();
    let env = env.to_vec();
    let stdin = stdin.to_vec();
    knid_netops::run_in(&ns, move || {
        let mut child = Command::new(&program)
            .env_clear()
            .env("CNI_PATH", CNI_PATH)
            .env("PATH", PLUGIN_PATH)
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
        child
            .stdin
            .take()
            .expect("stdin piped")
            .write_all(&stdin)
            .expect("write plugin stdin");
        let out = child.wait_with_output().expect("wait for plugin");
        Exec {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .expect("run in the private host netns")
}

/// Runs a tool (`iptables`, `tc`, …) with `args` inside the netns at `host`; its stdout, after
/// asserting success.
pub fn tool_in(host: &Path, program: &str, args: &[&str]) -> String {
    let ns = NetnsHandle::open(host).expect("open netns");
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let out = knid_netops::run_in(&ns, move || Command::new(program).args(&args).output())
        .expect("run in netns")
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network configuration list and the capability arguments of one attachment.
pub struct NetList {
    /// The conflist (`cniVersion`, `name`, `plugins`).
    pub list: Value,
    /// Capability arguments (`portMappings`, …) for plugins that declare them.
    pub capability_args: Map<String, Value>,
}

impl NetList {
    /// What libcni's buildOneConfig gives plugin `i`: its keys, `name` and `cniVersion` of the
    /// list, `runtimeConfig` from its `capabilities` (removed), `prevResult` when given.
    pub fn plugin_config(&self, i: usize, prev: Option<&Value>) -> Value {
        let mut conf = self.list["plugins"][i]
            .as_object()
            .expect("plugin object")
            .clone();
        conf.insert("name".into(), self.list["name"].clone());
        conf.insert("cniVersion".into(), self.list["cniVersion"].clone());
        let mut runtime = Map::new();
        if let Some(Value::Object(caps)) = conf.remove("capabilities") {
            for (cap, on) in caps {
                if on == Value::Bool(true) {
                    if let Some(arg) = self.capability_args.get(&cap) {
                        runtime.insert(cap, arg.clone());
                    }
                }
            }
        }
        if !runtime.is_empty() {
            conf.insert("runtimeConfig".into(), Value::Object(runtime));
        }
        if let Some(prev) = prev {
            conf.insert("prevResult".into(), prev.clone());
        }
        Value::Object(conf)
    }

    fn plugin_path(&self, i: usize) -> PathBuf {
        match self.list["plugins"][i]["type"].as_str().expect("type") {
            "knid" => knid_cni(),
            other => plugin(other),
        }
    }

    fn len(&self) -> usize {
        self.list["plugins"].as_array().expect("plugins").len()
    }

    /// ADD through every plugin in order, each getting the previous result; returns the final
    /// result, or the failing plugin's type and execution.
    pub fn add(&self, host: &Path, env: &[(String, String)]) -> Result<Value, (String, Exec)> {
        let mut prev: Option<Value> = None;
        for i in 0..self.len() {
            let conf = self.plugin_config(i, prev.as_ref());
            let out = exec_in(host, &self.plugin_path(i), env, conf.to_string().as_bytes());
            if out.code != 0 {
                return Err((self.list["plugins"][i]["type"].to_string(), out));
            }
            prev = Some(out.json());
        }
        Ok(prev.unwrap_or(Value::Null))
    }

    /// CHECK through every plugin in order, each getting the cached final result as
    /// `prevResult`, as libcni's CheckNetworkList does; stops at the first failure.
    pub fn check(
        &self,
        host: &Path,
        env: &[(String, String)],
        result: &Value,
    ) -> Result<(), (String, Exec)> {
        for i in 0..self.len() {
            let conf = self.plugin_config(i, Some(result));
            let out = exec_in(host, &self.plugin_path(i), env, conf.to_string().as_bytes());
            if out.code != 0 {
                return Err((self.list["plugins"][i]["type"].to_string(), out));
            }
        }
        Ok(())
    }

    /// DEL through every plugin in reverse, each getting the cached final result; stops at the
    /// first failure, as libcni does.
    pub fn del(
        &self,
        host: &Path,
        env: &[(String, String)],
        result: &Value,
    ) -> Result<(), (String, Exec)> {
        for i in (0..self.len()).rev() {
            let conf = self.plugin_config(i, Some(result));
            let out = exec_in(host, &self.plugin_path(i), env, conf.to_string().as_bytes());
            if out.code != 0 {
                return Err((self.list["plugins"][i]["type"].to_string(), out));
            }
        }
        Ok(())
    }
}

/// Checks an ADD result against the spec for `version` (SPEC.md "Success"): the echoed
/// `cniVersion`; `interfaces` entries with `name` and optional `mac`/`sandbox`, `mtu`,
/// `socketPath`, `pciID` only from 1.1.0; `ips` entries with a CIDR `address`, an optional
/// `gateway` of the same family, an `interface` index in range, and `version` ("4"/"6",
/// matching the address) required before 1.0.0 and absent from it; `routes` with a CIDR `dst`,
/// an optional IP `gw`, and `mtu`/`advmss`/`priority`/`table`/`scope` only from 1.1.0; `dns`
/// with string lists. Unknown keys are errors (a plugin must not invent fields).
pub fn check_result(result: &Value, version: &str) -> Result<(), String> {
    let v11 = version == "1.1.0";
    let pre10 = version.starts_with("0.");
    let obj = result.as_object().ok_or("result is not an object")?;
    allowed_keys(
        "result",
        obj,
        &["cniVersion", "interfaces", "ips", "routes", "dns"],
    )?;
    if obj.get("cniVersion").and_then(Value::as_str) != Some(version) {
        return Err(format!(
            "cniVersion {:?} is not {version}",
            obj.get("cniVersion")
        ));
    }
    let interfaces = list_of(obj, "interfaces")?;
    for (i, iface) in interfaces.iter().enumerate() {
        let at = format!("interfaces[{i}]");
        let o = iface.as_object().ok_or(format!("{at} is not an object"))?;
        let mut keys = vec!["name", "mac", "sandbox"];
        if v11 {
            keys.extend(["mtu", "socketPath", "pciID"]);
        }
        allowed_keys(&at, o, &keys)?;
        let name = str_of(o, "name", &at)?.ok_or(format!("{at}.name is required"))?;
        if name.is_empty() {
            return Err(format!("{at}.name is empty"));
        }
        if let Some(mac) = str_of(o, "mac", &at)? {
            parse_mac(mac).ok_or(format!("{at}.mac {mac:?} is not a MAC"))?;
        }
        str_of(o, "sandbox", &at)?;
        if let Some(mtu) = o.get("mtu") {
            mtu.as_u64().ok_or(format!("{at}.mtu is not an integer"))?;
        }
    }
    for (k, ip) in list_of(obj, "ips")?.iter().enumerate() {
        let at = format!("ips[{k}]");
        let o = ip.as_object().ok_or(format!("{at} is not an object"))?;
        let mut keys = vec!["address", "gateway", "interface"];
        if pre10 {
            keys.push("version");
        }
        allowed_keys(&at, o, &keys)?;
        let address = str_of(o, "address", &at)?.ok_or(format!("{at}.address is required"))?;
        let net = IpNet::from_str(address)
            .map_err(|_| format!("{at}.address {address:?} is not a CIDR"))?;
        if let Some(gw) = str_of(o, "gateway", &at)? {
            let gw =
                IpAddr::from_str(gw).map_err(|_| format!("{at}.gateway {gw:?} is not an IP"))?;
            if gw.is_ipv4() != net.addr().is_ipv4() {
                return Err(format!("{at}.gateway {gw} is not of the address's family"));
            }
        }
        if let Some(index) = o.get("interface") {
            let index = index
                .as_u64()
                .ok_or(format!("{at}.interface is not an index"))?;
            if index as usize >= interfaces.len() {
                return Err(format!(
                    "{at}.interface {index} is out of range ({} interfaces)",
                    interfaces.len()
                ));
            }
        }
        if pre10 {
            let family = if net.addr().is_ipv4() { "4" } else { "6" };
            let got = str_of(o, "version", &at)?
                .ok_or(format!("{at}.version is required before 1.0.0"))?;
            if got != family {
                return Err(format!("{at}.version {got:?} does not match {address}"));
            }
        }
    }
    for (k, route) in list_of(obj, "routes")?.iter().enumerate() {
        let at = format!("routes[{k}]");
        let o = route.as_object().ok_or(format!("{at} is not an object"))?;
        let mut keys = vec!["dst", "gw"];
        if v11 {
            keys.extend(["mtu", "advmss", "priority", "table", "scope"]);
        }
        allowed_keys(&at, o, &keys)?;
        let dst = str_of(o, "dst", &at)?.ok_or(format!("{at}.dst is required"))?;
        IpNet::from_str(dst).map_err(|_| format!("{at}.dst {dst:?} is not a CIDR"))?;
        if let Some(gw) = str_of(o, "gw", &at)? {
            IpAddr::from_str(gw).map_err(|_| format!("{at}.gw {gw:?} is not an IP"))?;
        }
        for key in ["mtu", "advmss", "priority", "table", "scope"] {
            if let Some(n) = o.get(key) {
                n.as_u64().ok_or(format!("{at}.{key} is not an integer"))?;
            }
        }
    }
    if let Some(dns) = obj.get("dns") {
        let o = dns.as_object().ok_or("dns is not an object")?;
        allowed_keys("dns", o, &["nameservers", "domain", "search", "options"])?;
        for key in ["nameservers", "search", "options"] {
            for (i, s) in list_of(o, key)?.iter().enumerate() {
                s.as_str()
                    .ok_or(format!("dns.{key}[{i}] is not a string"))?;
            }
        }
        str_of(o, "domain", "dns")?;
    }
    Ok(())
}

/// Asserts [`check_result`].
pub fn assert_result(result: &Value, version: &str) {
    if let Err(e) = check_result(result, version) {
        panic!("result is not a valid {version} result: {e}\n{result:#}");
    }
}

/// The pod interface of a checked result: (its index, MAC, addresses).
pub fn pod_side(result: &Value, ifname: &str) -> (usize, [u8; 6], Vec<IpNet>) {
    let interfaces = result["interfaces"].as_array().expect("interfaces");
    let (index, iface) = interfaces
        .iter()
        .enumerate()
        .find(|(_, i)| i["name"] == ifname && i["sandbox"].as_str().is_some_and(|s| !s.is_empty()))
        .unwrap_or_else(|| panic!("no pod interface {ifname} in {result}"));
    let mac = parse_mac(iface["mac"].as_str().expect("pod mac")).expect("a MAC");
    let addresses = result["ips"]
        .as_array()
        .expect("ips")
        .iter()
        .filter(|ip| ip["interface"].as_u64() == Some(index as u64))
        .map(|ip| {
            ip["address"]
                .as_str()
                .expect("address")
                .parse()
                .expect("CIDR")
        })
        .collect();
    (index, mac, addresses)
}

/// The host-side (sandbox-less) interface names of a result.
pub fn host_interfaces(result: &Value) -> Vec<String> {
    result["interfaces"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter(|i| i["sandbox"].as_str().is_none_or(str::is_empty))
                .filter_map(|i| i["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn allowed_keys(at: &str, obj: &Map<String, Value>, keys: &[&str]) -> Result<(), String> {
    match obj.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{at} has key {k:?}, not allowed here (allowed: {keys:?})"
        )),
        None => Ok(()),
    }
}

fn list_of<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], String> {
    match obj.get(key) {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(format!("{key} is not a list")),
    }
}

fn str_of<'a>(obj: &'a Map<String, Value>, key: &str, at: &str) -> Result<Option<&'a str>, String> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{at}.{key} is not a string")),
    }
}

/// `aa:bb:cc:dd:ee:ff` (either case) → bytes.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let octets: Vec<u8> = text
        .split(':')
        .map(|o| {
            (o.len() == 2)
                .then(|| u8::from_str_radix(o, 16).ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    octets.try_into().ok()
}

/// A plugin configuration for knid-cni alone.
pub fn knid_conf(version: &str, name: &str, socket: &Path) -> Value {
    json!({"cniVersion": version, "name": name, "type": "knid", "socket": socket})
}

/// Runs knid-cni in the node's host netns.
pub fn shim(node: &TestNode, env: &[(String, String)], stdin: &Value) -> Exec {
    exec_in(
        node.host_path(),
        &knid_cni(),
        env,
        stdin.to_string().as_bytes(),
    )
}

/// `conf` with `prevResult` set to `prev`, as a runtime chains a result into the next call.
pub fn with_prev(conf: &Value, prev: &Value) -> Value {
    let mut conf = conf.clone();
    conf["prevResult"] = prev.clone();
    conf
}

/// Checks the ADD result in the kernel: the pod interface with the result's MAC and exactly
/// its addresses, and the sandbox-less entry being the pod interface's veth peer in the host.
pub fn assert_in_kernel(node: &TestNode, netns: &Path, result: &Value) {
    let (_, mac, mut addresses) = pod_side(result, "eth0");
    let link = link_in(netns, "eth0").expect("eth0 in the pod netns");
    assert_eq!(link.mac, Some(mac), "MAC of eth0");
    addresses.sort();
    assert_eq!(
        kernel_addresses(netns, "eth0"),
        addresses,
        "addresses of eth0"
    );
    assert_eq!(addresses.len(), 2, "dual stack: {result}");
    // knid's host end comes first; chained plugins may append theirs (bandwidth's ifb).
    let hosts = host_interfaces(result);
    assert!(!hosts.is_empty(), "no host interface: {result}");
    let host = node
        .host_rtnl()
        .link_by_name(&hosts[0])
        .expect("look up host end")
        .unwrap_or_else(|| panic!("host interface {} missing", hosts[0]));
    assert_eq!(host.kind.as_deref(), Some("veth"));
}

#[cfg(test)]
mod checker_tests {
    use super::*;

    fn good() -> Value {
        json!({
            "cniVersion": "1.1.0",
            "interfaces": [{"name": "kn0"}, {"name": "eth0", "mac": "02:00:00:00:00:01", "mtu": 1500, "sandbox": "/run/netns/x"}],
            "ips": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1", "interface": 1}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1", "priority": 100}],
            "dns": {}
        })
    }

    #[test]
    fn the_checker_refuses_what_the_spec_forbids() {
        assert_eq!(check_result(&good(), "1.1.0"), Ok(()));
        type BreakIt = fn(&mut Value);
        let cases: [(&str, BreakIt); 7] = [
            ("1.1.0", |v| v["ips"][0]["interface"] = json!(2)),
            ("1.1.0", |v| v["ips"][0]["address"] = json!("10.0.0.2")),
            ("1.1.0", |v| v["ips"][0]["gateway"] = json!("fd00::1")),
            ("1.1.0", |v| v["ips"][0]["version"] = json!("4")),
            ("1.0.0", |v| v["cniVersion"] = json!("1.0.0")),
            ("0.4.0", |v| {
                v["cniVersion"] = json!("0.4.0");
                v["interfaces"][1]
                    .as_object_mut()
                    .expect("object")
                    .remove("mtu");
                v["routes"][0]
                    .as_object_mut()
                    .expect("object")
                    .remove("priority");
            }),
            ("1.1.0", |v| {
                v["interfaces"][1]["mac"] = json!("02:00:00:00:00")
            }),
        ];
        for (version, break_it) in cases {
            let mut v = good();
            break_it(&mut v);
            assert!(
                check_result(&v, version).is_err(),
                "{version}: accepted {v}"
            );
        }
    }
}
