//! A knid started by hand on a [`TestNode`]'s files and timed from its spawn until its `Status`
//! says what the caller waits for (ready, every condition true, the pod CIDR confirmed…),
//! polled every 0.2 ms over fresh connections: start-up as a supervisor sees it.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use knid_transport::client::oneshot::OneshotClient;
use knid_transport::pb;

use crate::node::{TestNode, RPC};

/// How long a timed start may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A knid this module started; SIGTERMed (then killed) when dropped.
pub struct StartedKnid(Child);

impl StartedKnid {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn stop(mut self) {
        let status = self.terminate().expect("knid exited after SIGTERM");
        assert!(status.success(), "knid exit status {status}");
    }

    fn terminate(&mut self) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.0.try_wait() {
            return Some(status);
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0.id()).ok()?);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(status)) = self.0.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.0.kill();
        self.0.wait().ok()
    }
}

impl Drop for StartedKnid {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Every condition true, and ready.
pub fn all_true(status: &pb::StatusResponse) -> bool {
    status.ready && status.conditions.iter().all(|c| c.status)
}

/// Starts `bin` with `args` (the node's own knid stopped) on `node`'s host netns, config,
/// socket, state dir and environment, logging to `knid-restarts.log` in its dir, and times spawn → a
/// `Status` for which `until` holds.
pub fn timed_start(
    node: &TestNode,
    bin: &Path,
    args: &[&str],
    until: impl Fn(&pb::StatusResponse) -> bool,
) -> (Duration, StartedKnid) {
    let log_path = node.dir().join("knid-restarts.log");
    let log = File::options()
        .create(true)
        .append(true)
        .open(&log_path)
        .expect("open the restarts' log");
    let host = node.host();
    let state_dir = node.state_dir().to_owned();
    let (spawned, started) = knid_netops::run_in(&host, || {
        let started = Instant::now();
        let child = Command::new(bin)
            .arg("--config")
            .arg(node.config_path())
            .arg("--socket")
            .arg(node.socket())
            .arg("--state-dir")
            .arg(&state_dir)
            .args(args)
            .envs(node.env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        (child, started)
    })
    .expect("spawn from the private host netns");
    let mut knid = StartedKnid(spawned.expect("spawn knid"));
    loop {
        if let Ok(Some(status)) = knid.0.try_wait() {
            panic!(
                "knid exited during start-up ({status}): {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        let answer = OneshotClient::connect(node.socket(), RPC).and_then(|mut c| c.status(RPC));
        if answer.is_ok_and(|s| until(&s)) {
            return (started.elapsed(), knid);
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "knid not there {TIMEOUT:?} after spawn"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}
