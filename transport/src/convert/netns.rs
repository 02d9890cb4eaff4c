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
mod tests {
    use super::*;

    #[test]
    fn create_netns_request_checks_id_and_name_naming_the_field() {
        let mut req = pb::CreateNetnsRequest::new();
        req.sandbox_id = "pod-1".into();
        let ok = create_netns_request(&req).expect("valid");
        assert_eq!((ok.owner.as_str(), ok.name), ("pod-1", None));
        req.name = "pod-1-net".into();
        assert_eq!(
            create_netns_request(&req).expect("valid").name.as_deref(),
            Some("pod-1-net")
        );
        for (id, name, field) in [
            ("", "", "sandbox_id"),
            ("a/b", "", "sandbox_id"),
            ("pod", "../x", "name"),
            ("pod", ".hidden", "name"),
            ("pod", &"n".repeat(65), "name"),
        ] {
            req.sandbox_id = id.into();
            req.name = name.into();
            match create_netns_request(&req) {
                Err(Error::InvalidArgument { field: f, .. }) => {
                    assert_eq!(f, field, "{id:?} {name:?}")
                }
                other => panic!("{id:?} {name:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn create_netns_response_carries_path_inode_and_created() {
        let info = NetnsInfo {
            owner: "pod-1".into(),
            path: "/run/netns/knid-pod-1".into(),
            inode: 4026532001,
            created: true,
            sandbox_id: "pod-1".into(),
            pod: None,
        };
        let out = create_netns_response(&info);
        assert_eq!(out.netns_path, "/run/netns/knid-pod-1");
        assert_eq!((out.inode, out.created), (4026532001, true));
    }
}
