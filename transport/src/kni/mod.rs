//! The KNI beta API (`kni.KNI`, kni-api v0.0.8) over ttrpc, mapped onto the same core as
//! `knid.v1.Runtime`: requests become core requests through the knid.v1 validation
//! ([`request`]), results become KNI responses with knid's documented extradata ([`response`]),
//! errors leave through [`crate::errors`] and each operation logs one line like
//! [`crate::service`] does.
//!
//! What differs from the reference runtime (libkni) is on purpose (README.md#kni): CreateNetwork is
//! idempotent and recorded, AttachInterface links the sandbox to the netns before attaching so a
//! failed attach is still cleaned up by DeleteNetwork, DeleteNetwork detaches before deleting the
//! netns, QueryPodNetwork of an unknown id is NotFound, `ipconfigs` holds only pod-side
//! interfaces, and QueryNodeNetworks reports every network's real readiness.

use std::sync::Arc;
use std::time::Instant;

use knid_core::{Error, SandboxId};
use ttrpc::TtrpcContext;

use crate::operation::finish;
use crate::pb::kni;
use crate::pb::kni_ttrpc;
use crate::server::{deadline, Methods};

pub mod request;
pub mod response;

pub use request::{NETNS_KEY, NETWORKS_KEY, UID_KEY};

/// The ttrpc service name of the KNI API: package `kni`, service `KNI`.
pub const SERVICE: &str = "kni.KNI";

/// Serves `kni.KNI` from a core [`knid_core::Runtime`].
pub struct KniService {
    runtime: Arc<knid_core::Runtime>,
}

impl KniService {
    /// A service over `runtime`.
    pub fn new(runtime: Arc<knid_core::Runtime>) -> Self {
        Self { runtime }
    }
}

/// The `kni.KNI` methods over `runtime`, under their wire paths `/kni.KNI/<Method>`.
pub fn methods(runtime: Arc<knid_core::Runtime>) -> Methods {
    wire_paths(kni_ttrpc::create_kni(Arc::new(KniService::new(runtime))))
}

/// ttrpc-codegen camel-cases the service name, so `create_kni` registers `/kni.Kni/<Method>`;
/// KNI clients call `/kni.KNI/<Method>` (package `kni`, service `KNI`), so every path is re-keyed.
fn wire_paths(generated: Methods) -> Methods {
    generated
        .into_iter()
        .map(|(path, handler)| {
            let method = path.rsplit('/').next().unwrap_or_default();
            (format!("/{SERVICE}/{method}"), handler)
        })
        .collect()
}

impl kni_ttrpc::Kni for KniService {
    fn create_network(
        &self,
        ctx: &TtrpcContext,
        req: kni::CreateNetworkRequest,
    ) -> ttrpc::Result<kni::CreateNetworkResponse> {
        let started = Instant::now();
        let mut owner = String::new();
        let result = request::create_network(&req, self.runtime.netns_dir())
            .and_then(|r| {
                owner = r.owner.to_string();
                self.runtime
                    .create_netns(r, deadline(ctx.timeout_nano, started))
            })
            .map(|info| response::create_network(&info));
        finish(
            self.runtime.metrics(),
            "kni.CreateNetwork",
            &owner,
            started,
            result,
        )
    }

    fn delete_network(
        &self,
        ctx: &TtrpcContext,
        req: kni::DeleteNetworkRequest,
    ) -> ttrpc::Result<kni::DeleteNetworkResponse> {
        let started = Instant::now();
        let deadline = deadline(ctx.timeout_nano, started);
        let result = request::delete_network(&req)
            .and_then(|(id, lookup)| {
                // Detach first: the netns must not go while interfaces still sit in it.
                if let Some(id) = id {
                    self.runtime.detach(id, None, deadline)?;
                }
                match self.runtime.find_netns(&lookup)? {
                    None => Ok(()),
                    Some(netns) => {
                        let owner = SandboxId::parse(&netns.owner).map_err(|e| Error::Corrupt {
                            key: netns.owner.clone(),
                            detail: format!("netns owner {}", e.rule),
                        })?;
                        self.runtime.delete_netns(&owner, deadline)
                    }
                }
            })
            .map(|()| kni::DeleteNetworkResponse::new());
        finish(
            self.runtime.metrics(),
            "kni.DeleteNetwork",
            &req.id,
            started,
            result,
        )
    }

    fn attach_interface(
        &self,
        ctx: &TtrpcContext,
        req: kni::AttachInterfaceRequest,
    ) -> ttrpc::Result<kni::AttachInterfaceResponse> {
        let started = Instant::now();
        let result = request::attach_interface(&req)
            .and_then(|attach| {
                let request::Attach {
                    mut request,
                    netns_field,
                } = attach;
                // Linked before attaching, so DeleteNetwork{id} finds the netns even when the
                // attach fails (the reference runtime leaks it then).
                let linked = self
                    .runtime
                    .link_netns(&request.netns_path, &request.sandbox_id)?;
                if request.pod.uid.is_empty() {
                    if let Some(pod) = linked.and_then(|netns| netns.pod) {
                        request.pod.uid = pod.uid;
                    }
                }
                self.runtime
                    .attach(request, deadline(ctx.timeout_nano, started))
                    .map_err(|e| request::kni_error(e, netns_field))
            })
            .map(|sandbox| response::attach_interface(&sandbox));
        finish(
            self.runtime.metrics(),
            "kni.AttachInterface",
            &req.id,
            started,
            result,
        )
    }

    fn detach_interface(
        &self,
        ctx: &TtrpcContext,
        req: kni::DetachInterfaceRequest,
    ) -> ttrpc::Result<kni::DetachInterfaceResponse> {
        let started = Instant::now();
        let result = request::sandbox_id(&req.id)
            .and_then(|id| {
                self.runtime
                    .detach(id, None, deadline(ctx.timeout_nano, started))
            })
            .map(|()| kni::DetachInterfaceResponse::new());
        finish(
            self.runtime.metrics(),
            "kni.DetachInterface",
            &req.id,
            started,
            result,
        )
    }

    fn query_pod_network(
        &self,
        _ctx: &TtrpcContext,
        req: kni::QueryPodNetworkRequest,
    ) -> ttrpc::Result<kni::QueryPodNetworkResponse> {
        let started = Instant::now();
        let result = request::sandbox_id(&req.id)
            .and_then(|id| self.runtime.inspect(&id))
            .map(|sandbox| response::query_pod_network(&sandbox));
        finish(
            self.runtime.metrics(),
            "kni.QueryPodNetwork",
            &req.id,
            started,
            result,
        )
    }

    fn setup_node_network(
        &self,
        _ctx: &TtrpcContext,
        _req: kni::SetupNodeNetworkRequest,
    ) -> ttrpc::Result<kni::SetupNodeNetworkResponse> {
        let started = Instant::now();
        let result = self
            .runtime
            .setup_node_network()
            .map(|()| kni::SetupNodeNetworkResponse::new());
        finish(
            self.runtime.metrics(),
            "kni.SetupNodeNetwork",
            "",
            started,
            result,
        )
    }

    fn query_node_networks(
        &self,
        _ctx: &TtrpcContext,
        _req: kni::QueryNodeNetworksRequest,
    ) -> ttrpc::Result<kni::QueryNodeNetworksResponse> {
        let started = Instant::now();
        let (status, list) = self.runtime.status_and_networks();
        let result = Ok(response::query_node_networks(&list, status.ready));
        finish(
            self.runtime.metrics(),
            "kni.QueryNodeNetworks",
            "",
            started,
            result,
        )
    }
}

#[cfg(test)]
mod tests;
