//! CreateNetns and DeleteNetns: validation of the requests, encoding of the answer.

use knid_core::model::{NetnsInfo, NetnsRequest};
use knid_core::{Error, SandboxId};

use super::request::sandbox_id;
use crate::pb;

/// Validates a CreateNetns request: the sandbox id, and the file name when one is given.
pub fn create_netns_request(req: &pb::CreateNetnsRequest) -> Result<NetnsRequest, Error> {
    let owner = sandbox_id(&req.sandbox_id)?;
    let name = if req.name.is_empty() {
        None
    } else {
        knid_core::validate::netns_name(&req.name).map_err(|e| e.at("name"))?;
        Some(req.name.clone())
    };
    Ok(NetnsRequest {
        owner,
        name,
        pod: None,
        labels: Default::default(),
        annotations: Default::default(),
    })
}

/// Validates a DeleteNetns request.
pub fn delete_netns_request(req: &pb::DeleteNetnsRequest) -> Result<SandboxId, Error> {
    sandbox_id(&req.sandbox_id)
}

/// Encodes the CreateNetns answer.
pub fn create_netns_response(info: &NetnsInfo) -> pb::CreateNetnsResponse {
    let mut out = pb::CreateNetnsResponse::new();
    out.netns_path = info.path.to_string_lossy().into_owned();
    out.inode = info.inode;
    out.created = info.created;
    out
}

#[cfg(test)]
mod tests;
