//! Every KNI beta request (the first byte picks the method): decoding + validation never
//! panics, what it accepts holds knid's rules, and what it refuses is InvalidArgument naming a
//! KNI field (never a knid.v1 one).
#![no_main]

use knid_core::Error;
use knid_fuzz::{are_labels, check_attach, is_sandbox_id};
use knid_transport::fuzz::{kni_request, KniRequest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let req = match kni_request(data) {
        Ok(req) => req,
        Err(Error::InvalidArgument { field, rule }) => {
            assert!(!field.is_empty() && !rule.is_empty());
            assert!(
                !field.starts_with("interfaces") && !field.starts_with("pod.") && field != "sandbox_id",
                "a knid.v1 field leaked into a KNI error: {field}: {rule}"
            );
            return;
        }
        Err(e) => panic!("not an InvalidArgument: {e} ({:?})", e.kind()),
    };
    match req {
        KniRequest::CreateNetwork(netns) => {
            let owner = netns.owner.as_str();
            assert!(is_sandbox_id(owner) && owner.starts_with("kni-"), "{owner}");
            assert_eq!(netns.name.as_deref(), Some(owner));
            assert!(are_labels(&netns.labels) && are_labels(&netns.annotations));
        }
        KniRequest::DeleteNetwork(id, lookup) => {
            assert!(id.is_some() || lookup.path.is_some() || lookup.pod.is_some());
            assert_eq!(lookup.sandbox_id, id.map(|i| i.to_string()));
        }
        KniRequest::AttachInterface(attach) => {
            // KNI has no MAC field: there is no sent text to hold the parsed MACs against.
            check_attach(&attach.request, &[]);
            assert!(["isolation.path", "extradata[netns]"].contains(&attach.netns_field));
        }
        KniRequest::DetachInterface(_) | KniRequest::QueryPodNetwork(_) | KniRequest::Empty => {}
    }
});
