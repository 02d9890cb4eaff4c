//! The client side of knid's ttrpc. Here: [`RuntimeClient`], the typed `knid.v1.Runtime` client
//! used by knictl and the tests. It sends protobuf requests as given — no client-side
//! validation — so tests can put raw, invalid values on the wire. Beside it, [`oneshot`], a
//! thread-free client of one connection for short-lived callers (the `knid-cni` shim), and
//! [`extension`], the core's extension caller over [`oneshot`] connections.

pub mod extension;
pub mod oneshot;
#[cfg(test)]
pub(crate) mod test_server;

use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::pb;

/// Errors of [`RuntimeClient`].
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be connected.
    #[error("connect to {}", path.display())]
    Connect {
        /// Socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server answered with a non-OK status.
    #[error("{code:?}: {message}")]
    Rpc {
        /// Status code.
        code: ttrpc::Code,
        /// Status message (for knid: the error's cause chain).
        message: String,
    },
    /// The call failed before an answer arrived (timeout, disconnect, encoding).
    #[error("ttrpc transport")]
    Transport(#[source] ttrpc::Error),
}

impl ClientError {
    /// The status code when the server answered with one.
    pub fn code(&self) -> Option<ttrpc::Code> {
        match self {
            Self::Rpc { code, .. } => Some(*code),
            Self::Connect { .. } | Self::Transport(_) => None,
        }
    }
}

impl From<ttrpc::Error> for ClientError {
    fn from(err: ttrpc::Error) -> Self {
        match err {
            ttrpc::Error::RpcStatus(status) => Self::Rpc {
                code: status.code(),
                message: status.message,
            },
            other => Self::Transport(other),
        }
    }
}

/// One connection to a knid socket. Cheap: ttrpc's client runs one reader and one writer thread
/// per connection and nothing else. Clones share the connection.
#[derive(Clone)]
pub struct RuntimeClient {
    inner: pb::RuntimeClient,
}

impl RuntimeClient {
    /// Connects to the unix socket at `path`.
    pub fn connect(path: &Path) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.to_owned(),
            source,
        })?;
        // ttrpc takes ownership of the fd and closes it when the last clone is dropped.
        let client = ttrpc::Client::new(stream.into_raw_fd())?;
        Ok(Self {
            inner: pb::RuntimeClient::new(client),
        })
    }

    /// `Attach`. A zero `timeout` waits forever; otherwise it is also sent as the server deadline.
    pub fn attach(
        &self,
        req: &pb::AttachRequest,
        timeout: Duration,
    ) -> Result<pb::Sandbox, ClientError> {
        Ok(self.inner.attach(ctx(timeout), req)?)
    }

    /// `Detach`.
    pub fn detach(&self, req: &pb::DetachRequest, timeout: Duration) -> Result<(), ClientError> {
        self.inner.detach(ctx(timeout), req)?;
        Ok(())
    }

    /// `Check`.
    pub fn check(&self, req: &pb::CheckRequest, timeout: Duration) -> Result<(), ClientError> {
        self.inner.check(ctx(timeout), req)?;
        Ok(())
    }

    /// `Inspect`.
    pub fn inspect(
        &self,
        req: &pb::InspectRequest,
        timeout: Duration,
    ) -> Result<pb::Sandbox, ClientError> {
        Ok(self.inner.inspect(ctx(timeout), req)?)
    }

    /// `List`.
    pub fn list(
        &self,
        req: &pb::ListRequest,
        timeout: Duration,
    ) -> Result<pb::ListResponse, ClientError> {
        Ok(self.inner.list(ctx(timeout), req)?)
    }

    /// `Status`.
    pub fn status(&self, timeout: Duration) -> Result<pb::StatusResponse, ClientError> {
        Ok(self.inner.status(ctx(timeout), &pb::StatusRequest::new())?)
    }

    /// `Networks`.
    pub fn networks(&self, timeout: Duration) -> Result<pb::NetworksResponse, ClientError> {
        Ok(self
            .inner
            .networks(ctx(timeout), &pb::NetworksRequest::new())?)
    }

    /// `SetupNodeNetwork`.
    pub fn setup_node_network(&self, timeout: Duration) -> Result<(), ClientError> {
        self.inner
            .setup_node_network(ctx(timeout), &pb::SetupNodeNetworkRequest::new())?;
        Ok(())
    }

    /// `GarbageCollect`. Objects that could not be removed come back in the response's `errors`,
    /// not as an error of the call.
    pub fn garbage_collect(
        &self,
        req: &pb::GarbageCollectRequest,
        timeout: Duration,
    ) -> Result<pb::GarbageCollectResponse, ClientError> {
        Ok(self.inner.garbage_collect(ctx(timeout), req)?)
    }

    /// `CreateNetns`.
    pub fn create_netns(
        &self,
        req: &pb::CreateNetnsRequest,
        timeout: Duration,
    ) -> Result<pb::CreateNetnsResponse, ClientError> {
        Ok(self.inner.create_netns(ctx(timeout), req)?)
    }

    /// `DeleteNetns`.
    pub fn delete_netns(
        &self,
        req: &pb::DeleteNetnsRequest,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        self.inner.delete_netns(ctx(timeout), req)?;
        Ok(())
    }

    /// `RegisterExtension`.
    pub fn register_extension(
        &self,
        req: &pb::RegisterExtensionRequest,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        self.inner.register_extension(ctx(timeout), req)?;
        Ok(())
    }

    /// `UnregisterExtension`; an unknown name is success.
    pub fn unregister_extension(
        &self,
        req: &pb::UnregisterExtensionRequest,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        self.inner.unregister_extension(ctx(timeout), req)?;
        Ok(())
    }

    /// `ListExtensions`.
    pub fn list_extensions(
        &self,
        timeout: Duration,
    ) -> Result<pb::ListExtensionsResponse, ClientError> {
        Ok(self
            .inner
            .list_extensions(ctx(timeout), &pb::ListExtensionsRequest::new())?)
    }

    /// `Metrics`: the Prometheus text exposition.
    pub fn metrics(&self, timeout: Duration) -> Result<String, ClientError> {
        Ok(self
            .inner
            .metrics(ctx(timeout), &pb::MetricsRequest::new())?
            .text)
    }

    /// `ListPolicies`: the NetworkPolicies knid knows (with `pod` set, those selecting it).
    pub fn list_policies(
        &self,
        req: &pb::ListPoliciesRequest,
        timeout: Duration,
    ) -> Result<pb::ListPoliciesResponse, ClientError> {
        Ok(self.inner.list_policies(ctx(timeout), req)?)
    }

    /// `ExplainPolicy`: whether a flow may start, side by side. A denied flow is an answer
    /// (`allowed` false), not an error.
    pub fn explain_policy(
        &self,
        req: &pb::ExplainPolicyRequest,
        timeout: Duration,
    ) -> Result<pb::ExplainPolicyResponse, ClientError> {
        Ok(self.inner.explain_policy(ctx(timeout), req)?)
    }
}

fn ctx(timeout: Duration) -> ttrpc::context::Context {
    ttrpc::context::with_duration(timeout)
}

#[cfg(test)]
mod tests;
