//! The core's [`ExtensionCaller`] over ttrpc: each call opens a [`OneshotClient`] connection to
//! the extension's socket, makes one `knid.v1.Extension` call on the calling thread and closes
//! it. No thread and no connection outlives a call, so an extension that restarts (or vanishes)
//! is simply found (or not) at the next call.

use std::time::Duration;

use knid_core::error::chain;
use knid_core::{ExtensionCall, ExtensionCaller, ExtensionSpec};

use super::oneshot::{self, OneshotClient, OneshotError};
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
        let resp: pb::HealthResponse = oneshot::answer(body).map_err(|e| describe(&e))?;
        verdict_of(resp.ok, resp.message)
    } else {
        let resp: pb::ExtensionCallResponse = oneshot::answer(body).map_err(|e| describe(&e))?;
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
mod tests;
