//! knid-grpc in front of a [`TestNode`]'s knid, for tests/grpc.rs and benches/grpc.rs: it reads
//! the node's config (knid's socket and access rule) and serves on a socket in a directory every
//! user may traverse, mode 0666 (so a test can connect as another uid and meet SO_PEERCRED, not
//! the file mode), logging at debug level to a file.

use std::fs::{self, File, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::node::TestNode;
use tempfile::TempDir;

/// How long knid-grpc may take to serve its socket (it takes milliseconds).
const START_LIMIT: Duration = Duration::from_secs(10);

/// A running knid-grpc.
pub struct Front {
    child: Child,
    dir: TempDir,
    socket: PathBuf,
    /// From spawn to its socket accepting a connection.
    pub started_in: Duration,
}

impl Front {
    /// knid-grpc for `node`'s knid, with `extra` flags (`--log-level debug` unless they set it).
    pub fn start(node: &TestNode, extra: &[&str]) -> Front {
        let dir = tempfile::Builder::new()
            .prefix("knid-grpc-")
            .tempdir()
            .expect("tempdir");
        fs::set_permissions(dir.path(), Permissions::from_mode(0o755)).expect("chmod tempdir");
        let socket = dir.path().join("knid-grpc.sock");
        let log = File::create(dir.path().join("knid-grpc.log")).expect("create log");
        let begun = Instant::now();
        let child = Command::new(crate::bins::bin("knid-grpc"))
            .arg("--config")
            .arg(node.config_path())
            .arg("--knid-socket")
            .arg(node.socket())
            .arg("--socket")
            .arg(&socket)
            .args(["--socket-mode", "666"])
            .args(if extra.contains(&"--log-level") {
                &[][..]
            } else {
                &["--log-level", "debug"][..]
            })
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn knid-grpc");
        let mut front = Front {
            child,
            dir,
            socket,
            started_in: Duration::ZERO,
        };
        while UnixStream::connect(&front.socket).is_err() {
            if let Ok(Some(status)) = front.child.try_wait() {
                panic!("knid-grpc exited {status}:\n{}", front.log_text());
            }
            assert!(
                begun.elapsed() < START_LIMIT,
                "knid-grpc not serving after {START_LIMIT:?}:\n{}",
                front.log_text()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        front.started_in = begun.elapsed();
        front
    }

    /// The gRPC socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What knid-grpc logged so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(self.dir.path().join("knid-grpc.log")).unwrap_or_default()
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.child.wait();
    }
}
