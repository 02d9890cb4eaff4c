//! Wire bytes → validated core request: what the ttrpc server does for each call, as one
//! function the fuzz targets and their seed-corpus tests exercise.

use knid_core::{validate::Invalid, AttachRequest, Error};
use protobuf::Message;

use crate::{convert, pb};

/// Decodes an `AttachRequest` from protobuf bytes and validates it. Malformed bytes are an
/// `InvalidArgument` naming `request`.
pub fn attach_request(bytes: &[u8]) -> Result<AttachRequest, Error> {
    let req = pb::AttachRequest::parse_from_bytes(bytes).map_err(|e| {
        Invalid::new(format!("is not a valid protobuf AttachRequest: {e}")).at("request")
    })?;
    convert::attach_request(&req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use knid_core::ErrorKind;

    #[test]
    fn garbage_bytes_are_an_invalid_request() {
        let err = attach_request(&[0xff, 0xff, 0xff]).expect_err("garbage");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().starts_with("invalid request:"), "{err}");
    }

    #[test]
    fn a_good_request_round_trips_through_bytes() {
        let req = pb::AttachRequest {
            sandbox_id: "pod-1".into(),
            netns_path: "/run/netns/pod-1".into(),
            interfaces: vec![pb::InterfaceRequest::default()],
            ..Default::default()
        };
        let bytes = req.write_to_bytes().expect("encode");
        let got = attach_request(&bytes).expect("valid");
        assert_eq!(got.sandbox_id.as_str(), "pod-1");
        assert_eq!(got.interfaces[0].name.as_str(), "eth0");
    }
}
