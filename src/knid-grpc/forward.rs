//! The one gRPC service: every call to `/kni.KNI/<Method>` or `/knid.v1.Runtime/<Method>` becomes
//! the ttrpc request of the same path on the caller's connection to knid, its payload handed on
//! undecoded ([`PassThrough`]). The gRPC deadline (`grpc-timeout`) becomes the ttrpc
//! `timeout_nano` knid runs the call under; knid's status code comes back as the gRPC status of
//! the same number (both are google.rpc.Code), with its message.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tonic::body::Body;
use tonic::codegen::{http, Service};
use tonic::server::Grpc;
use tonic::{Code, Status};

use crate::codec::PassThrough;
use crate::connection::GrpcConnection;
use crate::deadline::grpc_timeout;
use crate::upstream::UpstreamError;

/// The services knid serves over ttrpc that a gRPC client may call. `knid.v1.Extension` is the
/// other direction (knid calls extensions), so it is not here.
pub const SERVICES: [&str; 2] = ["kni.KNI", "knid.v1.Runtime"];

/// How much longer than knid's `request_timeout` the front waits for the answer to a call
/// without a deadline (knid answers DEADLINE_EXCEEDED itself, with its reason).
const ANSWER_GRACE: Duration = Duration::from_secs(1);
/// How much before the caller's deadline the front gives up on knid's answer, at most: tonic
/// also times the call from `grpc-timeout`, and answers CANCELLED when its timer wins; the
/// front's DEADLINE_EXCEEDED must come first.
const DEADLINE_MARGIN: Duration = Duration::from_millis(20);

/// Forwards every gRPC call of its connection to knid.
#[derive(Debug, Clone)]
pub struct Forwarder {
    /// knid's `request_timeout`: the deadline knid gives a call that carries none.
    request_timeout: Duration,
}

impl Forwarder {
    /// A forwarder for a knid whose `request_timeout` is `request_timeout`.
    pub fn new(request_timeout: Duration) -> Self {
        Self { request_timeout }
    }
}

type Answer = http::Response<Body>;

impl Service<http::Request<Body>> for Forwarder {
    type Response = Answer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let received = Instant::now();
        let path = req.uri().path().to_owned();
        let conn = req.extensions().get::<Arc<GrpcConnection>>().cloned();
        let timeout = grpc_timeout(req.headers());
        let request_timeout = self.request_timeout;
        Box::pin(async move {
            let Some(conn) = conn else {
                return Ok(Status::internal("no connection info").into_http());
            };
            let Some((service, method)) = split_path(&path) else {
                log::debug!("grpc: {path} from {}: not a knid service", conn.caller);
                return Ok(Status::unimplemented(format!("{path}: not served by knid")).into_http());
            };
            let call = Call {
                conn,
                service: service.to_owned(),
                method: method.to_owned(),
                timeout: timeout.map(|t| (t, received)),
                request_timeout,
            };
            Ok(Grpc::new(PassThrough).unary(call, req).await)
        })
    }
}

/// `/kni.KNI/AttachInterface` → (`kni.KNI`, `AttachInterface`) for the forwarded services.
fn split_path(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (SERVICES.contains(&service) && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}

/// One unary call on its way to knid.
struct Call {
    conn: Arc<GrpcConnection>,
    service: String,
    method: String,
    /// The caller's deadline as `grpc-timeout` gave it, and when the call arrived.
    timeout: Option<(Duration, Instant)>,
    request_timeout: Duration,
}

impl Service<tonic::Request<Bytes>> for Call {
    type Response = tonic::Response<Bytes>;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<Bytes>, Status>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Bytes>) -> Self::Future {
        let conn = Arc::clone(&self.conn);
        let (service, method) = (self.service.clone(), self.method.clone());
        let timeout = self.timeout;
        let request_timeout = self.request_timeout;
        let payload = req.into_inner();
        Box::pin(async move {
            // What is left of the caller's deadline once the request is read; knid runs the call
            // under it (and under its own request_timeout when shorter).
            let left = timeout.map(|(t, received)| t.saturating_sub(received.elapsed()));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(Status::deadline_exceeded(
                    "the deadline passed before the call reached knid",
                ));
            }
            let ttrpc = ttrpc::proto::Request {
                service: service.clone(),
                method: method.clone(),
                payload: payload.to_vec(),
                timeout_nano: left.map_or(0, |l| i64::try_from(l.as_nanos()).unwrap_or(i64::MAX)),
                ..Default::default()
            };
            let wait = match left {
                Some(left) => left - (left / 20).min(DEADLINE_MARGIN),
                None => request_timeout + ANSWER_GRACE,
            };
            // Logged before forwarding: a caller whose deadline passes drops the call unfinished.
            log::debug!(
                "grpc: /{service}/{method} from {} (connection {}): forwarding, timeout {left:?}",
                conn.caller,
                conn.id
            );
            let started = Instant::now();
            let result = conn.upstream.call(&ttrpc, wait).await;
            let status = match result {
                Ok(resp) => answer(resp),
                Err(e) => Err(upstream_status(&e, left.is_some())),
            };
            let code = status.as_ref().map_or_else(Status::code, |_| Code::Ok);
            let line = format_args!(
                "grpc: /{service}/{method} from {} (connection {}): {code:?} in {:.1}ms",
                conn.caller,
                conn.id,
                started.elapsed().as_secs_f64() * 1000.0
            );
            match &status {
                Err(s) if matches!(s.code(), Code::Unavailable | Code::Internal) => {
                    log::warn!("{line}: {}", s.message());
                }
                _ => log::debug!("{line}"),
            }
            status
        })
    }
}

/// knid's ttrpc answer as the gRPC answer.
fn answer(resp: ttrpc::proto::Response) -> Result<tonic::Response<Bytes>, Status> {
    match resp.status.as_ref() {
        Some(status) if status.code.value() != 0 => Err(Status::new(
            Code::from_i32(status.code.value()),
            status.message.clone(),
        )),
        _ => Ok(tonic::Response::new(Bytes::from(resp.payload))),
    }
}

/// A call knid did not answer, as its gRPC status.
fn upstream_status(e: &UpstreamError, had_deadline: bool) -> Status {
    let message = e.to_string();
    match e {
        UpstreamError::Connect { .. } | UpstreamError::Closed => Status::unavailable(message),
        UpstreamError::NoAnswer(_) if had_deadline => Status::deadline_exceeded(message),
        UpstreamError::NoAnswer(_) => Status::unavailable(message),
        UpstreamError::TooLarge(_) => Status::resource_exhausted(message),
        UpstreamError::Encode(_) | UpstreamError::BadAnswer(_) => Status::internal(message),
    }
}

#[cfg(test)]
mod tests;
