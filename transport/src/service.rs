//! The `knid.v1.Runtime` ttrpc service: decode and validate ([`convert`]), call the core, encode,
//! map errors ([`crate::errors`]) and log one line per operation. [`services`] serves it together
//! with the KNI beta API ([`crate::kni`]).

use std::sync::Arc;
use std::time::Instant;

use ttrpc::TtrpcContext;

use crate::operation::{finish, finish_with, Field};
use crate::server::{deadline, Methods};
use crate::{convert, pb};

/// Serves `knid.v1.Runtime` from a core [`knid_core::Runtime`].
pub struct RuntimeService {
    runtime: Arc<knid_core::Runtime>,
}

impl RuntimeService {
    /// A service over `runtime`.
    pub fn new(runtime: Arc<knid_core::Runtime>) -> Self {
        Self { runtime }
    }
}

/// The ttrpc methods of every knid service (`knid.v1.Runtime` and `kni.KNI`) over one runtime,
/// ready for `Server::register_service`.
pub fn services(runtime: Arc<knid_core::Runtime>) -> Methods {
    let mut methods = pb::create_runtime(Arc::new(RuntimeService::new(Arc::clone(&runtime))));
    methods.extend(crate::kni::methods(runtime));
    methods
}

impl pb::Runtime for RuntimeService {
    fn attach(&self, ctx: &TtrpcContext, req: pb::AttachRequest) -> ttrpc::Result<pb::Sandbox> {
        let started = Instant::now();
        let result = convert::attach_request(&req)
            .and_then(|r| self.runtime.attach(r, deadline(ctx.timeout_nano, started)))
            .map(|s| convert::sandbox(&s));
        finish(
            self.runtime.metrics(),
            "attach",
            &req.sandbox_id,
            started,
            result,
        )
    }

    fn detach(
        &self,
        ctx: &TtrpcContext,
        req: pb::DetachRequest,
    ) -> ttrpc::Result<pb::DetachResponse> {
        let started = Instant::now();
        let result = convert::detach_request(&req)
            .and_then(|(id, ifname)| {
                self.runtime
                    .detach(id, ifname, deadline(ctx.timeout_nano, started))
            })
            .map(|()| pb::DetachResponse::new());
        finish(
            self.runtime.metrics(),
            "detach",
            &req.sandbox_id,
            started,
            result,
        )
    }

    fn check(&self, ctx: &TtrpcContext, req: pb::CheckRequest) -> ttrpc::Result<pb::CheckResponse> {
        let started = Instant::now();
        let result = convert::check_request(&req)
            .and_then(|(id, ifname, mac)| {
                self.runtime
                    .check(id, ifname, mac, deadline(ctx.timeout_nano, started))
            })
            .map(|()| pb::CheckResponse::new());
        finish(
            self.runtime.metrics(),
            "check",
            &req.sandbox_id,
            started,
            result,
        )
    }

    fn inspect(&self, _ctx: &TtrpcContext, req: pb::InspectRequest) -> ttrpc::Result<pb::Sandbox> {
        let started = Instant::now();
        let result = convert::inspect_request(&req)
            .and_then(|id| self.runtime.inspect(&id))
            .map(|s| convert::sandbox(&s));
        finish(
            self.runtime.metrics(),
            "inspect",
            &req.sandbox_id,
            started,
            result,
        )
    }

    fn list(&self, _ctx: &TtrpcContext, req: pb::ListRequest) -> ttrpc::Result<pb::ListResponse> {
        let started = Instant::now();
        let result = convert::list_request(&req)
            .and_then(|filter| self.runtime.list(&filter))
            .map(|list| convert::list_response(&list));
        finish(self.runtime.metrics(), "list", "", started, result)
    }

    fn status(
        &self,
        _ctx: &TtrpcContext,
        _req: pb::StatusRequest,
    ) -> ttrpc::Result<pb::StatusResponse> {
        let started = Instant::now();
        let result = Ok(convert::status(&self.runtime.status()));
        finish(self.runtime.metrics(), "status", "", started, result)
    }

    fn networks(
        &self,
        _ctx: &TtrpcContext,
        _req: pb::NetworksRequest,
    ) -> ttrpc::Result<pb::NetworksResponse> {
        let started = Instant::now();
        let result = self.runtime.networks().map(|list| convert::networks(&list));
        finish(self.runtime.metrics(), "networks", "", started, result)
    }

    fn setup_node_network(
        &self,
        _ctx: &TtrpcContext,
        _req: pb::SetupNodeNetworkRequest,
    ) -> ttrpc::Result<pb::SetupNodeNetworkResponse> {
        let started = Instant::now();
        let result = self
            .runtime
            .setup_node_network()
            .map(|()| pb::SetupNodeNetworkResponse::new());
        finish(
            self.runtime.metrics(),
            "setup_node_network",
            "",
            started,
            result,
        )
    }

    fn garbage_collect(
        &self,
        ctx: &TtrpcContext,
        req: pb::GarbageCollectRequest,
    ) -> ttrpc::Result<pb::GarbageCollectResponse> {
        let started = Instant::now();
        let result = convert::garbage_collect_request(&req)
            .and_then(|r| {
                self.runtime
                    .garbage_collect(r, deadline(ctx.timeout_nano, started))
            })
            .map(|report| convert::garbage_collect_response(&report));
        let mut outcome = vec![("dry_run", req.dry_run.to_string())];
        if let Ok(resp) = &result {
            outcome.push(("removed", resp.removed.len().to_string()));
            outcome.push(("errors", resp.errors.len().to_string()));
        }
        finish_with(
            self.runtime.metrics(),
            "garbage_collect",
            "",
            &outcome,
            started,
            result,
        )
    }

    fn create_netns(
        &self,
        ctx: &TtrpcContext,
        req: pb::CreateNetnsRequest,
    ) -> ttrpc::Result<pb::CreateNetnsResponse> {
        let started = Instant::now();
        let result = convert::create_netns_request(&req)
            .and_then(|r| {
                self.runtime
                    .create_netns(r, deadline(ctx.timeout_nano, started))
            })
            .map(|info| convert::create_netns_response(&info));
        finish(
            self.runtime.metrics(),
            "create_netns",
            &req.sandbox_id,
            started,
            result,
        )
    }

    fn delete_netns(
        &self,
        ctx: &TtrpcContext,
        req: pb::DeleteNetnsRequest,
    ) -> ttrpc::Result<pb::DeleteNetnsResponse> {
        let started = Instant::now();
        let result = convert::delete_netns_request(&req)
            .and_then(|owner| {
                self.runtime
                    .delete_netns(&owner, deadline(ctx.timeout_nano, started))
            })
            .map(|()| pb::DeleteNetnsResponse::new());
        finish(
            self.runtime.metrics(),
            "delete_netns",
            &req.sandbox_id,
            started,
            result,
        )
    }

    fn register_extension(
        &self,
        _ctx: &TtrpcContext,
        req: pb::RegisterExtensionRequest,
    ) -> ttrpc::Result<pb::RegisterExtensionResponse> {
        let started = Instant::now();
        let spec = convert::register_extension_request(&req);
        // Logged once valid: a valid name is plain [A-Za-z0-9_.-].
        let extra: Vec<Field> = spec
            .as_ref()
            .map(|s| vec![("extension", s.name.clone())])
            .unwrap_or_default();
        let result = spec
            .and_then(|s| self.runtime.register_extension(s))
            .map(|()| pb::RegisterExtensionResponse::new());
        finish_with(
            self.runtime.metrics(),
            "register_extension",
            "",
            &extra,
            started,
            result,
        )
    }

    fn unregister_extension(
        &self,
        _ctx: &TtrpcContext,
        req: pb::UnregisterExtensionRequest,
    ) -> ttrpc::Result<pb::UnregisterExtensionResponse> {
        let started = Instant::now();
        let name = convert::unregister_extension_request(&req);
        let extra: Vec<Field> = name
            .as_ref()
            .map(|n| vec![("extension", n.to_string())])
            .unwrap_or_default();
        let result = name
            .and_then(|n| self.runtime.unregister_extension(&n))
            .map(|()| pb::UnregisterExtensionResponse::new());
        finish_with(
            self.runtime.metrics(),
            "unregister_extension",
            "",
            &extra,
            started,
            result,
        )
    }

    fn list_extensions(
        &self,
        _ctx: &TtrpcContext,
        _req: pb::ListExtensionsRequest,
    ) -> ttrpc::Result<pb::ListExtensionsResponse> {
        let started = Instant::now();
        let result = Ok(convert::list_extensions_response(
            &self.runtime.list_extensions(),
        ));
        finish(
            self.runtime.metrics(),
            "list_extensions",
            "",
            started,
            result,
        )
    }

    fn metrics(
        &self,
        _ctx: &TtrpcContext,
        _req: pb::MetricsRequest,
    ) -> ttrpc::Result<pb::MetricsResponse> {
        let started = Instant::now();
        let mut resp = pb::MetricsResponse::new();
        resp.text = self.runtime.metrics_text();
        finish(self.runtime.metrics(), "metrics", "", started, Ok(resp))
    }

    fn list_policies(
        &self,
        _ctx: &TtrpcContext,
        req: pb::ListPoliciesRequest,
    ) -> ttrpc::Result<pb::ListPoliciesResponse> {
        let started = Instant::now();
        let result = convert::list_policies_request(&req)
            .and_then(|pod| self.runtime.list_policies(pod.as_deref()))
            .map(|listing| convert::list_policies_response(&listing));
        finish(self.runtime.metrics(), "list_policies", "", started, result)
    }

    fn explain_policy(
        &self,
        _ctx: &TtrpcContext,
        req: pb::ExplainPolicyRequest,
    ) -> ttrpc::Result<pb::ExplainPolicyResponse> {
        let started = Instant::now();
        let result = convert::explain_policy_request(&req)
            .and_then(|q| self.runtime.explain_policy(&q.from, &q.to, &q.port))
            .map(|verdict| convert::explain_policy_response(&verdict));
        // The verdict, never the caller's text: ends and port are logged only as knid read them.
        let extra: Vec<Field> = result
            .as_ref()
            .map(|r| vec![("allowed", r.allowed.to_string())])
            .unwrap_or_default();
        finish_with(
            self.runtime.metrics(),
            "explain_policy",
            "",
            &extra,
            started,
            result,
        )
    }
}
