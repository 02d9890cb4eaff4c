//! Requests to knid built the way most tests send them: one interface on the default network,
//! everything else left to knid; a detach of every interface; an inspect.

use std::path::Path;

use knid_transport::pb;

/// A request attaching one interface `ifname` of sandbox `id` in `netns` to the default
/// network, everything else left to knid.
pub fn attach_req(id: &str, netns: &Path, ifname: &str) -> pb::AttachRequest {
    pb::AttachRequest {
        sandbox_id: id.to_owned(),
        netns_path: netns.display().to_string(),
        interfaces: vec![pb::InterfaceRequest {
            name: ifname.to_owned(),
            network: "default".to_owned(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A `Detach` of every interface of `id`.
pub fn detach_req(id: &str) -> pb::DetachRequest {
    pb::DetachRequest {
        sandbox_id: id.to_owned(),
        ..Default::default()
    }
}

/// An `Inspect` of `id`.
pub fn inspect_req(id: &str) -> pb::InspectRequest {
    pb::InspectRequest {
        sandbox_id: id.to_owned(),
        ..Default::default()
    }
}
