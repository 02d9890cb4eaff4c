//! knid as a CNI plugin (`"type": "knid"`, spec 0.3.0 – 1.1.0): the whole of the `knid-cni`
//! binary except reading stdin and printing, so it runs in-process in tests. Each verb becomes
//! at most two calls to knid over one [`crate::client::oneshot`] connection: no threads, nothing else
//! at start-up. ADD answers with the plugins' own result when the network is of kind `cni`.
//!
//! Configuration keys besides the spec's: `network` (the knid network; default: the list's
//! `name`) and `socket` (absolute; default `/run/knid/knid.sock`). Capability arguments in
//! `runtimeConfig`: `portMappings`, `dns`, `ips`, `mac`, `bandwidth`,
//! `io.kubernetes.cri.pod-annotations` (and `ipRanges`, `cgroupPath`, accepted and unused), their
//! keys matched as Go plugins match them (exact, else ignoring case: go-cni sends `HostPort`).
//! DEL ignores a `runtimeConfig` or `prevResult` it cannot use. `CNI_ARGS` keys `K8S_POD_NAME`,
//! `K8S_POD_NAMESPACE`, `K8S_POD_UID` fill the sandbox's pod; other keys are ignored.
//!
//! | verb | knid call | notes |
//! |---|---|---|
//! | ADD | `Attach` | sandbox = `CNI_CONTAINERID`, one interface `CNI_IFNAME` on the network. Idempotent: knid answers an identical Attach of an attached sandbox with the same result, so a retried ADD gets the first ADD's result (a different spec is error 102) |
//! | DEL | `Detach` of `CNI_IFNAME` | unknown container: success; `CNI_NETNS` optional |
//! | CHECK | `Inspect`, `Check` | attached, same netns, `prevResult` addresses are knid's; then knid's `Check` verifies, on the sandbox's shard, that the netns really holds the interface, up, with those addresses and with the `prevResult`'s MAC (a later plugin such as tuning may have changed it; `expected_mac`), as the reference plugins check (and runs a cni network's CHECK chain) |
//! | STATUS | `Status` | 50 when knid is not ready, or `PluginsAvailable/<network>` or `NetworkSchedulable/<network>` (pool exhausted) is false |
//! | GC | `GarbageCollect` restricted to the network | valid list from `cni.dev/valid-attachments` (or `cni.dev/attachments`); nothing printed on success |
//! | VERSION | — | the requested version if supported, else the newest |
//!
//! Errors are the spec's error object on stdout, in the requested `cniVersion` (as written,
//! even when unsupported; the newest when there is none). Codes:
//!
//! - 1: unsupported `cniVersion`, or CHECK before 0.4.0, STATUS / GC before 1.1.0;
//! - 3: CHECK of a container knid does not know (ttrpc NotFound);
//! - 4: a missing or invalid environment variable, named (`CNI_COMMAND`, `CNI_CONTAINERID` by
//!   the container-id rule, `CNI_IFNAME` 1–15 bytes without `/`, `:` or whitespace, `CNI_NETNS`
//!   absolute, `CNI_ARGS` `K=V;…`);
//! - 6: stdin is not JSON, or `prevResult` is not a result;
//! - 7: invalid configuration, the key named (`name`, `type` not "knid", `network`, `socket`
//!   not absolute, `runtimeConfig.*`, GC without its list), or knid refused a field
//!   (InvalidArgument; knid's message names the field);
//! - 11: knid unreachable, silent past the deadline, or answering Unavailable / DeadlineExceeded
//!   (ADD, DEL, CHECK, GC) — DEL never reports success then;
//! - 50: STATUS: not available (also when knid is unreachable);
//! - 100: knid answered FailedPrecondition (netns missing or not a netns, name taken);
//! - 101: ResourceExhausted (no free address in the network);
//! - 102: AlreadyExists (the container has this interface with a different spec);
//! - 110: CHECK found a difference, named in the message;
//! - 111: GC: knid could not remove some objects, listed;
//! - 999: knid's Internal, any other ttrpc code, or an answer that makes no sense.
//!
//! The process exits with the error code when it fits an exit status (1–255), else with 1; the
//! code on stdout is the one that counts.

mod codes;
mod config;
mod env;
mod go_json;
mod result;
mod verbs;

pub use codes::{
    ALREADY_EXISTS, CHECK_MISMATCH, FAILED_PRECONDITION, GC_INCOMPLETE, RESOURCE_EXHAUSTED,
};
pub use config::{PluginConf, DEFAULT_SOCKET, PLUGIN_TYPE};
pub use env::{Attachment, Command, PodArgs};

use knid_core::cni::error::DECODE;
use knid_core::cni::{CniError, Version};
use serde_json::Value;

/// What the process prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Exit status: 0 on success.
    pub exit_code: i32,
    /// Everything for stdout (a result, VERSION's answer, an error object, or nothing).
    pub stdout: String,
}

/// Runs one CNI invocation: `env` looks up the environment, `stdin` is the whole of it.
pub fn run(env: &impl Fn(&str) -> Option<String>, stdin: &[u8]) -> Outcome {
    // Errors are written in the requested version; until stdin is read, the newest.
    let mut echo = Version::LATEST.as_str().to_owned();
    match invoke(env, stdin, &mut echo) {
        Ok(None) => Outcome {
            exit_code: 0,
            stdout: String::new(),
        },
        Ok(Some(value)) => Outcome {
            exit_code: 0,
            stdout: format!("{value}\n"),
        },
        Err(err) => Outcome {
            exit_code: i32::try_from(err.code)
                .ok()
                .filter(|c| (1..=255).contains(c))
                .unwrap_or(1),
            stdout: format!("{}\n", err.to_json(&echo)),
        },
    }
}

/// One invocation as read from the environment and stdin, checked, before knid is called.
#[derive(Debug, Clone)]
pub enum Invocation {
    /// ADD of an attachment.
    Add(PluginConf, Attachment),
    /// DEL of an attachment (`CNI_NETNS` optional).
    Del(PluginConf, Attachment),
    /// CHECK of an attachment.
    Check(PluginConf, Attachment),
    /// STATUS of the network.
    Status(PluginConf),
    /// GC of the network.
    Gc(PluginConf),
    /// VERSION, with the `cniVersion` asked in, as written.
    Version(Option<String>),
}

/// Reads and checks an invocation: the verb, stdin as JSON, the configuration, and the
/// variables the verb needs. `echo` becomes the requested `cniVersion` as soon as stdin shows
/// one, so an error can be written in it.
pub fn read(
    env: &impl Fn(&str) -> Option<String>,
    stdin: &[u8],
    echo: &mut String,
) -> Result<Invocation, CniError> {
    let command = Command::from_env(env)?;
    // VERSION may come with nothing on stdin.
    let stdin = if command == Command::Version && stdin.trim_ascii().is_empty() {
        b"{}".as_slice()
    } else {
        stdin
    };
    let value: Value = serde_json::from_slice(stdin)
        .map_err(|e| CniError::new(DECODE, format!("stdin is not JSON: {e}")))?;
    let requested = config::requested_version(&value);
    if let Some(requested) = requested {
        requested.clone_into(echo);
    }
    if command == Command::Version {
        return Ok(Invocation::Version(requested.map(str::to_owned)));
    }
    let conf = PluginConf::parse(&value, command == Command::Del)?;
    Ok(match command {
        Command::Add => Invocation::Add(conf, Attachment::from_env(env, true)?),
        Command::Del => Invocation::Del(conf, Attachment::from_env(env, false)?),
        Command::Check => Invocation::Check(conf, Attachment::from_env(env, true)?),
        Command::Status => Invocation::Status(conf),
        Command::Gc => Invocation::Gc(conf),
        Command::Version => Invocation::Version(Some(conf.version.as_str().to_owned())),
    })
}

fn invoke(
    env: &impl Fn(&str) -> Option<String>,
    stdin: &[u8],
    echo: &mut String,
) -> Result<Option<Value>, CniError> {
    match read(env, stdin, echo)? {
        Invocation::Add(conf, att) => verbs::add(&conf, &att).map(Some),
        Invocation::Del(conf, att) => verbs::del(&conf, &att).map(|()| None),
        Invocation::Check(conf, att) => verbs::check(&conf, &att).map(|()| None),
        Invocation::Status(conf) => verbs::status(&conf).map(|()| None),
        Invocation::Gc(conf) => verbs::gc(&conf).map(|()| None),
        Invocation::Version(requested) => Ok(Some(verbs::version(requested.as_deref()))),
    }
}

#[cfg(test)]
mod tests;
