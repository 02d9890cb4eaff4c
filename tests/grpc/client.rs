//! The gRPC client knid's developers did not write: Python grpcio with stubs grpcio-tools
//! generates from knid's .proto files when it starts (tests/grpc/kni_client.py). The tests hand
//! it request bytes and read back the status and response bytes of each call.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use protobuf::Message;
use serde_json::{json, Value};

/// The Python with grpcio and grpcio-tools (.ci/run's venv) is named by this variable.
pub const PYTHON_VAR: &str = "KNID_GRPC_PYTHON";

/// The client script, beside this file.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grpc/kni_client.py");
/// The .proto files it generates its stubs from: knid's own.
const PROTO_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/transport/proto");

/// One call's outcome as the client saw it.
#[derive(Debug)]
pub struct Answer {
    /// The gRPC status code's name (`OK`, `UNAVAILABLE`, ...).
    pub code: String,
    /// The status message.
    pub details: String,
    /// The response message's bytes (empty unless OK).
    pub response: Vec<u8>,
    /// How long the call took, as the client timed it.
    pub ms: f64,
}

/// A running client holding one channel to a knid-grpc socket.
pub struct GrpcClient {
    child: Child,
    /// Where the client's generated stubs live; removed with it.
    _stubs: tempfile::TempDir,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// `$KNID_GRPC_PYTHON` when it has grpcio and grpcio-tools; `None` after the skip notice (a
/// failure under `CI=true`) otherwise.
pub fn python() -> Option<PathBuf> {
    let Some(python) = std::env::var_os(PYTHON_VAR).map(PathBuf::from) else {
        testkit::skip_unless_ci(&format!(
            "needs ${PYTHON_VAR}, a Python with grpcio and grpcio-tools (.ci/run sets it)"
        ));
        return None;
    };
    let has = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .status()
        .is_ok_and(|s| s.success());
    if !has {
        testkit::skip_unless_ci(&format!(
            "{} cannot import grpc and grpc_tools",
            python.display()
        ));
        return None;
    }
    Some(python)
}

impl GrpcClient {
    /// A client of the gRPC socket at `socket` (a path, or `host:port` for TCP), run as
    /// `uid`/`gid` when given.
    pub fn start(
        python: &Path,
        socket: impl AsRef<OsStr>,
        as_user: Option<(u32, u32)>,
    ) -> GrpcClient {
        let stubs = tempfile::Builder::new()
            .prefix("knid-grpc-stubs-")
            .tempdir()
            .expect("tempdir for the stubs");
        let mut cmd = Command::new(python);
        cmd.arg(SCRIPT)
            .arg(PROTO_ROOT)
            .arg(stubs.path())
            .arg(socket.as_ref())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // The interpreter may live where only root can read (pyenv under /root): the client
        // drops to the user itself, before it connects.
        if let Some((uid, gid)) = as_user {
            cmd.arg(format!("{uid}:{gid}"));
        }
        let mut child = cmd.spawn().expect("spawn the Python gRPC client");
        let stdin = child.stdin.take().expect("client stdin");
        let stdout = BufReader::new(child.stdout.take().expect("client stdout"));
        let mut client = GrpcClient {
            child,
            _stubs: stubs,
            stdin,
            stdout,
        };
        let ready = client.read_line();
        assert_eq!(ready["ready"], json!(true), "client not ready: {ready}");
        client
    }

    fn read_line(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the client");
        assert!(!line.is_empty(), "the gRPC client exited");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("client said {line:?}: {e}"))
    }

    /// Calls `path` (`kni.KNI/AttachInterface`) with `req` under the gRPC deadline `timeout`.
    pub fn call(&mut self, path: &str, req: &impl Message, timeout: Option<Duration>) -> Answer {
        let bytes = req.write_to_bytes().expect("encode request");
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let ask = json!({
            "call": path,
            "request": hex,
            "timeout": timeout.map(|t| t.as_secs_f64()),
        });
        writeln!(self.stdin, "{ask}").expect("write to the client");
        self.stdin.flush().expect("flush to the client");
        let answer = self.read_line();
        let text = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
        let response = text("response");
        Answer {
            code: text("code"),
            details: text("details"),
            response: (0..response.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&response[i..i + 2], 16).expect("hex response"))
                .collect(),
            ms: answer["ms"].as_f64().unwrap_or_default(),
        }
    }

    /// [`GrpcClient::call`] that must succeed, its response decoded.
    pub fn ok<Resp: Message>(&mut self, path: &str, req: &impl Message) -> Resp {
        let answer = self.call(path, req, Some(testkit::RPC));
        assert_eq!(answer.code, "OK", "{path}: {}", answer.details);
        Resp::parse_from_bytes(&answer.response)
            .unwrap_or_else(|e| panic!("{path}: response does not decode: {e}"))
    }
}

impl Drop for GrpcClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
