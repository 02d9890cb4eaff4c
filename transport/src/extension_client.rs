//! The core's [`ExtensionCaller`] over ttrpc: each call opens a [`OneshotClient`] connection to
//! the extension's socket, makes one `knid.v1.Extension` call on the calling thread and closes
//! it. No thread and no connection outlives a call, so an extension that restarts (or vanishes)
//! is simply found (or not) at the next call.

use std::time::Duration;

use knid_core::error::chain;
use knid_core::{ExtensionCall, ExtensionCaller, ExtensionSpec};

use crate::oneshot::{OneshotClient, OneshotError};
use crate::{convert, errors, pb};

/// The ttrpc service name extensions serve.
pub const EXTENSION_SERVICE: &str = "knid.v1.Extension";

/// Calls extensions over ttrpc, one connection per call.
#[derive(Debug, Clone, Copy, Default)]
pub struct OneshotExtensionCaller;

impl OneshotExtensionCaller {
    /// One call of `method`, connecting included, bounded by the extension's timeout.
    fn call<Req: protobuf::Message, Resp: protobuf::Message>(
        ext: &ExtensionSpec,
        method: &str,
        req: &Req,
    ) -> Result<Resp, String> {
        OneshotClient::connect(&ext.socket_path, ext.timeout)
            .and_then(|mut client| client.call(EXTENSION_SERVICE, method, req, ext.timeout))
            .map_err(|e| describe(&e))
    }

    /// `OnAttach` or `OnDetach`: ok=false becomes the extension's message.
    fn hook(ext: &ExtensionSpec, method: &str, call: &ExtensionCall<'_>) -> Result<(), String> {
        let mut req = pb::ExtensionCallRequest::new();
        req.phase = call.phase.as_str().to_owned();
        req.sandbox = protobuf::MessageField::some(convert::sandbox(call.sandbox));
        req.ifnames = call.ifnames.to_vec();
        let resp: pb::ExtensionCallResponse = Self::call(ext, method, &req)?;
        verdict(resp.ok, resp.message, method)
    }
}

impl ExtensionCaller for OneshotExtensionCaller {
    fn on_attach(&self, ext: &ExtensionSpec, call: &ExtensionCall<'_>) -> Result<(), String> {
        Self::hook(ext, "OnAttach", call)
    }

    fn on_detach(&self, ext: &ExtensionSpec, call: &ExtensionCall<'_>) -> Result<(), String> {
        Self::hook(ext, "OnDetach", call)
    }

    fn health(&self, ext: &ExtensionSpec) -> Result<(), String> {
        let resp: pb::HealthResponse = Self::call(ext, "Health", &pb::HealthRequest::new())?;
        verdict(resp.ok, resp.message, "Health")
    }
}

/// What knid makes of an extension's answer to `method` (`OnAttach`, `OnDetach` or `Health`),
/// given the body of its response frame: the verdict, or why there is none as an operator reads
/// it. The calls above decode their answers with the same functions.
pub(crate) fn answer_verdict(method: &str, body: &[u8]) -> Result<(), String> {
    let verdict_of = |ok, message| verdict(ok, message, method);
    if method == "Health" {
        let resp: pb::HealthResponse = crate::oneshot::answer(body).map_err(|e| describe(&e))?;
        verdict_of(resp.ok, resp.message)
    } else {
        let resp: pb::ExtensionCallResponse =
            crate::oneshot::answer(body).map_err(|e| describe(&e))?;
        verdict_of(resp.ok, resp.message)
    }
}

/// An extension's answer: ok, or its message (a refusal without one, or with only blanks,
/// still says what failed).
fn verdict(ok: bool, message: String, method: &str) -> Result<(), String> {
    match (ok, message.trim().is_empty()) {
        (true, _) => Ok(()),
        (false, false) => Err(message),
        (false, true) => Err(format!("{method} answered not ok, without a message")),
    }
}

/// Why a call brought no verdict, in the words an operator reads in an Attach error or
/// `knictl extensions`: `no answer within 200ms`, `cannot connect to /run/mesh.sock: ...`.
fn describe(err: &OneshotError) -> String {
    match err {
        OneshotError::Timeout { timeout, .. } => {
            format!("no answer within {}", millis(*timeout))
        }
        OneshotError::Connect { path, source } => {
            format!("cannot connect to {}: {source}", path.display())
        }
        OneshotError::Closed { .. } => "closed the connection without answering".to_owned(),
        // A blank message would leave the operator nothing to read (found by fuzzing).
        OneshotError::Rpc { code, message } if message.trim().is_empty() => {
            errors::code_name(*code).to_owned()
        }
        OneshotError::Rpc { message, .. } => message.clone(),
        other => chain(other),
    }
}

/// `200ms`, `2000ms`: how timeouts are registered.
fn millis(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

#[cfg(test)]
mod tests {
    use std::os::fd::IntoRawFd;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use knid_core::{Dns, Phase, PodRef, Sandbox, SandboxId};

    use super::*;

    /// Answers OnAttach after `delay` with `ok`/`message`, keeps each request, fails Health
    /// with a status.
    struct FakeExtension {
        ok: bool,
        message: String,
        delay: Duration,
        seen: Arc<Mutex<Vec<pb::ExtensionCallRequest>>>,
    }

    impl pb::Extension for FakeExtension {
        fn on_attach(
            &self,
            _ctx: &ttrpc::TtrpcContext,
            req: pb::ExtensionCallRequest,
        ) -> ttrpc::Result<pb::ExtensionCallResponse> {
            std::thread::sleep(self.delay);
            self.seen.lock().expect("seen").push(req);
            let mut resp = pb::ExtensionCallResponse::new();
            resp.ok = self.ok;
            resp.message = self.message.clone();
            Ok(resp)
        }

        fn health(
            &self,
            _ctx: &ttrpc::TtrpcContext,
            _req: pb::HealthRequest,
        ) -> ttrpc::Result<pb::HealthResponse> {
            Err(ttrpc::Error::RpcStatus(ttrpc::get_status(
                ttrpc::Code::INTERNAL,
                "sidecar injector down",
            )))
        }
    }

    fn serve(path: &Path, ext: FakeExtension) -> ttrpc::Server {
        let listener = crate::socket::bind_listener(path, 0o600, None).expect("bind");
        let mut server = ttrpc::Server::new()
            .add_listener(listener.into_raw_fd())
            .expect("add listener")
            .register_service(pb::create_extension(Arc::new(ext)));
        server.start().expect("start");
        server
    }

    fn spec(socket_path: PathBuf, timeout: Duration) -> ExtensionSpec {
        ExtensionSpec {
            name: "mesh".into(),
            socket_path,
            phases: vec![Phase::PostAttach],
            required: true,
            timeout,
            order: 0,
        }
    }

    fn sandbox() -> Sandbox {
        Sandbox {
            id: SandboxId::parse("pod-7").expect("id"),
            netns_path: "/run/netns/pod-7".into(),
            netns_inode: 9,
            netns_dev: 4,
            generation: 3,
            pod: PodRef::default(),
            interfaces: Vec::new(),
            dns: Dns::default(),
            port_mappings: Vec::new(),
            labels: Default::default(),
            annotations: Default::default(),
            created_at_ms: 1,
            updated_at_ms: 2,
        }
    }

    fn attach(ext: &ExtensionSpec) -> Result<(), String> {
        let sandbox = sandbox();
        let ifnames = ["eth0".to_owned()];
        OneshotExtensionCaller.on_attach(
            ext,
            &ExtensionCall {
                phase: Phase::PostAttach,
                sandbox: &sandbox,
                ifnames: &ifnames,
            },
        )
    }

    #[test]
    fn on_attach_carries_the_sandbox_and_a_refusal_its_message() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ext.sock");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let server = serve(
            &path,
            FakeExtension {
                ok: false,
                message: "sidecar refused".into(),
                delay: Duration::ZERO,
                seen: Arc::clone(&seen),
            },
        );
        let ext = spec(path, Duration::from_secs(5));
        assert_eq!(attach(&ext), Err("sidecar refused".to_owned()));
        let req = seen.lock().expect("seen").remove(0);
        assert_eq!(req.phase, "post-attach");
        assert_eq!(req.ifnames, ["eth0"]);
        assert_eq!(
            (req.sandbox.id.as_str(), req.sandbox.generation),
            ("pod-7", 3)
        );
        // A status error brings its message.
        assert_eq!(
            OneshotExtensionCaller.health(&ext),
            Err("sidecar injector down".to_owned())
        );
        server.shutdown();
    }

    #[test]
    fn silence_and_absence_are_explained() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("slow.sock");
        let server = serve(
            &path,
            FakeExtension {
                ok: true,
                message: String::new(),
                delay: Duration::from_millis(1500),
                seen: Arc::default(),
            },
        );
        let started = std::time::Instant::now();
        let err = attach(&spec(path, Duration::from_millis(200))).expect_err("too slow");
        assert_eq!(err, "no answer within 200ms");
        assert!(
            started.elapsed() < Duration::from_millis(1200),
            "not bounded"
        );
        let err = attach(&spec(dir.path().join("none.sock"), Duration::from_secs(1)))
            .expect_err("nothing there");
        assert!(
            err.starts_with("cannot connect to ") && err.contains("none.sock"),
            "{err}"
        );
        server.shutdown();
    }
}
