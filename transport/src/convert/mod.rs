//! Conversions between the protobuf API and the core's types. Requests are validated on the way
//! in ([`request`]), field by field, with errors naming the field path (`interfaces[1].mac`);
//! responses are plain encodings ([`response`]); extension registrations ([`extension`]),
//! namespaces ([`netns`]) and NetworkPolicy questions ([`policy`]) have their own.

pub mod extension;
pub mod netns;
pub mod policy;
pub mod request;
pub mod response;

pub use extension::{
    extension_spec, list_extensions_response, register_extension_request,
    unregister_extension_request,
};
pub use netns::{create_netns_request, create_netns_response, delete_netns_request};
pub use policy::{
    explain_policy_request, explain_policy_response, list_policies_request, list_policies_response,
    FlowQuestion,
};
pub use request::{
    attach_request, check_request, detach_request, garbage_collect_request, inspect_request,
    list_request, DEFAULT_IFNAME, DEFAULT_NETWORK, MAX_GC_VALID_ENTRIES,
};
pub use response::{garbage_collect_response, list_response, networks, sandbox, status, summary};
