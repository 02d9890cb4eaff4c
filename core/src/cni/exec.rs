//! Running CNI plugin binaries the way libcni does (`pkg/invoke`): found by `type` in the
//! configured absolute directories (never through a shell), the CNI environment on top of knid's
//! own, the configuration on stdin, the result or error object on stdout, stderr logged. A binary
//! being replaced ("text file busy") is retried, and a plugin that outlives its deadline is
//! killed. No thread is started: stdout and stderr are drained with poll(2).

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::cni::error::{CniError, INTERNAL, IO_FAILURE, TRY_AGAIN};

/// How often, and how long apart, a "text file busy" exec is retried (libcni: 5 × 1 s).
const BUSY_RETRIES: u32 = 5;
const BUSY_PAUSE: Duration = Duration::from_secs(1);

/// A CNI verb knid runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// ADD.
    Add,
    /// DEL.
    Del,
    /// CHECK.
    Check,
    /// STATUS.
    Status,
    /// GC.
    Gc,
}

impl Verb {
    /// `CNI_COMMAND`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "ADD",
            Self::Del => "DEL",
            Self::Check => "CHECK",
            Self::Status => "STATUS",
            Self::Gc => "GC",
        }
    }
}

/// The per-call environment (empty values are left unset, as for STATUS and GC).
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    /// `CNI_COMMAND`.
    pub verb: Verb,
    /// `CNI_CONTAINERID`.
    pub container_id: &'a str,
    /// `CNI_NETNS` (empty on a DEL whose netns is gone).
    pub netns: &'a str,
    /// `CNI_IFNAME`.
    pub ifname: &'a str,
    /// `CNI_ARGS` (`K=V;K=V`).
    pub args: &'a str,
}

impl Invocation<'static> {
    /// A call about no attachment (STATUS, GC): only `CNI_COMMAND` and `CNI_PATH` are set.
    pub fn node_wide(verb: Verb) -> Self {
        Self {
            verb,
            container_id: "",
            netns: "",
            ifname: "",
            args: "",
        }
    }
}

/// Where plugins are found, and how long one may run.
#[derive(Debug, Clone)]
pub struct Runner {
    /// `CNI_PATH`: absolute directories, searched in order.
    pub path: Vec<PathBuf>,
    /// Deadline of one plugin call.
    pub timeout: Duration,
}

impl Runner {
    /// The executable for `plugin` in the first directory that has it.
    pub fn find(&self, plugin: &str) -> Result<PathBuf, CniError> {
        self.path
            .iter()
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(plugin))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                let dirs: Vec<String> = self.path.iter().map(|d| d.display().to_string()).collect();
                CniError::new(
                    INTERNAL,
                    format!("plugin {plugin:?} not found in {}", dirs.join(":")),
                )
            })
    }

    /// Runs `plugin` with `config` on stdin; its stdout on success, its error object (or one
    /// built from its stderr and exit status) on failure.
    pub fn run(
        &self,
        plugin: &str,
        inv: &Invocation<'_>,
        config: &serde_json::Value,
    ) -> Result<Vec<u8>, CniError> {
        self.run_found(&self.find(plugin)?, plugin, inv, config)
    }

    /// [`Runner::run`] of the executable `exe` that [`Runner::find`] found for `plugin`.
    pub fn run_found(
        &self,
        exe: &Path,
        plugin: &str,
        inv: &Invocation<'_>,
        config: &serde_json::Value,
    ) -> Result<Vec<u8>, CniError> {
        let stdin = serde_json::to_vec(config)
            .map_err(|e| CniError::new(INTERNAL, format!("encode config for {plugin}: {e}")))?;
        let mut child = self.spawn(exe, inv)?;
        let deadline = Instant::now() + self.timeout;
        let outcome = feed_and_drain(&mut child, &stdin, deadline);
        let (stdout, stderr, status) = match outcome {
            Ok(out) => out,
            Err(e) => {
                // Killed and reaped so no zombie is left; it may already be gone.
                let _ = child.kill();
                let _ = child.wait();
                return Err(CniError::new(
                    e.code,
                    format!("plugin {plugin} {}: {}", inv.verb.as_str(), e.msg),
                ));
            }
        };
        let stderr_text = String::from_utf8_lossy(&stderr);
        for line in stderr_text.lines().filter(|l| !l.trim().is_empty()) {
            if status.success() {
                log::debug!("cni {plugin} {}: {line}", inv.verb.as_str());
            } else {
                log::warn!("cni {plugin} {}: {line}", inv.verb.as_str());
            }
        }
        if status.success() {
            return Ok(stdout);
        }
        let mut err = CniError::from_json(&stdout)
            .or_else(|| CniError::from_json(&stderr))
            .unwrap_or_else(|| {
                CniError::new(INTERNAL, format!("exited with {status}"))
                    .with_details(stderr_text.trim().to_owned())
            });
        err.msg = format!("plugin {plugin} {}: {}", inv.verb.as_str(), err.msg);
        Err(err)
    }

    fn spawn(&self, exe: &Path, inv: &Invocation<'_>) -> Result<Child, CniError> {
        let cni_path = std::env::join_paths(&self.path)
            .map_err(|e| CniError::new(INTERNAL, format!("CNI_PATH: {e}")))?;
        let mut tries = 0;
        loop {
            let mut cmd = Command::new(exe);
            cmd.env("CNI_COMMAND", inv.verb.as_str())
                .env("CNI_PATH", &cni_path)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (key, value) in [
                ("CNI_CONTAINERID", inv.container_id),
                ("CNI_NETNS", inv.netns),
                ("CNI_IFNAME", inv.ifname),
                ("CNI_ARGS", inv.args),
            ] {
                if value.is_empty() {
                    cmd.env_remove(key);
                } else {
                    cmd.env(key, value);
                }
            }
            match cmd.spawn() {
                Ok(child) => return Ok(child),
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < BUSY_RETRIES => {
                    tries += 1;
                    log::info!(
                        "{}: text file busy, retry {tries} of {BUSY_RETRIES}",
                        exe.display()
                    );
                    std::thread::sleep(BUSY_PAUSE);
                }
                Err(e) => {
                    return Err(CniError::new(
                        IO_FAILURE,
                        format!("exec {}: {e}", exe.display()),
                    ))
                }
            }
        }
    }
}

/// Writes `stdin`, then collects stdout and stderr until both close and the child exits, or the
/// deadline passes (error code 11: the caller may try again).
fn feed_and_drain(
    child: &mut Child,
    stdin: &[u8],
    deadline: Instant,
) -> Result<(Vec<u8>, Vec<u8>, ExitStatus), CniError> {
    let io = |what: &str, e: std::io::Error| CniError::new(IO_FAILURE, format!("{what}: {e}"));
    if let Some(mut pipe) = child.stdin.take() {
        // A plugin that exits without reading its config closes the pipe: not our error.
        match pipe.write_all(stdin) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(io("write stdin", e))
            }
            _ => {}
        }
    }
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut buf = [0u8; 8192];
    while stdout.is_some() || stderr.is_some() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CniError::new(TRY_AGAIN, "timed out"));
        }
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        let (out_ready, err_ready) = {
            let mut fds = Vec::with_capacity(2);
            if let Some(p) = &stdout {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
            }
            if let Some(p) = &stderr {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, timeout) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(io("poll", e.into())),
            }
            let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
            let mut it = fds.iter();
            let o = stdout.is_some() && it.next().is_some_and(ready);
            let e = stderr.is_some() && it.next().is_some_and(ready);
            (o, e)
        };
        if out_ready {
            if let Some(p) = stdout.as_mut() {
                match p.read(&mut buf) {
                    Ok(0) => stdout = None,
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io("read stdout", e)),
                }
            }
        }
        if err_ready {
            if let Some(p) = stderr.as_mut() {
                match p.read(&mut buf) {
                    Ok(0) => stderr = None,
                    Ok(n) => err.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io("read stderr", e)),
                }
            }
        }
    }
    // Both pipes closed: the plugin is exiting, usually within microseconds, so the wait
    // starts short and backs off (a plugin that lingers without its pipes still meets the
    // deadline).
    let mut pause = Duration::from_micros(20);
    loop {
        if let Some(status) = child.try_wait().map_err(|e| io("wait", e))? {
            return Ok((out, err, status));
        }
        if Instant::now() >= deadline {
            return Err(CniError::new(TRY_AGAIN, "timed out"));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests;
