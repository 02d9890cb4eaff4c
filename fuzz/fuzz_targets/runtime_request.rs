//! Every `knid.v1.Runtime` request (the first byte picks the method): decoding + validation
//! never panics, what it accepts holds the API's rules, what it refuses is InvalidArgument, an
//! accepted extension registration survives its own encoding, and an accepted NetworkPolicy
//! question names its pods as namespace/name and a port knid can read.
#![no_main]

use knid_core::ErrorKind;
use knid_fuzz::{
    are_labels, check_attach, is_clean_absolute_path, is_flow_end, is_flow_port, is_ifname,
    is_name, is_pod_key,
};
use knid_transport::fuzz::{runtime_request, RuntimeRequest};
use knid_transport::{convert, pb};
use libfuzzer_sys::fuzz_target;
use protobuf::Message;

fuzz_target!(|data: &[u8]| {
    let req = match runtime_request(data) {
        Ok(req) => req,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            return;
        }
    };
    match req {
        RuntimeRequest::Attach(req) => {
            let sent = pb::AttachRequest::parse_from_bytes(&data[1..]).expect("accepted");
            let macs: Vec<&str> = sent.interfaces.iter().map(|i| i.mac.as_str()).collect();
            check_attach(&req, &macs);
        }
        RuntimeRequest::Detach(_, ifname) => {
            assert!(ifname.is_none_or(|n| is_ifname(n.as_str())));
        }
        RuntimeRequest::Check(_, ifname, mac) => {
            // An expected MAC is of one interface.
            assert!(mac.is_none() || ifname.is_some());
            assert!(ifname.is_none_or(|n| is_ifname(n.as_str())));
        }
        RuntimeRequest::List(filter) => {
            assert!(filter.network.is_none_or(|n| is_name(&n)));
            assert!(are_labels(&filter.labels));
        }
        RuntimeRequest::GarbageCollect(gc) => {
            if let Some(keep) = gc.keep {
                assert!(keep.sandboxes.len() <= 65_536 && keep.attachments.len() <= 65_536);
                assert!(keep.attachments.iter().all(|(_, n)| is_ifname(n.as_str())));
                assert!(keep.network.is_none_or(|n| is_name(&n)));
            }
        }
        RuntimeRequest::CreateNetns(netns) => {
            assert!(netns.name.is_none_or(|n| is_name(&n) && !n.starts_with('.')));
        }
        RuntimeRequest::RegisterExtension(spec) => {
            assert!(is_name(&spec.name));
            assert!(is_clean_absolute_path(&spec.socket_path.to_string_lossy(), 107));
            assert!(!spec.phases.is_empty());
            let ms = spec.timeout.as_millis();
            assert!((1..=60_000).contains(&ms), "{spec:?}");
            let mut again = pb::RegisterExtensionRequest::new();
            again.extension = Some(convert::extension_spec(&spec)).into();
            assert_eq!(convert::register_extension_request(&again).ok(), Some(spec));
        }
        RuntimeRequest::UnregisterExtension(name) => assert!(is_name(&name)),
        RuntimeRequest::ListPolicies(pod) => assert!(pod.is_none_or(|p| is_pod_key(&p))),
        RuntimeRequest::ExplainPolicy(flow) => {
            assert!(is_flow_end(&flow.from) && is_flow_end(&flow.to), "{flow:?}");
            assert!(is_flow_port(&flow.port), "{flow:?}");
        }
        RuntimeRequest::Inspect(_) | RuntimeRequest::DeleteNetns(_) | RuntimeRequest::Empty => {}
    }
});
