//! doctor's first check: can knictl talk to knid? When it cannot, why: knid not running, a
//! different socket path, a stale socket file, permissions, or a caller knid does not serve.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use knid_core::error::chain;
use knid_transport::{pb, ClientError, RuntimeClient};

use super::Finding;
use crate::exit;

const CHECK: &str = "socket";

/// Connects and asks Status; on success the client and knid's answer, else a FAIL saying why.
pub fn reach(
    socket: &Path,
    timeout: Duration,
    out: &mut Vec<Finding>,
) -> Option<(RuntimeClient, pb::StatusResponse)> {
    let client = match RuntimeClient::connect(socket) {
        Ok(client) => client,
        Err(e) => {
            let (facts, fixes) = diagnose(socket, &e);
            out.push(Finding::fail(
                CHECK,
                format!("{}; {facts}", chain(&e)),
                fixes,
            ));
            return None;
        }
    };
    match client.status(timeout) {
        Ok(status) => {
            out.push(Finding::ok(
                CHECK,
                format!("{} answers ({})", socket.display(), permissions(socket)),
            ));
            Some((client, status))
        }
        Err(e) => {
            let fixes = match exit::refusal_hint(&e) {
                Some(_) => refused_fixes(),
                None => vec![format!(
                    "knid accepted the connection but did not answer Status: see its log \
                     (e.g. `journalctl -u knid`), or raise --timeout (now {}s)",
                    timeout.as_secs()
                )],
            };
            let why = exit::refusal_hint(&e).map_or_else(|| exit::message(&e), str::to_owned);
            out.push(Finding::fail(
                CHECK,
                format!("{}: {why}", socket.display()),
                fixes,
            ));
            None
        }
    }
}

/// What a caller knid refuses can do.
fn refused_fixes() -> Vec<String> {
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    vec![
        "run knictl as root".to_owned(),
        format!(
            "or let this user in: add `allowed_uids = [0, {uid}]` (or `allowed_gids = [{gid}]`) \
             to /etc/knid/knid.toml and restart knid (a reload does not re-read them)"
        ),
    ]
}

/// Mode and owner of the socket and of its directory, e.g. `socket srw-rw---- 0:0, dir ...`.
fn permissions(socket: &Path) -> String {
    let describe = |what: &str, path: &Path| match std::fs::metadata(path) {
        Ok(m) => format!(
            "{what} {} mode {:o} owner {}:{}",
            path.display(),
            m.permissions().mode() & 0o7777,
            m.uid(),
            m.gid()
        ),
        Err(e) => format!("{what} {}: {e}", path.display()),
    };
    let dir = socket.parent().unwrap_or(Path::new("/"));
    format!("{}; {}", describe("socket", socket), describe("dir", dir))
}

/// knid's pids, from /proc/<pid>/comm.
fn knid_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "knid")
        })
        .collect()
}

/// Why a connection failed, and what to do.
fn diagnose(socket: &Path, err: &ClientError) -> (String, Vec<String>) {
    let pids = knid_pids();
    let running = if pids.is_empty() {
        "no knid process is running".to_owned()
    } else {
        format!(
            "knid is running (pid {})",
            pids.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let start = "start knid (e.g. `systemctl start knid`, or run `knid`) and read its log \
                 (`journalctl -u knid`) if it exits"
        .to_owned();
    let other_path = format!(
        "point knictl at knid's socket: --socket PATH or KNID_SOCKET (knid's `socket` in \
         /etc/knid/knid.toml or its --socket flag; now {})",
        socket.display()
    );
    let errno = match err {
        ClientError::Connect { source, .. } => source.raw_os_error(),
        _ => None,
    };
    match std::fs::symlink_metadata(socket) {
        Err(_) => {
            let fixes = if pids.is_empty() {
                vec![start, other_path]
            } else {
                vec![other_path]
            };
            (
                format!("{} does not exist; {running}", socket.display()),
                fixes,
            )
        }
        Ok(m) if !m.file_type().is_socket() => (
            format!("{} is not a socket; {running}", socket.display()),
            vec![format!(
                "remove {} and restart knid, which creates its socket there",
                socket.display()
            )],
        ),
        Ok(_) if errno == Some(libc::EACCES) => (
            format!("permission denied ({})", permissions(socket)),
            refused_fixes(),
        ),
        Ok(_) => {
            let fixes = if pids.is_empty() {
                vec![start]
            } else {
                vec![
                    other_path,
                    "if it is this socket, knid is stuck: see its log, then restart it".to_owned(),
                ]
            };
            (
                format!("a stale socket file or a knid that does not accept; {running}"),
                fixes,
            )
        }
    }
}
