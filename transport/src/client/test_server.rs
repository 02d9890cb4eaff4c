//! knid's server with a fake `Runtime` behind it, for the clients' unit tests.

use std::path::Path;
use std::sync::Arc;

use knid_core::config::ApiSettings;

use crate::pb;
use crate::server::Server;

/// Answers Inspect for sandbox `known`, takes [`SLOW`] to answer Inspect for sandbox `slow` and
/// [`STUCK`] for sandbox `stuck`, and echoes the received timeout in Status.
pub(crate) struct FakeRuntime;

/// How long `FakeRuntime` takes over Inspect of sandbox `slow`.
pub(crate) const SLOW: std::time::Duration = std::time::Duration::from_millis(20);
/// How long `FakeRuntime` takes over Inspect of sandbox `stuck`: a handler stuck on the kernel.
pub(crate) const STUCK: std::time::Duration = std::time::Duration::from_secs(3);

impl pb::Runtime for FakeRuntime {
    fn inspect(
        &self,
        _ctx: &ttrpc::TtrpcContext,
        req: pb::InspectRequest,
    ) -> ttrpc::Result<pb::Sandbox> {
        match req.sandbox_id.as_str() {
            "slow" => std::thread::sleep(SLOW),
            "stuck" => std::thread::sleep(STUCK),
            _ => {}
        }
        if req.sandbox_id == "known" {
            let mut sandbox = pb::Sandbox::new();
            sandbox.id = req.sandbox_id;
            sandbox.generation = 7;
            Ok(sandbox)
        } else {
            Err(ttrpc::Error::RpcStatus(ttrpc::get_status(
                ttrpc::Code::NOT_FOUND,
                format!("sandbox {} not found", req.sandbox_id),
            )))
        }
    }

    fn status(
        &self,
        ctx: &ttrpc::TtrpcContext,
        _req: pb::StatusRequest,
    ) -> ttrpc::Result<pb::StatusResponse> {
        let mut status = pb::StatusResponse::new();
        status.ready = true;
        status.version = ctx.timeout_nano.to_string();
        Ok(status)
    }
}

/// knid's server on `bind_listener`'s socket, built the way the daemon builds it.
pub(crate) fn serve(path: &Path) -> Server {
    let listener = crate::socket::bind_listener(path, 0o660, None).expect("bind");
    Server::start(
        listener,
        pb::create_runtime(Arc::new(FakeRuntime)),
        ApiSettings::default(),
    )
    .expect("start")
}

/// Checks the timeout `FakeRuntime` saw (its Status `version`): what the client sent, less the
/// moments the request waited in the server before its handler ran.
pub(crate) fn assert_sent_timeout(seen: &str, sent_nanos: i64) {
    let seen: i64 = seen.parse().expect("a timeout in nanoseconds");
    assert!(
        seen <= sent_nanos && seen > sent_nanos - 1_000_000_000,
        "handler saw timeout {seen} ns; the client sent {sent_nanos} ns"
    );
}
