//! The real ttrpc server with a fake `Runtime` behind it, for the clients' unit tests.

use std::os::fd::IntoRawFd;
use std::path::Path;
use std::sync::Arc;

use crate::pb;

/// Answers Inspect for sandbox `known` and echoes the received timeout in Status.
pub(crate) struct FakeRuntime;

impl pb::Runtime for FakeRuntime {
    fn inspect(
        &self,
        _ctx: &ttrpc::TtrpcContext,
        req: pb::InspectRequest,
    ) -> ttrpc::Result<pb::Sandbox> {
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

/// A ttrpc server on `bind_listener`'s fd, built the way the daemon builds it.
pub(crate) fn serve(path: &Path) -> ttrpc::Server {
    let listener = crate::socket::bind_listener(path, 0o660, None).expect("bind");
    let mut server = ttrpc::Server::new()
        .add_listener(listener.into_raw_fd())
        .expect("add listener")
        .register_service(pb::create_runtime(Arc::new(FakeRuntime)));
    server.start().expect("start");
    server
}
